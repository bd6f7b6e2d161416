/*-------------------------------------------------------------------------
 *
 * compact_sort.c
 *	  The sort orders of compaction's sort and z-order strategies: the
 *	  sort-order option in Spark's rewrite_data_files syntax, the table's
 *	  default sort order from its metadata, the id Iceberg stamps on the
 *	  files it writes, and their JSON form in the helper's group line.
 *
 * Text (https://iceberg.apache.org/docs/latest/spark-procedures/#rewrite_data_files):
 *	  order  := field { ',' field } | ZORDER '(' name { ',' name } ')'
 *	  field  := name [ASC | DESC] [NULLS FIRST | NULLS LAST]
 *	  name   := part { '.' part }	(a field of structs: s.f)
 *	  part   := identifier | `quoted` (`` inside)
 * as Iceberg's SortOrder builder: ASC defaults to NULLS FIRST, DESC to
 * NULLS LAST.  A name is a top-level column or a field of structs at any
 * depth (not inside a list or a map), in the text as in a table's sort
 * order (its source-id).  Only plain columns are taken in the text (a
 * transform such as bucket(16, id) is refused); a table's own sort order
 * may also use year, month, day, hour, truncate[W] and void (bucket needs
 * Iceberg's hash in the helper, and is refused).
 *
 * Z-order (Iceberg's SparkZOrderUDF) takes int, long, float, double,
 * string, binary, boolean, date and timestamp columns; sort takes every
 * type the helper reads.
 *
 * Rules: plain C; errors as TmsError values, the bad text in the
 * detail; at most MAX_FIELDS fields and MAX_TEXT bytes of text.
 *
 * src/iceberg/compact/compact_sort.c
 *
 *-------------------------------------------------------------------------
 */
#include "iceberg/compact/compact_int.h"
#include "iceberg/iceberg_internal.h"

#include <ctype.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define MAX_FIELDS	64
#define MAX_TEXT	4096
#define MAX_DEPTH	64			/* as deep as iceberg_schema_parse reads */

void
iceberg_sort_order_free(IcebergSortOrder *o)
{
	int			i;

	if (o == NULL)
		return;
	for (i = 0; i < o->nfields; i++)
		io_free(o->fields[i].transform);
	io_free(o->fields);
	io_free(o);
}

IcebergSortOrder *
iceberg_sort_order_copy(const IcebergSortOrder *o)
{
	IcebergSortOrder *r;
	int			i;

	if (o == NULL)
		return NULL;
	r = io_calloc(1, sizeof(IcebergSortOrder));
	if (r == NULL)
		return NULL;
	*r = *o;
	r->nfields = 0;
	r->fields = io_calloc((size_t) o->nfields + 1, sizeof(IcebergSortField));
	if (r->fields == NULL)
	{
		io_free(r);
		return NULL;
	}
	for (i = 0; i < o->nfields; i++)
	{
		r->fields[i] = o->fields[i];
		r->fields[i].transform = io_strdup(o->fields[i].transform);
		r->nfields = i + 1;
		if (r->fields[i].transform == NULL)
		{
			iceberg_sort_order_free(r);
			return NULL;
		}
	}
	return r;
}

/* Can the strategy order a column of this type? */
static bool
type_ok(const IcebergColumn *c, bool zorder)
{
	switch (c->type)
	{
		case ICEBERG_TYPE_INT:
		case ICEBERG_TYPE_LONG:
		case ICEBERG_TYPE_FLOAT:
		case ICEBERG_TYPE_DOUBLE:
		case ICEBERG_TYPE_STRING:
		case ICEBERG_TYPE_BINARY:
		case ICEBERG_TYPE_BOOLEAN:
		case ICEBERG_TYPE_DATE:
		case ICEBERG_TYPE_TIMESTAMP:
		case ICEBERG_TYPE_TIMESTAMPTZ:
			return true;
		case ICEBERG_TYPE_DECIMAL:
		case ICEBERG_TYPE_TIME:
		case ICEBERG_TYPE_UUID:
			return !zorder;
		default:
			return false;
	}
}

/*
 * The field id at any depth of structs (a top-level column, or a field of
 * structs only: none inside a list or a map), or NULL.
 */
static const IcebergColumn *
struct_field(const IcebergSchema *s, int32_t id)
{
	const IcebergColumn *path[MAX_DEPTH];
	int			n = iceberg_schema_field_path(s, id, path, MAX_DEPTH);

	for (int i = 0; i + 1 < n; i++)
		if (path[i]->type != ICEBERG_TYPE_STRUCT)
			return NULL;
	return n > 0 ? path[n - 1] : NULL;
}

