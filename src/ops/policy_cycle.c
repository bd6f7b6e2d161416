/*-------------------------------------------------------------------------
 *
 * policy_cycle.c
 *	  The evaluation cycle of maintenance policies.
 *
 * For each active policy (doc/policies.md); steps 3-5 only while its
 * window is open:
 *
 *	1. connect to the group's catalog as the policy owner (its user
 *	   mapping; USAGE on the server is checked by the connection);
 *	2. refresh tms.tables for the group: list the matching namespaces and
 *	   tables and load each table with its ETag, so an unchanged table
 *	   costs one 304; a changed one has its new snapshots counted
 *	   (commits, summary added-files-size) by tms.observe_table(), which
 *	   also marks the (table, rule) pairs whose thresholds it reaches;
 *	3. find candidates: one indexed query over tms.rule_baselines, no
 *	   Iceberg I/O;
 *	4. evaluate each candidate's compiled condition over the metric levels
 *	   it needs (one catalog load, then manifests only when needed);
 *	5. record each evaluation with tms._record_evaluation(): the log row,
 *	   and for a true result the job and its task, guarded so that a
 *	   (table, rule) never has two operations in flight.
 *
 * In the supervisor (tms_policy_cycle) every database step is its own
 * short transaction and all network work happens between transactions;
 * a kill at any point loses at most the evaluation in progress, which the
 * next cycle redoes (its baseline is still triggered), and duplicates
 * nothing (the job insert and the baseline's pending_job are one
 * transaction).  The supervisor's lease heartbeats are renewed between
 * steps, so a long cycle does not starve them.  tms.evaluate_now runs the
 * same steps inside its caller's transaction.
 *
 * Catalog requests run tms.evaluation_pool_size at a time: the refresh's
 * conditional loads and the candidates' table loads go through
 * io_catalog_load_tables_etag (one libcurl multi handle, results handed
 * over as they arrive; the callbacks never raise through the io layer).
 * The rest of an evaluation (manifest lists, manifests, data file lists)
 * and the database steps run one candidate after the other.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "portability/instr_time.h"
#include "utils/builtins.h"
#include "common/hashfn.h"
#include "utils/hsearch.h"
#include "utils/json.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"

#include "dsl/dsl.h"
#include "iceberg/iceberg.h"
#include "io/io.h"
#include "ops/policy_int.h"
#include "sched/sched.h"
#include "sql_api/catalog_conn.h"
#include "tms.h"
#include "worker/worker.h"

/* ---------------------------------------------------------------------
 * Types
 * --------------------------------------------------------------------- */

typedef struct CycleCtx
{
	bool		own_xact;		/* supervisor: one transaction per step */
	MemoryContext cxt;			/* lives for the whole cycle */
	TimestampTz next_beat;		/* supervisor: next heartbeat renewal */
	List	   *refreshed;		/* group ids refreshed in this cycle */
	Tuplestorestate *tupstore;	/* evaluate_now: result rows */
	TupleDesc	desc;
} CycleCtx;

typedef struct PolicyRow
{
	int32		id;
	char	   *name;
	Oid			owner;
	char	   *server;
	int32		group_id;
	bool		window_open;
	bool		active;
} PolicyRow;

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
} Candidate;

typedef struct Evaluation
{
	bool		has_result;		/* false: the evaluation failed */
	bool		result;
	const char *outcome;
	char	   *explanation;
	char	   *explain_json;
	char	   *metrics_json;
	char	   *error;
} Evaluation;

/* a table tms knows, during a refresh */
typedef struct KnownTable
{
	char	   *key;			/* namespace \x1f table (hash key) */
	int64		id;
	char	   *metadata_location;
	char	   *etag;
	int64		last_commit_ms; /* -1: none */
	bool		seen;
} KnownTable;

/* ---------------------------------------------------------------------
 * Database steps
 * --------------------------------------------------------------------- */

/*
 * Begin a database step: a transaction of its own in the supervisor, and
 * SPI.  In the supervisor, lease heartbeats due are renewed here.
 */
static void
db_begin(CycleCtx *c)
{
	if (c->own_xact)
	{
		SetCurrentStatementStartTimestamp();
		StartTransactionCommand();
		PushActiveSnapshot(GetTransactionSnapshot());
	}
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	if (c->own_xact && GetCurrentTimestamp() >= c->next_beat)
	{
		(void) sched_renew_heartbeats();
		sched_maintain();
		c->next_beat = TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
												   tms_heartbeat_interval_ms);
	}
}

static void
db_end(CycleCtx *c)
{
	SPI_finish();
	if (c->own_xact)
	{
		PopActiveSnapshot();
		CommitTransactionCommand();
	}
	else
		CommandCounterIncrement();
	MemoryContextSwitchTo(c->cxt);
}

/*
 * The supervisor's cycle in progress, for cycle_tick() deep inside the
 * refresh walk; NULL otherwise.
 */
static CycleCtx *tick_ctx = NULL;

/*
 * Between two network calls: in the supervisor, renew the lease heartbeats
 * when due (an empty database step does it), so that refreshing a large
 * group never lets the leases of running tasks expire.
 */
static void
cycle_tick(void)
{
	if (tick_ctx != NULL && tick_ctx->own_xact &&
		GetCurrentTimestamp() >= tick_ctx->next_beat)
	{
		db_begin(tick_ctx);
		db_end(tick_ctx);
	}
}

/* Run a statement; elog on failure. */
static void
db_exec(const char *sql, int nargs, Oid *types, Datum *values, const char *nulls,
		int expect)
{
	int			rc = SPI_execute_with_args(sql, nargs, types, values, nulls,
										   false, 0);

	if (rc != expect)
		elog(ERROR, "policy cycle statement failed (%s): %s",
			 SPI_result_code_string(rc), sql);
}

/* Column n (1-based) of row i of the last result as a string in mcxt. */
static char *
col_str(int i, int n, MemoryContext mcxt)
{
	char	   *v = SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, n);

	return v ? MemoryContextStrdup(mcxt, v) : NULL;
}

static int64
col_int64(int i, int n, int64 dflt)
{
	bool		isnull;
	Datum		d = SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, n, &isnull);

	if (isnull)
		return dflt;
	switch (SPI_gettypeid(SPI_tuptable->tupdesc, n))
	{
		case INT4OID:
		case OIDOID:
			return DatumGetInt32(d);
		case INT8OID:
			return DatumGetInt64(d);
		case BOOLOID:
			return DatumGetBool(d) ? 1 : 0;
		default:
			elog(ERROR, "unexpected column type");
	}
	return dflt;
}

/* ---------------------------------------------------------------------
 * Helpers
 * --------------------------------------------------------------------- */

static void *
dsl_palloc(void *arg, size_t size)
{
	return palloc_extended(size, MCXT_ALLOC_NO_OOM);
}

static void
dsl_pfree(void *arg, void *ptr)
{
	pfree(ptr);
}

