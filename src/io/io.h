/*-------------------------------------------------------------------------
 *
 * io.h
 *		The outside world of tms: HTTP over libcurl, the Iceberg REST
 *		catalog client, object storage (file:// and s3://) with AWS SigV4
 *		signing, bulk deletes with several requests in flight and the
 *		request window (AIMD) of a storage target, the one rule for
 *		storage locations (location.c), the FileIO router through which
 *		src/iceberg reads (fileio.h), and webhook POSTs (webhook_post.c).
 *
 * This layer is plain C.  It includes no PostgreSQL header, never calls
 * ereport/elog, never longjmps and never exits: every function reports
 * failure as a value (a TmsError filled by the callee).  Everything it
 * returns comes from io_malloc (io/util/io_memory.h: the process's
 * allocator, inside PostgreSQL a memory context; "malloc'd" in the
 * comments of src/io, src/iceberg and src/engine means that) and is freed
 * by the matching io_*_free function or io_free, never free(); callers
 * inside the server copy what they need into palloc'd memory and free the
 * io result at once, or run the call in a scope whose memory an error
 * frees (src/bridge/plain_memory.h).
 *
 * Interrupts: every operation that can block takes an IoHttpOptions whose
 * "interrupted" callback is polled at least every IO_POLL_INTERVAL_MS
 * while waiting on the network (DNS, connect, TLS, transfer, backoff
 * sleeps).  When it returns non-zero the operation ends with
 * IO_ERR_INTERRUPTED.  The callback must only read state (inside
 * PostgreSQL: return InterruptPending); the caller then runs its own
 * interrupt processing after the io call returned.  It is never called
 * from inside libcurl, only between waits, so it may also end the
 * process (inside PostgreSQL: when the postmaster died).
 *
 * Waits: the options may also say how to sleep (sleep_ms: the backoff
 * and Retry-After pauses, in slices of at most IO_POLL_INTERVAL_MS;
 * inside PostgreSQL a WaitLatch that ends on postmaster death) and whom to
 * tell that a network wait begins and ends (waiting: around every
 * curl_multi_poll; inside PostgreSQL the wait event pg_stat_activity
 * shows).  Both are optional; the same rules as for "interrupted" apply.
 *
 * Secrets (bearer tokens, client secrets, S3 keys) never appear in an
 * TmsError message or detail.
 *
 * Bounds: a response body is capped after decompression
 * (max_response_bytes), a JSON parse by the memory jansson takes
 * (max_json_bytes, counted once io_init() ran), an XML parse to twice the
 * size of its document (s3_xml.c counts its own allocations), names and locations are
 * checked before any request, and local files are confined to the
 * configured roots without following symbolic links.
 *
 * Dependencies go one way: src/iceberg includes io/storage/fileio.h (and
 * io/util/jsonmem.h), this layer includes no header of another layer.
 *
 * src/io/io.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef TMS_IO_H
#define TMS_IO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "io/io_error.h"
#include "io/storage/fileio.h"
#include "io/util/io_memory.h"

/*
 * Initialise the io layer: installs the counting jansson allocators that
 * bound the memory of JSON parsing (jsonmem.h).  Call it once per process
 * before anything else touches jansson: first thing in _PG_init, first
 * thing in a unit driver's main or a fuzz target.  Idempotent.  Without
 * it every JSON parse of the catalog client and of src/iceberg fails
 * (IO_ERR_INTERNAL, ICEBERG_ERR_INVALID_ARGUMENT) instead of running
 * unbounded.  (The budget mechanism itself is in jsonmem.h.)
 */
extern void io_init(void);

/* How often a blocked operation checks the interrupt callback. */
#define IO_POLL_INTERVAL_MS 50

/* Separator between namespace levels in every namespace string of this API. */
#define IO_NS_SEP '\x1f'

/*
 * Longest table name or namespace level the catalog client sends, in
 * bytes.  Longer names, empty ones, "." and ".." are refused with
 * IO_ERR_INVALID_ARGUMENT before any request: a name can never change
 * the target of a request.
 */
#define IO_MAX_NAME_BYTES 1024

/* Errors: TmsError and IoErrorCode are in io_error.h. */

/* ----------------------------------------------------------------
 * HTTP options shared by the catalog client and S3
 * ----------------------------------------------------------------
 */
typedef int (*IoInterruptFn) (void *arg);

/* Sleep up to ms (returning early is fine: the caller sleeps again). */
typedef void (*IoSleepFn) (void *arg, long ms);

/* A network wait begins (true) or ends (false). */
typedef void (*IoWaitingFn) (void *arg, bool waiting);

/*
 * What one HTTP exchange did, as an observer (IoHttpOptions.observe) is
 * told: once per attempt whose transfer ended, with a response or with a
 * transport error (an interrupted transfer is not observed).  Retries of a
 * request are observed one by one.
 */
typedef struct IoHttpObservation
{
	const char *what;			/* the request's subject: "catalog", "S3", ... */
	const char *method;			/* "GET", "POST", ... */
	int			attempt;		/* 0: the first; n: the n-th retry */
	long		status;			/* the HTTP status; 0: no response */
	IoErrorCode error;			/* IO_OK with a response, else why none */
	int64_t		elapsed_us;		/* the transfer, from its start to its end */
} IoHttpObservation;

/*
 * An observer runs in the middle of the io layer's work: it must not
 * block, longjmp, allocate from the caller's allocator or call back into
 * this layer (inside PostgreSQL: atomics on shared counters, no more).
 */
typedef void (*IoHttpObserveFn) (void *arg, const IoHttpObservation *obs);

typedef struct IoHttpOptions
{
	long		connect_timeout_ms; /* 0: 10 s */
	long		request_timeout_ms; /* whole request, 0: 60 s */
	int			retries;		/* extra attempts for idempotent requests; <0:
								 * 2 */
	long		retry_base_ms;	/* first backoff, 0: 200 ms (doubles, jitter) */
	size_t		max_response_bytes; /* body after Content-Encoding is decoded;
									 * 0: 64 MiB */
	size_t		max_json_bytes; /* memory one JSON parse may take (jansson's
								 * tree and what is built from it); 0: 256 MiB */
	const char *ca_file;		/* PEM bundle, NULL: system default */
	const char *ca_path;		/* directory of CA certs, NULL: default */
	IoInterruptFn interrupted;	/* may be NULL */
	void	   *interrupt_arg;	/* also the argument of sleep_ms, waiting */
	IoSleepFn	sleep_ms;		/* may be NULL: nanosleep */
	IoWaitingFn waiting;		/* may be NULL */
	IoHttpObserveFn observe;	/* each exchange, may be NULL */
	void	   *observe_arg;
} IoHttpOptions;

