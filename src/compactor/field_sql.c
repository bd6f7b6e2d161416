/*-------------------------------------------------------------------------
 *
 * field_sql.c
 *	  The compaction helper's SQL for an Iceberg schema at every depth:
 *	  DuckDB's types of its fields, the projection that reads a data file
 *	  by Iceberg field id into the current schema, the FIELD_IDS of the
 *	  Parquet written, and the file schema (parquet_schema) as a tree.
 *
 * Reading by field id (https://iceberg.apache.org/spec/#column-projection):
 * a data file written under an older schema is read through its own
 * Parquet schema (parquet_schema(): names, field ids, the tree), each
 * field of the current schema found among its parent's children by id,
 * whatever its name or position there:
 *	 - a primitive is CAST to the current type (int to long, float to
 *	   double, a wider decimal: the promotions Iceberg allows);
 *	 - a struct is rebuilt field by field (struct_pack), null when the
 *	   file's struct is null;
 *	 - a list's elements and a map's keys and values are rebuilt by a
 *	   lambda (list_transform, map_entries / map_from_entries);
 *	 - a field the file lacks is its initial-default (a primitive's; the
 *	   spec's JSON single-value serialization read as a literal) or null;
 *	   a field of the file the schema lacks (dropped) is not read.
 * A file whose fields lack field ids (imported or migrated files) is read
 * as Iceberg reads it: through the table's name mapping
 * (schema.name-mapping.default, https://iceberg.apache.org/spec/#name-mapping-serialization):
 * a field without an id gets the id of the mapped field, among its
 * parent's, that lists its name ("element" for a list's element, "key"
 * and "value" for a map's), and a field the mapping does not name is not
 * read; without a mapping such a file fails the group.
 * Parquet's list and map layouts are read as DuckDB reads them: a LIST
 * group's repeated child is the element when it is a primitive or a
 * group of several fields, else its only child is; a MAP group's
 * repeated child holds the key and the value.
 *
 * Equality deletes: schema_map_sql maps top-level columns of delete files
 * by field id for read_parquet; a field inside structs is read from each
 * delete file through its Parquet schema by id at every level
 * (eq_file_select), and field_row_sql is its value in a row read by
 * read_projection.
 *
 * A v3 table's rows keep their row lineage: lineage_projection reads the
 * reserved columns _row_id and _last_updated_sequence_number by field id.
 *
 * Names written are those Iceberg's writers give (avro_name), at every
 * depth; every field carries its id (FIELD_IDS with __duckdb_field_id for
 * a nested field's own id, "element", "key" and "value" for a list's and
 * a map's).
 *
 * src/compactor/field_sql.c
 *
 *-------------------------------------------------------------------------
 */
#include "compactor/compactor_int.h"
#include "io/util/jsonmem.h"

#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_FILE_DEPTH	64

void
sql_add(Sql *q, const char *fmt,...)
{
	va_list		ap;

	va_start(ap, fmt);
	io_sb_vprintf(q, fmt, ap);
	va_end(ap);
}

void
sql_lit(Sql *q, const char *s)
{
	sql_add(q, "'");
	for (; *s; s++)
		sql_add(q, *s == '\'' ? "''" : "%c", *s);
	sql_add(q, "'");
}

void
sql_ident(Sql *q, const char *s)
{
	sql_add(q, "\"");
	for (; *s; s++)
		sql_add(q, *s == '"' ? "\"\"" : "%c", *s);
	sql_add(q, "\"");
}

void
sql_reset(Sql *q)
{
	q->len = 0;
	if (q->data)
		q->data[0] = '\0';
}

void
avro_name(Sql *q, const char *name)
{
	const unsigned char *s = (const unsigned char *) name;
	size_t		i;

	if (s[0] == '\0')
		sql_add(q, "_");
	for (i = 0; s[i]; i++)
	{
		unsigned	c = s[i];
		bool		letter = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
		bool		digit = c >= '0' && c <= '9';

		if (letter || (digit && i > 0))
			sql_add(q, "%c", (char) c);
		else if (digit)
			sql_add(q, "_%c", (char) c);
		else
		{
			/* one code point of UTF-8 */
			unsigned	cp = c;
			int			more = c >= 0xf0 ? 3 : c >= 0xe0 ? 2 : c >= 0xc0 ? 1 : 0;

			cp = more == 3 ? c & 0x07 : more == 2 ? c & 0x0f : more == 1 ? c & 0x1f : c;
			while (more-- > 0 && s[i + 1] >= 0x80 && s[i + 1] < 0xc0)
				cp = (cp << 6) | (s[++i] & 0x3f);
			sql_add(q, "_x%X", cp);
		}
	}
}

