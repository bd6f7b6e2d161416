/*-------------------------------------------------------------------------
 *
 * names.c
 *	  Catalog object names from SQL (names.h).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "mb/pg_wchar.h"

#include "bridge/names.h"
#include "io/io.h"

/* Check one level or table name of len bytes. */
static void
check_name(const char *what, const char *name, size_t len, const char *whole)
{
	if (len == 0 || (len == 1 && name[0] == '.') ||
		(len == 2 && name[0] == '.' && name[1] == '.'))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid %s \"%s\"", what, whole),
				 errdetail("A namespace level or table name cannot be empty, \".\" or \"..\".")));
	if (len > IO_MAX_NAME_BYTES)
		ereport(ERROR,
				(errcode(ERRCODE_NAME_TOO_LONG),
				 errmsg("%s is too long", what),
				 errdetail("It has %zu bytes; the limit is %d.", len, IO_MAX_NAME_BYTES)));
}

void
tms_check_table_name(const char *what, const char *name)
{
	size_t		len = strlen(name);

	/* the message quotes the name: never a megabyte of it */
	check_name(what, name, len, len > 64 ? "..." : name);
}

void
tms_check_namespace(const char *ns)
{
	const char *s = ns;
	const char *shown = strlen(ns) > 64 ? "..." : ns;

	/* levels are separated by "."; so no level can itself be "." or ".." */
	for (;;)
	{
		const char *dot = strchr(s, '.');

		check_name("namespace", s, dot ? (size_t) (dot - s) : strlen(s), shown);
		if (dot == NULL)
			break;
		s = dot + 1;
	}
}

char *
tms_namespace_to_io(const char *ns)
{
	char	   *r = pstrdup(ns);

	for (char *p = r; *p; p++)
		if (*p == '.')
			*p = IO_NS_SEP;
	return r;
}

char *
tms_namespace_from_io(const char *ns)
{
	char	   *r = pstrdup(ns);

	for (char *p = r; *p; p++)
		if (*p == IO_NS_SEP)
			*p = '.';
	return r;
}

bool
tms_glob_match(const char *p, const char *s)
{
	const char *star = NULL,
			   *back = NULL;

	while (*s)
	{
		int			sl = pg_mblen(s);

		if (*p == '?')
		{
			p++;
			s += sl;
		}
		else if (*p != '*' && *p != '\0' && pg_mblen(p) == sl &&
				 memcmp(p, s, sl) == 0)
		{
			p += sl;
			s += sl;
		}
		else if (*p == '*')
		{
			star = p++;
			back = s;
		}
		else if (star)
		{
			p = star + 1;
			back += pg_mblen(back);
			s = back;
		}
		else
			return false;
	}
	while (*p == '*')
		p++;
	return *p == '\0';
}
