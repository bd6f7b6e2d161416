/*-------------------------------------------------------------------------
 *
 * role.h
 *	  The one notion of "who is acting" in tms, and the two identity
 *	  switches tms makes.
 *
 * The acting role is the role whose privileges apply to a call, as
 * postgres_fdw decides whose user mapping to use: GetUserId(), i.e. the
 * current user, which inside a SECURITY DEFINER function is that
 * function's owner.  It is what tms records as the owner of a policy or
 * group and as the requester of a purge, always by OID (regrole), and
 * whose USAGE on a foreign server and whose user mapping a catalog
 * connection uses.
 *
 * tms's own tables belong to the extension's owner.  A public tms
 * function takes the acting role first, then switches to the extension
 * owner to touch those tables (tms_become_extension_owner), passing the
 * acting role on explicitly.  Work done on behalf of a recorded role (a
 * policy's owner, a purge's requester, a task handler's owner) runs with
 * that role as current user (tms_become_role).  Both switches are
 * SECURITY_LOCAL_USERID_CHANGE switches undone by tms_restore_role(), and
 * by transaction abort if an error intervenes.  As the extension owner,
 * tms's statements run with its own search_path, never the caller's: a
 * caller cannot put an operator or function of its own in their way.
 * (User code is called differently: bridge/usercode.h.)
 *
 *-------------------------------------------------------------------------
 */
#ifndef TMS_BRIDGE_ROLE_H
#define TMS_BRIDGE_ROLE_H

#include "postgres.h"

/* What tms_restore_role() needs to undo a switch. */
typedef struct TmsRoleSave
{
	Oid			userid;
	int			sec_context;
	int			nestlevel;		/* of tms's search_path; 0: none was set */
} TmsRoleSave;

/* The acting role (GetUserId()); see the file header. */
extern Oid	tms_acting_role(void);

/*
 * The owner of extension tms in this database.  Raises
 * ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE when the extension is not
 * installed.  Needs a transaction.
 */
extern Oid	tms_extension_owner(void);

/*
 * Switch to the extension owner, saving the current identity in *save, to
 * run tms's own SQL: with search_path = pg_catalog, pg_temp until
 * tms_restore_role() (bridge/usercode.h), whatever the caller's is.
 */
extern void tms_become_extension_owner(TmsRoleSave *save);

/*
 * Switch to role, saving the current identity in *save.  Raises
 * ERRCODE_UNDEFINED_OBJECT when the role no longer exists (what names the
 * object recorded with it, for the message, e.g. "policy \"p\"").
 */
extern void tms_become_role(Oid role, const char *what, TmsRoleSave *save);

/* Undo a switch; switches nest, undone in reverse, within one (sub)transaction. */
extern void tms_restore_role(const TmsRoleSave *save);

#endif							/* TMS_BRIDGE_ROLE_H */
