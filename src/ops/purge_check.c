/*-------------------------------------------------------------------------
 *
 * purge_check.c
 *	  Before a purge drops a table from its catalog: prove that the purge
 *	  can walk it afterwards.
 *
 * Once the catalog entry is gone, the metadata file is the only way to
 * the table's files; a purge that cannot read it leaves them behind for
 * good.  So tms.purge_table (in the caller's session) and the job's drop
 * step (with the table as the catalog answers then) both check, before
 * anything is dropped, that
 *
 *	- the metadata location resolves and lies strictly below one of the
 *	  server's allowed_locations (the walk reads and deletes nowhere else);
 *	- the metadata file can be read through the storage the walk will use
 *	  (the user mapping's keys, the catalog's vended credentials): for
 *	  local files the io layer walks from the allowed root with O_NOFOLLOW,
 *	  so a symbolic link anywhere on the path (a table directory that is a
 *	  link out of the root included) fails the read;
 *	  tms.purge_table reads its head only (up to the identity members, as
 *	  Iceberg writes them first), the job's check reads and parses it
 *	  whole, so a history that does not parse fails the job before the
 *	  drop;
 *	- the file describes the table the catalog described: same uuid, same
 *	  location (a catalog cannot point the purge at another table's file);
 *	- its property gc.enabled is not false: the table's files may belong to
 *	  other tables, and Iceberg's purge (Spark's purgeTable,
 *	  https://iceberg.apache.org/docs/latest/configuration/#table-behavior-properties)
 *	  refuses such a table too.
 *
 * The check returns its verdict as a value (SQLSTATE, message, detail,
 * hint); the caller raises it or records it as the job's failure.  The
 * storage and the metadata read live in an io scope (bridge/plain_memory.h):
 * freed whatever happens, an ERROR (a cancel, a timeout) included; the
 * storage is opened for this check only and kept nowhere.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <string.h>

#include "utils/builtins.h"

#include "bridge/catalog.h"
#include "bridge/errors.h"
#include "bridge/plain_memory.h"
#include "io/util/secret_names.h"
#include "ops/purge_int.h"

/*
 * The first fetch of the metadata file when only its identity is read: the
 * identity members come first, so one small ranged read usually holds
 * them; more follows, doubling, when it does not.
 */
#define PURGE_CHECK_HEAD_FETCH ((uint64_t) 64 * 1024)

/* Fill *out with a refusal; returns false. */
static bool
refuse(PurgeCheck *out, int sqlerrcode, bool transient, const char *message,
	   const char *detail, const char *hint)
{
	out->sqlerrcode = sqlerrcode;
	out->transient = transient;
	strlcpy(out->message, message, sizeof(out->message));
	strlcpy(out->detail, detail ? detail : "", sizeof(out->detail));
	strlcpy(out->hint, hint ? hint : "", sizeof(out->hint));
	return false;
}

/* Does a catalog's vended config hold a credential (the walk uses it then)? */
bool
purge_config_has_secret(const IoKeyValue *config, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (io_secret_key(config[i].key, strlen(config[i].key)))
			return true;
	return false;
}

/*
 * Read the identity of the metadata file at path: with whole, by parsing
 * and validating the file whole (iceberg_metadata_read, what the walk will
 * do), else from the file's head (iceberg_metadata_read_identity: the
 * members up to the identity's last are read and checked, the history
 * after them neither read nor checked).  On success the caller frees *id with
 * iceberg_table_identity_free().
 */
static bool
read_identity(const IcebergFileIO *fio, const char *path, bool whole,
			  IcebergTableIdentity *id, TmsError *err)
{
	IcebergTableMetadata *md;
	const char *gc;

	if (!whole)
		return iceberg_metadata_read_identity(fio, path, id, err);
	memset(id, 0, sizeof(*id));
	if (!iceberg_metadata_read(fio, path, &md, err))
		return false;
	gc = iceberg_metadata_property(md, "gc.enabled");
	id->format_version = md->format_version;
	id->table_uuid = md->table_uuid ? io_strdup(md->table_uuid) : NULL;
	id->location = md->location ? io_strdup(md->location) : NULL;
	id->gc_enabled = gc ? io_strdup(gc) : NULL;
	if ((md->table_uuid && !id->table_uuid) || (md->location && !id->location) ||
		(gc && !id->gc_enabled))
	{
		iceberg_metadata_free(md);
		iceberg_table_identity_free(id);
		return tms_error_set(err, ICEBERG_ERR_OUT_OF_MEMORY, "out of memory"), false;
	}
	iceberg_metadata_free(md);
	return true;
}

/*
 * The check of the file header for table ns.table of server s, as the
 * catalog describes it: its metadata_location, its canonical location and
 * uuid (NULL: none).  creds and the vended config (n pairs; only used when
 * it holds a credential, as the walk does) open the storage.  whole: the
 * file is parsed and validated whole, as the walk will (the job, before it
 * drops the table); else only its head, up to the identity members, is
 * read (tms.purge_table, whose answer must not grow with the table's
 * history; the job checks again, whole, before anything is dropped).  true when the
 * purge can walk it; else false with *out.
 */
