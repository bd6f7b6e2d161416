// icebird_count.mjs -- read an Iceberg table with icebird (an independent
// JavaScript reader) and print what it found, as JSON.
//
//   node test/node/icebird_count.mjs --metadata URI [--s3-endpoint URL]
//        [--file-root DIR] [--read-rows] [--list-files] [--dump-rows]
//   node test/node/icebird_count.mjs --serve
//
// With --serve it reads one job a line on stdin, {"argv": [the arguments
// above]}, and answers each with one line, {"ok": output} or {"error":
// text}, until stdin closes (test/nodeserve.py keeps one such process per
// calling thread instead of starting Node and loading icebird for every
// read).
//
// URI is the table's metadata JSON (file:///..., /abs, s3://, s3a://).
// icebird fetches everything with fetch(); this script installs a fetch that
//   * sends https://BUCKET.s3.amazonaws.com/KEY (icebird's rewrite of s3://
//     and s3a://) to --s3-endpoint as path-style http://ENDPOINT/BUCKET/KEY
//     (s3rver allows anonymous GET),
//   * serves file:///abs, /abs, file://host/rest and relative paths from the
//     local disk (relative ones and file://host/... against --file-root),
//     with Range support for hyparquet.
// The metadata file is read here (gzip too) and handed to icebird's
// icebergManifests(), which walks the current snapshot's manifest list and
// manifests.  Output: manifests, live data / position-delete / equality-
// delete entries, deleted entries, the live data files' record total and,
// with --read-rows, the row count icebergRead() returns (needs real Parquet);
// with --list-files, "files": every live entry as {path, content, records,
// size} (content 0 data, 1 position deletes, 2 equality deletes); with
// --dump-rows (implies --read-rows), "row_values": every row icebergRead()
// returns, as JSON (bigints as decimal text, dates and timestamps as ISO
// text, bytes as hex), for tests that compare a table's rows.

import { readFileSync, statSync } from 'node:fs'
import { gunzipSync } from 'node:zlib'
import path from 'node:path'
import { createInterface } from 'node:readline'
import { icebergManifests, icebergRead } from 'icebird'

// The arguments (without node and the script's name).
function parseArgs(argv) {
  const out = { readRows: false, listFiles: false, dumpRows: false }
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]
    if (a === '--metadata') out.metadata = argv[++i]
    else if (a === '--s3-endpoint') out.s3 = argv[++i].replace(/\/$/, '')
    else if (a === '--file-root') out.fileRoot = argv[++i]
    else if (a === '--read-rows') out.readRows = true
    else if (a === '--list-files') out.listFiles = true
    else if (a === '--dump-rows') { out.readRows = true; out.dumpRows = true }
    else throw new Error(`unknown argument ${a}`)
  }
  if (!out.metadata) throw new Error('--metadata is required')
  out.fileRoot = out.fileRoot || process.cwd()
  return out
}

// the read under way (one at a time, also when serving)
let args = null
const realFetch = globalThis.fetch

// Map a non-S3 URI to a local path (same rules as test/catalog/storage.py).
function localPath(uri) {
  if (uri.startsWith('file://')) {
    const rest = uri.slice('file://'.length)
    if (rest.startsWith('/')) return decodeURIComponent(rest)
    return path.join(args.fileRoot, decodeURIComponent(rest))
  }
  if (uri.startsWith('/')) return uri
  return path.join(args.fileRoot, uri)
}

function s3Url(uri) {
  const m = /^https:\/\/([^./]+)\.s3\.amazonaws\.com(\/.*)$/.exec(uri)
  if (m) return `${args.s3}/${m[1]}${m[2]}`
  const n = /^s3a?:\/\/([^/]+)(\/.*)$/.exec(uri)
  if (n) return `${args.s3}/${n[1]}${n[2]}`
  return null
}

