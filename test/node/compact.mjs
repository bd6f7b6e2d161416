// compact.mjs -- the Parquet half of the test world's compaction (Iceberg's
// rewrite_data_files, Trino's optimize) and of its small-file table writer:
// read Iceberg data files by field id, apply position and equality deletes,
// and write real Parquet files WITH Iceberg field ids, with DuckDB
// (@duckdb/node-api; its httpfs extension is never loaded: every path here
// is local, the Python side copies s3:// objects in and out).
//
//   node test/node/compact.mjs < job.json > result.json
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
// Output (JSON on stdout): {input_rows, deleted_rows, files: [{path,
//   records, size, field_ids: {column: id} as parquet_schema() reports
//   them, column_sizes: {id: bytes}, metrics: {id: {value_count,
//   null_count, nan_count, lower, upper}}}]}.  Bounds are strings (integers,
//   days for date, microseconds for time and timestamps, the decimal text,
//   hex for binary, the text of floats) or booleans; null when the column
//   has no non-null value.  The caller encodes them as Iceberg binary.
// Rules: one DuckDB in-memory database, one thread (rows keep their order);
// errors go to stderr with exit status 1; column names in the files are
// Avro-sanitized (as Iceberg Java writes them).

import { statSync, mkdirSync, readFileSync } from 'node:fs'
import path from 'node:path'
import { DuckDBInstance } from '@duckdb/node-api'

const batch = JSON.parse(readFileSync(0, 'utf8'))

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

async function main() {
  const db = await DuckDBInstance.create(':memory:', { threads: '1' })
  if (!batch.jobs) {
    process.stdout.write(JSON.stringify(await runJob(db, batch)) + '\n')
    return
  }
  const results = []
  for (const job of batch.jobs) results.push(await runJob(db, job))
  process.stdout.write(JSON.stringify({ results }) + '\n')
}

// One job on its own connection (its temporary tables go with it).
async function runJob(db, job) {
  const fields = job.schema.fields
  const byId = new Map(fields.map(f => [f.id, f]))
  const c = await db.connect()
  const all = async sql => (await c.runAndReadAll(sql)).getRowObjectsJson()
  const mode = job.mode || 'compact'
  const cols = fields.map(f => col(f.id))

  if (mode === 'write') {
    await c.run(`CREATE TEMP TABLE rows AS SELECT ${cols.join(', ')}, row_number() OVER () - 1 AS __rn
                 FROM (${job.query}) q`)
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
  let perFile
  if (job.rows_per_file) perFile = Math.max(1, Number(job.rows_per_file))
  else perFile = Math.max(1, Math.ceil(total / Math.max(1, Number(job.output_files || 1))))
  const nfiles = total === 0 ? 0 : Math.ceil(total / perFile)

  mkdirSync(job.output_dir, { recursive: true })
  const codec = CODECS[(job.compression || 'zstd').toLowerCase()]
  if (!codec) throw new Error(`unknown compression codec ${job.compression}`)
  const names = fields.map(f => sanitize(f.name))
  const fieldIds = '{' + fields.map((f, i) => `${ident(names[i])}: ${f.id}`).join(', ') + '}'
  const kv = job.iceberg_schema ? `, KV_METADATA {'iceberg.schema': ${lit(job.iceberg_schema)}}` : ''
  const rowGroup = Number(job.row_group_size || 122880)
  const select = fields.map((f, i) => `${col(f.id)} AS ${ident(names[i])}`).join(', ')
  const files = []
  for (let n = 0; n < nfiles; n++) {
    const out = path.join(job.output_dir, `${job.file_prefix || 'data'}-${String(n).padStart(5, '0')}.parquet`)
    await c.run(`COPY (SELECT ${select} FROM rows WHERE __rn >= ${n * perFile} AND __rn < ${(n + 1) * perFile} ORDER BY __rn)
                 TO ${lit(out)} (FORMAT PARQUET, FIELD_IDS ${fieldIds}, COMPRESSION ${codec}, ROW_GROUP_SIZE ${rowGroup}${kv})`)
    const schemaRows = await all(`SELECT name, field_id FROM parquet_schema(${lit(out)})`)
    const ids = {}
    for (const r of schemaRows) if (r.field_id !== null) ids[r.name] = Number(r.field_id)
    const sizes = {}
    for (const r of await all(`SELECT path_in_schema AS p, sum(total_compressed_size) AS s
                                FROM parquet_metadata(${lit(out)}) GROUP BY path_in_schema`)) {
      const i = names.indexOf(r.p)
      if (i >= 0) sizes[fields[i].id] = Number(r.s)
    }
    const aggs = ['count(*) AS n']
    for (const f of fields) {
      const x = col(f.id)
      aggs.push(`count(${x}) AS nn_${f.id}`, `${boundExpr(f, 'min')} AS lo_${f.id}`, `${boundExpr(f, 'max')} AS hi_${f.id}`)
      if (f.type === 'float' || f.type === 'double') aggs.push(`count(*) FILTER (WHERE isnan(${x})) AS nan_${f.id}`)
    }
    const m = (await all(`SELECT ${aggs.join(', ')} FROM read_parquet(${lit(out)}, schema=${schemaMap(fields)})`))[0]
    const records = Number(m.n)
    const metrics = {}
    for (const f of fields) {
      const nonNull = Number(m[`nn_${f.id}`])
      metrics[f.id] = { value_count: records, null_count: records - nonNull,
        nan_count: m[`nan_${f.id}`] === undefined ? null : Number(m[`nan_${f.id}`]),
        lower: m[`lo_${f.id}`], upper: m[`hi_${f.id}`] }
    }
    files.push({ path: out, records, size: statSync(out).size, field_ids: ids, column_sizes: sizes, metrics })
  }
  c.closeSync()
  return { input_rows: inputRows, deleted_rows: inputRows - total, files }
}

main().catch(err => {
  process.stderr.write(`compact.mjs: ${err.stack || err}\n`)
  process.exit(1)
})
