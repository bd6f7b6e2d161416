/*-------------------------------------------------------------------------
 *
 * engine_test.c
 *		Unit tests of src/engine: the exact statement of every (engine,
 *		operation) with no options and with every option; hostile names
 *		that must not change a statement's structure; every validation
 *		error; placeholders; big integers; counts read from the result
 *		rows of each procedure; "engine-resources" as Livy session
 *		members and Gravitino spark_* jobConf, and each of its refusals.
 *		Built and run by "make unit".
 *		Prints each failure and "N passed, M failed" last; the exit
 *		status is non-zero when M > 0 (the harness: test/unit/unit.h).
 *
 * test/unit/engine_test.c
 *
 *-------------------------------------------------------------------------
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/statement_int.h"
#include "unit.h"

/* 2026-11-08T00:00:00Z */
#define NOW INT64_C(1794096000000)

static const char *const ns1[] = {"sales"};
static const EngineTarget T = {"lake", ns1, 1, "orders"};

/* Build and compare the text exactly (want NULL: expect an error). */
static void
build_is(int line, EngineType type, const char *op, const EngineTarget *t,
		 const char *json, const char *want)
{
	EngineStatement st;
	TmsError	err;

	if (engine_statement_build(type, op, t, json, "tms-job-7", NOW, &st, &err) != 0)
	{
		FAIL("line %d: unexpected error: %s (%s) [%s]", line, err.message,
			 err.detail, err.hint);
		return;
	}
	if (st.text == NULL || strcmp(st.text, want) != 0)
	{
		FAIL("line %d:\n  got:  %s\n  want: %s", line,
			 st.text ? st.text : "(null)", want);
	}
	engine_statement_free(&st);
}
#define BUILD_IS(type, op, t, json, want) build_is(__LINE__, type, op, t, json, want)

/* Expect an error of code whose message (or detail, hint) contains want. */
static void
build_err(int line, EngineType type, const char *op, const EngineTarget *t,
		  const char *json, int code, const char *want_msg,
		  const char *want_detail)
{
	EngineStatement st;
	TmsError	err;

	memset(&err, 0, sizeof(err));
	if (engine_statement_build(type, op, t, json, "tms-job-7", NOW, &st, &err) == 0)
	{
		FAIL("line %d: built \"%s\", expected an error", line, st.text);
		engine_statement_free(&st);
		return;
	}
	if (st.text != NULL || err.code != code || strstr(err.message, want_msg) == NULL ||
		(want_detail && strstr(err.detail, want_detail) == NULL &&
		 strstr(err.hint, want_detail) == NULL))
	{
		FAIL("line %d: got code %d \"%s\" (%s) [%s], want code %d \"%s\" / \"%s\"",
			 line, err.code, err.message, err.detail, err.hint, code, want_msg,
			 want_detail ? want_detail : "");
	}
	/* the check alone says the same when no target is involved */
	if (code != ENGINE_ERR_INVALID_NAME && t == &T)
	{
		TmsError	e2;

		if (engine_options_check(type, op, json, &e2) == 0 && code != ENGINE_ERR_INVALID_VALUE)
		{
			FAIL("line %d: engine_options_check accepted it", line);
		}
	}
}
#define BUILD_ERR(type, op, t, json, code, msg, detail) \
	build_err(__LINE__, type, op, t, json, code, msg, detail)

#define LIVY ENGINE_TYPE_LIVY
#define TRINO ENGINE_TYPE_TRINO
#define GRAV ENGINE_TYPE_GRAVITINO

static void
test_names(void)
{
	CHECK(engine_type_from_name("livy") == LIVY);
	CHECK(engine_type_from_name("trino") == TRINO);
	CHECK(engine_type_from_name("gravitino") == GRAV);
	CHECK(engine_type_from_name("Livy") == ENGINE_TYPE_UNKNOWN);
	CHECK(engine_type_from_name(NULL) == ENGINE_TYPE_UNKNOWN);
	CHECK(strcmp(engine_type_name(TRINO), "trino") == 0);
	CHECK(engine_type_name(ENGINE_TYPE_UNKNOWN) == NULL);
	CHECK(engine_op_from_name("orphan-cleanup") == ENGINE_OP_ORPHAN_CLEANUP);
	CHECK(engine_op_from_name("vacuum") == ENGINE_OP_UNKNOWN);
	CHECK(strcmp(engine_op_name(ENGINE_OP_MANIFEST_REWRITE), "manifest-rewrite") == 0);
	CHECK(engine_supports(LIVY, ENGINE_OP_POSITION_DELETE_REWRITE));
	CHECK(!engine_supports(TRINO, ENGINE_OP_POSITION_DELETE_REWRITE));
	CHECK(!engine_supports(GRAV, ENGINE_OP_ORPHAN_CLEANUP));
	CHECK(!engine_supports(GRAV, ENGINE_OP_POSITION_DELETE_REWRITE));
	CHECK(engine_supports(TRINO, ENGINE_OP_MANIFEST_REWRITE));
	CHECK(strcmp(engine_allowed_options(TRINO, ENGINE_OP_SNAPSHOT_EXPIRY), "older-than") == 0);
	CHECK(strcmp(engine_allowed_options(TRINO, ENGINE_OP_POSITION_DELETE_REWRITE), "") == 0);
	CHECK(strstr(engine_allowed_options(LIVY, ENGINE_OP_COMPACTION), "sort-order") != NULL);
}

static void
test_livy(void)
{
	/* no options */
	BUILD_IS(LIVY, "compaction", &T, NULL,
			 "CALL `lake`.system.rewrite_data_files(table => '`sales`.`orders`')");
	BUILD_IS(LIVY, "compaction", &T, "  ",
			 "CALL `lake`.system.rewrite_data_files(table => '`sales`.`orders`')");
	BUILD_IS(LIVY, "position-delete-rewrite", &T, "{}",
			 "CALL `lake`.system.rewrite_position_delete_files(table => '`sales`.`orders`')");
	BUILD_IS(LIVY, "manifest-rewrite", &T, "{}",
			 "CALL `lake`.system.rewrite_manifests(table => '`sales`.`orders`')");
	BUILD_IS(LIVY, "snapshot-expiry", &T, "{}",
			 "CALL `lake`.system.expire_snapshots(table => '`sales`.`orders`')");
	BUILD_IS(LIVY, "orphan-cleanup", &T, "{}",
			 "CALL `lake`.system.remove_orphan_files(table => '`sales`.`orders`')");

	/* every option */
	BUILD_IS(LIVY, "compaction", &T,
			 "{\"strategy\": \"SORT\", \"sort-order\": \"id DESC NULLS LAST\","
			 " \"where\": \"region = 'eu' and x = '\\\\'\","
			 " \"target-file-size-bytes\": \"128MB\", \"min-input-files\": 5,"
			 " \"max-file-group-size-bytes\": 1073741824, \"rewrite-all\": false,"
			 " \"partial-progress-enabled\": true, \"delete-file-threshold\": \"3\","
			 " \"options\": {\"max-concurrent-file-group-rewrites\": 4,"
			 " \"rewrite-job-order\": \"BYTES-DESC\", \"compression-factor\": 1.5,"
			 " \"remove-dangling-deletes\": true}}",
			 "CALL `lake`.system.rewrite_data_files(table => '`sales`.`orders`', "
			 "strategy => 'sort', sort_order => 'id DESC NULLS LAST', "
			 "where => 'region = \\'eu\\' and x = \\'\\\\\\'', "
			 "options => map('target-file-size-bytes', '134217728', 'min-input-files', '5', "
			 "'max-file-group-size-bytes', '1073741824', 'rewrite-all', 'false', "
			 "'partial-progress.enabled', 'true', 'delete-file-threshold', '3', "
			 "'max-concurrent-file-group-rewrites', '4', 'rewrite-job-order', 'bytes-desc', "
			 "'compression-factor', '1.5', 'remove-dangling-deletes', 'true'))");
	BUILD_IS(LIVY, "position-delete-rewrite", &T,
			 "{\"where\": \"d >= 3\", \"rewrite-all\": true, \"min-input-files\": 2,"
			 " \"target-file-size-bytes\": 1024, \"max-file-group-size-bytes\": \"1GiB\","
			 " \"partial-progress-enabled\": false,"
			 " \"options\": {\"partial-progress.max-commits\": 3}}",
			 "CALL `lake`.system.rewrite_position_delete_files(table => '`sales`.`orders`', "
			 "where => 'd >= 3', options => map('target-file-size-bytes', '1024', "
			 "'min-input-files', '2', 'max-file-group-size-bytes', '1073741824', "
			 "'rewrite-all', 'true', 'partial-progress.enabled', 'false', "
			 "'partial-progress.max-commits', '3'))");
	BUILD_IS(LIVY, "manifest-rewrite", &T, "{\"use-caching\": false, \"spec-id\": 0}",
			 "CALL `lake`.system.rewrite_manifests(table => '`sales`.`orders`', "
			 "use_caching => false, spec_id => 0)");
	BUILD_IS(LIVY, "snapshot-expiry", &T,
			 "{\"older-than\": \"7 days\", \"retain-last\": 3, \"max-concurrent-deletes\": 8,"
			 " \"stream-results\": true, \"snapshot-ids\": [1, \"9223372036854775807\"],"
			 " \"clean-expired-metadata\": true}",
			 "CALL `lake`.system.expire_snapshots(table => '`sales`.`orders`', "
			 "older_than => TIMESTAMP '2026-11-01 00:00:00+00:00', retain_last => 3, "
			 "max_concurrent_deletes => 8, stream_results => true, "
			 "snapshot_ids => array(1L, 9223372036854775807L), clean_expired_metadata => true)");
	BUILD_IS(LIVY, "orphan-cleanup", &T,
			 "{\"older-than\": \"2026-11-01T02:00:00.5+02:00\", \"location\": \"s3://b/it's\","
			 " \"max-concurrent-deletes\": 2, \"equal-schemes\": {\"s3a\": \"s3\", \"s3n\": \"s3\"},"
			 " \"equal-authorities\": {\"b.example.com\": \"b\"},"
			 " \"prefix-mismatch-mode\": \"ignore\"}",
			 "CALL `lake`.system.remove_orphan_files(table => '`sales`.`orders`', "
			 "older_than => TIMESTAMP '2026-11-01 00:00:00.500+00:00', "
			 "location => 's3://b/it\\'s', max_concurrent_deletes => 2, "
			 "equal_schemes => map('s3a', 's3', 's3n', 's3'), "
			 "equal_authorities => map('b.example.com', 'b'), prefix_mismatch_mode => 'IGNORE')");

	/* ages and durations */
	BUILD_IS(LIVY, "snapshot-expiry", &T, "{\"older-than\": 86400000}",
			 "CALL `lake`.system.expire_snapshots(table => '`sales`.`orders`', "
			 "older_than => TIMESTAMP '2026-11-07 00:00:00+00:00')");
	BUILD_IS(LIVY, "snapshot-expiry", &T, "{\"older-than\": \"1.5h\"}",
			 "CALL `lake`.system.expire_snapshots(table => '`sales`.`orders`', "
			 "older_than => TIMESTAMP '2026-11-07 22:30:00+00:00')");
	BUILD_IS(LIVY, "snapshot-expiry", &T, "{\"older-than\": \"90min\"}",
			 "CALL `lake`.system.expire_snapshots(table => '`sales`.`orders`', "
			 "older_than => TIMESTAMP '2026-11-07 22:30:00+00:00')");
	BUILD_IS(LIVY, "snapshot-expiry", &T, "{\"older-than\": \"2024-02-29 23:59:59Z\"}",
			 "CALL `lake`.system.expire_snapshots(table => '`sales`.`orders`', "
			 "older_than => TIMESTAMP '2024-02-29 23:59:59+00:00')");
}

