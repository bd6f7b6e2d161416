/*-------------------------------------------------------------------------
 *
 * purge_int.h
 *	  What the files of the purge area share (purge.c: the task's steps
 *	  and the catalog drop; purge_check.c: the check before a drop;
 *	  purge_walk.c: the walk and the deletes); not an interface for anyone
 *	  else.
 *
 *-------------------------------------------------------------------------
 */
#ifndef TMS_OPS_PURGE_INT_H
#define TMS_OPS_PURGE_INT_H

#include "postgres.h"

#include "utils/hsearch.h"

#include "bridge/catalog.h"
#include "iceberg/iceberg.h"
#include "io/io.h"
#include "sched/sched.h"

/* The delete queues, in the order they must be emptied. */
#define Q_CONTENT	0
#define Q_MANIFESTS 1
#define Q_LISTS		2
#define Q_METADATA	3
#define NQUEUES		4

typedef struct PurgeQueue
{
	MemoryContext cxt;			/* reset after each flush */
	const char **uris;			/* canonical, in cxt */
	int64	   *sizes;			/* declared sizes, -1 unknown */
	int			n;
} PurgeQueue;

typedef enum RunResult
{
	RUN_OK,
	RUN_TRANSIENT,				/* retry later */
	RUN_TERMINAL,				/* FAILED at once */
	RUN_LEASE_LOST
} RunResult;

typedef struct PurgeRun
{
	SchedTask  *task;
	int64		job_id;
	MemoryContext cxt;

	/* the job row */
	bool		found;
	char	   *state;
	char	   *server_name;
	char	   *ns;
	char	   *table;
	char	   *table_uuid;
	char	   *location;		/* canonical */
	char	   *metadata_location;
	Oid			requested_by;
	char	   *phase;
	int			attempts;
	char	   *held_ns;		/* where the catalog entry is held (the
								 * server's purge_hold_namespace), NULL:
								 * dropped */
	char	   *held_name;
	bool		vended;			/* credentials captured */
	int			nvended;
	IoKeyValue *vended_kv;
	TimestampTz expires_at;		/* 0: unknown */
	bool		delete_others;	/* delete_other_tables_files */

	/* the server and the requester's user mapping (malloc'd) */
	TmsServer  *server;
	TmsCredentials creds;
	TmsCatalogConn *conn;		/* the requester's, pinned for the run: the
								 * drop, a held entry's credentials and its
								 * release */

	/* I/O, freed in the run's cleanup */
	IoStorage  *storage;
	struct TmsDeleter *deleter; /* over storage */
	TmsTableFileIO tio;
	IcebergFileIO fio;
	IcebergTableMetadata *md;
	IcebergManifestListReader *lr;
	IcebergManifestReader *mr;
	bool		gc_enabled;
	HTAB	   *seen;			/* manifest path hashes */
	char	  **others;			/* canonical locations of the other tables tms
								 * knows at or below the location */
	int			nothers;

	PurgeQueue	q[NQUEUES];

	/* counters of this attempt */
	int64		deleted;
	int64		bytes;
	int64		skipped;
	int64		kept;
	char	   *kept_example;
	int64		unreadable;
	int64		requests;
	char	   *skipped_example;
	TimestampTz last_progress;

	/* outcome */
	RunResult	result;
	char		error[2048];
	int			sqlerrcode;		/* of the failure; 0: not known */
} PurgeRun;

/* Why a purge may not drop a table (purge_check.c). */
typedef struct PurgeCheck
{
	int			sqlerrcode;
	bool		transient;		/* a read that may work later */
	char		message[1024];
	char		detail[2048];
	char		hint[512];
} PurgeCheck;

/* purge_check.c */
extern bool purge_config_has_secret(const IoKeyValue *config, size_t n);
extern bool purge_check_walkable(const TmsServer *s, const TmsCredentials *creds,
								 const IoKeyValue *vended, size_t n,
								 const char *ns, const char *table,
								 const char *metadata_location, const char *location,
								 const char *uuid, bool whole, PurgeCheck *out);

/* purge.c */
extern void purge_run_fail(PurgeRun *run, RunResult kind, const char *fmt,...) pg_attribute_printf(3, 4);
extern void purge_run_fail_code(PurgeRun *run, RunResult kind, int sqlerrcode,
								const char *fmt,...) pg_attribute_printf(4, 5);
extern void purge_write_progress(PurgeRun *run, const char *phase, bool force);

/* purge_walk.c: walk the metadata and delete every reachable file. */
extern void purge_walk(PurgeRun *run);

#endif							/* TMS_OPS_PURGE_INT_H */
