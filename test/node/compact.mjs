// compact.mjs -- the Parquet half of the test world's compaction (Iceberg's
// rewrite_data_files, Trino's optimize) and of its small-file table writer:
// read Iceberg data files by field id, apply position and equality deletes,
// and write real Parquet files WITH Iceberg field ids, with DuckDB
// (@duckdb/node-api; its httpfs extension is never loaded: every path here
// is local, the Python side copies s3:// objects in and out).
//
//   node test/node/compact.mjs < job.json > result.json
//   node test/node/compact.mjs --serve
//
// With --serve it reads one job a line on stdin and answers each with one
// line, {"ok": output} or {"error": text}, until stdin closes: the test
// world's callers (test/engines/compact.py run_node) keep one such process
// instead of starting Node and loading DuckDB for every job.  Each job gets
// a new in-memory database, as a process of its own would.
//
// The job (JSON on stdin):
//   mode            "compact" (default) or "write"
//   schema          the Iceberg struct to write: {fields: [{id, name, type,
//                   required}]}; primitive types only (nested ones are
//                   refused, see test/engines/compact.py)
//   inputs          compact: [{path (local), uri (as written in the
//                   manifests and in position delete files),
//                   positions: [deleted row positions],
//                   position_delete_files: [local paths of position delete
//                   files; their rows whose file_path = uri apply],
//                   equality_deletes: [{path (local), field_ids: [...]}]}]
//                   (every delete listed applies: the caller has already
//                   applied Iceberg's sequence-number rules)
//   query           write: a SQL query whose columns are named c_<field id>
//                   (rows in the query's order)
//   by_file         write: the query also has an integer column __file;
//                   each of its values is one file (file_prefix-<value,
//                   five digits>.parquet) of the rows with that value, in
//                   the query's order; output_files and rows_per_file are
//                   ignored.  All files are written by one COPY ...
//                   PARTITION_BY (__file), then read back and compared with
//                   the query's rows (each file exactly its rows, in order):
//                   DuckDB's partitioned write may reverse a partition's
//                   row chunks, so a file that differs is written again by
//                   a COPY of its own and checked again; a second mismatch
//                   is an error.
//   sort            [{field_id, direction: "asc"|"desc",
//                   nulls: "first"|"last"}]; none keeps the input order
//                   (inputs in order, rows by position)
//   output_files    how many files to split the rows into (evenly, each at
//                   least one row; the caller derives it from the target
//                   file size); or rows_per_file
//   output_dir, file_prefix   files are output_dir/file_prefix-NNNNN.parquet
//   compression     an Iceberg codec name (zstd, gzip, snappy, lz4, brotli,
//                   uncompressed); row_group_size (rows, default 122880)
//   iceberg_schema  optional JSON text stored as the "iceberg.schema"
//                   key-value metadata (Iceberg writers do; icebird reads
//                   column names through it)
// A batch {jobs: [job, ...]} runs them in one process and prints
// {results: [output, ...]}.
// Mode "read" (the reference reader of test/soakworld.py) writes nothing:
//   files           [{path (local), fields: [{id, type}]}]: every file read
//                   by field id (a field the file lacks reads as null, a
//                   narrower type is widened), no delete applied
// and prints {files: [{path, rows: [[position, value of each field, ...]]}]}
// (values as DuckDB's JSON conversion gives them: big integers, decimals,
// dates and timestamps as text).
// Output (JSON on stdout): {input_rows, deleted_rows, files: [{path,
//   file (by_file: its __file value), records, size, field_ids: {column: id} as parquet_schema() reports
//   them, column_sizes: {id: bytes}, metrics: {id: {value_count,
//   null_count, nan_count, lower, upper}}}]}.  Bounds are strings (integers,
//   days for date, microseconds for time and timestamps, the decimal text,
//   hex for binary, the text of floats) or booleans; null when the column
//   has no non-null value.  The caller encodes them as Iceberg binary.
// Rules: one DuckDB in-memory database, one thread (rows keep their order);
// one COPY per written file (by_file: one partitioned COPY for all, checked);
// the written files are read back once and
// described by three queries over all of them (parquet_schema,
// parquet_metadata, one aggregate grouped by file), not by queries per
// file; errors go to stderr with exit status 1; column names in the files
// are Avro-sanitized (as Iceberg Java writes them).

