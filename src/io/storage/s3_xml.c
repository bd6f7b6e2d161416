/*-------------------------------------------------------------------------
 *
 * s3_xml.c
 *		A small, strict XML reader for the S3 responses tms needs
 *		(ListObjectsV2, DeleteObjects results, error documents).
 *
 * It builds a tree of elements with their decoded character data.
 * Supported: the XML declaration and processing instructions (skipped),
 * comments, CDATA sections, attributes (parsed and dropped), self-closing
 * tags, the five predefined entities and numeric character references
 * (encoded as UTF-8).  Not supported, and rejected: DOCTYPE declarations
 * (no external entities, no entity expansion bombs).  Namespace prefixes
 * are stripped from element names.  Depth (XML_MAX_DEPTH) and the number
 * of elements (XML_MAX_NODES) are limited; mismatched or unclosed tags,
 * bad entities and trailing garbage are errors.
 *
 * Memory is bounded as the JSON budget bounds jansson (jsonmem.h), here by
 * the size of the document: a parse may allocate at most twice the bytes
 * of its input, plus XML_BUDGET_BASE for small documents.  Every byte the
 * parse takes from malloc is counted (with malloc's own overhead per
 * block): the tree lives in an arena of chunks owned by the document
 * (io_xml_free frees the chunks), element names repeat and are stored
 * once, and the character data of the open elements is gathered on one
 * scratch stack that never grows past the input's length (decoding only
 * shrinks text).  A document that needs more ends the parse with
 * IO_ERR_TOO_LARGE and frees everything, before malloc is asked for the
 * block that would go over: a flood of tiny elements (<a/> costs a node
 * of 32 bytes for 4 bytes of input) fails fast instead of taking many
 * times its size.  A real S3 listing, whose elements carry names and
 * keys, needs well under the budget.
 *
 * src/io/storage/s3_xml.c
 *
 *-------------------------------------------------------------------------
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "io/io_int.h"

#define XML_MAX_DEPTH 64

/* The most elements one document may have (an S3 page holds 1000 keys). */
#define XML_MAX_NODES ((size_t) 1 << 20)

/* What every document may allocate besides twice its length. */
#define XML_BUDGET_BASE ((size_t) 16 * 1024)

/* What malloc itself costs per block, about (glibc: 8 to 16 bytes). */
#define XML_MALLOC_OVERHEAD 16

/* Arena chunks: the first is small, later ones double up to the max. */
#define XML_CHUNK_MIN ((size_t) 1024)
#define XML_CHUNK_MAX ((size_t) 64 * 1024)

/* Distinct element names stored once per document. */
#define XML_MAX_INTERNED 64

typedef struct XmlChunk
{
	struct XmlChunk *next;		/* the chunk allocated before this one */
	size_t		size;			/* bytes of data after the header */
	size_t		used;
} XmlChunk;

#define XML_CHUNK_HEADER ((sizeof(XmlChunk) + 15) & ~(size_t) 15)

/* What io_xml_parse returns a pointer into: the first arena allocation. */
typedef struct XmlDoc
{
	XmlChunk   *chunks;			/* newest first; this one's chunk is last */
	IoXmlNode	root;
} XmlDoc;

typedef struct XmlParser
{
	const char *p;
	const char *end;
	size_t		len;			/* the whole document's */
	TmsError   *err;
	int			depth;
	size_t		nodes;
	/* the budget */
	size_t		limit;
	size_t		used;
	size_t		peak;
	/* the arena */
	XmlChunk   *chunks;
	size_t		next_chunk;
	/* the character data of the open elements, innermost last */
	char	   *scratch;
	size_t		scratch_len;
	size_t		scratch_cap;
	size_t		scratch_max;	/* never more than the input's length + 1 */
	/* names stored once */
	const char *names[XML_MAX_INTERNED];
	int			nnames;
} XmlParser;

static int
xml_fail(XmlParser *x, const char *what)
{
	return tms_error_set(x->err, IO_ERR_PROTOCOL,
						 "malformed XML response: %s", what);
}

/* Count n more bytes against the budget; false with *err when over. */
static bool
charge(XmlParser *x, size_t n)
{
	if (n > x->limit - x->used)
	{
		tms_error_set(x->err, IO_ERR_TOO_LARGE,
					  "the XML response (%zu bytes) needs more than twice its size in memory to parse (budget %zu bytes)",
					  x->len, x->limit);
		return false;
	}
	x->used += n;
	if (x->used > x->peak)
		x->peak = x->used;
	return true;
}

