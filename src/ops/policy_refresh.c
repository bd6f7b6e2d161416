/*-------------------------------------------------------------------------
 *
 * policy_refresh.c
 *	  Refreshing tms.tables for a policy's group: discover the tables the
 *	  group selects, count the commits observed since the last refresh,
 *	  notice tables that are gone.
 *
 * The catalog is walked namespace by namespace.  The tables of a selected
 * namespace are listed page by page (io_catalog_list_tables_paged), and
 * each page is handled before the next is fetched:
 *
 *	1. a step reads what tms.tables knows of the page's selected tables
 *	   (metadata location, ETag, last commit);
 *	2. the tables are loaded with their ETags, tms.evaluation_pool_size
 *	   requests at a time: an unchanged table costs one 304;
 *	3. a step records each changed table with tms.observe_table(), which
 *	   counts its new commits and marks the (table, rule) pairs whose
 *	   thresholds they reach.
 *
 * So the memory of a refresh does not grow with the number of tables: one
 * page of names and loads at a time, plus one 64-bit hash per listed table
 * of the namespace being walked, with which a last pass finds the tables
 * tms knew there that the catalog no longer lists (tms._table_dropped).
 * Everything a page needs is allocated in the page's context, which is
 * reset before the next page (policy_step keeps the caller's context), and
 * a step that runs one statement per table frees each statement's result
 * at once: SPI keeps every result until the step ends otherwise.
 *
 * A commit-job refreshes one table the same way (policy_refresh_table: a
 * page of one), keeps the load for the evaluation that follows, and marks
 * the table dropped when the catalog no longer has it.  The counts of an
 * observation are relative to the counters known_step read, so a commit
 * seen by a refresh and a commit-job at once is counted once
 * (tms.observe_table).
 *
 * Errors: every io and iceberg failure is a value.  The io layer calls the
 * page and load callbacks between two network waits, never from inside
 * libcurl; what they raise (an interrupt, out of memory) is caught there,
 * the walk stopped, and raised again once the io call has returned.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "common/hashfn.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "bridge/errors.h"
#include "bridge/names.h"
#include "bridge/plain_memory.h"
#include "iceberg/iceberg.h"
#include "io/io.h"
#include "ops/policy.h"
#include "ops/policy_int.h"
#include "sched/lease.h"

/* The group's selection. */
typedef struct GroupSpec
{
	char	   *ns_pattern;		/* NULL: members only */
	char	   *table_pattern;
	List	   *member_ns;		/* dotted namespace strings */
	List	   *member_table;
} GroupSpec;

/* A table of the page being refreshed. */
typedef struct PageTable
{
	char	   *name;
	int64		id;				/* 0: new to tms */
	char	   *metadata_location;
	char	   *etag;
	int64		last_commit_ms; /* -1: none */
	int64		base_commits;	/* the counters it had (id != 0) */
	int64		base_bytes;
	/* what its load found, when it changed */
	bool		vanished;		/* the catalog has no such table */
	bool		changed;
	char	   *uuid;
	char	   *location;		/* the new metadata location */
	char	   *new_etag;
	int64		snapshot_id;	/* -1: none */
	int64		new_commits;
	int64		new_bytes;
	int64		first_ms;		/* -1: unknown */
	int64		last_ms;
} PageTable;

typedef struct Refresh
{
	PolicyRun  *run;
	GroupSpec	g;
	const char *ns;				/* dotted, the namespace being walked */
	const char *ns_io;
	MemoryContext page_cxt;		/* reset for every page */
	/* hashes of the selected tables listed in this namespace */
	uint64	   *seen;
	int			nseen;
	int			maxseen;
	/* the page */
	PageTable  *tables;
	int			ntables;
	/* a failure that ends the refresh */
	ErrorData  *raised;			/* raised inside a callback: raised again */
	bool		failed;
	IoLoadedTable *keep;		/* one table's refresh: take its load here */
} Refresh;

/* ---------------------------------------------------------------------
 * Selection
 * --------------------------------------------------------------------- */