static void
test_trino(void)
{
	BUILD_IS(TRINO, "compaction", &T, NULL,
			 "ALTER TABLE \"lake\".\"sales\".\"orders\" EXECUTE optimize");
	BUILD_IS(TRINO, "manifest-rewrite", &T, "{}",
			 "ALTER TABLE \"lake\".\"sales\".\"orders\" EXECUTE optimize_manifests");
	BUILD_IS(TRINO, "snapshot-expiry", &T, "{}",
			 "ALTER TABLE \"lake\".\"sales\".\"orders\" EXECUTE expire_snapshots");
	BUILD_IS(TRINO, "orphan-cleanup", &T, "{}",
			 "ALTER TABLE \"lake\".\"sales\".\"orders\" EXECUTE remove_orphan_files");
	BUILD_IS(TRINO, "snapshot-expiry", &T, "{\"older-than\": \"7 days\"}",
			 "ALTER TABLE \"lake\".\"sales\".\"orders\" EXECUTE "
			 "expire_snapshots(retention_threshold => '7.00d')");
	BUILD_IS(TRINO, "orphan-cleanup", &T, "{\"older-than\": \"100 minutes\"}",
			 "ALTER TABLE \"lake\".\"sales\".\"orders\" EXECUTE "
			 "remove_orphan_files(retention_threshold => '100.00m')");
	BUILD_IS(TRINO, "orphan-cleanup", &T, "{\"older-than\": \"36h\"}",
			 "ALTER TABLE \"lake\".\"sales\".\"orders\" EXECUTE "
			 "remove_orphan_files(retention_threshold => '1.50d')");
	BUILD_IS(TRINO, "orphan-cleanup", &T, "{\"older-than\": 1}",
			 "ALTER TABLE \"lake\".\"sales\".\"orders\" EXECUTE "
			 "remove_orphan_files(retention_threshold => '1.00ms')");

	/* every option, and the session property */
	{
		EngineStatement st;
		TmsError	err;

		CHECK(engine_statement_build(TRINO, "compaction", &T,
									 "{\"file-size-threshold\": \"100MB\","
									 " \"where\": \" \\\"Region\\\"\\n= 'it''s' AND d >= DATE '2024-01-01' \","
									 " \"target-file-size-bytes\": \"512KB\"}",
									 "tms-job-7", NOW, &st, &err) == 0);
		CHECK(st.text && strcmp(st.text,
								"ALTER TABLE \"lake\".\"sales\".\"orders\" EXECUTE "
								"optimize(file_size_threshold => '100MB') WHERE "
								"\"Region\"\n= 'it''s' AND d >= DATE '2024-01-01'") == 0);
		CHECK(st.nsession == 1 && strcmp(st.session[0].name, "lake.target_max_file_size") == 0 &&
			  strcmp(st.session[0].value, "524288B") == 0);
		CHECK(st.template_name == NULL);
		engine_statement_free(&st);
	}
	BUILD_IS(TRINO, "compaction", &T, "{\"file-size-threshold\": 1000}",
			 "ALTER TABLE \"lake\".\"sales\".\"orders\" EXECUTE "
			 "optimize(file_size_threshold => '1000B')");
	BUILD_IS(TRINO, "compaction", &T, "{\"file-size-threshold\": \"1.5k\"}",
			 "ALTER TABLE \"lake\".\"sales\".\"orders\" EXECUTE "
			 "optimize(file_size_threshold => '1536B')");
}

