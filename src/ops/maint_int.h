/*-------------------------------------------------------------------------
 *
 * maint_int.h
 *	  What the files of the maintenance area share (maint.c: jobs, runs,
 *	  the commit protocol and the delete queue; maint_options.c; one file
 *	  per operation: maint_expire.c, maint_orphan.c, maint_rewrite.c,
 *	  maint_compact.c, maint_retention.c); not
 *	  an interface for anyone else.
 *
 * A MaintRun is one execution of one operation on one table, either a
 * dry run (tms.plan_operation: effects become rows, nothing is written)
 * or a real one (a job's task, outside transactions, progress recorded in
 * short steps conditional on the task's lease).  An operation's code is
 * the same for both: it calls maint_emit() for what it would do and
 * maint_delete() / maint_commit() to do it, which in a dry run only emit.
 *
 *-------------------------------------------------------------------------
 */
#ifndef TMS_OPS_MAINT_INT_H
#define TMS_OPS_MAINT_INT_H

#include "postgres.h"

#include "datatype/timestamp.h"
#include "lib/stringinfo.h"
#include "utils/jsonb.h"

#include "bridge/catalog.h"
#include "bridge/engine_server.h"
#include "iceberg/iceberg.h"
#include "io/io.h"
#include "sched/sched.h"

typedef enum MaintOp
{
	MAINT_EXPIRE = 0,
	MAINT_ORPHAN = 1,
	MAINT_REWRITE = 2,
	MAINT_COMPACTION = 3,
	MAINT_POSDELETE = 4,		/* position-delete-rewrite */
	MAINT_RETENTION = 5,
	MAINT_OP_UNKNOWN = -1
} MaintOp;

typedef enum MaintPrefixMode
{
	MAINT_PREFIX_ERROR,
	MAINT_PREFIX_IGNORE,
	MAINT_PREFIX_DELETE
} MaintPrefixMode;

/* older-than: an age before the run, or a point in time */
typedef struct MaintTime
{
	bool		set;
	bool		absolute;
	TimestampTz at;
	Interval	age;
	char	   *text;			/* as given */
} MaintTime;

/* Parsed options (maint_options.c); -1 / unset: the table's default. */
typedef struct MaintOptions
{
	MaintOp		op;
	bool		local;
	EngineType	engine_type;	/* of an engine server; else UNKNOWN */
	char	   *options_json;	/* an engine job's options, checked */

	/* snapshot-expiry (older_than also orphan-cleanup) */
	MaintTime	older_than;
	int32		retain_last;
	int64		max_ref_age_ms;
	int			nsnapshot_ids;
	int64	   *snapshot_ids;
	bool		clean_expired_files;

	/* orphan-cleanup */
	bool		force;
	char	   *location;
	MaintPrefixMode prefix_mode;
	int			nequal_schemes;
	char	  **equal_scheme_from;
	char	  **equal_scheme_to;
	int			nequal_authorities;
	char	  **equal_authority_from;
	char	  **equal_authority_to;

	/* manifest-rewrite */
	int32		spec_id;
	int64		target_size_bytes;

	/* compaction on engine local (-1 / NULL: the table's default) */
	int64		target_file_size_bytes;
	int64		min_file_size_bytes;
	int64		max_file_size_bytes;
	int32		min_input_files;
	int64		max_file_group_size_bytes;
	bool		rewrite_all;
	int32		delete_file_threshold;
	double		delete_ratio_threshold;
	char	   *where;
	bool		sort;			/* strategy sort (or a sort-order given) */
	char	   *sort_order;		/* NULL: the table's sort order */
	int32		output_spec_id; /* -1: the table's current spec */
	bool		remove_dangling_deletes;
	bool		partial_progress;
	int32		partial_progress_max_commits;
	int32		partial_progress_max_failed_commits;	/* -1: max-commits */
	int32		max_concurrent_group_rewrites;

	/* retention (older_than: the cutoff) */
	char	   *retention_column;
	char	   *retention_unit; /* a long or int column's; NULL: none */
	bool		retention_rewrite;	/* mode "rewrite": straddling files too */
	bool		retention_delete_files; /* mode "delete-files": position
										 * deletes of the straddling rows */
	bool		retention_scan; /* files without bounds read too */
	char	   *retention_where;	/* a where instead of column and cutoff
									 * (tms.delete_rows) */
} MaintOptions;

