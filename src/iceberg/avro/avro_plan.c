/*-------------------------------------------------------------------------
 *
 * avro_plan.c
 *	  Schema resolution for the Avro reader: the writer schema from the
 *	  file header, compiled once into a decode plan for the fields the
 *	  caller wants (IcebergAvroTarget).
 *
 * Fields are matched by Iceberg field id when the writer schema has ids,
 * else by name or alternate name.  A matched leaf stores into a numbered
 * slot (and must have a type that suits its slot kind); everything else
 * is compiled for skipping, with its minimum encoded size (which bounds
 * the counts read from the file) and, for runs of ints and longs, the
 * number of varints to skip at once.  Named types are resolved with and
 * without their namespace; nesting, named types, fields and plan nodes
 * are bounded.
 *
 * src/iceberg/avro/avro_plan.c
 *
 *-------------------------------------------------------------------------
 */
#include "iceberg/avro/avro_internal.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A named type (record, enum, fixed) of the schema being compiled. */
typedef struct NamedType
{
	char	   *name;
	json_t	   *def;			/* borrowed from the parsed schema */
} NamedType;

/* The state of one schema compilation. */
typedef struct Compiler
{
	NamedType  *named;
	int			nnamed;
	int			nodes;			/* total plan nodes, bounded */
	TmsError   *err;
	IcebergAvroReader *r;
	bool		failed_oom;
	const char *bad;			/* a short reason for a malformed schema */
} Compiler;

/* See avro_internal.h. */
void
iceberg_avro_free_plan(IcebergAvroPlanNode *n)
{
	int			i;

	if (n == NULL)
		return;
	for (i = 0; i < n->nchildren; i++)
		iceberg_avro_free_plan(n->children[i]);
	io_free(n->children);
	io_free(n);
}

/*
 * A new plan node of type t with room for nchildren children; NULL when
 * the plan grows past its bound (cc->bad set) or on allocation failure.
 */
static IcebergAvroPlanNode *
new_node(Compiler *cc, IcebergAvroType t, int nchildren)
{
	IcebergAvroPlanNode *n;

	if (++cc->nodes > 1000000)
	{
		cc->bad = "schema too large";
		return NULL;
	}
	n = io_calloc(1, sizeof(IcebergAvroPlanNode));
	if (n == NULL)
	{
		cc->failed_oom = true;
		return NULL;
	}
	n->type = t;
	n->slot = -1;
	n->raw_slot = -1;
	if (nchildren > 0)
	{
		n->children = io_calloc((size_t) nchildren, sizeof(IcebergAvroPlanNode *));
		if (n->children == NULL)
		{
			io_free(n);
			cc->failed_oom = true;
			return NULL;
		}
	}
	n->nchildren = 0;
	return n;
}

/* Register a named type (record / enum / fixed) under its full name. */
static bool
register_named(Compiler *cc, json_t *def)
{
	const char *name = json_string_value(json_object_get(def, "name"));
	const char *ns = json_string_value(json_object_get(def, "namespace"));
	char	   *full;
	int			i;

	if (name == NULL)
	{
		cc->bad = "named type without a name";
		return false;
	}
	if (cc->nnamed >= ICEBERG_AVRO_MAX_NAMED)
	{
		cc->bad = "too many named types";
		return false;
	}
	if (ns != NULL && ns[0] != '\0' && strchr(name, '.') == NULL)
	{
		full = io_malloc(strlen(ns) + strlen(name) + 2);
		if (full)
			sprintf(full, "%s.%s", ns, name);
	}
	else
		full = iceberg_strdup(name, NULL);
	if (full == NULL)
	{
		cc->failed_oom = true;
		return false;
	}
	for (i = 0; i < cc->nnamed; i++)
		if (strcmp(cc->named[i].name, full) == 0)
		{
			/* redefinition: keep the first, as Avro forbids it anyway */
			io_free(full);
			return true;
		}
	if (cc->nnamed % 16 == 0)
	{
		NamedType  *nt = io_realloc(cc->named, sizeof(NamedType) * (size_t) (cc->nnamed + 16));

		if (nt == NULL)
		{
			io_free(full);
			cc->failed_oom = true;
			return false;
		}
		cc->named = nt;
	}
	cc->named[cc->nnamed].name = full;
	cc->named[cc->nnamed].def = def;
	cc->nnamed++;
	return true;
}