/* The quoted Avro-compatible name of a field. */
static void
field_name(Sql *q, const IcebergColumn *c)
{
	Sql			nm = {0};

	avro_name(&nm, c->name);
	if (nm.oom)
		q->oom = true;
	else
		sql_ident(q, nm.data);
	io_sb_free(&nm);
}

const char *
duck_primitive(const IcebergColumn *c, char *buf, size_t len)
{
	switch (c->type)
	{
		case ICEBERG_TYPE_BOOLEAN:
			return "BOOLEAN";
		case ICEBERG_TYPE_INT:
			return "INTEGER";
		case ICEBERG_TYPE_LONG:
			return "BIGINT";
		case ICEBERG_TYPE_FLOAT:
			return "FLOAT";
		case ICEBERG_TYPE_DOUBLE:
			return "DOUBLE";
		case ICEBERG_TYPE_DECIMAL:
			snprintf(buf, len, "DECIMAL(%d, %d)", c->precision, c->scale);
			return buf;
		case ICEBERG_TYPE_DATE:
			return "DATE";
		case ICEBERG_TYPE_TIME:
			return "TIME";
		case ICEBERG_TYPE_TIMESTAMP:
			return "TIMESTAMP";
		case ICEBERG_TYPE_TIMESTAMPTZ:
			return "TIMESTAMPTZ";
		case ICEBERG_TYPE_TIMESTAMP_NS:
			return "TIMESTAMP_NS";
		case ICEBERG_TYPE_STRING:
			return "VARCHAR";
		case ICEBERG_TYPE_UUID:
			return "UUID";
		case ICEBERG_TYPE_FIXED:
		case ICEBERG_TYPE_BINARY:
			return "BLOB";
		default:
			return NULL;
	}
}

bool
duck_type_sql(Sql *q, const IcebergColumn *c)
{
	char		tb[64];
	const char *t;
	int			i;

	switch (c->type)
	{
		case ICEBERG_TYPE_STRUCT:
			if (c->nchildren == 0)
				return false;
			sql_add(q, "STRUCT(");
			for (i = 0; i < c->nchildren; i++)
			{
				sql_add(q, "%s", i ? ", " : "");
				field_name(q, &c->children[i]);
				sql_add(q, " ");
				if (!duck_type_sql(q, &c->children[i]))
					return false;
			}
			sql_add(q, ")");
			return true;
		case ICEBERG_TYPE_LIST:
			if (!duck_type_sql(q, &c->children[0]))
				return false;
			sql_add(q, "[]");
			return true;
		case ICEBERG_TYPE_MAP:
			sql_add(q, "MAP(");
			if (!duck_type_sql(q, &c->children[0]))
				return false;
			sql_add(q, ", ");
			if (!duck_type_sql(q, &c->children[1]))
				return false;
			sql_add(q, ")");
			return true;
		default:
			if ((t = duck_primitive(c, tb, sizeof(tb))) == NULL)
				return false;
			sql_add(q, "%s", t);
			return true;
	}
}

/* The FIELD_IDS value of field f: its id, or its id and its children's. */
static void
ids_value(Sql *q, const IcebergColumn *f)
{
	int			i;

	if (!ICEBERG_TYPE_IS_NESTED(f->type))
	{
		sql_add(q, "%d", (int) f->id);
		return;
	}
	sql_add(q, "{__duckdb_field_id: %d", (int) f->id);
	for (i = 0; i < f->nchildren; i++)
	{
		if (f->type == ICEBERG_TYPE_STRUCT)
		{
			sql_add(q, ", ");
			field_name(q, &f->children[i]);
			sql_add(q, ": ");
		}
		else
			sql_add(q, ", %s: ", f->type == ICEBERG_TYPE_LIST ? "element" : i ? "value" : "key");
		ids_value(q, &f->children[i]);
	}
	sql_add(q, "}");
}

