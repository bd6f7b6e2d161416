/*-------------------------------------------------------------------------
 *
 * policy_evaluate.c
 *	  The evaluation half of a policy run: find the (table, rule) pairs
 *	  whose counters reached a threshold, evaluate each rule's condition
 *	  over its table's metadata, record every evaluation, and submit the
 *	  maintenance jobs of true results.
 *
 * Candidates come from one indexed query over tms.rule_baselines (no
 * Iceberg I/O), for the run's scope (policy_int.h: a cycle's rules
 * without a schedule, a firing's rules on one table, the on-commit rules
 * of one table, or every rule), skipping pairs with a job in flight or in
 * their rule's cooldown, inactive rules and rules a nearer group's rule
 * of the same operation overrides on the table (tms._rule_wins, the
 * precedence tms.effective_rules shows), CANDIDATE_BATCH at a time in
 * key order, so a backlog of any size is walked in bounded memory: a
 * batch's strings live in a
 * context reset per batch, and each evaluation (explanations, its record,
 * its row) in one reset after it.  Each batch's tables are loaded
 * together (tms.evaluation_pool_size requests in flight); the rest of an
 * evaluation (manifest lists, manifests, data file lists, only the levels
 * the condition, and the rule's score if it has one, need; the derived
 * variables of dsl_metrics_derive when either reads one) runs one
 * candidate after the other, and each
 * result is recorded in a step of its own with tms._record_evaluation():
 * the log row (with the score and its explanation), and for a true result
 * the job and its task, ranked by the score, guarded so
 * that a (table, rule) never has two operations in flight.  Each
 * candidate carries its rule's version: a result of a version that
 * tms.alter_rule replaced while it was evaluated submits nothing.
 *
 * An evaluation's failures (catalog, storage, malformed metadata) are
 * values: they become the log row's error and the pair is evaluated again
 * at the next run.  Only interrupts and running out of memory raise.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "portability/instr_time.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/memutils.h"

#include "bridge/catalog.h"
#include "bridge/condition.h"
#include "bridge/errors.h"
#include "bridge/names.h"
#include "dsl/dsl.h"
#include "iceberg/iceberg.h"
#include "io/io.h"
#include "ops/policy.h"
#include "ops/policy_int.h"
#include "sched/lease.h"

#define CANDIDATE_BATCH 64

typedef struct Candidate
{
	int64		rule_id;
	int64		table_id;
	char	   *ns;
	char	   *table;
	char	   *operation;
	char	   *condition;
	int64		commits_added;
	int64		bytes_added;
	int64		time_elapsed_ms;
	int32		chain_rank;
	int32		rule_version;	/* the version whose condition is evaluated */
	char	   *score;			/* the rule's score expression, or NULL */
	int64		target_file_size;	/* the rule's option, or 0 */
} Candidate;

typedef PolicyEvaluation Evaluation;

/* A candidate's table, loaded ahead of its evaluation (malloc'd by io). */
typedef struct Preload
{
	bool		loaded;			/* t is set; else err says why not */
	IoLoadedTable t;
	TmsError	err;
} Preload;

typedef struct Batch
{
	PolicyRun  *run;
	Candidate	cands[CANDIDATE_BATCH];
	int			n;
	int32		after_rank;		/* keyset: the last (chain rank, rule, table) */
	int64		after_rule;
	int64		after_table;
	MemoryContext cxt;			/* the batch's strings; reset per batch */
	MemoryContext item_cxt;		/* one evaluation's; reset per candidate */
} Batch;

/* ---------------------------------------------------------------------
 * Candidates
 * --------------------------------------------------------------------- */

/*
 * The candidates of a cycle: rules without a schedule whose counters
 * fired.  The two partial indexes of tms.rule_baselines serve its two
 * arms.
 *
 * Both candidate queries find the pairs by the cheap tests first, in key
 * order, behind an OFFSET 0 (the planner may not push the precedence test
 * down into it), and ask tms._rule_wins (an index scan per call, not
 * inlined) only of those pairs, one after the other until LIMIT rows
 * pass: a batch costs at most LIMIT plus the overridden pairs calls.
 * Pushed down, it ran for every baseline the scan read (the scoped query
 * reads all of the policy's): 20,000 calls, 2.9 s, per batch of 64.
 */
