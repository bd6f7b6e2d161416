/*-------------------------------------------------------------------------
 *
 * maint_orphan.c
 *	  orphan-cleanup: delete the files under a table's location that no
 *	  metadata reaches and that are older than a threshold (Iceberg's
 *	  DeleteOrphanFiles).
 *
 * The valid set (src/iceberg/maint/orphan.h) holds every file the table's
 * metadata reaches from every snapshot, every metadata file of the
 * metadata log, statistics and partition statistics, and
 * version-hint.text; building it reads every manifest, and any file that
 * cannot be read refuses the run (a file left out of the valid set would
 * be deleted).  Then everything under the table location (or the
 * "location" option, which must lie under it) is listed, page by page:
 * a file the set holds is kept; a file younger than "older-than"
 * (default 3 days; under a day only with "force") is kept, as is one of
 * unknown age; a file whose path matches a valid file but whose scheme or
 * authority differs is a prefix mismatch, handled by
 * "prefix-mismatch-mode" (error, the default: the run fails; ignore:
 * kept; delete: deleted).  The rest is deleted in batches (maint_delete:
 * canonical, below the table location and an allowed location).
 *
 * In mode error nothing may be deleted before the whole listing is known
 * to hold no mismatch, and the listing is not kept in memory: a first
 * pass only looks (mismatches, candidates); only when it found
 * candidates, a second pass deletes, checking every file again.  A
 * table without orphans is listed once.
 *
 * The listing prefix ends with "/", so a neighbour table whose location
 * shares the name's start (".../t" and ".../t2") is never listed.
 *
 * A table with gc.enabled=false is refused before anything is read, as
 * Iceberg's DeleteOrphanFiles refuses it: its location may hold files of
 * other tables.
 *
 * Memory: the valid set, about 24 bytes per reachable file; the listing
 * streams.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/json.h"
#include "utils/timestamp.h"

#include "bridge/catalog.h"
#include "bridge/errors.h"
#include "iceberg/maint/orphan.h"
#include "ops/maint_int.h"

#define DEFAULT_ORPHAN_AGE_MS (INT64CONST(3) * 86400 * 1000)

typedef struct OrphanScan
{
	MaintRun   *run;
	IcebergValidSet *vs;
	bool		count_only;		/* the first pass: look, delete nothing */
	int64		candidates;
	int64		older_than_s;	/* files modified before this are old */
	int64		listed;
	int64		young;
	char	   *mismatch;		/* the first prefix mismatch (mode error) */
} OrphanScan;

static int
orphan_listed(void *arg, const IoObjectInfo *obj)
{
	OrphanScan *sc = arg;
	MaintRun   *run = sc->run;
	IcebergOrphanVerdict v;
	char		extra[128];

	sc->listed++;
	v = iceberg_valid_set_check(sc->vs, obj->uri);
	if (v != ICEBERG_ORPHAN_ORPHAN && v != ICEBERG_ORPHAN_PREFIX_MISMATCH)
		return 0;				/* valid, or no canonical form: keep */
	if (v == ICEBERG_ORPHAN_PREFIX_MISMATCH)
	{
		if (run->opt.prefix_mode == MAINT_PREFIX_IGNORE)
			return 0;
		if (run->opt.prefix_mode == MAINT_PREFIX_ERROR)
		{
			sc->mismatch = strdup(obj->uri);
			return 1;
		}
	}
	if (obj->mtime <= 0 || obj->mtime >= sc->older_than_s)
	{
		sc->young++;
		return 0;
	}
	if (sc->count_only)
	{
		sc->candidates++;
		return 0;
	}
	run->orphans_found++;
	snprintf(extra, sizeof(extra), "\"modified\": \"%s\"",
			 timestamptz_to_str(maint_ms_to_timestamp(obj->mtime * 1000)));
	return maint_callback_delete(run, obj->uri, (int64) obj->size, "orphan", extra) ? 0 : 1;
}

/*
 * The canonical place to list: the table location, or the "location"
 * option when it is the table location or a place under it; NULL when it
 * is not.
 */
static char *
orphan_root(MaintRun *run)
{
	char	   *why = NULL;
	char	   *c;

	if (run->opt.location == NULL)
		return run->location;
	c = tms_location_canonical(run->conn->server, run->opt.location, &why);
	if (c == NULL || (strcmp(c, run->location) != 0 && !io_location_under(c, run->location)))
		return NULL;
	return c;
}

/*
 * tms.run_operation's check of the "location" option against the loaded
 * table: a place outside the table location is refused before a job is
 * recorded, as every other bad option.
 */
void
maint_orphan_check_table(MaintRun *run)
{
	if (orphan_root(run) == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid option \"location\" of operation \"orphan-cleanup\""),
				 errdetail("\"%s\" is not the table location or a place under it (\"%s\").",
						   run->opt.location, run->location),
				 errhint("Give the table location or a place under it, as a full URI.")));
}