/* Free libcurl's per-process state (cached connections).  Optional. */
extern void io_http_shutdown(void);

/* ----------------------------------------------------------------
 * Small result types
 * ----------------------------------------------------------------
 */
typedef struct IoKeyValue
{
	char	   *key;
	char	   *value;
} IoKeyValue;

typedef struct IoStringList
{
	char	  **items;
	size_t		n;
} IoStringList;

extern void io_string_list_free(IoStringList *list);

/* ----------------------------------------------------------------
 * AWS Signature Version 4
 * ----------------------------------------------------------------
 */
typedef struct IoHeader
{
	const char *name;
	const char *value;
} IoHeader;

/*
 * The names that tell one V4 signing dialect from another: AWS's
 * (io_sigv4_aws) and Google Cloud Storage's for HMAC keys (io_sigv4_goog,
 * https://cloud.google.com/storage/docs/authentication/signatures).  The
 * algorithm is the same.
 */
typedef struct IoSigV4Dialect
{
	const char *algorithm;		/* "AWS4-HMAC-SHA256" */
	const char *key_prefix;		/* of the secret in the signing key: "AWS4" */
	const char *terminator;		/* of the scope: "aws4_request" */
	const char *header_prefix;	/* "x-amz": x-amz-date, x-amz-content-sha256 */
	const char *param_prefix;	/* "X-Amz": X-Amz-Date, X-Amz-Signature */
} IoSigV4Dialect;

extern const IoSigV4Dialect io_sigv4_aws;
extern const IoSigV4Dialect io_sigv4_goog;

typedef struct IoSigV4Input
{
	const IoSigV4Dialect *dialect;	/* NULL: io_sigv4_aws */
	const char *method;
	const char *path;			/* path as sent on the wire (no query) */
	const char *query;			/* raw query after '?', or NULL */
	const IoHeader *headers;	/* every header to sign, host included */
	size_t		nheaders;
	const char *payload_hash;	/* hex sha256 of the body (or
								 * UNSIGNED-PAYLOAD) */
	const char *access_key_id;
	const char *secret_access_key;
	const char *session_token;	/* NULL: none */
	const char *region;
	const char *service;
	const char *amz_date;		/* "YYYYMMDDTHHMMSSZ" */
	bool		normalize_path; /* remove dot segments, merge slashes */
	bool		double_encode_path; /* true except for S3 */
	bool		sign_session_token; /* false: attach token after signing */
	bool		add_content_sha256; /* header mode: sign x-amz-content-sha256 */
	bool		query_mode;		/* presigned URL instead of Authorization */
	long		expires_seconds;	/* query mode only */
} IoSigV4Input;

typedef struct IoSigV4Output
{
	char	   *canonical_request;
	char	   *string_to_sign;
	char		signature[65];
	char	   *signed_headers;
	/* header mode: headers the caller must add (Authorization last) */
	IoKeyValue *add_headers;
	size_t		nadd_headers;
	/* query mode: the full query string to send (unordered, signed) */
	char	   *presigned_query;
} IoSigV4Output;

/*
 * Sign a request.  Returns 0 and fills *out (free with io_sigv4_free), or
 * -1 with *err set.
 */
extern int	io_sigv4_sign(const IoSigV4Input *in, IoSigV4Output *out, TmsError *err);
extern void io_sigv4_free(IoSigV4Output *out);

/*
 * Can s be a region or service name of a signature's scope ("us-east-1",
 * "glue", "s3tables", "execute-api", "auto")?  1 to 64 letters, digits,
 * '-', '_' and '.': nothing that could end a host name, start a path or
 * split the scope.
 */
extern bool io_sigv4_scope_valid(const char *s);

/* Format t as "YYYYMMDDTHHMMSSZ" (UTC) into buf[17]. */
extern void io_amz_date(time_t t, char *buf);

/* Lowercase hex sha256 of data into hex[65]. */
extern void io_sha256_hex(const void *data, size_t len, char *hex);

/*
 * Percent-encode per RFC 3986 (unreserved characters kept; '/' kept when
 * keep_slash).  Returns malloc'd text or NULL when out of memory.
 */
extern char *io_uri_encode(const char *s, size_t len, bool keep_slash);

/* The value of one hex digit (either case), or -1 when c is not one. */
extern int	io_hex_value(int c);

/*
 * Civil dates (io_base.c): the days since 1970-01-01 of year y, month m
 * (1-12), day d (1-31) of the proleptic Gregorian calendar, and back.
 */
extern int64_t io_days_from_civil(int64_t y, int m, int d);
extern void io_civil_from_days(int64_t days, int64_t *y, int *m, int *d);

/* ----------------------------------------------------------------
 * Locations: the one rule for paths (location.c)
 * ----------------------------------------------------------------
 */

/*
 * The canonical form of a storage location.  Returns 0 with *out (malloc'd)
 * or -1 with *err (IO_ERR_INVALID_ARGUMENT and a message saying why, or
 * IO_ERR_OUT_OF_MEMORY).
 *
 *	s3://b/k, s3a://b/k, s3n://b/k (scheme in any case)	->	"s3://b/k"
 *		(the bucket is non-empty, of letters, digits, '.', '-', '_')
 *	abfs[s]://c@a.dfs.D/k, wasb[s]://c@a.blob.D/k, abfs://c@a/k	->
 *		"abfs://c@a.dfs.D/k" (Azure: the container c of account a, the
 *		host in lower case, D "core.windows.net" when only a is given)
 *	gs://b/k (scheme in any case)				->	"gs://b/k"
 *		(the bucket has 3 to 222 lowercase letters, digits, '.', '-', '_')
 *	/abs, file:/abs, file:///abs, file://localhost/abs	->	"/abs"
 *	a/b, ./a/b, file:a/b, file://host/a/b			->	relative_root + "/" + rest
 *		(host other than localhost: old local writers such as pyiceberg
 *		write "file://host/rest" for relative warehouses; relative_root
 *		must itself be an absolute file location, else an error)
 *
 * Repeated slashes of file paths are squeezed (S3 keys are kept as they
 * are).  A "." or ".." segment anywhere is refused, never resolved; other
 * schemes and the empty string are refused.  Nothing is percent-decoded:
 * "%2e%2e" is a name of five characters.  The result is idempotent:
 * canonical(canonical(x)) == canonical(x).
 */