static void
test_gravitino(void)
{
	EngineStatement st;
	TmsError	err;

	BUILD_IS(GRAV, "compaction", &T, NULL,
			 "{\"jobTemplateName\":\"builtin-iceberg-rewrite-data-files\",\"jobConf\":"
			 "{\"catalog_name\":\"lake\",\"table_identifier\":\"sales.orders\","
			 "\"tms_tag\":\"tms-job-7\"}}");
	BUILD_IS(GRAV, "manifest-rewrite", &T, "{}",
			 "{\"jobTemplateName\":\"builtin-iceberg-rewrite-manifests\",\"jobConf\":"
			 "{\"catalog_name\":\"lake\",\"table_identifier\":\"sales.orders\","
			 "\"tms_tag\":\"tms-job-7\"}}");
	BUILD_IS(GRAV, "snapshot-expiry", &T, "{}",
			 "{\"jobTemplateName\":\"builtin-iceberg-expire-snapshots\",\"jobConf\":"
			 "{\"catalog_name\":\"lake\",\"table_identifier\":\"sales.orders\","
			 "\"tms_tag\":\"tms-job-7\"}}");
	BUILD_IS(GRAV, "compaction", &T,
			 "{\"strategy\": \"sort\", \"sort-order\": \"zorder(a,b)\", \"where\": \"y = 2024\","
			 " \"target-file-size-bytes\": \"1MB\", \"min-input-files\": 2,"
			 " \"max-file-group-size-bytes\": 4096, \"rewrite-all\": true,"
			 " \"partial-progress-enabled\": true, \"delete-file-threshold\": 1,"
			 " \"options\": {\"output-spec-id\": 1}}",
			 "{\"jobTemplateName\":\"builtin-iceberg-rewrite-data-files\",\"jobConf\":"
			 "{\"catalog_name\":\"lake\",\"table_identifier\":\"sales.orders\","
			 "\"strategy\":\"sort\",\"sort_order\":\"zorder(a,b)\",\"where_clause\":\"y = 2024\","
			 "\"options\":\"{\\\"target-file-size-bytes\\\":\\\"1048576\\\","
			 "\\\"min-input-files\\\":\\\"2\\\",\\\"max-file-group-size-bytes\\\":\\\"4096\\\","
			 "\\\"rewrite-all\\\":\\\"true\\\",\\\"partial-progress.enabled\\\":\\\"true\\\","
			 "\\\"delete-file-threshold\\\":\\\"1\\\",\\\"output-spec-id\\\":\\\"1\\\"}\","
			 "\"tms_tag\":\"tms-job-7\"}}");
	BUILD_IS(GRAV, "manifest-rewrite", &T, "{\"use-caching\": true, \"spec-id\": 2}",
			 "{\"jobTemplateName\":\"builtin-iceberg-rewrite-manifests\",\"jobConf\":"
			 "{\"catalog_name\":\"lake\",\"table_identifier\":\"sales.orders\","
			 "\"use_caching\":\"true\",\"spec_id\":\"2\",\"tms_tag\":\"tms-job-7\"}}");
	BUILD_IS(GRAV, "snapshot-expiry", &T,
			 "{\"older-than\": \"3d\", \"retain-last\": 10, \"stream-results\": false}",
			 "{\"jobTemplateName\":\"builtin-iceberg-expire-snapshots\",\"jobConf\":"
			 "{\"catalog_name\":\"lake\",\"table_identifier\":\"sales.orders\","
			 "\"older_than\":\"2026-11-05 00:00:00+00:00\",\"retain_last\":\"10\","
			 "\"stream_results\":\"false\",\"tms_tag\":\"tms-job-7\"}}");
	CHECK(engine_statement_build(GRAV, "manifest-rewrite", &T, NULL, "tms-job-7", NOW, &st,
								 &err) == 0);
	CHECK(st.template_name && strcmp(st.template_name, "builtin-iceberg-rewrite-manifests") == 0);
	CHECK(st.nsession == 0 && st.session == NULL);
	engine_statement_free(&st);
	/* parts that need it are backquoted */
	{
		static const char *const ns[] = {"db", "my ns"};
		EngineTarget t = {"lake", ns, 2, "t-1"};

		BUILD_IS(GRAV, "manifest-rewrite", &t, NULL,
				 "{\"jobTemplateName\":\"builtin-iceberg-rewrite-manifests\",\"jobConf\":"
				 "{\"catalog_name\":\"lake\",\"table_identifier\":\"db.`my ns`.`t-1`\","
				 "\"tms_tag\":\"tms-job-7\"}}");
	}
	/* what the built-in job would paste unescaped is refused */
	{
		static const char *const ns[] = {"it's"};
		EngineTarget t1 = {"lake", ns, 1, "orders"};
		EngineTarget t2 = {"la ke", ns1, 1, "orders"};
		EngineTarget t3 = {"lake", ns1, 1, "a\\b"};

		BUILD_ERR(GRAV, "compaction", &t1, NULL, ENGINE_ERR_INVALID_NAME,
				  "cannot be passed to a Gravitino job", "livy");
		BUILD_ERR(GRAV, "compaction", &t2, NULL, ENGINE_ERR_INVALID_NAME,
				  "catalog name cannot be passed", "unquoted");
		BUILD_ERR(GRAV, "compaction", &t3, NULL, ENGINE_ERR_INVALID_NAME,
				  "cannot be passed", NULL);
		BUILD_ERR(GRAV, "compaction", &T, "{\"where\": \"r = 'eu'\"}",
				  ENGINE_ERR_INVALID_VALUE, "option \"where\" cannot be passed", NULL);
		BUILD_ERR(GRAV, "compaction", &T, "{\"sort-order\": \"{{a}} b\"}",
				  ENGINE_ERR_INVALID_VALUE, "option \"sort-order\" cannot be passed", NULL);
	}
}

static void
test_hostile_names(void)
{
	static const char *const ns[] = {"a`b", "c'd\\e"};
	EngineTarget t = {"la`ke", ns, 2, "x\ny;--\xc3\xa9"};
	static const char *const ns_t[] = {"s\"c"};
	EngineTarget tt = {"c\"at", ns_t, 1, "t'\n;"};
	char		longname[2000];
	EngineTarget tl = {"lake", ns1, 1, longname};

	BUILD_IS(LIVY, "manifest-rewrite", &t, NULL,
			 "CALL `la``ke`.system.rewrite_manifests(table => "
			 "'`a``b`.`c\\'d\\\\e`.`x\\ny;--\xc3\xa9`')");
	BUILD_IS(LIVY, "compaction", &T, "{\"where\": \"a = 1') ; DROP TABLE x; --\\r\\t\\u0001\"}",
			 "CALL `lake`.system.rewrite_data_files(table => '`sales`.`orders`', "
			 "where => 'a = 1\\') ; DROP TABLE x; --\\r\\t\\u0001')");
	BUILD_IS(TRINO, "manifest-rewrite", &tt, NULL,
			 "ALTER TABLE \"c\"\"at\".\"s\"\"c\".\"t'\n;\" EXECUTE optimize_manifests");
	/* a long name is fine up to the limit, refused past it */
	memset(longname, 'n', 1024);
	longname[1024] = '\0';
	{
		EngineStatement st;
		TmsError	err;

		CHECK(engine_statement_build(LIVY, "manifest-rewrite", &tl, NULL, "x", NOW, &st, &err) == 0);
		CHECK(st.text && strlen(st.text) == strlen("CALL `lake`.system.rewrite_manifests(table => '`sales`.``')") + 1024);
		engine_statement_free(&st);
	}
	memset(longname, 'n', 1025);
	longname[1025] = '\0';
	BUILD_ERR(LIVY, "manifest-rewrite", &tl, NULL, ENGINE_ERR_INVALID_NAME,
			  "the table name is too long", "1025 bytes");
	{
		EngineTarget e1 = {"", ns1, 1, "t"};
		EngineTarget e2 = {"lake", ns1, 1, ""};
		EngineTarget e3 = {"lake", ns1, 0, "t"};
		EngineTarget e4 = {"lake", ns1, 1, "\xff"};
		EngineTarget e5 = {"lake", ns, 2, "t"};

		BUILD_ERR(LIVY, "compaction", &e1, NULL, ENGINE_ERR_INVALID_NAME, "the catalog name is empty", NULL);
		BUILD_ERR(LIVY, "compaction", &e2, NULL, ENGINE_ERR_INVALID_NAME, "the table name is empty", NULL);
		BUILD_ERR(LIVY, "compaction", &e3, NULL, ENGINE_ERR_INVALID_NAME, "no namespace", NULL);
		BUILD_ERR(LIVY, "compaction", &e4, NULL, ENGINE_ERR_INVALID_NAME, "not valid UTF-8", NULL);
		BUILD_ERR(TRINO, "compaction", &e5, NULL, ENGINE_ERR_INVALID_NAME,
				  "namespace of 2 levels", "livy");
		BUILD_ERR(LIVY, "compaction", NULL, NULL, ENGINE_ERR_INVALID_NAME, "no table", NULL);
	}
	/* a catalog that cannot name a Trino session property */
	{
		EngineTarget tc = {"la=ke", ns1, 1, "t"};

		BUILD_ERR(TRINO, "compaction", &tc, "{\"target-file-size-bytes\": 10}",
				  ENGINE_ERR_INVALID_NAME, "session property", NULL);
		BUILD_IS(TRINO, "compaction", &tc, NULL,
				 "ALTER TABLE \"la=ke\".\"sales\".\"t\" EXECUTE optimize");
	}
}

static void
test_trino_where(void)
{
	static const char *const bad[] = {
		"a = 1; DROP TABLE t", "a = 1 -- x", "a /* x */ = 1", "a = 'x", "\"a = 1",
		"(a = 1", "a = 1)", "a[1) = 2", "a = \xc3\xa9", "a = ?", "a = `b`", "", "   ",
		"a = 1e", "a = 1x", "a = {b}", "a = $1", "a & b", "a | b", "a = 1 \\",
		NULL
	};
	static const char *const good[] = {
		"a = 1", "\"we;ird--\" = 'it''s; -- /* fine */' AND b IN (1, 2.5, .5, 1e-3)",
		"x <> 2 OR y != 3 AND (z <= 4 OR z >= 5) AND s || 't' = 'ut'",
		"a[1] = 2 AND m['k'] = 'v' AND c = '\xc3\xa9' AND \"\xc3\xa9\" > 0",
		"d BETWEEN DATE '2024-01-01' AND DATE '2024-12-31' AND NOT x IS NULL",
		"a - 1 = b / 2 * c % 3 + -4",
		NULL
	};
	int			i;
	TmsError	err;

	for (i = 0; bad[i]; i++)
		if (eng_trino_where_check(bad[i], &err) == 0 || err.code != ENGINE_ERR_INVALID_VALUE)
		{
			FAIL("where \"%s\" accepted", bad[i]);
		}
	for (i = 0; good[i]; i++)
		if (eng_trino_where_check(good[i], &err) != 0)
		{
			FAIL("where \"%s\" refused: %s (%s)", good[i], err.message, err.detail);
		}
	CHECK(eng_trino_where_check("a = 1; x", &err) != 0 &&
		  strstr(err.message, "not a single SQL expression") &&
		  strstr(err.detail, "statement separator at byte 5"));
	BUILD_ERR(TRINO, "compaction", &T, "{\"where\": \"a = 1; DELETE FROM t\"}",
			  ENGINE_ERR_INVALID_VALUE, "\"where\" is not a single SQL expression", "separator");
	BUILD_ERR(TRINO, "compaction", &T, "{\"where\": \"a = 1 --\"}",
			  ENGINE_ERR_INVALID_VALUE, "not a single SQL expression", "comment");
}