/* The definition of a named type, by full or unqualified name; NULL if none. */
static json_t *
lookup_named(Compiler *cc, const char *name)
{
	int			i;
	const char *dot;

	for (i = 0; i < cc->nnamed; i++)
		if (strcmp(cc->named[i].name, name) == 0)
			return cc->named[i].def;
	/* unqualified reference to a namespaced name */
	for (i = 0; i < cc->nnamed; i++)
	{
		dot = strrchr(cc->named[i].name, '.');
		if (dot != NULL && strcmp(dot + 1, name) == 0)
			return cc->named[i].def;
	}
	return NULL;
}

static IcebergAvroPlanNode *compile(Compiler *cc, json_t *schema,
									const IcebergAvroTarget *leaf,
									const IcebergAvroTarget *targets, int ntargets,
									int depth);

/* Primitive type from its name; -1 when not primitive. */
static int
primitive_type(const char *s)
{
	static const struct
	{
		const char *name;
		IcebergAvroType t;
	}			prims[] = {
		{"null", AT_NULL}, {"boolean", AT_BOOLEAN}, {"int", AT_INT},
		{"long", AT_LONG}, {"float", AT_FLOAT}, {"double", AT_DOUBLE},
		{"bytes", AT_BYTES}, {"string", AT_STRING}
	};
	size_t		i;

	for (i = 0; i < sizeof(prims) / sizeof(prims[0]); i++)
		if (strcmp(s, prims[i].name) == 0)
			return (int) prims[i].t;
	return -1;
}

/* The minimum encoded size in bytes of a value of primitive type t. */
static int64_t
prim_min_size(IcebergAvroType t)
{
	switch (t)
	{
		case AT_NULL:
			return 0;
		case AT_FLOAT:
			return 4;
		case AT_DOUBLE:
			return 8;
		default:
			return 1;
	}
}

/* Does a leaf of this type suit the target's slot kind? */
static bool
leaf_compatible(const IcebergAvroPlanNode *n, IcebergAvroSlotKind kind)
{
	switch (kind)
	{
		case ICEBERG_AVRO_SLOT_LONG:
			return n->type == AT_INT || n->type == AT_LONG;
		case ICEBERG_AVRO_SLOT_STRING:
			return n->type == AT_STRING || n->type == AT_BYTES;
		case ICEBERG_AVRO_SLOT_INT_ARRAY:
			return n->type == AT_ARRAY &&
				(n->children[0]->type == AT_INT || n->children[0]->type == AT_LONG);
		case ICEBERG_AVRO_SLOT_COUNT_ARRAY:
			return n->type == AT_ARRAY;
		case ICEBERG_AVRO_SLOT_PARTITION:
			return n->type == AT_RECORD;
		case ICEBERG_AVRO_SLOT_RAW:
			return true;
	}
	return false;
}