/* Add a field to o (transform copied). */
static bool
add_field(IcebergSortOrder *o, int32_t id, const char *transform, bool desc,
		  bool nulls_first, TmsError *err)
{
	IcebergSortField *f;

	if (o->nfields >= MAX_FIELDS)
	{
		tms_error_set(err, ICEBERG_ERR_INVALID_ARGUMENT, "too many sort fields");
		tms_error_detail(err, "A sort order has at most %d fields.", MAX_FIELDS);
		return false;
	}
	f = &o->fields[o->nfields];
	f->transform = io_strdup(transform);
	if (f->transform == NULL)
		return compact_oom(err);
	f->source_id = id;
	f->descending = desc;
	f->nulls_first = nulls_first;
	o->nfields++;
	return true;
}

/* The text parser's state. */
typedef struct SortLex
{
	const char *text;
	const char *p;
	char		word[MAX_TEXT + 1];
	bool		quoted;
	TmsError   *err;
} SortLex;

static bool
lex_bad(SortLex *l, const char *why)
{
	tms_error_set(l->err, ICEBERG_ERR_INVALID_ARGUMENT, "invalid sort order: %s", why);
	tms_error_detail(l->err, "The sort order is \"%.1000s\"; the error is at \"%.200s\".",
					 l->text, *l->p ? l->p : "(its end)");
	return false;
}

static void
skip_space(SortLex *l)
{
	while (isspace((unsigned char) *l->p))
		l->p++;
}

/* The next name or keyword into l->word; false when none is there. */
static bool
lex_word(SortLex *l)
{
	size_t		n = 0;

	skip_space(l);
	l->quoted = false;
	if (*l->p == '`')
	{
		l->quoted = true;
		l->p++;
		for (;;)
		{
			if (*l->p == '\0')
				return lex_bad(l, "a quoted name is not closed");
			if (*l->p == '`' && l->p[1] == '`')
				l->p++;
			else if (*l->p == '`')
				break;
			if (n >= MAX_TEXT)
				return lex_bad(l, "a name is too long");
			l->word[n++] = *l->p++;
		}
		l->p++;
		l->word[n] = '\0';
		return n > 0 ? true : lex_bad(l, "a quoted name is empty");
	}
	while (isalnum((unsigned char) *l->p) || *l->p == '_' || (unsigned char) *l->p >= 0x80)
	{
		if (n >= MAX_TEXT)
			return lex_bad(l, "a name is too long");
		l->word[n++] = *l->p++;
	}
	l->word[n] = '\0';
	return n > 0 ? true : lex_bad(l, "a column name was expected");
}

/* Is the next token the keyword kw?  (It is consumed when it is.) */
static bool
lex_keyword(SortLex *l, const char *kw)
{
	const char *save = l->p;
	size_t		n = strlen(kw);

	skip_space(l);
	if (strncasecmp(l->p, kw, n) == 0 && !isalnum((unsigned char) l->p[n]) && l->p[n] != '_')
	{
		l->p += n;
		return true;
	}
	l->p = save;
	return false;
}

static bool
lex_char(SortLex *l, char c)
{
	skip_space(l);
	if (*l->p != c)
		return false;
	l->p++;
	return true;
}

/* The field of c[0..n) named name (exactly, else the one case-insensitive match). */
static const IcebergColumn *
find_column(const IcebergColumn *c, int nc, const char *name, bool *ambiguous)
{
	const IcebergColumn *found = NULL;
	int			i,
				n = 0;

	*ambiguous = false;
	for (i = 0; i < nc; i++)
		if (strcmp(c[i].name, name) == 0)
			return &c[i];
	for (i = 0; i < nc; i++)
		if (strcasecmp(c[i].name, name) == 0)
		{
			found = &c[i];
			n++;
		}
	*ambiguous = n > 1;
	return n == 1 ? found : NULL;
}

/*
 * Bind l->word, and the ".name" parts after it, to a top-level column or a
 * field of structs of schema (NULL: id 0); false with the error.
 */
