/*-------------------------------------------------------------------------
 *
 * schema.c
 *	  The fields of an Iceberg schema (compact.h) at every depth: id, name,
 *	  type, required, initial-default; a struct's fields, a list's element
 *	  and a map's key and value are the children of their field.
 *
 * Types as the table spec writes them
 * (https://iceberg.apache.org/spec/#schemas-and-data-types): a primitive
 * is a string ("long", "decimal(10, 2)", "fixed[16]"), a nested type an
 * object with "type" struct, list or map.
 *
 * src/iceberg/table/schema.c
 *
 *-------------------------------------------------------------------------
 */
#include "iceberg/compact/compact.h"
#include "iceberg/iceberg_internal.h"
#include "io/util/jsonmem.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_COLUMNS 100000		/* fields at every depth */
#define MAX_DEPTH 64

/* The type of a primitive type string. */
static IcebergTypeId
type_of(const char *t, IcebergColumn *c)
{
	static const struct
	{
		const char *name;
		IcebergTypeId id;
	}			simple[] = {
		{"boolean", ICEBERG_TYPE_BOOLEAN}, {"int", ICEBERG_TYPE_INT},
		{"long", ICEBERG_TYPE_LONG}, {"float", ICEBERG_TYPE_FLOAT},
		{"double", ICEBERG_TYPE_DOUBLE}, {"date", ICEBERG_TYPE_DATE},
		{"time", ICEBERG_TYPE_TIME}, {"timestamp", ICEBERG_TYPE_TIMESTAMP},
		{"timestamptz", ICEBERG_TYPE_TIMESTAMPTZ},
		{"timestamp_ns", ICEBERG_TYPE_TIMESTAMP_NS},
		{"timestamptz_ns", ICEBERG_TYPE_TIMESTAMPTZ_NS},
		{"string", ICEBERG_TYPE_STRING}, {"uuid", ICEBERG_TYPE_UUID},
		{"binary", ICEBERG_TYPE_BINARY},
	};
	size_t		i;
	int			p,
				s,
				n;
	char		end;

	for (i = 0; i < sizeof(simple) / sizeof(simple[0]); i++)
		if (strcmp(t, simple[i].name) == 0)
			return simple[i].id;
	if (sscanf(t, "decimal(%d ,%d%c%n", &p, &s, &end, &n) == 3 && end == ')' &&
		t[n] == '\0' && p >= 1 && p <= 38 && s >= 0 && s <= p)
	{
		c->precision = p;
		c->scale = s;
		return ICEBERG_TYPE_DECIMAL;
	}
	if (sscanf(t, "fixed[%d%c%n", &n, &end, &p) == 2 && end == ']' && t[p] == '\0' &&
		n >= 1 && n <= 1 << 20)
	{
		c->length = n;
		return ICEBERG_TYPE_FIXED;
	}
	return ICEBERG_TYPE_OTHER;
}

/* Parsing state: the fields counted (MAX_COLUMNS at most). */
typedef struct SchemaParse
{
	IcebergSchema *s;
	int			nfields;
	TmsError   *err;
} SchemaParse;

static bool parse_type(SchemaParse *sp, json_t *type, IcebergColumn *c, int depth);

/* One field: id, name, required, type, initial-default. */
static bool
parse_field(SchemaParse *sp, json_t *id, const char *name, bool required, json_t *type,
			json_t *dflt, IcebergColumn *c, int depth)
{
	if (!json_is_integer(id) || json_integer_value(id) <= 0 ||
		json_integer_value(id) > INT32_MAX || name == NULL ||
		!(json_is_string(type) || json_is_object(type)))
	{
		tms_error_set(sp->err, ICEBERG_ERR_MALFORMED,
					  "invalid schema: field %d has no id, name or type", sp->nfields);
		return false;
	}
	if (++sp->nfields > MAX_COLUMNS)
	{
		tms_error_set(sp->err, ICEBERG_ERR_MALFORMED,
					  "invalid schema: more than %d fields", MAX_COLUMNS);
		return false;
	}
	c->id = (int32_t) json_integer_value(id);
	c->required = required;
	if ((c->name = iceberg_strdup(name, sp->err)) == NULL)
		return false;
	if (dflt != NULL && !json_is_null(dflt))
	{
		/* jansson's text is freed by its allocator (io_json_free) */
		char	   *t = json_dumps(dflt, JSON_ENCODE_ANY | JSON_COMPACT);

		c->initial_default = t ? io_strdup(t) : NULL;
		io_json_free(t);
		if (c->initial_default == NULL)
		{
			tms_error_set(sp->err, ICEBERG_ERR_OUT_OF_MEMORY, "out of memory");
			return false;
		}
	}
	return parse_type(sp, type, c, depth);
}