static const char *cycle_candidates_sql =
"SELECT c.* FROM ("
"SELECT b.rule_id, b.table_id, t.namespace, t.table_name, r.operation,"
"       r.condition, t.commits - b.base_commits AS commits_added,"
"       t.bytes_added - b.base_bytes AS bytes_added,"
"       (extract(epoch FROM least(now() - b.since,"
"                                 interval '100000 years')) * 1000)::bigint AS elapsed_ms,"
"       tms._chain_rank(r.operation) AS chain_rank, r.version, r.score,"
"       CASE WHEN r.options ->> 'target-file-size-bytes' ~ '^[0-9]{1,18}$'"
"            THEN (r.options ->> 'target-file-size-bytes')::bigint END AS target_size"
"  FROM tms.maintenance_rules r"
"  JOIN tms.rule_baselines b ON b.rule_id = r.id"
"  JOIN tms.tables t ON t.id = b.table_id"
" WHERE r.policy_id = $1 AND r.schedule IS NULL AND b.pending_job IS NULL"
"   AND (b.triggered OR b.due_at <= now()) AND t.dropped_at IS NULL"
"   AND (b.cooldown_until IS NULL OR b.cooldown_until <= now())"
"   AND r.active"
"   AND (tms._chain_rank(r.operation), b.rule_id, b.table_id) > ($5, $2, $3)"
" ORDER BY tms._chain_rank(r.operation), b.rule_id, b.table_id OFFSET 0) c"
" WHERE tms._rule_wins(c.rule_id, c.table_id)"
" ORDER BY c.chain_rank, c.rule_id, c.table_id"
" LIMIT $4";

/*
 * The candidates of a schedule's run (a firing on one table, the commits
 * to one table) or of tms.evaluate_now: the rules of the scope whose
 * counters fired or that have none (the schedule alone says when).  $6
 * the table (NULL: all), $7 the rules (NULL: all), $8 on-commit rules
 * only.
 */
static const char *scoped_candidates_sql =
"SELECT c.* FROM ("
"SELECT b.rule_id, b.table_id, t.namespace, t.table_name, r.operation,"
"       r.condition, t.commits - b.base_commits AS commits_added,"
"       t.bytes_added - b.base_bytes AS bytes_added,"
"       (extract(epoch FROM least(now() - b.since,"
"                                 interval '100000 years')) * 1000)::bigint AS elapsed_ms,"
"       tms._chain_rank(r.operation) AS chain_rank, r.version, r.score,"
"       CASE WHEN r.options ->> 'target-file-size-bytes' ~ '^[0-9]{1,18}$'"
"            THEN (r.options ->> 'target-file-size-bytes')::bigint END AS target_size"
"  FROM tms.maintenance_rules r"
"  JOIN tms.rule_baselines b ON b.rule_id = r.id"
"  JOIN tms.tables t ON t.id = b.table_id"
" WHERE r.policy_id = $1 AND b.pending_job IS NULL AND t.dropped_at IS NULL"
"   AND (b.triggered OR b.due_at <= now()"
"        OR num_nonnulls(r.commits_threshold, r.bytes_threshold, r.time_threshold_ms) = 0)"
"   AND (b.cooldown_until IS NULL OR b.cooldown_until <= now())"
"   AND r.active"
"   AND ($6::bigint IS NULL OR b.table_id = $6)"
"   AND ($7::bigint[] IS NULL OR r.id = ANY ($7))"
"   AND (NOT $8 OR r.schedule @> '{\"on-commit\": true}')"
"   AND (tms._chain_rank(r.operation), b.rule_id, b.table_id) > ($5, $2, $3)"
" ORDER BY tms._chain_rank(r.operation), b.rule_id, b.table_id OFFSET 0) c"
" WHERE tms._rule_wins(c.rule_id, c.table_id)"
" ORDER BY c.chain_rank, c.rule_id, c.table_id"
" LIMIT $4";

