/*-------------------------------------------------------------------------
 *
 * options_json.c
 *	  The JSON reader of the engine options: RFC 8259 values into EngJson
 *	  trees that keep each number's text as written (so that a big integer
 *	  is range-checked, never rounded) and each object's member order.
 *
 * Rules: strings are valid UTF-8 (escapes decoded, surrogate pairs
 * joined, a lone surrogate or \u0000 refused); duplicate keys refused;
 * nesting at most ENG_MAX_JSON_DEPTH; nothing but whitespace after the
 * value.  Errors are ENGINE_ERR_INVALID_VALUE with the byte offset in the
 * detail, or ENGINE_ERR_OUT_OF_MEMORY.  Plain C.
 *
 * src/engine/options_json.c
 *
 *-------------------------------------------------------------------------
 */
#include <stdlib.h>
#include <string.h>

#include "engine/statement_int.h"

typedef struct JsonParser
{
	const char *s;
	size_t		len;
	size_t		pos;
	TmsError   *err;
	bool		failed;
} JsonParser;

static EngJson *parse_value(JsonParser *p, int depth);

static void
json_fail(JsonParser *p, const char *what)
{
	if (p->failed)
		return;
	p->failed = true;
	tms_error_set(p->err, ENGINE_ERR_INVALID_VALUE, "options are not valid JSON");
	tms_error_detail(p->err, "%s at byte %zu.", what, p->pos);
}

static void
json_oom(JsonParser *p)
{
	if (p->failed)
		return;
	p->failed = true;
	tms_error_set(p->err, ENGINE_ERR_OUT_OF_MEMORY, "out of memory");
}

static void
skip_ws(JsonParser *p)
{
	while (p->pos < p->len)
	{
		char		c = p->s[p->pos];

		if (c != ' ' && c != '\t' && c != '\n' && c != '\r')
			break;
		p->pos++;
	}
}

static EngJson *
new_value(JsonParser *p, EngJsonKind kind)
{
	EngJson    *v = io_calloc(1, sizeof(EngJson));

	if (v == NULL)
		json_oom(p);
	else
		v->kind = kind;
	return v;
}

void
eng_json_free(EngJson *v)
{
	size_t		i;

	if (v == NULL)
		return;
	for (i = 0; i < v->nitems; i++)
	{
		if (v->keys)
			io_free(v->keys[i]);
		eng_json_free(v->items[i]);
	}
	io_free(v->keys);
	io_free(v->items);
	io_free(v->str);
	io_free(v);
}

const char *
eng_json_kind_name(EngJsonKind kind)
{
	switch (kind)
	{
		case EJ_NULL:
			return "null";
		case EJ_TRUE:
		case EJ_FALSE:
			return "a boolean";
		case EJ_NUMBER:
			return "a number";
		case EJ_STRING:
			return "a string";
		case EJ_ARRAY:
			return "an array";
		case EJ_OBJECT:
			return "an object";
	}
	return "a value";
}

static int
hex4(const char *s)
{
	int			v = 0;
	int			i;

	for (i = 0; i < 4; i++)
	{
		char		c = s[i];

		v <<= 4;
		if (c >= '0' && c <= '9')
			v |= c - '0';
		else if (c >= 'a' && c <= 'f')
			v |= c - 'a' + 10;
		else if (c >= 'A' && c <= 'F')
			v |= c - 'A' + 10;
		else
			return -1;
	}
	return v;
}

static void
put_utf8(IoStrBuf *b, unsigned cp)
{
	char		out[4];

	if (cp < 0x80)
	{
		out[0] = (char) cp;
		io_sb_append(b, out, 1);
	}
	else if (cp < 0x800)
	{
		out[0] = (char) (0xC0 | (cp >> 6));
		out[1] = (char) (0x80 | (cp & 0x3F));
		io_sb_append(b, out, 2);
	}
	else if (cp < 0x10000)
	{
		out[0] = (char) (0xE0 | (cp >> 12));
		out[1] = (char) (0x80 | ((cp >> 6) & 0x3F));
		out[2] = (char) (0x80 | (cp & 0x3F));
		io_sb_append(b, out, 3);
	}
	else
	{
		out[0] = (char) (0xF0 | (cp >> 18));
		out[1] = (char) (0x80 | ((cp >> 12) & 0x3F));
		out[2] = (char) (0x80 | ((cp >> 6) & 0x3F));
		out[3] = (char) (0x80 | (cp & 0x3F));
		io_sb_append(b, out, 4);
	}
}

