/*-------------------------------------------------------------------------
 *
 * commit_request.c
 *	  CommitTableRequest bodies for the REST catalog (see commit_request.h).
 *
 * Rules: plain C; jansson documents are built with json_pack (never
 * json_object(): it clashes with PostgreSQL's symbol, see
 * src/io/util/jsonmem.h) and the text jansson returns is copied to malloc'd
 * memory (io_malloc), so the caller frees it with io_free().
 *
 * src/iceberg/write/commit_request.c
 *
 *-------------------------------------------------------------------------
 */
#include "iceberg/write/commit_request.h"
#include "iceberg/iceberg_internal.h"
#include "io/util/jsonmem.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

/* Steals v into arr; false (and v freed) on failure. */
static bool
append(json_t *arr, json_t *v)
{
	return v != NULL && json_array_append_new(arr, v) == 0;
}

/* Steals v into obj under key; false on failure. */
static bool
set(json_t *obj, const char *key, json_t *v)
{
	return v != NULL && json_object_set_new(obj, key, v) == 0;
}

/* A snapshot id, or JSON null for -1. */
static json_t *
id_or_null(int64_t id)
{
	return id < 0 ? json_null() : json_integer((json_int_t) id);
}

/* The requirements every body carries. */
static json_t *
requirements(const char *uuid, const char *ref, int64_t snapshot_id)
{
	json_t	   *req = json_array();

	if (req == NULL)
		return NULL;
	if (uuid != NULL &&
		!append(req, json_pack("{s:s, s:s}", "type", "assert-table-uuid",
							   "uuid", uuid)))
		goto fail;
	if (!append(req, json_pack("{s:s, s:s, s:o}", "type", "assert-ref-snapshot-id",
							   "ref", ref, "snapshot-id", id_or_null(snapshot_id))))
		goto fail;
	return req;
fail:
	json_decref(req);
	return NULL;
}

/* {requirements, updates} as malloc'd text; consumes both. */
static char *
finish(json_t *req, json_t *upd, TmsError *err)
{
	json_t	   *body;
	char	   *text;
	char	   *r;

	if (req == NULL || upd == NULL)
	{
		json_decref(req);
		json_decref(upd);
		tms_error_set(err, ICEBERG_ERR_INVALID_ARGUMENT,
					  "cannot build the commit request");
		tms_error_detail(err, "A string is not valid UTF-8, or memory ran out.");
		return NULL;
	}
	body = json_pack("{s:o, s:o}", "requirements", req, "updates", upd);
	if (body == NULL)
	{
		tms_error_set(err, ICEBERG_ERR_OUT_OF_MEMORY, "out of memory");
		return NULL;
	}
	text = json_dumps(body, JSON_COMPACT);
	json_decref(body);
	if (text == NULL)
	{
		tms_error_set(err, ICEBERG_ERR_OUT_OF_MEMORY, "out of memory");
		return NULL;
	}
	r = io_strdup(text);
	io_json_free(text);
	if (r == NULL)
		tms_error_set(err, ICEBERG_ERR_OUT_OF_MEMORY, "out of memory");
	return r;
}

char *
iceberg_commit_expire(const char *table_uuid, int64_t main_snapshot_id,
					  const IcebergExpirePlan *plan, TmsError *err)
{
	json_t	   *upd;
	json_t	   *ids;
	json_t	   *req;
	int			i;

	tms_error_clear(err);
	if (plan == NULL || plan->nexpired < 0 || plan->nremoved_refs < 0 ||
		(plan->nexpired > 0 && plan->expired == NULL) ||
		(plan->nremoved_refs > 0 && plan->removed_refs == NULL))
	{
		tms_error_set(err, ICEBERG_ERR_INVALID_ARGUMENT, "invalid expiry plan");
		return NULL;
	}
	if (plan->nexpired == 0 && plan->nremoved_refs == 0)
	{
		tms_error_set(err, ICEBERG_ERR_INVALID_ARGUMENT,
					  "nothing to commit: the expiry removes no snapshot and no ref");
		return NULL;
	}
	upd = json_array();
	if (upd == NULL)
		return finish(NULL, NULL, err);
	for (i = 0; i < plan->nremoved_refs; i++)
	{
		if (plan->removed_refs[i] == NULL ||
			strcmp(plan->removed_refs[i], "main") == 0 ||
			!append(upd, json_pack("{s:s, s:s}", "action", "remove-snapshot-ref",
								   "ref-name", plan->removed_refs[i])))
		{
			json_decref(upd);
			return finish(NULL, NULL, err);
		}
	}
	if (plan->nexpired > 0)
	{
		ids = json_array();
		for (i = 0; ids != NULL && i < plan->nexpired; i++)
			if (!append(ids, json_integer((json_int_t) plan->expired[i])))
			{
				json_decref(ids);
				ids = NULL;
			}
		if (!append(upd, json_pack("{s:s, s:o}", "action", "remove-snapshots",
								   "snapshot-ids", ids)))
		{
			json_decref(upd);
			return finish(NULL, NULL, err);
		}
	}
	req = requirements(table_uuid, "main", main_snapshot_id);
	/* a removed ref must still point where the plan saw it */
	for (i = 0; req != NULL && plan->removed_ref_snapshot_ids != NULL &&
		 i < plan->nremoved_refs; i++)
		if (!append(req, json_pack("{s:s, s:s, s:o}", "type", "assert-ref-snapshot-id",
								   "ref", plan->removed_refs[i], "snapshot-id",
								   id_or_null(plan->removed_ref_snapshot_ids[i]))))
		{
			json_decref(req);
			req = NULL;
		}
	return finish(req, upd, err);
}