void
field_ids_sql(Sql *q, const IcebergSchema *s)
{
	int			i;

	sql_add(q, "{");
	for (i = 0; i < s->ncolumns; i++)
	{
		sql_add(q, "%s", i ? ", " : "");
		field_name(q, &s->columns[i]);
		sql_add(q, ": ");
		ids_value(q, &s->columns[i]);
	}
	sql_add(q, "}");
}

/* ---------------------------------------------------------------------
 * A Parquet file's schema as a tree (parquet_schema())
 * ---------------------------------------------------------------------
 */

/* Build node n from rows *row.. (depth first, as parquet_schema lists them). */
static bool
file_node(duckdb_result *r, idx_t *row, idx_t nrows, FileNode *n, int *leaves, int depth,
		  Sql *sig)
{
	char	   *conv,
			   *logical;
	int64_t		nch;
	int			i;

	if (*row >= nrows || depth > MAX_FILE_DEPTH)
		return false;
	n->name = duckdb_value_varchar(r, 0, *row);
	n->field_id = duckdb_value_is_null(r, 1, *row) ? -1 : (int32_t) duckdb_value_int64(r, 1, *row);
	nch = duckdb_value_is_null(r, 2, *row) ? 0 : duckdb_value_int64(r, 2, *row);
	{
		char	   *rep = duckdb_value_varchar(r, 3, *row);

		n->repeated = rep != NULL && strcmp(rep, "REPEATED") == 0;
		duckdb_free(rep);
	}
	conv = duckdb_value_is_null(r, 4, *row) ? NULL : duckdb_value_varchar(r, 4, *row);
	logical = duckdb_value_is_null(r, 5, *row) ? NULL : duckdb_value_varchar(r, 5, *row);
	{
		char	   *ty = duckdb_value_is_null(r, 6, *row) ? NULL : duckdb_value_varchar(r, 6, *row);

		sql_add(sig, "%s|%d|%s|%s|%s|%d|%d;", n->name ? n->name : "", (int) n->field_id,
				ty ? ty : "", conv ? conv : "", logical ? logical : "", n->repeated,
				(int) nch);
		duckdb_free(ty);
	}
	if (nch == 0)
		n->kind = 'P', n->leaf = (*leaves)++;
	else if ((conv && strcmp(conv, "LIST") == 0) || (logical && strncmp(logical, "ListType", 8) == 0))
		n->kind = 'L';
	else if ((conv && (strcmp(conv, "MAP") == 0 || strcmp(conv, "MAP_KEY_VALUE") == 0)) ||
			 (logical && strncmp(logical, "MapType", 7) == 0))
		n->kind = 'M';
	else
		n->kind = 'S';
	duckdb_free(conv);
	duckdb_free(logical);
	(*row)++;
	if (n->name == NULL || nch < 0 || nch > 100000 ||
		(nch > 0 && (n->children = calloc((size_t) nch, sizeof(FileNode))) == NULL))
		return false;
	for (i = 0; i < (int) nch; i++)
	{
		n->nchildren++;
		if (!file_node(r, row, nrows, &n->children[i], leaves, depth + 1, sig))
			return false;
	}
	return true;
}

bool
file_schema_read(Helper *h, const char *local, FileNode *root, char **sig, TmsError *err)
{
	Sql			q = {0};
	Sql			s = {0};
	duckdb_result r;
	idx_t		row = 0;
	int			leaves = 0;
	bool		ok;

	memset(root, 0, sizeof(*root));
	*sig = NULL;
	sql_add(&q, "SELECT name, field_id, num_children, repetition_type, converted_type,"
			" logical_type, type FROM parquet_schema(");
	sql_lit(&q, local);
	sql_add(&q, ")");
	if (q.oom || !helper_run_light(h, q.data, &r, err))
	{
		if (q.oom)
			tms_error_set(err, ICEBERG_ERR_OUT_OF_MEMORY, "out of memory");
		io_sb_free(&q);
		return false;
	}
	io_sb_free(&q);
	ok = file_node(&r, &row, duckdb_row_count(&r), root, &leaves, 0, &s) &&
		row == duckdb_row_count(&r) && !s.oom;
	duckdb_destroy_result(&r);
	if (!ok)
	{
		tms_error_set(err, ICEBERG_ERR_MALFORMED,
					  "cannot read the Parquet schema of \"%s\"", local);
		io_sb_free(&s);
		file_schema_free(root);
		return false;
	}
	root->nleaves = leaves;
	*sig = s.data;
	return true;
}