static const dsl_allocator pg_allocator = {dsl_palloc, dsl_pfree, NULL};

/*
 * Compile a condition into a palloc'd program or raise its compile error
 * (syntax 42601, datatype 42804, ... with the caret excerpt in DETAIL).
 */
dsl_program *
tms_policy_compile(const char *src, size_t len)
{
	dsl_error	err;
	dsl_program *p = dsl_compile(src, len, &pg_allocator, &err);
	int			code;

	if (p != NULL)
		return p;
	switch (err.kind)
	{
		case DSL_ERROR_TYPE:
			code = ERRCODE_DATATYPE_MISMATCH;
			break;
		case DSL_ERROR_TOO_COMPLEX:
			code = ERRCODE_STATEMENT_TOO_COMPLEX;
			break;
		case DSL_ERROR_TOO_LONG:
			code = ERRCODE_PROGRAM_LIMIT_EXCEEDED;
			break;
		case DSL_ERROR_OUT_OF_MEMORY:
			code = ERRCODE_OUT_OF_MEMORY;
			break;
		default:
			code = ERRCODE_SYNTAX_ERROR;
			break;
	}
	ereport(ERROR,
			(errcode(code),
			 errmsg("invalid policy condition: %s", err.message),
			 err.kind == DSL_ERROR_TOO_LONG ? 0 :
			 errdetail("At line %d, column %d:\n%s", err.line, err.column, err.excerpt),
			 err.hint[0] ? errhint("%s", err.hint) : 0));
	return NULL;
}

/* Glob match: '*' any run of characters, '?' one character. */
static bool
glob_match(const char *p, const char *s)
{
	const char *star = NULL,
			   *back = NULL;

	while (*s)
	{
		if (*p == '?' || *p == *s)
		{
			p++;
			s++;
		}
		else if (*p == '*')
		{
			star = p++;
			back = s;
		}
		else if (star)
		{
			p = star + 1;
			s = ++back;
		}
		else
			return false;
	}
	while (*p == '*')
		p++;
	return *p == '\0';
}

static int64
now_ms(void)
{
	return (int64) (GetCurrentTimestamp() / 1000) +
		(int64) (POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE) * SECS_PER_DAY * 1000;
}

static TimestampTz
ms_to_timestamptz(int64 ms)
{
	return (TimestampTz) (ms * 1000) -
		(TimestampTz) (POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE) * USECS_PER_DAY;
}

/* Connect to the policy's catalog as its owner (in a database step). */
static TmsCatalogConn *
connect_as_owner(const PolicyRow *p)
{
	Oid			save_user;
	int			save_sec;
	TmsCatalogConn *volatile conn = NULL;

	GetUserIdAndSecContext(&save_user, &save_sec);
	SetUserIdAndSecContext(p->owner, save_sec | SECURITY_LOCAL_USERID_CHANGE);
	PG_TRY();
	{
		conn = tms_catalog_connect(p->server);
	}
	PG_FINALLY();
	{
		SetUserIdAndSecContext(save_user, save_sec);
	}
	PG_END_TRY();
	return conn;
}

/* Raise an io error (rc != 0) as an ERROR; then service interrupts. */
static void
io_check(int rc, const IoError *err)
{
	if (rc != 0)
		tms_io_ereport(err);
	CHECK_FOR_INTERRUPTS();
}

/* ---------------------------------------------------------------------
 * Refresh: discover tables, count the commits observed
 * --------------------------------------------------------------------- */

typedef struct Observation
{
	char	   *ns;				/* dotted */
	char	   *table;
	char	   *uuid;
	char	   *location;
	int64		snapshot_id;	/* -1: none */
	int64		new_commits;
	int64		new_bytes;
	int64		first_ms;		/* -1: unknown */
	int64		last_ms;
	char	   *etag;
} Observation;

typedef struct GroupSpec
{
	char	   *ns_pattern;		/* NULL: members only */
	char	   *table_pattern;
	List	   *member_ns;		/* dotted namespace strings */
	List	   *member_table;
} GroupSpec;

/* Does a dotted namespace belong to the group's namespaces? */
static bool
ns_selected(const GroupSpec *g, const char *ns)
{
	ListCell   *lc;

	if (g->ns_pattern && glob_match(g->ns_pattern, ns))
		return true;
	foreach(lc, g->member_ns)
		if (strcmp((char *) lfirst(lc), ns) == 0)
			return true;
	return false;
}

/* Could a namespace below ns belong to the group? */
static bool
ns_descend(const GroupSpec *g, const char *ns)
{
	size_t		n = strlen(ns);
	ListCell   *lc;

	if (g->ns_pattern &&
		(strpbrk(g->ns_pattern, "*?") != NULL ||
		 (strncmp(g->ns_pattern, ns, n) == 0 && g->ns_pattern[n] == '.')))
		return true;
	foreach(lc, g->member_ns)
	{
		const char *m = lfirst(lc);

		if (strncmp(m, ns, n) == 0 && m[n] == '.')
			return true;
	}
	return false;
}

static bool
table_selected(const GroupSpec *g, const char *ns, const char *table)
{
	ListCell   *lc1,
			   *lc2;

	if (g->ns_pattern && glob_match(g->ns_pattern, ns) &&
		glob_match(g->table_pattern, table))
		return true;
	forboth(lc1, g->member_ns, lc2, g->member_table)
		if (strcmp((char *) lfirst(lc1), ns) == 0 &&
			strcmp((char *) lfirst(lc2), table) == 0)
			return true;
	return false;
}

/*
 * Count what the snapshots of md add beyond last_ms: commits, and the
 * bytes of data they add (summary "added-files-size"; "replace" commits,
 * i.e. compactions, add no new data and are not counted as bytes).
 */
static void
count_commits(const IcebergTableMetadata *md, int64 last_ms, Observation *o)
{
	o->new_commits = 0;
	o->new_bytes = 0;
	o->first_ms = -1;
	o->last_ms = last_ms;
	for (int i = 0; i < md->nsnapshots; i++)
	{
		const IcebergSnapshot *s = &md->snapshots[i];

		if (o->first_ms < 0 || s->timestamp_ms < o->first_ms)
			o->first_ms = s->timestamp_ms;
		if (s->timestamp_ms <= last_ms)
			continue;
		o->new_commits++;
		if (s->timestamp_ms > o->last_ms)
			o->last_ms = s->timestamp_ms;
		if (s->operation && strcmp(s->operation, "replace") == 0)
			continue;
		for (int k = 0; k < s->nsummary; k++)
		{
			if (strcmp(s->summary[k].key, "added-files-size") == 0 && s->summary[k].value)
			{
				int64		v = strtoll(s->summary[k].value, NULL, 10);

				if (v > 0)
					o->new_bytes += v;
			}
		}
	}
}

/* A table of the group to load during a refresh. */
typedef struct PendingLoad
{
	char	   *ns_io;
	char	   *ns;				/* dotted */
	char	   *table;
	KnownTable *known;			/* NULL: new to tms */
} PendingLoad;