static bool
ns_selected(const GroupSpec *g, const char *ns)
{
	ListCell   *lc;

	if (g->ns_pattern && tms_glob_match(g->ns_pattern, ns))
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

	if (g->ns_pattern && tms_glob_match(g->ns_pattern, ns) &&
		tms_glob_match(g->table_pattern, table))
		return true;
	forboth(lc1, g->member_ns, lc2, g->member_table)
		if (strcmp((char *) lfirst(lc1), ns) == 0 &&
			strcmp((char *) lfirst(lc2), table) == 0)
		return true;
	return false;
}

static void
read_group_step(void *arg)
{
	Refresh    *rf = arg;
	MemoryContext cxt = rf->run->cxt;
	Oid			types[1] = {INT4OID};
	Datum		values[1];

	values[0] = Int32GetDatum(rf->run->policy->group_id);
	policy_exec("SELECT namespace_pattern, table_pattern FROM tms.object_groups WHERE id = $1",
				1, types, values, NULL, SPI_OK_SELECT);
	if (SPI_processed == 1)
	{
		rf->g.ns_pattern = policy_col_str(0, 1, cxt);
		rf->g.table_pattern = policy_col_str(0, 2, cxt);
	}
	policy_exec("SELECT namespace, table_name FROM tms.object_group_members WHERE group_id = $1",
				1, types, values, NULL, SPI_OK_SELECT);
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		MemoryContext old = MemoryContextSwitchTo(cxt);

		rf->g.member_ns = lappend(rf->g.member_ns, policy_col_str(i, 1, cxt));
		rf->g.member_table = lappend(rf->g.member_table, policy_col_str(i, 2, cxt));
		MemoryContextSwitchTo(old);
	}
}

/* ---------------------------------------------------------------------
 * One page
 * --------------------------------------------------------------------- */

static uint64
name_hash(const char *name)
{
	return hash_bytes_extended((const unsigned char *) name, strlen(name), 0);
}

static void
remember_seen(Refresh *rf, const char *name)
{
	if (rf->nseen == rf->maxseen)
	{
		rf->maxseen = Max(1024, rf->maxseen * 2);
		rf->seen = rf->seen
			? repalloc_huge(rf->seen, sizeof(uint64) * rf->maxseen)
			: MemoryContextAllocHuge(rf->run->cxt, sizeof(uint64) * rf->maxseen);
	}
	rf->seen[rf->nseen++] = name_hash(name);
}

static int
cmp_u64(const void *a, const void *b)
{
	uint64		x = *(const uint64 *) a;
	uint64		y = *(const uint64 *) b;

	return x < y ? -1 : x > y ? 1 : 0;
}

/* Step 1: what tms.tables knows of the page's tables. */
static void
known_step(void *arg)
{
	Refresh    *rf = arg;
	Oid			types[3] = {TEXTOID, TEXTOID, TEXTARRAYOID};
	Datum		values[3];
	Datum	   *names = palloc(sizeof(Datum) * rf->ntables);

	for (int i = 0; i < rf->ntables; i++)
		names[i] = CStringGetTextDatum(rf->tables[i].name);
	values[0] = CStringGetTextDatum(rf->run->policy->server);
	values[1] = CStringGetTextDatum(rf->ns);
	values[2] = PointerGetDatum(construct_array(names, rf->ntables, TEXTOID, -1, false,
												TYPALIGN_INT));
	policy_exec("SELECT table_name, id, metadata_location,"
				"       (extract(epoch FROM last_commit_at) * 1000)::bigint, etag,"
				"       commits, bytes_added"
				"  FROM tms.tables"
				" WHERE server = $1::name AND namespace = $2 AND table_name = ANY ($3)"
				"   AND dropped_at IS NULL",
				3, types, values, NULL, SPI_OK_SELECT);
	for (uint64 r = 0; r < SPI_processed; r++)
	{
		char	   *name = SPI_getvalue(SPI_tuptable->vals[r], SPI_tuptable->tupdesc, 1);

		for (int i = 0; i < rf->ntables; i++)
		{
			PageTable  *t = &rf->tables[i];

			if (t->id != 0 || strcmp(t->name, name) != 0)
				continue;
			t->id = policy_col_int64(r, 2, 0);
			t->metadata_location = policy_col_str(r, 3, rf->page_cxt);
			t->last_commit_ms = policy_col_int64(r, 4, -1);
			t->etag = policy_col_str(r, 5, rf->page_cxt);
			t->base_commits = policy_col_int64(r, 6, 0);
			t->base_bytes = policy_col_int64(r, 7, 0);
			break;
		}
	}
}