static void
candidates_step(void *arg)
{
	Batch	   *b = arg;
	PolicyRun  *r = b->run;
	Oid			types[8] = {INT4OID, INT8OID, INT8OID, INT4OID, INT4OID, INT8OID,
	INT8ARRAYOID, BOOLOID};
	Datum		values[8];
	char		nulls[8] = {' ', ' ', ' ', ' ', ' ', ' ', ' ', ' '};

	values[0] = Int32GetDatum(r->policy->id);
	values[1] = Int64GetDatum(b->after_rule);
	values[2] = Int64GetDatum(b->after_table);
	values[3] = Int32GetDatum(CANDIDATE_BATCH);
	values[4] = Int32GetDatum(b->after_rank);
	values[5] = Int64GetDatum(r->table_id);
	if (r->scope != POLICY_SCOPE_CRON && r->scope != POLICY_SCOPE_COMMIT)
		nulls[5] = 'n';
	if (r->scope == POLICY_SCOPE_CRON)
	{
		Datum	   *ids = palloc(sizeof(Datum) * Max(r->nrules, 1));

		for (int i = 0; i < r->nrules; i++)
			ids[i] = Int64GetDatum(r->rule_ids[i]);
		values[6] = PointerGetDatum(construct_array(ids, r->nrules, INT8OID, 8,
													FLOAT8PASSBYVAL, TYPALIGN_DOUBLE));
	}
	else
		nulls[6] = 'n';
	values[7] = BoolGetDatum(r->scope == POLICY_SCOPE_COMMIT);

	/*
	 * In the chain order of Gravitino's table maintenance service design
	 * (tms._chain_rank): a table's compaction is recorded before its manifest
	 * rewrite, that before its expiry, so each later job finds the earlier
	 * ones and waits for them.
	 */
	if (r->scope == POLICY_SCOPE_CYCLE)
		policy_exec(cycle_candidates_sql, 5, types, values, nulls, SPI_OK_SELECT);
	else
		policy_exec(scoped_candidates_sql, 8, types, values, nulls, SPI_OK_SELECT);
	b->n = (int) SPI_processed;
	for (int i = 0; i < b->n; i++)
	{
		Candidate  *cd = &b->cands[i];

		cd->rule_id = policy_col_int64(i, 1, 0);
		cd->table_id = policy_col_int64(i, 2, 0);
		cd->ns = policy_col_str(i, 3, b->cxt);
		cd->table = policy_col_str(i, 4, b->cxt);
		cd->operation = policy_col_str(i, 5, b->cxt);
		cd->condition = policy_col_str(i, 6, b->cxt);
		cd->commits_added = policy_col_int64(i, 7, 0);
		cd->bytes_added = policy_col_int64(i, 8, 0);
		cd->time_elapsed_ms = policy_col_int64(i, 9, 0);
		cd->chain_rank = (int32) policy_col_int64(i, 10, 0);
		cd->rule_version = (int32) policy_col_int64(i, 11, 0);
		cd->score = policy_col_str(i, 12, b->cxt);
		cd->target_file_size = policy_col_int64(i, 13, 0);
	}
	if (b->n > 0)
	{
		b->after_rank = b->cands[b->n - 1].chain_rank;
		b->after_rule = b->cands[b->n - 1].rule_id;
		b->after_table = b->cands[b->n - 1].table_id;
	}
}

/* ---------------------------------------------------------------------
 * Loading ahead
 * --------------------------------------------------------------------- */

typedef struct PreloadArgs
{
	Preload    *pre;
	int		   *which;			/* reqs[index] is for pre[which[index]] */
} PreloadArgs;

/*
 * IoLoadResultFn of the evaluation: keep the loaded table (taken over
 * from the io layer) or its error.  Allocates nothing, cannot fail.
 */
static int
preload_result(void *arg, size_t index, IoLoadedTable *t, const TmsError *err)
{
	PreloadArgs *pa = arg;
	Preload    *pre = &pa->pre[pa->which[index]];

	if (t != NULL)
	{
		pre->t = *t;
		memset(t, 0, sizeof(*t));
		pre->loaded = true;
	}
	else
		pre->err = *err;
	return 0;
}

/*
 * Load the batch's tables into pre[], tms.evaluation_pool_size requests at
 * a time; the first candidate of the table a commit-job observed takes
 * that load instead (r->kept).  A load's failure stays in its Preload; a
 * batch that could not run at all leaves its error in every Preload not
 * delivered.  The caller frees pre[i].t.
 */