void
file_schema_free(FileNode *n)
{
	int			i;

	for (i = 0; i < n->nchildren; i++)
		file_schema_free(&n->children[i]);
	free(n->children);
	duckdb_free(n->name);
	memset(n, 0, sizeof(*n));
}

/* The child of struct node n with field id id, or NULL. */
static const FileNode *
file_child(const FileNode *n, int32_t id)
{
	int			i;

	for (i = 0; i < n->nchildren; i++)
		if (n->children[i].field_id == id)
			return &n->children[i];
	return NULL;
}

/* The element of list node n as DuckDB reads it, or NULL. */
static const FileNode *
file_element(const FileNode *n)
{
	const FileNode *r;

	if (n->nchildren != 1 || !n->children[0].repeated)
		return NULL;
	r = &n->children[0];
	if (r->kind == 'P' || r->nchildren != 1 || strcmp(r->name, "array") == 0)
		return r;
	{
		size_t		ln = strlen(n->name);

		if (strncmp(r->name, n->name, ln) == 0 && strcmp(r->name + ln, "_tuple") == 0)
			return r;
	}
	return &r->children[0];
}

/* The key (k 0) or value (k 1) of map node n, or NULL. */
static const FileNode *
file_map_part(const FileNode *n, int k)
{
	if (n->nchildren != 1 || n->children[0].nchildren != 2)
		return NULL;
	return &n->children[0].children[k];
}

/* ---------------------------------------------------------------------
 * The name mapping
 * ---------------------------------------------------------------------
 */

/* The mapped field of array fields that lists name, or NULL. */
static json_t *
mapped_field(json_t *fields, const char *name)
{
	size_t		i,
				k;

	for (i = 0; json_is_array(fields) && i < json_array_size(fields); i++)
	{
		json_t	   *names = json_object_get(json_array_get(fields, i), "names");

		for (k = 0; json_is_array(names) && k < json_array_size(names); k++)
			if (json_is_string(json_array_get(names, k)) &&
				strcmp(json_string_value(json_array_get(names, k)), name) == 0)
				return json_array_get(fields, i);
	}
	return NULL;
}

static void map_children(FileNode *n, json_t *mf, int depth);

/* Node n, named name in its parent's mapped fields: its id, its children's. */
static void
map_node(FileNode *n, json_t *fields, const char *name, int depth)
{
	json_t	   *mf;
	json_t	   *id;

	if (n == NULL || depth > MAX_FILE_DEPTH)
		return;
	mf = mapped_field(fields, name);
	id = json_object_get(mf, "field-id");
	if (n->field_id < 0)
		n->field_id = json_is_integer(id) && json_integer_value(id) > 0 &&
			json_integer_value(id) <= INT32_MAX ? (int32_t) json_integer_value(id) : FIELD_UNMAPPED;
	if (mf != NULL)
		map_children(n, json_object_get(mf, "fields"), depth + 1);
}

/* The children of n, their mapped fields in fields. */
static void
map_children(FileNode *n, json_t *fields, int depth)
{
	int			i;

	if (n->kind == 'S')
		for (i = 0; i < n->nchildren; i++)
			map_node(&n->children[i], fields, n->children[i].name, depth);
	else if (n->kind == 'L')
		map_node((FileNode *) file_element(n), fields, "element", depth);
	else if (n->kind == 'M')
	{
		map_node((FileNode *) file_map_part(n, 0), fields, "key", depth);
		map_node((FileNode *) file_map_part(n, 1), fields, "value", depth);
	}
}

bool
file_schema_map_names(FileNode *root, const char *mapping, TmsError *err)
{
	json_t	   *m;
	int			i;

	if (mapping == NULL)
		return true;
	m = json_loads(mapping, 0, NULL);
	if (!json_is_array(m))
	{
		json_decref(m);
		tms_error_set(err, ICEBERG_ERR_MALFORMED, "the table's name mapping is not a JSON array");
		return false;
	}
	for (i = 0; i < root->nchildren; i++)
		map_node(&root->children[i], m, root->children[i].name, 1);
	json_decref(m);
	return true;
}

/* ---------------------------------------------------------------------
 * Reading a data file by field id
 * ---------------------------------------------------------------------
 */