static void
test_errors(void)
{
	/* operations and engines */
	BUILD_ERR(LIVY, "vacuum", &T, NULL, ENGINE_ERR_UNKNOWN_OPERATION, "unknown operation \"vacuum\"",
			  "compaction, position-delete-rewrite");
	BUILD_ERR(LIVY, NULL, &T, NULL, ENGINE_ERR_UNKNOWN_OPERATION, "unknown operation", NULL);
	BUILD_ERR(ENGINE_TYPE_UNKNOWN, "compaction", &T, NULL, ENGINE_ERR_UNSUPPORTED,
			  "unknown engine type", NULL);
	BUILD_ERR(TRINO, "position-delete-rewrite", &T, NULL, ENGINE_ERR_UNSUPPORTED,
			  "engine trino cannot run position-delete-rewrite", "type livy, or compaction");
	BUILD_ERR(GRAV, "orphan-cleanup", &T, NULL, ENGINE_ERR_UNSUPPORTED,
			  "engine gravitino cannot run orphan-cleanup", "livy");
	BUILD_ERR(GRAV, "position-delete-rewrite", &T, NULL, ENGINE_ERR_UNSUPPORTED,
			  "cannot run", NULL);

	/* unknown options, with the allowed ones */
	BUILD_ERR(LIVY, "manifest-rewrite", &T, "{\"retain-last\": 1}", ENGINE_ERR_UNKNOWN_OPTION,
			  "unknown option \"retain-last\" for manifest-rewrite on livy",
			  "Allowed options: use-caching, spec-id, engine-resources.");
	BUILD_ERR(TRINO, "manifest-rewrite", &T, "{\"use-caching\": true}", ENGINE_ERR_UNKNOWN_OPTION,
			  "unknown option \"use-caching\"", "manifest-rewrite on trino takes no options");
	BUILD_ERR(TRINO, "snapshot-expiry", &T, "{\"retain-last\": 1}", ENGINE_ERR_UNKNOWN_OPTION,
			  "unknown option", "Allowed options: older-than.");
	BUILD_ERR(LIVY, "compaction", &T, "{\"target_file_size_bytes\": 1}", ENGINE_ERR_UNKNOWN_OPTION,
			  "unknown option \"target_file_size_bytes\"", "target-file-size-bytes");
	BUILD_ERR(LIVY, "compaction", &T, "{\"options\": {\"no-such\": 1}}", ENGINE_ERR_UNKNOWN_OPTION,
			  "unknown Iceberg rewrite option \"no-such\"", "max-concurrent-file-group-rewrites");
	BUILD_ERR(LIVY, "position-delete-rewrite", &T, "{\"options\": {\"delete-file-threshold\": 1}}",
			  ENGINE_ERR_UNKNOWN_OPTION, "unknown Iceberg rewrite option", "rewrite_position_delete_files");
	BUILD_ERR(LIVY, "compaction", &T, "{\"k\\n\\\"x\": 1}", ENGINE_ERR_UNKNOWN_OPTION,
			  "unknown option \"k\\n\\\"x\"", NULL);

	/* the document */
	BUILD_ERR(LIVY, "compaction", &T, "[1]", ENGINE_ERR_INVALID_VALUE,
			  "options must be a JSON object", "an array");
	BUILD_ERR(LIVY, "compaction", &T, "{\"strategy\": ", ENGINE_ERR_INVALID_VALUE,
			  "options are not valid JSON", "unexpected end");
	BUILD_ERR(LIVY, "compaction", &T, "{\"strategy\": \"sort\", \"strategy\": \"binpack\"}",
			  ENGINE_ERR_INVALID_VALUE, "not valid JSON", "duplicate member name");
	BUILD_ERR(LIVY, "compaction", &T, "{} x", ENGINE_ERR_INVALID_VALUE, "not valid JSON", "text after");
	BUILD_ERR(LIVY, "compaction", &T, "{\"where\": \"\xc3\x28\"}", ENGINE_ERR_INVALID_VALUE,
			  "not valid JSON", "UTF-8");
	BUILD_ERR(LIVY, "compaction", &T, "{\"where\": \"a\\u0000\"}", ENGINE_ERR_INVALID_VALUE,
			  "not valid JSON", "\\u0000");
	BUILD_ERR(LIVY, "compaction", &T, "{\"where\": \"\\ud800\"}", ENGINE_ERR_INVALID_VALUE,
			  "not valid JSON", "surrogate");
	BUILD_ERR(LIVY, "compaction", &T, "{\"a\":[[[[[[[[[[1]]]]]]]]]]}", ENGINE_ERR_INVALID_VALUE,
			  "not valid JSON", "nested too deeply");

	/* values */
	BUILD_ERR(LIVY, "manifest-rewrite", &T, "{\"use-caching\": \"true\"}", ENGINE_ERR_INVALID_VALUE,
			  "invalid value for option \"use-caching\"",
			  "\"use-caching\" must be true or false, not \"true\".");
	BUILD_ERR(LIVY, "manifest-rewrite", &T, "{\"use-caching\": 1}", ENGINE_ERR_INVALID_VALUE,
			  "invalid value", "not 1.");
	BUILD_ERR(LIVY, "manifest-rewrite", &T, "{\"spec-id\": -1}", ENGINE_ERR_INVALID_VALUE,
			  "invalid value for option \"spec-id\"", "from 0 to 2147483647, not -1.");
	BUILD_ERR(LIVY, "manifest-rewrite", &T, "{\"spec-id\": 1.0}", ENGINE_ERR_INVALID_VALUE,
			  "invalid value", "whole number");
	BUILD_ERR(LIVY, "manifest-rewrite", &T, "{\"spec-id\": 1e3}", ENGINE_ERR_INVALID_VALUE,
			  "invalid value", "not 1e3.");
	BUILD_ERR(LIVY, "manifest-rewrite", &T, "{\"spec-id\": \"12a\"}", ENGINE_ERR_INVALID_VALUE,
			  "invalid value", "not \"12a\".");
	BUILD_ERR(LIVY, "snapshot-expiry", &T, "{\"retain-last\": 0}", ENGINE_ERR_INVALID_VALUE,
			  "invalid value for option \"retain-last\"", "from 1 to 2147483647, not 0.");
	BUILD_ERR(LIVY, "snapshot-expiry", &T, "{\"retain-last\": 2147483648}", ENGINE_ERR_INVALID_VALUE,
			  "invalid value", "not 2147483648.");
	BUILD_ERR(LIVY, "snapshot-expiry", &T, "{\"older-than\": \"7 fortnights\"}",
			  ENGINE_ERR_INVALID_VALUE, "invalid value for option \"older-than\"", "\"7 fortnights\"");
	BUILD_ERR(LIVY, "snapshot-expiry", &T, "{\"older-than\": \"2026-11-01T00:00:00\"}",
			  ENGINE_ERR_INVALID_VALUE, "invalid value", "with a zone");
	BUILD_ERR(LIVY, "snapshot-expiry", &T, "{\"older-than\": \"2026-02-29T00:00:00Z\"}",
			  ENGINE_ERR_INVALID_VALUE, "invalid value", "with a zone");
	BUILD_ERR(LIVY, "snapshot-expiry", &T, "{\"older-than\": -5}",
			  ENGINE_ERR_INVALID_VALUE, "invalid value", "not -5.");
	BUILD_ERR(LIVY, "snapshot-expiry", &T, "{\"older-than\": \"100000 weeks\"}",
			  ENGINE_ERR_INVALID_VALUE, "invalid value for option \"older-than\"", "out of range");
	BUILD_ERR(LIVY, "snapshot-expiry", &T, "{\"older-than\": \"0.5ms\"}",
			  ENGINE_ERR_INVALID_VALUE, "invalid value", "\"0.5ms\"");
	BUILD_ERR(TRINO, "snapshot-expiry", &T, "{\"older-than\": \"2026-11-01T00:00:00Z\"}",
			  ENGINE_ERR_INVALID_VALUE, "invalid value for option \"older-than\"", "retention threshold");
	BUILD_ERR(LIVY, "snapshot-expiry", &T, "{\"snapshot-ids\": []}", ENGINE_ERR_INVALID_VALUE,
			  "invalid value for option \"snapshot-ids\"", "non-empty array");
	BUILD_ERR(LIVY, "snapshot-expiry", &T, "{\"snapshot-ids\": [1, 2.5]}", ENGINE_ERR_INVALID_VALUE,
			  "invalid value for option \"snapshot-ids\"", "not 2.5.");
	BUILD_ERR(LIVY, "snapshot-expiry", &T, "{\"snapshot-ids\": 5}", ENGINE_ERR_INVALID_VALUE,
			  "invalid value", "array of snapshot ids, not 5.");
	BUILD_ERR(LIVY, "compaction", &T, "{\"strategy\": \"zorder\"}", ENGINE_ERR_INVALID_VALUE,
			  "invalid value for option \"strategy\"", "must be one of binpack, sort, not \"zorder\".");
	BUILD_ERR(LIVY, "compaction", &T, "{\"strategy\": \"binpack\", \"sort-order\": \"id\"}",
			  ENGINE_ERR_INVALID_VALUE, "option \"sort-order\" needs strategy \"sort\"", "binpack");
	BUILD_ERR(LIVY, "compaction", &T, "{\"target-file-size-bytes\": \"12 parsecs\"}",
			  ENGINE_ERR_INVALID_VALUE, "invalid value for option \"target-file-size-bytes\"", "128MB");
	BUILD_ERR(LIVY, "compaction", &T, "{\"target-file-size-bytes\": 0}",
			  ENGINE_ERR_INVALID_VALUE, "invalid value", "at least 1, not 0.");
	BUILD_ERR(LIVY, "compaction", &T, "{\"target-file-size-bytes\": \"1.5B\"}",
			  ENGINE_ERR_INVALID_VALUE, "invalid value", "\"1.5B\"");
	BUILD_ERR(LIVY, "compaction", &T, "{\"target-file-size-bytes\": \"9000000PB\"}",
			  ENGINE_ERR_INVALID_VALUE, "invalid value", NULL);
	BUILD_ERR(LIVY, "compaction", &T, "{\"where\": \"\"}", ENGINE_ERR_INVALID_VALUE,
			  "invalid value for option \"where\"", "non-empty string");
	BUILD_ERR(LIVY, "compaction", &T, "{\"where\": \" \\n \"}", ENGINE_ERR_INVALID_VALUE,
			  "invalid value for option \"where\"", "non-empty string");
	BUILD_ERR(LIVY, "compaction", &T, "{\"where\": 1}", ENGINE_ERR_INVALID_VALUE,
			  "invalid value", "not 1.");
	BUILD_ERR(LIVY, "compaction", &T, "{\"options\": [1]}", ENGINE_ERR_INVALID_VALUE,
			  "invalid value for option \"options\"", "an object");
	BUILD_ERR(LIVY, "compaction", &T, "{\"options\": {\"rewrite-all\": \"yes\"}}",
			  ENGINE_ERR_INVALID_VALUE, "invalid value for option \"options.rewrite-all\"", "true or false");
	BUILD_ERR(LIVY, "compaction", &T, "{\"options\": {\"compression-factor\": \"0x10\"}}",
			  ENGINE_ERR_INVALID_VALUE, "options.compression-factor", "non-negative number");
	BUILD_ERR(LIVY, "compaction", &T, "{\"options\": {\"rewrite-job-order\": \"random\"}}",
			  ENGINE_ERR_INVALID_VALUE, "options.rewrite-job-order", "bytes-asc");
	BUILD_ERR(LIVY, "compaction", &T,
			  "{\"min-input-files\": 2, \"options\": {\"min-input-files\": 3}}",
			  ENGINE_ERR_INVALID_VALUE, "Iceberg option \"min-input-files\" is given twice", NULL);
	BUILD_ERR(LIVY, "compaction", &T,
			  "{\"partial-progress-enabled\": true, \"options\": {\"partial-progress.enabled\": true}}",
			  ENGINE_ERR_INVALID_VALUE, "given twice", "partial-progress-enabled");
	BUILD_ERR(LIVY, "orphan-cleanup", &T, "{\"prefix-mismatch-mode\": \"WARN\"}",
			  ENGINE_ERR_INVALID_VALUE, "invalid value", "ERROR, IGNORE, DELETE");
	BUILD_ERR(LIVY, "orphan-cleanup", &T, "{\"equal-schemes\": {}}",
			  ENGINE_ERR_INVALID_VALUE, "invalid value for option \"equal-schemes\"", "non-empty object");
	BUILD_ERR(LIVY, "orphan-cleanup", &T, "{\"equal-schemes\": {\"s3a\": 1}}",
			  ENGINE_ERR_INVALID_VALUE, "equal-schemes", "non-empty strings");
	BUILD_ERR(LIVY, "orphan-cleanup", &T, "{\"location\": {}}",
			  ENGINE_ERR_INVALID_VALUE, "invalid value for option \"location\"", "not an object.");
	/* a value shown in a detail is escaped */
	BUILD_ERR(LIVY, "compaction", &T, "{\"strategy\": \"a\\\"b\\nc\"}", ENGINE_ERR_INVALID_VALUE,
			  "invalid value", "not \"a\\\"b\\nc\".");
	/* too long a document */
	{
		size_t		n = ENG_MAX_OPTIONS_BYTES + 10;
		char	   *big = io_malloc(n + 1);

		memset(big, ' ', n);
		big[0] = '{';
		big[n - 1] = '}';
		big[n] = '\0';
		BUILD_ERR(LIVY, "compaction", &T, big, ENGINE_ERR_INVALID_VALUE, "options are too long", NULL);
		io_free(big);
	}
}

