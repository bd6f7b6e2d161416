/*-------------------------------------------------------------------------
 *
 * roles.c
 *	  Roles that own tms objects, handled as PostgreSQL handles owned
 *	  objects: DROP ROLE is refused while a role owns an object group or a
 *	  policy, is granted a group, or requested a purge that is still
 *	  running; DROP OWNED BY drops the role's policies and groups and its
 *	  grants; REASSIGN OWNED BY gives them, and its running purges, to
 *	  another role.
 *
 * tms records roles by OID (regrole) in its own tables, where PostgreSQL's
 * shared dependencies cannot see them, so a ProcessUtility hook does it.
 * It acts in the database where the command runs, in the command's
 * transaction, before PostgreSQL's own processing (a refused command
 * rolls everything back), and only where tms is loaded: with tms in
 * shared_preload_libraries, in every session.  A role dropped where tms
 * was not loaded leaves its objects ownerless; the policy evaluation then
 * fails with "the role of policy ... no longer exists" instead of acting
 * as anyone (doc/security.md).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "commands/extension.h"
#include "executor/spi.h"
#include "nodes/parsenodes.h"
#include "tcop/utility.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/builtins.h"

#include "bridge/role.h"
#include "ops/ops.h"

static ProcessUtility_hook_type prev_utility_hook = NULL;

/* The OIDs of a list of RoleSpecs (missing ones left out when missing_ok). */
static Datum
role_oids(List *roles, bool missing_ok)
{
	Datum	   *oids = palloc(sizeof(Datum) * Max(list_length(roles), 1));
	int			n = 0;
	ListCell   *lc;

	foreach(lc, roles)
	{
		Oid			r = get_rolespec_oid(lfirst(lc), missing_ok);

		if (OidIsValid(r))
			oids[n++] = ObjectIdGetDatum(r);
	}
	return PointerGetDatum(construct_array(oids, n, OIDOID, sizeof(Oid), true, TYPALIGN_INT));
}

static void
exec(const char *sql, Datum *args, int nargs, Oid *types, int expect)
{
	int			rc = SPI_execute_with_args(sql, nargs, types, args, NULL, false, 0);

	if (rc != expect)
		elog(ERROR, "tms role statement failed (%s): %s", SPI_result_code_string(rc), sql);
}

/* What the roles own in tms, one line per object; NULL when nothing. */
static const char *owned_sql =
"SELECT string_agg(d, E'\\n' ORDER BY d) FROM ("
"  SELECT format('owner of tms object group %s', name) AS d"
"    FROM tms.object_groups WHERE owner = ANY ($1)"
"  UNION ALL"
"  SELECT format('privileges for tms object group %s', name)"
"    FROM tms.object_groups WHERE grantees && $1::regrole[]"
"  UNION ALL"
"  SELECT format('owner of tms policy %s', name)"
"    FROM tms.maintenance_policies WHERE owner = ANY ($1)"
"  UNION ALL"
"  SELECT format('requester of tms purge job %s (%s)', id, state)"
"    FROM tms.iceberg_cleanup_job"
"   WHERE requested_by = ANY ($1) AND state IN ('PENDING', 'RUNNING')"
") o";

static void
check_drop_role(DropRoleStmt *stmt)
{
	Datum		roles = role_oids(stmt->roles, stmt->missing_ok);
	Oid			types[1] = {OIDARRAYOID};
	bool		isnull;
	Datum		d;

	exec(owned_sql, &roles, 1, types, SPI_OK_SELECT);
	d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
	if (!isnull)
		ereport(ERROR,
				(errcode(ERRCODE_DEPENDENT_OBJECTS_STILL_EXIST),
				 errmsg("role cannot be dropped because some tms objects depend on it"),
				 errdetail("%s", TextDatumGetCString(d)),
				 errhint("Drop them with DROP OWNED BY or give them to another role with REASSIGN OWNED BY; a running purge must end first.")));
}

