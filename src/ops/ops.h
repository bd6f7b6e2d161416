/*-------------------------------------------------------------------------
 *
 * ops.h
 *	  What claimed tasks do: the operations of tms (src/ops/).
 *
 * Each area of src/ops has an init function, called once from _PG_init
 * through tms_ops_init(), that defines its settings (tms.<area>_*) and
 * declares its built-in task kinds with sched_register_builtin().  Init
 * functions run in every process that loads tms, preloaded or not, so they
 * must only define things: no shared memory, no catalog access.
 *
 *-------------------------------------------------------------------------
 */
#ifndef TMS_OPS_H
#define TMS_OPS_H

#include "postgres.h"

extern void tms_ops_init(void);

/* one per area; see the files named after them */
extern void tms_purge_init(void);	/* purge.c: async purge of dropped tables */
extern void tms_policy_init(void);	/* policy.c: policies and their evaluation */
extern void tms_roles_init(void);	/* roles.c: roles that own tms objects */
extern void tms_maint_init(void);	/* maint.c: maintenance jobs and local
									 * operations */
extern void tms_delete_init(void);	/* delete.c: the deleter and its pool */
extern void tms_events_init(void);	/* events.c: state-change events, webhooks */
extern void tms_compact_init(void); /* maint_compact.c: compaction on engine
									 * local */

#endif							/* TMS_OPS_H */
