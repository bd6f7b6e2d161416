// bench/iceberg_icebird.js -- icebird (0.3.1, pinned in test/node/package.json)
// decoding the same manifests as bench/iceberg_manifest_bench.c: every
// m-*.avro under DIR/metadata is loaded into memory first, then decoded
// with icebird's avroMetadata + avroRead (what icebergManifests() runs per
// manifest, minus fetch).  Prints entries/s and MB/s of compressed bytes.
//
//   node bench/iceberg_icebird.js DIR [MODULE_DIR]
import fs from 'node:fs'
import path from 'node:path'
import { pathToFileURL } from 'node:url'

const dir = process.argv[2]
const moduleDir = process.argv[3] ?? path.resolve('test/node/node_modules/icebird')
const { avroMetadata, avroRead } = await import(pathToFileURL(path.join(moduleDir, 'src/index.js')).href)

const mdir = path.join(dir, 'metadata')
const files = fs.readdirSync(mdir).filter(f => f.startsWith('m-')).sort()
const buffers = files.map(f => fs.readFileSync(path.join(mdir, f)))
const total = buffers.reduce((a, b) => a + b.length, 0)

let best = Infinity
let entries = 0
let checksum = 0n
const reps = Number(process.env.ICEBIRD_REPS ?? 1)
for (let rep = 0; rep < reps; rep++) {
  const t0 = process.hrtime.bigint()
  entries = 0
  checksum = 0n
  for (const buf of buffers) {
    const reader = { view: new DataView(buf.buffer, buf.byteOffset, buf.byteLength), offset: 0 }
    const { metadata, syncMarker } = avroMetadata(reader)
    const records = avroRead({ reader, metadata, syncMarker })
    for (const r of records) {
      entries++
      checksum += BigInt(r.data_file.file_size_in_bytes) + BigInt(r.data_file.record_count)
    }
  }
  const s = Number(process.hrtime.bigint() - t0) / 1e9
  if (s < best) best = s
}
console.log(`icebird 0.3.1 (best of ${reps})      ${best.toFixed(3).padStart(10)} ${(entries / best).toFixed(0).padStart(12)} ${(total / 1e6 / best).toFixed(1).padStart(14)}   entries ${entries} checksum ${checksum}`)