static void
preload_tables(Batch *b, Preload *pre)
{
	PolicyRun  *r = b->run;
	IoLoadRequest *reqs = palloc(sizeof(IoLoadRequest) * b->n);
	PreloadArgs pa;
	size_t		nreqs = 0;
	TmsError	err;

	pa.pre = pre;
	pa.which = palloc(sizeof(int) * b->n);
	for (int i = 0; i < b->n; i++)
	{
		memset(&pre[i], 0, sizeof(Preload));
		pre[i].err.code = IO_ERR_INTERNAL;	/* until delivered */
		if (r->kept.metadata_json != NULL && b->cands[i].table_id == r->table_id)
		{
			pre[i].t = r->kept;
			pre[i].loaded = true;
			memset(&r->kept, 0, sizeof(r->kept));
			continue;
		}
		reqs[nreqs].ns = tms_namespace_to_io(b->cands[i].ns);
		reqs[nreqs].table = b->cands[i].table;
		reqs[nreqs].known_etag = NULL;
		pa.which[nreqs++] = i;
	}
	if (nreqs > 0 &&
		io_catalog_load_tables_etag(r->conn->catalog, reqs, nreqs,
									tms_evaluation_pool_size, preload_result, &pa,
									&err) != 0)
	{
		for (int i = 0; i < b->n; i++)
			if (!pre[i].loaded && pre[i].err.code == IO_ERR_INTERNAL)
				pre[i].err = err;
	}
}

/* ---------------------------------------------------------------------
 * One evaluation (no database access, no error raised but interrupts)
 * --------------------------------------------------------------------- */

static void
eval_failed(Evaluation *ev, char *error)
{
	ev->has_result = false;
	ev->outcome = "error";
	ev->error = error;
}

/*
 * The log row's metrics: the values of the variables read, and with the
 * derived ones (facts not NULL) all four and the health score's terms
 * under "healthTerms".
 */
static char *
metrics_json(uint32 vars, const DslMetrics *dm, const DslTableFacts *facts)
{
	char	   *j;
	size_t		len;

	if (facts == NULL)
		return tms_metrics_json(vars, dm);
	j = tms_metrics_json(vars | DSL_VAR_DERIVED_BITS, dm);
	len = strlen(j);
	Assert(len >= 2 && j[len - 1] == '}');
	j[len - 1] = '\0';
	return psprintf("%s, \"healthTerms\": {\"smallFileRatio\": %.17g, "
					"\"positionDeleteRatio\": %.17g, \"equalityDeleteRatio\": %.17g, "
					"\"smallFiles\": " INT64_FORMAT ", \"targetFileSize\": " INT64_FORMAT "}}",
					j, facts->small_file_ratio, facts->position_delete_ratio,
					facts->equality_delete_ratio, facts->small_files,
					facts->target_file_size);
}

/* A rule's compiled condition and score, compiled once per run. */
typedef struct RuleProgram
{
	int64		rule_id;
	int32		rule_version;
	DslProgram *prog;
	DslProgram *score;			/* NULL: the rule has no score */
	char	   *error;			/* the condition or score no longer compiles */
} RuleProgram;

/*
 * Evaluate the rule's score over the metrics the condition's evaluation
 * read (dm), with the table's properties; a score that reads the data
 * files streams them again (*itp, closed by the caller).  A run-time
 * failure makes the score 0, with its outcome in the explanation.
 */
static void
score_candidate(const DslProgram *sprog, const IcebergFileIO *fio,
				const IcebergTableMetadata *md, DslInput *input,
				IcebergDataFileIter *volatile *itp, Evaluation *ev)
{
	int32		n = dsl_explain_count(sprog);
	DslExplainNode *nodes = palloc0(sizeof(DslExplainNode) * (n + 1));
	DslFileSource src;
	TmsError	ierr;
	DslOutcome	outcome;
	double		score = 0.0;
	size_t		len;

	input->files = NULL;
	if (dsl_program_uses_files(sprog))
	{
		bool		match = (dsl_program_fields(sprog) &
							 (DSL_FIELD_BIT(DSL_FIELD_HAS_DELETES) |
							  DSL_FIELD_BIT(DSL_FIELD_HAS_POSITION_DELETES) |
							  DSL_FIELD_BIT(DSL_FIELD_HAS_EQUALITY_DELETES))) != 0;

		if (*itp)
		{
			iceberg_data_files_close(*itp);
			*itp = NULL;
		}
		if (!iceberg_data_files_open(fio, md, match, (IcebergDataFileIter **) itp, &ierr) ||
			!iceberg_data_files_dsl_source(*itp, &src, &ierr))
		{
			ev->has_score = true;
			ev->score = 0.0;
			ev->score_explanation = psprintf("score: 0 (%s)", tms_error_text(&ierr));
			return;
		}
		input->files = &src;
	}
	outcome = dsl_explain_score(sprog, input, &score, nodes);
	CHECK_FOR_INTERRUPTS();
	len = dsl_explain_score_text(sprog, nodes, score, outcome, NULL, 0);
	ev->score_explanation = palloc(len + 1);
	dsl_explain_score_text(sprog, nodes, score, outcome, ev->score_explanation, len + 1);
	ev->has_score = true;
	ev->score = outcome == DSL_OK ? score : 0.0;
}

