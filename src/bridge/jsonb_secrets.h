/*-------------------------------------------------------------------------
 *
 * jsonb_secrets.h
 *	  Credentials in JSON documents stored or shown by tms: the io layer's
 *	  one list of credential-shaped names (io/util/secret_names.h), applied to a
 *	  jsonb document at every depth, keys and string values; and the
 *	  malloc'd copies of option values (credentials among them) that
 *	  outlive a transaction in a cached connection or an engine client.
 *
 *-------------------------------------------------------------------------
 */
#ifndef TMS_BRIDGE_SECRETS_H
#define TMS_BRIDGE_SECRETS_H

#include "postgres.h"

#include "utils/jsonb.h"

/*
 * The path ("a.b[2].c") of the first credential-shaped key, or of the
 * first string value holding a credential, in jb; NULL when there is
 * none.  *is_key tells which it was.  palloc'd.
 */
extern char *tms_jsonb_find_credential(Jsonb *jb, bool *is_key);

/* A malloc'd copy of s (NULL for NULL); raises when out of memory. */
extern char *tms_malloc_strdup(const char *s);

/* Overwrite a malloc'd secret, then free it; NULL-safe. */
extern void tms_free_secret(char *s);

#endif							/* TMS_BRIDGE_SECRETS_H */