/* The value of field c the file lacks: its initial-default, or null. */
static bool
default_sql(Sql *q, const IcebergColumn *c)
{
	json_t	   *v = NULL;

	if (c->initial_default != NULL && !ICEBERG_TYPE_IS_NESTED(c->type))
		v = json_loads(c->initial_default, JSON_DECODE_ANY, NULL);
	if (v != NULL && json_is_string(v) &&
		(c->type == ICEBERG_TYPE_BINARY || c->type == ICEBERG_TYPE_FIXED))
	{
		sql_add(q, "unhex(");
		sql_lit(q, json_string_value(v));
		sql_add(q, ")");
		json_decref(v);
		return true;
	}
	sql_add(q, "CAST(");
	if (v != NULL && json_is_string(v))
		sql_lit(q, json_string_value(v));
	else if (v != NULL && (json_is_number(v) || json_is_boolean(v)))
	{
		char	   *t = json_dumps(v, JSON_ENCODE_ANY);

		sql_add(q, "%s", t ? t : "NULL");
		io_json_free(t);
	}
	else
		sql_add(q, "NULL");
	json_decref(v);
	sql_add(q, " AS ");
	if (!duck_type_sql(q, c))
		return false;
	sql_add(q, ")");
	return true;
}

static bool
read_expr(Sql *q, const IcebergColumn *c, const FileNode *n, const char *src, int depth,
		  TmsError *err)
{
	char		tb[64];
	char		kind = c->type == ICEBERG_TYPE_STRUCT ? 'S' : c->type == ICEBERG_TYPE_LIST ? 'L' :
	c->type == ICEBERG_TYPE_MAP ? 'M' : 'P';
	int			i;

	if (n == NULL)
		return default_sql(q, c);
	if (n->kind != kind || (kind == 'P' && n->repeated) || depth > MAX_FILE_DEPTH)
	{
		tms_error_set(err, ICEBERG_ERR_MALFORMED,
					  "the data file's field %d (\"%.200s\") is not of the schema's type %s",
					  (int) c->id, n->name, c->type_text);
		return false;
	}
	if (kind == 'P')
	{
		sql_add(q, "CAST(%s AS %s)", src, duck_primitive(c, tb, sizeof(tb)));
		return true;
	}
	if (kind == 'S')
	{
		sql_add(q, "CASE WHEN %s IS NULL THEN NULL ELSE struct_pack(", src);
		for (i = 0; i < c->nchildren; i++)
		{
			const FileNode *fc = file_child(n, c->children[i].id);
			Sql			sub = {0};

			sql_add(q, "%s", i ? ", " : "");
			field_name(q, &c->children[i]);
			sql_add(q, " := ");
			if (fc != NULL)
			{
				sql_add(&sub, "struct_extract(%s, ", src);
				sql_lit(&sub, fc->name);
				sql_add(&sub, ")");
			}
			if (sub.oom || !read_expr(q, &c->children[i], fc, sub.data, depth + 1, err))
			{
				io_sb_free(&sub);
				return false;
			}
			io_sb_free(&sub);
		}
		sql_add(q, ") END");
		return true;
	}
	if (kind == 'L')
	{
		const FileNode *e = file_element(n);
		char		var[32];

		if (e == NULL)
		{
			tms_error_set(err, ICEBERG_ERR_UNSUPPORTED,
						  "the data file's list field %d has a layout not read here", (int) c->id);
			return false;
		}
		snprintf(var, sizeof(var), "__tms_e%d", depth);
		sql_add(q, "list_transform(%s, lambda %s: ", src, var);
		if (!read_expr(q, &c->children[0], e, var, depth + 1, err))
			return false;
		sql_add(q, ")");
		return true;
	}
	/* a map */
	{
		const FileNode *k = file_map_part(n, 0);
		const FileNode *v = file_map_part(n, 1);
		char		var[32],
					kx[64],
					vx[64];

		if (k == NULL || v == NULL)
		{
			tms_error_set(err, ICEBERG_ERR_UNSUPPORTED,
						  "the data file's map field %d has a layout not read here", (int) c->id);
			return false;
		}
		snprintf(var, sizeof(var), "__tms_kv%d", depth);
		snprintf(kx, sizeof(kx), "struct_extract(%s, 'key')", var);
		snprintf(vx, sizeof(vx), "struct_extract(%s, 'value')", var);
		sql_add(q, "map_from_entries(list_transform(map_entries(%s), lambda %s: struct_pack(key := ",
				src, var);
		if (!read_expr(q, &c->children[0], k, kx, depth + 1, err))
			return false;
		sql_add(q, ", value := ");
		if (!read_expr(q, &c->children[1], v, vx, depth + 1, err))
			return false;
		sql_add(q, ")))");
		return true;
	}
}

