/*-------------------------------------------------------------------------
 *
 * xml.c
 *		A small, strict XML reader for the S3 responses tms needs
 *		(ListObjectsV2, DeleteObjects results, error documents).
 *
 * It builds a tree of elements with their decoded character data.
 * Supported: the XML declaration and processing instructions (skipped),
 * comments, CDATA sections, attributes (parsed and dropped), self-closing
 * tags, the five predefined entities and numeric character references
 * (encoded as UTF-8).  Not supported, and rejected: DOCTYPE declarations
 * (no external entities, no entity expansion bombs).  Namespace prefixes
 * are stripped from element names.  Depth is limited; mismatched or
 * unclosed tags, bad entities and trailing garbage are errors.
 *
 * src/io/xml.c
 *
 *-------------------------------------------------------------------------
 */
#include <stdlib.h>
#include <string.h>

#include "io_int.h"

#define XML_MAX_DEPTH 64

typedef struct XmlParser
{
	const char *p;
	const char *end;
	IoError    *err;
	int			depth;
} XmlParser;

static int
xml_fail(XmlParser *x, const char *what)
{
	return io_set_error(x->err, IO_ERR_PROTOCOL, 0,
						"malformed XML response: %s", what);
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

/* Append code point cp as UTF-8. */
static bool
put_utf8(IoStrBuf *sb, unsigned long cp)
{
	char		b[4];

	if (cp == 0 || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
		return false;
	if (cp < 0x80)
		io_sb_putc(sb, (char) cp);
	else if (cp < 0x800)
	{
		b[0] = (char) (0xC0 | (cp >> 6));
		b[1] = (char) (0x80 | (cp & 0x3F));
		io_sb_append(sb, b, 2);
	}
	else if (cp < 0x10000)
	{
		b[0] = (char) (0xE0 | (cp >> 12));
		b[1] = (char) (0x80 | ((cp >> 6) & 0x3F));
		b[2] = (char) (0x80 | (cp & 0x3F));
		io_sb_append(sb, b, 3);
	}
	else
	{
		b[0] = (char) (0xF0 | (cp >> 18));
		b[1] = (char) (0x80 | ((cp >> 12) & 0x3F));
		b[2] = (char) (0x80 | ((cp >> 6) & 0x3F));
		b[3] = (char) (0x80 | (cp & 0x3F));
		io_sb_append(sb, b, 4);
	}
	return true;
}

/* Decode the entity at x->p (which is '&') into sb. */
static int
decode_entity(XmlParser *x, IoStrBuf *sb)
{
	const char *semi = x->p + 1;
	size_t		n;

	while (semi < x->end && semi - x->p < 12 && *semi != ';')
		semi++;
	if (semi >= x->end || *semi != ';')
		return xml_fail(x, "unterminated entity");
	n = (size_t) (semi - x->p - 1);
	if (n == 2 && memcmp(x->p + 1, "lt", 2) == 0)
		io_sb_putc(sb, '<');
	else if (n == 2 && memcmp(x->p + 1, "gt", 2) == 0)
		io_sb_putc(sb, '>');
	else if (n == 3 && memcmp(x->p + 1, "amp", 3) == 0)
		io_sb_putc(sb, '&');
	else if (n == 4 && memcmp(x->p + 1, "quot", 4) == 0)
		io_sb_putc(sb, '"');
	else if (n == 4 && memcmp(x->p + 1, "apos", 4) == 0)
		io_sb_putc(sb, '\'');
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
		if (!put_utf8(sb, cp))
			return xml_fail(x, "invalid character reference");
	}
	else
		return xml_fail(x, "unknown entity");
	x->p = semi + 1;
	return 0;
}

void
io_xml_free(IoXmlNode *node)
{
	while (node != NULL)
	{
		IoXmlNode  *next = node->next;

		io_xml_free(node->children);
		free(node->name);
		free(node->text);
		free(node);
		node = next;
	}
}

/* Parse the element starting at x->p ('<' of its start tag). */
static IoXmlNode *
parse_element(XmlParser *x)
{
	IoXmlNode  *node;
	IoXmlNode **tail;
	const char *name_start;
	const char *local;
	size_t		name_len;
	IoStrBuf	text;

	if (++x->depth > XML_MAX_DEPTH)
	{
		xml_fail(x, "nesting too deep");
		return NULL;
	}
	x->p++;						/* '<' */
	name_start = x->p;
	while (x->p < x->end && is_name_char(*x->p))
		x->p++;
	name_len = (size_t) (x->p - name_start);
	if (name_len == 0)
	{
		xml_fail(x, "missing element name");
		return NULL;
	}
	local = memchr(name_start, ':', name_len);
	local = local ? local + 1 : name_start;

	node = calloc(1, sizeof(IoXmlNode));
	if (node == NULL)
	{
		io_set_error(x->err, IO_ERR_OUT_OF_MEMORY, 0, "out of memory");
		return NULL;
	}
	node->name = io_strndup(local, name_len - (size_t) (local - name_start));
	if (node->name == NULL)
		goto oom;

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
		{
			xml_fail(x, "invalid attribute");
			goto fail;
		}
		x->p++;
		skip_space(x);
		if (x->p >= x->end || (*x->p != '"' && *x->p != '\''))
		{
			xml_fail(x, "invalid attribute value");
			goto fail;
		}
		{
			char		q = *x->p++;

			while (x->p < x->end && *x->p != q)
			{
				if (*x->p == '<')
				{
					xml_fail(x, "'<' in attribute value");
					goto fail;
				}
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
		{
			xml_fail(x, "invalid empty-element tag");
			goto fail;
		}
		x->p++;
		node->text = io_strdup("");
		if (node->text == NULL)
			goto oom;
		x->depth--;
		return node;
	}
	x->p++;						/* '>' */

	/* content */
	io_sb_init(&text);
	tail = &node->children;
	for (;;)
	{
		if (x->p >= x->end)
		{
			io_sb_free(&text);
			goto bad_eof;
		}
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
				{
					io_sb_free(&text);
					xml_fail(x, "mismatched end tag");
					goto fail;
				}
				skip_space(x);
				if (x->p >= x->end || *x->p != '>')
				{
					io_sb_free(&text);
					xml_fail(x, "invalid end tag");
					goto fail;
				}
				x->p++;
				break;
			}
			else if (starts(x, "<!--"))
			{
				x->p += 4;
				if (!skip_past(x, "-->"))
				{
					io_sb_free(&text);
					goto bad_eof;
				}
			}
			else if (starts(x, "<![CDATA["))
			{
				const char *cd = x->p + 9;

				x->p = cd;
				if (!skip_past(x, "]]>"))
				{
					io_sb_free(&text);
					goto bad_eof;
				}
				io_sb_append(&text, cd, (size_t) (x->p - 3 - cd));
			}
			else if (starts(x, "<?"))
			{
				if (!skip_past(x, "?>"))
				{
					io_sb_free(&text);
					goto bad_eof;
				}
			}
			else if (starts(x, "<!"))
			{
				io_sb_free(&text);
				xml_fail(x, "declarations are not allowed");
				goto fail;
			}
			else
			{
				IoXmlNode  *child = parse_element(x);

				if (child == NULL)
				{
					io_sb_free(&text);
					goto fail;
				}
				*tail = child;
				tail = &child->next;
			}
		}
		else if (*x->p == '&')
		{
			if (decode_entity(x, &text) != 0)
			{
				io_sb_free(&text);
				goto fail;
			}
		}
		else
		{
			const char *s = x->p;

			while (x->p < x->end && *x->p != '<' && *x->p != '&')
				x->p++;
			io_sb_append(&text, s, (size_t) (x->p - s));
		}
	}
	if (text.data == NULL)
		io_sb_puts(&text, "");
	node->text = io_sb_steal(&text);
	if (node->text == NULL)
		goto oom;
	x->depth--;
	return node;

bad_eof:
	xml_fail(x, "unexpected end of document");
	goto fail;
oom:
	io_set_error(x->err, IO_ERR_OUT_OF_MEMORY, 0, "out of memory");
fail:
	io_xml_free(node);
	return NULL;
}

/* Parse a whole document: prolog, one root element, trailing misc. */
IoXmlNode *
io_xml_parse(const char *data, size_t len, IoError *err)
{
	XmlParser	x;
	IoXmlNode  *root = NULL;

	x.p = data;
	x.end = data + len;
	x.err = err;
	x.depth = 0;
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
			io_xml_free(root);
			return NULL;
		}
		else if (*x.p == '<' && root == NULL)
		{
			root = parse_element(&x);
			if (root == NULL)
				return NULL;
		}
		else
		{
			xml_fail(&x, root ? "content after the root element" :
					 "text before the root element");
			io_xml_free(root);
			return NULL;
		}
	}
	if (root == NULL)
	{
		xml_fail(&x, "no root element");
		return NULL;
	}
	return root;

eof:
	xml_fail(&x, "unexpected end of document");
	io_xml_free(root);
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