/* State of one batch of refresh loads, for refresh_result(). */
typedef struct RefreshBatch
{
	PendingLoad **loads;		/* the batch's loads, in request order */
	List	  **obs;			/* Observations appended here */
	MemoryContext cxt;			/* where they are allocated */
	ErrorData  *error;			/* a caught error, raised after the batch */
	IoError		io_error;		/* a load's failure, raised after the batch */
	bool		io_failed;
} RefreshBatch;

/*
 * Turn a loaded table into an Observation when it changed (a 304 for the
 * version tms.tables holds is nothing to record).  May raise.
 */
static void
observe_loaded(const PendingLoad *pl, const IoLoadedTable *t, List **obs)
{
	KnownTable *k = pl->known;
	IcebergTableMetadata *md = NULL;
	IcebergError ierr;
	Observation *o;
	bool		same;

	/* 304: unchanged since the version tms.tables holds */
	if ((t->not_modified && k) || t->metadata_json == NULL)
		return;
	same = k && k->metadata_location && t->metadata_location &&
		strcmp(k->metadata_location, t->metadata_location) == 0;
	if (!iceberg_metadata_parse(t->metadata_json, strlen(t->metadata_json),
								NULL, &md, &ierr))
		tms_iceberg_ereport(&ierr, NULL);
	PG_TRY();
	{
		o = palloc0(sizeof(Observation));
		o->ns = pstrdup(pl->ns);
		o->table = pstrdup(pl->table);
		o->uuid = md->table_uuid ? pstrdup(md->table_uuid) : NULL;
		o->location = t->metadata_location ? pstrdup(t->metadata_location) : NULL;
		o->etag = t->etag ? pstrdup(t->etag) : NULL;
		o->snapshot_id = md->current_snapshot_id;
		count_commits(md, k ? k->last_commit_ms : -1, o);
		if (same)
			o->new_commits = o->new_bytes = 0;	/* only the ETag moved */
		*obs = lappend(*obs, o);
	}
	PG_FINALLY();
	{
		iceberg_metadata_free(md);
	}
	PG_END_TRY();
}

/*
 * IoLoadResultFn of the refresh: record the result of one load.  Called by
 * the io layer between two polls; it must not longjmp through it, so any
 * error is caught here, kept, and the batch stopped (non-zero) to be
 * raised by the caller.  A vanished table is skipped; any other failed
 * load stops the refresh, as one failed request always did.
 */
static int
refresh_result(void *arg, size_t index, IoLoadedTable *t, const IoError *err)
{
	RefreshBatch *rb = arg;
	MemoryContext old = MemoryContextSwitchTo(rb->cxt);
	volatile int stop = 0;

	if (t == NULL)
	{
		if (err->code != IO_ERR_NO_SUCH_TABLE)
		{
			rb->io_error = *err;
			rb->io_failed = true;
			stop = 1;
		}
		MemoryContextSwitchTo(old);
		return stop;
	}
	PG_TRY();
	{
		observe_loaded(rb->loads[index], t, rb->obs);
	}
	PG_CATCH();
	{
		MemoryContextSwitchTo(rb->cxt);
		rb->error = CopyErrorData();
		FlushErrorState();
		stop = 1;
	}
	PG_END_TRY();
	MemoryContextSwitchTo(old);
	return stop;
}

/* Loads per batch: the heartbeats are renewed between two batches. */
#define REFRESH_BATCH	1024

/*
 * Load every pending table, tms.evaluation_pool_size requests at a time
 * (each with its ETag: 304 when unchanged), appending an Observation for
 * each changed one.  Errors other than a vanished table raise.
 */
static void
refresh_load(TmsCatalogConn *conn, List *pending, List **obs)
{
	int			n = list_length(pending);
	PendingLoad **loads = palloc(sizeof(PendingLoad *) * Max(n, 1));
	IoLoadRequest *reqs = palloc(sizeof(IoLoadRequest) * Max(n, 1));
	ListCell   *lc;
	int			i = 0;

	foreach(lc, pending)
	{
		PendingLoad *pl = lfirst(lc);

		loads[i] = pl;
		reqs[i].ns = pl->ns_io;
		reqs[i].table = pl->table;
		reqs[i].known_etag = pl->known ? pl->known->etag : NULL;
		i++;
	}
	for (int first = 0; first < n; first += REFRESH_BATCH)
	{
		RefreshBatch rb;
		IoError		err;
		int			rc;

		cycle_tick();
		CHECK_FOR_INTERRUPTS();
		memset(&rb, 0, sizeof(rb));
		rb.loads = loads + first;
		rb.obs = obs;
		rb.cxt = CurrentMemoryContext;
		rc = io_catalog_load_tables_etag(conn->catalog, reqs + first,
										 Min(REFRESH_BATCH, n - first),
										 tms_evaluation_pool_size,
										 refresh_result, &rb, &err);
		if (rb.error != NULL)
			ReThrowError(rb.error);
		if (rb.io_failed)
			tms_io_ereport(&rb.io_error);
		io_check(rc, &err);
	}
	pfree(loads);
	pfree(reqs);
}

/* dynahash over char * keys */
static uint32
key_hash(const void *key, Size keysize)
{
	const char *s = *(char *const *) key;

	return string_hash(s, strlen(s) + 1);
}

static int
key_match(const void *a, const void *b, Size keysize)
{
	return strcmp(*(char *const *) a, *(char *const *) b);
}

/*
 * List one selected namespace's tables; the selected ones are marked seen
 * and appended to *pending as PendingLoads (loaded later, all together).
 */
static void
refresh_namespace(TmsCatalogConn *conn, const GroupSpec *g, HTAB *known,
				  const char *ns_io, const char *ns, List **pending)
{
	IoTableList tl;
	IoError		err;

	memset(&tl, 0, sizeof(tl));
	io_check(io_catalog_list_tables(conn->catalog, ns_io, &tl, &err), &err);
	PG_TRY();
	{
		for (size_t j = 0; j < tl.n; j++)
		{
			PendingLoad *pl;
			char	   *key;

			if (!table_selected(g, ns, tl.items[j].name))
				continue;
			pl = palloc(sizeof(PendingLoad));
			pl->ns_io = pstrdup(ns_io);
			pl->ns = pstrdup(ns);
			pl->table = pstrdup(tl.items[j].name);
			key = psprintf("%s\x1f%s", ns, pl->table);
			pl->known = hash_search(known, &key, HASH_FIND, NULL);
			pfree(key);
			if (pl->known)
				pl->known->seen = true;
			*pending = lappend(*pending, pl);
		}
	}
	PG_FINALLY();
	{
		io_table_list_free(&tl);
	}
	PG_END_TRY();
}

static void refresh_walk(TmsCatalogConn *conn, const GroupSpec *g, HTAB *known,
						 const char *parent_io, List **pending, List **listed);