static bool
bind_name(SortLex *l, const IcebergSchema *schema, bool zorder, int32_t *id)
{
	const IcebergColumn *c;
	bool		ambiguous;

	*id = 0;
	c = schema ? find_column(schema->columns, schema->ncolumns, l->word, &ambiguous) : NULL;
	while (*l->p == '.')
	{
		l->p++;
		if (!lex_word(l))
			return false;
		if (c != NULL && c->type != ICEBERG_TYPE_STRUCT)
			return lex_bad(l, "only a struct's fields can be named after a \".\"");
		c = c ? find_column(c->children, c->nchildren, l->word, &ambiguous) : NULL;
	}
	if (schema == NULL)
		return true;
	if (c == NULL)
	{
		tms_error_set(l->err, ICEBERG_ERR_INVALID_ARGUMENT,
					  "invalid sort order: %s column \"%.200s\"",
					  ambiguous ? "ambiguous" : "no", l->word);
		tms_error_detail(l->err, "The sort order is \"%.1000s\"; sort columns are top-level columns of the table or fields of structs (s.f).",
						 l->text);
		return false;
	}
	if (!type_ok(c, zorder))
	{
		tms_error_set(l->err, ICEBERG_ERR_INVALID_ARGUMENT,
					  "invalid sort order: column \"%.200s\" of type %.100s cannot be %s",
					  c->name, c->type_text, zorder ? "z-ordered" : "sorted");
		tms_error_detail(l->err, "The sort order is \"%.1000s\".", l->text);
		return false;
	}
	*id = c->id;
	return true;
}

/* zorder(name, ...), after the keyword. */
static bool
parse_zorder(SortLex *l, const IcebergSchema *schema, IcebergSortOrder *o)
{
	int32_t		id;
	int			i;

	o->zorder = true;
	if (!lex_char(l, '('))
		return lex_bad(l, "zorder needs its columns in parentheses");
	do
	{
		if (!lex_word(l) || !bind_name(l, schema, true, &id))
			return false;
		for (i = 0; schema != NULL && i < o->nfields; i++)
			if (o->fields[i].source_id == id)
				return lex_bad(l, "zorder names a column twice");
		if (!add_field(o, id, "identity", false, true, l->err))
			return false;
	} while (lex_char(l, ','));
	if (!lex_char(l, ')'))
		return lex_bad(l, "\")\" or \",\" expected");
	skip_space(l);
	if (*l->p != '\0')
		return lex_bad(l, "nothing may follow zorder(...)");
	return true;
}

/* field { ',' field } */
static bool
parse_fields(SortLex *l, const IcebergSchema *schema, IcebergSortOrder *o)
{
	do
	{
		int32_t		id;
		bool		desc = false;
		bool		nulls_first;

		if (!lex_word(l))
			return false;
		skip_space(l);
		if (*l->p == '(')
			return lex_bad(l, "only columns can be sorted on (a transform such as bucket or truncate is not supported here)");
		if (!bind_name(l, schema, false, &id))
			return false;
		if (lex_keyword(l, "DESC"))
			desc = true;
		else
			(void) lex_keyword(l, "ASC");
		nulls_first = !desc;
		if (lex_keyword(l, "NULLS"))
		{
			if (lex_keyword(l, "FIRST"))
				nulls_first = true;
			else if (lex_keyword(l, "LAST"))
				nulls_first = false;
			else
				return lex_bad(l, "NULLS FIRST or NULLS LAST expected");
		}
		if (!add_field(o, id, "identity", desc, nulls_first, l->err))
			return false;
		skip_space(l);
		if (*l->p != '\0' && *l->p != ',')
			return lex_bad(l, "ASC, DESC, NULLS FIRST, NULLS LAST or \",\" expected");
	} while (lex_char(l, ','));
	return true;
}

bool
iceberg_sort_order_parse(const char *text, const IcebergSchema *schema,
						 IcebergSortOrder **out, TmsError *err)
{
	SortLex		l;
	IcebergSortOrder *o;
	bool		ok;

	*out = NULL;
	memset(&l, 0, sizeof(l));
	l.text = text;
	l.p = text;
	l.err = err;
	if (strlen(text) > MAX_TEXT)
	{
		tms_error_set(err, ICEBERG_ERR_INVALID_ARGUMENT, "invalid sort order: too long");
		tms_error_detail(err, "A sort order has at most %d bytes.", MAX_TEXT);
		return false;
	}
	o = io_calloc(1, sizeof(IcebergSortOrder));
	if (o == NULL || (o->fields = io_calloc(MAX_FIELDS, sizeof(IcebergSortField))) == NULL)
	{
		io_free(o);
		return compact_oom(err);
	}
	skip_space(&l);
	if (*l.p == '\0')
		ok = lex_bad(&l, "it is empty");
	else if (lex_keyword(&l, "zorder") && (skip_space(&l), *l.p == '('))
		ok = parse_zorder(&l, schema, o);
	else
	{
		l.p = text;
		ok = parse_fields(&l, schema, o);
	}
	if (!ok)
	{
		iceberg_sort_order_free(o);
		return false;
	}
	*out = o;
	return true;
}

