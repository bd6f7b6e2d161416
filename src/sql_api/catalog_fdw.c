/*-------------------------------------------------------------------------
 *
 * catalog_fdw.c
 *	  The validators of the tms_iceberg and tms_engine foreign-data
 *	  wrappers: they unpack their arguments for tms_iceberg_validate() and
 *	  tms_engine_validate() (src/bridge/fdw_options.c), where every option is
 *	  defined and checked.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/reloptions.h"
#include "fmgr.h"

#include "bridge/fdw_options.h"

PG_FUNCTION_INFO_V1(tms_iceberg_fdw_validator);
PG_FUNCTION_INFO_V1(tms_engine_fdw_validator);

Datum
tms_iceberg_fdw_validator(PG_FUNCTION_ARGS)
{
	tms_iceberg_validate(untransformRelOptions(PG_GETARG_DATUM(0)), PG_GETARG_OID(1));
	PG_RETURN_VOID();
}

Datum
tms_engine_fdw_validator(PG_FUNCTION_ARGS)
{
	tms_engine_validate(untransformRelOptions(PG_GETARG_DATUM(0)), PG_GETARG_OID(1));
	PG_RETURN_VOID();
}