/*
 * The one evaluation of a condition (and of the rule's score, sprog, when
 * it has one) over a parsed table: the metric levels either needs, the
 * derived variables of operation (dsl_metrics_derive, with the rule's
 * target file size) whenever the manifests are read, the data file
 * stream (*itp, closed by the caller) when one reads the files, the
 * result and its explanations.  Every failure becomes ev->error.
 */
static void
evaluate_over(const DslProgram *prog, const DslProgram *sprog, const char *operation,
			  int64 target_file_size, const IcebergFileIO *fio,
			  const IcebergTableMetadata *md, Evaluation *ev,
			  IcebergDataFileIter *volatile *itp)
{
	TmsError	ierr;
	IcebergTableMetrics m;
	DslMetrics	dm;
	DslTableFacts facts;
	DslProperties props;
	DslFileSource src;
	DslInput	input;
	DslExplainNode *nodes;
	int32		n = dsl_explain_count(prog);
	DslOutcome	outcome;
	bool		result = false;
	size_t		len;
	uint32		fields = dsl_program_fields(prog);
	DslNeeds	needs = dsl_program_needs(prog);
	uint32		vars = dsl_program_variables(prog);
	bool		derived;
	bool		ok = true;

	if (sprog != NULL)
	{
		needs = Max(needs, dsl_program_needs(sprog));
		vars |= dsl_program_variables(sprog);
	}
	derived = needs >= DSL_NEEDS_MANIFESTS;
	memset(&input, 0, sizeof(input));
	if (ok)
	{
		memset(&m, 0, sizeof(m));
		memset(&dm, 0, sizeof(dm));
		iceberg_dsl_table_facts(md, target_file_size, &facts);
		if (!iceberg_table_metrics(fio, md, (IcebergMetricsLevel) needs,
								   policy_now_ms(),
								   derived ? iceberg_small_files_callback : NULL,
								   derived ? &facts : NULL, &m, &ierr))
		{
			eval_failed(ev, tms_error_text(&ierr));
			ok = false;
		}
	}
	if (ok)
	{
		iceberg_metrics_to_dsl(&m, &dm);
		if (derived &&
			!dsl_metrics_derive(&dm, dsl_operation_lookup(operation), &facts))
			derived = false;
		iceberg_dsl_properties(md, &props);
		input.metrics = &dm;
		input.properties = &props;
		if (dsl_program_uses_files(prog))
		{
			bool		match = (fields & (DSL_FIELD_BIT(DSL_FIELD_HAS_DELETES) |
										   DSL_FIELD_BIT(DSL_FIELD_HAS_POSITION_DELETES) |
										   DSL_FIELD_BIT(DSL_FIELD_HAS_EQUALITY_DELETES))) != 0;

			if (!iceberg_data_files_open(fio, md, match,
										 (IcebergDataFileIter **) itp, &ierr) ||
				!iceberg_data_files_dsl_source(*itp, &src, &ierr))
			{
				eval_failed(ev, tms_error_text(&ierr));
				ok = false;
			}
			else
				input.files = &src;
		}
	}
	if (ok)
	{
		nodes = palloc0(sizeof(DslExplainNode) * (n + 1));
		outcome = dsl_explain(prog, &input, &result, nodes);
		CHECK_FOR_INTERRUPTS();
		if (outcome == DSL_FILE_SOURCE_ERROR)
			eval_failed(ev, tms_error_text(iceberg_data_files_error(*itp)));
		else
		{
			len = dsl_explain_text(prog, nodes, result, outcome, NULL, 0);
			ev->explanation = palloc(len + 1);
			dsl_explain_text(prog, nodes, result, outcome, ev->explanation, len + 1);
			ev->explain_json = tms_condition_explain_json(prog, nodes, n);
			ev->metrics_json = metrics_json(vars, &dm, derived ? &facts : NULL);
			ev->outcome = dsl_outcome_name(outcome);
			if (outcome == DSL_OK || outcome == DSL_DIVISION_BY_ZERO || outcome == DSL_OVERFLOW)
			{
				ev->has_result = true;
				ev->result = (outcome == DSL_OK) && result;
			}
			else
				ev->error = psprintf("evaluation ended with %s", dsl_outcome_name(outcome));
		}
	}
	if (ok && ev->has_result && sprog != NULL)
		score_candidate(sprog, fio, md, &input, itp, ev);
}