import { statSync, mkdirSync, readFileSync, readdirSync, renameSync, rmSync, existsSync } from 'node:fs'
import path from 'node:path'
import { createInterface } from 'node:readline'
import { DuckDBInstance } from '@duckdb/node-api'

const PRIMITIVE = {
  boolean: 'BOOLEAN', int: 'INTEGER', long: 'BIGINT', float: 'FLOAT', double: 'DOUBLE',
  date: 'DATE', time: 'TIME', timestamp: 'TIMESTAMP', timestamptz: 'TIMESTAMPTZ',
  timestamp_ns: 'TIMESTAMP_NS', string: 'VARCHAR', uuid: 'UUID', binary: 'BLOB',
}
const CODECS = { zstd: 'zstd', gzip: 'gzip', snappy: 'snappy', lz4: 'lz4_raw', lz4_raw: 'lz4_raw',
  brotli: 'brotli', uncompressed: 'uncompressed', none: 'uncompressed' }

function duckType(t) {
  if (typeof t !== 'string') throw new Error(`nested type ${JSON.stringify(t)} is not supported`)
  if (PRIMITIVE[t]) return PRIMITIVE[t]
  let m = /^decimal\(\s*(\d+)\s*,\s*(\d+)\s*\)$/.exec(t)
  if (m) return `DECIMAL(${m[1]}, ${m[2]})`
  m = /^fixed\[\d+\]$/.exec(t)
  if (m) return 'BLOB'
  throw new Error(`unknown Iceberg type ${t}`)
}

// Avro name sanitization, as Iceberg Java applies it to Parquet column names.
function sanitize(name) {
  let out = ''
  for (let i = 0; i < name.length; i++) {
    const ch = name.charAt(i)
    const letter = /^[A-Za-z]$/.test(ch)
    const digit = /^[0-9]$/.test(ch)
    if (i === 0 && !(letter || ch === '_')) {
      out += digit ? '_' + ch : '_x' + ch.charCodeAt(0).toString(16).toUpperCase()
    } else if (i > 0 && !(letter || digit || ch === '_')) {
      out += '_x' + ch.charCodeAt(0).toString(16).toUpperCase()
    } else out += ch
  }
  return out
}

const lit = s => `'${String(s).replace(/'/g, "''")}'`
const ident = s => `"${String(s).replace(/"/g, '""')}"`
const col = id => `c_${id}`

function schemaMap(fieldList) {
  return 'MAP {' + fieldList.map(f =>
    `${f.id}: {name: ${lit(col(f.id))}, type: ${lit(duckType(f.type))}, default_value: NULL}`).join(', ') + '}'
}

// Bounds of one column as text (see the header), by Iceberg type.
function boundExpr(f, agg) {
  const c = col(f.id)
  const t = f.type
  const v = `${agg}(${c})`
  if (t === 'date') return `CAST(date_diff('day', DATE '1970-01-01', ${v}) AS VARCHAR)`
  if (t === 'time') return `CAST(epoch_us(TIMESTAMP '1970-01-01' + ${v}) AS VARCHAR)`
  if (t === 'timestamp' || t === 'timestamptz') return `CAST(epoch_us(${v}) AS VARCHAR)`
  if (t === 'timestamp_ns') return `CAST(epoch_ns(${v}) AS VARCHAR)`
  if (t === 'float' || t === 'double') return `CAST(${agg}(${c}) FILTER (WHERE NOT isnan(${c})) AS VARCHAR)`
  if (t === 'boolean') return `${v}`
  if (t === 'binary' || /^fixed/.test(t)) return `hex(${v})`
  return `CAST(${v} AS VARCHAR)`
}

// A job or a batch {jobs: [...]}, on a database of its own.
async function runBatch(batch) {
  const db = await DuckDBInstance.create(':memory:', { threads: '1' })
  try {
    if (!batch.jobs) return await runJob(db, batch)
    const results = []
    for (const job of batch.jobs) results.push(await runJob(db, job))
    return { results }
  } finally {
    db.closeSync()
  }
}