bool
purge_check_walkable(const TmsServer *s, const TmsCredentials *creds,
					 const IoKeyValue *vended, size_t n,
					 const char *ns, const char *table,
					 const char *metadata_location, const char *location,
					 const char *uuid, bool whole, PurgeCheck *out)
{
	IoStorage  *storage;
	IcebergTableIdentity md;
	bool		have_md = false;
	bool		ok = true;
	char	   *why = NULL;
	char	   *c;
	TmsIoScope *scope;

	memset(out, 0, sizeof(*out));
	c = tms_location_canonical(s, metadata_location, &why);
	if (c == NULL)
		return refuse(out, ERRCODE_INVALID_PARAMETER_VALUE, false,
					  psprintf("cannot purge table \"%s.%s\": its metadata location cannot be resolved",
							   ns, table),
					  psprintf("The catalog gives the metadata location \"%s\": %s.",
							   metadata_location, why),
					  "A relative location needs the server option relative_path_root.");
	if (!tms_location_allowed(s, c))
		return refuse(out, ERRCODE_INSUFFICIENT_PRIVILEGE, false,
					  psprintf("cannot purge table \"%s.%s\": its metadata file is not below the allowed_locations of server \"%s\"",
							   ns, table, s->name),
					  psprintf("The catalog gives the metadata location \"%s\"; a purge reads and deletes files only strictly below an allowed location, and without its metadata file it cannot find the table's files.",
							   metadata_location),
					  "Add a storage root above it to the server option allowed_locations, or drop the table with tms.drop_table().");

	/* the storage and the metadata live in the scope: an error frees them */
	scope = tms_io_scope_begin();
	{
		TmsError	err;
		TmsError	ierr;
		TmsTableFileIO tio;
		IcebergFileIO fio;
		const char *gc;
		char	   *fl;

		storage = tms_storage_open(s, creds, purge_config_has_secret(vended, n) ? vended : NULL,
								   purge_config_has_secret(vended, n) ? n : 0, &err);
		if (storage == NULL)
			ok = refuse(out, tms_error_sqlstate(&err), false,
						psprintf("cannot purge table \"%s.%s\": its storage cannot be set up",
								 ns, table),
						tms_error_text(&err), NULL);
		else
		{
			tms_table_fileio(&tio, s, storage, &fio);
			/* the identity scan usually stops within the file's head */
			if (!whole)
				tio.state.first_chunk = PURGE_CHECK_HEAD_FETCH;
			if (!(have_md = read_identity(&fio, metadata_location, whole, &md, &ierr)))
			{
				bool		transient = ierr.code == ICEBERG_ERR_IO &&
				ierr.io_code != IO_ERR_FORBIDDEN && ierr.io_code != IO_ERR_NOT_FOUND &&
				ierr.io_code != IO_ERR_UNAUTHORIZED &&
				ierr.io_code != IO_ERR_INVALID_ARGUMENT;

				ok = refuse(out, tms_error_sqlstate(&ierr), transient,
							psprintf("cannot purge table \"%s.%s\": its metadata file cannot be read",
									 ns, table),
							psprintf("Reading \"%s\": %s.", metadata_location,
									 tms_error_text(&ierr)),
							"A purge finds the table's files through its metadata file; a table it cannot read is not dropped.");
			}
			else if (uuid != NULL && md.table_uuid != NULL &&
					 strcmp(uuid, md.table_uuid) != 0)
				ok = refuse(out, ERRCODE_DATA_EXCEPTION, false,
							psprintf("cannot purge table \"%s.%s\": its metadata file describes another table",
									 ns, table),
							psprintf("The metadata file \"%s\" has table uuid %s, the catalog's metadata %s.",
									 metadata_location, md.table_uuid, uuid),
							NULL);
			else if ((fl = tms_location_canonical(s, md.location, NULL)) == NULL ||
					 strcmp(fl, location) != 0)
				ok = refuse(out, ERRCODE_DATA_EXCEPTION, false,
							psprintf("cannot purge table \"%s.%s\": its metadata file describes another table",
									 ns, table),
							psprintf("The metadata file \"%s\" has the location \"%s\", the catalog's metadata \"%s\".",
									 metadata_location, md.location ? md.location : "",
									 location),
							NULL);
			else if ((gc = md.gc_enabled) != NULL &&
					 pg_strcasecmp(gc, "true") != 0)
				ok = refuse(out, ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE, false,
							psprintf("cannot purge table \"%s.%s\": garbage collection is disabled for it",
									 ns, table),
							psprintf("The table property gc.enabled is \"%s\": its files may belong to other tables, and deleting them may corrupt those.",
									 gc),
							"Drop it without deleting files with tms.drop_table(), or set gc.enabled to true if its files are its own.");
		}
		if (have_md)
			iceberg_table_identity_free(&md);
		if (storage)
			io_storage_free(storage);
	}
	tms_io_scope_end(scope);
	return ok;
}