globalThis.fetch = async (input, init = {}) => {
  const uri = typeof input === 'string' ? input : input.url
  const s3 = s3Url(uri)
  if (s3) {
    if (!args.s3) throw new Error(`no --s3-endpoint for ${uri}`)
    return realFetch(s3, init)
  }
  if (/^https?:\/\//.test(uri)) return realFetch(input, init)
  const file = localPath(uri)
  let size
  try {
    size = statSync(file).size
  } catch {
    return new Response('not found', { status: 404, statusText: 'Not Found' })
  }
  if ((init.method || 'GET') === 'HEAD') {
    return new Response(null, { status: 200, headers: { 'content-length': String(size) } })
  }
  const data = readFileSync(file)
  const headers = init.headers instanceof Headers ? Object.fromEntries(init.headers) : (init.headers || {})
  const range = headers.Range || headers.range
  if (range) {
    const m = /bytes=(\d*)-(\d*)/.exec(range)
    let start = m[1] === '' ? size - Number(m[2]) : Number(m[1])
    let end = m[1] === '' ? size - 1 : (m[2] === '' ? size - 1 : Number(m[2]))
    start = Math.max(0, start)
    end = Math.min(size - 1, end)
    return new Response(data.subarray(start, end + 1), {
      status: 206,
      headers: { 'content-length': String(end - start + 1),
        'content-range': `bytes ${start}-${end}/${size}` },
    })
  }
  return new Response(data, { status: 200, headers: { 'content-length': String(size) } })
}

// A row as plain JSON values (see --dump-rows).
function plainValue(v) {
  if (typeof v === 'bigint') return v.toString()
  if (v instanceof Date) return v.toISOString()
  if (v instanceof Uint8Array) return Buffer.from(v).toString('hex')
  if (Array.isArray(v)) return v.map(plainValue)
  if (v && typeof v === 'object') {
    return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, plainValue(x)]))
  }
  return v === undefined ? null : v
}

function plainRow(row) {
  return plainValue(row)
}

// Read the table args name; the output object.
async function count(argv) {
  args = parseArgs(argv)
  const res = await globalThis.fetch(args.metadata)
  if (!res.ok) throw new Error(`cannot read ${args.metadata}: ${res.status}`)
  let bytes = Buffer.from(await res.arrayBuffer())
  if (bytes[0] === 0x1f && bytes[1] === 0x8b) bytes = gunzipSync(bytes)
  const metadata = JSON.parse(bytes.toString('utf8'))
  const manifests = await icebergManifests(metadata)
  const out = {
    format_version: metadata['format-version'],
    manifests: manifests.length,
    data_files: 0,
    position_delete_files: 0,
    equality_delete_files: 0,
    deleted_entries: 0,
    records: 0,
  }
  if (args.listFiles) out.files = []
  for (const { entries } of manifests) {
    for (const e of entries) {
      if (e.status === 2) { out.deleted_entries++; continue }
      const content = Number(e.data_file.content ?? 0)
      if (out.files) {
        out.files.push({ path: e.data_file.file_path, content,
          records: Number(e.data_file.record_count),
          size: Number(e.data_file.file_size_in_bytes) })
      }
      if (content === 0) {
        out.data_files++
        out.records += Number(e.data_file.record_count)
      } else if (content === 1) out.position_delete_files++
      else if (content === 2) out.equality_delete_files++
    }
  }
  if (args.readRows) {
    const rows = await icebergRead({ tableUrl: metadata.location, metadata })
    out.rows = rows.length
    if (args.dumpRows) out.row_values = rows.map(plainRow)
  }
  return out
}

async function main() {
  const argv = process.argv.slice(2)
  if (!argv.includes('--serve')) {
    process.stdout.write(JSON.stringify(await count(argv)) + '\n')
    return
  }
  for await (const line of createInterface({ input: process.stdin, crlfDelay: Infinity })) {
    if (line.trim() === '') continue
    let answer
    try {
      answer = { ok: await count(JSON.parse(line).argv) }
    } catch (err) {
      answer = { error: `icebird_count: ${err.stack || err}` }
    }
    process.stdout.write(JSON.stringify(answer) + '\n')
  }
}

main().catch(err => {
  process.stderr.write(`icebird_count: ${err.stack || err}\n`)
  process.exit(1)
})
