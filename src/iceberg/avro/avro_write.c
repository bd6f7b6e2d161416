/*-------------------------------------------------------------------------
 *
 * avro_write.c
 *	  The Avro object container writer: header, blocks, null and deflate
 *	  codecs, and a schema-driven record encoder (see avro_write.h).
 *
 * The writer schema is compiled into a small tree (WNode): records keep
 * their fields' ids and names, unions their branches, named types are
 * resolved (a named type used twice is compiled twice; nodes and nesting
 * are bounded as in the reader).  Encoding walks the tree with the
 * caller's values.  Format: https://avro.apache.org/docs/1.11.1/specification/
 * ("Object Container Files", "Binary Encoding").
 *
 * src/iceberg/avro/avro_write.c
 *
 *-------------------------------------------------------------------------
 */
#include "iceberg/avro/avro_internal.h"
#include "iceberg/avro/avro_write.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#define WRITE_BLOCK_BYTES (64 * 1024)	/* pending block flushed past this */
#define WRITE_MAX_NODES 100000

typedef struct WNode
{
	IcebergAvroType type;
	int32_t		size;			/* fixed */
	int			nchildren;
	struct WNode **children;	/* record fields, union branches, array item /
								 * map value as [0] */
	int32_t    *ids;			/* record: field ids, -1 when absent */
	char	  **names;			/* record: field names */
} WNode;

struct IcebergAvroWriter
{
	WNode	   *root;
	int			codec;
	uint8_t		sync[16];
	IcebergBuf	out;			/* the file so far */
	IcebergBuf	block;			/* pending records, uncompressed */
	int64_t		block_count;
	int64_t		count;
	z_stream	zs;
	bool		zs_ready;
	bool		finished;
};

typedef struct WCompiler
{
	json_t	  **named_defs;
	char	  **named_names;
	int			nnamed;
	int			nodes;
	const char *bad;
	bool		oom;
} WCompiler;

static void
wnode_free(WNode *n)
{
	int			i;

	if (n == NULL)
		return;
	for (i = 0; i < n->nchildren; i++)
	{
		wnode_free(n->children[i]);
		if (n->names)
			io_free(n->names[i]);
	}
	io_free(n->children);
	io_free(n->ids);
	io_free(n->names);
	io_free(n);
}

static WNode *
wnode_new(WCompiler *cc, IcebergAvroType t, int nchildren)
{
	WNode	   *n;

	if (++cc->nodes > WRITE_MAX_NODES)
	{
		cc->bad = "schema too large";
		return NULL;
	}
	n = io_calloc(1, sizeof(WNode));
	if (n == NULL || (nchildren > 0 &&
					  (n->children = io_calloc((size_t) nchildren, sizeof(WNode *))) == NULL))
	{
		io_free(n);
		cc->oom = true;
		return NULL;
	}
	n->type = t;
	return n;
}

static bool
wregister(WCompiler *cc, json_t *def)
{
	const char *name = json_string_value(json_object_get(def, "name"));
	const char *ns = json_string_value(json_object_get(def, "namespace"));
	char	   *full;

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
	if (cc->nnamed % 16 == 0)
	{
		json_t	  **d = io_realloc(cc->named_defs, sizeof(json_t *) * (size_t) (cc->nnamed + 16));
		char	  **nm;

		if (d == NULL)
		{
			cc->oom = true;
			return false;
		}
		cc->named_defs = d;
		nm = io_realloc(cc->named_names, sizeof(char *) * (size_t) (cc->nnamed + 16));
		if (nm == NULL)
		{
			cc->oom = true;
			return false;
		}
		cc->named_names = nm;
	}
	full = io_malloc(strlen(name) + (ns ? strlen(ns) : 0) + 2);
	if (full == NULL)
	{
		cc->oom = true;
		return false;
	}
	if (ns != NULL && ns[0] != '\0' && strchr(name, '.') == NULL)
		sprintf(full, "%s.%s", ns, name);
	else
		strcpy(full, name);
	cc->named_names[cc->nnamed] = full;
	cc->named_defs[cc->nnamed] = def;
	cc->nnamed++;
	return true;
}

