/*-------------------------------------------------------------------------
 *
 * names.h
 *	  Names of catalog objects as tms takes them from SQL: checks, the
 *	  namespace notation, and the glob patterns of object groups.
 *
 * A namespace is written in SQL with "." between its levels ("db.schema");
 * the io layer joins levels with IO_NS_SEP.  A namespace level or table
 * name is refused when it is empty, "." or "..", or longer than
 * IO_MAX_NAME_BYTES: no catalog can hold such a name, and "." or ".."
 * could otherwise change the target of a request.
 *
 * Group patterns are globs: "*" any run of characters, "?" exactly one
 * character (not byte: multibyte characters count once), everything else
 * literal.  tms_glob_match() is the only implementation; SQL reaches it
 * through tms._glob_match().
 *
 *-------------------------------------------------------------------------
 */
#ifndef TMS_BRIDGE_NAMES_H
#define TMS_BRIDGE_NAMES_H

#include "postgres.h"

/*
 * Raise unless name is a valid table name (what: "table name" etc., for
 * the message): 22023 for empty, "." and "..", 42622 when too long.
 */
extern void tms_check_table_name(const char *what, const char *name);

/* The same for every level of a dotted namespace. */
extern void tms_check_namespace(const char *ns);

/* A dotted namespace in io form (levels separated by IO_NS_SEP); and back. */
extern char *tms_namespace_to_io(const char *ns);
extern char *tms_namespace_from_io(const char *ns);

/* Does s match the glob pattern (database encoding)? */
extern bool tms_glob_match(const char *pattern, const char *s);

#endif							/* TMS_BRIDGE_NAMES_H */