/* Is t a transform the helper applies (for a table's own sort order)? */
static bool
transform_ok(const char *t, const IcebergColumn *c)
{
	int			w;
	char		tail;

	if (strcmp(t, "identity") == 0 || strcmp(t, "void") == 0)
		return true;
	if (strcmp(t, "year") == 0 || strcmp(t, "month") == 0 || strcmp(t, "day") == 0)
		return c->type == ICEBERG_TYPE_DATE || c->type == ICEBERG_TYPE_TIMESTAMP ||
			c->type == ICEBERG_TYPE_TIMESTAMPTZ;
	if (strcmp(t, "hour") == 0)
		return c->type == ICEBERG_TYPE_TIMESTAMP || c->type == ICEBERG_TYPE_TIMESTAMPTZ;
	if (sscanf(t, "truncate[%d%c", &w, &tail) == 2 && tail == ']' && w > 0)
		return c->type == ICEBERG_TYPE_INT || c->type == ICEBERG_TYPE_LONG ||
			c->type == ICEBERG_TYPE_STRING;
	return false;
}

bool
iceberg_sort_order_of_table(const IcebergTableMetadata *md, const IcebergSchema *schema,
							IcebergSortOrder **out, TmsError *err)
{
	json_t	   *orders = NULL;
	json_t	   *order = NULL;
	json_t	   *fields;
	IcebergSortOrder *o = NULL;
	size_t		i;

	*out = NULL;
	if (md->sort_orders_json != NULL)
		orders = iceberg_json_load(md->sort_orders_json, strlen(md->sort_orders_json), 0, 0,
								   "sort orders", err);
	for (i = 0; orders != NULL && i < json_array_size(orders); i++)
	{
		json_t	   *id = json_object_get(json_array_get(orders, i), "order-id");

		if (json_is_integer(id) && json_integer_value(id) == md->default_sort_order_id)
			order = json_array_get(orders, i);
	}
	fields = json_object_get(order, "fields");
	if (md->default_sort_order_id == 0 || !json_is_array(fields) || json_array_size(fields) == 0)
	{
		json_decref(orders);
		tms_error_set(err, ICEBERG_ERR_INVALID_ARGUMENT,
					  "the table is unsorted and no sort order is given");
		tms_error_detail(err, "Its default-sort-order-id is %d.", (int) md->default_sort_order_id);
		return false;
	}
	o = io_calloc(1, sizeof(IcebergSortOrder));
	if (o == NULL || (o->fields = io_calloc(json_array_size(fields) + 1, sizeof(IcebergSortField))) == NULL)
	{
		io_free(o);
		json_decref(orders);
		return compact_oom(err);
	}
	o->order_id = md->default_sort_order_id;
	for (i = 0; i < json_array_size(fields); i++)
	{
		json_t	   *f = json_array_get(fields, i);
		const char *t = json_string_value(json_object_get(f, "transform"));
		const char *dir = json_string_value(json_object_get(f, "direction"));
		const char *no = json_string_value(json_object_get(f, "null-order"));
		json_t	   *sid = json_object_get(f, "source-id");
		const IcebergColumn *c = json_is_integer(sid) ?
		struct_field(schema, (int32_t) json_integer_value(sid)) : NULL;

		if (t == NULL || dir == NULL || no == NULL || c == NULL || !type_ok(c, false) ||
			!transform_ok(t, c) ||
			!add_field(o, c->id, t, strcmp(dir, "desc") == 0, strcmp(no, "nulls-first") == 0, err))
		{
			if (err->code != ICEBERG_ERR_OUT_OF_MEMORY)
			{
				const IcebergColumn *nested;

				tms_error_set(err, ICEBERG_ERR_UNSUPPORTED,
							  "the table's sort order %d cannot be applied by compaction on engine local",
							  (int) o->order_id);
				nested = c == NULL && json_is_integer(sid) ?
					iceberg_schema_field(schema, (int32_t) json_integer_value(sid), NULL) : NULL;
				if (nested != NULL)
					tms_error_detail(err, "Its field %d is %s(%s), a field inside a list or a map (id %d); local compaction sorts on top-level columns and fields of structs of primitive types.",
									 (int) i + 1, t ? t : "?", nested->name, (int) nested->id);
				else
					tms_error_detail(err, "Its field %d is %s(%s) of %s; local compaction sorts on columns of primitive types with transforms identity, year, month, day, hour, truncate and void.",
									 (int) i + 1, t ? t : "?", c ? c->name : "an unknown column",
									 c ? c->type_text : "?");
			}
			iceberg_sort_order_free(o);
			json_decref(orders);
			return false;
		}
	}
	json_decref(orders);
	*out = o;
	return true;
}