static void
test_placeholders_and_big(void)
{
	/* wholly "{{x}}" and null are absent */
	BUILD_IS(LIVY, "snapshot-expiry", &T,
			 "{\"older-than\": \"{{age}}\", \"retain-last\": null, \"snapshot-ids\": [\"{{id}}\"],"
			 " \"stream-results\": \"{{s}}\"}",
			 "CALL `lake`.system.expire_snapshots(table => '`sales`.`orders`')");
	BUILD_IS(LIVY, "compaction", &T,
			 "{\"where\": \"{{w}}\", \"options\": {\"min-input-files\": \"{{n}}\"}}",
			 "CALL `lake`.system.rewrite_data_files(table => '`sales`.`orders`')");
	BUILD_IS(LIVY, "orphan-cleanup", &T,
			 "{\"equal-schemes\": {\"s3a\": \"{{x}}\", \"s3n\": \"s3\"}}",
			 "CALL `lake`.system.remove_orphan_files(table => '`sales`.`orders`', "
			 "equal_schemes => map('s3n', 's3'))");
	/* not wholly a placeholder: a value like any other */
	BUILD_IS(LIVY, "compaction", &T, "{\"where\": \"{{w}} = 1\"}",
			 "CALL `lake`.system.rewrite_data_files(table => '`sales`.`orders`', "
			 "where => '{{w}} = 1')");
	BUILD_ERR(LIVY, "snapshot-expiry", &T, "{\"retain-last\": \"{{a}}{{b}}\"}",
			  ENGINE_ERR_INVALID_VALUE, "invalid value", NULL);
	/* an unknown key is refused even when its value is a placeholder */
	BUILD_ERR(LIVY, "snapshot-expiry", &T, "{\"nope\": \"{{a}}\"}",
			  ENGINE_ERR_UNKNOWN_OPTION, "unknown option \"nope\"", NULL);

	/* big integers: exact to int64, refused past it, never rounded */
	BUILD_IS(LIVY, "snapshot-expiry", &T, "{\"snapshot-ids\": [9007199254740993]}",
			 "CALL `lake`.system.expire_snapshots(table => '`sales`.`orders`', "
			 "snapshot_ids => array(9007199254740993L))");
	BUILD_IS(LIVY, "compaction", &T, "{\"target-file-size-bytes\": 9223372036854775807}",
			 "CALL `lake`.system.rewrite_data_files(table => '`sales`.`orders`', "
			 "options => map('target-file-size-bytes', '9223372036854775807'))");
	BUILD_ERR(LIVY, "compaction", &T, "{\"target-file-size-bytes\": 9223372036854775808}",
			  ENGINE_ERR_INVALID_VALUE, "invalid value", "out of range");
	BUILD_ERR(LIVY, "snapshot-expiry", &T,
			  "{\"snapshot-ids\": [\"123456789012345678901234567890\"]}",
			  ENGINE_ERR_INVALID_VALUE, "invalid value", "out of range");
	BUILD_ERR(LIVY, "snapshot-expiry", &T, "{\"retain-last\": 99999999999999999999999}",
			  ENGINE_ERR_INVALID_VALUE, "invalid value", "out of range");

	{
		int64_t		v;

		CHECK(eng_parse_int64("-9223372036854775808", 20, &v) == 1 && v == INT64_MIN);
		CHECK(eng_parse_int64("9223372036854775807", 19, &v) == 1 && v == INT64_MAX);
		CHECK(eng_parse_int64("9223372036854775808", 19, &v) == -1);
		CHECK(eng_parse_int64("-", 1, &v) == 0);
		CHECK(eng_parse_int64("1.0", 3, &v) == 0);
	}
}