static json_t *
wlookup(WCompiler *cc, const char *name)
{
	int			i;

	for (i = 0; i < cc->nnamed; i++)
		if (strcmp(cc->named_names[i], name) == 0)
			return cc->named_defs[i];
	for (i = 0; i < cc->nnamed; i++)
	{
		const char *dot = strrchr(cc->named_names[i], '.');

		if (dot != NULL && strcmp(dot + 1, name) == 0)
			return cc->named_defs[i];
	}
	return NULL;
}

static int
wprimitive(const char *s)
{
	static const char *const names[] = {"null", "boolean", "int", "long", "float",
	"double", "bytes", "string"};
	static const IcebergAvroType types[] = {AT_NULL, AT_BOOLEAN, AT_INT, AT_LONG,
	AT_FLOAT, AT_DOUBLE, AT_BYTES, AT_STRING};
	size_t		i;

	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (strcmp(s, names[i]) == 0)
			return (int) types[i];
	return -1;
}

static WNode *
wcompile(WCompiler *cc, json_t *s, int depth)
{
	WNode	   *n;
	const char *type;
	int			t;

	if (depth > ICEBERG_AVRO_MAX_DEPTH)
	{
		cc->bad = "schema nested too deeply";
		return NULL;
	}
	if (json_is_string(s))
	{
		t = wprimitive(json_string_value(s));
		if (t >= 0)
			return wnode_new(cc, (IcebergAvroType) t, 0);
		s = wlookup(cc, json_string_value(s));
		if (s == NULL)
		{
			cc->bad = "reference to an undefined named type";
			return NULL;
		}
		return wcompile(cc, s, depth + 1);
	}
	if (json_is_array(s))
	{
		size_t		i,
					nb = json_array_size(s);

		if (nb == 0 || nb > ICEBERG_AVRO_MAX_FIELDS)
		{
			cc->bad = "invalid union";
			return NULL;
		}
		n = wnode_new(cc, AT_UNION, (int) nb);
		if (n == NULL)
			return NULL;
		for (i = 0; i < nb; i++)
		{
			WNode	   *c = wcompile(cc, json_array_get(s, i), depth + 1);

			if (c == NULL)
			{
				wnode_free(n);
				return NULL;
			}
			n->children[n->nchildren++] = c;
		}
		return n;
	}
	if (!json_is_object(s))
	{
		cc->bad = "schema is neither a name, a union nor an object";
		return NULL;
	}
	type = json_string_value(json_object_get(s, "type"));
	if (type == NULL)
	{
		json_t	   *inner = json_object_get(s, "type");

		if (inner != NULL && (json_is_object(inner) || json_is_array(inner)))
			return wcompile(cc, inner, depth + 1);
		cc->bad = "schema object without a type";
		return NULL;
	}
	t = wprimitive(type);
	if (t >= 0)
		return wnode_new(cc, (IcebergAvroType) t, 0);
	if (strcmp(type, "record") == 0 || strcmp(type, "error") == 0)
	{
		json_t	   *fields = json_object_get(s, "fields");
		size_t		i,
					nf;

		if (!wregister(cc, s))
			return NULL;
		if (!json_is_array(fields) || json_array_size(fields) > ICEBERG_AVRO_MAX_FIELDS)
		{
			cc->bad = "record without a valid \"fields\" array";
			return NULL;
		}
		nf = json_array_size(fields);
		n = wnode_new(cc, AT_RECORD, (int) nf);
		if (n == NULL)
			return NULL;
		n->ids = io_calloc(nf + 1, sizeof(int32_t));
		n->names = io_calloc(nf + 1, sizeof(char *));
		if (n->ids == NULL || n->names == NULL)
		{
			cc->oom = true;
			wnode_free(n);
			return NULL;
		}
		for (i = 0; i < nf; i++)
		{
			json_t	   *f = json_array_get(fields, i);
			json_t	   *id = json_object_get(f, "field-id");
			const char *fname = json_string_value(json_object_get(f, "name"));
			WNode	   *c;

			if (fname == NULL || json_object_get(f, "type") == NULL)
			{
				cc->bad = "record field without a name or type";
				wnode_free(n);
				return NULL;
			}
			c = wcompile(cc, json_object_get(f, "type"), depth + 1);
			if (c == NULL)
			{
				wnode_free(n);
				return NULL;
			}
			n->names[i] = iceberg_strdup(fname, NULL);
			n->ids[i] = json_is_integer(id) ? (int32_t) json_integer_value(id) : -1;
			n->children[n->nchildren++] = c;
			if (n->names[i] == NULL)
			{
				cc->oom = true;
				wnode_free(n);
				return NULL;
			}
		}
		return n;
	}
	if (strcmp(type, "enum") == 0)
	{
		if (!wregister(cc, s))
			return NULL;
		n = wnode_new(cc, AT_ENUM, 0);
		if (n != NULL)
			n->size = (int32_t) json_array_size(json_object_get(s, "symbols"));
		return n;
	}
	if (strcmp(type, "fixed") == 0)
	{
		json_t	   *sz = json_object_get(s, "size");

		if (!wregister(cc, s))
			return NULL;
		if (!json_is_integer(sz) || json_integer_value(sz) < 0 ||
			json_integer_value(sz) > 1024 * 1024)
		{
			cc->bad = "fixed without a valid size";
			return NULL;
		}
		n = wnode_new(cc, AT_FIXED, 0);
		if (n != NULL)
			n->size = (int32_t) json_integer_value(sz);
		return n;
	}
	if (strcmp(type, "array") == 0 || strcmp(type, "map") == 0)
	{
		bool		is_map = type[0] == 'm';
		json_t	   *inner = json_object_get(s, is_map ? "values" : "items");
		WNode	   *c;

		if (inner == NULL)
		{
			cc->bad = "array or map without an item type";
			return NULL;
		}
		n = wnode_new(cc, is_map ? AT_MAP : AT_ARRAY, 1);
		if (n == NULL)
			return NULL;
		c = wcompile(cc, inner, depth + 1);
		if (c == NULL)
		{
			wnode_free(n);
			return NULL;
		}
		n->children[n->nchildren++] = c;
		return n;
	}
	s = wlookup(cc, type);
	if (s == NULL)
	{
		cc->bad = "unknown type name";
		return NULL;
	}
	return wcompile(cc, s, depth + 1);
}