extern MaintOp maint_op_from_name(const char *operation);
extern const char *maint_op_name(MaintOp op);
extern void maint_options_parse(const char *operation, const char *engine,
								Jsonb *options, MaintOptions *out);
extern TimestampTz maint_time_resolve(const MaintTime *t, TimestampTz now);
extern int64 maint_timestamp_to_ms(TimestampTz t);
extern TimestampTz maint_ms_to_timestamp(int64 ms);

typedef enum MaintResult
{
	MAINT_OK,
	MAINT_TRANSIENT,			/* retry later */
	MAINT_TERMINAL,				/* the job fails now */
	MAINT_SKIPPED,				/* the job ends skipped (reason in error) */
	MAINT_CANCELLED,			/* cancel_operation */
	MAINT_LEASE_LOST
} MaintResult;

/* A row of a dry run. */
typedef void (*MaintEmitFn) (void *arg, const char *action, const char *target,
							 const char *detail_json);

typedef struct MaintRun
{
	MemoryContext cxt;
	bool		dry_run;
	MaintEmitFn emit;
	void	   *emit_arg;

	/* a job's run (not in a dry run) */
	SchedTask  *task;
	int64		job_id;
	char	   *phase;			/* start, commit, cleanup */
	char	   *commit_state;	/* JSON text, NULL: none */
	int64		evaluated_snapshot_id;	/* a policy job's, -1: none */
	bool		policy_job;
	int			attempts;
	TimestampTz last_check;

	/* what and where */
	MaintOptions opt;
	char	   *server_name;
	char	   *ns;
	char	   *ns_io;
	char	   *table;
	Oid			acting;

	/* the table, loaded (maint_load) */
	TmsCatalogConn *conn;
	IoStorage  *storage;
	TmsTableFileIO tio;
	IcebergFileIO fio;
	IcebergTableMetadata *md;
	char	   *metadata_location;
	char	   *location;		/* canonical table location */
	int64		before_snapshot_id; /* current snapshot at load, -1: none */
	int64		now_ms;

	/* delete queue (canonical URIs), and the deleter it goes to */
	MemoryContext qcxt;
	const char **q_uris;
	int64	   *q_sizes;
	int			q_n;
	struct TmsDeleter *deleter; /* over storage, made at the first flush */
	int64		deleter_counted;	/* its files already in files_deleted */
	int64		deleter_bytes_counted;

	/* a job on an engine server (maint_on_engine.c) */
	char	   *engine_name;
	char	   *statement;		/* recorded by an earlier attempt, or NULL */
	char	   *engine_job_id;	/* likewise */
	char	   *submitted_at;	/* a run may exist since (the job row's text),
								 * NULL: nothing was sent */
	int64		submit_snapshot_id; /* the table's snapshot then, -1: none */
	char	   *last_error;		/* the job's, from an earlier attempt, or NULL */
	long		run_timeout_ms;

	/* effect */
	int64		after_snapshot_id;
	int64		data_files_rewritten;
	int64		data_files_added;
	int64		bytes_rewritten;
	int64		delete_files_rewritten;
	int64		delete_files_added;
	int64		dangling_dropped;	/* position-delete-rewrite: dangling
									 * deletes its landed commits dropped */
	int64		batch_dangling; /* of the batch being committed */
	int64		rows_filtered;	/* retention's rewrite: older rows its landed
								 * commits removed */
	int64		batch_filtered; /* of the batch being committed */
	bool		has_update_count;	/* retention on trino: its DELETE's count */
	int64		update_count;
	int			groups_given_up;	/* retention's delete-files: groups whose
									 * commit no longer fit the table */
	int64		snapshots_expired;
	int64		manifests_rewritten;
	int64		manifests_added;
	int64		files_deleted;
	int64		bytes_deleted;
	int64		files_skipped;
	int64		files_missing;	/* of expired snapshots, gone already */
	int64		orphans_found;
	int64		commit_attempts;

	/* inside a callback of the plain-C layers: nothing may raise */
	bool		in_callback;
	bool		ignore_cancel;	/* deleting what a failed attempt wrote */
	ErrorData  *callback_error; /* what a callback caught, raised after */

	/*
	 * the io failure of the last load, or the location it refused (for a
	 * session's error)
	 */
	bool		load_failed;
	TmsError	load_err;
	char	   *refused_location;

	/* outcome */
	MaintResult result;
	char		error[2048];
	char		detail[1024];	/* of the failure, "": none */
	char		hint[512];		/* likewise */
	int			sqlerrcode;		/* of the failure; 0: not known */
} MaintRun;