/* One namespace of a walk: refresh it if selected, descend if needed. */
static void
refresh_walk_one(TmsCatalogConn *conn, const GroupSpec *g, HTAB *known,
				 const char *ns_io, List **pending, List **listed)
{
	char	   *ns = tms_namespace_from_io(ns_io);

	if (ns_selected(g, ns))
	{
		refresh_namespace(conn, g, known, ns_io, ns, pending);
		*listed = lappend(*listed, ns);
	}
	if (ns_descend(g, ns))
		refresh_walk(conn, g, known, ns_io, pending, listed);
}

/* Walk namespaces under parent_io (NULL: top), refreshing selected tables. */
static void
refresh_walk(TmsCatalogConn *conn, const GroupSpec *g, HTAB *known,
			 const char *parent_io, List **pending, List **listed)
{
	IoStringList nss;
	IoError		err;

	memset(&nss, 0, sizeof(nss));
	io_check(io_catalog_list_namespaces(conn->catalog, parent_io, &nss, &err), &err);
	PG_TRY();
	{
		for (size_t i = 0; i < nss.n; i++)
			refresh_walk_one(conn, g, known, nss.items[i], pending, listed);
	}
	PG_FINALLY();
	{
		io_string_list_free(&nss);
	}
	PG_END_TRY();
}

/*
 * Refresh tms.tables for a policy's group: read what tms knows (database
 * step), talk to the catalog (no transaction), record the changes
 * (database step).
 */
static void
refresh_group(CycleCtx *c, const PolicyRow *p, TmsCatalogConn *conn)
{
	GroupSpec	g;
	HASHCTL		hctl;
	HTAB	   *known;
	List	   *pending = NIL;
	List	   *obs = NIL;
	List	   *listed = NIL;
	List	   *dropped = NIL;
	ListCell   *lc;
	HASH_SEQ_STATUS seq;
	KnownTable *k;
	Oid			types[11];
	Datum		values[11];
	char		nulls[11];

	memset(&g, 0, sizeof(g));
	memset(&hctl, 0, sizeof(hctl));
	hctl.keysize = sizeof(char *);
	hctl.entrysize = sizeof(KnownTable);
	hctl.hash = key_hash;
	hctl.match = key_match;
	hctl.hcxt = c->cxt;
	known = hash_create("tms known tables", 1024, &hctl,
						HASH_ELEM | HASH_FUNCTION | HASH_COMPARE | HASH_CONTEXT);

	db_begin(c);
	types[0] = INT4OID;
	values[0] = Int32GetDatum(p->group_id);
	db_exec("SELECT namespace_pattern, table_pattern FROM tms.object_groups WHERE id = $1",
			1, types, values, NULL, SPI_OK_SELECT);
	if (SPI_processed == 1)
	{
		g.ns_pattern = col_str(0, 1, c->cxt);
		g.table_pattern = col_str(0, 2, c->cxt);
	}
	db_exec("SELECT namespace, table_name FROM tms.object_group_members WHERE group_id = $1",
			1, types, values, NULL, SPI_OK_SELECT);
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		MemoryContext old = MemoryContextSwitchTo(c->cxt);

		g.member_ns = lappend(g.member_ns, col_str(i, 1, c->cxt));
		g.member_table = lappend(g.member_table, col_str(i, 2, c->cxt));
		MemoryContextSwitchTo(old);
	}
	types[0] = NAMEOID;
	values[0] = CStringGetDatum(p->server);
	db_exec("SELECT namespace || chr(31) || table_name, id, metadata_location,"
			"       (extract(epoch FROM last_commit_at) * 1000)::bigint, etag"
			"  FROM tms.tables WHERE server = $1 AND dropped_at IS NULL",
			1, types, values, NULL, SPI_OK_SELECT);
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		char	   *key = col_str(i, 1, c->cxt);

		k = hash_search(known, &key, HASH_ENTER, NULL);
		k->key = key;
		k->id = col_int64(i, 2, 0);
		k->metadata_location = col_str(i, 3, c->cxt);
		k->last_commit_ms = col_int64(i, 4, -1);
		k->etag = col_str(i, 5, c->cxt);
		k->seen = false;
	}
	db_end(c);

	pgstat_report_activity(STATE_RUNNING, "tms: refreshing tables of a policy group");
	refresh_walk(conn, &g, known, NULL, &pending, &listed);
	refresh_load(conn, pending, &obs);

	/* tables tms knew in a listed namespace that are gone from it */
	hash_seq_init(&seq, known);
	while ((k = hash_seq_search(&seq)) != NULL)
	{
		char	   *sep = strchr(k->key, '\x1f');

		if (k->seen || sep == NULL)
			continue;
		foreach(lc, listed)
		{
			const char *ns = lfirst(lc);

			if (strlen(ns) == (size_t) (sep - k->key) &&
				strncmp(ns, k->key, sep - k->key) == 0 &&
				table_selected(&g, ns, sep + 1))
			{
				int64	   *id = palloc(sizeof(int64));

				*id = k->id;
				dropped = lappend(dropped, id);
				break;
			}
		}
	}

	if (obs == NIL && dropped == NIL)
		return;
	db_begin(c);
	types[0] = NAMEOID;
	types[1] = TEXTOID;
	types[2] = TEXTOID;
	types[3] = TEXTOID;
	types[4] = TEXTOID;
	types[5] = INT8OID;
	types[6] = INT8OID;
	types[7] = INT8OID;
	types[8] = TIMESTAMPTZOID;
	types[9] = TIMESTAMPTZOID;
	types[10] = TEXTOID;
	foreach(lc, obs)
	{
		Observation *o = lfirst(lc);

		memset(nulls, ' ', sizeof(nulls));
		values[0] = CStringGetDatum(p->server);
		values[1] = CStringGetTextDatum(o->ns);
		values[2] = CStringGetTextDatum(o->table);
		if (o->uuid)
			values[3] = CStringGetTextDatum(o->uuid);
		else
			nulls[3] = 'n';
		if (o->location)
			values[4] = CStringGetTextDatum(o->location);
		else
			nulls[4] = 'n';
		values[5] = Int64GetDatum(o->snapshot_id);
		if (o->snapshot_id < 0)
			nulls[5] = 'n';
		values[6] = Int64GetDatum(o->new_commits);
		values[7] = Int64GetDatum(o->new_bytes);
		values[8] = TimestampTzGetDatum(ms_to_timestamptz(o->first_ms));
		if (o->first_ms < 0)
			nulls[8] = 'n';
		values[9] = TimestampTzGetDatum(ms_to_timestamptz(o->last_ms));
		if (o->last_ms < 0)
			nulls[9] = 'n';
		if (o->etag)
			values[10] = CStringGetTextDatum(o->etag);
		else
			nulls[10] = 'n';
		db_exec("SELECT tms.observe_table($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)",
				11, types, values, nulls, SPI_OK_SELECT);
	}
	types[0] = INT8OID;
	foreach(lc, dropped)
	{
		values[0] = Int64GetDatum(*(int64 *) lfirst(lc));
		db_exec("SELECT tms._table_dropped($1)", 1, types, values, NULL, SPI_OK_SELECT);
	}
	db_end(c);
}