/* ---------------------------------------------------------------------
 * Encoding
 * ---------------------------------------------------------------------
 */

static bool
put_long(IcebergBuf *b, int64_t v)
{
	uint8_t		tmp[10];
	uint64_t	z = ((uint64_t) v << 1) ^ (uint64_t) (v >> 63);
	int			n = 0;

	while (z >= 0x80)
	{
		tmp[n++] = (uint8_t) (z | 0x80);
		z >>= 7;
	}
	tmp[n++] = (uint8_t) z;
	return iceberg_buf_append(b, tmp, (size_t) n);
}

static bool
put_bytes(IcebergBuf *b, const void *p, size_t len)
{
	return put_long(b, (int64_t) len) && iceberg_buf_append(b, p, len);
}

/* Encoding state: the failing field's name, for the error. */
typedef struct WEnc
{
	IcebergBuf *b;
	const char *field;
	const char *bad;
	bool		oom;
} WEnc;

static bool wencode(WEnc *e, const WNode *n, const IcebergAvroWValue *v, int depth);

/* Does value kind k suit a non-union node n? */
static bool
wsuits(const WNode *n, const IcebergAvroWValue *v)
{
	switch (v->kind)
	{
		case AVW_ABSENT:
		case AVW_NULL:
			return n->type == AT_NULL;
		case AVW_BOOL:
			return n->type == AT_BOOLEAN;
		case AVW_LONG:
			return n->type == AT_LONG ||
				(n->type == AT_INT && v->l >= INT32_MIN && v->l <= INT32_MAX) ||
				(n->type == AT_ENUM && v->l >= 0 && v->l < n->size);
		case AVW_DOUBLE:
			return n->type == AT_DOUBLE || n->type == AT_FLOAT;
		case AVW_STRING:
			return n->type == AT_STRING;
		case AVW_BYTES:
			return n->type == AT_BYTES ||
				(n->type == AT_FIXED && (size_t) n->size == v->len);
		case AVW_RAW:
			return n->type != AT_NULL && n->type != AT_UNION;
		case AVW_RECORD:
			return n->type == AT_RECORD;
		case AVW_ARRAY:
			return n->type == AT_ARRAY;
	}
	return false;
}

