/*-------------------------------------------------------------------------
 *
 * notify_sql.c
 *	  The SQL entry points of state-change events: the row trigger on the
 *	  job and purge tables (tms._state_event, whose work is
 *	  ops_state_event in src/ops/events.c) and the validator of the
 *	  tms_webhook wrapper (tms_webhook_validate in src/bridge/fdw_options.c).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/reloptions.h"
#include "commands/trigger.h"
#include "fmgr.h"

#include "bridge/fdw_options.h"
#include "ops/events.h"

PG_FUNCTION_INFO_V1(tms_state_event);
PG_FUNCTION_INFO_V1(tms_webhook_fdw_validator);

Datum
tms_state_event(PG_FUNCTION_ARGS)
{
	TriggerData *td = (TriggerData *) fcinfo->context;

	if (!CALLED_AS_TRIGGER(fcinfo) || !TRIGGER_FIRED_AFTER(td->tg_event) ||
		!TRIGGER_FIRED_FOR_ROW(td->tg_event) ||
		!(TRIGGER_FIRED_BY_INSERT(td->tg_event) || TRIGGER_FIRED_BY_UPDATE(td->tg_event)))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("tms._state_event() must be an AFTER INSERT or UPDATE row trigger")));
	ops_state_event(td);
	return PointerGetDatum(NULL);
}

Datum
tms_webhook_fdw_validator(PG_FUNCTION_ARGS)
{
	tms_webhook_validate(untransformRelOptions(PG_GETARG_DATUM(0)), PG_GETARG_OID(1));
	PG_RETURN_VOID();
}