/* The read_parquet schema map of the columns ids[0..n) (NULL: all). */
bool
schema_map_sql(Sql *q, const IcebergSchema *s, const int32_t *ids, int n)
{
	char		tb[64];
	int			i;
	int			count = ids ? n : s->ncolumns;

	sql_add(q, "MAP {");
	for (i = 0; i < count; i++)
	{
		const IcebergColumn *c = ids ? iceberg_schema_column(s, ids[i]) : &s->columns[i];
		const char *t;

		if (c == NULL || (t = duck_primitive(c, tb, sizeof(tb))) == NULL)
			return false;
		sql_add(q, "%s%d: {name: 'c%d', type: '%s', default_value: NULL}", i ? ", " : "",
				(int) c->id, (int) c->id, t);
	}
	sql_add(q, "}");
	return true;
}

bool
read_projection(Sql *q, const IcebergSchema *s, const FileNode *root, TmsError *err)
{
	int			i;

	tms_error_clear(err);		/* a failure below without one is memory */
	/* without ids, Iceberg reads a file through the table's name mapping */
	for (i = 0; i < root->nchildren; i++)
		if (root->children[i].field_id == -1)
		{
			tms_error_set(err, ICEBERG_ERR_UNSUPPORTED,
						  "the data file's column \"%.200s\" has no Iceberg field id and the table no name mapping",
						  root->children[i].name);
			tms_error_hint(err, "Set the table's schema.name-mapping.default, as Iceberg's migrate and add_files procedures do.");
			return false;
		}
	for (i = 0; i < s->ncolumns; i++)
	{
		const IcebergColumn *c = &s->columns[i];
		const FileNode *n = file_child(root, c->id);
		Sql			src = {0};

		if (n != NULL)
			sql_ident(&src, n->name);
		sql_add(q, "%s", i ? ", " : "");
		if (src.oom || !read_expr(q, c, n, src.data, 0, err))
		{
			io_sb_free(&src);
			if (err->code == 0)
				tms_error_set(err, ICEBERG_ERR_OUT_OF_MEMORY, "out of memory");
			return false;
		}
		io_sb_free(&src);
		sql_add(q, " AS c%d", (int) c->id);
	}
	return true;
}

/*
 * Equality deletes by a field at any depth of structs
 * (https://iceberg.apache.org/spec/#equality-delete-files): the path of
 * field id in the schema, its struct ancestors only; 0 when the schema
 * has no such primitive field there.
 */
static int
struct_path(const IcebergSchema *s, int32_t id, const IcebergColumn **path)
{
	int			n = iceberg_schema_field_path(s, id, path, MAX_FILE_DEPTH);

	if (n == 0 || ICEBERG_TYPE_IS_NESTED(path[n - 1]->type))
		return 0;
	for (int i = 0; i + 1 < n; i++)
		if (path[i]->type != ICEBERG_TYPE_STRUCT)
			return 0;
	return n;
}

static bool
field_file_sql(Sql *q, const IcebergSchema *s, const FileNode *root, int32_t id, TmsError *err)
{
	const IcebergColumn *path[MAX_FILE_DEPTH];
	const FileNode *fpath[MAX_FILE_DEPTH] = {0};
	int			n = struct_path(s, id, path);
	const FileNode *f = root;
	Sql			src = {0};
	bool		ok;
	int			i;

	for (i = 0; i < n && f != NULL; i++)
		if ((i > 0 && f->kind != 'S') || (f = fpath[i] = file_child(f, path[i]->id)) == NULL)
			f = NULL;
	if (n == 0 || f == NULL)
	{
		tms_error_set(err, ICEBERG_ERR_MALFORMED,
					  "an equality delete file has no field %d of the schema's, inside structs only",
					  (int) id);
		return false;
	}
	for (i = 1; i < n; i++)
		sql_add(&src, "struct_extract(");
	sql_ident(&src, fpath[0]->name);
	for (i = 1; i < n; i++)
	{
		sql_add(&src, ", ");
		sql_lit(&src, fpath[i]->name);
		sql_add(&src, ")");
	}
	tms_error_clear(err);
	ok = !src.oom && read_expr(q, path[n - 1], f, src.data, n, err);
	io_sb_free(&src);
	if (!ok && err->code == 0)
		tms_error_set(err, ICEBERG_ERR_OUT_OF_MEMORY, "out of memory");
	return ok;
}

