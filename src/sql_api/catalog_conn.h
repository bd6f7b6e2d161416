/*-------------------------------------------------------------------------
 *
 * catalog_conn.h
 *	  Catalog connections for the PostgreSQL-facing code of tms: a catalog
 *	  is a foreign server of the tms_iceberg wrapper, its credentials a user
 *	  mapping of the acting role.  Also the mapping of io and iceberg error
 *	  values to ereport with SQLSTATEs (doc/catalogs.md has the table).
 *
 * Include only from src/sql_api, src/ops, src/sched, src/worker.  Never
 * includes jansson.
 *
 * src/sql_api/catalog_conn.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef TMS_CATALOG_CONN_H
#define TMS_CATALOG_CONN_H

#include "postgres.h"

#include "nodes/pg_list.h"

#include "io/io.h"

/*
 * A connection to one catalog as one role.  Cached per backend for
 * (server, role) until the server's or user mapping's options change, so
 * the OAuth token, the /v1/config handshake and the ETag cache are reused
 * across statements.  Everything in here is owned by the cache: callers
 * never free it, and must not keep it across transactions (it may be
 * invalidated by ALTER SERVER / ALTER USER MAPPING).
 */
typedef struct TmsCatalogConn
{
	Oid			serverid;
	Oid			userid;
	char	   *server_name;	/* malloc'd */
	IoCatalog  *catalog;
	IoStorageConfig storage;	/* strings malloc'd, owned here */
	IoHttpOptions http;
	char	   *relative_root;	/* relative_path_root, or NULL */
	int			nallowed;		/* allowed_locations */
	char	  **allowed;
	bool		valid;
} TmsCatalogConn;

/*
 * Connect (or reuse a cached connection) to the catalog behind the named
 * foreign server as the current user.  Checks USAGE on the server and
 * requires a user mapping (for the user or PUBLIC).  ereports on failure.
 */
extern TmsCatalogConn *tms_catalog_connect(const char *server_name);

/* The interrupt check for io calls: returns InterruptPending, nothing else. */
extern int	tms_io_interrupted(void *arg);

/*
 * Storage for a loaded table: the server's storage options, the user
 * mapping's keys, then the catalog's vended config on top.  Returns a
 * malloc'd IoStorage the caller frees with io_storage_free (use
 * PG_FINALLY).  ereports on failure.
 */
extern IoStorage *tms_catalog_storage(TmsCatalogConn *conn,
									  const IoLoadedTable *table);

/*
 * An IcebergFileIO for a loaded table's files: s3:// s3a:// s3n:// paths go
 * to the io layer's S3 reader over storage, everything else to the local
 * reader (relative paths resolved under the server's relative_path_root).
 * *t holds the state and must outlive *out; storage stays the caller's.
 */
typedef struct TmsFileIO
{
	const char *relative_root;	/* NULL: relative paths stay relative */
	IcebergFileIO s3;
	IoFileIO	s3state;
	IcebergFileIO local;
	IcebergLocalFS localfs;
} TmsFileIO;

extern void tms_fileio_init(TmsFileIO *t, TmsCatalogConn *conn,
							IoStorage *storage, IcebergFileIO *out);

/* SQLSTATE for an io error code. */
extern int	tms_io_sqlstate(IoErrorCode code);

/*
 * Raise *err as an ERROR: CHECK_FOR_INTERRUPTS() first (an interrupted
 * call ends as the pending cancel), then the mapped SQLSTATE, the io
 * message as primary message, the server's text as DETAIL, and a HINT for
 * commit conflicts and unknown commit states.
 */
extern void tms_io_ereport(const IoError *err) pg_attribute_noreturn();

/*
 * Raise an iceberg error; io_err (may be NULL) is the storage error behind
 * an ICEBERG_ERR_IO.
 */
extern void tms_iceberg_ereport(const IcebergError *err, const IoError *io_err)
			pg_attribute_noreturn();

/*
 * A namespace given in SQL ("a.b") in io form (levels separated by
 * IO_NS_SEP), palloc'd; and back.
 */
extern char *tms_namespace_to_io(const char *ns);
extern char *tms_namespace_from_io(const char *ns);

/*
 * Reading the options of a tms_iceberg server or user mapping, as the
 * validator reads them (catalog_fdw.c), for code that needs a setting
 * without connecting: the value of an option (NULL if absent), and the
 * parsers of durations (ms, units allowed), Booleans and location lists.
 * The parsers raise ERRCODE_FDW_INVALID_ATTRIBUTE_VALUE on a bad value.
 */
extern const char *tms_fdw_option(List *options, const char *name);
extern int	tms_fdw_option_ms(const char *name, const char *value);
extern bool tms_fdw_option_bool(const char *name, const char *value);
extern List *tms_fdw_option_locations(const char *name, const char *value);

/* true when location lies under one of the server's allowed_locations. */
extern bool tms_location_allowed(const TmsCatalogConn *conn, const char *location);

#endif							/* TMS_CATALOG_CONN_H */