/*
 * Count what the snapshots of md add beyond last_ms: commits, and the
 * bytes of data they add (summary "added-files-size").  "replace" commits
 * (compaction, manifest and position-delete rewrites: the same rows) are
 * maintenance, not activity, and count as neither: otherwise one rule's
 * job would trigger the next rule's, and that one the first again.
 */
static void
count_commits(const IcebergTableMetadata *md, PageTable *t)
{
	t->new_commits = 0;
	t->new_bytes = 0;
	t->first_ms = -1;
	t->last_ms = t->last_commit_ms;
	for (int i = 0; i < md->nsnapshots; i++)
	{
		const IcebergSnapshot *s = &md->snapshots[i];

		if (t->first_ms < 0 || s->timestamp_ms < t->first_ms)
			t->first_ms = s->timestamp_ms;
		if (s->timestamp_ms <= t->last_commit_ms)
			continue;
		if (s->timestamp_ms > t->last_ms)
			t->last_ms = s->timestamp_ms;
		if (s->operation && strcmp(s->operation, "replace") == 0)
			continue;
		t->new_commits++;
		for (int k = 0; k < s->nsummary; k++)
		{
			if (strcmp(s->summary[k].key, "added-files-size") == 0 && s->summary[k].value)
			{
				int64		v = strtoll(s->summary[k].value, NULL, 10);

				if (v > 0 && t->new_bytes <= PG_INT64_MAX - v)
					t->new_bytes += v;
			}
		}
	}
}

/*
 * IoLoadResultFn of the refresh: record what one load found.  Called by
 * the io layer between two polls; anything raised here is caught, kept
 * and raised again by the caller after the batch (see the file header).
 * A vanished table is skipped; any other failed load, or metadata that
 * does not parse, ends the refresh with that failure.
 */
static int
load_result(void *arg, size_t index, IoLoadedTable *lt, const TmsError *err)
{
	Refresh    *rf = arg;
	PageTable  *t = &rf->tables[index];
	MemoryContext old = MemoryContextSwitchTo(rf->page_cxt);
	volatile int stop = 0;

	PG_TRY();
	{
		if (lt == NULL)
		{
			if (err->code == IO_ERR_NO_SUCH_TABLE)
				t->vanished = true;
			else
			{
				(void) policy_fail(rf->run, tms_error_sqlstate(err),
								   psprintf("could not load table \"%s.%s\": %s",
											rf->ns, t->name, err->message),
								   err->detail[0] ? err->detail : NULL);
				rf->failed = true;
				stop = 1;
			}
		}
		else if (!(lt->not_modified && t->id != 0) && lt->metadata_json != NULL)
		{
			IcebergTableMetadata *md = NULL;
			TmsError	ierr;

			if (!iceberg_metadata_parse(lt->metadata_json, strlen(lt->metadata_json),
										NULL, &md, &ierr))
			{
				(void) policy_fail(rf->run, tms_error_sqlstate(&ierr),
								   psprintf("cannot read the metadata of table \"%s.%s\": %s",
											rf->ns, t->name, ierr.message),
								   ierr.detail[0] ? ierr.detail : NULL);
				rf->failed = true;
				stop = 1;
			}
			else
			{
				bool		same = t->metadata_location && lt->metadata_location &&
				strcmp(t->metadata_location, lt->metadata_location) == 0;

				t->changed = true;
				t->uuid = md->table_uuid ? pstrdup(md->table_uuid) : NULL;
				t->location = lt->metadata_location ? pstrdup(lt->metadata_location) : NULL;
				t->new_etag = lt->etag ? pstrdup(lt->etag) : NULL;
				t->snapshot_id = md->current_snapshot_id;
				count_commits(md, t);
				if (same)
					t->new_commits = t->new_bytes = 0;	/* only the ETag moved */
				iceberg_metadata_free(md);
				if (rf->keep != NULL && rf->keep->metadata_json == NULL)
				{
					/* taken: io frees what is left in *lt, nothing */
					*rf->keep = *lt;
					memset(lt, 0, sizeof(*lt));
				}
			}
		}
	}
	PG_CATCH();
	{
		MemoryContextSwitchTo(rf->run->cxt);
		rf->raised = CopyErrorData();
		FlushErrorState();
		stop = 1;
	}
	PG_END_TRY();
	MemoryContextSwitchTo(old);
	return stop;
}