/* ---------------------------------------------------------------------
 * Evaluation of one candidate (no database access)
 * --------------------------------------------------------------------- */

static void
append_node_value(StringInfo b, const dsl_explain_node *e)
{
	switch (e->type)
	{
		case DSL_BOOLEAN:
			appendStringInfoString(b, e->value.b ? "true" : "false");
			break;
		case DSL_LONG:
			appendStringInfo(b, INT64_FORMAT, e->value.l);
			break;
		case DSL_DOUBLE:
			if (isfinite(e->value.d))
				appendStringInfo(b, "%.17g", e->value.d);
			else
				appendStringInfoString(b, "null");
			break;
		case DSL_STRING:
			escape_json(b, e->value.s ? e->value.s : "");
			break;
	}
}

/* The explanation nodes as a JSON array (expr, op, state, value). */
static char *
explain_json(const dsl_program *prog, const dsl_explain_node *nodes, int32 n)
{
	StringInfoData b;
	const char *src = dsl_program_source(prog);

	initStringInfo(&b);
	appendStringInfoChar(&b, '[');
	for (int32 i = 0; i < n; i++)
	{
		const dsl_explain_node *e = &nodes[i];
		char	   *expr = pnstrdup(src + e->offset, e->length);

		appendStringInfo(&b, "%s{\"id\": %d, \"parent\": %d, \"expr\": ",
						 i ? ", " : "", i, e->parent);
		escape_json(&b, expr);
		if (e->op && e->op[0])
		{
			appendStringInfoString(&b, ", \"op\": ");
			escape_json(&b, e->op);
		}
		switch (e->state)
		{
			case DSL_NODE_EVALUATED:
				appendStringInfoString(&b, ", \"value\": ");
				append_node_value(&b, e);
				break;
			case DSL_NODE_FAILED:
				appendStringInfo(&b, ", \"state\": \"failed\", \"outcome\": \"%s\"",
								 dsl_outcome_name(e->outcome));
				break;
			case DSL_NODE_PER_FILE:
				appendStringInfoString(&b, ", \"state\": \"per_file\"");
				break;
			default:
				appendStringInfoString(&b, ", \"state\": \"not_evaluated\"");
				break;
		}
		if (e->kind == DSL_KIND_COUNT && e->state != DSL_NODE_NOT_EVALUATED)
			appendStringInfo(&b, ", \"files\": " INT64_FORMAT, e->files);
		appendStringInfoChar(&b, '}');
		pfree(expr);
	}
	appendStringInfoChar(&b, ']');
	return b.data;
}

/* The metric values the program reads, as a JSON object. */
static char *
metrics_json(const dsl_program *prog, const dsl_metrics *m)
{
	StringInfoData b;
	uint32		vars = dsl_program_variables(prog);
	bool		first = true;

	initStringInfo(&b);
	appendStringInfoChar(&b, '{');
	for (int v = 0; v < DSL_VAR_COUNT; v++)
	{
		int64		l = 0;

		if (!(vars & DSL_VAR_BIT(v)) || !(m->present & DSL_VAR_BIT(v)))
			continue;
		appendStringInfo(&b, "%s\"%s\": ", first ? "" : ", ", dsl_var_name(v));
		first = false;
		switch (v)
		{
			case DSL_VAR_AVG_DATA_FILE_SIZE:
				appendStringInfo(&b, "%.17g", m->avg_data_file_size);
				continue;
			case DSL_VAR_DATA_FILES:
				l = m->data_files;
				break;
			case DSL_VAR_DATA_FILES_SIZE:
				l = m->data_files_size;
				break;
			case DSL_VAR_DATA_RECORDS:
				l = m->data_records;
				break;
			case DSL_VAR_EQUALITY_DELETE_FILES:
				l = m->equality_delete_files;
				break;
			case DSL_VAR_EQUALITY_DELETE_FILES_SIZE:
				l = m->equality_delete_files_size;
				break;
			case DSL_VAR_EQUALITY_DELETE_RECORDS:
				l = m->equality_delete_records;
				break;
			case DSL_VAR_POSITION_DELETE_FILES:
				l = m->position_delete_files;
				break;
			case DSL_VAR_POSITION_DELETE_FILES_SIZE:
				l = m->position_delete_files_size;
				break;
			case DSL_VAR_POSITION_DELETE_RECORDS:
				l = m->position_delete_records;
				break;
			case DSL_VAR_DATA_FILES_WITH_DELETES:
				l = m->data_files_with_deletes;
				break;
			case DSL_VAR_DATA_FILES_WITH_POSITION_DELETES:
				l = m->data_files_with_position_deletes;
				break;
			case DSL_VAR_DATA_FILES_WITH_EQUALITY_DELETES:
				l = m->data_files_with_equality_deletes;
				break;
			case DSL_VAR_SNAPSHOTS:
				l = m->snapshots;
				break;
			case DSL_VAR_OLDEST_SNAPSHOT_AGE:
				l = m->oldest_snapshot_age;
				break;
			case DSL_VAR_MANIFESTS:
				l = m->manifests;
				break;
			case DSL_VAR_TIME_SINCE_LAST_UPDATE:
				l = m->time_since_last_update;
				break;
			default:
				break;
		}
		appendStringInfo(&b, INT64_FORMAT, l);
	}
	appendStringInfoChar(&b, '}');
	return b.data;
}

/* Candidates whose tables are loaded together, ahead of their evaluation. */
#define PRELOAD_BATCH	64

/* A candidate's table, loaded ahead of its evaluation (malloc'd by io). */
typedef struct Preload
{
	bool		loaded;			/* t is set; else err says why not */
	IoLoadedTable t;
	IoError		err;
} Preload;

/*
 * IoLoadResultFn of the evaluation phase: keep the loaded table (taken
 * over from the io layer) or its error.  Allocates nothing, cannot fail.
 */
