/*-------------------------------------------------------------------------
 *
 * secret_names.h
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
 *	  the cloud storage settings of Spark, Hadoop and Iceberg are among
 *	  them: fs.azure.*key*, every name with a "sas" word
 *	  (fs.azure.sas.*, adls.sas-token.*), gcs.oauth2.token, fs.gs.auth.*;
 *	- a string value holds a credential when it contains such a name
 *	  followed by "=" or ":" ("spark.hadoop.fs.s3a.secret.key=...",
 *	  "-Dpassword:x", a SAS URL's "&sig=..."), starts with an HTTP
 *	  authorization scheme ("Bearer ...", "Basic ..."), or holds a URL
 *	  with user info that is a login: "user:password@" in any URL,
 *	  any "user@" in an http(s), ftp(s) or ws(s) URL (an Azure
 *	  "abfss://container@account..." names a container, not a login;
 *	  "***@" is what a redacted login leaves, and no login either).
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

/*
 * Find the first login user info in value (len bytes) at or after from:
 * the bytes between "://" and the "@" ending a URL's user info, as above.
 * Returns true with [*start, *end) its span (the "@" at *end).  For
 * redacting a URL instead of hiding it whole.
 */
extern bool io_find_userinfo(const char *value, size_t len, size_t from,
							 size_t *start, size_t *end);

#endif							/* TMS_IO_SECRETS_H */