/* Compile a record's fields against targets (ntargets may be 0). */
static IcebergAvroPlanNode *
compile_record(Compiler *cc, json_t *def, const IcebergAvroTarget *targets,
			   int ntargets, int depth)
{
	json_t	   *fields = json_object_get(def, "fields");
	IcebergAvroPlanNode *n;
	size_t		i;

	if (!json_is_array(fields) || json_array_size(fields) > ICEBERG_AVRO_MAX_FIELDS)
	{
		cc->bad = "record without a valid \"fields\" array";
		return NULL;
	}
	n = new_node(cc, AT_RECORD, (int) json_array_size(fields));
	if (n == NULL)
		return NULL;
	for (i = 0; i < json_array_size(fields); i++)
	{
		json_t	   *f = json_array_get(fields, i);
		json_t	   *idj = json_object_get(f, "field-id");
		const char *fname = json_string_value(json_object_get(f, "name"));
		const IcebergAvroTarget *match = NULL;
		IcebergAvroPlanNode *child;
		int			k;

		if (!json_is_object(f) || fname == NULL || json_object_get(f, "type") == NULL)
		{
			cc->bad = "record field without a name or type";
			iceberg_avro_free_plan(n);
			return NULL;
		}
		for (k = 0; k < ntargets && match == NULL; k++)
		{
			const IcebergAvroTarget *t = &targets[k];

			if (json_is_integer(idj))
			{
				if (t->field_id >= 0 && json_integer_value(idj) == t->field_id)
					match = t;
			}
			else if (strcmp(fname, t->name) == 0 ||
					 (t->alt_name != NULL && strcmp(fname, t->alt_name) == 0))
				match = t;
		}
		if (match != NULL && match->children != NULL)
			child = compile(cc, json_object_get(f, "type"),
							match->kind == ICEBERG_AVRO_SLOT_RAW && match->slot >= 0 ? match : NULL,
							match->children, match->nchildren, depth + 1);
		else
			child = compile(cc, json_object_get(f, "type"), match, NULL, 0,
							depth + 1);
		if (child == NULL)
		{
			iceberg_avro_free_plan(n);
			return NULL;
		}
		n->children[n->nchildren++] = child;
		n->min_size += child->min_size;
		if (child->wanted)
			n->wanted = true;
	}
	return n;
}

/*
 * Compile a union (a JSON array of branch schemas): the leaf and targets
 * apply to every branch but "null"; a raw leaf records the span of the
 * whole union value (its branch index included), so that a null is
 * located too.
 */
static IcebergAvroPlanNode *
compile_union(Compiler *cc, json_t *schema, const IcebergAvroTarget *leaf,
			  const IcebergAvroTarget *targets, int ntargets, int depth)
{
	IcebergAvroPlanNode *n;
	size_t		i;
	size_t		nb = json_array_size(schema);

	if (nb == 0 || nb > ICEBERG_AVRO_MAX_FIELDS)
	{
		cc->bad = "invalid union";
		return NULL;
	}
	n = new_node(cc, AT_UNION, (int) nb);
	if (n == NULL)
		return NULL;
	n->min_size = 1;
	if (leaf != NULL && leaf->kind == ICEBERG_AVRO_SLOT_RAW && targets == NULL)
	{
		n->raw_slot = leaf->slot;
		n->wanted = true;
		leaf = NULL;
	}
	for (i = 0; i < nb; i++)
	{
		json_t	   *b = json_array_get(schema, i);
		bool		is_null = json_is_string(b) &&
		strcmp(json_string_value(b), "null") == 0;
		IcebergAvroPlanNode *child = compile(cc, b, is_null ? NULL : leaf,
											 is_null ? NULL : targets,
											 is_null ? 0 : ntargets, depth + 1);

		if (child == NULL)
		{
			iceberg_avro_free_plan(n);
			return NULL;
		}
		n->children[n->nchildren++] = child;
		if (child->wanted)
			n->wanted = true;
	}
	return n;
}

/* Compile an enum schema object (named; its symbols counted). */
static IcebergAvroPlanNode *
compile_enum(Compiler *cc, json_t *schema)
{
	IcebergAvroPlanNode *n;
	json_t	   *syms = json_object_get(schema, "symbols");

	if (!register_named(cc, schema))
		return NULL;
	if (!json_is_array(syms))
	{
		cc->bad = "enum without symbols";
		return NULL;
	}
	n = new_node(cc, AT_ENUM, 0);
	if (n == NULL)
		return NULL;
	n->size = (int32_t) json_array_size(syms);
	n->min_size = 1;
	return n;
}

/* Compile a fixed schema object (named; its size at most 1 MiB). */
static IcebergAvroPlanNode *
compile_fixed(Compiler *cc, json_t *schema)
{
	IcebergAvroPlanNode *n;
	json_t	   *sz = json_object_get(schema, "size");

	if (!register_named(cc, schema))
		return NULL;
	if (!json_is_integer(sz) || json_integer_value(sz) < 0 ||
		json_integer_value(sz) > 1024 * 1024)
	{
		cc->bad = "fixed without a valid size";
		return NULL;
	}
	n = new_node(cc, AT_FIXED, 0);
	if (n == NULL)
		return NULL;
	n->size = (int32_t) json_integer_value(sz);
	n->min_size = n->size;
	return n;
}

