/*-------------------------------------------------------------------------
 *
 * schema.c
 *	  The top-level columns of an Iceberg schema (compact.h): id, name,
 *	  type, required.  Nested types are named, not descended into.
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

#define MAX_COLUMNS 100000

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

bool
iceberg_schema_parse(const char *json, IcebergSchema **out, TmsError *err)
{
	json_t	   *root;
	json_t	   *fields;
	json_t	   *sid;
	IcebergSchema *s;
	size_t		i,
				n;

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
	fields = json_object_get(root, "fields");
	if (!json_is_array(fields) || json_array_size(fields) > MAX_COLUMNS)
	{
		json_decref(root);
		tms_error_set(err, ICEBERG_ERR_MALFORMED, "invalid schema: no \"fields\" array");
		return false;
	}
	n = json_array_size(fields);
	s = io_calloc(1, sizeof(IcebergSchema));
	if (s == NULL || (s->columns = io_calloc(n + 1, sizeof(IcebergColumn))) == NULL)
	{
		io_free(s);
		json_decref(root);
		tms_error_set(err, ICEBERG_ERR_OUT_OF_MEMORY, "out of memory");
		return false;
	}
	sid = json_object_get(root, "schema-id");
	s->schema_id = json_is_integer(sid) ? (int32_t) json_integer_value(sid) : 0;
	for (i = 0; i < n; i++)
	{
		json_t	   *f = json_array_get(fields, i);
		json_t	   *id = json_object_get(f, "id");
		json_t	   *name = json_object_get(f, "name");
		json_t	   *type = json_object_get(f, "type");
		json_t	   *req = json_object_get(f, "required");
		IcebergColumn *c = &s->columns[s->ncolumns];

		if (!json_is_integer(id) || json_integer_value(id) <= 0 ||
			json_integer_value(id) > INT32_MAX || !json_is_string(name) ||
			!(json_is_string(type) || json_is_object(type)))
		{
			tms_error_set(err, ICEBERG_ERR_MALFORMED, "invalid schema: field %zu has no id, name or type", i);
			goto fail;
		}
		c->id = (int32_t) json_integer_value(id);
		c->required = json_is_true(req);
		c->name = iceberg_strdup(json_string_value(name), err);
		if (json_is_string(type))
		{
			c->type_text = iceberg_strdup(json_string_value(type), err);
			if (c->type_text != NULL)
				c->type = type_of(c->type_text, c);
		}
		else
		{
			const char *k = json_string_value(json_object_get(type, "type"));

			c->type_text = iceberg_strdup(k ? k : "nested", err);
			c->type = ICEBERG_TYPE_NESTED;
		}
		s->ncolumns++;
		if (c->name == NULL || c->type_text == NULL)
			goto fail;
	}
	json_decref(root);
	*out = s;
	return true;
fail:
	json_decref(root);
	iceberg_schema_free(s);
	return false;
}

void
iceberg_schema_free(IcebergSchema *s)
{
	int			i;

	if (s == NULL)
		return;
	for (i = 0; i < s->ncolumns; i++)
	{
		io_free(s->columns[i].name);
		io_free(s->columns[i].type_text);
	}
	io_free(s->columns);
	io_free(s);
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