extern int	io_location_canonical(const char *path, const char *relative_root,
								  char **out, TmsError *err);

/*
 * True when path lies strictly below root at a '/' boundary.  Both must be
 * canonical.  "s3://b/wh2/x" is not under "s3://b/wh"; a path equal to
 * the root is not under it; the root may or may not end in '/'.
 */
extern bool io_location_under(const char *path, const char *root);

/* ----------------------------------------------------------------
 * Storage: file:// and plain paths, s3:// s3a:// s3n://, Azure (abfs[s]://
 * wasb[s]://, through the Blob service REST API), gs://
 * ----------------------------------------------------------------
 */
typedef struct IoStorageConfig
{
	const char *s3_endpoint;	/* "http://127.0.0.1:4568"; NULL: AWS */
	const char *s3_region;		/* NULL: us-east-1; letters, digits, -_. */
	int			s3_path_style;	/* 1 path style, 0 virtual host, -1 auto */
	const char *s3_access_key_id;
	const char *s3_secret_access_key;
	const char *s3_session_token;
	bool		s3_credentials_vended;	/* the keys are a catalog's (set by
										 * io_storage_config_apply) */
	int64_t		s3_credentials_expire_ms;	/* Unix ms, 0: unknown */
	int			s3_list_page_size;	/* ListObjectsV2 max-keys; 0: 1000 */

	/*
	 * Google Cloud Storage (gs://, storage_gcs.c).  One way to authenticate
	 * is used, the first of: a vended token, HMAC keys (V4 signatures, XML
	 * API only), a bearer token, a service account key (its JWT exchanged for
	 * tokens at the key's token_uri); none: anonymous.
	 */
	const char *gcs_endpoint;	/* NULL: https://storage.googleapis.com */
	const char *gcs_hmac_access_id;
	const char *gcs_hmac_secret;
	const char *gcs_oauth2_token;	/* an OAuth2 access token */
	const char *gcs_service_account_key;	/* the JSON key's text */
	bool		gcs_credentials_vended; /* the token is a catalog's (set by
										 * io_storage_config_apply) */
	int64_t		gcs_token_expire_ms;	/* Unix ms, 0: unknown */
	size_t		gcs_upload_part_bytes;	/* uploads larger than this go as an
										 * XML multipart upload of parts this
										 * large; 0: 32 MiB */

	/*
	 * The local directories tms may touch (absolute, canonical: no "." or
	 * ".." segment).  Every local read, size, write, list and delete is
	 * IO_ERR_FORBIDDEN ("path ... is outside the allowed locations", the same
	 * whether the file exists or not) unless the path lies strictly below one
	 * of them; none configured: no local access at all.  Below a root no
	 * symbolic link is ever followed (the root itself may be one: it is
	 * resolved with realpath()).
	 */
	const char *const *local_roots;
	size_t		nlocal_roots;
	IoHttpOptions http;

	/*
	 * Azure Blob storage.  The endpoint overrides
	 * "https://<account>.blob.<domain>": requests go to
	 * "<endpoint>/<account>/<container>/<blob>" (Azurite's path style).  A
	 * request for an account is authorised by, in this order: a SAS token the
	 * catalog vended for the account, the shared key (base64, SharedKey
	 * signing), the SAS token, a bearer token of the OAuth2 client
	 * credentials (tenant, client id and secret; the token endpoint
	 * azure_token_url, by default Entra ID's of the tenant); none: anonymous.
	 */
	const char *azure_endpoint;
	const char *azure_account_key;
	const char *azure_sas_token;
	const char *azure_tenant_id;
	const char *azure_client_id;
	const char *azure_client_secret;
	const char *azure_token_url;
	const IoKeyValue *azure_vended; /* "adls.sas-token.<account>" pairs
									 * (others ignored) */
	size_t		nazure_vended;
	int64_t		azure_vended_expire_ms; /* Unix ms, 0: unknown */
	size_t		azure_block_size;	/* larger writes: Put Block + Put Block
									 * List, in blocks this big; 0: 32 MiB */
} IoStorageConfig;

typedef struct IoStorage IoStorage;
typedef struct IoTableCredentials IoTableCredentials;

/* What a storage URI designates. */
typedef enum IoUriScheme
{
	IO_URI_FILE,				/* file:// or a plain absolute path */
	IO_URI_S3,					/* s3://, s3a://, s3n:// */
	IO_URI_AZURE,				/* abfs://, abfss://, wasb://, wasbs:// */
	IO_URI_GCS					/* gs:// */
} IoUriScheme;

typedef struct IoParsedUri
{
	IoUriScheme scheme;
	char	   *bucket;			/* S3, GCS: bucket; Azure: container */
	char	   *path;			/* file: absolute path; S3, Azure, GCS: key
								 * (no leading /) */
	char	   *account;		/* Azure: the account's host,
								 * "a.dfs.core.windows.net" */
} IoParsedUri;

/*
 * Parse a storage URI: io_location_canonical without a relative root, then
 * split.  Returns 0, or -1 with *err (INVALID_ARGUMENT: relative, other
 * scheme, dot segment ...).
 */
extern int	io_uri_parse(const char *uri, IoParsedUri *out, TmsError *err);
extern void io_uri_free(IoParsedUri *uri);

/*
 * The temporary name beside a local file that a write of process pid
 * creates and then renames over the file (io_storage_write): a process
 * killed mid-write leaves it behind, so whoever knows the writer's pid and
 * the name can delete it.  NULL for an object store's URI (a PUT leaves
 * nothing; only file: URIs and plain absolute paths are local files) or
 * out of memory; else malloc'd.
 */