/*
 * Compile an array or map schema object (type "array" or "map"): one
 * child, its items or values, wanted by no target.
 */
static IcebergAvroPlanNode *
compile_container(Compiler *cc, json_t *schema, const char *type, int depth)
{
	bool		is_map = type[0] == 'm';
	json_t	   *inner = json_object_get(schema, is_map ? "values" : "items");
	IcebergAvroPlanNode *n;
	IcebergAvroPlanNode *child;

	if (inner == NULL)
	{
		cc->bad = "array or map without an item type";
		return NULL;
	}
	n = new_node(cc, is_map ? AT_MAP : AT_ARRAY, 1);
	if (n == NULL)
		return NULL;
	child = compile(cc, inner, NULL, NULL, 0, depth + 1);
	if (child == NULL)
	{
		io_free(n->children);
		io_free(n);
		return NULL;
	}
	n->children[n->nchildren++] = child;
	n->min_size = 1;
	return n;
}

/*
 * Bind node n to the target whose slot it fills (leaf, may be NULL): a raw
 * slot records a span around the value; another must suit the value's
 * type, else n is freed and the error set.  n, or NULL.
 */
static IcebergAvroPlanNode *
bind_leaf(Compiler *cc, IcebergAvroPlanNode *n, const IcebergAvroTarget *leaf)
{
	if (leaf != NULL && leaf->kind == ICEBERG_AVRO_SLOT_RAW)
	{
		/* a span is recorded around the value, decoded or skipped */
		n->raw_slot = leaf->slot;
		n->wanted = true;
	}
	else if (leaf != NULL)
	{
		if (!leaf_compatible(n, leaf->kind))
		{
			tms_error_set(cc->err, ICEBERG_ERR_MALFORMED,
						  "field \"%s\" has an unexpected type in %s",
						  leaf->name, cc->r->what);
			tms_error_detail(cc->err, "The file is \"%s\".", cc->r->path);
			cc->bad = "";
			iceberg_avro_free_plan(n);
			return NULL;
		}
		n->slot = leaf->slot;
		n->kind = leaf->kind;
		n->wanted = true;
	}
	return n;
}

/*
 * Compile one schema into a plan node.  "leaf" (may be NULL) is a target
 * whose slot this value fills; targets/ntargets apply to a record.
 */