/*
 * The evaluation of a rule's condition over a parsed table (policy.h),
 * as a policy's evaluation makes it (evaluate_over), without a score.
 */
void
policy_condition_evaluate(const DslProgram *prog, const char *operation,
						  int64 target_file_size, const IcebergFileIO *fio,
						  const IcebergTableMetadata *md, PolicyEvaluation *ev)
{
	IcebergDataFileIter *volatile it = NULL;

	memset(ev, 0, sizeof(*ev));
	PG_TRY();
	{
		evaluate_over(prog, NULL, operation, target_file_size, fio, md, ev, &it);
	}
	PG_CATCH();
	{
		if (it)
			iceberg_data_files_close(it);
		PG_RE_THROW();
	}
	PG_END_TRY();
	if (it)
		iceberg_data_files_close(it);
	CHECK_FOR_INTERRUPTS();
}

/*
 * Evaluate the rule's condition (and score) over the candidate's table
 * (*pre, taken over and freed here), loading the metric levels either
 * needs; the derived variables (dsl_metrics_derive) whenever the
 * manifests are read, so the log row has the table's health (for
 * tms.table_health) whatever the rule reads.  Every failure becomes
 * ev->error.
 */
static void
evaluate_candidate(PolicyRun *r, const Candidate *cand, const RuleProgram *rp,
				   Preload *pre, Evaluation *ev)
{
	const DslProgram *prog = rp->prog;
	const DslProgram *sprog = rp->score;
	IoLoadedTable t = pre->t;
	IcebergTableMetadata *volatile md = NULL;
	IoStorage  *volatile storage = NULL;
	IcebergDataFileIter *volatile it = NULL;
	TmsTableFileIO *tio = palloc0(sizeof(TmsTableFileIO));
	DslNeeds	needs = dsl_program_needs(prog);
	bool		files = dsl_program_uses_files(prog);

	if (sprog != NULL)
	{
		needs = Max(needs, dsl_program_needs(sprog));
		files = files || dsl_program_uses_files(sprog);
	}
	memset(ev, 0, sizeof(*ev));
	memset(&pre->t, 0, sizeof(pre->t));
	/* not a scope: t was loaded before this call (preload_tables, or r->kept) */
	PG_TRY();
	{
		TmsError	ierr;
		TmsError	ioerr;
		IcebergFileIO fio;
		bool		ok = true;

		memset(&fio, 0, sizeof(fio));
		if (!pre->loaded)
		{
			eval_failed(ev, tms_error_text(&pre->err));
			ok = false;
		}
		else if (t.metadata_json == NULL)
		{
			eval_failed(ev, psprintf("the catalog returned no metadata for table \"%s.%s\"",
									 cand->ns, cand->table));
			ok = false;
		}
		else if (!iceberg_metadata_parse(t.metadata_json, strlen(t.metadata_json),
										 NULL, (IcebergTableMetadata **) &md, &ierr))
		{
			eval_failed(ev, tms_error_text(&ierr));
			ok = false;
		}
		if (ok && (needs > DSL_NEEDS_METADATA || files))
		{
			storage = tms_catalog_storage(r->conn, &t, &ioerr);
			if (storage == NULL)
			{
				eval_failed(ev, tms_error_text(&ioerr));
				ok = false;
			}
			else
				tms_table_fileio(tio, r->conn->server, storage, &fio);
		}
		if (ok)
			evaluate_over(prog, sprog, cand->operation, cand->target_file_size, &fio, md,
						  ev, &it);
	}
	PG_FINALLY();
	{
		if (it)
			iceberg_data_files_close(it);
		io_storage_free(storage);
		iceberg_metadata_free(md);
		io_loaded_table_free(&t);
	}
	PG_END_TRY();
	CHECK_FOR_INTERRUPTS();
}

/* ---------------------------------------------------------------------
 * Recording
 * --------------------------------------------------------------------- */

typedef struct Record
{
	PolicyRun  *run;
	const Candidate *cand;
	const Evaluation *ev;
	MemoryContext cxt;			/* where decision goes */
	int64		job_id;
	bool		has_job;
	char	   *decision;
} Record;