extern char *io_local_temp_name(const char *uri, long pid);

/*
 * Create a storage handle; copies every string of cfg.  Returns NULL with
 * *err on failure.
 */
extern IoStorage *io_storage_create(const IoStorageConfig *cfg, TmsError *err);
extern void io_storage_free(IoStorage *st);

/*
 * The configuration a handle was created with (vended settings applied):
 * *cfg points into st and lives as long as it.  For handing the same
 * storage to a helper process (the compaction helper's hello).
 */
extern void io_storage_config_get(const IoStorage *st, IoStorageConfig *cfg);

/* A byte buffer returned by reads (data is NUL-terminated for convenience). */
typedef struct IoBuffer
{
	char	   *data;
	size_t		len;
} IoBuffer;

extern void io_buffer_free(IoBuffer *buf);

/*
 * Read len bytes at offset (len 0: to the end).  A short read at the end
 * of the object is not an error.  A missing object is IO_ERR_NOT_FOUND.
 * Local files: see IoStorageConfig.local_roots (IO_ERR_FORBIDDEN outside
 * them or through a symbolic link); this holds for size, write and list
 * as well.
 */
extern int	io_storage_read(IoStorage *st, const char *uri, uint64_t offset,
							uint64_t len, IoBuffer *out, TmsError *err);

/*
 * Read up to len bytes at offset straight into the caller's buf, where the
 * storage can (local files: no buffer of its own, no copy).  Returns 1 with
 * *got bytes read (fewer than len only at the end of the object) and, when
 * size is not NULL, *size the object's size; 0 when this storage cannot
 * (object stores: use io_storage_read); or -1 with *err as io_storage_read
 * fails.  len 0 reads nothing: it checks that the object can be read.
 */
extern int	io_storage_read_into(IoStorage *st, const char *uri, uint64_t offset,
								 void *buf, size_t len, size_t *got,
								 uint64_t *size, TmsError *err);

/* Size of an object (HEAD / stat).  Missing: IO_ERR_NOT_FOUND. */
extern int	io_storage_size(IoStorage *st, const char *uri, uint64_t *size,
							TmsError *err);

/* Create or replace an object with the given bytes. */
extern int	io_storage_write(IoStorage *st, const char *uri, const void *data,
							 size_t len, TmsError *err);

typedef struct IoObjectInfo
{
	const char *uri;			/* full URI, same scheme as the prefix */
	uint64_t	size;
	int64_t		mtime;			/* seconds since epoch, 0 if unknown */
} IoObjectInfo;

/* Return non-zero from the callback to stop listing early (not an error). */
typedef int (*IoListFn) (void *arg, const IoObjectInfo *obj);

/*
 * List every object under prefix, recursively (S3: every key starting with
 * the prefix's key; file: every regular file below the directory).  The
 * callback is called once per object, as pages arrive.
 */
extern int	io_storage_list(IoStorage *st, const char *prefix, IoListFn fn,
							void *arg, TmsError *err);

typedef struct IoDeleteResult
{
	bool		deleted;		/* true also when the object did not exist */
	bool		credentials;	/* !deleted: refused for the credentials it
								 * was sent with (a sub-request of a Blob
								 * Batch or GCS batch answered 401 or 403) */
	char		code[64];		/* S3 error code or errno name when !deleted */
	char		message[256];
} IoDeleteResult;

/*
 * Delete objects.  results[i] tells what happened to uris[i]; for S3 the
 * keys go to DeleteObjects in batches of at most 1000 per bucket.  A local
 * file outside the allowed roots, or reached through a symbolic link, is
 * not deleted (code "AccessDenied"); a symbolic link as the final
 * component is removed itself, never its target; an invalid location has
 * code "InvalidLocation".  Local files are deleted directory by directory,
 * each directory walked once per call.  Returns 0 when every request was
 * answered (even if some keys failed: see results), -1 with *err when a
 * request failed as a whole (results of earlier batches stay filled).
 */
extern int	io_storage_delete(IoStorage *st, const char *const *uris, size_t n,
							  IoDeleteResult *results, TmsError *err);

/* Keys one S3 DeleteObjects request takes at most. */
#define IO_S3_DELETE_MAX_KEYS 1000

/* Sub-requests one Azure Blob Batch request takes at most. */
#define IO_AZURE_DELETE_MAX_KEYS 256

/*
 * How a bulk delete groups a canonical location: the length of its
 * "scheme://bucket/" (s3://, gs://; "abfs://container@host/") prefix, the objects of
 * one request sharing it, into *prefix_len, and the most one request
 * takes; 0 for a location that is not an object store's (deleted one by
 * one, locally).
 */
extern size_t io_delete_group(const char *canonical, size_t *prefix_len);

/*
 * Check the text of a Google service account key (a user mapping's
 * gcs_service_account_key): 0, or -1 with *err saying what is wrong
 * (naming a field, never quoting the key).
 */
extern int	io_gcs_key_check(const char *json, TmsError *err);

/* Objects one GCS JSON API batch request deletes at most. */
#define IO_GCS_DELETE_MAX_KEYS 100

/*
 * How many objects one delete request of st takes for a canonical uri:
 * S3's DeleteObjects 1000, an Azure Blob Batch 256, a GCS batch 100 (1
 * with HMAC keys: the XML API deletes one object a request), 0 for local
 * files (no request).
 */
extern int	io_storage_delete_max_keys(const IoStorage *st, const char *uri);

/*
 * The storage target of an s3:// or gs:// URI, as the throttling of a
 * storage applies to it: "<endpoint>/<bucket>" (on AWS "https://s3.<region>.
 * amazonaws.com/<bucket>", on GCS "https://storage.googleapis.com/<bucket>")
 * into buf; of an Azure URI "<blob endpoint of the account>/<container>".
 * Returns 0, or -1 (a local file, or too long for buf).
 */
extern int	io_storage_target(IoStorage *st, const char *uri, char *buf, size_t size);

/* ----------------------------------------------------------------
 * Bulk deletes with several requests in flight (bulk_delete.c)
 * ----------------------------------------------------------------
 */

