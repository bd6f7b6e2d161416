/*-------------------------------------------------------------------------
 *
 * misc_sql.c
 *	  Small SQL functions through which the extension script uses the one
 *	  implementation of a rule kept in C: glob matching of object groups
 *	  (src/bridge/names.c) and the credential check of JSON documents
 *	  (src/bridge/jsonb_secrets.c).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "fmgr.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"

#include "bridge/names.h"
#include "bridge/jsonb_secrets.h"

PG_FUNCTION_INFO_V1(tms_glob_match_sql);
PG_FUNCTION_INFO_V1(tms_find_credential_sql);

/* tms._glob_match(pattern, s) -> boolean */
Datum
tms_glob_match_sql(PG_FUNCTION_ARGS)
{
	char	   *pattern = text_to_cstring(PG_GETARG_TEXT_PP(0));
	char	   *s = text_to_cstring(PG_GETARG_TEXT_PP(1));

	PG_RETURN_BOOL(tms_glob_match(pattern, s));
}

/*
 * tms._find_credential(doc jsonb) -> text: "key PATH" for the first
 * credential-shaped key, "value of PATH" for the first value holding a
 * credential, or NULL.
 */
Datum
tms_find_credential_sql(PG_FUNCTION_ARGS)
{
	Jsonb	   *jb = PG_GETARG_JSONB_P(0);
	bool		is_key;
	char	   *path = tms_jsonb_find_credential(jb, &is_key);

	if (path == NULL)
		PG_RETURN_NULL();
	PG_RETURN_TEXT_P(cstring_to_text(psprintf(is_key ? "key %s" : "value of %s", path)));
}