static void
record_step(void *arg)
{
	Record	   *rec = arg;
	const Candidate *cand = rec->cand;
	const Evaluation *ev = rec->ev;
	Oid			types[13] = {INT4OID, INT8OID, INT8OID, TEXTOID, TEXTOID,
	BOOLOID, TEXTOID, TEXTOID, TEXTOID, TEXTOID, INT4OID, FLOAT8OID, TEXTOID};
	Datum		values[13];
	char		nulls[13];
	char	   *counters = psprintf("{\"commits-added\": " INT64_FORMAT
									", \"bytes-added\": " INT64_FORMAT
									", \"time-elapsed\": " INT64_FORMAT "}",
									cand->commits_added, cand->bytes_added,
									cand->time_elapsed_ms);

	memset(nulls, ' ', sizeof(nulls));
	values[0] = Int32GetDatum(rec->run->policy->id);
	values[1] = Int64GetDatum(cand->rule_id);
	values[2] = Int64GetDatum(cand->table_id);
	values[3] = CStringGetTextDatum(counters);
	if (ev->metrics_json)
		values[4] = CStringGetTextDatum(ev->metrics_json);
	else
		nulls[4] = 'n';
	values[5] = BoolGetDatum(ev->result);
	if (!ev->has_result)
		nulls[5] = 'n';
	values[6] = CStringGetTextDatum(ev->outcome ? ev->outcome : "error");
	if (ev->explanation)
		values[7] = CStringGetTextDatum(ev->explanation);
	else
		nulls[7] = 'n';
	if (ev->explain_json)
		values[8] = CStringGetTextDatum(ev->explain_json);
	else
		nulls[8] = 'n';
	if (ev->error)
		values[9] = CStringGetTextDatum(ev->error);
	else
		nulls[9] = 'n';
	values[10] = Int32GetDatum(cand->rule_version);
	values[11] = Float8GetDatum(ev->score);
	if (!ev->has_score)
		nulls[11] = 'n';
	if (ev->score_explanation)
		values[12] = CStringGetTextDatum(ev->score_explanation);
	else
		nulls[12] = 'n';
	policy_exec("SELECT job_id, decision FROM tms._record_evaluation($1, $2, $3, $4::jsonb,"
				" $5::jsonb, $6, $7, $8, $9::jsonb, $10, $11, $12, $13)",
				13, types, values, nulls, SPI_OK_SELECT);
	rec->has_job = false;
	rec->decision = "failed";
	if (SPI_processed != 1)
		return;
	rec->job_id = policy_col_int64(0, 1, -1);
	rec->has_job = (rec->job_id >= 0);
	rec->decision = policy_col_str(0, 2, rec->cxt);
}

/* tms.evaluate_now's row for one evaluation. */
static void
put_row(PolicyRun *r, const Candidate *cd, const Evaluation *ev, const Record *rec)
{
	Datum		row[8];
	bool		isnull[8] = {false};

	row[0] = Int64GetDatum(cd->rule_id);
	row[1] = CStringGetTextDatum(cd->operation);
	row[2] = CStringGetTextDatum(cd->ns);
	row[3] = CStringGetTextDatum(cd->table);
	row[4] = BoolGetDatum(ev->result);
	isnull[4] = !ev->has_result;
	row[5] = CStringGetTextDatum(rec->decision);
	row[6] = Int64GetDatum(rec->job_id);
	isnull[6] = !rec->has_job;
	if (ev->explanation)
		row[7] = CStringGetTextDatum(ev->explanation);
	else if (ev->error)
		row[7] = CStringGetTextDatum(ev->error);
	else
		isnull[7] = true;
	tuplestore_putvalues(r->tupstore, r->desc, row, isnull);
}

/* ---------------------------------------------------------------------
 * The batches
 * --------------------------------------------------------------------- */

/*
 * The compiled program of a rule's version, compiled once per run (a rule
 * altered while the run walks its batches comes back with a new version).
 */
static RuleProgram *
rule_program(PolicyRun *r, List **progs, const Candidate *cand)
{
	ListCell   *lc;
	RuleProgram *rp;
	MemoryContext old;
	DslError	err;

	foreach(lc, *progs)
	{
		rp = lfirst(lc);
		if (rp->rule_id == cand->rule_id && rp->rule_version == cand->rule_version)
			return rp;
	}
	old = MemoryContextSwitchTo(r->cxt);
	rp = palloc0(sizeof(RuleProgram));
	rp->rule_id = cand->rule_id;
	rp->rule_version = cand->rule_version;
	rp->prog = tms_condition_compile(cand->condition, strlen(cand->condition), &err);
	if (rp->prog == NULL)
		rp->error = psprintf("invalid policy condition: %s", err.message);
	else if (cand->score != NULL)
	{
		rp->score = tms_score_compile(cand->score, strlen(cand->score), &err);
		if (rp->score == NULL)
			rp->error = psprintf("invalid rule score: %s", err.message);
	}
	*progs = lappend(*progs, rp);
	MemoryContextSwitchTo(old);
	return rp;
}