/* Read counts from a result of rows of text. */
static int
counts(EngineType type, EngineOperation op, const char *const *cols, size_t ncols,
	   const char *const *const *rows, size_t nrows, EngineCounts *c, TmsError *err)
{
	return engine_counts_read(type, op, cols, ncols, rows, nrows, c, err);
}

static void
test_counts(void)
{
	EngineCounts c;
	TmsError	err;

	/* Spark rewrite_data_files, in the JSON forms a client may give */
	{
		static const char *const cols[] = {"rewritten_data_files_count", "added_data_files_count",
		"rewritten_bytes_count", "failed_data_files_count", "removed_delete_files_count", "new_col"};
		static const char *const r1[] = {"12", "2.0", "\"9007199254740993\"", "0", "1e3", "x"};
		static const char *const *const rows[] = {r1};

		CHECK(counts(LIVY, ENGINE_OP_COMPACTION, cols, 6, rows, 1, &c, &err) == 0);
		CHECK(c.data_files_rewritten == 12 && c.data_files_added == 2 &&
			  c.bytes_rewritten == INT64_C(9007199254740993) && c.delete_files_rewritten == 1000);
		CHECK(c.manifests_rewritten == -1 && c.files_deleted == -1 && c.orphans_found == -1);
	}
	/* not whole, not a number, negative, too big */
	{
		static const char *const cols[] = {"rewritten_data_files_count"};
		static const char *const bad[] = {"1.5", "abc", "-1", "1e19", "", "12 ", "\"1\\u0032\"",
		"9223372036854775808", "0x10", "1e-1", NULL};
		int			i;

		for (i = 0; bad[i]; i++)
		{
			const char *const r1[] = {bad[i]};
			const char *const *const rows[] = {r1};

			if (counts(LIVY, ENGINE_OP_COMPACTION, cols, 1, rows, 1, &c, &err) == 0 ||
				err.code != ENGINE_ERR_INVALID_RESULT ||
				strstr(err.detail, "rewritten_data_files_count") == NULL)
			{
				FAIL("count \"%s\" accepted", bad[i]);
			}
		}
	}
	/* whole forms */
	{
		static const char *const good[] = {"0", "-0", "12.000", "1.2e1", "120e-1", "\"7\"",
		"9223372036854775807", "0.0e5", "1000000000000000000000e-3", NULL};
		static const int64_t want[] = {0, 0, 12, 12, 12, 7, INT64_MAX, 0, INT64_C(1000000000000000000)};
		int			i;

		for (i = 0; good[i]; i++)
		{
			int64_t		v = -5;

			if (!eng_parse_whole(good[i], &v) || v != want[i])
			{
				FAIL("whole \"%s\" -> %lld", good[i], (long long) v);
			}
		}
	}
	/* sums over rows overflow */
	{
		static const char *const cols[] = {"rewritten_bytes_count"};
		static const char *const r1[] = {"9223372036854775807"};
		static const char *const r2[] = {"1"};
		static const char *const *const rows[] = {r1, r2};

		CHECK(counts(LIVY, ENGINE_OP_COMPACTION, cols, 1, rows, 2, &c, &err) != 0 &&
			  err.code == ENGINE_ERR_INVALID_RESULT);
	}
	/* rewrite_position_delete_files, a NULL cell is not reported */
	{
		static const char *const cols[] = {"rewritten_delete_files_count", "added_delete_files_count",
		"rewritten_bytes_count", "added_bytes_count"};
		static const char *const r1[] = {"4", "1", NULL, "100"};
		static const char *const *const rows[] = {r1};

		CHECK(counts(LIVY, ENGINE_OP_POSITION_DELETE_REWRITE, cols, 4, rows, 1, &c, &err) == 0);
		CHECK(c.delete_files_rewritten == 4 && c.delete_files_added == 1 && c.bytes_rewritten == -1);
	}
	/* rewrite_manifests */
	{
		static const char *const cols[] = {"rewritten_manifests_count", "added_manifests_count"};
		static const char *const r1[] = {"10", "2"};
		static const char *const *const rows[] = {r1};

		CHECK(counts(LIVY, ENGINE_OP_MANIFEST_REWRITE, cols, 2, rows, 1, &c, &err) == 0);
		CHECK(c.manifests_rewritten == 10 && c.manifests_added == 2);
	}
	/* expire_snapshots: every deleted_*_count summed */
	{
		static const char *const cols[] = {"deleted_data_files_count",
			"deleted_position_delete_files_count", "deleted_equality_delete_files_count",
			"deleted_manifest_files_count", "deleted_manifest_lists_count",
		"deleted_statistics_files_count"};
		static const char *const r1[] = {"5", "1", "2", "3", "4", "0"};
		static const char *const *const rows[] = {r1};

		CHECK(counts(LIVY, ENGINE_OP_SNAPSHOT_EXPIRY, cols, 6, rows, 1, &c, &err) == 0);
		CHECK(c.files_deleted == 15);
	}
	/* remove_orphan_files: one row per file, zero rows is zero */
	{
		static const char *const cols[] = {"orphan_file_location"};
		static const char *const r1[] = {"s3://b/x"};
		static const char *const r2[] = {"s3://b/\"y"};
		static const char *const *const rows[] = {r1, r2};

		CHECK(counts(LIVY, ENGINE_OP_ORPHAN_CLEANUP, cols, 1, rows, 2, &c, &err) == 0);
		CHECK(c.orphans_found == 2);
		CHECK(counts(LIVY, ENGINE_OP_ORPHAN_CLEANUP, cols, 1, NULL, 0, &c, &err) == 0);
		CHECK(c.orphans_found == 0);
		CHECK(counts(LIVY, ENGINE_OP_ORPHAN_CLEANUP, NULL, 0, NULL, 0, &c, &err) == 0);
		CHECK(c.orphans_found == -1);
	}
	/* Trino: rows of (metric_name, metric_value) */
	{
		static const char *const cols[] = {"metric_name", "metric_value"};
		static const char *const r1[] = {"rewritten_data_files_count", "7"};
		static const char *const r2[] = {"removed_delete_files_count", "2"};
		static const char *const r3[] = {"added_data_files_count", "1"};
		static const char *const r4[] = {"something_new", "not a number"};
		static const char *const *const rows[] = {r1, r2, r3, r4};

		CHECK(counts(TRINO, ENGINE_OP_COMPACTION, cols, 2, rows, 4, &c, &err) == 0);
		CHECK(c.data_files_rewritten == 7 && c.delete_files_rewritten == 2 && c.data_files_added == 1);
	}
	{
		static const char *const cols[] = {"metric_name", "metric_value"};
		static const char *const r1[] = {"processed_manifests_count", "2"};
		static const char *const r2[] = {"active_files_count", "98"};
		static const char *const r3[] = {"scanned_files_count", "97"};
		static const char *const r4[] = {"deleted_files_count", "3"};
		static const char *const r5[] = {"deleted_bytes", "1e2"};
		static const char *const *const rows[] = {r1, r2, r3, r4, r5};

		CHECK(counts(TRINO, ENGINE_OP_ORPHAN_CLEANUP, cols, 2, rows, 5, &c, &err) == 0);
		CHECK(c.orphans_found == 3 && c.files_deleted == -1);
	}
	{
		static const char *const cols[] = {"metric_name", "metric_value"};
		static const char *const r1[] = {"deleted_data_files_count", "4"};
		static const char *const r2[] = {"deleted_manifests_count", "2"};
		static const char *const r3[] = {"deleted_manifest_lists_count", "bad"};
		static const char *const *const rows[] = {r1, r2, r3};

		CHECK(counts(TRINO, ENGINE_OP_SNAPSHOT_EXPIRY, cols, 2, rows, 2, &c, &err) == 0);
		CHECK(c.files_deleted == 6);
		CHECK(counts(TRINO, ENGINE_OP_SNAPSHOT_EXPIRY, cols, 2, rows, 3, &c, &err) != 0 &&
			  err.code == ENGINE_ERR_INVALID_RESULT && strstr(err.detail, "Row 3"));
	}
	CHECK(counts(LIVY, ENGINE_OP_UNKNOWN, NULL, 0, NULL, 0, &c, &err) != 0);
}

static void
test_renderings(void)
{
	char		b[64];

	CHECK(eng_format_utc(0, b, sizeof(b)) && strcmp(b, "1970-01-01 00:00:00+00:00") == 0);
	CHECK(eng_format_utc(INT64_C(951782400001), b, sizeof(b)) &&
		  strcmp(b, "2000-02-29 00:00:00.001+00:00") == 0);
	CHECK(!eng_format_utc(-1, b, sizeof(b)));
	CHECK(!eng_format_utc(INT64_C(253402300800000), b, sizeof(b))); /* 10000-01-01 */
	eng_format_datasize(134217728, b, sizeof(b));
	CHECK(strcmp(b, "128MB") == 0);
	eng_format_datasize(1024, b, sizeof(b));
	CHECK(strcmp(b, "1kB") == 0);
	eng_format_datasize(INT64_C(3) << 50, b, sizeof(b));
	CHECK(strcmp(b, "3PB") == 0);
	eng_format_duration(0, b, sizeof(b));
	CHECK(strcmp(b, "0.00s") == 0);
	eng_format_duration(1500, b, sizeof(b));
	CHECK(strcmp(b, "1.50s") == 0);
	eng_format_duration(1001, b, sizeof(b));
	CHECK(strcmp(b, "1001.00ms") == 0);
}