/*
 * The condition of every write of a job's row from its run: the task's
 * lease ($2 instance, $3 version) is still this run's.
 */
#define LEASE_HELD SCHED_LEASE_HELD("maintenance")

/* the largest batch-size of a snapshot-expiry rule (maint_batch.c) */
#define MAINT_BATCH_MAX 1000

/* maint.c */
extern int	tms_engine_run_timeout_s;
extern int	tms_handler_job_timeout_s;
extern SchedOutcome maint_run_job(SchedTask *task, int64 job_id, ErrorData **error);

/* maint_batch.c */
extern SchedOutcome maint_run_batch(SchedTask *task, int64 batch_id, ErrorData **error);

/*
 * Record the run's outcome (the first one sticks), with the SQLSTATE its
 * failure is recorded with (maint_fail: none known, the run's failure is
 * then 38000).
 */
extern void maint_fail(MaintRun *run, MaintResult kind, const char *fmt,...) pg_attribute_printf(3, 4);
extern void maint_fail_code(MaintRun *run, MaintResult kind, int sqlerrcode,
							const char *fmt,...) pg_attribute_printf(4, 5);
extern void maint_fail_iceberg(MaintRun *run, const char *what, const TmsError *err);
extern void maint_emit(MaintRun *run, const char *action, const char *target,
					   const char *detail_json);

/* tms.maintenance_commit_retries (defined with the settings, maint.c) */
extern int	tms_maintenance_commit_retries;

extern bool maint_load(MaintRun *run);

/*
 * maint_drift.c: the snapshot-drift gate of a policy's job, after
 * maint_load; false (run->result set) when the job does not run.
 */
extern bool maint_drift_gate(MaintRun *run);
extern bool maint_moved_on(MaintRun *run, const TmsError *err);
extern void maint_unload(MaintRun *run);
extern void maint_run_operation(MaintRun *run);
extern bool maint_delete(MaintRun *run, const char *path, int64 size, const char *kind);
extern bool maint_delete_ex(MaintRun *run, const char *path, int64 size, const char *kind,
							const char *extra_json);
extern bool maint_callback_delete(MaintRun *run, const char *path, int64 size,
								  const char *kind, const char *extra_json);
extern void maint_callback_rethrow(MaintRun *run);
extern bool maint_delete_flush(MaintRun *run);
extern bool maint_keep_going(MaintRun *run);
extern bool maint_check_now(MaintRun *run);
extern bool maint_record_phase(MaintRun *run, const char *phase, const char *commit_state);

/*
 * The commit protocol (maint_commit.c).  The operation supplies the request
 * body, the files the attempt wrote (deleted once the attempt certainly
 * failed) and a test of whether a metadata version holds the attempt's
 * effect.  Returns:
 *	 MAINT_COMMIT_LANDED	the commit is known to have landed; run->md is
 *							the table after it
 *	 MAINT_COMMIT_RETRY		it certainly failed (a conflict); reload,
 *							re-plan, try again
 *	 MAINT_COMMIT_FAILED	run->result says why (outcome unknown after
 *							retries: the written files stay)
 */
typedef enum MaintCommitOutcome
{
	MAINT_COMMIT_LANDED,
	MAINT_COMMIT_RETRY,
	MAINT_COMMIT_FAILED
} MaintCommitOutcome;

typedef bool (*MaintLandedFn) (void *arg, const IcebergTableMetadata *md);

extern MaintCommitOutcome maint_commit(MaintRun *run, const char *body,
									   const char *commit_state,
									   char **written, int nwritten,
									   int64 base_snapshot_id,
									   MaintLandedFn landed, void *arg);
extern void maint_delete_written(MaintRun *run, char **written, int nwritten);
extern void maint_drop_stale_written(MaintRun *run, int64 base, char **written,
									 int nwritten);
extern char **maint_state_written(Jsonb *cs, int *nwritten);
extern int64 maint_json_int(Jsonb *jb, const char *key);

/* the MaintLandedFn of a commit adding snapshot *(int64 *) arg */
extern bool maint_snapshot_landed(void *arg, const IcebergTableMetadata *md);

