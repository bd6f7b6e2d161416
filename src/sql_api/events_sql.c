/*-------------------------------------------------------------------------
 *
 * events_sql.c
 *	  The trigger that turns the pointer changes of an Iceberg JdbcCatalog
 *	  table of pointers into commit events (tms._jdbc_commit_trigger, put
 *	  on the table by tms.attach_jdbc_catalog).
 *
 * JdbcCatalog keeps one row per table (catalog_name, table_namespace,
 * table_name, metadata_location, previous_metadata_location, and since
 * its schema V1 iceberg_type, 'TABLE' or 'VIEW') and commits by an UPDATE
 * that swaps metadata_location.  An AFTER ROW trigger sees every commit
 * in the committing transaction, so a commit that rolls back makes no
 * event, and one that lands makes its event visible when it does:
 *
 *	INSERT					the table was created (a commit event)
 *	UPDATE of the location	a commit
 *	UPDATE of the name		a rename: the old name dropped, the new one
 *							created
 *	DELETE					the table was dropped
 *
 * Rows of views, and updates that change neither the location nor the
 * name, make no event.  Each event is recorded by tms._jdbc_event, as the
 * extension's owner, in a subtransaction: tms's bookkeeping must never
 * make a catalog's commit fail, so an error there (other than a cancel,
 * a termination or running out of memory: bridge/subxact.h) is reported
 * as a WARNING and the commit goes on; the group is still
 * refreshed every tms.commit_event_resync_interval.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "commands/trigger.h"
#include "executor/spi.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/resowner.h"

#include "bridge/role.h"
#include "bridge/subxact.h"

PG_FUNCTION_INFO_V1(tms_jdbc_commit_trigger);

/*
 * The statement of an event, prepared once per backend: it runs on every
 * commit of the catalog (the plan cache re-plans it if tms._jdbc_event is
 * replaced).
 */
static SPIPlanPtr event_plan = NULL;

/* The columns of a pointer row the events need (NULL: SQL NULL). */
typedef struct PointerRow
{
	char	   *catalog;
	char	   *ns;
	char	   *table;
	char	   *location;
	bool		is_table;		/* iceberg_type NULL or 'TABLE' */
} PointerRow;

static char *
column(HeapTuple tup, TupleDesc desc, const char *name, bool required)
{
	int			att = SPI_fnumber(desc, name);

	if (att <= 0)
	{
		if (required)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_TABLE_DEFINITION),
					 errmsg("table of pointers has no column \"%s\"", name),
					 errhint("tms.attach_jdbc_catalog checked the layout; the table was altered since.")));
		return NULL;
	}
	return SPI_getvalue(tup, desc, att);
}

static void
read_pointer(HeapTuple tup, TupleDesc desc, PointerRow *p)
{
	char	   *type;

	p->catalog = column(tup, desc, "catalog_name", true);
	p->ns = column(tup, desc, "table_namespace", true);
	p->table = column(tup, desc, "table_name", true);
	p->location = column(tup, desc, "metadata_location", true);
	type = column(tup, desc, "iceberg_type", false);
	p->is_table = (type == NULL || pg_strcasecmp(type, "TABLE") == 0);
}

static bool
same(const char *a, const char *b)
{
	if (a == NULL || b == NULL)
		return a == b;
	return strcmp(a, b) == 0;
}

/* One event to record (record_event_body's argument). */
typedef struct EventArg
{
	Oid			relid;
	const PointerRow *p;
	bool		dropped;
} EventArg;