static bool
wencode_record(WEnc *e, const WNode *n, const IcebergAvroWField *fields,
			   int nfields, int depth)
{
	static const IcebergAvroWValue absent = {AVW_ABSENT, 0, 0, NULL, 0, NULL, 0, NULL, 0};
	int			i,
				k;

	for (i = 0; i < n->nchildren; i++)
	{
		const IcebergAvroWValue *v = &absent;

		for (k = 0; k < nfields; k++)
		{
			if (n->ids[i] >= 0 ? fields[k].field_id == n->ids[i]
				: (fields[k].name != NULL && strcmp(fields[k].name, n->names[i]) == 0))
			{
				v = &fields[k].v;
				break;
			}
		}
		e->field = n->names[i];
		if (!wencode(e, n->children[i], v, depth + 1))
			return false;
	}
	return true;
}

static bool
wencode(WEnc *e, const WNode *n, const IcebergAvroWValue *v, int depth)
{
	IcebergBuf *b = e->b;
	int			i;

#define W(ok) do { if (!(ok)) { e->oom = true; return false; } } while (0)
	if (depth > ICEBERG_AVRO_MAX_DEPTH * 2)
	{
		e->bad = "value nested too deeply";
		return false;
	}
	if (n->type == AT_UNION)
	{
		int			pick = -1;

		for (i = 0; i < n->nchildren && pick < 0; i++)
			if (wsuits(n->children[i], v))
				pick = i;
		if (pick < 0)
		{
			e->bad = (v->kind == AVW_ABSENT || v->kind == AVW_NULL)
				? "required field absent" : "value does not suit any union branch";
			return false;
		}
		W(put_long(b, pick));
		return wencode(e, n->children[pick], v, depth + 1);
	}
	if (!wsuits(n, v))
	{
		e->bad = (v->kind == AVW_ABSENT || v->kind == AVW_NULL)
			? "required field absent" : "value does not suit the field's type";
		return false;
	}
	switch (v->kind)
	{
		case AVW_ABSENT:
		case AVW_NULL:
			return true;
		case AVW_BOOL:
			{
				uint8_t		c = v->l ? 1 : 0;

				W(iceberg_buf_append(b, &c, 1));
				return true;
			}
		case AVW_LONG:
			W(put_long(b, v->l));
			return true;
		case AVW_DOUBLE:
			if (n->type == AT_FLOAT)
			{
				float		f = (float) v->d;

				W(iceberg_buf_append(b, &f, 4));	/* little-endian host */
			}
			else
				W(iceberg_buf_append(b, &v->d, 8));
			return true;
		case AVW_STRING:
			W(put_bytes(b, v->p, v->len));
			return true;
		case AVW_BYTES:
			if (n->type == AT_FIXED)
				W(iceberg_buf_append(b, v->p, v->len));
			else
				W(put_bytes(b, v->p, v->len));
			return true;
		case AVW_RAW:
			W(iceberg_buf_append(b, v->p, v->len));
			return true;
		case AVW_RECORD:
			return wencode_record(e, n, v->fields, v->nfields, depth);
		case AVW_ARRAY:
			if (v->nitems > 0)
			{
				W(put_long(b, v->nitems));
				for (i = 0; i < v->nitems; i++)
					if (!wencode(e, n->children[0], &v->items[i], depth + 1))
						return false;
			}
			W(put_long(b, 0));
			return true;
	}
#undef W
	return false;
}

/* ---------------------------------------------------------------------
 * The container
 * ---------------------------------------------------------------------
 */

/* See avro_write.h. */
bool
iceberg_random_bytes(void *buf, size_t n, TmsError *err)
{
	uint8_t    *p = buf;
	size_t		got = 0;
	int			fd;

	while (got < n)
	{
		ssize_t		r = getrandom(p + got, n - got, 0);

		if (r < 0)
		{
			if (errno == EINTR)
				continue;
			break;
		}
		got += (size_t) r;
	}
	if (got == n)
		return true;
	fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
	if (fd >= 0)
	{
		got = 0;
		while (got < n)
		{
			ssize_t		r = read(fd, p + got, n - got);

			if (r <= 0)
				break;
			got += (size_t) r;
		}
		close(fd);
		if (got == n)
			return true;
	}
	tms_error_set(err, ICEBERG_ERR_IO, "could not obtain random bytes");
	return false;
}

/* Append a header metadata entry (string key, bytes value). */
static bool
put_meta(IcebergBuf *b, const char *key, const char *value)
{
	return put_bytes(b, key, strlen(key)) && put_bytes(b, value, strlen(value));
}

