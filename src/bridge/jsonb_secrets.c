/*-------------------------------------------------------------------------
 *
 * jsonb_secrets.c
 *	  Credentials in jsonb documents, and malloc'd copies of option values
 *	  (jsonb_secrets.h).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "lib/stringinfo.h"

#include "bridge/jsonb_secrets.h"
#include "io/util/secret_names.h"

/* One level of the walk: an object (the key being visited) or an array. */
typedef struct Level
{
	bool		array;
	int			index;
	char	   *key;
} Level;

#define MAX_DEPTH 64			/* jsonb nests deeper only pathologically */

static char *
path_of(Level *levels, int depth)
{
	StringInfoData b;

	initStringInfo(&b);
	for (int i = 0; i < depth; i++)
	{
		if (levels[i].array)
			appendStringInfo(&b, "[%d]", levels[i].index);
		else if (levels[i].key)
			appendStringInfo(&b, "%s%s", b.len ? "." : "", levels[i].key);
	}
	return b.len ? b.data : pstrdup("(top level)");
}

char *
tms_jsonb_find_credential(Jsonb *jb, bool *is_key)
{
	JsonbIterator *it = JsonbIteratorInit(&jb->root);
	JsonbValue	v;
	JsonbIteratorToken tok;
	Level		levels[MAX_DEPTH];
	int			depth = 0;

	while ((tok = JsonbIteratorNext(&it, &v, false)) != WJB_DONE)
	{
		switch (tok)
		{
			case WJB_BEGIN_OBJECT:
			case WJB_BEGIN_ARRAY:
				if (v.type == jbvArray && v.val.array.rawScalar)
					break;
				if (depth > 0 && levels[depth - 1].array)
					levels[depth - 1].index++;
				if (depth >= MAX_DEPTH)
				{
					*is_key = false;
					return pstrdup("(nested too deeply to check)");
				}
				levels[depth].array = (tok == WJB_BEGIN_ARRAY);
				levels[depth].index = -1;
				levels[depth].key = NULL;
				depth++;
				break;
			case WJB_END_OBJECT:
			case WJB_END_ARRAY:
				if (depth > 0)
					depth--;
				break;
			case WJB_KEY:
				levels[depth - 1].key = pnstrdup(v.val.string.val, v.val.string.len);
				if (io_secret_key(v.val.string.val, v.val.string.len))
				{
					*is_key = true;
					return path_of(levels, depth);
				}
				break;
			case WJB_ELEM:
			case WJB_VALUE:
				if (tok == WJB_ELEM && depth > 0)
					levels[depth - 1].index++;
				if (v.type == jbvString &&
					io_secret_value(v.val.string.val, v.val.string.len))
				{
					*is_key = false;
					return path_of(levels, depth);
				}
				break;
			default:
				break;
		}
	}
	return NULL;
}

char *
tms_malloc_strdup(const char *s)
{
	char	   *p;

	if (s == NULL)
		return NULL;
	p = strdup(s);
	if (p == NULL)
		ereport(ERROR, (errcode(ERRCODE_OUT_OF_MEMORY), errmsg("out of memory")));
	return p;
}

void
tms_free_secret(char *s)
{
	if (s != NULL)
	{
		explicit_bzero(s, strlen(s));
		free(s);
	}
}