/*
 * A key refused inside a DeleteObjects answer with this S3 code is to be
 * sent again later, and is a sign to slow down: SlowDown,
 * ServiceUnavailable, InternalError; in an Azure Blob Batch answer
 * ServerBusy (503) and OperationTimedOut (500) as well.
 */
extern bool io_delete_code_throttled(const char *code);

typedef struct IoDeleter IoDeleter;

/* What one request of a deleter came to. */
typedef struct IoDeleteDone
{
	int			slot;			/* free again */
	int			rc;				/* 0: answered, the results are filled */
	TmsError	err;			/* rc -1: why (the request's results
								 * untouched) */
	char		s3code[64];		/* rc -1 with an S3 error document: its Code */
	bool		throttled;		/* rc -1: refused as a whole to slow down
								 * (503, 429, SlowDown) */
	bool		credentials;	/* rc -1: refused for its credentials (403,
								 * ExpiredToken, ...): see io_storage_refresh */
	long		retry_after_ms; /* what a Retry-After asked for, -1: nothing */
	size_t		nthrottled;		/* rc 0: keys refused with a throttling code */
	size_t		ncredentials;	/* rc 0: keys refused for their credentials
								 * (IoDeleteResult.credentials) */
} IoDeleteDone;

/*
 * A deleter over st (borrowed: it must outlive the deleter) with nslots
 * requests in flight at most, on the HTTP core's batch multi handle.
 * NULL with *err on failure.
 */
extern IoDeleter *io_deleter_create(IoStorage *st, int nslots, TmsError *err);

/*
 * Start one DeleteObjects request in a free slot for uris[0..n): s3://
 * objects of one bucket, 1 to IO_S3_DELETE_MAX_KEYS of them; or one Blob
 * Batch request for Azure objects of one container, 1 to
 * IO_AZURE_DELETE_MAX_KEYS of them; or one GCS delete for gs:// objects of
 * one bucket, up to io_storage_delete_max_keys (a JSON API batch, or one
 * XML API DELETE with HMAC keys).  results
 * (n entries, the caller's) are filled when the answer arrives and must
 * outlive the request.  0, or -1 with *err (the slot stays free).
 */
extern int	io_deleter_start(IoDeleter *d, int slot, const char *const *uris,
							 size_t n, IoDeleteResult *results, TmsError *err);

/*
 * Wait up to timeout_ms (at most IO_POLL_INTERVAL_MS) for network activity
 * and advance the requests.  0, or -1 with *err (IO_ERR_INTERRUPTED: the
 * storage's interrupt callback asked to stop).
 */
extern int	io_deleter_wait(IoDeleter *d, long timeout_ms, TmsError *err);

/* Hand back one finished request, if any (true), its slot free again. */
extern bool io_deleter_done(IoDeleter *d, IoDeleteDone *out);

/*
 * How the storage's HTTP options say a failed request is sent again: the
 * number of retries of a request that failed in transport or with
 * 500/502/504, and the backoff before retry attempt + 1 (doubling, with
 * jitter; io_http_perform's).
 */
extern int	io_deleter_retries(const IoDeleter *d);
extern long io_deleter_backoff_ms(const IoDeleter *d, int attempt);

/* Abandon the requests still in flight and free the deleter. */
extern void io_deleter_free(IoDeleter *d);

/* ----------------------------------------------------------------
 * The request window of a storage target (aimd_window.c)
 * ----------------------------------------------------------------
 */

/* The smallest window: one request every 6.3 s. */
#define IO_AIMD_MIN_WINDOW (1.0 / 64)
/* Below a window of 1, a start waits IO_AIMD_PACE_MS * (1/w - 1). */
#define IO_AIMD_PACE_MS 100

/*
 * Additive increase, multiplicative decrease (see aimd_window.c for the rule).
 * Plain data: it may live in shared memory; callers serialise access.
 */
typedef struct IoAimd
{
	double		window;			/* requests in flight allowed (floor, >= 1),
								 * below 1 a pause between them */
	uint32_t	epoch;			/* decreases so far */
	int64_t		next_start_ms;	/* io_now_ms(): no start before */
} IoAimd;

/* A window of limit (the caller's bound, >= 1). */
extern void io_aimd_init(IoAimd *a, int limit);

/* Requests that may be in flight now: max(1, min(limit, floor(w))). */
extern int	io_aimd_allowed(const IoAimd *a, int limit);

/* The pause between two starts (0 at w >= 1). */
extern long io_aimd_pause_ms(const IoAimd *a);

/* A request started now: the next may not start before the pause. */
extern void io_aimd_started(IoAimd *a, int64_t now_ms);

/* A request succeeded: additive increase, up to limit. */
extern void io_aimd_succeeded(IoAimd *a, int limit);

/*
 * A request started at epoch started_epoch was refused to slow down:
 * halve the window (when adapt, once per epoch) and hold starts for
 * retry_after_ms (> 0).  True when the window was halved.
 */
extern bool io_aimd_refused(IoAimd *a, uint32_t started_epoch, bool adapt,
							long retry_after_ms, int64_t now_ms);

/* Monotonic milliseconds (CLOCK_MONOTONIC), the clock of IoAimd. */
extern int64_t io_now_ms(void);

/*
 * Apply a catalog's vended storage properties (a loadTable response's
 * config) on top of cfg, which holds the server's and the user mapping's
 * settings.  The catalog must never be able to send the mapping's
 * credentials to a host it chose, so:
 *	- s3.access-key-id + s3.secret-access-key, when both are vended,
 *	  replace the mapping's credentials, and s3.session-token replaces the
 *	  mapping's token (none vended: no token; never the mapping's);
 *	  one of the pair alone is ignored;
 *	- s3.endpoint is used only together with vended credentials and only
 *	  when allow_vended_endpoint (a server option, off by default);
 *	  otherwise the server's own endpoint stays;
 *	- client.region / s3.region apply when they look like a region
 *	  (letters, digits, '-', '_', '.'); s3.path-style-access applies;
 *	- with vended credentials, s3_credentials_vended is set and
 *	  s3.session-token-expires-at-ms (Unix ms) is their expiry;
 *	- gcs.oauth2.token, when vended, replaces every GCS credential of the
 *	  mapping (gcs_credentials_vended), gcs.oauth2.token-expires-at (Unix
 *	  ms) is its expiry; gcs.service.host is used as S3's endpoint is.
 * Pointers in cfg then point into kv: keep kv alive as long as cfg is used.
 */