static IcebergAvroPlanNode *
compile(Compiler *cc, json_t *schema, const IcebergAvroTarget *leaf,
		const IcebergAvroTarget *targets, int ntargets, int depth)
{
	IcebergAvroPlanNode *n = NULL;

	if (depth > ICEBERG_AVRO_MAX_DEPTH)
	{
		cc->bad = "schema nested too deeply";
		return NULL;
	}
	if (json_is_string(schema))
	{
		const char *s = json_string_value(schema);
		int			t = primitive_type(s);

		if (t >= 0)
		{
			n = new_node(cc, (IcebergAvroType) t, 0);
			if (n == NULL)
				return NULL;
			n->min_size = prim_min_size(n->type);
		}
		else
		{
			json_t	   *def = lookup_named(cc, s);

			if (def == NULL)
			{
				cc->bad = "reference to an undefined named type";
				return NULL;
			}
			return compile(cc, def, leaf, targets, ntargets, depth + 1);
		}
	}
	else if (json_is_array(schema))
		return compile_union(cc, schema, leaf, targets, ntargets, depth);
	else if (json_is_object(schema))
	{
		const char *type = json_string_value(json_object_get(schema, "type"));
		int			t;

		if (type == NULL)
		{
			json_t	   *inner = json_object_get(schema, "type");

			/* {"type": {...}} or {"type": [...]} wraps a schema */
			if (inner != NULL && (json_is_object(inner) || json_is_array(inner)))
				return compile(cc, inner, leaf, targets, ntargets, depth + 1);
			cc->bad = "schema object without a type";
			return NULL;
		}
		t = primitive_type(type);
		if (t >= 0)
		{
			/* primitive with attributes, e.g. a logicalType */
			n = new_node(cc, (IcebergAvroType) t, 0);
			if (n == NULL)
				return NULL;
			n->min_size = prim_min_size(n->type);
		}
		else if (strcmp(type, "record") == 0 || strcmp(type, "error") == 0)
		{
			if (!register_named(cc, schema))
				return NULL;
			if (leaf != NULL && leaf->kind != ICEBERG_AVRO_SLOT_RAW)
			{
				/* a record stored whole (partition): children unwanted */
				n = compile_record(cc, schema, NULL, 0, depth);
			}
			else
				n = compile_record(cc, schema, targets, ntargets, depth);
			if (n == NULL)
				return NULL;
		}
		else if (strcmp(type, "enum") == 0)
		{
			n = compile_enum(cc, schema);
			if (n == NULL)
				return NULL;
		}
		else if (strcmp(type, "fixed") == 0)
		{
			n = compile_fixed(cc, schema);
			if (n == NULL)
				return NULL;
		}
		else if (strcmp(type, "array") == 0 || strcmp(type, "map") == 0)
		{
			n = compile_container(cc, schema, type, depth);
			if (n == NULL)
				return NULL;
		}
		else
		{
			json_t	   *def = lookup_named(cc, type);

			if (def == NULL)
			{
				cc->bad = "unknown type name";
				return NULL;
			}
			return compile(cc, def, leaf, targets, ntargets, depth + 1);
		}
	}
	else
	{
		cc->bad = "schema is neither a name, a union nor an object";
		return NULL;
	}

	return bind_leaf(cc, n, leaf);
}

/* ---------------------------------------------------------------------
 * Entry points
 * ---------------------------------------------------------------------
 */

/* Append op to n's flat program, merging runs; false when it is full. */
static bool
flat_append(IcebergAvroPlanNode *n, int32_t op)
{
	if (n->nflat > 0)
	{
		int32_t    *last = &n->flat[n->nflat - 1];

		if (op > 0 && *last > 0 && *last <= INT32_MAX - op)
		{
			*last += op;
			return true;
		}
		if (op < 0 && *last < 0 && *last >= INT32_MIN - op)
		{
			*last += op;
			return true;
		}
	}
	if (n->nflat >= ICEBERG_AVRO_MAX_FLAT)
		return false;
	n->flat[n->nflat++] = op;
	return true;
}

/*
 * Give every node of the tree its flat program (avro_internal.h), or
 * nflat -1 when its encoding is not a fixed sequence (arrays, maps,
 * unions, and records holding one) or needs more than
 * ICEBERG_AVRO_MAX_FLAT ops.
 */
static void
plan_flat(IcebergAvroPlanNode *n)
{
	int			i;
	bool		ok = true;

	for (i = 0; i < n->nchildren; i++)
		plan_flat(n->children[i]);
	n->nflat = 0;
	switch (n->type)
	{
		case AT_NULL:
			break;
		case AT_BOOLEAN:
			ok = flat_append(n, -1);
			break;
		case AT_INT:
		case AT_LONG:
		case AT_ENUM:
			ok = flat_append(n, 1);
			break;
		case AT_FLOAT:
			ok = flat_append(n, -4);
			break;
		case AT_DOUBLE:
			ok = flat_append(n, -8);
			break;
		case AT_BYTES:
		case AT_STRING:
			ok = flat_append(n, 0);
			break;
		case AT_FIXED:
			ok = n->size == 0 || flat_append(n, -n->size);
			break;
		case AT_RECORD:
			for (i = 0; i < n->nchildren && ok; i++)
			{
				const IcebergAvroPlanNode *child = n->children[i];

				ok = child->nflat >= 0;
				for (int k = 0; ok && k < child->nflat; k++)
					ok = flat_append(n, child->flat[k]);
			}
			break;
		case AT_ARRAY:
		case AT_MAP:
		case AT_UNION:
			ok = false;
			break;
	}
	if (!ok)
		n->nflat = -1;
}