/* "engine-resources": Livy session members, Gravitino spark_* jobConf, every refusal. */
static void
test_engine_resources(void)
{
	EngineStatement st;
	TmsError	err;
	const char *res = "{\"engine-resources\": {\"driverMemory\": \"2G\", \"driverCores\": 2,"
	" \"executorMemory\": \"4096mb\", \"executorCores\": \"4\", \"numExecutors\": 8,"
	" \"conf\": {\"spark.sql.shuffle.partitions\": 200,"
	" \"spark.dynamicAllocation.enabled\": false, \"spark.memory.fraction\": 0.6}}}";
	const char *grav = "{\"engine-resources\": {\"driverMemory\": \"1g\","
	" \"executorMemory\": \"512m\", \"executorCores\": 2, \"numExecutors\": 3,"
	" \"conf\": {\"spark.sql.shuffle.partitions\": \"64\"}}}";

	/* livy: the statement is unchanged, the resources are session members */
	BUILD_IS(LIVY, "manifest-rewrite", &T, res,
			 "CALL `lake`.system.rewrite_manifests(table => '`sales`.`orders`')");
	CHECK(engine_statement_build(LIVY, "snapshot-expiry", &T, res, "tms-job-7", NOW, &st,
								 &err) == 0);
	CHECK(st.nsession == 6);
	if (st.nsession == 6)
	{
		CHECK(strcmp(st.session[0].name, "driverMemory") == 0 &&
			  strcmp(st.session[0].value, "\"2g\"") == 0);
		CHECK(strcmp(st.session[1].name, "driverCores") == 0 &&
			  strcmp(st.session[1].value, "2") == 0);
		CHECK(strcmp(st.session[2].name, "executorMemory") == 0 &&
			  strcmp(st.session[2].value, "\"4096m\"") == 0);
		CHECK(strcmp(st.session[3].name, "executorCores") == 0 &&
			  strcmp(st.session[3].value, "4") == 0);
		CHECK(strcmp(st.session[4].name, "numExecutors") == 0 &&
			  strcmp(st.session[4].value, "8") == 0);
		CHECK(strcmp(st.session[5].name, "conf") == 0 &&
			  strcmp(st.session[5].value, "{\"spark.sql.shuffle.partitions\":\"200\","
					 "\"spark.dynamicAllocation.enabled\":\"false\","
					 "\"spark.memory.fraction\":\"0.6\"}") == 0,
			  "conf is %s", st.session[5].value);
	}
	engine_statement_free(&st);
	/* absent or empty: nothing added */
	CHECK(engine_statement_build(LIVY, "compaction", &T,
								 "{\"engine-resources\": {\"numExecutors\": null}}",
								 "tms-job-7", NOW, &st, &err) == 0 && st.nsession == 0);
	engine_statement_free(&st);

	/* gravitino: spark_* keys of jobConf */
	BUILD_IS(GRAV, "snapshot-expiry", &T, grav,
			 "{\"jobTemplateName\":\"builtin-iceberg-expire-snapshots\",\"jobConf\":"
			 "{\"catalog_name\":\"lake\",\"table_identifier\":\"sales.orders\","
			 "\"spark_driver_memory\":\"1g\",\"spark_executor_memory\":\"512m\","
			 "\"spark_executor_cores\":\"2\",\"spark_executor_instances\":\"3\","
			 "\"spark_conf\":\"{\\\"spark.sql.shuffle.partitions\\\":\\\"64\\\"}\","
			 "\"tms_tag\":\"tms-job-7\"}}");

	/* refusals: 22023 (INVALID_VALUE) or unknown field, naming the value */
	BUILD_ERR(TRINO, "compaction", &T, "{\"engine-resources\": {}}",
			  ENGINE_ERR_UNKNOWN_OPTION, "unknown option \"engine-resources\"", NULL);
	BUILD_ERR(LIVY, "compaction", &T, "{\"engine-resources\": 4}",
			  ENGINE_ERR_INVALID_VALUE, "invalid value for option \"engine-resources\"",
			  "must be an object");
	BUILD_ERR(LIVY, "compaction", &T, "{\"engine-resources\": {\"executorMemory\": \"4x\"}}",
			  ENGINE_ERR_INVALID_VALUE, "invalid value for option \"engine-resources\"",
			  "\"executorMemory\" must be a Spark memory string such as \"512m\"");
	BUILD_ERR(LIVY, "compaction", &T, "{\"engine-resources\": {\"executorMemory\": 4096}}",
			  ENGINE_ERR_INVALID_VALUE, "invalid value", "not 4096");
	BUILD_ERR(LIVY, "compaction", &T, "{\"engine-resources\": {\"driverMemory\": \"100m\"}}",
			  ENGINE_ERR_INVALID_VALUE, "invalid value", "from 450m to 2147483647m, not \"100m\"");
	BUILD_ERR(LIVY, "compaction", &T, "{\"engine-resources\": {\"driverMemory\": \"1.5g\"}}",
			  ENGINE_ERR_INVALID_VALUE, "invalid value", "not \"1.5g\"");
	BUILD_ERR(LIVY, "compaction", &T, "{\"engine-resources\": {\"driverMemory\": \"2048t\"}}",
			  ENGINE_ERR_INVALID_VALUE, "invalid value", "not \"2048t\"");
	BUILD_ERR(LIVY, "compaction", &T, "{\"engine-resources\": {\"numExecutors\": 0}}",
			  ENGINE_ERR_INVALID_VALUE, "invalid value", "from 1 to 2147483647, not 0");
	BUILD_ERR(LIVY, "compaction", &T, "{\"engine-resources\": {\"executorCores\": 2.5}}",
			  ENGINE_ERR_INVALID_VALUE, "invalid value", "not 2.5");
	BUILD_ERR(LIVY, "compaction", &T, "{\"engine-resources\": {\"numExecutors\": 2147483648}}",
			  ENGINE_ERR_INVALID_VALUE, "invalid value", "not 2147483648");
	BUILD_ERR(LIVY, "compaction", &T, "{\"engine-resources\": {\"memory\": \"4g\"}}",
			  ENGINE_ERR_UNKNOWN_OPTION, "unknown field \"memory\"", "driverMemory, driverCores");
	BUILD_ERR(GRAV, "compaction", &T, "{\"engine-resources\": {\"driverCores\": 2}}",
			  ENGINE_ERR_UNKNOWN_OPTION, "unknown field \"driverCores\"", "no driver cores");
	BUILD_ERR(LIVY, "compaction", &T, "{\"engine-resources\": {\"conf\": [1]}}",
			  ENGINE_ERR_INVALID_VALUE, "invalid value", "must be an object of Spark properties");
	BUILD_ERR(LIVY, "compaction", &T, "{\"engine-resources\": {\"conf\": {\"sql.x\": \"1\"}}}",
			  ENGINE_ERR_INVALID_VALUE, "invalid Spark property", "\"sql.x\"");
	BUILD_ERR(LIVY, "compaction", &T,
			  "{\"engine-resources\": {\"conf\": {\"spark.executor.memory\": \"4g\"}}}",
			  ENGINE_ERR_INVALID_VALUE, "cannot be set through", "executorMemory");
	BUILD_ERR(LIVY, "compaction", &T,
			  "{\"engine-resources\": {\"conf\": {\"spark.x\": {\"a\": 1}}}}",
			  ENGINE_ERR_INVALID_VALUE, "invalid value", "not an object");
	BUILD_ERR(GRAV, "compaction", &T,
			  "{\"engine-resources\": {\"conf\": {\"spark.sql.catalog.lake.uri\": \"x\"}}}",
			  ENGINE_ERR_INVALID_VALUE, "cannot be passed to a Gravitino job", "spark.sql.catalog.");
	BUILD_ERR(GRAV, "compaction", &T,
			  "{\"engine-resources\": {\"conf\": {\"spark.x\": \"{{a}}b\"}}}",
			  ENGINE_ERR_INVALID_VALUE, "cannot be passed to a Gravitino job", "placeholder");
	/* credentials: refused by the one rule of tms, never shown */
	memset(&err, 0, sizeof(err));
	CHECK(engine_options_check(LIVY, "compaction",
							   "{\"engine-resources\": {\"conf\": "
							   "{\"spark.hadoop.fs.s3a.secret.key\": \"AKIAxyz123\"}}}",
							   &err) != 0 &&
		  err.code == ENGINE_ERR_INVALID_VALUE &&
		  strstr(err.message, "must not hold credentials") != NULL &&
		  strstr(err.detail, "spark.hadoop.fs.s3a.secret.key") != NULL &&
		  strstr(err.detail, "AKIA") == NULL && strstr(err.message, "AKIA") == NULL);
	memset(&err, 0, sizeof(err));
	CHECK(engine_options_check(GRAV, "compaction",
							   "{\"engine-resources\": {\"conf\": "
							   "{\"spark.driver.extraJavaOptions\": \"-Dpassword=hunter2\"}}}",
							   &err) != 0 &&
		  strstr(err.message, "must not hold credentials") != NULL &&
		  strstr(err.detail, "holds a credential") != NULL &&
		  strstr(err.detail, "hunter2") == NULL);
}

