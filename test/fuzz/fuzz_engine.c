/*-------------------------------------------------------------------------
 *
 * fuzz_engine.c
 *	  libFuzzer target for src/engine: the option checks, the statements
 *	  built from them, the Trino WHERE tokeniser and the result counts.
 *
 * The input is: one byte choosing the engine and operation, one byte
 * choosing the mode, then NUL-separated parts: the options JSON, a table
 * name, a namespace name.  For every input:
 *	- engine_statement_build either fails with a known code and no text,
 *	  or returns a text whose structure is fixed whatever the names and
 *	  values:
 *	    livy: one CALL of `lake`.system.<proc>(...), and outside Spark
 *	    string literals and backtick identifiers no ';', no comment, no
 *	    newline, parentheses balanced and closed only at the end;
 *	    trino: the whole statement passes the WHERE tokeniser (no ';',
 *	    no comment, balanced), and starts with ALTER TABLE "lake";
 *	    gravitino: valid JSON, an object whose jobConf is an object of
 *	    strings holding "tms_tag";
 *	- engine_options_check fails whenever the build fails for the same
 *	  options on a valid target with a code other than INVALID_NAME;
 *	- engine_counts_read on lines of the input as cells never returns a
 *	  count below -1;
 *	- a DELETE FROM ... WHERE (engine_delete.c) whose column and literals
 *	  come from the input keeps the structure above (livy: outside
 *	  literals and identifiers no ';', comment or newline, parentheses
 *	  closed at the end; trino: the tokeniser passes it), or a piece is
 *	  refused with a known code.
 * Any violation aborts; ASan/UBSan and the leak checker do the rest.
 *
 * Build: make fuzz-engine (this file with every .c file of src/engine).
 * Seed corpus: test/fuzz/corpus/engine/.
 *
 * test/fuzz/fuzz_engine.c
 *
 *-------------------------------------------------------------------------
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "engine/statement_int.h"

int			LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The livy text's structure, outside literals and identifiers. */
static void
check_spark(const char *s, const char *prefix)
{
	int			depth = 0;
	bool		closed = false;
	const char *p;

	if (strncmp(s, prefix, strlen(prefix)) != 0)
		abort();
	for (p = s; *p; p++)
	{
		if (closed)
			abort();			/* nothing after the final ')' */
		if (*p == '\'')
		{
			for (p++; *p && *p != '\''; p++)
			{
				if (*p == '\\')
				{
					p++;
					if (*p == '\0')
						abort();
				}
				if (*p == '\n' || *p == '\r')
					abort();	/* a literal stays on one line */
			}
			if (*p != '\'')
				abort();
			continue;
		}
		if (*p == '`')
		{
			for (p++; *p; p++)
				if (*p == '`')
				{
					if (p[1] == '`')
						p++;
					else
						break;
				}
			if (*p != '`')
				abort();
			continue;
		}
		if (*p == ';' || *p == '\n' || (*p == '-' && p[1] == '-') || (*p == '/' && p[1] == '*'))
			abort();
		if (*p == '(')
			depth++;
		if (*p == ')')
		{
			if (--depth < 0)
				abort();
			if (depth == 0)
				closed = true;
		}
	}
	if (!closed)
		abort();
}

static void
check_gravitino(const char *s)
{
	TmsError	err;
	EngJson    *doc = eng_json_parse(s, strlen(s), &err);
	EngJson    *conf = NULL;
	bool		tag = false;
	size_t		i;

	if (doc == NULL)
	{
		if (err.code == ENGINE_ERR_OUT_OF_MEMORY)
			return;
		abort();
	}
	if (doc->kind != EJ_OBJECT || doc->nitems != 2 ||
		strcmp(doc->keys[0], "jobTemplateName") != 0 || strcmp(doc->keys[1], "jobConf") != 0)
		abort();
	conf = doc->items[1];
	if (conf->kind != EJ_OBJECT)
		abort();
	for (i = 0; i < conf->nitems; i++)
	{
		if (conf->items[i]->kind != EJ_STRING)
			abort();
		if (strcmp(conf->keys[i], "tms_tag") == 0)
			tag = true;
	}
	if (!tag)
		abort();
	eng_json_free(doc);
}

/*
 * A DELETE (engine_delete.c) whose predicate names column parts[1] and
 * compares it with the string parts[2] and a number or timestamp of its
 * bytes: its structure is fixed whatever they hold (as check_spark, and
 * Trino's tokeniser), or the pieces are refused with a known code.
 */