bool
eq_file_select(Sql *q, Helper *h, const IcebergSchema *s, const char *local, const int32_t *ids,
			   int n, TmsError *err)
{
	FileNode	root;
	char	   *sig;
	bool		ok = true;

	if (!file_schema_read(h, local, &root, &sig, err))
		return false;
	io_free(sig);
	sql_add(q, "SELECT ");
	for (int k = 0; ok && k < n; k++)
	{
		ok = field_file_sql(q, s, &root, ids[k], err);
		sql_add(q, " AS c%d, ", (int) ids[k]);
	}
	file_schema_free(&root);
	if (!ok)
		return false;
	sql_lit(q, local);
	sql_add(q, " AS filename FROM read_parquet(");
	sql_lit(q, local);
	sql_add(q, ")");
	return true;
}

bool
field_row_sql(Sql *q, const IcebergSchema *s, const char *alias, int32_t id)
{
	const IcebergColumn *path[MAX_FILE_DEPTH];
	int			n = struct_path(s, id, path);

	if (n == 0)
		return false;
	for (int i = 1; i < n; i++)
		sql_add(q, "struct_extract(");
	sql_add(q, "%s.c%d", alias, (int) path[0]->id);
	for (int i = 1; i < n; i++)
	{
		Sql			nm = {0};

		avro_name(&nm, path[i]->name);
		sql_add(q, ", ");
		if (nm.oom)
			q->oom = true;
		else
			sql_lit(q, nm.data);
		io_sb_free(&nm);
		sql_add(q, ")");
	}
	return true;
}

/*
 * Row lineage (https://iceberg.apache.org/spec/#row-lineage): the values a
 * file stores of the reserved columns _row_id (field id 2147483540) and
 * _last_updated_sequence_number (2147483539), found by id, else null, as
 * ", ... AS __rid, ... AS __lus".
 */
void
lineage_projection(Sql *q, const FileNode *root)
{
	static const int32_t ids[2] = {2147483540, 2147483539};
	static const char *const as[2] = {"__rid", "__lus"};

	for (int i = 0; i < 2; i++)
	{
		const FileNode *n = file_child(root, ids[i]);

		if (n != NULL && n->kind == 'P' && !n->repeated)
		{
			sql_add(q, ", CAST(");
			sql_ident(q, n->name);
			sql_add(q, " AS BIGINT) AS %s", as[i]);
		}
		else
			sql_add(q, ", NULL::BIGINT AS %s", as[i]);
	}
}

/* ---------------------------------------------------------------------
 * The primitive leaves of the schema, for the metrics of a written file
 * ---------------------------------------------------------------------
 */

static bool
leaves_walk(const IcebergColumn *c, int n, const char *const *exprs, bool repeated, int depth,
			Leaf *out, int *nout, int cap)
{
	int			i;

	for (i = 0; i < n; i++)
	{
		const IcebergColumn *f = &c[i];
		const char *x = exprs[i];
		Sql			sub[2] = {{0}, {0}};
		const char *subs[2];
		bool		ok = true;
		int			k;

		if (!ICEBERG_TYPE_IS_NESTED(f->type))
		{
			if (*nout >= cap || (out[*nout].expr = strdup(x)) == NULL)
				return false;
			out[*nout].c = f;
			out[*nout].repeated = repeated;
			(*nout)++;
			continue;
		}
		if (f->type == ICEBERG_TYPE_STRUCT)
		{
			for (k = 0; k < f->nchildren && ok; k++)
			{
				Sql			nm = {0};
				Sql			e = {0};

				avro_name(&nm, f->children[k].name);
				if (repeated)
					sql_add(&e, "list_transform(%s, lambda __tms_x%d: struct_extract(__tms_x%d, ",
							x, depth, depth);
				else
					sql_add(&e, "struct_extract(%s, ", x);
				sql_lit(&e, nm.data ? nm.data : "_");
				sql_add(&e, repeated ? "))" : ")");
				subs[0] = e.data;
				ok = !nm.oom && !e.oom &&
					leaves_walk(&f->children[k], 1, subs, repeated, depth + 1, out, nout, cap);
				io_sb_free(&nm);
				io_sb_free(&e);
			}
			if (!ok)
				return false;
			continue;
		}
		/* a list's element, a map's key and value: every value, as one list */
		for (k = 0; k < f->nchildren; k++)
		{
			const char *part = f->type == ICEBERG_TYPE_LIST ? NULL : k ? "map_values" : "map_keys";

			if (part == NULL)
				sql_add(&sub[k], repeated ? "flatten(%s)" : "%s", x);
			else if (repeated)
				sql_add(&sub[k], "flatten(list_transform(%s, lambda __tms_x%d: %s(__tms_x%d)))",
						x, depth, part, depth);
			else
				sql_add(&sub[k], "%s(%s)", part, x);
			subs[k] = sub[k].data;
			ok = ok && !sub[k].oom;
		}
		ok = ok && leaves_walk(f->children, f->nchildren, subs, true, depth + 1, out, nout, cap);
		io_sb_free(&sub[0]);
		io_sb_free(&sub[1]);
		if (!ok)
			return false;
	}
	return true;
}