void
maint_run_orphan(MaintRun *run)
{
	IcebergOrphanOptions oo;
	IcebergKeyValue *schemes;
	IcebergKeyValue *auths;
	TmsError	err;
	TmsError	ioerr;
	OrphanScan	sc;
	TimestampTz older;
	char	   *root;
	const char *gc;
	int			rc;
	volatile int64 valid = 0;

	memset(&sc, 0, sizeof(sc));
	sc.run = run;

	/* as Iceberg's DeleteOrphanFiles: the files may be another table's */
	gc = iceberg_metadata_property(run->md, "gc.enabled");
	if (gc != NULL && pg_strcasecmp(gc, "true") != 0)
	{
		maint_fail_code(run, MAINT_TERMINAL, ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
						"cannot delete orphan files of table \"%s.%s\": garbage collection is disabled for it (gc.enabled is \"%s\"); deleting files may corrupt other tables",
						run->ns, run->table, gc);
		return;
	}
	older = run->opt.older_than.set ?
		maint_time_resolve(&run->opt.older_than, GetCurrentTimestamp()) :
		maint_ms_to_timestamp(run->now_ms - DEFAULT_ORPHAN_AGE_MS);
	sc.older_than_s = maint_timestamp_to_ms(older) / 1000;

	/* where to look: the table location, or a place under it */
	root = orphan_root(run);
	if (root == NULL)
	{
		maint_fail(run, MAINT_TERMINAL,
				   "option \"location\" (\"%s\") is not the table location or a place under it (\"%s\")",
				   run->opt.location, run->location);
		return;
	}
	if (root[strlen(root) - 1] != '/')
		root = psprintf("%s/", root);

	memset(&oo, 0, sizeof(oo));
	schemes = palloc0(sizeof(IcebergKeyValue) * (run->opt.nequal_schemes + 1));
	for (int i = 0; i < run->opt.nequal_schemes; i++)
	{
		schemes[i].key = run->opt.equal_scheme_from[i];
		schemes[i].value = run->opt.equal_scheme_to[i];
	}
	auths = palloc0(sizeof(IcebergKeyValue) * (run->opt.nequal_authorities + 1));
	for (int i = 0; i < run->opt.nequal_authorities; i++)
	{
		auths[i].key = run->opt.equal_authority_from[i];
		auths[i].value = run->opt.equal_authority_to[i];
	}
	oo.nequal_schemes = run->opt.nequal_schemes;
	oo.equal_schemes = schemes;
	oo.nequal_authorities = run->opt.nequal_authorities;
	oo.equal_authorities = auths;
	oo.mode = run->opt.prefix_mode == MAINT_PREFIX_ERROR ? ICEBERG_PREFIX_ERROR :
		run->opt.prefix_mode == MAINT_PREFIX_IGNORE ? ICEBERG_PREFIX_IGNORE : ICEBERG_PREFIX_DELETE;

	sc.vs = iceberg_valid_set_new(&oo);
	if (sc.vs == NULL)
	{
		maint_fail(run, MAINT_TRANSIENT, "out of memory for the valid file set");
		return;
	}
	/* not a scope: the deletes may create run->deleter (io), kept past here */
	PG_TRY();
	{
		if (!iceberg_valid_set_add_table(sc.vs, &run->fio, run->md, run->metadata_location,
										 run->conn->server->relative_root, &err) ||
			!iceberg_valid_set_seal(sc.vs, &err))
		{
			CHECK_FOR_INTERRUPTS();
			/* a file missing from the valid set would be deleted: refuse */
			maint_fail_iceberg(run, "cannot read every metadata file of the table; nothing was deleted",
							   &err);
		}
		else
		{
			valid = iceberg_valid_set_count(sc.vs);
			sc.count_only = !run->dry_run && run->opt.prefix_mode == MAINT_PREFIX_ERROR;
			for (int pass = 0; pass < 2 && maint_keep_going(run); pass++)
			{
				sc.listed = sc.young = 0;
				run->in_callback = true;
				rc = io_storage_list(run->storage, root, orphan_listed, &sc, &ioerr);
				run->in_callback = false;
				maint_callback_rethrow(run);
				CHECK_FOR_INTERRUPTS();
				if (sc.mismatch)
					maint_fail(run, MAINT_TERMINAL,
							   "\"%s\" matches a file of the table by path but not by scheme or authority; nothing was deleted",
							   sc.mismatch);
				else if (rc != 0 && run->result == MAINT_OK)
					maint_fail_code(run, MAINT_TRANSIENT, tms_error_sqlstate(&ioerr),
									"cannot list \"%s\": %s", root, tms_error_text(&ioerr));
				if (!sc.count_only || sc.candidates == 0)
					break;
				sc.count_only = false;
			}
			if (run->result == MAINT_OK)
				(void) maint_delete_flush(run);
		}
	}
	PG_FINALLY();
	{
		iceberg_valid_set_free(sc.vs);
		free(sc.mismatch);
	}
	PG_END_TRY();
	if (run->dry_run && run->result == MAINT_OK)
		maint_emit(run, "summary", "orphan-cleanup",
				   psprintf("{\"listed\": " INT64_FORMAT ", \"valid\": " INT64_FORMAT
							", \"young\": " INT64_FORMAT ", \"orphans\": " INT64_FORMAT
							", \"older_than\": \"%s\"}",
							sc.listed, valid, sc.young,
							run->orphans_found, timestamptz_to_str(older)));
}
