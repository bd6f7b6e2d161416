/*-------------------------------------------------------------------------
 *
 * policy.c
 *	  Policies and the evaluation cycle (placeholder until issue 8).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "ops/ops.h"

void
tms_policy_init(void)
{
}