async function main() {
  if (!process.argv.includes('--serve')) {
    const out = await runBatch(JSON.parse(readFileSync(0, 'utf8')))
    process.stdout.write(JSON.stringify(out) + '\n')
    return
  }
  for await (const line of createInterface({ input: process.stdin, crlfDelay: Infinity })) {
    if (line.trim() === '') continue
    let answer
    try {
      answer = { ok: await runBatch(JSON.parse(line)) }
    } catch (err) {
      answer = { error: `compact.mjs: ${err.stack || err}` }
    }
    process.stdout.write(JSON.stringify(answer) + '\n')
  }
}

// One job on its own connection (its temporary tables go with it).
async function runJob(db, job) {
  if (job.mode === 'read') return readFiles(db, job)
  const fields = job.schema.fields
  const byId = new Map(fields.map(f => [f.id, f]))
  const c = await db.connect()
  const all = async sql => (await c.runAndReadAll(sql)).getRowObjectsJson()
  const mode = job.mode || 'compact'
  const cols = fields.map(f => col(f.id))

  if (mode === 'write') {
    await c.run(`CREATE TEMP TABLE rows AS SELECT ${cols.join(', ')}${job.by_file ? ', __file' : ''},
                 row_number() OVER () - 1 AS __rn FROM (${job.query}) q`)
  } else {
    const parts = []
    for (let i = 0; i < job.inputs.length; i++) {
      const inp = job.inputs[i]
      await c.run(`CREATE TEMP TABLE pos_${i} (pos BIGINT)`)
      if (inp.positions?.length) {
        await c.run(`INSERT INTO pos_${i} VALUES ${inp.positions.map(p => `(${Number(p)})`).join(', ')}`)
      }
      if (inp.position_delete_files?.length) {
        await c.run(`INSERT INTO pos_${i} SELECT pos FROM read_parquet([${inp.position_delete_files.map(lit).join(', ')}])
                     WHERE file_path = ${lit(inp.uri)}`)
      }
      const conds = [`file_row_number NOT IN (SELECT pos FROM pos_${i})`]
      for (let k = 0; k < (inp.equality_deletes || []).length; k++) {
        const eq = inp.equality_deletes[k]
        const eqFields = eq.field_ids.map(id => {
          const f = byId.get(id)
          if (!f) throw new Error(`equality field ${id} is not in the schema`)
          return f
        })
        const t = `eq_${i}_${k}`
        await c.run(`CREATE TEMP TABLE ${t} AS SELECT * FROM read_parquet(${lit(eq.path)}, schema=${schemaMap(eqFields)})`)
        conds.push(`NOT EXISTS (SELECT 1 FROM ${t} d WHERE ${eqFields.map(f =>
          `d.${col(f.id)} IS NOT DISTINCT FROM s.${col(f.id)}`).join(' AND ')})`)
      }
      parts.push(`SELECT ${cols.map(x => 's.' + x).join(', ')}, ${i} AS __f, s.file_row_number AS __r
                  FROM read_parquet(${lit(inp.path)}, file_row_number=true, schema=${schemaMap(fields)}) s
                  WHERE ${conds.join(' AND ')}`)
    }
    const order = job.sort?.length
      ? job.sort.map(s => `${col(s.field_id)} ${s.direction === 'desc' ? 'DESC' : 'ASC'} NULLS ${
        s.nulls === 'last' ? 'LAST' : s.nulls === 'first' ? 'FIRST' : (s.direction === 'desc' ? 'LAST' : 'FIRST')}`).join(', ') + ', __f, __r'
      : '__f, __r'
    await c.run(`CREATE TEMP TABLE rows AS SELECT ${cols.join(', ')}, row_number() OVER (ORDER BY ${order}) - 1 AS __rn
                 FROM (${parts.join(' UNION ALL ')}) u`)
  }

  const total = Number((await all('SELECT count(*) AS n FROM rows'))[0].n)
  let inputRows = total
  if (mode !== 'write') {
    inputRows = 0
    for (const inp of job.inputs) {
      inputRows += Number((await all(`SELECT num_rows AS n FROM parquet_file_metadata(${lit(inp.path)})`))[0].n)
    }
  }
  mkdirSync(job.output_dir, { recursive: true })
  const codec = CODECS[(job.compression || 'zstd').toLowerCase()]
  if (!codec) throw new Error(`unknown compression codec ${job.compression}`)
  const names = fields.map(f => sanitize(f.name))
  const fieldIds = '{' + fields.map((f, i) => `${ident(names[i])}: ${f.id}`).join(', ') + '}'
  const kv = job.iceberg_schema ? `, KV_METADATA {'iceberg.schema': ${lit(job.iceberg_schema)}}` : ''
  const rowGroup = Number(job.row_group_size || 122880)
  const options = `FORMAT PARQUET, FIELD_IDS ${fieldIds}, COMPRESSION ${codec}, ROW_GROUP_SIZE ${rowGroup}${kv}`
  const select = fields.map((f, i) => `${col(f.id)} AS ${ident(names[i])}`).join(', ')
  const fileName = n => path.join(job.output_dir, `${job.file_prefix || 'data'}-${String(n).padStart(5, '0')}.parquet`)
  // which rows each file holds: a condition on rows, in __rn order
  const written = []
  const copyOne = w => c.run(`COPY (SELECT ${select} FROM rows WHERE ${w.where} ORDER BY __rn) TO ${lit(w.path)} (${options})`)
  if (mode === 'write' && job.by_file) {
    for (const r of await all('SELECT DISTINCT __file AS k FROM rows ORDER BY 1')) {
      const k = Number(r.k)
      if (!Number.isInteger(k) || k < 0) throw new Error(`bad __file value ${r.k}`)
      written.push({ file: k, path: fileName(k), where: `__file = ${k}` })
    }
    // all files by one partitioned COPY; a partition DuckDB did not write
    // as exactly one file is written again by its own COPY
    const staging = fileName('partitions').replace(/\.parquet$/, '')
    await c.run(`COPY (SELECT ${select}, __file FROM rows ORDER BY __rn) TO ${lit(staging)}
                 (${options}, PARTITION_BY (__file))`)
    for (const w of written) {
      const dir = path.join(staging, `__file=${w.file}`)
      const inside = existsSync(dir) ? readdirSync(dir) : []
      if (inside.length === 1) renameSync(path.join(dir, inside[0]), w.path)
      else await copyOne(w)
    }
    rmSync(staging, { recursive: true })
  } else {
    let perFile
    if (job.rows_per_file) perFile = Math.max(1, Number(job.rows_per_file))
    else perFile = Math.max(1, Math.ceil(total / Math.max(1, Number(job.output_files || 1))))
    const nfiles = total === 0 ? 0 : Math.ceil(total / perFile)
    for (let n = 0; n < nfiles; n++) {
      written.push({ path: fileName(n), where: `__rn >= ${n * perFile} AND __rn < ${(n + 1) * perFile}` })
      await copyOne(written.at(-1))
    }
  }
  const files = await describe(c, all, written, fields, names, copyOne)
  c.closeSync()
  return { input_rows: inputRows, deleted_rows: inputRows - total, files }
}

