/*-------------------------------------------------------------------------
 *
 * storage_int.h
 *		Private declarations shared by the files of the object storage:
 *		the interface and dispatch (storage.c), the local backend
 *		(storage_local.c), the S3 backend (storage_s3.c), the Azure
 *		backend (storage_azure.c, azure_batch.c) and the Google Cloud
 *		Storage backend (storage_gcs.c, gcs_batch.c).
 *
 * Not part of the layer's interface (that is io.h); only those files, the
 * bulk deleter (bulk_delete.c) and the unit test include this one.
 *
 * src/io/storage/storage_int.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef TMS_IO_STORAGE_INT_H
#define TMS_IO_STORAGE_INT_H

#include "io/io_int.h"
#include "io/http/oauth2.h"

/* The storage handle (io.h's IoStorage), filled in by storage.c. */
struct IoStorage
{
	char	   *endpoint;		/* scheme://host[:port][/base], no trailing / */
	char	   *region;
	int			path_style;
	char	   *access_key_id;
	char	   *secret_access_key;
	char	   *session_token;
	bool		vended;			/* the credentials are a catalog's */
	int64_t		expire_ms;		/* their expiry, Unix ms; 0: unknown */
	int64_t		received_ms;	/* when they were set, Unix ms */
	IoRefreshFn refresh;
	void	   *refresh_arg;
	void		(*refresh_free) (void *);
	int			refreshes;
	const IoAllocator *alloc;	/* current at creation: refreshed keys */
	int			list_page_size;
	char	  **local_roots;	/* canonical absolute directories */
	size_t		nlocal_roots;
	IoHttpOptions http;
	/* Azure (see IoStorageConfig) */
	char	   *azure_endpoint; /* no trailing / */
	char	   *azure_account_key;
	char	   *azure_sas_token;	/* without a leading '?' */
	char	   *azure_tenant_id;
	char	   *azure_client_id;
	char	   *azure_client_secret;
	char	   *azure_token_url;
	IoOAuth2Token azure_token;
	IoKeyValue *azure_vended;	/* "adls.sas-token.<account>" -> SAS */
	size_t		nazure_vended;
	bool		s3_vended;		/* which of the credentials are vended */
	bool		azure_is_vended;
	size_t		azure_block_size;

	/* Google Cloud Storage (storage_gcs.c) */
	char	   *gcs_endpoint;	/* scheme://host[:port], no trailing / */
	char	   *gcs_hmac_access_id;
	char	   *gcs_hmac_secret;
	char	   *gcs_token;		/* a fixed or vended OAuth2 access token */
	bool		gcs_vended;		/* gcs_token is a catalog's */
	int64_t		gcs_expire_ms;	/* its expiry, Unix ms; 0: unknown */
	char	   *gcs_sa_key;		/* the service account key's JSON */
	struct IoGcsServiceAccount *gcs_sa; /* parsed from it, NULL: none */
	IoOAuth2Token gcs_sa_token; /* the token of the service account */
	size_t		gcs_part_bytes;
};

/*
 * The directory of the previous local delete of one io_storage_delete
 * call, kept open: the files of a table lie in few directories, and a
 * purge deletes them a batch at a time, so most deletes skip the walk
 * (about a dozen system calls) and only unlinkat in a directory a walk
 * has already reached without following any link.  Kept for one call
 * only, so a directory swapped for a link between two batches is met by
 * the next walk.
 */
typedef struct LocalDirCache
{
	char	   *dir;			/* the parent's path, as the walk's input */
	int			fd;				/* -1: none */
} LocalDirCache;

/* ---- Ranged reads, shared by the HTTP backends (storage.c) ---- */

/*
 * The Range header value of a read of len bytes (0: to the end) at offset,
 * into buf; false when the whole object is read (no header at all).
 */
extern bool io_range_value(uint64_t offset, uint64_t len, char *buf, size_t size);

/*
 * The answer to a (ranged) GET made the read's result, taking resp's body:
 * 416 is an empty read; 200 to a ranged request is cut to the range (a
 * server that ignores Range); 206 as it is.  0 when *out is set, -1 with
 * *err when out of memory, 1 when the status is not a read's: the caller
 * reports it in its store's words.
 */