bool
schema_leaves(const IcebergSchema *s, Leaf **out, int *n)
{
	Leaf	   *l = calloc((size_t) s->nleaves + 1, sizeof(Leaf));
	int			i;
	bool		ok = l != NULL;

	*out = l;
	*n = 0;
	for (i = 0; ok && i < s->ncolumns; i++)
	{
		Sql			e = {0};
		Sql			nm = {0};
		const char *x;

		avro_name(&nm, s->columns[i].name);
		sql_add(&e, "t.");
		sql_ident(&e, nm.data ? nm.data : "_");
		x = e.data;
		ok = !nm.oom && !e.oom && leaves_walk(&s->columns[i], 1, &x, false, 0, l, n, s->nleaves);
		io_sb_free(&e);
		io_sb_free(&nm);
	}
	return ok;
}

void
leaves_free(Leaf *l, int n)
{
	int			i;

	for (i = 0; l != NULL && i < n; i++)
		free(l[i].expr);
	free(l);
}

/* Walk a file's tree: leaf index -> field id, and whether every id of s is there. */
static void
file_ids(const FileNode *n, int32_t *leaf_ids, int nleaf_ids, int32_t *seen, int *nseen, int cap)
{
	int			i;

	if (n->field_id >= 0 && *nseen < cap)
		seen[(*nseen)++] = n->field_id;
	if (n->kind == 'P' && n->leaf >= 0 && n->leaf < nleaf_ids)
		leaf_ids[n->leaf] = n->field_id;
	for (i = 0; i < n->nchildren; i++)
		file_ids(&n->children[i], leaf_ids, nleaf_ids, seen, nseen, cap);
}

/* Is every field id of c[0..n) among seen? The first missing in *missing. */
static bool
ids_present(const IcebergColumn *c, int n, const int32_t *seen, int nseen, int32_t *missing)
{
	int			i,
				k;

	for (i = 0; i < n; i++)
	{
		for (k = 0; k < nseen && seen[k] != c[i].id; k++)
			;
		if (k == nseen)
		{
			*missing = c[i].id;
			return false;
		}
		if (!ids_present(c[i].children, c[i].nchildren, seen, nseen, missing))
			return false;
	}
	return true;
}

bool
file_leaf_ids(const IcebergSchema *s, const FileNode *root, int32_t *leaf_ids, int nleaf_ids,
			  TmsError *err)
{
	int32_t    *seen = calloc(100001, sizeof(int32_t));
	int			nseen = 0;
	int32_t		missing = 0;
	bool		ok;

	if (seen == NULL)
	{
		tms_error_set(err, ICEBERG_ERR_OUT_OF_MEMORY, "out of memory");
		return false;
	}
	for (int i = 0; i < nleaf_ids; i++)
		leaf_ids[i] = -1;
	file_ids(root, leaf_ids, nleaf_ids, seen, &nseen, 100000);
	ok = ids_present(s->columns, s->ncolumns, seen, nseen, &missing);
	if (!ok)
		tms_error_set(err, ICEBERG_ERR_MALFORMED,
					  "the file written lacks field id %d", (int) missing);
	free(seen);
	return ok;
}