static int
preload_result(void *arg, size_t index, IoLoadedTable *t, const IoError *err)
{
	Preload    *pre = (Preload *) arg + index;

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
 * Load the tables of cands[0..n) into pre[], tms.evaluation_pool_size
 * requests at a time (manifests and data file lists are read later, one
 * evaluation after the other).  A load's failure stays in its Preload; a
 * batch that could not run at all leaves its error in every Preload not
 * delivered; an interrupt raises.  The caller frees pre[i].t.
 */
static void
preload_tables(TmsCatalogConn *conn, Candidate **cands, int n, Preload *pre)
{
	IoLoadRequest *reqs = palloc(sizeof(IoLoadRequest) * n);
	IoError		err;
	int			rc;

	for (int i = 0; i < n; i++)
	{
		memset(&pre[i], 0, sizeof(Preload));
		pre[i].err.code = IO_ERR_INTERNAL;	/* until delivered */
		reqs[i].ns = tms_namespace_to_io(cands[i]->ns);
		reqs[i].table = cands[i]->table;
		reqs[i].known_etag = NULL;
	}
	rc = io_catalog_load_tables_etag(conn->catalog, reqs, n,
									 tms_evaluation_pool_size,
									 preload_result, pre, &err);
	if (rc != 0)
	{
		if (err.code == IO_ERR_INTERRUPTED)
		{
			for (int i = 0; i < n; i++)
				io_loaded_table_free(&pre[i].t);
			tms_io_ereport(&err);
		}
		for (int i = 0; i < n; i++)
			if (!pre[i].loaded && pre[i].err.code == IO_ERR_INTERNAL)
				pre[i].err = err;
	}
	for (int i = 0; i < n; i++)
		pfree((char *) reqs[i].ns);
	pfree(reqs);
}

/*
 * Evaluate the program over the candidate's table (loaded ahead, *pre;
 * taken over and freed here) with an explanation.  Failures (catalog,
 * storage, bad metadata) become ev->error; only cancellation and shutdown
 * propagate.
 */
static void
evaluate_candidate(TmsCatalogConn *conn, const Candidate *cand,
				   const dsl_program *prog, Preload *pre, Evaluation *ev)
{
	MemoryContext cxt = CurrentMemoryContext;
	IoLoadedTable t;
	IcebergTableMetadata *volatile md = NULL;
	IoStorage  *volatile storage = NULL;
	IcebergDataFileIter *volatile it = NULL;
	TmsFileIO  *tio = palloc0(sizeof(TmsFileIO));

	memset(ev, 0, sizeof(*ev));
	t = pre->t;
	memset(&pre->t, 0, sizeof(pre->t));
	PG_TRY();
	{
		IcebergError ierr;
		IcebergFileIO fio;
		IcebergTableMetrics m;
		dsl_metrics dm;
		dsl_properties props;
		dsl_file_source src;
		dsl_input input;
		dsl_explain_node *nodes;
		int32		n = dsl_explain_count(prog);
		dsl_outcome outcome;
		bool		result;
		size_t		len;
		uint32		fields = dsl_program_fields(prog);

		if (!pre->loaded)
			tms_io_ereport(&pre->err);
		CHECK_FOR_INTERRUPTS();
		if (t.metadata_json == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_PROTOCOL_VIOLATION),
					 errmsg("catalog returned no metadata for table \"%s.%s\"",
							cand->ns, cand->table)));
		if (!iceberg_metadata_parse(t.metadata_json, strlen(t.metadata_json),
									NULL, (IcebergTableMetadata **) &md, &ierr))
			tms_iceberg_ereport(&ierr, NULL);
		memset(&m, 0, sizeof(m));
		memset(&dm, 0, sizeof(dm));
		memset(&input, 0, sizeof(input));
		if (dsl_program_needs(prog) > DSL_NEEDS_METADATA || dsl_program_uses_files(prog))
		{
			storage = tms_catalog_storage(conn, &t);
			tms_fileio_init(tio, conn, storage, &fio);
		}
		else
			memset(&fio, 0, sizeof(fio));
		if (!iceberg_table_metrics(&fio, md, (IcebergMetricsLevel) dsl_program_needs(prog),
								   now_ms(), NULL, NULL, &m, &ierr))
			tms_iceberg_ereport(&ierr, &tio->s3state.last_error);
		iceberg_metrics_to_dsl(&m, &dm);
		iceberg_dsl_properties(md, &props);
		input.metrics = &dm;
		input.properties = &props;
		if (dsl_program_uses_files(prog))
		{
			bool		match = (fields & (DSL_FIELD_BIT(DSL_FIELD_HAS_DELETES) |
										   DSL_FIELD_BIT(DSL_FIELD_HAS_POSITION_DELETES) |
										   DSL_FIELD_BIT(DSL_FIELD_HAS_EQUALITY_DELETES))) != 0;

			if (!iceberg_data_files_open(&fio, md, match,
										 (IcebergDataFileIter **) &it, &ierr) ||
				!iceberg_data_files_dsl_source(it, &src, &ierr))
				tms_iceberg_ereport(&ierr, &tio->s3state.last_error);
			input.files = &src;
		}
		nodes = palloc0(sizeof(dsl_explain_node) * (n + 1));
		outcome = dsl_explain(prog, &input, &result, nodes);
		CHECK_FOR_INTERRUPTS();
		if (outcome == DSL_FILE_SOURCE_ERROR)
			tms_iceberg_ereport(iceberg_data_files_error(it), &tio->s3state.last_error);
		len = dsl_explain_text(prog, nodes, result, outcome, NULL, 0);
		ev->explanation = palloc(len + 1);
		dsl_explain_text(prog, nodes, result, outcome, ev->explanation, len + 1);
		ev->explain_json = explain_json(prog, nodes, n);
		ev->metrics_json = metrics_json(prog, &dm);
		ev->outcome = dsl_outcome_name(outcome);
		if (outcome == DSL_OK || outcome == DSL_DIVISION_BY_ZERO || outcome == DSL_OVERFLOW)
		{
			ev->has_result = true;
			ev->result = (outcome == DSL_OK) && result;
		}
		else
			ev->error = psprintf("evaluation ended with %s", dsl_outcome_name(outcome));
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		MemoryContextSwitchTo(cxt);
		edata = CopyErrorData();
		if (edata->sqlerrcode == ERRCODE_QUERY_CANCELED ||
			edata->sqlerrcode == ERRCODE_ADMIN_SHUTDOWN ||
			edata->sqlerrcode == ERRCODE_OUT_OF_MEMORY)
			PG_RE_THROW();
		FlushErrorState();
		ev->has_result = false;
		ev->outcome = "error";
		ev->error = edata->detail
			? psprintf("%s: %s", edata->message, edata->detail)
			: pstrdup(edata->message);
	}
	PG_END_TRY();
	if (it)
		iceberg_data_files_close(it);
	io_storage_free(storage);
	iceberg_metadata_free(md);
	io_loaded_table_free(&t);
}

/* ---------------------------------------------------------------------
 * One policy
 * --------------------------------------------------------------------- */

typedef struct RuleProgram
{
	int64		rule_id;
	dsl_program *prog;
} RuleProgram;

/*
 * Record one evaluation (inside a database step).  Returns the decision;
 * *has_job and *job_id tell the job submitted, if any.
 */