static void
check_delete(EngineType type, const char *const *parts, uint8_t flags)
{
	static const char *const ns[1] = {"sa`l\"es"};
	EngineTarget t = {"lake", ns, 1, parts[2]};
	EngineStatement st;
	TmsError	err;
	IoStrBuf	b;
	uint64_t	v = 0;
	char	   *pred;
	int			rc = 0;

	for (const char *p = parts[2]; *p; p++)
		v = v * 131 + (unsigned char) *p;
	io_sb_init(&b);
	io_sb_puts(&b, "((");
	rc |= engine_sql_column(type, &b, parts[1], &err);
	io_sb_puts(&b, " = ");
	rc |= engine_sql_value(type, &b, ENGINE_VALUE_STRING, 0, parts[2], &err);
	io_sb_puts(&b, ") OR (");
	rc |= engine_sql_column(type, &b, parts[1], &err);
	io_sb_puts(&b, " < ");
	rc |= engine_sql_value(type, &b, (EngineValueKind) (flags % 8), (int64_t) v, parts[2], &err);
	io_sb_puts(&b, "))");
	pred = io_sb_steal(&b);
	if (rc != 0)
	{
		if (err.code <= ENGINE_OK || err.code > ENGINE_ERR_OUT_OF_MEMORY || err.message[0] == '\0')
			abort();
		io_free(pred);
		return;
	}
	if (pred == NULL)
		return;
	if (engine_delete_build(type, &t, pred, &st, &err) != 0)
	{
		if (st.text != NULL || err.code != ENGINE_ERR_INVALID_NAME)
			abort();
		io_free(pred);
		return;
	}
	if (type == ENGINE_TYPE_LIVY)
		check_spark(st.text, "DELETE FROM `lake`.`sa``l\"es`.");
	else if (strncmp(st.text, "DELETE FROM \"lake\".\"sa`l\"\"es\".", 30) != 0 ||
			 eng_trino_where_check(st.text, &err) != 0)
		abort();
	engine_statement_free(&st);
	io_free(pred);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char	   *buf;
	const char *parts[3] = {"", "orders", "sales"};
	size_t		np = 0;
	size_t		i;
	EngineType	type;
	EngineOperation op;
	int			mode;
	EngineStatement st;
	TmsError	err;
	TmsError	err2;
	const char *ns[1];
	EngineTarget t;
	int			rc;

	if (size < 2 || size > 70000)
		return 0;
	type = (EngineType) (data[0] % 3);
	op = (EngineOperation) ((data[0] / 3) % 5);
	mode = data[1] % 4;
	buf = io_malloc(size - 1);
	if (buf == NULL)
		return 0;
	memcpy(buf, data + 2, size - 2);
	buf[size - 2] = '\0';
	/* NUL-separated parts */
	parts[np++] = buf;
	for (i = 0; i < size - 2 && np < 3; i++)
		if (buf[i] == '\0')
			parts[np++] = buf + i + 1;

	if (mode == 3)
	{
		/* counts: lines as the cells of one column, named by the first */
		const char *cells[64];
		const char *const *rows[64];
		const char *cols[2];
		size_t		n = 0;
		char	   *line = buf;
		EngineCounts c;

		while (line && n < 64)
		{
			char	   *nl = strchr(line, '\n');

			if (nl)
				*nl = '\0';
			cells[n] = (n % 7 == 5) ? NULL : line;
			rows[n] = &cells[n];
			n++;
			line = nl ? nl + 1 : NULL;
		}
		cols[0] = cells[0] ? cells[0] : "x";
		cols[1] = "metric_value";
		if (engine_counts_read(type, op, cols, 1, rows, n, &c, &err) == 0)
		{
			if (c.data_files_rewritten < -1 || c.data_files_added < -1 ||
				c.bytes_rewritten < -1 || c.delete_files_rewritten < -1 ||
				c.delete_files_added < -1 || c.manifests_rewritten < -1 ||
				c.manifests_added < -1 || c.files_deleted < -1 || c.orphans_found < -1)
				abort();
		}
		else if (err.code != ENGINE_ERR_INVALID_RESULT)
			abort();
		io_free(buf);
		return 0;
	}
	if (mode == 2)
	{
		/* the tokeniser alone */
		if (eng_trino_where_check(buf, &err) != 0 && err.code != ENGINE_ERR_INVALID_VALUE)
			abort();
		io_free(buf);
		return 0;
	}

	if (mode == 1 && (data[1] & 0x40) && type != ENGINE_TYPE_GRAVITINO)
	{
		check_delete(type, parts, data[1]);
		io_free(buf);
		return 0;
	}
	ns[0] = mode == 1 ? parts[2] : "sales";
	t.catalog = "lake";
	t.ns = ns;
	t.nns = 1;
	t.table = mode == 1 ? parts[1] : "orders";
	rc = engine_statement_build(type, engine_op_name(op), &t, parts[0], "tms-job-1",
								INT64_C(1794096000000), &st, &err);
	if (rc != 0)
	{
		if (st.text != NULL || err.code <= ENGINE_OK || err.code > ENGINE_ERR_OUT_OF_MEMORY)
			abort();
		if (err.message[0] == '\0')
			abort();
		if (mode == 0 && err.code != ENGINE_ERR_INVALID_NAME &&
			!(type == ENGINE_TYPE_GRAVITINO && err.code == ENGINE_ERR_INVALID_VALUE) &&
			!(type == ENGINE_TYPE_LIVY && err.code == ENGINE_ERR_INVALID_VALUE) &&
			engine_options_check(type, engine_op_name(op), parts[0], &err2) == 0)
			abort();
		io_free(buf);
		return 0;
	}
	if (st.text == NULL)
		abort();
	if (engine_options_check(type, engine_op_name(op), parts[0], &err2) != 0)
		abort();				/* built, so the check must pass */
	switch (type)
	{
		case ENGINE_TYPE_LIVY:
			check_spark(st.text, "CALL `lake`.system.");
			break;
		case ENGINE_TYPE_TRINO:
			if (strncmp(st.text, "ALTER TABLE \"lake\".", 19) != 0 ||
				eng_trino_where_check(st.text, &err) != 0)
				abort();
			break;
		case ENGINE_TYPE_GRAVITINO:
			check_gravitino(st.text);
			break;
		default:
			abort();
	}
	engine_statement_free(&st);
	io_free(buf);
	return 0;
}