extern void io_storage_config_apply(IoStorageConfig *cfg, const IoKeyValue *kv,
									size_t n, bool allow_vended_endpoint);

/*
 * Vended credentials that expire.  A storage whose credentials a catalog
 * vended (s3_credentials_vended) may be given where to get them again: fn
 * fills a IoTableCredentials (the catalog's current vended config) or
 * fails with *err; it must not longjmp.  The storage then asks fn
 *	- before a request, when its credentials expire within a margin (a
 *	  quarter of their lifetime, at most 5 minutes), and
 *	- once after a request refused for its credentials (403, or an S3
 *	  error ExpiredToken, InvalidToken, TokenRefreshRequired; GCS: 401),
 *	  which is then sent again;
 * and replaces its key id, secret and session token (GCS: its token) in
 * place (everything sharing the handle uses the new ones), never its
 * endpoint.  A refreshed
 * config without both a key id and a secret is a failure: the storage
 * never falls back to other credentials.  free_arg (may be NULL) frees
 * arg with the storage.  No-op on a storage whose credentials are not
 * vended.
 */
typedef int (*IoRefreshFn) (void *arg, IoTableCredentials *out, TmsError *err);
extern void io_storage_set_refresh(IoStorage *st, IoRefreshFn fn, void *arg,
								   void (*free_arg) (void *));

/* Refresh now (as above).  0, or -1 with *err (the old credentials stay). */
extern int	io_storage_refresh(IoStorage *st, TmsError *err);

/* Can st refresh its credentials (vended, and a refresh set)? */
extern bool io_storage_refreshable(const IoStorage *st);

/* Refreshes so far, and their expiry now (Unix ms, 0: unknown). */
extern int	io_storage_refresh_count(const IoStorage *st);
extern int64_t io_storage_credentials_expire_ms(const IoStorage *st);

/* ----------------------------------------------------------------
 * Small S3 XML reader (exposed for tests)
 * ----------------------------------------------------------------
 */
typedef struct IoXmlNode IoXmlNode;

struct IoXmlNode
{
	char	   *name;			/* local name (namespace prefix removed) */
	char	   *text;			/* decoded character data, never NULL */
	IoXmlNode  *children;
	IoXmlNode  *next;
};

/*
 * Parse a document; NULL with *err: PROTOCOL when malformed, TOO_LARGE when
 * it needs more memory than twice its length (plus 16 kB) or has too many
 * elements.  Free the result (the root) with io_xml_free, which frees the
 * whole tree at once; never free a node inside it.
 */
extern IoXmlNode *io_xml_parse(const char *data, size_t len, TmsError *err);
extern void io_xml_free(IoXmlNode *root);

/* What a parse cost, as its allocator counted (malloc overhead included). */
typedef struct IoXmlStats
{
	size_t		limit;			/* the budget: 2 * len + 16 kB */
	size_t		peak;			/* the most it held at any time */
	size_t		nodes;			/* elements read */
} IoXmlStats;

/* io_xml_parse, also filling *stats (success or not; stats may be NULL). */
extern IoXmlNode *io_xml_parse_stats(const char *data, size_t len,
									 IoXmlStats *stats, TmsError *err);

/* First child named name, or NULL. */
extern const IoXmlNode *io_xml_child(const IoXmlNode *node, const char *name);

/* Text of the first child named name, or NULL. */
extern const char *io_xml_child_text(const IoXmlNode *node, const char *name);

/* ----------------------------------------------------------------
 * Iceberg REST catalog client
 * ----------------------------------------------------------------
 */
typedef struct IoCatalogConfig
{
	const char *uri;			/* base URI, "https://host/api/catalog" */
	const char *warehouse;		/* NULL: none sent */
	const char *prefix;			/* NULL: from the server's config */
	const char *credential;		/* "client_id:client_secret" or NULL */
	const char *token;			/* static bearer token or NULL */
	const char *oauth2_server_uri;	/* NULL: <uri>/v1/oauth/tokens */
	const char *scope;			/* NULL: "catalog" */
	int			page_size;		/* > 0: pageSize sent with listings */

	/*
	 * AWS Signature Version 4 on every catalog request (AWS Glue's and S3
	 * Tables' Iceberg REST endpoints, API Gateway), as Iceberg's
	 * RESTSigV4AuthSession signs: on when signing_region is set, which then
	 * needs both keys.  A bearer token (credential, token) still goes along,
	 * relocated to Original-Authorization and signed; the OAuth2 token
	 * request itself is not signed.
	 */
	const char *signing_region; /* NULL: requests are not signed */
	const char *signing_name;	/* the scope's service; NULL: "execute-api" */
	const char *aws_access_key_id;
	const char *aws_secret_access_key;
	const char *aws_session_token;	/* NULL: none */
	IoHttpOptions http;
} IoCatalogConfig;

typedef struct IoCatalog IoCatalog;

/*
 * Connect: fetch a token when a credential is configured, then GET
 * /v1/config.  Copies every string of cfg.  Returns NULL with *err.
 */
extern IoCatalog *io_catalog_open(const IoCatalogConfig *cfg, TmsError *err);
extern void io_catalog_free(IoCatalog *cat);

/*
 * Replace the interrupt callback and timeouts used from now on (the handle
 * may be cached across statements while the callback's state changes).
 */
extern void io_catalog_set_http(IoCatalog *cat, const IoHttpOptions *http);

/* The merged configuration (defaults < client < overrides); borrowed. */
extern const IoKeyValue *io_catalog_properties(const IoCatalog *cat, size_t *n);

/* A merged property or NULL. */
extern const char *io_catalog_property(const IoCatalog *cat, const char *key);

/* The server's endpoints list (empty: spec defaults); borrowed. */
extern const IoStringList *io_catalog_endpoints(const IoCatalog *cat);