/* the IcebergWriter callback of a run writing table files (arg: the run) */
extern int	maint_write_file(void *arg, const char *path, const void *data, size_t len,
							 TmsError *err);
extern bool maint_commit_retry_allowed(MaintRun *run, int retry);

/*
 * Run an operation's commit attempts (one plan, one commit each) until one
 * does not end MAINT_COMMIT_RETRY: after a conflict, within
 * tms.maintenance_commit_retries, the table is loaded again and the next
 * attempt plans on it (maint_commit.c).
 */
/*
 * An attempt that failed before it sent its commit (err: why; written: the
 * files it wrote, deleted now, since nothing can reference them): RETRY
 * when the table moved on (a conflict, or a file of the loaded snapshot
 * gone), else FAILED with run->result set (maint_commit.c).
 */
extern MaintCommitOutcome maint_unsent(MaintRun *run, const TmsError *err, const char *what,
									   char **written, int nwritten);

typedef MaintCommitOutcome (*MaintAttemptFn) (MaintRun *run);
extern void maint_commit_attempts(MaintRun *run, MaintAttemptFn attempt);

/*
 * A job of an operation that writes files (manifest rewrite, compaction,
 * retention), found in phase "commit" or "cleanup", reloads the table and
 * learns where its commit stands (*cs: its commit state):
 *	 MAINT_RESUMED_LANDED	the snapshot is in the table (or the job was
 *							already cleaning up): run->after_snapshot_id is
 *							set; the operation records the counts *cs holds
 *	 MAINT_RESUMED_AGAIN	not landed: what the old attempt wrote is
 *							deleted when main moved away from its base (it
 *							can never land), kept otherwise (orphan
 *							cleanup); the job is back in phase "start" and
 *							plans again
 *	 MAINT_RESUMED_STOP		run->result says why (no snapshot id, the
 *							table did not load)
 */
typedef enum MaintResumed
{
	MAINT_RESUMED_LANDED,
	MAINT_RESUMED_AGAIN,
	MAINT_RESUMED_STOP
} MaintResumed;

extern MaintResumed maint_resume_written(MaintRun *run, Jsonb **cs);

/* the operations: each runs (or dry-runs) one operation on run->md */
extern void maint_run_expire(MaintRun *run);
extern void maint_run_orphan(MaintRun *run);
extern void maint_run_rewrite(MaintRun *run);
extern void maint_run_compact(MaintRun *run);	/* maint_compact.c; also
												 * position-delete-rewrite */
extern void maint_run_retention(MaintRun *run); /* maint_retention.c */
struct IcebergCompactPlan;
extern void maint_compact_run_plan(MaintRun *run, struct IcebergCompactPlan *plan);

/* checks of options against the loaded table (run_operation) */
extern void maint_compact_check_table(MaintRun *run);
extern void maint_check_where(MaintRun *run, const char *operation);
struct IcebergCompactOptions;
struct IcebergPartitionFilter;
extern void maint_compact_options(MaintRun *run, struct IcebergCompactOptions *o,
								  const struct IcebergPartitionFilter *where);
extern void maint_orphan_check_table(MaintRun *run);	/* maint_orphan.c */
extern void maint_retention_check_table(MaintRun *run); /* maint_retention.c */

/* retention on a livy or trino server: its DELETE's predicate (maint_retention.c) */
extern char *maint_retention_engine_predicate(MaintRun *run, EngineType type, bool raise);
extern void maint_retention_engine_done(MaintRun *run, int64 before_snapshot_id);

/* position-delete-rewrite on engine local (maint_posdel.c) */
struct IcebergCompactPlan;
extern void maint_posdel_check_table(MaintRun *run);
extern char *maint_compact_reasons_json(unsigned r);	/* maint_compact.c */
extern void maint_posdel_emit_plan(MaintRun *run, const struct IcebergCompactPlan *p,
								   int commits);

/* a job on an engine server (maint_on_engine.c): submit, track, record */
extern void maint_run_engine(MaintRun *run);

/* resuming a job whose commit was in flight or landed (phase commit / cleanup) */
extern void maint_resume_expire(MaintRun *run);
extern void maint_resume_rewrite(MaintRun *run);
extern void maint_resume_compact(MaintRun *run);
extern void maint_resume_retention(MaintRun *run);

#endif							/* TMS_OPS_MAINT_INT_H */
