// iceberg_js_conformance.mjs -- drive a REST catalog with iceberg-js, a
// third-party client, and check every answer.
//
//   node test/node/iceberg_js_conformance.mjs --uri http://127.0.0.1:PORT
//        --warehouse NAME [--token TOKEN] [--namespace NS]
//
// Steps: config (prefix), create namespace, list namespaces (also with a
// page size), load namespace, create table, list tables, load table (ETag,
// then If-None-Match -> 304), commit set-properties, register the same
// metadata under a second name, rename, drop without and with purge, drop
// namespace.  Prints one JSON line {"ok": true, "steps": [...]} or exits 1
// with the failing step.

import { IcebergRestCatalog, IcebergError } from 'iceberg-js'

function parseArgs(argv) {
  const out = { namespace: `conf_${Date.now()}` }
  for (let i = 2; i < argv.length; i++) {
    const a = argv[i]
    if (a === '--uri') out.uri = argv[++i]
    else if (a === '--warehouse') out.warehouse = argv[++i]
    else if (a === '--token') out.token = argv[++i]
    else if (a === '--namespace') out.namespace = argv[++i]
    else throw new Error(`unknown argument ${a}`)
  }
  if (!out.uri || !out.warehouse) throw new Error('--uri and --warehouse are required')
  return out
}

const args = parseArgs(process.argv)
const steps = []

function check(cond, what) {
  if (!cond) throw new Error(`check failed: ${what}`)
}

async function step(name, fn) {
  try {
    const detail = await fn()
    steps.push({ step: name, ok: true, ...(detail ? { detail } : {}) })
  } catch (err) {
    steps.push({ step: name, ok: false, error: String(err && err.message || err) })
    process.stdout.write(JSON.stringify({ ok: false, steps }) + '\n')
    process.exit(1)
  }
}

async function expectStatus(status, fn) {
  try {
    await fn()
  } catch (err) {
    check(err instanceof IcebergError, `IcebergError, got ${err}`)
    check(err.status === status, `status ${status}, got ${err.status}`)
    return err
  }
  throw new Error(`expected HTTP ${status}, the call succeeded`)
}

const catalog = new IcebergRestCatalog({
  baseUrl: args.uri,
  warehouse: args.warehouse,
  auth: args.token ? { type: 'bearer', token: args.token } : { type: 'none' },
})
const ns = { namespace: [args.namespace] }
const t1 = { namespace: [args.namespace], name: 'events' }
const t2 = { namespace: [args.namespace], name: 'events_registered' }
const t3 = { namespace: [args.namespace], name: 'events_renamed' }
const schema = {
  type: 'struct',
  'schema-id': 0,
  fields: [
    { id: 1, name: 'id', type: 'long', required: true },
    { id: 2, name: 'ts', type: 'timestamptz', required: false },
    { id: 3, name: 'user', type: 'string', required: false },
  ],
  'identifier-field-ids': [1],
}

await step('config', async () => {
  const cfg = await catalog.loadConfig()
  check(cfg.overrides.prefix === args.warehouse, `overrides.prefix ${cfg.overrides.prefix}`)
  check(Array.isArray(cfg.endpoints) && cfg.endpoints.length > 0, 'endpoints listed')
})
await step('create namespace', async () => {
  const r = await catalog.createNamespace(ns, { properties: { owner: 'iceberg-js' } })
  check(r.namespace[0] === args.namespace, 'namespace echoed')
  await expectStatus(409, () => catalog.createNamespace(ns))
})
await step('list namespaces', async () => {
  const all = await catalog.listNamespaces()
  check(all.namespaces.some(n => n.namespace[0] === args.namespace), 'namespace listed')
  const page = await catalog.listNamespaces({ pageSize: 1 })
  check(page.namespaces.length === 1, 'page of one')
  return { count: all.namespaces.length }
})
await step('load namespace', async () => {
  const r = await catalog.loadNamespaceMetadata(ns)
  check(r.properties.owner === 'iceberg-js', 'property kept')
  check(await catalog.namespaceExists(ns), 'namespace exists')
})
let created
await step('create table', async () => {
  created = await catalog.createTableResult(ns, {
    name: t1.name,
    schema,
    'partition-spec': { 'spec-id': 0, fields: [{ 'source-id': 2, 'field-id': 1000, name: 'ts_day', transform: 'day' }] },
    'write-order': { 'order-id': 0, fields: [] },
    properties: { 'write.format.default': 'parquet' },
  })
  check(created['metadata-location'], 'metadata-location returned')
  check(created.metadata['format-version'] === 2, 'format-version 2')
  check(created.metadata.schemas[0].fields.length === 3, 'schema kept')
  await expectStatus(409, () => catalog.createTable(ns, { name: t1.name, schema }))
  return { location: created['metadata-location'] }
})
await step('list tables', async () => {
  const r = await catalog.listTables(ns)
  check(r.identifiers.some(i => i.name === t1.name), 'table listed')
})
await step('load table with ETag', async () => {
  const r = await catalog.loadTableResult(t1)
  check(r.metadata['table-uuid'] === created.metadata['table-uuid'], 'same uuid')
  check(r.etag, 'ETag header')
  const again = await catalog.loadTable(t1, { ifNoneMatch: r.etag })
  check(again === null, '304 Not Modified gives null')
  const refs = await catalog.loadTable(t1, { snapshots: 'refs' })
  check(refs['table-uuid'] === created.metadata['table-uuid'], 'snapshots=refs loads')
  check(await catalog.tableExists(t1), 'table exists')
})
await step('commit', async () => {
  const r = await catalog.updateTable(t1, {
    requirements: [{ type: 'assert-table-uuid', uuid: created.metadata['table-uuid'] }],
    updates: [{ action: 'set-properties', updates: { committed: 'yes' } }],
  })
  check(r.metadata.properties.committed === 'yes', 'property set')
  check(r['metadata-location'] !== created['metadata-location'], 'new metadata file')
  await expectStatus(409, () => catalog.updateTable(t1, {
    requirements: [{ type: 'assert-current-schema-id', 'current-schema-id': 99 }],
    updates: [{ action: 'set-properties', updates: { committed: 'no' } }],
  }))
})
await step('register table', async () => {
  const loaded = await catalog.loadTableResult(t1)
  const r = await catalog.registerTable(ns, { name: t2.name, 'metadata-location': loaded['metadata-location'] })
  check(r['table-uuid'] === created.metadata['table-uuid'], 'registered metadata')
})
await step('rename table', async () => {
  await catalog.renameTable({ source: t2, destination: t3 })
  check(!(await catalog.tableExists(t2)), 'old name gone')
  check(await catalog.tableExists(t3), 'new name present')
})
await step('drop table', async () => {
  await catalog.dropTable(t3)
  await catalog.dropTable(t1, { purge: true })
  const r = await catalog.listTables(ns)
  check(r.identifiers.length === 0, 'no tables left')
  const err = await expectStatus(404, () => catalog.loadTable(t1))
  check(err.isNotFound(), 'isNotFound')
  check(err.icebergType === 'NoSuchTableException', `error type ${err.icebergType}`)
})
await step('drop namespace', async () => {
  await catalog.dropNamespace(ns)
  check(!(await catalog.namespaceExists(ns)), 'namespace gone')
})

process.stdout.write(JSON.stringify({ ok: true, steps }) + '\n')