// The written files read back (once, into the temporary table back), by_file
// checked against the rows (every file holds exactly the rows of its
// __file value, in the query's order: position in the file = rank by
// __rn) -- DuckDB's partitioned COPY may put a partition's rows out of
// order, so a file that fails the check is written again by its own COPY
// (copyOne) and checked again, a second failure is an error -- and what the
// manifests need of each file: field ids, column sizes, and the counts and
// bounds of its rows, by three queries over all of them.
async function describe(c, all, written, fields, names, copyOne) {
  if (!written.length) return []
  const cols = fields.map(f => col(f.id))
  const listOf = ws => '[' + ws.map(w => lit(w.path)).join(', ') + ']'
  const list = listOf(written)
  const readBack = ws => `SELECT * FROM read_parquet(${listOf(ws)}, file_row_number=true, filename=true,
                          schema=${schemaMap(fields)})`
  await c.run(`CREATE TEMP TABLE back AS ${readBack(written)}`)
  if (written[0].file !== undefined) {
    await c.run(`CREATE TEMP TABLE src AS SELECT ${cols.join(', ')}, __file,
                 row_number() OVER (PARTITION BY __file ORDER BY __rn) - 1 AS pos FROM rows`)
    await c.run(`CREATE TEMP TABLE paths AS SELECT * FROM (VALUES ${written.map(w =>
      `(${lit(w.path)}, ${w.file})`).join(', ')}) f(p, k)`)
    const misplaced = async () => (await all(`
      SELECT DISTINCT coalesce(src.__file, b.k) AS k
      FROM src FULL JOIN (SELECT back.*, paths.k FROM back JOIN paths ON back.filename = paths.p) b
           ON src.__file = b.k AND src.pos = b.file_row_number
      WHERE src.pos IS NULL OR b.k IS NULL OR ${cols.map(x => `src.${x} IS DISTINCT FROM b.${x}`).join(' OR ')}
      ORDER BY 1`)).map(r => Number(r.k))
    const bad = await misplaced()
    if (bad.length) {
      const badSet = new Set(bad)
      const redo = written.filter(w => badSet.has(w.file))
      for (const w of redo) await copyOne(w)
      await c.run(`DELETE FROM back WHERE filename IN (SELECT p FROM paths WHERE k IN (${bad.join(', ')}))`)
      await c.run(`INSERT INTO back ${readBack(redo)}`)
      const still = await misplaced()
      if (still.length) throw new Error(`files ${still.slice(0, 10).join(', ')} do not hold their rows in the query's order`)
    }
    await c.run('DROP TABLE src')
    await c.run('DROP TABLE paths')
  }
  const byPath = new Map(written.map(w => [w.path, { path: w.path, ...(w.file !== undefined ? { file: w.file } : {}),
    records: 0, field_ids: {}, column_sizes: {}, metrics: undefined }]))
  for (const r of await all(`SELECT file_name, name, field_id FROM parquet_schema(${list})`)) {
    if (r.field_id !== null) byPath.get(r.file_name).field_ids[r.name] = Number(r.field_id)
  }
  for (const r of await all(`SELECT file_name, path_in_schema AS p, sum(total_compressed_size) AS s
                              FROM parquet_metadata(${list}) GROUP BY ALL`)) {
    const i = names.indexOf(r.p)
    if (i >= 0) byPath.get(r.file_name).column_sizes[fields[i].id] = Number(r.s)
  }
  const aggs = ['filename AS __path', 'count(*) AS n']
  for (const f of fields) {
    const x = col(f.id)
    aggs.push(`count(${x}) AS nn_${f.id}`, `${boundExpr(f, 'min')} AS lo_${f.id}`, `${boundExpr(f, 'max')} AS hi_${f.id}`)
    if (f.type === 'float' || f.type === 'double') aggs.push(`count(*) FILTER (WHERE isnan(${x})) AS nan_${f.id}`)
  }
  for (const m of await all(`SELECT ${aggs.join(', ')} FROM back GROUP BY filename`)) {
    const out = byPath.get(m.__path)
    out.records = Number(m.n)
    out.metrics = {}
    for (const f of fields) {
      out.metrics[f.id] = { value_count: out.records, null_count: out.records - Number(m[`nn_${f.id}`]),
        nan_count: m[`nan_${f.id}`] === undefined ? null : Number(m[`nan_${f.id}`]),
        lower: m[`lo_${f.id}`], upper: m[`hi_${f.id}`] }
    }
  }
  await c.run('DROP TABLE back')
  return written.map(w => {
    const out = byPath.get(w.path)
    if (out.metrics === undefined) throw new Error(`${w.path} holds no row`)
    return { ...out, size: statSync(w.path).size }
  })
}

// Mode "read": the rows of each file by field id, in file order, with
// their positions; files of one field list are read by one query.
async function readFiles(db, job) {
  const c = await db.connect()
  const groups = new Map()
  for (const f of job.files) {
    const key = JSON.stringify(f.fields)
    if (!groups.has(key)) groups.set(key, [])
    groups.get(key).push(f.path)
  }
  const byPath = new Map(job.files.map(f => [f.path, []]))
  for (const [key, paths] of groups) {
    const fields = JSON.parse(key)
    const cols = fields.map(f => col(f.id))
    const sql = `SELECT filename, file_row_number, ${cols.join(', ')}
                 FROM read_parquet([${paths.map(lit).join(', ')}], filename=true, file_row_number=true,
                                   schema=${schemaMap(fields)})
                 ORDER BY filename, file_row_number`
    for (const r of (await c.runAndReadAll(sql)).getRowsJson()) {
      byPath.get(r[0]).push([Number(r[1]), ...r.slice(2)])
    }
  }
  c.closeSync()
  return { files: job.files.map(f => ({ path: f.path, rows: byPath.get(f.path) })) }
}

main().catch(err => {
  process.stderr.write(`compact.mjs: ${err.stack || err}\n`)
  process.exit(1)
})