static void
uncharge(XmlParser *x, size_t n)
{
	x->used -= n <= x->used ? n : x->used;
}

static void
oom(XmlParser *x)
{
	tms_error_set(x->err, IO_ERR_OUT_OF_MEMORY, "out of memory");
}

/* n bytes aligned to align (a power of two) from the arena, or NULL. */
static void *
arena_alloc(XmlParser *x, size_t n, size_t align)
{
	XmlChunk   *c = x->chunks;
	size_t		off;

	if (c != NULL)
	{
		off = (c->used + align - 1) & ~(align - 1);
		if (off <= c->size && n <= c->size - off)
		{
			c->used = off + n;
			return (char *) c + XML_CHUNK_HEADER + off;
		}
	}
	{
		size_t		size = x->next_chunk;
		size_t		room = x->limit - x->used;

		if (n > SIZE_MAX / 2)
		{
			oom(x);
			return NULL;
		}
		/* a smaller chunk than planned when the budget has less left */
		if (room > XML_CHUNK_HEADER + XML_MALLOC_OVERHEAD &&
			size > room - XML_CHUNK_HEADER - XML_MALLOC_OVERHEAD)
			size = room - XML_CHUNK_HEADER - XML_MALLOC_OVERHEAD;
		if (size < n)
			size = n;
		if (!charge(x, XML_CHUNK_HEADER + size + XML_MALLOC_OVERHEAD))
			return NULL;
		c = io_malloc(XML_CHUNK_HEADER + size);
		if (c == NULL)
		{
			uncharge(x, XML_CHUNK_HEADER + size + XML_MALLOC_OVERHEAD);
			oom(x);
			return NULL;
		}
		c->next = x->chunks;
		c->size = size;
		c->used = n;
		x->chunks = c;
		if (x->next_chunk < XML_CHUNK_MAX)
			x->next_chunk *= 2;
		return (char *) c + XML_CHUNK_HEADER;
	}
}

static void
arena_free(XmlChunk *c)
{
	while (c != NULL)
	{
		XmlChunk   *next = c->next;

		io_free(c);
		c = next;
	}
}

/* A NUL-terminated copy of s[0..n) in the arena, or NULL. */
static char *
arena_strndup(XmlParser *x, const char *s, size_t n)
{
	char	   *d = arena_alloc(x, n + 1, 1);

	if (d != NULL)
	{
		memcpy(d, s, n);
		d[n] = '\0';
	}
	return d;
}

/* An element name, stored once per document; NULL with *err. */
static char *
intern_name(XmlParser *x, const char *s, size_t n)
{
	char	   *d;

	for (int i = 0; i < x->nnames; i++)
		if (strncmp(x->names[i], s, n) == 0 && x->names[i][n] == '\0')
			return (char *) x->names[i];
	d = arena_strndup(x, s, n);
	if (d != NULL && x->nnames < XML_MAX_INTERNED)
		x->names[x->nnames++] = d;
	return d;
}

/* Append s[0..n) to the scratch stack; false with *err. */
static bool
scratch_append(XmlParser *x, const char *s, size_t n)
{
	if (n == 0)
		return true;
	if (n > x->scratch_cap - x->scratch_len)
	{
		size_t		need = x->scratch_len + n;
		size_t		cap = x->scratch_cap > 0 ? x->scratch_cap * 2 : 256;
		char	   *d;

		if (need > x->scratch_max)
		{
			/* cannot happen: decoded text is never longer than its input */
			tms_error_set(x->err, IO_ERR_INTERNAL,
						  "XML character data longer than the document");
			return false;
		}
		if (cap < need)
			cap = need;
		if (cap > x->scratch_max)
			cap = x->scratch_max;
		/* old and new block may both be live while realloc copies */
		if (!charge(x, cap + XML_MALLOC_OVERHEAD))
			return false;
		d = io_realloc(x->scratch, cap);
		if (d == NULL)
		{
			uncharge(x, cap + XML_MALLOC_OVERHEAD);
			oom(x);
			return false;
		}
		if (x->scratch_cap > 0)
			uncharge(x, x->scratch_cap + XML_MALLOC_OVERHEAD);
		x->scratch = d;
		x->scratch_cap = cap;
	}
	memcpy(x->scratch + x->scratch_len, s, n);
	x->scratch_len += n;
	return true;
}