/* A string at p->pos (the opening quote): its decoded text, or NULL. */
static char *
parse_string(JsonParser *p, size_t *lenp)
{
	IoStrBuf	b;
	size_t		start;

	io_sb_init(&b);
	p->pos++;					/* the opening quote */
	for (;;)
	{
		unsigned char c;

		if (p->pos >= p->len)
		{
			json_fail(p, "unterminated string");
			break;
		}
		c = (unsigned char) p->s[p->pos];
		if (c == '"')
		{
			p->pos++;
			*lenp = b.len;
			if (b.oom)
			{
				json_oom(p);
				break;
			}
			if (b.data == NULL)
				io_sb_append(&b, "", 0);
			return io_sb_steal(&b);
		}
		if (c < 0x20)
		{
			json_fail(p, "control character in string");
			break;
		}
		if (c != '\\')
		{
			/* a run of plain bytes, checked as UTF-8 */
			start = p->pos;
			while (p->pos < p->len && p->s[p->pos] != '"' && p->s[p->pos] != '\\' &&
				   (unsigned char) p->s[p->pos] >= 0x20)
				p->pos++;
			if (!eng_utf8_valid(p->s + start, p->pos - start))
			{
				p->pos = start;
				json_fail(p, "invalid UTF-8 in string");
				break;
			}
			io_sb_append(&b, p->s + start, p->pos - start);
			continue;
		}
		/* an escape */
		if (p->pos + 1 >= p->len)
		{
			json_fail(p, "unterminated string");
			break;
		}
		c = (unsigned char) p->s[p->pos + 1];
		p->pos += 2;
		switch (c)
		{
			case '"':
			case '\\':
			case '/':
				io_sb_putc(&b, (char) c);
				break;
			case 'b':
				io_sb_putc(&b, '\b');
				break;
			case 'f':
				io_sb_putc(&b, '\f');
				break;
			case 'n':
				io_sb_putc(&b, '\n');
				break;
			case 'r':
				io_sb_putc(&b, '\r');
				break;
			case 't':
				io_sb_putc(&b, '\t');
				break;
			case 'u':
				{
					int			hi,
								lo;
					unsigned	cp;

					if (p->pos + 4 > p->len || (hi = hex4(p->s + p->pos)) < 0)
					{
						json_fail(p, "invalid \\u escape");
						goto fail;
					}
					p->pos += 4;
					cp = (unsigned) hi;
					if (hi >= 0xDC00 && hi <= 0xDFFF)
					{
						json_fail(p, "lone surrogate in \\u escape");
						goto fail;
					}
					if (hi >= 0xD800 && hi <= 0xDBFF)
					{
						if (p->pos + 6 > p->len || p->s[p->pos] != '\\' ||
							p->s[p->pos + 1] != 'u' ||
							(lo = hex4(p->s + p->pos + 2)) < 0xDC00 || lo > 0xDFFF)
						{
							json_fail(p, "lone surrogate in \\u escape");
							goto fail;
						}
						p->pos += 6;
						cp = 0x10000 + (((unsigned) hi - 0xD800) << 10) +
							((unsigned) lo - 0xDC00);
					}
					if (cp == 0)
					{
						json_fail(p, "\\u0000 in string");
						goto fail;
					}
					put_utf8(&b, cp);
					break;
				}
			default:
				p->pos -= 2;
				json_fail(p, "invalid escape in string");
				goto fail;
		}
		if (b.len > ENG_MAX_VALUE_BYTES)
		{
			json_fail(p, "string too long");
			break;
		}
	}
fail:
	io_sb_free(&b);
	return NULL;
}

static EngJson *
parse_number(JsonParser *p)
{
	size_t		start = p->pos;
	bool		integer = true;
	EngJson    *v;

	if (p->pos < p->len && p->s[p->pos] == '-')
		p->pos++;
	if (p->pos >= p->len || p->s[p->pos] < '0' || p->s[p->pos] > '9')
	{
		json_fail(p, "invalid number");
		return NULL;
	}
	if (p->s[p->pos] == '0')
		p->pos++;
	else
		while (p->pos < p->len && p->s[p->pos] >= '0' && p->s[p->pos] <= '9')
			p->pos++;
	if (p->pos < p->len && p->s[p->pos] == '.')
	{
		integer = false;
		p->pos++;
		if (p->pos >= p->len || p->s[p->pos] < '0' || p->s[p->pos] > '9')
		{
			json_fail(p, "invalid number");
			return NULL;
		}
		while (p->pos < p->len && p->s[p->pos] >= '0' && p->s[p->pos] <= '9')
			p->pos++;
	}
	if (p->pos < p->len && (p->s[p->pos] == 'e' || p->s[p->pos] == 'E'))
	{
		integer = false;
		p->pos++;
		if (p->pos < p->len && (p->s[p->pos] == '+' || p->s[p->pos] == '-'))
			p->pos++;
		if (p->pos >= p->len || p->s[p->pos] < '0' || p->s[p->pos] > '9')
		{
			json_fail(p, "invalid number");
			return NULL;
		}
		while (p->pos < p->len && p->s[p->pos] >= '0' && p->s[p->pos] <= '9')
			p->pos++;
	}
	if (p->pos - start > 4096)
	{
		json_fail(p, "number too long");
		return NULL;
	}
	v = new_value(p, EJ_NUMBER);
	if (v == NULL)
		return NULL;
	v->integer = integer;
	v->len = p->pos - start;
	v->str = io_malloc(v->len + 1);
	if (v->str == NULL)
	{
		json_oom(p);
		eng_json_free(v);
		return NULL;
	}
	memcpy(v->str, p->s + start, v->len);
	v->str[v->len] = '\0';
	return v;
}