/* See avro_write.h. */
bool
iceberg_avro_writer_create(const char *schema_json, const IcebergKeyValue *meta,
						   int nmeta, int codec, int level, int64_t max_json_bytes,
						   IcebergAvroWriter **out, TmsError *err)
{
	IcebergAvroWriter *w;
	json_t	   *schema;
	WCompiler	cc;
	int			i,
				n;
	bool		ok;

	*out = NULL;
	if (schema_json == NULL)
	{
		tms_error_set(err, ICEBERG_ERR_INVALID_ARGUMENT, "no avro schema given");
		return false;
	}
	schema = iceberg_json_load(schema_json, strlen(schema_json), JSON_DECODE_ANY,
							   max_json_bytes, "avro schema", err);
	if (schema == NULL)
		return false;
	if (!json_is_object(schema) ||
		json_string_value(json_object_get(schema, "type")) == NULL ||
		strcmp(json_string_value(json_object_get(schema, "type")), "record") != 0)
	{
		json_decref(schema);
		tms_error_set(err, ICEBERG_ERR_MALFORMED,
					  "avro schema to write is not a record");
		return false;
	}
	w = io_calloc(1, sizeof(IcebergAvroWriter));
	if (w == NULL)
	{
		json_decref(schema);
		tms_error_set(err, ICEBERG_ERR_OUT_OF_MEMORY, "out of memory");
		return false;
	}
	memset(&cc, 0, sizeof(cc));
	w->root = wcompile(&cc, schema, 0);
	for (i = 0; i < cc.nnamed; i++)
		io_free(cc.named_names[i]);
	io_free(cc.named_names);
	io_free(cc.named_defs);
	json_decref(schema);
	if (w->root == NULL)
	{
		io_free(w);
		if (cc.oom)
		{
			tms_error_set(err, ICEBERG_ERR_OUT_OF_MEMORY, "out of memory");
			return false;
		}
		tms_error_set(err, ICEBERG_ERR_MALFORMED, "invalid avro schema to write");
		tms_error_detail(err, "The schema is invalid: %s.", cc.bad ? cc.bad : "unknown problem");
		return false;
	}
	w->codec = codec;
	if (!iceberg_random_bytes(w->sync, sizeof(w->sync), err))
	{
		iceberg_avro_writer_free(w);
		return false;
	}
	if (codec == ICEBERG_AVRO_WRITE_DEFLATE)
	{
		if (deflateInit2(&w->zs, level >= 0 && level <= 9 ? level : Z_DEFAULT_COMPRESSION, Z_DEFLATED, -15, 8,
						 Z_DEFAULT_STRATEGY) != Z_OK)
		{
			iceberg_avro_writer_free(w);
			tms_error_set(err, ICEBERG_ERR_OUT_OF_MEMORY, "could not start deflate");
			return false;
		}
		w->zs_ready = true;
	}
	/* header: magic, metadata map (one block), sync */
	n = 2;
	for (i = 0; i < nmeta; i++)
		if (strncmp(meta[i].key, "avro.", 5) != 0)
			n++;
	ok = iceberg_buf_append(&w->out, "Obj\001", 4) && put_long(&w->out, n) &&
		put_meta(&w->out, "avro.schema", schema_json) &&
		put_meta(&w->out, "avro.codec", codec == ICEBERG_AVRO_WRITE_DEFLATE ? "deflate" : "null");
	for (i = 0; ok && i < nmeta; i++)
		if (strncmp(meta[i].key, "avro.", 5) != 0)
			ok = put_meta(&w->out, meta[i].key, meta[i].value);
	ok = ok && put_long(&w->out, 0) && iceberg_buf_append(&w->out, w->sync, 16);
	if (!ok)
	{
		iceberg_avro_writer_free(w);
		tms_error_set(err, ICEBERG_ERR_OUT_OF_MEMORY, "out of memory");
		return false;
	}
	*out = w;
	return true;
}