/* A struct's fields into c->children. */
static bool
parse_struct(SchemaParse *sp, json_t *fields, IcebergColumn *c, int depth)
{
	size_t		i,
				n;

	if (!json_is_array(fields) || json_array_size(fields) > MAX_COLUMNS)
	{
		tms_error_set(sp->err, ICEBERG_ERR_MALFORMED,
					  "invalid schema: a struct has no \"fields\" array");
		return false;
	}
	n = json_array_size(fields);
	if ((c->children = io_calloc(n + 1, sizeof(IcebergColumn))) == NULL)
	{
		tms_error_set(sp->err, ICEBERG_ERR_OUT_OF_MEMORY, "out of memory");
		return false;
	}
	for (i = 0; i < n; i++)
	{
		json_t	   *f = json_array_get(fields, i);

		c->nchildren++;
		if (!parse_field(sp, json_object_get(f, "id"),
						 json_string_value(json_object_get(f, "name")),
						 json_is_true(json_object_get(f, "required")),
						 json_object_get(f, "type"), json_object_get(f, "initial-default"),
						 &c->children[i], depth + 1))
			return false;
	}
	return true;
}

/*
 * A type: a primitive's string, or a struct, list or map object (list:
 * element-id, element, element-required; map: key-id, key, value-id,
 * value, value-required).
 */
static bool
parse_type(SchemaParse *sp, json_t *type, IcebergColumn *c, int depth)
{
	const char *k;

	if (json_is_string(type))
	{
		if ((c->type_text = iceberg_strdup(json_string_value(type), sp->err)) == NULL)
			return false;
		c->type = type_of(c->type_text, c);
		if (c->type != ICEBERG_TYPE_OTHER)
			sp->s->nleaves++;
		return true;
	}
	if (depth >= MAX_DEPTH)
	{
		tms_error_set(sp->err, ICEBERG_ERR_MALFORMED,
					  "invalid schema: types nested more than %d deep", MAX_DEPTH);
		return false;
	}
	k = json_string_value(json_object_get(type, "type"));
	if ((c->type_text = iceberg_strdup(k ? k : "nested", sp->err)) == NULL)
		return false;
	if (k != NULL && strcmp(k, "struct") == 0)
	{
		c->type = ICEBERG_TYPE_STRUCT;
		return parse_struct(sp, json_object_get(type, "fields"), c, depth);
	}
	if (k != NULL && strcmp(k, "list") == 0)
	{
		c->type = ICEBERG_TYPE_LIST;
		if ((c->children = io_calloc(1, sizeof(IcebergColumn))) == NULL)
		{
			tms_error_set(sp->err, ICEBERG_ERR_OUT_OF_MEMORY, "out of memory");
			return false;
		}
		c->nchildren = 1;
		return parse_field(sp, json_object_get(type, "element-id"), "element",
						   json_is_true(json_object_get(type, "element-required")),
						   json_object_get(type, "element"), NULL, &c->children[0], depth + 1);
	}
	if (k != NULL && strcmp(k, "map") == 0)
	{
		c->type = ICEBERG_TYPE_MAP;
		if ((c->children = io_calloc(2, sizeof(IcebergColumn))) == NULL)
		{
			tms_error_set(sp->err, ICEBERG_ERR_OUT_OF_MEMORY, "out of memory");
			return false;
		}
		c->nchildren = 1;
		if (!parse_field(sp, json_object_get(type, "key-id"), "key", true,
						 json_object_get(type, "key"), NULL, &c->children[0], depth + 1))
			return false;
		c->nchildren = 2;
		return parse_field(sp, json_object_get(type, "value-id"), "value",
						   json_is_true(json_object_get(type, "value-required")),
						   json_object_get(type, "value"), NULL, &c->children[1], depth + 1);
	}
	c->type = ICEBERG_TYPE_OTHER;
	return true;
}