/* 1 + the highest slot the targets (and their children) name. */
static int
targets_nslots(const IcebergAvroTarget *targets, int ntargets, int depth)
{
	int			n = 0;

	for (int i = 0; i < ntargets && depth <= ICEBERG_AVRO_MAX_DEPTH; i++)
	{
		int			c = targets[i].slot + 1;

		if (targets[i].children != NULL)
		{
			int			k = targets_nslots(targets[i].children, targets[i].nchildren,
										   depth + 1);

			if (k > c)
				c = k;
		}
		if (c > n)
			n = c;
	}
	return n < ICEBERG_AVRO_MAX_SLOTS ? n : ICEBERG_AVRO_MAX_SLOTS;
}

/* See avro_internal.h. */
bool
iceberg_avro_build_plan(IcebergAvroReader *r, const IcebergAvroTarget *targets,
						int ntargets, TmsError *err)
{
	const char *schema_text = iceberg_avro_reader_meta(r, "avro.schema");
	json_t	   *schema;
	json_t	   *fields;
	Compiler	cc;
	int			i;

	if (schema_text == NULL)
		return iceberg_avro_error(r, err, ICEBERG_ERR_MALFORMED,
								  "missing avro.schema in the header");
	schema = iceberg_json_load(schema_text, strlen(schema_text), JSON_DECODE_ANY,
							   r->limits.max_json_bytes, "avro.schema", err);
	if (schema == NULL)
	{
		if (err != NULL && err->code == ICEBERG_ERR_MALFORMED)
			return iceberg_avro_error(r, err, ICEBERG_ERR_MALFORMED,
									  "invalid avro.schema JSON");
		return false;
	}
	if (!json_is_object(schema) ||
		json_string_value(json_object_get(schema, "type")) == NULL ||
		strcmp(json_string_value(json_object_get(schema, "type")), "record") != 0)
	{
		json_decref(schema);
		return iceberg_avro_error(r, err, ICEBERG_ERR_MALFORMED,
								  "avro schema is not a record");
	}
	fields = json_object_get(schema, "fields");
	if (json_is_array(fields) && json_array_size(fields) <= ICEBERG_AVRO_MAX_FIELDS)
	{
		r->top_ids = io_calloc(json_array_size(fields) + 1, sizeof(int32_t));
		if (r->top_ids == NULL)
		{
			json_decref(schema);
			tms_error_set(err, ICEBERG_ERR_OUT_OF_MEMORY, "out of memory");
			return false;
		}
		for (i = 0; i < (int) json_array_size(fields); i++)
		{
			json_t	   *id = json_object_get(json_array_get(fields, i), "field-id");

			if (json_is_integer(id))
				r->top_ids[r->ntop_ids++] = (int32_t) json_integer_value(id);
		}
	}
	memset(&cc, 0, sizeof(cc));
	cc.err = err;
	cc.r = r;
	r->nslots = targets_nslots(targets, ntargets, 0);
	r->root = compile(&cc, schema, NULL, targets, ntargets, 0);
	if (r->root != NULL)
		plan_flat(r->root);
	for (i = 0; i < cc.nnamed; i++)
		io_free(cc.named[i].name);
	io_free(cc.named);
	json_decref(schema);
	if (r->root == NULL)
	{
		if (cc.failed_oom)
		{
			tms_error_set(err, ICEBERG_ERR_OUT_OF_MEMORY, "out of memory");
			return false;
		}
		if (cc.bad != NULL && cc.bad[0] == '\0')
			return false;		/* err already set */
		iceberg_avro_error(r, err, ICEBERG_ERR_MALFORMED, "invalid avro schema");
		tms_error_detail(err, "The file is \"%s\": %s.", r->path,
						 cc.bad ? cc.bad : "unknown problem");
		return false;
	}
	return true;
}

/* See iceberg_internal.h. */
bool
iceberg_avro_reader_has_field_id(const IcebergAvroReader *r, int32_t field_id)
{
	int			i;

	for (i = 0; i < r->ntop_ids; i++)
		if (r->top_ids[i] == field_id)
			return true;
	return false;
}