/* One literal or column as an engine writes it. */
static void
value_is(int line, EngineType type, EngineValueKind kind, int64_t v, const char *str,
		 const char *want)
{
	IoStrBuf	b;
	TmsError	err;

	io_sb_init(&b);
	if (engine_sql_value(type, &b, kind, v, str, &err) != 0)
		FAIL("line %d: unexpected error: %s (%s)", line, err.message, err.detail);
	else if (b.data == NULL || strcmp(b.data, want) != 0)
		FAIL("line %d:\n  got:  %s\n  want: %s", line, b.data ? b.data : "(null)", want);
	io_sb_free(&b);
}
#define VALUE_IS(type, kind, v, s, want) value_is(__LINE__, type, kind, v, s, want)

/* DELETE FROM ... WHERE (engine_delete.c): statement, columns, literals. */
static void
test_delete(void)
{
	static const char *const hostile_ns[] = {"sa`l\"es"};
	const EngineTarget H = {"la`ke", hostile_ns, 1, "or'd\"ers"};
	static const char *const deep[] = {"a", "b"};
	const EngineTarget D = {"lake", deep, 2, "t"};
	EngineStatement st;
	TmsError	err;
	IoStrBuf	b;
	char	   *pred;

	/* a predicate printed from the pieces, hostile column and string */
	io_sb_init(&b);
	CHECK(engine_sql_column(LIVY, &b, "ev`ent", &err) == 0);
	io_sb_puts(&b, " = ");
	CHECK(engine_sql_value(LIVY, &b, ENGINE_VALUE_STRING, 0, "it's a \\ `x`", &err) == 0);
	pred = io_sb_steal(&b);
	CHECK(engine_delete_build(LIVY, &H, pred, &st, &err) == 0 && st.text != NULL &&
		  strcmp(st.text, "DELETE FROM `la``ke`.`sa``l\"es`.`or'd\"ers` WHERE "
				 "`ev``ent` = 'it\\'s a \\\\ `x`'") == 0,
		  "got %s", st.text ? st.text : "(null)");
	engine_statement_free(&st);
	io_free(pred);

	io_sb_init(&b);
	CHECK(engine_sql_column(TRINO, &b, "ev\"ent", &err) == 0);
	io_sb_puts(&b, " = ");
	CHECK(engine_sql_value(TRINO, &b, ENGINE_VALUE_STRING, 0, "it's \\", &err) == 0);
	pred = io_sb_steal(&b);
	CHECK(engine_delete_build(TRINO, &H, pred, &st, &err) == 0 && st.text != NULL &&
		  strcmp(st.text, "DELETE FROM \"la`ke\".\"sa`l\"\"es\".\"or'd\"\"ers\" WHERE "
				 "\"ev\"\"ent\" = 'it''s \\'") == 0,
		  "got %s", st.text ? st.text : "(null)");
	engine_statement_free(&st);
	io_free(pred);

	/* a namespace of two levels: Spark names each, Trino refuses it */
	CHECK(engine_delete_build(LIVY, &D, "(x = 1)", &st, &err) == 0 &&
		  strcmp(st.text, "DELETE FROM `lake`.`a`.`b`.`t` WHERE (x = 1)") == 0);
	engine_statement_free(&st);
	CHECK(engine_delete_build(TRINO, &D, "(x = 1)", &st, &err) != 0 &&
		  err.code == ENGINE_ERR_INVALID_NAME);
	/* no predicate, another engine */
	CHECK(engine_delete_build(LIVY, &T, "", &st, &err) != 0 &&
		  err.code == ENGINE_ERR_INVALID_VALUE);
	CHECK(engine_delete_build(GRAV, &T, "(x = 1)", &st, &err) != 0 &&
		  err.code == ENGINE_ERR_UNSUPPORTED);

	/* literals, from their values */
	VALUE_IS(LIVY, ENGINE_VALUE_INT, -42, NULL, "-42");
	VALUE_IS(TRINO, ENGINE_VALUE_INT, INT64_MIN, NULL, "(-9223372036854775807 - 1)");
	VALUE_IS(TRINO, ENGINE_VALUE_INT, INT64_MAX, NULL, "9223372036854775807");
	VALUE_IS(LIVY, ENGINE_VALUE_BOOL, 1, NULL, "true");
	VALUE_IS(TRINO, ENGINE_VALUE_BOOL, 0, NULL, "false");
	VALUE_IS(LIVY, ENGINE_VALUE_DATE, 20454, NULL, "DATE '2026-01-01'");
	VALUE_IS(TRINO, ENGINE_VALUE_DATE, -1, NULL, "DATE '1969-12-31'");
	/* 2026-01-01 00:00:00.000001 UTC */
	VALUE_IS(LIVY, ENGINE_VALUE_TIMESTAMP, INT64_C(1767225600000001), NULL,
			 "TIMESTAMP_NTZ '2026-01-01 00:00:00.000001'");
	VALUE_IS(LIVY, ENGINE_VALUE_TIMESTAMPTZ, INT64_C(1767225600000001), NULL,
			 "TIMESTAMP '2026-01-01 00:00:00.000001+00:00'");
	VALUE_IS(TRINO, ENGINE_VALUE_TIMESTAMP, INT64_C(1767225600000001), NULL,
			 "TIMESTAMP '2026-01-01 00:00:00.000001'");
	VALUE_IS(TRINO, ENGINE_VALUE_TIMESTAMPTZ, INT64_C(1767225600000001), NULL,
			 "TIMESTAMP '2026-01-01 00:00:00.000001 UTC'");
	/* before 1970: the fraction counts forward from the second before */
	VALUE_IS(TRINO, ENGINE_VALUE_TIMESTAMP, -1, NULL, "TIMESTAMP '1969-12-31 23:59:59.999999'");
	VALUE_IS(TRINO, ENGINE_VALUE_TIMESTAMPTZ_NS, INT64_C(1767225600000000001), NULL,
			 "TIMESTAMP '2026-01-01 00:00:00.000000001 UTC'");
	VALUE_IS(LIVY, ENGINE_VALUE_TIMESTAMP_NS, INT64_C(1767225600000001000), NULL,
			 "TIMESTAMP_NTZ '2026-01-01 00:00:00.000001'");
	io_sb_init(&b);
	CHECK(engine_sql_value(LIVY, &b, ENGINE_VALUE_TIMESTAMP_NS, INT64_C(1767225600000000001),
						   NULL, &err) != 0 && err.code == ENGINE_ERR_UNSUPPORTED);
	CHECK(engine_sql_value(TRINO, &b, ENGINE_VALUE_DATE, INT64_C(3000000), NULL, &err) != 0 &&
		  err.code == ENGINE_ERR_INVALID_VALUE);
	CHECK(engine_sql_value(TRINO, &b, ENGINE_VALUE_STRING, 0, "\xff", &err) != 0);
	CHECK(engine_sql_column(TRINO, &b, "", &err) != 0);
	CHECK(engine_sql_column(GRAV, &b, "x", &err) != 0 && err.code == ENGINE_ERR_UNSUPPORTED);
	io_sb_free(&b);
	/* control bytes in a Spark string stay escapes */
	VALUE_IS(LIVY, ENGINE_VALUE_STRING, 0, "a\nb", "'a\\nb'");

	/* Trino's update count */
	{
		const char *const cols[] = {"rows"};
		const char *const row0[] = {"17"};
		const char *const *rows[] = {row0};
		const char *const bad0[] = {"-1"};
		const char *const *bad[] = {bad0};
		int64_t		n;

		CHECK(engine_update_count_read(cols, 1, rows, 1, &n, &err) == 0 && n == 17);
		CHECK(engine_update_count_read(NULL, 0, NULL, 0, &n, &err) == 0 && n == -1);
		CHECK(engine_update_count_read(cols, 1, bad, 1, &n, &err) != 0 &&
			  err.code == ENGINE_ERR_INVALID_RESULT);
	}
}

int
main(void)
{
	test_names();
	test_livy();
	test_trino();
	test_gravitino();
	test_engine_resources();
	test_hostile_names();
	test_trino_where();
	test_errors();
	test_placeholders_and_big();
	test_counts();
	test_renderings();
	test_delete();
	return unit_done();
}