extern int	io_read_result(IoHttpResponse *resp, bool ranged, uint64_t offset,
						   uint64_t len, IoBuffer *out, TmsError *err);

/*
 * The size a HEAD answer gives in header; 0, or -1 with *err (naming the
 * store) when the header is missing.
 */
extern int	io_head_size(const IoHttpResponse *resp, const char *header,
						 const char *store, uint64_t *size, TmsError *err);

/*
 * The most objects one delete request takes for a scheme: 1000 keys on S3,
 * a Blob Batch of 256 on Azure, a JSON API batch of 100 on GCS, or 1 when
 * st signs GCS requests with HMAC keys (the XML API has no batch); st NULL
 * gives the store's own limit.  The one statement of these limits
 * (storage.c).
 */
extern size_t io_storage_scheme_delete_max(const IoStorage *st, IoUriScheme scheme);

/*
 * An RFC 3339 time as S3's and GCS's listings give it
 * ("2024-01-02T03:04:05.000Z", the fraction ignored) to epoch seconds; 0
 * when s is NULL or not such a time (storage.c).
 */
extern int64_t io_rfc3339_time(const char *s);

/* ---- Batch answers, multipart/mixed (batch_multipart.c) ---- */

/*
 * One part of a batch answer: the Content-ID of the part's own headers,
 * then its sub-response (status 0 when it has no status line).  Every
 * pointer is into the answer, not NUL-terminated.
 */
typedef struct IoBatchPart
{
	const char *content_id;		/* NULL: none */
	size_t		content_id_len;
	long		status;
	const char *reason;			/* the reason phrase, NULL: none */
	size_t		reason_len;
	const char *headers;		/* the sub-response's header lines */
	const char *headers_end;
	const char *body;			/* without the line end before the delimiter */
	size_t		body_len;
} IoBatchPart;

typedef void (*IoBatchPartFn) (const IoBatchPart *part, void *arg);

/*
 * Call fn for each part of the answer body[0..len) in order, the boundary
 * named by content_type (a NUL-terminated header value).  0, or -1 with
 * *err (naming store, with the answer's HTTP status) when the answer is
 * not multipart with a boundary.
 */
extern int	io_batch_parts(const char *content_type, const char *body, size_t len,
						   IoBatchPartFn fn, void *arg, const char *store,
						   long status, TmsError *err);

/* The value of a header of part's sub-response (any case), or NULL. */
extern const char *io_batch_part_header(const IoBatchPart *part, const char *name,
										size_t *vlen);

/* ---- The Google Cloud Storage backend (storage_gcs.c, gcs_batch.c) ---- */

/* Is the GCS handle signing with HMAC keys (XML API only)? */
#define IO_GCS_HMAC(st) ((st)->gcs_hmac_access_id != NULL && (st)->gcs_hmac_secret != NULL && \
						 !(st)->gcs_vended)

extern int	io_gcs_read(IoStorage *st, const IoParsedUri *u, uint64_t offset,
						uint64_t len, IoBuffer *out, TmsError *err);
extern int	io_gcs_size(IoStorage *st, const IoParsedUri *u, uint64_t *size,
						TmsError *err);
extern int	io_gcs_write(IoStorage *st, const IoParsedUri *u, const void *data,
						 size_t len, TmsError *err);
extern int	io_gcs_list(IoStorage *st, const IoParsedUri *u, IoListFn fn, void *arg,
						TmsError *err);
extern int	io_gcs_delete_batch(IoStorage *st, const char *bucket,
								IoParsedUri *parsed, const size_t *idx, size_t n,
								IoDeleteResult *results, TmsError *err);
extern int	io_gcs_target(const IoStorage *st, const char *bucket, char *buf,
						  size_t size);

/*
 * One GCS request ready to send (the URL and the header lines, signed or
 * with the bearer token), for the bulk deleter: the JSON API batch that
 * deletes keys[0..n) of bucket (n <= IO_GCS_DELETE_MAX_KEYS) with a bearer
 * token, or with HMAC keys one XML API DELETE of keys[0] (n == 1).  body
 * (the batch's, freed by the caller with io_sb_free) must outlive the
 * request.  0, or -1 with *err.
 */