/* Step 3: record the page's changed tables. */
static void
observe_step(void *arg)
{
	Refresh    *rf = arg;
	Oid			types[13] = {TEXTOID, TEXTOID, TEXTOID, TEXTOID, TEXTOID, INT8OID,
	INT8OID, INT8OID, TIMESTAMPTZOID, TIMESTAMPTZOID, TEXTOID, INT8OID, INT8OID};

	for (int i = 0; i < rf->ntables; i++)
	{
		PageTable  *t = &rf->tables[i];
		Datum		values[13];
		char		nulls[13];

		if (!t->changed)
			continue;
		memset(nulls, ' ', sizeof(nulls));
		values[0] = CStringGetTextDatum(rf->run->policy->server);
		values[1] = CStringGetTextDatum(rf->ns);
		values[2] = CStringGetTextDatum(t->name);
		if (t->uuid)
			values[3] = CStringGetTextDatum(t->uuid);
		else
			nulls[3] = 'n';
		if (t->location)
			values[4] = CStringGetTextDatum(t->location);
		else
			nulls[4] = 'n';
		values[5] = Int64GetDatum(t->snapshot_id);
		if (t->snapshot_id < 0)
			nulls[5] = 'n';
		values[6] = Int64GetDatum(t->new_commits);
		values[7] = Int64GetDatum(t->new_bytes);
		values[8] = TimestampTzGetDatum(policy_ms_to_timestamptz(t->first_ms));
		if (t->first_ms < 0)
			nulls[8] = 'n';
		values[9] = TimestampTzGetDatum(policy_ms_to_timestamptz(t->last_ms));
		if (t->last_ms < 0)
			nulls[9] = 'n';
		if (t->new_etag)
			values[10] = CStringGetTextDatum(t->new_etag);
		else
			nulls[10] = 'n';
		/* counted from the counters read in known_step: see observe_table */
		values[11] = Int64GetDatum(t->base_commits);
		values[12] = Int64GetDatum(t->base_bytes);
		if (t->id == 0)
			nulls[11] = nulls[12] = 'n';
		policy_exec("SELECT tms.observe_table($1::name, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11,"
					" $12, $13)",
					13, types, values, nulls, SPI_OK_SELECT);
		/* each result's context would otherwise stay until the step ends */
		SPI_freetuptable(SPI_tuptable);
	}
}

/* The three steps of one page (see the file header). */
static bool
refresh_page(Refresh *rf)
{
	IoLoadRequest *reqs;
	TmsError	err;
	int			rc;

	if (rf->ntables == 0)
		return true;
	if (!policy_step(rf->run, known_step, rf))
		return false;
	reqs = palloc(sizeof(IoLoadRequest) * rf->ntables);
	for (int i = 0; i < rf->ntables; i++)
	{
		reqs[i].ns = rf->ns_io;
		reqs[i].table = rf->tables[i].name;
		reqs[i].known_etag = rf->tables[i].etag;
	}
	rc = io_catalog_load_tables_etag(rf->run->conn->catalog, reqs, rf->ntables,
									 tms_evaluation_pool_size, load_result, rf, &err);
	if (rf->raised != NULL)
		ReThrowError(rf->raised);
	if (rf->failed)
		return false;
	if (rc != 0)
	{
		CHECK_FOR_INTERRUPTS();
		if (sched_lease_lost())
			return false;
		return policy_fail(rf->run, tms_error_sqlstate(&err),
						   psprintf("could not load the tables of namespace \"%s\": %s",
									rf->ns, err.message),
						   err.detail[0] ? err.detail : NULL);
	}
	return policy_step(rf->run, observe_step, rf);
}

/*
 * IoTablePageFn: one page of a namespace's listing.  Keeps the selected
 * tables, remembers them as seen, and refreshes them before the next page
 * is fetched.  Returns non-zero to stop the listing.
 */
