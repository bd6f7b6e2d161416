/*-------------------------------------------------------------------------
 *
 * policy_int.h
 *	  What the files of the policy area share (policy_run.c,
 *	  policy_refresh.c, policy_evaluate.c); not an interface for anyone
 *	  else.
 *
 * A PolicyRun is one evaluation of one policy, in one of two modes:
 *
 *	task	(policy-expand, run by a pool worker or a session) every database
 *			step is a short transaction of its own (sched_try_step), all
 *			network work happens between them, and failures are values
 *			that end the run (the task then retries after a backoff);
 *	now		(tms.evaluate_now) every step runs in the caller's transaction
 *			and errors are raised to the caller.
 *
 * The catalog connection is made as the policy's owner and pinned for the
 * run (tms_catalog_keep).
 *
 *-------------------------------------------------------------------------
 */
#ifndef TMS_OPS_POLICY_INT_H
#define TMS_OPS_POLICY_INT_H

#include "postgres.h"

#include "access/tupdesc.h"
#include "utils/tuplestore.h"

#include "bridge/catalog.h"
#include "sched/sched.h"

typedef struct PolicyRow
{
	int32		id;
	char	   *name;
	Oid			owner;
	char	   *server;
	int32		group_id;
	bool		window_open;
	bool		active;
	bool		refresh_due;	/* the group's tables need a refresh now */
	bool		has_cycle_rules;	/* rules without a schedule */
	bool		has_cron_rules; /* rules with a crontab */
	bool		cycle_due;		/* the policy-expand task's cycle is due */
	bool		events;			/* its server's commits arrive as events */
} PolicyRow;

/* Which (table, rule) pairs a run evaluates (their counters permitting). */
typedef enum PolicyScope
{
	POLICY_SCOPE_CYCLE,			/* rules without a schedule, every table */
	POLICY_SCOPE_ALL,			/* every rule, every table (evaluate_now) */
	POLICY_SCOPE_CRON,			/* the rules that fired (rule_ids), one table */
	POLICY_SCOPE_COMMIT			/* the on-commit rules, one table */
} PolicyScope;

typedef struct PolicyRun
{
	bool		task;			/* task mode (see the file header) */
	MemoryContext cxt;			/* lives for the run */
	PolicyRow  *policy;
	PolicyScope scope;
	int64		table_id;		/* CRON, COMMIT: the table */
	int			nrules;			/* CRON: the rules that fired */
	int64	   *rule_ids;

	/*
	 * COMMIT: the table as its observation loaded it (io's, freed with
	 * io_loaded_table_free), taken by the first evaluation of the table
	 * instead of a second load; metadata_json NULL: none
	 */
	IoLoadedTable kept;
	TmsCatalogConn *conn;
	ErrorData  *error;			/* task mode: the failure that ended the run */
	Tuplestorestate *tupstore;	/* evaluate_now: result rows */
	TupleDesc	desc;
	int			evaluated;		/* statistics of the run (DEBUG1) */
	int			failed;			/* evaluations without a result (logged) */
	char	   *first_failure;	/* the first one's error, in cxt */
	uint64		requests_refresh;
	uint64		requests_evaluate;
	double		refresh_ms;
	double		candidates_ms;	/* the candidate queries */
	double		evaluate_ms;	/* loads, evaluations, records */
} PolicyRun;

/*
 * Run fn(arg) as one database step of the run: in task mode a transaction
 * of its own, returning false with r->error set when fn raised; in now
 * mode inside the caller's transaction (SPI connected), raising.  fn runs
 * in the caller's memory context, which is current again on return: what
 * fn allocates lives as long as what the caller allocates (a page's or a
 * candidate's context, reset per item), never longer.  r->error is copied
 * into the run's context.
 */
extern bool policy_step(PolicyRun *r, void (*fn) (void *arg), void *arg);

/* Record a failure of the run (task mode) and return false; else raise. */
extern bool policy_fail(PolicyRun *r, int sqlerrcode, const char *message,
						const char *detail);

/* SPI helpers for steps. */
extern void policy_exec(const char *sql, int nargs, Oid *types, Datum *values,
						const char *nulls, int expect);
extern char *policy_col_str(int row, int col, MemoryContext cxt);
extern int64 policy_col_int64(int row, int col, int64 dflt);

/* policy_refresh.c: refresh tms.tables for the policy's group. */
extern bool policy_refresh_group(PolicyRun *r);

/*
 * policy_refresh.c: refresh one table of the policy's group (ns dotted):
 * load it, count its new commits, record them.  A table the catalog no
 * longer has is marked dropped (*gone set).  Connected (r->conn).  The
 * loaded table is kept in r->kept when it came with its metadata.
 */
extern bool policy_refresh_table(PolicyRun *r, const char *ns, const char *table,
								 bool *gone);

/* policy_evaluate.c: find the candidates, evaluate, record, submit. */
extern bool policy_evaluate_candidates(PolicyRun *r);

/* policy_run.c: the handler of the "policy-expand" task kind. */
extern SchedOutcome policy_expand_task(SchedTask *task, ErrorData **error);

/*
 * policy_run.c: read policy id (a step) into r->policy (NULL: gone), with
 * task_data the policy-expand task's data (NULL: none) for cycle_due.
 */
extern bool policy_load(PolicyRun *r, int32 id, const char *task_data);

/*
 * policy_run.c: connect to the policy's catalog as its owner (a step),
 * run fn(r, arg) with the connection pinned, release it.  False: the
 * connection or fn failed.
 */
extern bool policy_with_catalog(PolicyRun *r, bool (*fn) (PolicyRun *r, void *arg),
								void *arg);

/* policy_tasks.c: the handlers of the "cron-job" and "commit-job" kinds. */
extern SchedOutcome policy_cron_job_task(SchedTask *task, ErrorData **error);
extern SchedOutcome policy_commit_job_task(SchedTask *task, ErrorData **error);

/* ms since the Unix epoch, and back. */
extern int64 policy_now_ms(void);
extern TimestampTz policy_ms_to_timestamptz(int64 ms);

#endif							/* TMS_OPS_POLICY_INT_H */
