// duckdb_sql.mjs -- run SQL statements with DuckDB (@duckdb/node-api) for
// the tests that write Parquet of any Iceberg type (nested ones included,
// with COPY ... FIELD_IDS at every depth) and read it back independently
// of tms.  Every path is local; httpfs is never loaded.
//
//   node test/node/duckdb_sql.mjs < {"statements": ["...", ...]}
//
// Output (JSON on stdout): {"results": [rows, ...]}, one list of rows per
// statement, each row an object of its columns as DuckDB's JSON form gives
// them (structs as objects, lists as arrays, maps as [{key, value}],
// BIGINT and DECIMAL as strings, BLOB as a string of \xNN escapes).
// Rules: one in-memory database, one thread; a failing statement fails
// the run (its message on stderr, exit status 1).
import { DuckDBInstance } from '@duckdb/node-api'

let input = ''
for await (const chunk of process.stdin) input += chunk
const job = JSON.parse(input)
const inst = await DuckDBInstance.create(':memory:', { threads: '1' })
const con = await inst.connect()
const results = []
for (const sql of job.statements) {
  try {
    const r = await con.runAndReadAll(sql)
    results.push(r.getRowObjectsJson())
  } catch (e) {
    process.stderr.write(`statement failed: ${e.message}\n${sql}\n`)
    process.exit(1)
  }
}
process.stdout.write(JSON.stringify({ results }) + '\n')
