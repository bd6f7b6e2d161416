/*-------------------------------------------------------------------------
 *
 * secrets.h
 *	  The one list of credential-shaped names in tms, and the checks built
 *	  on it.
 *
 * tms keeps credentials only in user mappings and owner-only tables.
 * Whatever else it stores or shows (rule options, a catalog's
 * configuration, a job's storage description) is checked with these
 * functions, at every depth of a document, keys and values alike:
 *
 *	- a key is credential-shaped when, lowercased and with ".", "_" and " "
 *	  read as "-", it contains one of the words of the list (password,
 *	  secret, token, credential, access-key, private-key, api-key, ...);
 *	- a string value holds a credential when it contains such a name
 *	  followed by "=" or ":" ("spark.hadoop.fs.s3a.secret.key=...",
 *	  "-Dpassword:x"), or starts with an HTTP authorization scheme
 *	  ("Bearer ...", "Basic ...").
 *
 * Plain C: no PostgreSQL header, no allocation.
 *
 *-------------------------------------------------------------------------
 */
#ifndef TMS_IO_SECRETS_H
#define TMS_IO_SECRETS_H

#include <stdbool.h>
#include <stddef.h>

/* Is key (len bytes) credential-shaped? */
extern bool io_secret_key(const char *key, size_t len);

/* Does a string value (len bytes) hold a credential? */
extern bool io_secret_value(const char *value, size_t len);

#endif							/* TMS_IO_SECRETS_H */
