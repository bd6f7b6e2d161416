/*-------------------------------------------------------------------------
 *
 * errors.c
 *	  io and iceberg error values as PostgreSQL errors (errors.h).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"

#include "bridge/errors.h"

int
tms_io_sqlstate(IoErrorCode code)
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

int
tms_iceberg_sqlstate(const IcebergError *err)
{
	switch (err->code)
	{
		case ICEBERG_ERR_MALFORMED:
			return ERRCODE_DATA_EXCEPTION;
		case ICEBERG_ERR_UNSUPPORTED:
			return ERRCODE_FEATURE_NOT_SUPPORTED;
		case ICEBERG_ERR_IO:
			return err->io_code != IO_OK ? tms_io_sqlstate(err->io_code) : ERRCODE_IO_ERROR;
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

void
tms_io_ereport(const IoError *err)
{
	CHECK_FOR_INTERRUPTS();
	ereport(ERROR,
			(errcode(tms_io_sqlstate(err->code)),
			 errmsg("%s", err->message),
			 err->detail[0] ? errdetail("%s", err->detail) : 0,
			 err->code == IO_ERR_CONFLICT ?
			 errhint("Another writer changed the table; reload its metadata and retry.") :
			 err->code == IO_ERR_COMMIT_STATE_UNKNOWN ?
			 errhint("The commit may or may not have been applied; reload the table and check before retrying.") :
			 err->code == IO_ERR_TIMEOUT ?
			 errhint("The server options \"connect_timeout\" and \"request_timeout\" set the limits.") :
			 err->code == IO_ERR_UNAUTHORIZED ?
			 errhint("Check the credentials of the user mapping: \"credential\" or \"token\" (OAuth2), or the AWS keys that sign requests (SigV4).") :
			 err->code == IO_ERR_TOO_LARGE ?
			 errhint("The settings \"tms.max_response_size\" and \"tms.max_json_memory\" set the limits.") :
			 err->code == IO_ERR_UNSUPPORTED ?
			 errhint("The catalog does not offer this operation.") : 0));
	pg_unreachable();
}

void
tms_iceberg_ereport(const IcebergError *err)
{
	CHECK_FOR_INTERRUPTS();
	ereport(ERROR,
			(errcode(tms_iceberg_sqlstate(err)),
			 errmsg("%s", err->message),
			 err->detail[0] ? errdetail("%s", err->detail) : 0));
	pg_unreachable();
}

char *
tms_io_error_text(const IoError *err)
{
	if (err->detail[0])
		return psprintf("%s: %s", err->message, err->detail);
	return pstrdup(err->message);
}

char *
tms_iceberg_error_text(const IcebergError *err)
{
	if (err->detail[0])
		return psprintf("%s: %s", err->message, err->detail);
	return pstrdup(err->message);
}