extern int	io_gcs_delete_request(IoStorage *st, const char *bucket,
								  const char *const *keys, size_t n,
								  IoStrBuf *body, IoS3Request *r, TmsError *err);

/*
 * Read the answer to io_gcs_delete_request into results[0..n): 0, or -1
 * with *err when the answer as a whole is a refusal (then *throttled,
 * *credentials and *retry_after_ms say whether to slow down or refresh)
 * or cannot be read.  Objects refused inside a batch with 429 or 503 get
 * the code "SlowDown" (io_delete_code_throttled); a missing object is
 * deleted.
 */
extern int	io_gcs_delete_answer(IoStorage *st, const IoHttpResponse *resp,
								 const char *bucket, const char *const *keys,
								 size_t n, IoDeleteResult *results,
								 bool *throttled, bool *credentials,
								 TmsError *err);

/* The boundary of the batches this client sends. */
#define IO_GCS_BATCH_BOUNDARY "tms_gcs_batch_8c5b2d41e7"

/*
 * The body of a JSON API batch (multipart/mixed, boundary
 * IO_GCS_BATCH_BOUNDARY) deleting keys[0..n) of bucket: one part per key,
 * "Content-ID: <item-i>", "DELETE /storage/v1/b/BUCKET/o/KEY" with the
 * name percent-encoded ('/' too).  0, or -1 with *err (out of memory).
 */
extern int	io_gcs_batch_body(const char *bucket, const char *const *keys, size_t n,
							  IoStrBuf *body, TmsError *err);

/*
 * Read a batch answer (its Content-Type, which names the boundary, and
 * its body) into results[0..n): each part's status (matched by its
 * Content-ID "<response-item-i>", else by position) makes the result:
 * 2xx and 404 deleted, 429 and 503 "SlowDown", anything else the JSON
 * error's reason/message.  A key no part answers is "NoResult".  0, or -1
 * with *err when the answer is not a multipart batch.
 */
extern int	io_gcs_batch_read(const char *content_type, const char *body, size_t len,
							  size_t n, IoDeleteResult *results, TmsError *err);

/* ---- The local backend (storage_local.c) ---- */

extern int	io_local_read(IoStorage *st, const char *uri, const char *path,
						  uint64_t offset, uint64_t len, IoBuffer *out,
						  size_t cap, TmsError *err);
extern int	io_local_read_into(IoStorage *st, const char *uri, const char *path,
							   uint64_t offset, void *buf, size_t len,
							   size_t *got, uint64_t *size, TmsError *err);
extern int	io_local_size(IoStorage *st, const char *uri, const char *path,
						  uint64_t *size, TmsError *err);
extern int	io_local_write(IoStorage *st, const char *uri, const char *path,
						   const void *data, size_t len, TmsError *err);
extern void io_local_delete(IoStorage *st, const char *uri, const char *path,
							LocalDirCache *cache, IoDeleteResult *r);
extern void io_local_dir_cache_end(LocalDirCache *c);
extern int	io_local_list(IoStorage *st, const char *prefix, const char *path,
						  IoListFn fn, void *arg, TmsError *err);

/* ---- The S3 backend (storage_s3.c) ---- */

extern int	io_s3_request(IoStorage *st, const char *method,
						  const char *bucket, const char *key,
						  const char *query, const IoHeader *extra,
						  size_t nextra, const void *body, size_t body_len,
						  IoHttpResponse *resp, TmsError *err);
extern int	io_s3_size(IoStorage *st, const IoParsedUri *u, uint64_t *size,
					   TmsError *err);
extern int	io_s3_read(IoStorage *st, const IoParsedUri *u, uint64_t offset,
					   uint64_t len, IoBuffer *out, TmsError *err);
extern int	io_s3_list(IoStorage *st, const IoParsedUri *u,
					   const char *prefix_uri, IoListFn fn, void *arg,
					   TmsError *err);
extern int	io_s3_delete_batch(IoStorage *st, const char *bucket,
							   IoParsedUri *parsed, const size_t *idx, size_t n,
							   IoDeleteResult *results, TmsError *err);

/* ---- The Azure backend (storage_azure.c, azure_batch.c) ---- */