/* The effective prefix ("" when none). */
extern const char *io_catalog_prefix(const IoCatalog *cat);

/* Number of HTTP requests this handle sent (for tests and statistics). */
extern uint64_t io_catalog_request_count(const IoCatalog *cat);

/*
 * List namespaces directly under parent (NULL: top level); follows
 * pagination.  Items use IO_NS_SEP between levels.
 */
extern int	io_catalog_list_namespaces(IoCatalog *cat, const char *parent,
									   IoStringList *out, TmsError *err);

typedef struct IoTableIdent
{
	char	   *ns;				/* levels joined by IO_NS_SEP */
	char	   *name;
} IoTableIdent;

typedef struct IoTableList
{
	IoTableIdent *items;
	size_t		n;
} IoTableList;

extern void io_table_list_free(IoTableList *list);

/*
 * Receives one page of a table listing: items[0..n) are borrowed until the
 * callback returns.  Return non-zero to stop the listing early (not an
 * error).
 */
typedef int (*IoTablePageFn) (void *arg, const IoTableIdent *items, size_t n);

/*
 * Stream the tables of one namespace: fn is called once per page, as the
 * pages arrive (pageSize from IoCatalogConfig.page_size), and only one
 * page is held at a time, so memory does not grow with the number of
 * tables.  Returns 0 when the listing ended or fn stopped it, -1 with
 * *err.
 */
extern int	io_catalog_list_tables_paged(IoCatalog *cat, const char *ns,
										 IoTablePageFn fn, void *arg,
										 TmsError *err);

/*
 * List the tables of one namespace into one list, following pagination
 * (io_catalog_list_tables_paged collecting every page).
 */
extern int	io_catalog_list_tables(IoCatalog *cat, const char *ns,
								   IoTableList *out, TmsError *err);

typedef struct IoLoadedTable
{
	bool		not_modified;	/* 304: the server confirmed the cached copy */
	char	   *metadata_location;	/* may be NULL (staged table) */
	char	   *metadata_json;	/* the "metadata" object, serialised */
	char	   *etag;			/* NULL when the server sent none */
	IoKeyValue *config;			/* vended "config", then the best matching
								 * "storage-credentials" entry on top */
	size_t		nconfig;
} IoLoadedTable;

/*
 * Load a table.  When the handle holds a cached copy with an ETag it sends
 * If-None-Match; a 304 returns the cached copy with not_modified set.
 */
extern int	io_catalog_load_table(IoCatalog *cat, const char *ns,
								  const char *table, IoLoadedTable *out,
								  TmsError *err);
extern void io_loaded_table_free(IoLoadedTable *t);

/*
 * Load a table with only the snapshots its branches and tags reference
 * (snapshots=refs): its identity (location, UUID), current state and
 * vended credentials, at a cost that does not grow with its history.  No
 * ETag is sent or kept: the handle's cache holds full loads only.
 */
extern int	io_catalog_load_table_refs(IoCatalog *cat, const char *ns,
									   const char *table, IoLoadedTable *out,
									   TmsError *err);

/*
 * Load a table the caller has seen as version known_etag (NULL: like
 * io_catalog_load_table).  Sends If-None-Match with it; a 304 sets
 * not_modified and, unless the handle's cache holds that version,
 * leaves metadata_json and metadata_location NULL (etag is set).  Lets a
 * caller that keeps ETags itself (tms.tables) check many tables for
 * changes with one request each, beyond the handle's cache.
 */
extern int	io_catalog_load_table_etag(IoCatalog *cat, const char *ns,
									   const char *table, const char *known_etag,
									   IoLoadedTable *out, TmsError *err);

/* One load of a batch (io_catalog_load_tables_etag). */
typedef struct IoLoadRequest
{
	const char *ns;				/* levels joined by IO_NS_SEP */
	const char *table;
	const char *known_etag;		/* NULL: unconditional */
} IoLoadRequest;

/*
 * Receives the result of reqs[index] as soon as it arrived: t (a 200, or a
 * 304 as io_catalog_load_table_etag describes it) or err (this request's
 * failure; err->code IO_ERR_NO_SUCH_TABLE for a vanished table).  Exactly
 * one of t and err is non-NULL.  Called from the calling thread between
 * two polls, never from inside libcurl, with no transfer blocked on it.
 * *t is freed when the callback returns unless the callback takes it
 * (copy the struct, then zero *t).  The callback must not longjmp (inside
 * PostgreSQL: catch errors with PG_TRY and return non-zero).  Return
 * non-zero to stop the batch.
 */
typedef int (*IoLoadResultFn) (void *arg, size_t index, IoLoadedTable *t,
							   const TmsError *err);

/*
 * Load n tables with up to `concurrency` requests in flight at once on one
 * libcurl multi handle (one easy handle per slot, reused; connections kept
 * alive), each like io_catalog_load_table_etag: one GET, If-None-Match
 * with known_etag (or the handle's cached copy), handed to fn as it
 * completes.  Only the bodies of the requests in flight are held.
 *
 * Each request is retried like a single load (transport failures and
 * 429/5xx with backoff, never a timeout); one request's failure goes to fn
 * and does not stop the others.  The OAuth token is fetched once before
 * the first request; after a 401 it is refreshed once for the batch and
 * each request answered 401 is retried once.  The interrupt callback is
 * polled at least every IO_POLL_INTERVAL_MS.
 *
 * Returns 0 when every request's result went to fn; -1 with *err when the
 * batch stopped early: interrupted (IO_ERR_INTERRUPTED, also when fn asked
 * to stop), or the token could not be fetched.  Requests not delivered by
 * then are abandoned.
 */
extern int	io_catalog_load_tables_etag(IoCatalog *cat, const IoLoadRequest *reqs,
										size_t n, int concurrency,
										IoLoadResultFn fn, void *arg,
										TmsError *err);

/* A table's vended storage configuration (s3.access-key-id, ...). */
struct IoTableCredentials
{
	IoKeyValue *config;			/* values wiped when freed */
	size_t		nconfig;
	bool		from_endpoint;	/* loadCredentials, not a table load */
};