char *
iceberg_commit_snapshot(const char *table_uuid, const char *ref,
						const IcebergNewSnapshot *snap, TmsError *err)
{
	json_t	   *summary,
			   *js,
			   *upd;
	int			i;

	tms_error_clear(err);
	if (ref == NULL || ref[0] == '\0' || snap == NULL || snap->snapshot_id < 0 ||
		snap->manifest_list == NULL || snap->operation == NULL ||
		snap->timestamp_ms < 0 || snap->sequence_number < 0 ||
		snap->nsummary < 0 || (snap->nsummary > 0 && snap->summary == NULL))
	{
		tms_error_set(err, ICEBERG_ERR_INVALID_ARGUMENT, "invalid new snapshot");
		tms_error_detail(err, "A snapshot needs a ref, a non-negative id, timestamp and sequence number, a manifest list and an operation.");
		return NULL;
	}
	summary = json_pack("{s:s}", "operation", snap->operation);
	for (i = 0; summary != NULL && i < snap->nsummary; i++)
	{
		const IcebergKeyValue *kv = &snap->summary[i];

		if (kv->key == NULL || kv->value == NULL)
		{
			json_decref(summary);
			summary = NULL;
		}
		else if (strcmp(kv->key, "operation") != 0 &&
				 !set(summary, kv->key, json_string(kv->value)))
		{
			json_decref(summary);
			summary = NULL;
		}
	}
	js = json_pack("{s:I, s:I, s:s, s:o}",
				   "snapshot-id", (json_int_t) snap->snapshot_id,
				   "timestamp-ms", (json_int_t) snap->timestamp_ms,
				   "manifest-list", snap->manifest_list,
				   "summary", summary);
	if (js != NULL && snap->parent_snapshot_id >= 0 &&
		!set(js, "parent-snapshot-id", json_integer((json_int_t) snap->parent_snapshot_id)))
		goto fail;
	if (js != NULL && snap->sequence_number > 0 &&
		!set(js, "sequence-number", json_integer((json_int_t) snap->sequence_number)))
		goto fail;
	if (js != NULL && snap->schema_id >= 0 &&
		!set(js, "schema-id", json_integer((json_int_t) snap->schema_id)))
		goto fail;
	/* https://iceberg.apache.org/spec/#snapshot-row-ids */
	if (js != NULL && snap->row_lineage &&
		(!set(js, "first-row-id", json_integer((json_int_t) snap->first_row_id)) ||
		 !set(js, "added-rows", json_integer((json_int_t) snap->added_rows))))
		goto fail;
	upd = json_array();
	if (upd == NULL ||
		!append(upd, json_pack("{s:s, s:o}", "action", "add-snapshot", "snapshot", js)) ||
		!append(upd, json_pack("{s:s, s:s, s:s, s:I}", "action", "set-snapshot-ref",
							   "ref-name", ref, "type", "branch",
							   "snapshot-id", (json_int_t) snap->snapshot_id)))
	{
		json_decref(upd);
		return finish(NULL, NULL, err);
	}
	return finish(requirements(table_uuid, ref, snap->parent_snapshot_id), upd, err);
fail:
	json_decref(js);
	return finish(NULL, NULL, err);
}