/* The Blob service REST API version of every request (x-ms-version). */
#define IO_AZURE_VERSION "2021-08-06"

/*
 * Build the SharedKey string-to-sign of a request (Microsoft's "Authorize
 * with Shared Key", version 2009-09-19 and later) into *out: method, the
 * standard headers and every x-ms- header of headers[0..n) (names in any
 * case), the account name and the wire path and raw query of the URL.  0,
 * or -1 with *err.
 */
extern int	io_azure_string_to_sign(const char *method, const IoHeader *headers,
									size_t n, const char *account, const char *path,
									const char *query, IoStrBuf *out, TmsError *err);

/* The signature: base64(HMAC-SHA256(base64-decoded key, sts)). */
extern int	io_azure_sign(const char *key_b64, const char *sts, size_t len,
						  char *out, size_t size, TmsError *err);

/* Build one authorised request; as io_s3_request_build. */
extern int	io_azure_request_build(IoStorage *st, const char *method,
								   const IoParsedUri *u, const char *key,
								   const char *query, const IoHeader *extra,
								   size_t nextra, const void *body, size_t body_len,
								   IoS3Request *r, TmsError *err);

/* Send one request, refreshing refused vended credentials once. */
extern int	io_azure_request(IoStorage *st, const char *method,
							 const IoParsedUri *u, const char *key,
							 const char *query, const IoHeader *extra,
							 size_t nextra, const void *body, size_t body_len,
							 IoHttpResponse *resp, TmsError *err);

/*
 * A non-2xx Azure response into *err (always -1): the Azure error code
 * (x-ms-error-code, else the error document's Code) and Message in the
 * detail, the code also into code_out when not NULL.
 */
extern int	io_azure_status_error(const IoHttpResponse *resp, const char *what,
								  const IoParsedUri *u, const char *key,
								  char *code_out, size_t code_size, TmsError *err);

/*
 * Does a request for the account of host go with an account SAS (one
 * naming resource types, "srt=")?  Its Blob Batch is then the account's
 * (POST /?comp=batch), which an account SAS authorises, and a
 * container's otherwise (POST /<container>?restype=container&comp=batch),
 * which a container's SAS, a catalog's typical one, authorises.
 */
extern bool io_azure_account_sas(const IoStorage *st, const char *host);

/* Was a refusal one to slow down (503, 429, ServerBusy, OperationTimedOut)? */
extern bool io_azure_throttled(long status, const char *code);

extern int	io_azure_read(IoStorage *st, const IoParsedUri *u, uint64_t offset,
						  uint64_t len, IoBuffer *out, TmsError *err);
extern int	io_azure_size(IoStorage *st, const IoParsedUri *u, uint64_t *size,
						  TmsError *err);
extern int	io_azure_write(IoStorage *st, const IoParsedUri *u, const void *data,
						   size_t len, TmsError *err);
extern int	io_azure_list(IoStorage *st, const IoParsedUri *u,
						  const char *prefix_uri, IoListFn fn, void *arg,
						  TmsError *err);
extern int	io_azure_target(IoStorage *st, const IoParsedUri *u, char *buf,
							size_t size);

/*
 * Blob Batch (azure_batch.c): the multipart/mixed body of one Delete Blob
 * sub-request per key (each authorised as a request of its own) with the
 * boundary "batch_<uuid>" into *body and its Content-Type into ctype;
 * then the reader of a 202 answer into results[0..n) (202 and 404
 * deleted, others with the Azure error code, a sub-request the answer
 * does not mention "NoResult").
 */
extern int	io_azure_batch_body(IoStorage *st, const IoParsedUri *u,
								const char *const *keys, size_t n,
								IoStrBuf *body, char *ctype, size_t ctype_size,
								TmsError *err);
extern int	io_azure_batch_read(const IoHttpResponse *resp, size_t n,
								IoDeleteResult *results, TmsError *err);

/* One Blob Batch request for keys[idx[0..n)] of one container. */
extern int	io_azure_delete_batch(IoStorage *st, IoParsedUri *parsed,
								  const size_t *idx, size_t n,
								  IoDeleteResult *results, TmsError *err);

#endif							/* TMS_IO_STORAGE_INT_H */