/*
 * The storage credentials the catalog vends for a table now: GET
 * .../tables/{table}/credentials (loadCredentials) when the server lists it
 * among its endpoints, the storage credential whose prefix is the longest
 * prefix of location (NULL: the only one); else a load of the table's
 * referenced snapshots (io_catalog_load_table_refs; the handle's cached
 * copy, with the old credentials, forgotten) and its config with its
 * storage-credentials on top.  0 (free with io_table_credentials_free) or
 * -1 with *err.
 */
extern int	io_catalog_load_credentials(IoCatalog *cat, const char *ns, const char *table,
										const char *location, IoTableCredentials *out,
										TmsError *err);
extern void io_table_credentials_free(IoTableCredentials *c);

/*
 * Rename ns.table to to_ns.to_table (POST /v1/{prefix}/tables/rename);
 * never retried (a lost answer would make a retry report a false 404 or
 * 409): a failure whose outcome is unknown is resolved by the caller.
 */
extern int	io_catalog_rename_table(IoCatalog *cat, const char *ns, const char *table,
									const char *to_ns, const char *to_table, TmsError *err);

/* Create a namespace without properties; one that exists is IO_ERR_ALREADY_EXISTS. */
extern int	io_catalog_create_namespace(IoCatalog *cat, const char *ns, TmsError *err);

/* Drop a table; purge asks the catalog to delete its files too. */
extern int	io_catalog_drop_table(IoCatalog *cat, const char *ns,
								  const char *table, bool purge, TmsError *err);

/*
 * Commit: body is a CommitTableRequest JSON built by the caller
 * (requirements + updates).  On success fills *out like a load.  409 is
 * IO_ERR_CONFLICT (reload and retry), 500/502/504 and transport failures
 * after the request was sent are IO_ERR_COMMIT_STATE_UNKNOWN (reload and
 * check; never assume failure).  Retried here only when the catalog's
 * config advertised idempotency-key-lifetime: then the commit carries one
 * UUIDv7 Idempotency-Key and is resent with it (at most http.retries times,
 * within the lifetime) after a transport failure or 500/502/503/504; a
 * refusal of such a retry is IO_ERR_COMMIT_STATE_UNKNOWN too.
 */
extern int	io_catalog_commit_table(IoCatalog *cat, const char *ns,
									const char *table, const char *body,
									IoLoadedTable *out, TmsError *err);

/* Drop cached table state (ETag, metadata) of one table or all (ns NULL). */
extern void io_catalog_forget(IoCatalog *cat, const char *ns, const char *table);

/* ----------------------------------------------------------------
 * Webhooks (webhook_post.c)
 * ----------------------------------------------------------------
 */
typedef struct IoWebhookRequest
{
	const char *url;			/* http:// or https://; a secret (see below) */
	const char *token;			/* NULL, or sent as "Authorization: Bearer" */
	const char *body;			/* a JSON document */
	size_t		body_len;
	IoHttpOptions http;			/* timeouts, CA, interrupt; retries unused */
} IoWebhookRequest;

/*
 * POST body to a webhook receiver, once.  *status is the HTTP status of
 * its answer (0: none came).  Returns 0 when it answered 2xx; otherwise
 * -1 with *err: another status (3xx too: redirects are not followed), or
 * a transport failure (IO_ERR_TIMEOUT, IO_ERR_CONNECT, IO_ERR_TLS,
 * IO_ERR_TOO_LARGE, IO_ERR_INTERRUPTED), and *retry_after_ms what a 429
 * or 503 asked for (-1: nothing).  The URL may hold a secret: messages
 * name only its origin, never its path, query or user info, and carry no
 * detail.
 */
extern int	io_webhook_post(const IoWebhookRequest *req, long *status,
							long *retry_after_ms, TmsError *err);

/* "scheme://host[:port]" of an http(s) URL into buf; false if it is none. */
extern bool io_webhook_origin(const char *url, char *buf, size_t size);

/* ----------------------------------------------------------------
 * IoFileIO (fileio.h) over IoStorage: how src/iceberg reads
 * ----------------------------------------------------------------
 */

/* Bytes fetched per ranged read. */
#define IO_FILEIO_CHUNK ((uint64_t) 8 * 1024 * 1024)

/* The state behind an IoFileIO over storage; the caller owns it. */
typedef struct IoStorageFileIO
{
	IoStorage  *storage;		/* borrowed */
	const char *relative_root;	/* borrowed; NULL: relative paths refused */
	IoInterruptFn interrupted;
	void	   *interrupt_arg;
	uint64_t	bytes_read;

	/*
	 * 0: every fetch is IO_FILEIO_CHUNK bytes.  Else the first fetch of a
	 * file is first_chunk bytes and each next one twice the last, up to
	 * IO_FILEIO_CHUNK: for a reader that usually stops after the file's head
	 * (set it after io_storage_fileio()).
	 */
	uint64_t	first_chunk;
} IoStorageFileIO;

/*
 * The one FileIO router of tms: fill *out with an IoFileIO that reads the
 * paths of Iceberg metadata (every form io_location_canonical accepts) by
 * canonicalising them against relative_root and reading the result through
 * storage (S3 with ranged GETs, local files as storage allows them).
 *
 * state holds the state and must outlive *out, as must relative_root (may
 * be NULL: relative paths then fail) and storage; nothing is owned.  A
 * path the location rule refuses fails at open with
 * IO_ERR_INVALID_ARGUMENT; storage failures keep their codes
 * (IO_ERR_NOT_FOUND, IO_ERR_FORBIDDEN, IO_ERR_TIMEOUT ...).
 * interrupted (may be NULL) is polled by the reader between units of work
 * and by storage while waiting on the network.
 */
extern void io_storage_fileio(IoStorageFileIO *state, IoStorage *storage,
							  const char *relative_root,
							  IoInterruptFn interrupted, void *interrupt_arg,
							  IoFileIO *out);

/*
 * The canonical text of a UUID (RFC 9562, 4: 8-4-4-4-12 lowercase hex
 * digits) of its 16 bytes, and a NUL, into out (at least 37 bytes).  The
 * one formatter of the UUIDs tms makes (Idempotency-Keys, data files).
 */
extern void io_format_uuid(const uint8_t bytes[16], char *out);

#endif							/* TMS_IO_H */