/* Append item (and key) to container v; false when out of memory. */
static bool
add_item(JsonParser *p, EngJson *v, char *key, EngJson *item)
{
	EngJson   **items = io_realloc(v->items, (v->nitems + 1) * sizeof(EngJson *));

	if (items == NULL)
		goto oom;
	v->items = items;
	if (v->kind == EJ_OBJECT)
	{
		char	  **keys = io_realloc(v->keys, (v->nitems + 1) * sizeof(char *));

		if (keys == NULL)
			goto oom;
		v->keys = keys;
		v->keys[v->nitems] = key;
	}
	v->items[v->nitems++] = item;
	return true;
oom:
	json_oom(p);
	io_free(key);
	eng_json_free(item);
	return false;
}

static EngJson *
parse_container(JsonParser *p, int depth, bool object)
{
	EngJson    *v = new_value(p, object ? EJ_OBJECT : EJ_ARRAY);
	char		close = object ? '}' : ']';

	if (v == NULL)
		return NULL;
	if (depth >= ENG_MAX_JSON_DEPTH)
	{
		json_fail(p, "nested too deeply");
		goto fail;
	}
	p->pos++;					/* the opening bracket */
	skip_ws(p);
	if (p->pos < p->len && p->s[p->pos] == close)
	{
		p->pos++;
		return v;
	}
	for (;;)
	{
		char	   *key = NULL;
		EngJson    *item;

		if (v->nitems >= ENG_MAX_LIST_ITEMS)
		{
			json_fail(p, "too many items");
			goto fail;
		}
		skip_ws(p);
		if (object)
		{
			size_t		klen;
			size_t		i;
			size_t		kpos = p->pos;

			if (p->pos >= p->len || p->s[p->pos] != '"')
			{
				json_fail(p, "expected a member name");
				goto fail;
			}
			key = parse_string(p, &klen);
			if (key == NULL)
				goto fail;
			for (i = 0; i < v->nitems; i++)
				if (strcmp(v->keys[i], key) == 0)
				{
					p->pos = kpos;
					json_fail(p, "duplicate member name");
					io_free(key);
					goto fail;
				}
			skip_ws(p);
			if (p->pos >= p->len || p->s[p->pos] != ':')
			{
				json_fail(p, "expected ':'");
				io_free(key);
				goto fail;
			}
			p->pos++;
		}
		item = parse_value(p, depth + 1);
		if (item == NULL)
		{
			io_free(key);
			goto fail;
		}
		if (!add_item(p, v, key, item))
			goto fail;
		skip_ws(p);
		if (p->pos < p->len && p->s[p->pos] == ',')
		{
			p->pos++;
			continue;
		}
		if (p->pos < p->len && p->s[p->pos] == close)
		{
			p->pos++;
			return v;
		}
		json_fail(p, object ? "expected ',' or '}'" : "expected ',' or ']'");
		goto fail;
	}
fail:
	eng_json_free(v);
	return NULL;
}

static bool
match_word(JsonParser *p, const char *w)
{
	size_t		n = strlen(w);

	if (p->len - p->pos >= n && memcmp(p->s + p->pos, w, n) == 0)
	{
		p->pos += n;
		return true;
	}
	return false;
}

static EngJson *
parse_value(JsonParser *p, int depth)
{
	char		c;

	skip_ws(p);
	if (p->pos >= p->len)
	{
		json_fail(p, "unexpected end");
		return NULL;
	}
	c = p->s[p->pos];
	if (c == '{')
		return parse_container(p, depth, true);
	if (c == '[')
		return parse_container(p, depth, false);
	if (c == '"')
	{
		size_t		len;
		char	   *s = parse_string(p, &len);
		EngJson    *v;

		if (s == NULL)
			return NULL;
		v = new_value(p, EJ_STRING);
		if (v == NULL)
		{
			io_free(s);
			return NULL;
		}
		v->str = s;
		v->len = len;
		return v;
	}
	if (c == '-' || (c >= '0' && c <= '9'))
		return parse_number(p);
	if (match_word(p, "true"))
		return new_value(p, EJ_TRUE);
	if (match_word(p, "false"))
		return new_value(p, EJ_FALSE);
	if (match_word(p, "null"))
		return new_value(p, EJ_NULL);
	json_fail(p, "unexpected character");
	return NULL;
}

EngJson *
eng_json_parse(const char *text, size_t len, TmsError *err)
{
	JsonParser	p;
	EngJson    *v;

	p.s = text;
	p.len = len;
	p.pos = 0;
	p.err = err;
	p.failed = false;
	v = parse_value(&p, 0);
	if (v == NULL)
	{
		if (!p.failed)
			json_fail(&p, "invalid value");
		return NULL;
	}
	skip_ws(&p);
	if (p.pos != p.len)
	{
		json_fail(&p, "text after the value");
		eng_json_free(v);
		return NULL;
	}
	return v;
}