static char *
record_evaluation(CycleCtx *c, const PolicyRow *p, const Candidate *cand,
				  const Evaluation *ev, int64 *job_id, bool *has_job)
{
	Oid			types[10] = {INT4OID, INT8OID, INT8OID, TEXTOID, TEXTOID,
	BOOLOID, TEXTOID, TEXTOID, TEXTOID, TEXTOID};
	Datum		values[10];
	char		nulls[10];
	char	   *counters = psprintf("{\"commits-added\": " INT64_FORMAT
									", \"bytes-added\": " INT64_FORMAT
									", \"time-elapsed\": " INT64_FORMAT "}",
									cand->commits_added, cand->bytes_added,
									cand->time_elapsed_ms);

	memset(nulls, ' ', sizeof(nulls));
	values[0] = Int32GetDatum(p->id);
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
	db_exec("SELECT job_id, decision FROM tms._record_evaluation($1, $2, $3, $4::jsonb,"
			" $5::jsonb, $6, $7, $8, $9::jsonb, $10)",
			10, types, values, nulls, SPI_OK_SELECT);
	*has_job = false;
	if (SPI_processed != 1)
		return pstrdup("failed");
	*job_id = col_int64(0, 1, -1);
	*has_job = (*job_id >= 0);
	return col_str(0, 2, c->cxt);
}

/* The compiled program of a rule, compiled once per policy run. */
static dsl_program *
rule_program(List **progs, const Candidate *cand)
{
	ListCell   *lc;
	RuleProgram *rp;

	foreach(lc, *progs)
	{
		rp = lfirst(lc);
		if (rp->rule_id == cand->rule_id)
			return rp->prog;
	}
	rp = palloc(sizeof(RuleProgram));
	rp->rule_id = cand->rule_id;
	rp->prog = tms_policy_compile(cand->condition, strlen(cand->condition));
	*progs = lappend(*progs, rp);
	return rp->prog;
}

/*
 * Steps 4-5 for candv[0..ncands): load the candidates' tables ahead,
 * PRELOAD_BATCH at a time into pre[] (concurrently), then evaluate each,
 * record it and submit, one after the other.  The caller frees what is
 * left in pre[] on error.
 */
static void
evaluate_all(CycleCtx *c, const PolicyRow *p, TmsCatalogConn *conn,
			 Candidate **candv, int ncands, Preload *pre)
{
	List	   *progs = NIL;

	for (int i = 0; i < ncands; i++)
	{
		Candidate  *cd = candv[i];
		Evaluation	ev;
		dsl_program *prog;
		char	   *decision;
		int64		job_id = 0;
		bool		has_job = false;

		CHECK_FOR_INTERRUPTS();
		if (i % PRELOAD_BATCH == 0)
		{
			pgstat_report_activity(STATE_RUNNING, "tms: loading the tables of candidates");
			preload_tables(conn, candv + i, Min(PRELOAD_BATCH, ncands - i), pre);
		}
		prog = rule_program(&progs, cd);
		pgstat_report_activity(STATE_RUNNING, "tms: evaluating a policy condition");
		evaluate_candidate(conn, cd, prog, &pre[i % PRELOAD_BATCH], &ev);

		db_begin(c);
		decision = record_evaluation(c, p, cd, &ev, &job_id, &has_job);
		db_end(c);

		if (c->tupstore)
		{
			Datum		row[8];
			bool		isnull[8] = {false};

			row[0] = Int64GetDatum(cd->rule_id);
			row[1] = CStringGetTextDatum(cd->operation);
			row[2] = CStringGetTextDatum(cd->ns);
			row[3] = CStringGetTextDatum(cd->table);
			row[4] = BoolGetDatum(ev.result);
			isnull[4] = !ev.has_result;
			row[5] = CStringGetTextDatum(decision);
			row[6] = Int64GetDatum(job_id);
			isnull[6] = !has_job;
			if (ev.explanation)
				row[7] = CStringGetTextDatum(ev.explanation);
			else if (ev.error)
				row[7] = CStringGetTextDatum(ev.error);
			else
				isnull[7] = true;
			tuplestore_putvalues(c->tupstore, c->desc, row, isnull);
		}
	}
}

/*
 * Run the cycle's steps for one policy.  With evaluate false (its window
 * is closed) only the group's tables are refreshed: activity is counted
 * all the time, the window only defers evaluation and execution.
 */
static void
run_policy(CycleCtx *c, const PolicyRow *p, bool evaluate)
{
	TmsCatalogConn *conn;
	List	   *cands = NIL;
	ListCell   *lc;
	Candidate **candv;
	Preload    *volatile pre;
	int			ncands;
	Oid			types[1] = {INT4OID};
	Datum		values[1];
	instr_time	t0,
				t1,
				t2,
				t3;
	uint64		req0,
				req1,
				req2;

	/* 1. connect as the owner */
	db_begin(c);
	conn = connect_as_owner(p);
	db_end(c);

	/* 2. refresh the group's tables, once per cycle */
	INSTR_TIME_SET_CURRENT(t0);
	req0 = io_catalog_request_count(conn->catalog);
	if (!list_member_int(c->refreshed, p->group_id))
	{
		refresh_group(c, p, conn);
		c->refreshed = lappend_int(c->refreshed, p->group_id);
	}
	req1 = io_catalog_request_count(conn->catalog);
	if (!evaluate)
		return;

	/* 3. candidates: one indexed query, no Iceberg I/O */
	INSTR_TIME_SET_CURRENT(t1);
	db_begin(c);
	values[0] = Int32GetDatum(p->id);
	db_exec("SELECT b.rule_id, b.table_id, t.namespace, t.table_name, r.operation,"
			"       r.condition, t.commits - b.base_commits,"
			"       t.bytes_added - b.base_bytes,"
			"       (extract(epoch FROM now() - b.since) * 1000)::bigint"
			"  FROM tms.maintenance_rules r"
			"  JOIN tms.rule_baselines b ON b.rule_id = r.id"
			"  JOIN tms.tables t ON t.id = b.table_id"
			" WHERE r.policy_id = $1 AND b.pending_job IS NULL"
			"   AND (b.triggered OR b.due_at <= now()) AND t.dropped_at IS NULL"
			" ORDER BY b.rule_id, b.table_id",
			1, types, values, NULL, SPI_OK_SELECT);
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		Candidate  *cd = MemoryContextAllocZero(c->cxt, sizeof(Candidate));
		MemoryContext old;

		cd->rule_id = col_int64(i, 1, 0);
		cd->table_id = col_int64(i, 2, 0);
		cd->ns = col_str(i, 3, c->cxt);
		cd->table = col_str(i, 4, c->cxt);
		cd->operation = col_str(i, 5, c->cxt);
		cd->condition = col_str(i, 6, c->cxt);
		cd->commits_added = col_int64(i, 7, 0);
		cd->bytes_added = col_int64(i, 8, 0);
		cd->time_elapsed_ms = col_int64(i, 9, 0);
		old = MemoryContextSwitchTo(c->cxt);
		cands = lappend(cands, cd);
		MemoryContextSwitchTo(old);
	}
	db_end(c);
	INSTR_TIME_SET_CURRENT(t2);

	/*
	 * 4-5. evaluate each candidate, record, submit.  The candidates' tables
	 * are loaded PRELOAD_BATCH at a time, concurrently; evaluation itself
	 * (manifests, data files) runs one candidate after the other.
	 */
	ncands = list_length(cands);
	candv = palloc(sizeof(Candidate *) * Max(ncands, 1));
	pre = palloc0(sizeof(Preload) * PRELOAD_BATCH);
	ncands = 0;
	foreach(lc, cands)
		candv[ncands++] = lfirst(lc);
	PG_TRY();
	{
		evaluate_all(c, p, conn, candv, ncands, pre);
	}
	PG_FINALLY();
	{
		/* tables loaded ahead and not evaluated (an error, a cancel) */
		for (int i = 0; i < PRELOAD_BATCH; i++)
			io_loaded_table_free(&pre[i].t);
	}
	PG_END_TRY();
	INSTR_TIME_SET_CURRENT(t3);
	req2 = io_catalog_request_count(conn->catalog);
	INSTR_TIME_SUBTRACT(t3, t2);
	INSTR_TIME_SUBTRACT(t2, t1);
	INSTR_TIME_SUBTRACT(t1, t0);
	elog(DEBUG1, "tms: policy \"%s\": refresh %.1f ms (%llu catalog requests),"
		 " candidate query %.3f ms (%d candidates), evaluation %.1f ms (%llu catalog requests)",
		 p->name, INSTR_TIME_GET_MILLISEC(t1), (unsigned long long) (req1 - req0),
		 INSTR_TIME_GET_MILLISEC(t2), ncands,
		 INSTR_TIME_GET_MILLISEC(t3), (unsigned long long) (req2 - req1));
}

