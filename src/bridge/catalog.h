/*-------------------------------------------------------------------------
 *
 * catalog.h
 *	  Iceberg catalogs as PostgreSQL sees them: a catalog is a foreign
 *	  server of the tms_iceberg wrapper, its credentials a user mapping.
 *	  This is the one place that reads their options, decides where files
 *	  may be read and deleted, builds storage access for a table, and
 *	  keeps the per-backend cache of catalog connections.
 *
 * Rules held here for every caller:
 *
 *	- Options are read as the wrapper's validator reads them (fdw_options.h).
 *	- A connection acts as one role, the role current when it is made
 *	  (tms_acting_role(), or the recorded role a worker switched to): that
 *	  role needs USAGE on the server and a user mapping (its own or
 *	  PUBLIC's).
 *	- Paths are compared and accessed only in the canonical form of the
 *	  io layer's location rule (io_location_canonical), resolving relative
 *	  paths against the server's relative_path_root.  Local files are read
 *	  and deleted only strictly below one of the server's local
 *	  allowed_locations, without following symbolic links (the io layer
 *	  enforces it); s3 objects are read wherever the credentials reach and
 *	  deleted only below an allowed location.
 *	- A server with signing_region signs every catalog request with AWS
 *	  SigV4, with the AWS keys of the role's user mapping; AWS keys need
 *	  signing_region and signing_region needs AWS keys (checked when a
 *	  connection is made, since a validator sees one object's options).
 *	- The user mapping's storage credentials are sent only to the endpoint
 *	  the server's owner configured; a catalog's vended endpoint is used
 *	  only with the catalog's vended credentials, and only when the server
 *	  says so (s3_vended_endpoint).  Vended credentials are refreshed only
 *	  with vended ones, never with the mapping's.
 *
 * Connections are cached per backend for (server, role) until the
 * server's or user mapping's options change, so the OAuth token, the
 * /v1/config handshake and the ETag cache are reused; the memory limits
 * (tms.max_response_size, tms.max_json_memory) are taken from the
 * settings each time a cached connection is handed out.  A connection handed
 * out is pinned: it is never freed while pinned, even when an ALTER SERVER
 * invalidates it.  tms_catalog_connect() pins until the end of the current
 * transaction; code that keeps a connection across transactions (a task
 * handler working between short transactions) takes a pin of its own with
 * tms_catalog_keep() and gives it back with tms_catalog_release().
 *
 *-------------------------------------------------------------------------
 */
#ifndef TMS_BRIDGE_CATALOG_H
#define TMS_BRIDGE_CATALOG_H

#include "postgres.h"

#include "foreign/foreign.h"

#include "iceberg/iceberg.h"
#include "io/io.h"

/*
 * One server's options, parsed.  Strings are malloc'd and owned by the
 * struct (tms_server_free), so it can live in the connection cache.
 */
typedef struct TmsServer
{
	Oid			serverid;
	Oid			owner;
	char	   *name;
	/* catalog */
	char	   *uri;
	char	   *warehouse;
	char	   *prefix;
	char	   *oauth2_server_uri;
	char	   *scope;
	int			page_size;		/* 0: none */
	char	   *signing_region; /* SigV4 on every catalog request, or NULL */
	char	   *signing_name;	/* the SigV4 service; NULL: execute-api */
	IoHttpOptions http;			/* timeouts, retries, CA; limits from settings */
	/* storage */
	char	   *s3_endpoint;
	char	   *s3_region;
	int			s3_path_style;	/* -1: auto */
	bool		s3_vended_endpoint; /* also gcs.service.host */
	char	   *azure_endpoint; /* Azure Blob endpoint override, or NULL */
	char	   *azure_token_url;	/* Entra ID token endpoint override */
	char	   *gcs_endpoint;	/* NULL: https://storage.googleapis.com */
	char	   *relative_root;	/* relative_path_root, or NULL */
	char	   *purge_hold_namespace;	/* purge_hold_namespace, or NULL */
	int			nallowed;		/* allowed_locations, canonical */
	char	  **allowed;
	int			nlocal;			/* the local ones among them */
	char	  **local;
} TmsServer;

/* A user mapping's credentials (malloc'd; tms_credentials_free wipes them). */
typedef struct TmsCredentials
{
	bool		found;			/* a mapping (the role's or PUBLIC's) exists */
	Oid			mapping_user;	/* the role, or InvalidOid for PUBLIC */
	char	   *credential;
	char	   *token;
	char	   *s3_access_key_id;
	char	   *s3_secret_access_key;
	char	   *s3_session_token;
	char	   *aws_access_key_id;	/* SigV4 signing of catalog requests */
	char	   *aws_secret_access_key;
	char	   *aws_session_token;
	char	   *azure_account_key;	/* Azure Blob storage */
	char	   *azure_sas_token;
	char	   *azure_tenant_id;
	char	   *azure_client_id;
	char	   *azure_client_secret;
	char	   *gcs_hmac_access_id; /* Google Cloud Storage: one of these */
	char	   *gcs_hmac_secret;
	char	   *gcs_oauth2_token;
	char	   *gcs_service_account_key;
} TmsCredentials;