static bool
is_space(char c)
{
	return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

static bool
is_name_char(char c)
{
	return !(is_space(c) || c == '>' || c == '/' || c == '=' || c == '<' ||
			 c == '"' || c == '\'' || c == '\0');
}

static void
skip_space(XmlParser *x)
{
	while (x->p < x->end && is_space(*x->p))
		x->p++;
}

static bool
starts(XmlParser *x, const char *s)
{
	size_t		n = strlen(s);

	return (size_t) (x->end - x->p) >= n && memcmp(x->p, s, n) == 0;
}

/* Skip past the next occurrence of s; false when absent. */
static bool
skip_past(XmlParser *x, const char *s)
{
	size_t		n = strlen(s);

	while ((size_t) (x->end - x->p) >= n)
	{
		if (memcmp(x->p, s, n) == 0)
		{
			x->p += n;
			return true;
		}
		x->p++;
	}
	return false;
}

/* Encode code point cp as UTF-8 into b; its length, 0 when invalid. */
static size_t
utf8_encode(char *b, unsigned long cp)
{
	if (cp == 0 || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
		return 0;
	if (cp < 0x80)
	{
		b[0] = (char) cp;
		return 1;
	}
	if (cp < 0x800)
	{
		b[0] = (char) (0xC0 | (cp >> 6));
		b[1] = (char) (0x80 | (cp & 0x3F));
		return 2;
	}
	if (cp < 0x10000)
	{
		b[0] = (char) (0xE0 | (cp >> 12));
		b[1] = (char) (0x80 | ((cp >> 6) & 0x3F));
		b[2] = (char) (0x80 | (cp & 0x3F));
		return 3;
	}
	b[0] = (char) (0xF0 | (cp >> 18));
	b[1] = (char) (0x80 | ((cp >> 12) & 0x3F));
	b[2] = (char) (0x80 | ((cp >> 6) & 0x3F));
	b[3] = (char) (0x80 | (cp & 0x3F));
	return 4;
}

/*
 * Decode the entity at x->p (which is '&') onto the scratch stack.  Every
 * entity is at least as long as what it stands for (&#x10FFFF; is ten
 * bytes for four), so text never outgrows its input.
 */
static int
decode_entity(XmlParser *x)
{
	const char *semi = x->p + 1;
	size_t		n;
	char		b[4];
	size_t		blen = 1;

	while (semi < x->end && semi - x->p < 12 && *semi != ';')
		semi++;
	if (semi >= x->end || *semi != ';')
		return xml_fail(x, "unterminated entity");
	n = (size_t) (semi - x->p - 1);
	if (n == 2 && memcmp(x->p + 1, "lt", 2) == 0)
		b[0] = '<';
	else if (n == 2 && memcmp(x->p + 1, "gt", 2) == 0)
		b[0] = '>';
	else if (n == 3 && memcmp(x->p + 1, "amp", 3) == 0)
		b[0] = '&';
	else if (n == 4 && memcmp(x->p + 1, "quot", 4) == 0)
		b[0] = '"';
	else if (n == 4 && memcmp(x->p + 1, "apos", 4) == 0)
		b[0] = '\'';
	else if (n >= 2 && x->p[1] == '#')
	{
		unsigned long cp = 0;
		const char *d = x->p + 2;
		bool		hex = false;

		if (*d == 'x')
		{
			hex = true;
			d++;
		}
		if (d == semi)
			return xml_fail(x, "empty character reference");
		for (; d < semi; d++)
		{
			int			v;

			if (*d >= '0' && *d <= '9')
				v = *d - '0';
			else if (hex && *d >= 'a' && *d <= 'f')
				v = *d - 'a' + 10;
			else if (hex && *d >= 'A' && *d <= 'F')
				v = *d - 'A' + 10;
			else
				return xml_fail(x, "invalid character reference");
			cp = cp * (hex ? 16 : 10) + (unsigned long) v;
			if (cp > 0x10FFFF)
				return xml_fail(x, "invalid character reference");
		}
		blen = utf8_encode(b, cp);
		if (blen == 0)
			return xml_fail(x, "invalid character reference");
	}
	else
		return xml_fail(x, "unknown entity");
	if (!scratch_append(x, b, blen))
		return -1;
	x->p = semi + 1;
	return 0;
}

/* See io.h: frees the arena of a document io_xml_parse returned. */
void
io_xml_free(IoXmlNode *node)
{
	XmlDoc	   *doc;

	if (node == NULL)
		return;
	doc = (XmlDoc *) ((char *) node - offsetof(XmlDoc, root));
	arena_free(doc->chunks);
}

/*
 * Parse the element starting at x->p ('<' of its start tag) into node
 * (zeroed, in the arena).  0, or -1 with *err; on failure nothing is
 * freed here (the arena goes as a whole).
 */
static int
parse_element(XmlParser *x, IoXmlNode *node)
{
	IoXmlNode **tail;
	const char *name_start;
	const char *local;
	size_t		name_len;
	size_t		text_start;

	if (++x->depth > XML_MAX_DEPTH)
		return xml_fail(x, "nesting too deep");
	if (++x->nodes > XML_MAX_NODES)
		return tms_error_set(x->err, IO_ERR_TOO_LARGE,
							 "the XML response has more than %zu elements",
							 XML_MAX_NODES);
	x->p++;						/* '<' */
	name_start = x->p;
	while (x->p < x->end && is_name_char(*x->p))
		x->p++;
	name_len = (size_t) (x->p - name_start);
	if (name_len == 0)
		return xml_fail(x, "missing element name");
	local = memchr(name_start, ':', name_len);
	local = local ? local + 1 : name_start;

	node->name = intern_name(x, local, name_len - (size_t) (local - name_start));
	if (node->name == NULL)
		return -1;

	/* attributes */
	for (;;)
	{
		skip_space(x);
		if (x->p >= x->end)
			goto bad_eof;
		if (*x->p == '>' || *x->p == '/')
			break;
		while (x->p < x->end && is_name_char(*x->p))
			x->p++;
		skip_space(x);
		if (x->p >= x->end || *x->p != '=')
			return xml_fail(x, "invalid attribute");
		x->p++;
		skip_space(x);
		if (x->p >= x->end || (*x->p != '"' && *x->p != '\''))
			return xml_fail(x, "invalid attribute value");
		{
			char		q = *x->p++;

			while (x->p < x->end && *x->p != q)
			{
				if (*x->p == '<')
					return xml_fail(x, "'<' in attribute value");
				x->p++;
			}
			if (x->p >= x->end)
				goto bad_eof;
			x->p++;
		}
	}
	if (*x->p == '/')
	{
		x->p++;
		if (x->p >= x->end || *x->p != '>')
			return xml_fail(x, "invalid empty-element tag");
		x->p++;
		node->text = arena_strndup(x, "", 0);
		if (node->text == NULL)
			return -1;
		x->depth--;
		return 0;
	}
	x->p++;						/* '>' */

	/* content; this element's text grows on top of the scratch stack */
	text_start = x->scratch_len;
	tail = &node->children;
	for (;;)
	{
		if (x->p >= x->end)
			goto bad_eof;
		if (*x->p == '<')
		{
			if (starts(x, "</"))
			{
				const char *cs;

				x->p += 2;
				cs = x->p;
				while (x->p < x->end && is_name_char(*x->p))
					x->p++;
				if ((size_t) (x->p - cs) != name_len ||
					memcmp(cs, name_start, name_len) != 0)
					return xml_fail(x, "mismatched end tag");
				skip_space(x);
				if (x->p >= x->end || *x->p != '>')
					return xml_fail(x, "invalid end tag");
				x->p++;
				break;
			}
			else if (starts(x, "<!--"))
			{
				x->p += 4;
				if (!skip_past(x, "-->"))
					goto bad_eof;
			}
			else if (starts(x, "<![CDATA["))
			{
				const char *cd = x->p + 9;

				x->p = cd;
				if (!skip_past(x, "]]>"))
					goto bad_eof;
				if (!scratch_append(x, cd, (size_t) (x->p - 3 - cd)))
					return -1;
			}
			else if (starts(x, "<?"))
			{
				if (!skip_past(x, "?>"))
					goto bad_eof;
			}
			else if (starts(x, "<!"))
				return xml_fail(x, "declarations are not allowed");
			else
			{
				IoXmlNode  *child = arena_alloc(x, sizeof(IoXmlNode),
												_Alignof(IoXmlNode));

				if (child == NULL)
					return -1;
				memset(child, 0, sizeof(*child));
				*tail = child;
				tail = &child->next;
				if (parse_element(x, child) != 0)
					return -1;
			}
		}
		else if (*x->p == '&')
		{
			if (decode_entity(x) != 0)
				return -1;
		}
		else
		{
			const char *s = x->p;

			while (x->p < x->end && *x->p != '<' && *x->p != '&')
				x->p++;
			if (!scratch_append(x, s, (size_t) (x->p - s)))
				return -1;
		}
	}
	node->text = x->scratch_len > text_start ?
		arena_strndup(x, x->scratch + text_start, x->scratch_len - text_start) :
		arena_strndup(x, "", 0);
	if (node->text == NULL)
		return -1;
	x->scratch_len = text_start;
	x->depth--;
	return 0;

bad_eof:
	return xml_fail(x, "unexpected end of document");
}

/* See io.h. */
IoXmlNode *
io_xml_parse(const char *data, size_t len, TmsError *err)
{
	return io_xml_parse_stats(data, len, NULL, err);
}

/* See io.h: a whole document, prolog, one root element, trailing misc. */
IoXmlNode *
io_xml_parse_stats(const char *data, size_t len, IoXmlStats *stats,
				   TmsError *err)
{
	XmlParser	x;
	XmlDoc	   *doc = NULL;
	bool		have_root = false;

	memset(&x, 0, sizeof(x));
	x.p = data;
	x.end = data + len;
	x.len = len;
	x.err = err;
	x.limit = len <= (SIZE_MAX - XML_BUDGET_BASE) / 2 ?
		2 * len + XML_BUDGET_BASE : SIZE_MAX;
	x.next_chunk = XML_CHUNK_MIN;
	x.scratch_max = len + 1;
	if (stats != NULL)
		memset(stats, 0, sizeof(*stats));

	/* the document header comes first in the first chunk */
	doc = arena_alloc(&x, sizeof(XmlDoc), _Alignof(XmlDoc));
	if (doc == NULL)
		goto fail;
	memset(doc, 0, sizeof(*doc));

	/* UTF-8 byte order mark */
	if (len >= 3 && memcmp(data, "\xEF\xBB\xBF", 3) == 0)
		x.p += 3;
	for (;;)
	{
		skip_space(&x);
		if (x.p >= x.end)
			break;
		if (starts(&x, "<?"))
		{
			if (!skip_past(&x, "?>"))
				goto eof;
		}
		else if (starts(&x, "<!--"))
		{
			x.p += 4;
			if (!skip_past(&x, "-->"))
				goto eof;
		}
		else if (starts(&x, "<!"))
		{
			xml_fail(&x, "declarations are not allowed");
			goto fail;
		}
		else if (*x.p == '<' && !have_root)
		{
			have_root = true;
			if (parse_element(&x, &doc->root) != 0)
				goto fail;
		}
		else
		{
			xml_fail(&x, have_root ? "content after the root element" :
					 "text before the root element");
			goto fail;
		}
	}
	if (!have_root)
	{
		xml_fail(&x, "no root element");
		goto fail;
	}
	io_free(x.scratch);
	doc->chunks = x.chunks;
	if (stats != NULL)
	{
		stats->limit = x.limit;
		stats->peak = x.peak;
		stats->nodes = x.nodes;
	}
	return &doc->root;

eof:
	xml_fail(&x, "unexpected end of document");
fail:
	io_free(x.scratch);
	arena_free(x.chunks);
	if (stats != NULL)
	{
		stats->limit = x.limit;
		stats->peak = x.peak;
		stats->nodes = x.nodes;
	}
	return NULL;
}

const IoXmlNode *
io_xml_child(const IoXmlNode *node, const char *name)
{
	const IoXmlNode *c;

	if (node == NULL)
		return NULL;
	for (c = node->children; c != NULL; c = c->next)
		if (strcmp(c->name, name) == 0)
			return c;
	return NULL;
}

const char *
io_xml_child_text(const IoXmlNode *node, const char *name)
{
	const IoXmlNode *c = io_xml_child(node, name);

	return c ? c->text : NULL;
}
