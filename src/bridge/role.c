/*-------------------------------------------------------------------------
 *
 * role.c
 *	  The acting role and the identity switches of tms (role.h).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "catalog/pg_authid.h"
#include "catalog/pg_extension.h"
#include "commands/extension.h"
#include "miscadmin.h"
#include "utils/syscache.h"
#include "access/genam.h"
#include "access/table.h"
#include "utils/fmgroids.h"
#include "utils/rel.h"

#include "bridge/role.h"
#include "bridge/usercode.h"

Oid
tms_acting_role(void)
{
	return GetUserId();
}

Oid
tms_extension_owner(void)
{
	Oid			extoid = get_extension_oid("tms", true);
	Relation	rel;
	ScanKeyData key;
	SysScanDesc scan;
	HeapTuple	tup;
	Oid			owner = InvalidOid;

	if (!OidIsValid(extoid))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("extension \"tms\" is not installed in this database"),
				 errhint("Run CREATE EXTENSION tms;")));
	rel = table_open(ExtensionRelationId, AccessShareLock);
	ScanKeyInit(&key, Anum_pg_extension_oid, BTEqualStrategyNumber, F_OIDEQ,
				ObjectIdGetDatum(extoid));
	scan = systable_beginscan(rel, ExtensionOidIndexId, true, NULL, 1, &key);
	tup = systable_getnext(scan);
	if (HeapTupleIsValid(tup))
		owner = ((Form_pg_extension) GETSTRUCT(tup))->extowner;
	systable_endscan(scan);
	table_close(rel, AccessShareLock);
	if (!OidIsValid(owner))
		elog(ERROR, "could not find the owner of extension \"tms\"");
	return owner;
}

void
tms_become_extension_owner(TmsRoleSave *save)
{
	Oid			owner = tms_extension_owner();

	GetUserIdAndSecContext(&save->userid, &save->sec_context);
	SetUserIdAndSecContext(owner, save->sec_context | SECURITY_LOCAL_USERID_CHANGE);
	save->nestlevel = tms_push_safe_search_path();
}

void
tms_become_role(Oid role, const char *what, TmsRoleSave *save)
{
	if (!SearchSysCacheExists1(AUTHOID, ObjectIdGetDatum(role)))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("the role of %s no longer exists", what),
				 errdetail("The role with OID %u was dropped.", role),
				 errhint("Drop the object, or record it again under an existing role.")));
	GetUserIdAndSecContext(&save->userid, &save->sec_context);
	SetUserIdAndSecContext(role, save->sec_context | SECURITY_LOCAL_USERID_CHANGE);
	save->nestlevel = 0;
}

void
tms_restore_role(const TmsRoleSave *save)
{
	if (save->nestlevel > 0)
		tms_pop_search_path(save->nestlevel);
	SetUserIdAndSecContext(save->userid, save->sec_context);
}
