/*-------------------------------------------------------------------------
 *
 * purge.c
 *	  Async purge of dropped Iceberg tables (placeholder until issue 7).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "ops/ops.h"

void
tms_purge_init(void)
{
}