/* tms._jdbc_event for one event, in record_event's subtransaction. */
static void
record_event_body(void *arg)
{
	EventArg   *ev = (EventArg *) arg;
	Oid			relid = ev->relid;
	const PointerRow *p = ev->p;
	bool		dropped = ev->dropped;
	Datum		values[6];
	char		nulls[6] = {' ', ' ', ' ', ' ', ' ', ' '};
	TmsRoleSave save;
	int			rc;

	values[0] = ObjectIdGetDatum(relid);
	if (p->catalog)
		values[1] = CStringGetTextDatum(p->catalog);
	else
		nulls[1] = 'n';
	values[2] = CStringGetTextDatum(p->ns);
	values[3] = CStringGetTextDatum(p->table);
	if (p->location && !dropped)
		values[4] = CStringGetTextDatum(p->location);
	else
		nulls[4] = 'n';
	values[5] = BoolGetDatum(dropped);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	if (event_plan == NULL)
	{
		Oid			types[6] = {OIDOID, TEXTOID, TEXTOID, TEXTOID, TEXTOID, BOOLOID};
		SPIPlanPtr	plan = SPI_prepare("SELECT tms._jdbc_event($1, $2, $3, $4, $5, $6)",
									   6, types);

		if (plan == NULL || SPI_keepplan(plan) != 0)
			elog(ERROR, "could not prepare the commit event: %s",
				 SPI_result_code_string(SPI_result));
		event_plan = plan;
	}
	tms_become_extension_owner(&save);
	rc = SPI_execute_plan(event_plan, values, nulls, false, 0);
	tms_restore_role(&save);
	if (rc != SPI_OK_SELECT)
		elog(ERROR, "could not record a commit event: %s", SPI_result_code_string(rc));
	SPI_finish();
}

/*
 * Record one event; errors become a WARNING (see the file header), but
 * those tms_error_must_propagate names (a cancel, a termination, out of
 * memory), which are raised again (bridge/subxact.h).
 */
static void
record_event(Oid relid, const PointerRow *p, bool dropped)
{
	EventArg	ev;
	ErrorData  *e;

	if (!p->is_table || p->ns == NULL || p->table == NULL)
		return;
	ev.relid = relid;
	ev.p = p;
	ev.dropped = dropped;
	if (!tms_try_subxact(record_event_body, &ev, &e))
	{
		ereport(WARNING,
				(errcode(e->sqlerrcode),
				 errmsg("tms could not record a commit event of table \"%s.%s\": %s",
						p->ns, p->table, e->message),
				 e->detail ? errdetail_internal("%s", e->detail) : 0,
				 errhint("The catalog's commit goes on; tms sees it at the next refresh of the table's groups.")));
		FreeErrorData(e);
	}
}

Datum
tms_jdbc_commit_trigger(PG_FUNCTION_ARGS)
{
	TriggerData *td = (TriggerData *) fcinfo->context;
	TupleDesc	desc;
	Oid			relid;
	PointerRow	oldp,
				newp;

	if (!CALLED_AS_TRIGGER(fcinfo))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("tms._jdbc_commit_trigger() must be called as a trigger")));
	if (!TRIGGER_FIRED_AFTER(td->tg_event) || !TRIGGER_FIRED_FOR_ROW(td->tg_event))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("tms._jdbc_commit_trigger() must be fired AFTER ... FOR EACH ROW")));
	desc = RelationGetDescr(td->tg_relation);
	relid = RelationGetRelid(td->tg_relation);

	if (TRIGGER_FIRED_BY_INSERT(td->tg_event))
	{
		read_pointer(td->tg_trigtuple, desc, &newp);
		record_event(relid, &newp, false);
	}
	else if (TRIGGER_FIRED_BY_DELETE(td->tg_event))
	{
		read_pointer(td->tg_trigtuple, desc, &oldp);
		record_event(relid, &oldp, true);
	}
	else if (TRIGGER_FIRED_BY_UPDATE(td->tg_event))
	{
		read_pointer(td->tg_trigtuple, desc, &oldp);
		read_pointer(td->tg_newtuple, desc, &newp);
		if (!same(oldp.catalog, newp.catalog) || !same(oldp.ns, newp.ns) ||
			!same(oldp.table, newp.table) || oldp.is_table != newp.is_table)
		{
			record_event(relid, &oldp, true);
			record_event(relid, &newp, false);
		}
		else if (!same(oldp.location, newp.location))
			record_event(relid, &newp, false);
	}
	return PointerGetDatum(NULL);
}
