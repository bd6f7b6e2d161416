/*-------------------------------------------------------------------------
 *
 * stats.h
 *	  Cumulative statistics of tms in shared memory: tasks per kind,
 *	  maintenance jobs and purges by outcome, HTTP exchanges per foreign
 *	  server.  The tms.stat_* views read them (doc/operations.md,
 *	  "Monitoring").
 *
 * They are kept the way contrib/pg_stat_statements keeps its counters: a
 * hash table in shared memory sized at server start (tms.stat_max_entries
 * rows), saved to pg_stat/tms.stat by the postmaster at a clean shutdown
 * and read back at the next start, so they outlive restarts and the
 * pruning of the rows they were counted from; after a crash they start
 * from zero.  Only tms.stat_reset() sets them back.
 *
 * Each row is one label set of one area in one database, as the views
 * show it: a task kind; (operation, engine, outcome) of maintenance jobs;
 * (server, outcome) of purges; (server, service) of HTTP exchanges.  When
 * the table is full, new label sets of an area are counted in its one
 * overflow row (database and labels "(other)"), created at start.
 *
 * What is counted, and when:
 *	- tasks, jobs and purges by the transaction that records them: the
 *	  counts are kept in the backend and added at its commit (a rolled
 *	  back transaction or subtransaction counts nothing, like the rows it
 *	  wrote); outside a transaction they are added at once;
 *	- HTTP exchanges at once, by the io layer's observer
 *	  (tms_stat_observe_http), which only does atomic additions: it runs
 *	  inside libcurl's transfer loop and must never raise or block.
 *
 * Counters are 64-bit atomics updated without a lock; the LWLock of the
 * table guards its shape (entries are added, never removed) and the
 * reset times.
 *
 *-------------------------------------------------------------------------
 */
#ifndef TMS_BRIDGE_STATS_H
#define TMS_BRIDGE_STATS_H

#include "postgres.h"

#include "datatype/timestamp.h"

#include "io/io.h"

/* The areas, each with its labels and counters (below). */
typedef enum TmsStatArea
{
	TMS_STAT_TASKS,				/* kind */
	TMS_STAT_JOBS,				/* operation, engine, outcome */
	TMS_STAT_PURGES,			/* server, outcome */
	TMS_STAT_REQUESTS,			/* server, service */
	TMS_STAT_NAREAS
} TmsStatArea;

#define TMS_STAT_NLABELS 3

/* tasks */
#define TMS_STAT_TASK_CLAIMED		0
#define TMS_STAT_TASK_SUCCEEDED		1
#define TMS_STAT_TASK_FAILED		2
#define TMS_STAT_TASK_LEASE_LOST	3
#define TMS_STAT_TASK_RUN_US		4	/* runs settled (succeeded or failed) */

/* maintenance jobs and purges */
#define TMS_STAT_JOB_ENDED			0
#define TMS_STAT_JOB_DURATION_US	1	/* first start to end */
#define TMS_STAT_JOB_FILES			2	/* files deleted */
#define TMS_STAT_JOB_BYTES			3	/* bytes deleted */
#define TMS_STAT_JOB_SKIPPED		4	/* purges: files outside the allowed
										 * roots */
#define TMS_STAT_JOB_REQUESTS		5	/* purges: delete requests */

/* HTTP exchanges */
#define TMS_STAT_HTTP_REQUESTS		0
#define TMS_STAT_HTTP_RETRIES		1
#define TMS_STAT_HTTP_ERRORS		2
#define TMS_STAT_HTTP_ERROR_CLASS	3	/* first of TMS_STAT_HTTP_NCLASSES */
#define TMS_STAT_HTTP_NCLASSES		6	/* timeout, connect, throttled,
										 * client, server, other */
#define TMS_STAT_HTTP_LATENCY_US	9	/* sum of the latencies */
#define TMS_STAT_HTTP_BUCKET		10	/* first of TMS_STAT_HTTP_NBUCKETS */
#define TMS_STAT_HTTP_NBUCKETS		12	/* the bounds below, then +Inf */

#define TMS_STAT_NCOUNTERS			22

/* Upper bounds of the latency buckets, in microseconds (Prometheus' defaults). */
#define TMS_STAT_LATENCY_BOUNDS_US \
	{5000, 10000, 25000, 50000, 100000, 250000, 500000, 1000000, 2500000, \
	 5000000, 10000000}

/* Names of the error classes, in counter order. */
#define TMS_STAT_HTTP_CLASS_NAMES \
	{"timeout", "connect", "throttled", "client", "server", "other"}

/* tms.stat_max_entries (PGC_POSTMASTER) */
extern int	tms_stat_max_entries;

/* Shared memory: from the shmem request and startup hooks of src/tms.c. */
extern Size tms_stat_shmem_size(void);
extern void tms_stat_shmem_request(void);
extern void tms_stat_shmem_init(void);

/* The area named name ("tasks", "maintenance", "purges", "requests"), or -1. */
extern int	tms_stat_area_by_name(const char *name);

/*
 * Count in the row of area with labels (NULL: empty) of this database:
 * add delta[i] to counter i for i < n.  See the file header for when.
 */
extern void tms_stat_add(TmsStatArea area, const char *l1, const char *l2,
						 const char *l3, const int64 *delta, int n);

/*
 * Make http's observer count every exchange in the row (server, service)
 * of this database: service "catalog", "storage" or "engine".  Does
 * nothing when tms is not preloaded.
 */
extern void tms_stat_observe_http(IoHttpOptions *http, const char *server,
								  const char *service);

/* One row as the views read it. */
typedef struct TmsStatRow
{
	Oid			dboid;			/* InvalidOid: the overflow row */
	char	   *labels[TMS_STAT_NLABELS];
	int64		counters[TMS_STAT_NCOUNTERS];
	TimestampTz reset;			/* when the row was created or last reset */
} TmsStatRow;

/* Copy out the rows of an area (palloc'd); returns how many. */
extern int	tms_stat_rows(TmsStatArea area, TmsStatRow **rows);

/* Zero the rows of area (-1: every area) of database dboid. */
extern void tms_stat_reset(int area, Oid dboid);

#endif							/* TMS_BRIDGE_STATS_H */