/* Read a tms_iceberg server's options (raises if it is another wrapper's). */
extern TmsServer *tms_server_read(ForeignServer *server);
extern TmsServer *tms_server_read_by_name(const char *name, bool missing_ok);
extern void tms_server_free(TmsServer *s);

/* The mapping of role for the server, else PUBLIC's; found false if none. */
extern void tms_credentials_read(Oid role, Oid serverid, TmsCredentials *out);
extern void tms_credentials_free(TmsCredentials *c);

/*
 * The canonical form of path (io_location_canonical with the server's
 * relative root), palloc'd, or NULL with *why set to the reason.
 */
extern char *tms_location_canonical(const TmsServer *s, const char *path,
									char **why);

/* Is canonical path strictly below one of the server's allowed_locations? */
extern bool tms_location_allowed(const TmsServer *s, const char *canonical);

/*
 * Raise unless a table location (as the metadata gives it) lies strictly
 * below one of the server's allowed_locations; returns its canonical
 * form.  what names the action for the message ("purge").
 */
extern char *tms_check_table_location(const TmsServer *s, const char *ns,
									  const char *table, const char *location,
									  const char *what);

/*
 * Storage for a table's files: the server's endpoint and the mapping's
 * keys, then the catalog's vended config (n pairs, may be 0) by the rule
 * of the file header; local access confined to the server's local
 * allowed_locations.  Returns NULL with *err on failure; the caller frees
 * it with io_storage_free (PG_FINALLY).  Plain C inside: usable between
 * transactions.
 */
extern IoStorage *tms_storage_open(const TmsServer *s, const TmsCredentials *c,
								   const IoKeyValue *vended, size_t n,
								   TmsError *err);

/*
 * The FileIO through which src/iceberg reads a table's files: every path
 * put in canonical form by the location rule (relative paths against the
 * server's relative_path_root), then read from storage (local reads
 * confined as the file header says), within the limits of the settings.
 * *tio holds the state and must outlive *out, as must s and storage.
 */
typedef struct TmsTableFileIO
{
	IoStorageFileIO state;
	IcebergLimits limits;
} TmsTableFileIO;

extern void tms_table_fileio(TmsTableFileIO *tio, const TmsServer *s,
							 IoStorage *storage, IcebergFileIO *out);

/* A connection to one catalog as one role; see the file header. */
typedef struct TmsCatalogConn
{
	Oid			serverid;
	Oid			userid;
	TmsServer  *server;
	TmsCredentials creds;
	IoCatalog  *catalog;
	int			xact_pins;		/* pinned by tms_catalog_connect in this xact */
	int			pins;			/* tms_catalog_keep */
	bool		valid;
} TmsCatalogConn;

/*
 * Connect (or reuse a cached connection) to the catalog behind the named
 * foreign server as the current user: USAGE on the server and a user
 * mapping are required.  Pinned until the end of the transaction.
 */
extern TmsCatalogConn *tms_catalog_connect(const char *server_name);
extern void tms_catalog_keep(TmsCatalogConn *conn);
extern void tms_catalog_release(TmsCatalogConn *conn);

/* Drop a table through conn (purge: the catalog deletes its files), or raise. */
extern void tms_catalog_drop_table(TmsCatalogConn *conn, const char *ns,
								   const char *table, bool purge);

/* Storage for a table loaded through conn (its vended config applied). */
extern IoStorage *tms_catalog_storage(TmsCatalogConn *conn, const IoLoadedTable *table,
									  TmsError *err);

/*
 * Let storage get the credentials a catalog vended for a table again when
 * they are about to expire or are refused (io_storage_set_refresh):
 * through conn's loadCredentials of ns_io.table (location picks the
 * storage credential), or a load of the table where the catalog does not
 * offer it.  Only ever replaces vended credentials with vended ones (a
 * storage holding the user mapping's is left alone), and never changes
 * the endpoint.  conn must stay pinned while storage lives.  Plain C
 * inside (the refresh runs in the middle of a storage request).
 */
extern void tms_storage_refresh_through(IoStorage *storage, TmsCatalogConn *conn,
										const char *ns_io, const char *table,
										const char *location);

/*
 * The interrupt check of every io call tms makes: a query cancel, a
 * termination, or tms_io_extra_interrupt() when set (the scheduler sets it
 * while a task runs, to end network waits at once when the task's lease is
 * lost), nothing else.  (InterruptPending alone is also set by benign
 * interrupts, such as the idle statistics timeout.)  When the postmaster
 * died it does not return: the process exits, as WL_EXIT_ON_PM_DEATH
 * makes it (the io layer calls it between waits, never inside libcurl).
 */
extern int	tms_io_interrupted(void *arg);
extern bool (*tms_io_extra_interrupt) (void);

/*
 * Set the waits of an io call's options: the interrupt check above, which
 * also ends the process when the postmaster died (as WL_EXIT_ON_PM_DEATH
 * does: a backend must not outlive it waiting on the network); backoff and
 * Retry-After sleeps as latch waits that exit on postmaster death; and
 * the wait event PG_WAIT_EXTENSION ("Extension" in pg_stat_activity)
 * while libcurl waits on the network, as postgres_fdw shows for libpq.
 */
extern void tms_io_set_waits(IoHttpOptions *http);

#endif							/* TMS_BRIDGE_CATALOG_H */