static int
page_result(void *arg, const IoTableIdent *items, size_t n)
{
	Refresh    *rf = arg;
	MemoryContext old;
	volatile int stop = 0;

	MemoryContextReset(rf->page_cxt);
	old = MemoryContextSwitchTo(rf->page_cxt);
	PG_TRY();
	{
		CHECK_FOR_INTERRUPTS();
		rf->tables = palloc0(sizeof(PageTable) * Max(n, 1));
		rf->ntables = 0;
		for (size_t i = 0; i < n; i++)
		{
			if (!table_selected(&rf->g, rf->ns, items[i].name))
				continue;
			rf->tables[rf->ntables].name = pstrdup(items[i].name);
			rf->tables[rf->ntables].last_commit_ms = -1;
			rf->tables[rf->ntables].snapshot_id = -1;
			remember_seen(rf, items[i].name);
			rf->ntables++;
		}
		if (!refresh_page(rf))
			stop = 1;
		if (sched_lease_lost())
			stop = 1;
	}
	PG_CATCH();
	{
		MemoryContextSwitchTo(rf->run->cxt);
		rf->raised = CopyErrorData();
		FlushErrorState();
		stop = 1;
	}
	PG_END_TRY();
	MemoryContextSwitchTo(old);
	return stop;
}

/* ---------------------------------------------------------------------
 * Tables gone from a namespace
 * --------------------------------------------------------------------- */

static void
dropped_step(void *arg)
{
	Refresh    *rf = arg;
	Oid			types[2] = {TEXTOID, TEXTOID};
	Datum		values[2];
	Portal		portal;
	List	   *gone = NIL;
	ListCell   *lc;

	qsort(rf->seen, rf->nseen, sizeof(uint64), cmp_u64);
	values[0] = CStringGetTextDatum(rf->run->policy->server);
	values[1] = CStringGetTextDatum(rf->ns);
	portal = SPI_cursor_open_with_args(NULL,
									   "SELECT id, table_name FROM tms.tables"
									   " WHERE server = $1::name AND namespace = $2"
									   "   AND dropped_at IS NULL",
									   2, types, values, NULL, true, 0);
	for (;;)
	{
		SPI_cursor_fetch(portal, true, 1000);
		if (SPI_processed == 0)
			break;
		for (uint64 r = 0; r < SPI_processed; r++)
		{
			char	   *name = SPI_getvalue(SPI_tuptable->vals[r], SPI_tuptable->tupdesc, 2);
			uint64		h = name_hash(name);

			if (table_selected(&rf->g, rf->ns, name) &&
				bsearch(&h, rf->seen, rf->nseen, sizeof(uint64), cmp_u64) == NULL)
			{
				MemoryContext old = MemoryContextSwitchTo(rf->page_cxt);
				int64	   *id = palloc(sizeof(int64));

				*id = policy_col_int64(r, 1, 0);
				gone = lappend(gone, id);
				MemoryContextSwitchTo(old);
			}
		}
		SPI_freetuptable(SPI_tuptable);
	}
	SPI_cursor_close(portal);
	types[0] = INT8OID;
	foreach(lc, gone)
	{
		values[0] = Int64GetDatum(*(int64 *) lfirst(lc));
		policy_exec("SELECT tms._table_dropped($1)", 1, types, values, NULL, SPI_OK_SELECT);
		SPI_freetuptable(SPI_tuptable);
	}
}

/* ---------------------------------------------------------------------
 * The walk
 * --------------------------------------------------------------------- */

/* Refresh the tables of one selected namespace. */
static bool
refresh_namespace(Refresh *rf, const char *ns_io, const char *ns)
{
	TmsError	err;
	int			rc;

	rf->ns = ns;
	rf->ns_io = ns_io;
	rf->nseen = 0;
	rc = io_catalog_list_tables_paged(rf->run->conn->catalog, ns_io, page_result, rf, &err);
	if (rf->raised != NULL)
		ReThrowError(rf->raised);
	if (rf->failed || rf->run->error != NULL || sched_lease_lost())
		return false;
	if (rc != 0)
	{
		CHECK_FOR_INTERRUPTS();
		if (err.code == IO_ERR_NO_SUCH_NAMESPACE)
			return true;		/* dropped since it was listed */
		return policy_fail(rf->run, tms_error_sqlstate(&err),
						   psprintf("could not list the tables of namespace \"%s\": %s",
									ns, err.message),
						   err.detail[0] ? err.detail : NULL);
	}
	MemoryContextReset(rf->page_cxt);
	return policy_step(rf->run, dropped_step, rf);
}

