/*-------------------------------------------------------------------------
 *
 * errors.c
 *	  The error value of the plain-C layers as a PostgreSQL error
 *	  (errors.h): one switch per layer's codes, chosen by the code's
 *	  domain.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"

#include "bridge/errors.h"
#include "engine/statement.h"

static int
io_sqlstate(IoErrorCode code)
{
	switch (code)
	{
		case IO_OK:
			return ERRCODE_INTERNAL_ERROR;
		case IO_ERR_INVALID_ARGUMENT:
			return ERRCODE_INVALID_PARAMETER_VALUE;
		case IO_ERR_OUT_OF_MEMORY:
			return ERRCODE_OUT_OF_MEMORY;
		case IO_ERR_INTERRUPTED:
			return ERRCODE_QUERY_CANCELED;
		case IO_ERR_TIMEOUT:
			return ERRCODE_CONNECTION_FAILURE;
		case IO_ERR_CONNECT:
		case IO_ERR_TLS:
			return ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION;
		case IO_ERR_PROTOCOL:
			return ERRCODE_PROTOCOL_VIOLATION;
		case IO_ERR_TOO_LARGE:
			return ERRCODE_PROGRAM_LIMIT_EXCEEDED;
		case IO_ERR_BAD_REQUEST:
			return ERRCODE_INVALID_PARAMETER_VALUE;
		case IO_ERR_UNAUTHORIZED:
			return ERRCODE_INVALID_AUTHORIZATION_SPECIFICATION;
		case IO_ERR_FORBIDDEN:
			return ERRCODE_INSUFFICIENT_PRIVILEGE;
		case IO_ERR_NOT_FOUND:
			return ERRCODE_UNDEFINED_OBJECT;
		case IO_ERR_NO_SUCH_NAMESPACE:
			return ERRCODE_INVALID_SCHEMA_NAME;
		case IO_ERR_NO_SUCH_TABLE:
			return ERRCODE_UNDEFINED_TABLE;
		case IO_ERR_ALREADY_EXISTS:
			return ERRCODE_DUPLICATE_OBJECT;
		case IO_ERR_CONFLICT:
			return ERRCODE_T_R_SERIALIZATION_FAILURE;
		case IO_ERR_COMMIT_STATE_UNKNOWN:
			return ERRCODE_TRANSACTION_RESOLUTION_UNKNOWN;
		case IO_ERR_UNAVAILABLE:
			return ERRCODE_CANNOT_CONNECT_NOW;
		case IO_ERR_SERVER:
			return ERRCODE_FDW_ERROR;
		case IO_ERR_UNSUPPORTED:
			/* the catalog, not tms, does not offer the operation */
			return ERRCODE_FDW_ERROR;
		case IO_ERR_STORAGE:
			return ERRCODE_IO_ERROR;
		case IO_ERR_INTERNAL:
			return ERRCODE_INTERNAL_ERROR;
	}
	return ERRCODE_INTERNAL_ERROR;
}

static int
iceberg_sqlstate(const TmsError *err)
{
	switch (err->code)
	{
		case ICEBERG_ERR_MALFORMED:
			return ERRCODE_DATA_EXCEPTION;
		case ICEBERG_ERR_UNSUPPORTED:
			return ERRCODE_FEATURE_NOT_SUPPORTED;
		case ICEBERG_ERR_IO:
			return err->io_code != IO_OK ? io_sqlstate(err->io_code) : ERRCODE_IO_ERROR;
		case ICEBERG_ERR_NOT_FOUND:
			return ERRCODE_UNDEFINED_OBJECT;
		case ICEBERG_ERR_LIMIT:
			return ERRCODE_PROGRAM_LIMIT_EXCEEDED;
		case ICEBERG_ERR_OUT_OF_MEMORY:
			return ERRCODE_OUT_OF_MEMORY;
		case ICEBERG_ERR_CANCELLED:
			return ERRCODE_QUERY_CANCELED;
		case ICEBERG_ERR_INVALID_ARGUMENT:
			return ERRCODE_INVALID_PARAMETER_VALUE;
		case ICEBERG_ERR_CONFLICT:
			/* the table moved under a plan: plan again */
			return ERRCODE_T_R_SERIALIZATION_FAILURE;
		default:
			return ERRCODE_INTERNAL_ERROR;
	}
}

static int
engine_sqlstate(EngineErrorCode code)
{
	switch (code)
	{
		case ENGINE_OK:
			return ERRCODE_INTERNAL_ERROR;
		case ENGINE_ERR_UNKNOWN_OPERATION:
		case ENGINE_ERR_UNKNOWN_OPTION:
		case ENGINE_ERR_INVALID_VALUE:
			return ERRCODE_INVALID_PARAMETER_VALUE;
		case ENGINE_ERR_UNSUPPORTED:
			return ERRCODE_FEATURE_NOT_SUPPORTED;
		case ENGINE_ERR_INVALID_NAME:
			return ERRCODE_INVALID_NAME;
		case ENGINE_ERR_INVALID_RESULT:
			return ERRCODE_DATA_EXCEPTION;
		case ENGINE_ERR_OUT_OF_MEMORY:
			return ERRCODE_OUT_OF_MEMORY;
	}
	return ERRCODE_INTERNAL_ERROR;
}

int
tms_error_sqlstate(const TmsError *err)
{
	switch (tms_error_domain(err->code))
	{
		case TMS_ERROR_NONE:
			break;
		case TMS_ERROR_IO:
			return io_sqlstate((IoErrorCode) err->code);
		case TMS_ERROR_ICEBERG:
			return iceberg_sqlstate(err);
		case TMS_ERROR_ENGINE:
			return engine_sqlstate((EngineErrorCode) err->code);
	}
	return ERRCODE_INTERNAL_ERROR;
}

/* The hint of an io error that has none of its own. */
static const char *
io_hint(IoErrorCode code)
{
	switch (code)
	{
		case IO_ERR_CONFLICT:
			return "Another writer changed the table; reload its metadata and retry.";
		case IO_ERR_COMMIT_STATE_UNKNOWN:
			return "The commit may or may not have been applied; reload the table and check before retrying.";
		case IO_ERR_TIMEOUT:
			return "The server options \"connect_timeout\" and \"request_timeout\" set the limits.";
		case IO_ERR_UNAUTHORIZED:
			return "Check the credentials of the user mapping: \"credential\" or \"token\" (OAuth2), or the AWS keys that sign requests (SigV4).";
		case IO_ERR_TOO_LARGE:
			return "The settings \"tms.max_response_size\" and \"tms.max_json_memory\" set the limits.";
		case IO_ERR_UNSUPPORTED:
			return "The catalog does not offer this operation.";
		default:
			return NULL;
	}
}

void
tms_error_ereport(const TmsError *err)
{
	const char *hint = err->hint[0] ? err->hint : NULL;

	if (hint == NULL && tms_error_domain(err->code) == TMS_ERROR_IO)
		hint = io_hint((IoErrorCode) err->code);
	CHECK_FOR_INTERRUPTS();
	ereport(ERROR,
			(errcode(tms_error_sqlstate(err)),
			 errmsg("%s", err->message),
			 err->detail[0] ? errdetail("%s", err->detail) : 0,
			 hint ? errhint("%s", hint) : 0));
	pg_unreachable();
}

char *
tms_error_text(const TmsError *err)
{
	if (err->detail[0])
		return psprintf("%s: %s", err->message, err->detail);
	return pstrdup(err->message);
}