bool
iceberg_schema_parse(const char *json, IcebergSchema **out, TmsError *err)
{
	json_t	   *root;
	json_t	   *sid;
	IcebergSchema *s;
	IcebergColumn top;
	SchemaParse sp;

	tms_error_clear(err);
	*out = NULL;
	if (json == NULL)
	{
		tms_error_set(err, ICEBERG_ERR_INVALID_ARGUMENT, "no schema given");
		return false;
	}
	root = iceberg_json_load(json, strlen(json), 0, 0, "schema", err);
	if (root == NULL)
		return false;
	if (!json_is_array(json_object_get(root, "fields")))
	{
		json_decref(root);
		tms_error_set(err, ICEBERG_ERR_MALFORMED, "invalid schema: no \"fields\" array");
		return false;
	}
	s = io_calloc(1, sizeof(IcebergSchema));
	if (s == NULL)
	{

		json_decref(root);
		tms_error_set(err, ICEBERG_ERR_OUT_OF_MEMORY, "out of memory");
		return false;
	}
	sid = json_object_get(root, "schema-id");
	s->schema_id = json_is_integer(sid) ? (int32_t) json_integer_value(sid) : 0;
	memset(&top, 0, sizeof(top));
	sp.s = s;
	sp.nfields = 0;
	sp.err = err;
	if (!parse_struct(&sp, json_object_get(root, "fields"), &top, 0))
	{
		s->columns = top.children;
		s->ncolumns = top.nchildren;
		json_decref(root);
		iceberg_schema_free(s);
		return false;
	}
	s->columns = top.children;
	s->ncolumns = top.nchildren;
	json_decref(root);
	*out = s;
	return true;
}

static void
column_free(IcebergColumn *c)
{
	int			i;

	for (i = 0; i < c->nchildren; i++)
		column_free(&c->children[i]);
	io_free(c->children);
	io_free(c->name);
	io_free(c->type_text);
	io_free(c->initial_default);
}

void
iceberg_schema_free(IcebergSchema *s)
{
	int			i;

	if (s == NULL)
		return;
	for (i = 0; i < s->ncolumns; i++)
		column_free(&s->columns[i]);
	io_free(s->columns);
	io_free(s);
}

/* The field id in c's subtree, its parent in *parent. */
static const IcebergColumn *
field_in(const IcebergColumn *c, int n, int32_t id, const IcebergColumn *up,
		 const IcebergColumn **parent)
{
	int			i;

	for (i = 0; i < n; i++)
	{
		const IcebergColumn *f;

		if (c[i].id == id)
		{
			*parent = up;
			return &c[i];
		}
		if ((f = field_in(c[i].children, c[i].nchildren, id, &c[i], parent)) != NULL)
			return f;
	}
	return NULL;
}

const IcebergColumn *
iceberg_schema_field(const IcebergSchema *s, int32_t id, const IcebergColumn **parent)
{
	const IcebergColumn *dummy;

	if (s == NULL)
		return NULL;
	return field_in(s->columns, s->ncolumns, id, NULL, parent ? parent : &dummy);
}

/* The path to the field id in c's subtree: its depth below c, or -1. */
static int
path_in(const IcebergColumn *c, int n, int32_t id, const IcebergColumn **path, int cap,
		int depth)
{
	int			i;

	if (depth >= cap)
		return -1;
	for (i = 0; i < n; i++)
	{
		int			d;

		path[depth] = &c[i];
		if (c[i].id == id)
			return depth;
		if ((d = path_in(c[i].children, c[i].nchildren, id, path, cap, depth + 1)) >= 0)
			return d;
	}
	return -1;
}

int
iceberg_schema_field_path(const IcebergSchema *s, int32_t id, const IcebergColumn **path,
						  int cap)
{
	if (s == NULL)
		return 0;
	return path_in(s->columns, s->ncolumns, id, path, cap, 0) + 1;
}

const IcebergColumn *
iceberg_schema_column(const IcebergSchema *s, int32_t id)
{
	int			i;

	for (i = 0; s != NULL && i < s->ncolumns; i++)
		if (s->columns[i].id == id)
			return &s->columns[i];
	return NULL;
}