static void
drop_owned(DropOwnedStmt *stmt)
{
	Datum		roles = role_oids(stmt->roles, false);
	Oid			types[1] = {OIDARRAYOID};
	bool		isnull;
	Datum		d;

	/* groups of these roles used by policies of other roles */
	exec("SELECT string_agg(format('policy %s of role %s uses object group %s',"
		 "                         p.name, p.owner, g.name), E'\\n')"
		 "  FROM tms.maintenance_policies p JOIN tms.object_groups g ON g.id = p.group_id"
		 " WHERE g.owner = ANY ($1) AND NOT p.owner = ANY ($1)",
		 &roles, 1, types, SPI_OK_SELECT);
	d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
	if (!isnull && stmt->behavior != DROP_CASCADE)
		ereport(ERROR,
				(errcode(ERRCODE_DEPENDENT_OBJECTS_STILL_EXIST),
				 errmsg("cannot drop the tms object groups of these roles because other objects depend on them"),
				 errdetail("%s", TextDatumGetCString(d)),
				 errhint("Use DROP OWNED ... CASCADE to drop the dependent policies too.")));
	exec("DELETE FROM tms.scheduled_tasks t USING tms.maintenance_policies p"
		 " WHERE t.task_name = 'policy-expand' AND t.task_instance = p.id::text"
		 "   AND NOT t.picked"
		 "   AND (p.owner = ANY ($1) OR p.group_id IN"
		 "        (SELECT id FROM tms.object_groups WHERE owner = ANY ($1)))",
		 &roles, 1, types, SPI_OK_DELETE);
	exec("DELETE FROM tms.maintenance_policies"
		 " WHERE owner = ANY ($1)"
		 "    OR group_id IN (SELECT id FROM tms.object_groups WHERE owner = ANY ($1))",
		 &roles, 1, types, SPI_OK_DELETE);
	exec("DELETE FROM tms.object_groups WHERE owner = ANY ($1)",
		 &roles, 1, types, SPI_OK_DELETE);
	exec("UPDATE tms.object_groups"
		 "   SET grantees = ARRAY(SELECT r FROM unnest(grantees) r WHERE NOT r = ANY ($1))"
		 " WHERE grantees && $1::regrole[]",
		 &roles, 1, types, SPI_OK_UPDATE);
}

static void
reassign_owned(ReassignOwnedStmt *stmt)
{
	Datum		args[2];
	Oid			types[2] = {OIDARRAYOID, OIDOID};

	args[0] = role_oids(stmt->roles, false);
	args[1] = ObjectIdGetDatum(get_rolespec_oid(stmt->newrole, false));
	exec("UPDATE tms.object_groups SET owner = $2 WHERE owner = ANY ($1)",
		 args, 2, types, SPI_OK_UPDATE);
	exec("UPDATE tms.maintenance_policies SET owner = $2 WHERE owner = ANY ($1)",
		 args, 2, types, SPI_OK_UPDATE);
	exec("UPDATE tms.iceberg_cleanup_job SET requested_by = $2"
		 " WHERE requested_by = ANY ($1) AND state IN ('PENDING', 'RUNNING')",
		 args, 2, types, SPI_OK_UPDATE);
}

static void
tms_utility_hook(PlannedStmt *pstmt, const char *queryString, bool readOnlyTree,
				 ProcessUtilityContext context, ParamListInfo params,
				 QueryEnvironment *queryEnv, DestReceiver *dest, QueryCompletion *qc)
{
	Node	   *parsetree = pstmt->utilityStmt;

	if ((IsA(parsetree, DropRoleStmt) || IsA(parsetree, DropOwnedStmt) ||
		 IsA(parsetree, ReassignOwnedStmt)) &&
		IsTransactionState() && OidIsValid(get_extension_oid("tms", true)))
	{
		TmsRoleSave save;

		if (SPI_connect() != SPI_OK_CONNECT)
			elog(ERROR, "SPI_connect failed");
		tms_become_extension_owner(&save);
		if (IsA(parsetree, DropRoleStmt))
			check_drop_role((DropRoleStmt *) parsetree);
		else if (IsA(parsetree, DropOwnedStmt))
			drop_owned((DropOwnedStmt *) parsetree);
		else
			reassign_owned((ReassignOwnedStmt *) parsetree);
		tms_restore_role(&save);
		SPI_finish();
	}
	if (prev_utility_hook)
		prev_utility_hook(pstmt, queryString, readOnlyTree, context, params,
						  queryEnv, dest, qc);
	else
		standard_ProcessUtility(pstmt, queryString, readOnlyTree, context, params,
								queryEnv, dest, qc);
}

/*
 * Install the hook; from _PG_init, through tms_ops_init().
 */
void
tms_roles_init(void)
{
	prev_utility_hook = ProcessUtility_hook;
	ProcessUtility_hook = tms_utility_hook;
}