/*
 * Load and evaluate the batch's candidates and record each evaluation.
 * Allocates in the batch's context (current on entry); each evaluation,
 * its record and its row are made in b->item_cxt, reset after each
 * candidate, so a backlog of any size runs in the memory of one.
 */
static bool
evaluate_batch(Batch *b, List **progs, Preload *pre)
{
	PolicyRun  *r = b->run;
	MemoryContext batch_cxt = CurrentMemoryContext;
	bool		ok = true;

	pgstat_report_activity(STATE_RUNNING, "tms: loading the tables of candidates");
	preload_tables(b, pre);
	for (int i = 0; i < b->n && ok; i++)
	{
		Candidate  *cd = &b->cands[i];
		RuleProgram *rp = rule_program(r, progs, cd);
		Evaluation	ev;
		Record		rec;

		if (sched_lease_lost())
			return false;
		MemoryContextSwitchTo(b->item_cxt);
		pgstat_report_activity(STATE_RUNNING, "tms: evaluating a policy condition");
		if (rp->error == NULL)
			evaluate_candidate(r, cd, rp, &pre[i], &ev);
		else
		{
			memset(&ev, 0, sizeof(ev));
			io_loaded_table_free(&pre[i].t);
			eval_failed(&ev, rp->error);
		}
		memset(&rec, 0, sizeof(rec));
		rec.run = r;
		rec.cand = cd;
		rec.ev = &ev;
		rec.cxt = b->item_cxt;
		if (policy_step(r, record_step, &rec))
		{
			r->evaluated++;
			if (!ev.has_result && r->failed++ == 0 && ev.error)
				r->first_failure = MemoryContextStrdup(r->cxt, ev.error);
			if (r->tupstore)
				put_row(r, cd, &ev, &rec);
		}
		else
			ok = false;
		MemoryContextSwitchTo(batch_cxt);
		MemoryContextReset(b->item_cxt);
	}
	return ok;
}

bool
policy_evaluate_candidates(PolicyRun *r)
{
	Batch	   *b = palloc0(sizeof(Batch));
	Preload    *volatile pre = palloc0(sizeof(Preload) * CANDIDATE_BATCH);
	List	   *progs = NIL;
	volatile bool ok = true;

	b->run = r;
	b->cxt = AllocSetContextCreate(r->cxt, "tms candidates", ALLOCSET_DEFAULT_SIZES);
	b->item_cxt = AllocSetContextCreate(r->cxt, "tms evaluation", ALLOCSET_DEFAULT_SIZES);
	/* not a scope: pre[] takes r->kept, loaded by the refresh before this */
	PG_TRY();
	{
		for (;;)
		{
			instr_time	t0,
						t1,
						t2;

			MemoryContextReset(b->cxt);
			INSTR_TIME_SET_CURRENT(t0);
			if (!policy_step(r, candidates_step, b))
			{
				ok = false;
				break;
			}
			INSTR_TIME_SET_CURRENT(t1);
			if (b->n > 0)
			{
				MemoryContext old = MemoryContextSwitchTo(b->cxt);

				ok = evaluate_batch(b, &progs, pre);
				MemoryContextSwitchTo(old);
			}
			INSTR_TIME_SET_CURRENT(t2);
			INSTR_TIME_SUBTRACT(t2, t1);
			INSTR_TIME_SUBTRACT(t1, t0);
			r->candidates_ms += INSTR_TIME_GET_MILLISEC(t1);
			r->evaluate_ms += INSTR_TIME_GET_MILLISEC(t2);
			if (!ok || b->n == 0)
				break;
		}
	}
	PG_FINALLY();
	{
		/* tables loaded ahead and not evaluated (an error, a cancel) */
		for (int i = 0; i < CANDIDATE_BATCH; i++)
			io_loaded_table_free(&pre[i].t);
	}
	PG_END_TRY();
	return ok;
}