void
iceberg_sort_order_match(const IcebergTableMetadata *md, IcebergSortOrder *o)
{
	json_t	   *orders = NULL;
	TmsError	err;
	size_t		i;

	o->order_id = 0;
	if (o->zorder || md->sort_orders_json == NULL)
		return;					/* z-order sorts on a value no table order has */
	orders = iceberg_json_load(md->sort_orders_json, strlen(md->sort_orders_json), 0, 0,
							   "sort orders", &err);
	for (i = 0; orders != NULL && i < json_array_size(orders); i++)
	{
		json_t	   *ord = json_array_get(orders, i);
		json_t	   *fields = json_object_get(ord, "fields");
		json_t	   *id = json_object_get(ord, "order-id");
		bool		same = json_is_array(fields) && json_is_integer(id) &&
		(int) json_array_size(fields) == o->nfields && o->nfields > 0;
		int			k;

		for (k = 0; same && k < o->nfields; k++)
		{
			json_t	   *f = json_array_get(fields, (size_t) k);
			const char *t = json_string_value(json_object_get(f, "transform"));
			const char *dir = json_string_value(json_object_get(f, "direction"));
			const char *no = json_string_value(json_object_get(f, "null-order"));
			json_t	   *sid = json_object_get(f, "source-id");

			same = t != NULL && dir != NULL && no != NULL && json_is_integer(sid) &&
				json_integer_value(sid) == o->fields[k].source_id &&
				strcmp(t, o->fields[k].transform) == 0 &&
				strcmp(dir, o->fields[k].descending ? "desc" : "asc") == 0 &&
				strcmp(no, o->fields[k].nulls_first ? "nulls-first" : "nulls-last") == 0;
		}
		if (same)
		{
			o->order_id = (int32_t) json_integer_value(id);
			break;
		}
	}
	json_decref(orders);
}

/* ---- the group line's "sort" (compact_wire.c) ---- */

json_t *
compact_sort_json(const IcebergSortOrder *o)
{
	json_t	   *fields = json_array();
	int			i;

	if (fields == NULL)
		return NULL;
	for (i = 0; i < o->nfields; i++)
	{
		const IcebergSortField *f = &o->fields[i];

		if (json_array_append_new(fields, json_pack("{s:i, s:s, s:b, s:b}", "id", (int) f->source_id,
													"transform", f->transform,
													"desc", f->descending,
													"nulls_first", f->nulls_first)) != 0)
		{
			json_decref(fields);
			return NULL;
		}
	}
	return json_pack("{s:b, s:o}", "zorder", o->zorder, "fields", fields);
}

bool
compact_sort_from_json(json_t *j, const IcebergSchema *schema, IcebergSortOrder **out,
					   TmsError *err)
{
	json_t	   *fields = json_object_get(j, "fields");
	json_t	   *z = json_object_get(j, "zorder");
	IcebergSortOrder *o;
	size_t		i;

	*out = NULL;
	if (!json_is_object(j) || !json_is_boolean(z) || !json_is_array(fields) ||
		json_array_size(fields) == 0 || json_array_size(fields) > MAX_FIELDS)
	{
		tms_error_set(err, ICEBERG_ERR_MALFORMED, "invalid group line: bad \"sort\"");
		return false;
	}
	o = io_calloc(1, sizeof(IcebergSortOrder));
	if (o == NULL || (o->fields = io_calloc(MAX_FIELDS, sizeof(IcebergSortField))) == NULL)
	{
		io_free(o);
		return compact_oom(err);
	}
	o->zorder = json_is_true(z);
	for (i = 0; i < json_array_size(fields); i++)
	{
		json_t	   *f = json_array_get(fields, i);
		json_t	   *id = json_object_get(f, "id");
		const char *t = json_string_value(json_object_get(f, "transform"));
		json_t	   *desc = json_object_get(f, "desc");
		json_t	   *nf = json_object_get(f, "nulls_first");
		const IcebergColumn *c = json_is_integer(id) ?
		struct_field(schema, (int32_t) json_integer_value(id)) : NULL;

		if (c == NULL || t == NULL || !json_is_boolean(desc) || !json_is_boolean(nf) ||
			!type_ok(c, o->zorder) || !transform_ok(t, c) || (o->zorder && strcmp(t, "identity") != 0))
		{
			iceberg_sort_order_free(o);
			tms_error_set(err, ICEBERG_ERR_MALFORMED, "invalid group line: bad sort field %d",
						  (int) i + 1);
			return false;
		}
		if (!add_field(o, c->id, t, json_is_true(desc), json_is_true(nf), err))
		{
			iceberg_sort_order_free(o);
			return false;
		}
	}
	*out = o;
	return true;
}