/* Walk the namespaces under parent_io (NULL: the top). */
static bool
refresh_walk(Refresh *rf, const char *parent_io, int depth)
{
	IoStringList nss;
	TmsError	err;
	List	   *names = NIL;
	ListCell   *lc;
	TmsIoScope *scope;

	if (depth > 16)
		return policy_fail(rf->run, ERRCODE_PROGRAM_LIMIT_EXCEEDED,
						   "namespaces nested deeper than 16 levels", NULL);
	memset(&nss, 0, sizeof(nss));
	scope = tms_io_scope_begin();
	if (io_catalog_list_namespaces(rf->run->conn->catalog, parent_io, &nss, &err) != 0)
	{
		tms_io_scope_end(scope);
		CHECK_FOR_INTERRUPTS();
		if (err.code == IO_ERR_NO_SUCH_NAMESPACE && parent_io != NULL)
			return true;
		return policy_fail(rf->run, tms_error_sqlstate(&err),
						   psprintf("could not list namespaces: %s", err.message),
						   err.detail[0] ? err.detail : NULL);
	}
	for (size_t i = 0; i < nss.n; i++)
		names = lappend(names, pstrdup(nss.items[i]));
	io_string_list_free(&nss);
	tms_io_scope_end(scope);

	foreach(lc, names)
	{
		const char *ns_io = lfirst(lc);
		char	   *ns = tms_namespace_from_io(ns_io);

		CHECK_FOR_INTERRUPTS();
		if (ns_selected(&rf->g, ns) && !refresh_namespace(rf, ns_io, ns))
			return false;
		if (ns_descend(&rf->g, ns) && !refresh_walk(rf, ns_io, depth + 1))
			return false;
	}
	return true;
}

static void
refreshed_step(void *arg)
{
	Refresh    *rf = arg;
	Oid			types[1] = {INT4OID};
	Datum		values[1];

	values[0] = Int32GetDatum(rf->run->policy->group_id);
	policy_exec("UPDATE tms.object_groups SET refreshed_at = now() WHERE id = $1",
				1, types, values, NULL, SPI_OK_UPDATE);
}

/* arg: the int64 id of the table */
static void
table_dropped_step(void *arg)
{
	Oid			types[1] = {INT8OID};
	Datum		values[1];

	values[0] = Int64GetDatum(*(int64 *) arg);
	policy_exec("SELECT tms._table_dropped($1)", 1, types, values, NULL, SPI_OK_SELECT);
}

bool
policy_refresh_table(PolicyRun *r, const char *ns, const char *table, bool *gone)
{
	Refresh    *rf = palloc0(sizeof(Refresh));
	bool		ok;

	rf->run = r;
	rf->page_cxt = AllocSetContextCreate(r->cxt, "tms refresh table", ALLOCSET_SMALL_SIZES);
	rf->ns = ns;
	rf->ns_io = tms_namespace_to_io(ns);
	rf->tables = palloc0(sizeof(PageTable));
	rf->tables[0].name = pstrdup(table);
	rf->tables[0].last_commit_ms = -1;
	rf->tables[0].snapshot_id = -1;
	rf->ntables = 1;
	rf->keep = &r->kept;
	pgstat_report_activity(STATE_RUNNING, "tms: refreshing a table");
	ok = refresh_page(rf);
	*gone = ok && rf->tables[0].vanished;
	if (*gone && rf->tables[0].id != 0)
		ok = policy_step(r, table_dropped_step, &rf->tables[0].id);
	MemoryContextDelete(rf->page_cxt);
	return ok;
}

bool
policy_refresh_group(PolicyRun *r)
{
	Refresh    *rf = palloc0(sizeof(Refresh));

	rf->run = r;
	rf->page_cxt = AllocSetContextCreate(r->cxt, "tms refresh page", ALLOCSET_DEFAULT_SIZES);
	if (!policy_step(r, read_group_step, rf))
		return false;
	pgstat_report_activity(STATE_RUNNING, "tms: refreshing the tables of a policy group");
	if (!refresh_walk(rf, NULL, 0))
		return false;
	return policy_step(r, refreshed_step, rf);
}