/* Read the policies to run (inside a database step), into c->cxt. */
static List *
load_policies(CycleCtx *c, const char *only)
{
	List	   *out = NIL;
	Oid			types[1] = {TEXTOID};
	Datum		values[1];
	char		nulls[1] = {' '};

	if (only)
		values[0] = CStringGetTextDatum(only);
	else
		nulls[0] = 'n';
	db_exec("SELECT p.id, p.name, p.owner::oid, g.server::text, g.id,"
			"       tms.window_open(p.time_window, now()), p.active"
			"  FROM tms.maintenance_policies p"
			"  JOIN tms.object_groups g ON g.id = p.group_id"
			" WHERE ($1::text IS NULL AND p.active) OR p.name = $1"
			" ORDER BY p.id",
			1, types, values, nulls, SPI_OK_SELECT);
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		PolicyRow  *p = MemoryContextAllocZero(c->cxt, sizeof(PolicyRow));
		MemoryContext old;

		p->id = (int32) col_int64(i, 1, 0);
		p->name = col_str(i, 2, c->cxt);
		p->owner = (Oid) col_int64(i, 3, 0);
		p->server = col_str(i, 4, c->cxt);
		p->group_id = (int32) col_int64(i, 5, 0);
		p->window_open = col_int64(i, 6, 0) != 0;
		p->active = col_int64(i, 7, 0) != 0;
		old = MemoryContextSwitchTo(c->cxt);
		out = lappend(out, p);
		MemoryContextSwitchTo(old);
	}
	return out;
}

/* Guarded step of the supervisor's cycle: one policy. */
typedef struct PolicyStep
{
	CycleCtx   *c;
	PolicyRow  *p;
} PolicyStep;

static void
policy_step(void *arg)
{
	PolicyStep *s = arg;

	run_policy(s->c, s->p, s->p->window_open);
}

/* Guarded step: prune the evaluation log in batches of 1000 rows. */
static void
prune_step(void *arg)
{
	CycleCtx   *c = arg;
	Oid			types[1] = {INT4OID};
	Datum		values[1];

	for (int round = 0; round < 10; round++)
	{
		uint64		n;

		db_begin(c);
		values[0] = Int32GetDatum(tms_evaluation_log_retention_s);
		db_exec("WITH old AS (SELECT id FROM tms.evaluation_log"
				"              WHERE evaluated_at < now() - make_interval(secs => $1)"
				"              ORDER BY evaluated_at LIMIT 1000)"
				" DELETE FROM tms.evaluation_log l USING old WHERE l.id = old.id",
				1, types, values, NULL, SPI_OK_DELETE);
		n = SPI_processed;
		db_end(c);
		if (n < 1000)
			break;
	}
}

/*
 * The supervisor's evaluation cycle (see the file header).  Called with
 * no transaction open; each policy is guarded, so one failing policy
 * (catalog down, owner without a user mapping) does not stop the others:
 * its error is logged and the next cycle tries again.
 */
void
tms_policy_cycle(void)
{
	static MemoryContext cxt = NULL;
	CycleCtx	c;
	List	   *policies;
	ListCell   *lc;
	MemoryContext old;

	if (cxt == NULL)
		cxt = AllocSetContextCreate(TopMemoryContext, "tms policy cycle",
									ALLOCSET_DEFAULT_SIZES);
	MemoryContextReset(cxt);
	old = MemoryContextSwitchTo(cxt);

	memset(&c, 0, sizeof(c));
	c.own_xact = true;
	c.cxt = cxt;
	c.next_beat = TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
											  tms_heartbeat_interval_ms);

	tick_ctx = &c;
	db_begin(&c);
	policies = load_policies(&c, NULL);
	db_end(&c);

	foreach(lc, policies)
	{
		PolicyStep	s;

		s.c = &c;
		s.p = lfirst(lc);
		if (!tms_enabled)
			break;
		if (!tms_run_guarded(policy_step, &s))
			MemoryContextSwitchTo(cxt);
	}
	(void) tms_run_guarded(prune_step, &c);
	tick_ctx = NULL;
	pgstat_report_activity(STATE_IDLE, NULL);
	MemoryContextSwitchTo(old);
	MemoryContextReset(cxt);
}

/*
 * tms.evaluate_now: one cycle for one policy inside the caller's
 * transaction.
 */
void
tms_policy_evaluate_now(const char *policy, bool force,
						Tuplestorestate *tupstore, TupleDesc desc)
{
	CycleCtx	c;
	List	   *policies;
	PolicyRow  *p;

	memset(&c, 0, sizeof(c));
	c.own_xact = false;
	c.cxt = CurrentMemoryContext;
	c.tupstore = tupstore;
	c.desc = desc;

	db_begin(&c);
	policies = load_policies(&c, policy);
	db_end(&c);
	if (policies == NIL)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("policy \"%s\" does not exist", policy),
				 errhint("See SELECT name FROM tms.policies.")));
	p = linitial(policies);
	if (!force && !p->active)
	{
		ereport(NOTICE,
				(errmsg("policy \"%s\" is not active; nothing evaluated", policy),
				 errhint("Pass force => true to evaluate it anyway.")));
		return;
	}
	if (!force && !p->window_open)
	{
		ereport(NOTICE,
				(errmsg("the time window of policy \"%s\" is closed; nothing evaluated", policy),
				 errhint("Pass force => true to evaluate it anyway.")));
		return;
	}
	run_policy(&c, p, true);
}