/* Compress and append the pending block. */
static bool
flush_block(IcebergAvroWriter *w, TmsError *err)
{
	const uint8_t *data = (const uint8_t *) w->block.data;
	size_t		len = w->block.len;
	IcebergBuf	z = {0};

	if (w->block_count == 0)
		return true;
	if (w->codec == ICEBERG_AVRO_WRITE_DEFLATE)
	{
		uLong		bound = deflateBound(&w->zs, (uLong) len);

		if (!iceberg_buf_reserve(&z, bound + 16))
		{
			tms_error_set(err, ICEBERG_ERR_OUT_OF_MEMORY, "out of memory");
			return false;
		}
		deflateReset(&w->zs);
		w->zs.next_in = (Bytef *) data;
		w->zs.avail_in = (uInt) len;
		w->zs.next_out = (Bytef *) z.data;
		w->zs.avail_out = (uInt) (bound + 16);
		if (deflate(&w->zs, Z_FINISH) != Z_STREAM_END)
		{
			iceberg_buf_free(&z);
			tms_error_set(err, ICEBERG_ERR_OUT_OF_MEMORY, "deflate failed");
			return false;
		}
		z.len = (size_t) (bound + 16 - w->zs.avail_out);
		data = (const uint8_t *) z.data;
		len = z.len;
	}
	if (!put_long(&w->out, w->block_count) || !put_long(&w->out, (int64_t) len) ||
		!iceberg_buf_append(&w->out, data, len) ||
		!iceberg_buf_append(&w->out, w->sync, 16))
	{
		iceberg_buf_free(&z);
		tms_error_set(err, ICEBERG_ERR_OUT_OF_MEMORY, "out of memory");
		return false;
	}
	iceberg_buf_free(&z);
	w->block.len = 0;
	w->block_count = 0;
	return true;
}

/* After a record was appended to the block (or failed: roll it back). */
static bool
record_done(IcebergAvroWriter *w, TmsError *err)
{
	w->block_count++;
	w->count++;
	if (w->block.len >= WRITE_BLOCK_BYTES)
		return flush_block(w, err);
	return true;
}

/* See avro_write.h. */
bool
iceberg_avro_writer_add(IcebergAvroWriter *w, const IcebergAvroWField *fields,
						int nfields, TmsError *err)
{
	WEnc		e;
	size_t		start = w->block.len;

	if (w->finished)
	{
		tms_error_set(err, ICEBERG_ERR_INVALID_ARGUMENT, "avro writer already finished");
		return false;
	}
	memset(&e, 0, sizeof(e));
	e.b = &w->block;
	if (!wencode_record(&e, w->root, fields, nfields, 0))
	{
		w->block.len = start;
		if (e.oom)
		{
			tms_error_set(err, ICEBERG_ERR_OUT_OF_MEMORY, "out of memory");
			return false;
		}
		tms_error_set(err, ICEBERG_ERR_INVALID_ARGUMENT,
					  "cannot encode avro record: %s", e.bad ? e.bad : "unknown problem");
		tms_error_detail(err, "The field is \"%s\".", e.field ? e.field : "");
		return false;
	}
	return record_done(w, err);
}

/* See avro_write.h. */
bool
iceberg_avro_writer_add_raw(IcebergAvroWriter *w, const void *data, size_t len,
							TmsError *err)
{
	if (w->finished)
	{
		tms_error_set(err, ICEBERG_ERR_INVALID_ARGUMENT, "avro writer already finished");
		return false;
	}
	if (!iceberg_buf_append(&w->block, data, len))
	{
		tms_error_set(err, ICEBERG_ERR_OUT_OF_MEMORY, "out of memory");
		return false;
	}
	return record_done(w, err);
}

int64_t
iceberg_avro_writer_size(const IcebergAvroWriter *w)
{
	return (int64_t) (w->out.len + w->block.len);
}

int64_t
iceberg_avro_writer_count(const IcebergAvroWriter *w)
{
	return w->count;
}

/* See avro_write.h. */
bool
iceberg_avro_writer_finish(IcebergAvroWriter *w, const uint8_t **data,
						   size_t *len, TmsError *err)
{
	if (!w->finished)
	{
		if (!flush_block(w, err))
			return false;
		w->finished = true;
	}
	*data = (const uint8_t *) w->out.data;
	*len = w->out.len;
	return true;
}

void
iceberg_avro_writer_free(IcebergAvroWriter *w)
{
	if (w == NULL)
		return;
	wnode_free(w->root);
	iceberg_buf_free(&w->out);
	iceberg_buf_free(&w->block);
	if (w->zs_ready)
		deflateEnd(&w->zs);
	io_free(w);
}
