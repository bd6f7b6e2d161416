"""
test_storage_azure.py -- Azure Blob storage (abfs[s]://, wasb[s]://) end to
end, against Azurite (Microsoft's emulator, test/node) and, for throttling,
the gate in front of it (test/s3gate/server.py --flavor azure):

  - the io layer (test/integration/io_driver.c): writes (Put Blob, and Put
    Block + Put Block List above the block size), ranged reads, sizes,
    listings across pages (List Blobs markers), deletes in Blob Batch
    requests of at most 256 blobs, every scheme and host spelling of one
    object, with a shared key, an account SAS and a catalog-vended SAS;
    a directory of a hierarchical namespace in a listing is no file;
    a missing blob is "not found", a refused key or SAS is 403 and neither
    the key nor the SAS's signature is in the error; a batch refused as a
    whole (503 ServerBusy) and sub-requests refused ServerBusy are
    reported as such;
  - the maintenance operations on a table stored on Azure, run by the
    worker pool with the mapping's shared key, expectations computed by
    the test world's own Azure client (test/catalog/storage.py, a
    SharedKey signer written apart from tms's): snapshot expiry (exactly
    the files only the expired snapshots reach; snapshot metrics),
    orphan cleanup (exactly the planted orphans, found by listing),
    manifest rewrite (the same live entries), compaction by the helper
    tms_compactor (real Parquet on Azure, the same record count, fewer
    files), purge (every file the metadata reaches, nothing else), with
    a SAS the catalog vends instead of a key;
  - deletes throttled by the gate (503 ServerBusy) slow down through the
    delete pool's window and the job succeeds;
  - a Blob Batch that outlasts the request timeout is sent again (the
    window slows down) and the purge succeeds in its first attempt;
  - a vended SAS that expires during a purge (the catalog vends SAS of 3 s)
    is fetched again through the held entry, before its vended expiry or
    after Azurite refused it (403), and the purge deletes everything;
  - a table outside allowed_locations is refused before anything runs;
    an unusable key fails the job without the key in its error or the
    server log.

The module runs its own cluster, catalog (warehouse on Azure) and Azurite.
Run: /usr/bin/python3 -m pytest -q test/integration/test_storage_azure.py
"""

import datetime
import json
import os
import subprocess
import sys
import time
import urllib.parse
import uuid

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, os.path.join(HERE, "..", "engines"))

import world  # noqa: E402
import opsworld as ow  # noqa: E402
import smallfiles  # noqa: E402
import storage as storage_mod  # noqa: E402
from pgcluster import FAST_WORKERS, wait_for  # noqa: E402

pytestmark = pytest.mark.own_cluster

ACCOUNT = storage_mod.AZURITE_ACCOUNT
KEY = storage_mod.AZURITE_KEY
HOST = "%s.dfs.core.windows.net" % ACCOUNT
ROOT = "abfss://warehouse@%s/" % HOST
SETTINGS = dict(FAST_WORKERS, **{"tms.delete_concurrency": "4"})


# ---------------------------------------------------------------------------
# the io driver
# ---------------------------------------------------------------------------

@pytest.fixture(scope="module")
def driver():
    return world.built_driver("io_driver")


@pytest.fixture(scope="module")
def azurite():
    a = world.AzuriteServer(containers=["warehouse", "other"])
    yield a
    a.stop()


@pytest.fixture(scope="module")
def gate(azurite):
    g = world.AzureGate(azurite)
    yield g
    g.stop()


def drive(driver, endpoint, *args, key=KEY, sas=None, vended=(), block=None, page=None,
          stdin=None):
    argv = [driver, "-A", endpoint]
    if key:
        argv += ["-K", key]
    if sas:
        argv += ["-S", sas]
    for kv in vended:
        argv += ["-V", kv]
    if block:
        argv += ["-B", str(block)]
    if page:
        argv += ["-l", str(page)]
    return subprocess.run(argv + list(args), input=stdin, capture_output=True, timeout=120)


def sas_token(hours=1, permissions="rwdlac"):
    return storage_mod.account_sas(ACCOUNT, KEY, datetime.datetime.now(datetime.timezone.utc)
                                   + datetime.timedelta(hours=hours), permissions)


def test_io_write_read_list_delete(driver, azurite):
    ep = azurite.endpoint
    base = "abfss://warehouse@%s/io/%s" % (HOST, uuid.uuid4().hex[:8])
    data = os.urandom(300000)
    # above the block size: Put Block x3 + Put Block List
    r = drive(driver, ep, "put", base + "/big.bin", "-", block=120000, stdin=data)
    assert r.returncode == 0, r.stderr
    client = azurite.client()
    assert client.get(ACCOUNT, "warehouse", base.split("/", 3)[3] + "/big.bin") == data
    # every spelling of the object reads it; ranges; sizes
    key = base.split("/", 3)[3] + "/big.bin"
    for uri in ("abfs://warehouse@%s/%s" % (HOST, key),
                "wasbs://warehouse@%s.blob.core.windows.net/%s" % (ACCOUNT, key),
                "WASB://warehouse@%s/%s" % (ACCOUNT.upper(), key)):
        r = drive(driver, ep, "get", uri, "1000", "5000")
        assert r.returncode == 0 and r.stdout == data[1000:6000], r.stderr
    r = drive(driver, ep, "size", base + "/big.bin")
    assert r.stdout.decode().strip() == "300000"
    r = drive(driver, ep, "get", base + "/big.bin", "400000", "10")
    assert r.returncode == 0 and r.stdout == b""
    # a missing blob
    r = drive(driver, ep, "get", base + "/missing")
    assert r.returncode == 2 and b"not found\t404" in r.stderr and b"BlobNotFound" in r.stderr
    # 300 blobs (a name with a space and a percent sign), listed 7 a page
    names = ["f%03d" % i for i in range(299)] + ["odd name %41.txt"]
    uploads = [(ACCOUNT, "warehouse", base.split("/", 3)[3] + "/many/" + n) for n in names]
    for acct, cont, blob in uploads:
        client.put(acct, cont, blob, b"x" * 3)
    r = drive(driver, ep, "list", base + "/many/", page=7)
    assert r.returncode == 0, r.stderr
    listed = [line.split("\t") for line in r.stdout.decode().splitlines()]
    assert sorted(u for u, _ in listed) == sorted(base + "/many/" + n for n in names)
    assert all(s == "3" for _, s in listed)
    # deleted in batches of at most 256: everything, a missing one too
    uris = [base + "/many/" + n for n in names] + [base + "/many/never-there"]
    r = drive(driver, ep, "delete", *uris)
    assert r.returncode == 0, r.stderr
    res = [line.split("\t") for line in r.stdout.decode().splitlines()]
    assert len(res) == 301 and all(x[1] == "deleted" for x in res), res[:3]
    assert res[-1][2] == "BlobNotFound"
    assert client.list_objects(ACCOUNT, "warehouse", base.split("/", 3)[3] + "/many/") == []


def test_io_sas_and_vended_sas(driver, azurite):
    ep = azurite.endpoint
    client = azurite.client()
    prefix = "sas/%s" % uuid.uuid4().hex[:8]
    for i in range(3):
        client.put(ACCOUNT, "warehouse", "%s/f%d" % (prefix, i), b"abc")
    base = "abfss://warehouse@%s/%s" % (HOST, prefix)
    good = sas_token()
    r = drive(driver, ep, "get", base + "/f0", key=None, sas=good)
    assert r.returncode == 0 and r.stdout == b"abc", r.stderr
    # a vended SAS for the account wins over a wrong shared key
    r = drive(driver, ep, "get", base + "/f1", key="QUFBQQ==",
              vended=["adls.sas-token.%s=%s" % (HOST, good)])
    assert r.returncode == 0 and r.stdout == b"abc", r.stderr
    r = drive(driver, ep, "delete", base + "/f1", base + "/f2", key=None, sas=good)
    assert r.returncode == 0 and r.stdout.count(b"\tdeleted\t") == 2, r.stdout + r.stderr
    # refused: the error names the object, never the key or the signature
    bad = good.replace("sig=", "sig=AAAA")
    for kw in (dict(key=None, sas=bad), dict(key="QUFBQUFBQUE=")):
        r = drive(driver, ep, "get", base + "/f0", **kw)
        assert r.returncode == 2 and b"forbidden\t403" in r.stderr, r.stderr
        err = r.stderr.decode()
        assert "AAAA" not in err and "QUFBQUFBQUE" not in err and "sig=" not in err
        assert base.split("@")[1] in err
    # a location that is no Azure one is refused before any request
    r = drive(driver, ep, "get", "abfss://%s/x" % HOST)
    assert r.returncode == 2 and b"invalid argument" in r.stderr and b"container" in r.stderr


HNS_LISTING = (b'<?xml version="1.0" encoding="utf-8"?><EnumerationResults'
               b' ServiceEndpoint="http://127.0.0.1/devstoreaccount1/" ContainerName="warehouse">'
               b'<Prefix>t/</Prefix><Blobs>'
               b'<Blob><Name>t/data</Name><Properties><Content-Length>0</Content-Length>'
               b'<ResourceType>directory</ResourceType></Properties></Blob>'
               b'<Blob><Name>t/data/f.parquet</Name><Properties>'
               b'<Last-Modified>Mon, 07 Dec 2026 03:00:00 GMT</Last-Modified>'
               b'<Content-Length>16</Content-Length><ResourceType>file</ResourceType>'
               b'</Properties></Blob></Blobs><NextMarker/></EnumerationResults>')


def test_io_list_skips_hierarchical_namespace_directories(driver):
    """An account with a hierarchical namespace (ADLS Gen2) lists its
    directories as blobs whose ResourceType is "directory" (Azurite has
    no such namespace: a stand-in on 127.0.0.1 answers List Blobs so):
    they are no files, so orphan cleanup never sees, nor deletes, one."""
    import http.server
    import threading

    seen = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            seen.append(self.path)
            self.send_response(200)
            self.send_header("Content-Type", "application/xml")
            self.send_header("Content-Length", str(len(HNS_LISTING)))
            self.end_headers()
            self.wfile.write(HNS_LISTING)

        def log_message(self, *args):
            pass

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    try:
        r = drive(driver, "http://127.0.0.1:%d" % srv.server_address[1], "list",
                  "abfss://warehouse@%s/t/" % HOST)
    finally:
        srv.shutdown()
        srv.server_close()
    assert r.returncode == 0, r.stderr
    assert seen and "comp=list" in seen[0], seen
    listed = [line.split("\t") for line in r.stdout.decode().splitlines()]
    assert listed == [["abfss://warehouse@%s/t/data/f.parquet" % HOST, "16"]], listed


def test_io_throttled_batches_are_reported(driver, azurite, gate):
    client = azurite.client()
    prefix = "thr/%s" % uuid.uuid4().hex[:8]
    for i in range(6):
        client.put(ACCOUNT, "warehouse", "%s/f%d" % (prefix, i), b"abc")
    uris = ["abfss://warehouse@%s/%s/f%d" % (HOST, prefix, i) for i in range(6)]
    try:
        gate.reset_log()
        gate.throttle(0.001, burst=2, mode="keys", scope="delete")
        r = drive(driver, gate.endpoint, "delete", *uris)
        res = [line.split("\t") for line in r.stdout.decode().splitlines()]
        assert [x[1] for x in res] == ["deleted"] * 2 + ["failed"] * 4, res
        assert {x[2] for x in res[2:]} == {"ServerBusy"}
        gate.throttle(0.001, burst=1, mode="request", scope="delete")
        drive(driver, gate.endpoint, "delete", *uris[2:3])
        r = drive(driver, gate.endpoint, "delete", *uris[3:])
        assert r.returncode == 2 and b"503" in r.stderr and b"ServerBusy" in r.stderr, r.stderr
        outcomes = [e["outcome"] for e in gate.log()]
        assert outcomes == ["keys-throttled", "ok", "throttled"], outcomes
    finally:
        gate.unthrottle()
    assert [n for n, _, _ in client.list_objects(ACCOUNT, "warehouse", prefix + "/")] == \
        ["%s/f%d" % (prefix, i) for i in (3, 4, 5)]


# ---------------------------------------------------------------------------
# the maintenance operations on a table stored on Azure
# ---------------------------------------------------------------------------

@pytest.fixture(scope="module")
def env(tms_world, azurite, gate):
    srv = "azcat"
    w = tms_world("az", settings=SETTINGS, s3=None,
                  catalog={"azure": azurite, "warehouse": ROOT + "wh"},
                  sql=lambda w: [
                      """CREATE SERVER %s FOREIGN DATA WRAPPER tms_iceberg OPTIONS (
                           uri '%s', request_timeout '10s', retries '2',
                           azure_endpoint '%s', allowed_locations '%s');
                         CREATE USER MAPPING FOR PUBLIC SERVER %s
                           OPTIONS (azure_account_key '%s');"""
                      % (srv, w["catalog"].uri, gate.endpoint, ROOT, srv, KEY)])
    st = ow.storage(None, w["file_root"], azure=azurite)
    return dict(w, server=srv, st=st, azurite=azurite, gate=gate)


def q(env, sql, args=None):
    return env["pg"].query(sql, args)


def run(env, ns, name, op, options=None, server=None):
    return q(env, "SELECT tms.run_operation(%s, %s, %s, %s, %s::jsonb)",
             (server or env["server"], ns, name, op, json.dumps(options or {})))[0][0]


def new_table(env, *args, root=ROOT, ns="az"):
    """A synthetic table (synth.py options) below root, registered."""
    loc = "%sops/%s/t" % (root, uuid.uuid4().hex[:10])
    res = ow.synth_table(loc, *(list(args) + ["--azure-endpoint", env["azurite"].endpoint]))
    name = "t_%s" % uuid.uuid4().hex[:8]
    env["catalog"].register(ns, name, res["metadata_location"])
    return loc, name, res


def pg_now_ms(env):
    return int(q(env, "SELECT (extract(epoch FROM now()) * 1000)::bigint")[0][0])


def test_expiry_deletes_exactly_and_records_metrics(env):
    cat, st = env["catalog"], env["st"]
    loc, name, _ = new_table(env, "--snapshots", "8", "--data-files", "16",
                             "--files-per-manifest", "1", "--pos-deletes", "2",
                             "--stats-files", "3")
    mloc, meta = ow.load(cat, "az", name)
    cur = ow.snapshot(meta, meta["current-snapshot-id"])
    data_manifests = [r["manifest_path"] for r in ow.manifest_records(st, cur)
                      if not r.get("content")]
    body, _ = ow.delete_manifests_commit(st, meta, data_manifests[-2:], seed=7)
    ow.commit(cat, "az", name, body)
    mloc, meta = ow.load(cat, "az", name)
    exp = ow.expected_expiry(meta, pg_now_ms(env), older_than_ms=int(time.time() * 1000),
                             retain_last=1)
    deletes = ow.expected_expiry_deletes(st, meta, ow.metadata_after_expiry(meta, exp))
    assert sum(1 for k in deletes.values() if k == "data") == 2
    listing = ow.list_location(st, loc)
    live = ow.live_files(st, meta)

    row = env["pg"].wait_job(run(env, "az", name, "snapshot-expiry",
                                 {"retain-last": 1, "older-than": "1 second"}))
    mloc2, meta2 = ow.load(cat, "az", name)
    assert {s["snapshot-id"] for s in meta2["snapshots"]} == exp["retained"]
    after = ow.list_location(st, loc)
    assert set(listing) - set(after) == {ow.canon(st, p) for p in deletes}
    assert set(after) - set(listing) == {ow.canon(st, mloc2)}
    assert ow.live_files(st, meta2) == live
    assert row["snapshots_expired"] == len(exp["expired"])
    assert row["files_deleted"] == len(deletes)
    assert row["bytes_deleted"] == sum(listing[ow.canon(st, p)][0] for p in deletes)
    m = {phase: mt for phase, mt in q(env, "SELECT phase, metrics FROM"
                                           " tms.table_snapshot_metrics WHERE job_id = %s",
                                      (row["id"],))}
    assert m["before"]["snapshots"] == len(meta["snapshots"])
    assert m["after"]["snapshots"] == 1


def test_orphan_cleanup_deletes_exactly_the_orphans(env):
    cat, st = env["catalog"], env["st"]
    loc, name, _ = new_table(env, "--snapshots", "3", "--data-files", "6", "--version-hint")
    orphans = [ow.plant(st, loc + "/data/orphan-%d.parquet" % i) for i in range(3)]
    orphans.append(ow.plant(st, loc + "/metadata/deep/er/orphan.avro"))
    # a neighbour whose location merely starts with the same text
    neighbour = ow.plant(st, loc + "2/data/not-below.parquet")
    mloc, meta = ow.load(cat, "az", name)
    # every file is older than a second once a second has passed
    newest = max(m for _, m in ow.list_location(st, loc).values())
    wait_for(lambda: time.time() > newest + 2, timeout=10, what="the files to be 2 s old")
    listing = ow.list_location(st, loc)
    expected = ow.expected_orphans(st, meta, mloc, listing, time.time() - 1)
    assert expected == {ow.canon(st, p) for p in orphans}

    row = env["pg"].wait_job(run(env, "az", name, "orphan-cleanup",
                                 {"older-than": "1 second", "force": True}))
    after = ow.list_location(st, loc)
    assert set(after) == set(listing) - expected
    assert st.exists(neighbour)
    assert (row["orphans_found"], row["files_deleted"]) == (len(expected), len(expected))
    assert ow.load(cat, "az", name)[0] == mloc


def test_manifest_rewrite_keeps_the_live_entries(env):
    cat, st = env["catalog"], env["st"]
    loc, name, _ = new_table(env, "--snapshots", "4", "--data-files", "40",
                             "--files-per-manifest", "1")
    _, meta = ow.load(cat, "az", name)
    live = ow.live_files(st, meta)
    before = len(ow.manifest_records(st, ow.snapshot(meta, meta["current-snapshot-id"])))
    row = env["pg"].wait_job(run(env, "az", name, "manifest-rewrite"))
    _, meta2 = ow.load(cat, "az", name)
    after = ow.manifest_records(st, ow.snapshot(meta2, meta2["current-snapshot-id"]))
    assert len(after) < before and row["manifests_rewritten"] == before, row
    assert {p: (f["content"], f["records"], f["size"]) for p, f in ow.live_files(st, meta2).items()} == \
        {p: (f["content"], f["records"], f["size"]) for p, f in live.items()}
    assert all(st.exists(r["manifest_path"]) for r in after)


def test_compaction_through_the_helper(env):
    cat, st = env["catalog"], env["st"]
    mloc = smallfiles.make_table(cat, st, "azc", "small", files=24, rows_per_file=20, seed=5)
    _, meta = ow.load(cat, "azc", "small")
    assert meta["location"].startswith("abfss://warehouse@")
    live = ow.live_files(st, meta)
    records = sum(f["records"] for f in live.values())
    row = env["pg"].wait_job(q(env, "SELECT tms.run_operation(%s, 'azc', 'small', 'compaction')",
                               (env["server"],))[0][0])
    mloc2, meta2 = ow.load(cat, "azc", "small")
    assert mloc2 != mloc
    after = ow.live_files(st, meta2)
    assert sum(f["records"] for f in after.values()) == records
    assert len(after) < len(live) and row["data_files_rewritten"] == len(live), row
    # the new files are on Azure, below the table, and read back whole
    for p, f in after.items():
        assert ow.canon(st, p).startswith(ow.canon(st, meta2["location"]) + "/")
        data = st.read(p)
        assert len(data) == f["size"] and data[:4] == b"PAR1" and data[-4:] == b"PAR1"


def test_purge_with_a_vended_sas(env):
    cat, st = env["catalog"], env["st"]
    loc, name, res = new_table(env, "--snapshots", "3", "--data-files", "9",
                               "--files-per-manifest", "2", "--stats-files", "1")
    keep = ow.plant(st, loc + "/data/not-in-the-table.parquet")
    sibling = ow.plant(st, loc + "_sibling/data/x.parquet")
    files = ow.list_location(st, loc)
    # no key in the mapping of this server: the catalog's SAS it is
    srv = "azsas_%s" % uuid.uuid4().hex[:6]
    q(env, "CREATE SERVER %s FOREIGN DATA WRAPPER tms_iceberg OPTIONS (uri '%s',"
           " request_timeout '10s', azure_endpoint '%s', allowed_locations '%s')"
      % (srv, cat.uri, env["gate"].endpoint, ROOT))
    q(env, "CREATE USER MAPPING FOR PUBLIC SERVER %s" % srv)
    cat.set_table_config("az", name, {"adls.sas-token.%s" % HOST: sas_token(),
                                      "adls.sas-token-expires-at-ms.%s" % HOST:
                                      str(int(time.time() * 1000) + 3600 * 1000)})
    jid = q(env, "SELECT tms.purge_table(%s, 'az', %s)", (srv, name))[0][0]
    wait_for(lambda: q(env, "SELECT state FROM tms.purge_jobs WHERE id = %s", (jid,))[0][0]
             in ("SUCCEEDED", "FAILED"), timeout=120, what="the purge")
    state, deleted, skipped, err = q(env, "SELECT state, files_deleted, files_skipped, last_error"
                                          " FROM tms.purge_jobs WHERE id = %s", (jid,))[0]
    assert state == "SUCCEEDED", err
    left = ow.list_location(st, loc)
    assert set(left) == {ow.canon(st, keep)}, sorted(left)
    assert st.exists(sibling)
    assert deleted == len(files) - 1 and skipped == 0
    # the SAS is in no readable row
    sig = sas_token().split("sig=")[1][:10]
    dump = json.dumps(q(env, "SELECT row_to_json(j) FROM tms.purge_jobs j WHERE id = %s",
                        (jid,)))
    assert "sig=" not in dump and sig not in dump


def test_throttled_deletes_slow_down_and_succeed(env):
    cat, st, gate = env["catalog"], env["st"], env["gate"]
    loc, name, _ = new_table(env, "--snapshots", "3", "--data-files", "900",
                             "--files-per-manifest", "50")
    files = ow.list_location(st, loc)
    assert len(files) > 900
    gate.reset_log()
    try:
        gate.throttle(2, burst=1, mode="request", scope="delete")
        jid = q(env, "SELECT tms.purge_table(%s, 'az', %s)", (env["server"], name))[0][0]
        wait_for(lambda: q(env, "SELECT state FROM tms.purge_jobs WHERE id = %s",
                           (jid,))[0][0] in ("SUCCEEDED", "FAILED"), timeout=300,
                 what="the purge")
    finally:
        gate.unthrottle()
    state, deleted, err = q(env, "SELECT state, files_deleted, last_error FROM tms.purge_jobs"
                                 " WHERE id = %s", (jid,))[0]
    assert state == "SUCCEEDED", err
    assert deleted == len(files)
    assert ow.list_location(st, loc) == {}
    log = [e for e in gate.log() if e["kind"] == "delete"]
    refused = [e for e in log if e["outcome"] == "throttled"]
    assert refused and all(e["status"] == 503 for e in refused), log[:5]
    # every blob went in batches of at most 256, each answered at last
    assert max(e["keys"] for e in log) <= 256
    assert sum(e["keys"] for e in log if e["outcome"] == "ok") == len(files)


def test_a_delete_that_times_out_is_sent_again(env):
    """A Blob Batch that takes longer than the server's request_timeout
    (Azurite working through 256 sub-requests with others in flight) is
    taken as the storage asking to slow down: sent again, the files it
    had deleted meanwhile answered 404 and counted, and the purge
    succeeds in its first attempt."""
    cat, st, gate = env["catalog"], env["st"], env["gate"]
    loc, name, _ = new_table(env, "--snapshots", "2", "--data-files", "300",
                             "--files-per-manifest", "100")
    files = ow.list_location(st, loc)
    srv = "azslow_%s" % uuid.uuid4().hex[:6]
    q(env, "CREATE SERVER %s FOREIGN DATA WRAPPER tms_iceberg OPTIONS (uri '%s',"
           " request_timeout '3s', azure_endpoint '%s', allowed_locations '%s')"
      % (srv, cat.uri, gate.endpoint, ROOT))
    q(env, "CREATE USER MAPPING FOR PUBLIC SERVER %s OPTIONS (azure_account_key '%s')"
      % (srv, KEY))
    gate.reset_log()
    try:
        # the first Blob Batch is held 6 s before it reaches Azurite
        gate.delay(6, count=1, scope="delete")
        jid = q(env, "SELECT tms.purge_table(%s, 'az', %s)", (srv, name))[0][0]
        wait_for(lambda: q(env, "SELECT state FROM tms.purge_jobs WHERE id = %s",
                           (jid,))[0][0] in ("SUCCEEDED", "FAILED"), timeout=300,
                 what="the purge")
    finally:
        gate.undelay()
    state, attempts, deleted, err = q(env, "SELECT state, attempts, files_deleted, last_error"
                                           " FROM tms.purge_jobs WHERE id = %s", (jid,))[0]
    assert state == "SUCCEEDED" and attempts == 0, (state, attempts, err)
    assert deleted == len(files)
    assert ow.list_location(st, loc) == {}
    batches = [e for e in gate.log() if e["kind"] == "delete"]
    # the held batch and the same blobs once more: nothing else twice
    assert sum(e["keys"] for e in batches) <= len(files) + 256, batches


def test_outside_allowed_locations_is_refused(env):
    loc, name, _ = new_table(env, "--data-files", "2",
                             root="abfss://other@%s/" % HOST)
    before = ow.list_location(env["st"], loc)
    e = env["pg"].query_error("SELECT tms.run_operation(%s, 'az', %s, 'orphan-cleanup',"
                              " '{\"older-than\": \"1 second\", \"force\": true}')",
                              (env["server"], name))
    assert e.pgcode == "42501", str(e)
    assert "not below the allowed_locations" in str(e)
    e = env["pg"].query_error("SELECT tms.purge_table(%s, 'az', %s)", (env["server"], name))
    assert e.pgcode == "42501", str(e)
    assert ow.list_location(env["st"], loc) == before


def test_bad_key_fails_without_showing_it(env):
    cat = env["catalog"]
    loc, name, _ = new_table(env, "--snapshots", "3", "--data-files", "3")
    wrong = "V3JvbmdLZXlXcm9uZ0tleVdyb25nS2V5V3JvbmdLZXk="
    srv = "azbad_%s" % uuid.uuid4().hex[:6]
    q(env, "CREATE SERVER %s FOREIGN DATA WRAPPER tms_iceberg OPTIONS (uri '%s',"
           " request_timeout '10s', retries '0', azure_endpoint '%s', allowed_locations '%s')"
      % (srv, cat.uri, env["azurite"].endpoint, ROOT))
    q(env, "CREATE USER MAPPING FOR PUBLIC SERVER %s OPTIONS (azure_account_key '%s')"
      % (srv, wrong))
    # not base64: refused when the mapping is made, without the value
    e = env["pg"].query_error("ALTER USER MAPPING FOR PUBLIC SERVER %s OPTIONS"
                              " (SET azure_account_key 'not*base64')" % srv)
    assert e.pgcode == "HV024" and "not*base64" not in str(e), str(e)
    row = env["pg"].wait_job(run(env, "az", name, "snapshot-expiry",
                                 {"retain-last": 1, "older-than": "1 second"}, server=srv),
                             states=("failed",))
    assert "403" in (row["last_error"] or "") or "AuthorizationFailure" in (row["last_error"] or ""), row
    for text in (json.dumps(row, default=str), env["pg"].log_tail(2000)):
        assert wrong not in text and wrong[:16] not in text
    assert wrong not in json.dumps(q(env, "SELECT * FROM tms.maintenance_jobs"), default=str)


def test_oauth2_client_credentials(env):
    """Entra ID's client-credentials grant, the test catalog standing in
    for the token endpoint and the gate checking the bearer tokens it
    issued (Azurite takes bearer tokens over HTTPS only)."""
    cat, gate = env["catalog"], env["gate"]
    issuer = world.CatalogServer(env["pg"].dsn(), "file://%s/issuer" % env["file_root"],
                                 credential="tms-client:s3cr3t-client-secret",
                                 catalog_name="issuer_%s" % uuid.uuid4().hex[:6])
    try:
        gate.bearer(issuer.uri + "/v1/config")
        loc, name, _ = new_table(env, "--snapshots", "4", "--data-files", "4",
                                 "--files-per-manifest", "1")
        srv = "azoauth_%s" % uuid.uuid4().hex[:6]
        q(env, "CREATE SERVER %s FOREIGN DATA WRAPPER tms_iceberg OPTIONS (uri '%s',"
               " request_timeout '10s', retries '0', azure_endpoint '%s',"
               " azure_token_url '%s', allowed_locations '%s')"
          % (srv, cat.uri, gate.endpoint, issuer.uri + "/v1/oauth/tokens", ROOT))
        q(env, "CREATE USER MAPPING FOR PUBLIC SERVER %s OPTIONS (azure_tenant_id 'tenant',"
               " azure_client_id 'tms-client', azure_client_secret 's3cr3t-client-secret')"
          % srv)
        gate.reset_log()
        issuer.reset_requests()
        row = env["pg"].wait_job(run(env, "az", name, "snapshot-expiry",
                                     {"retain-last": 1, "older-than": "1 second"}, server=srv))
        assert row["snapshots_expired"] == 3 and row["files_deleted"] > 0, row
        log = gate.log()
        assert log and all(e.get("auth") == "bearer" and e["outcome"] == "ok" for e in log), log[:3]
        assert any(e["kind"] == "delete" for e in log)
        tokens = [r for r in issuer.requests()["requests"] if r["path"].endswith("/oauth/tokens")]
        assert 1 <= len(tokens) <= 2, tokens
        # a wrong secret: refused, and the secret is in no error
        q(env, "ALTER USER MAPPING FOR PUBLIC SERVER %s OPTIONS"
               " (SET azure_client_secret 'wrong-secret-value')" % srv)
        loc, name, _ = new_table(env, "--snapshots", "3", "--data-files", "3")
        row = env["pg"].wait_job(run(env, "az", name, "snapshot-expiry",
                                     {"retain-last": 1, "older-than": "1 second"}, server=srv),
                                 states=("failed",))
        assert "401" in row["last_error"] or "refused" in row["last_error"], row
        for text in (row["last_error"], env["pg"].log_tail(2000)):
            assert "wrong-secret-value" not in text and "s3cr3t-client-secret" not in text
    finally:
        gate.bearer(None)
        issuer.stop()


def test_vended_sas_is_fetched_again_when_it_expires(env):
    """A vended SAS whose vended expiry has passed is fetched again from
    the catalog before the requests that follow, as S3's vended keys are;
    the job goes on with the new one."""
    cat, st = env["catalog"], env["st"]
    loc, name, _ = new_table(env, "--snapshots", "5", "--data-files", "10",
                             "--files-per-manifest", "1")
    srv = "azvend_%s" % uuid.uuid4().hex[:6]
    q(env, "CREATE SERVER %s FOREIGN DATA WRAPPER tms_iceberg OPTIONS (uri '%s',"
           " request_timeout '10s', azure_endpoint '%s', allowed_locations '%s')"
      % (srv, cat.uri, env["gate"].endpoint, ROOT))
    q(env, "CREATE USER MAPPING FOR PUBLIC SERVER %s" % srv)
    cat.set_table_config("az", name, {"adls.sas-token.%s" % ACCOUNT: sas_token(),
                                      "adls.sas-token-expires-at-ms.%s" % ACCOUNT:
                                      str(int(time.time() * 1000) - 1000)})
    cat.reset_requests()
    row = env["pg"].wait_job(run(env, "az", name, "snapshot-expiry",
                                 {"retain-last": 1, "older-than": "1 second"}, server=srv))
    assert row["snapshots_expired"] == 4 and row["files_deleted"] > 0, row
    loads = cat.requests(r"/tables/%s(/credentials)?$" % name)["requests"]
    # the load of the job, then at least one more for fresh credentials
    assert len([r for r in loads if r["method"] == "GET"]) >= 2, loads


@pytest.mark.parametrize("expiry_visible", [True, False])
def test_purge_outlives_a_vended_sas_that_expires(env, expiry_visible):
    """The catalog vends an account SAS that lives 3 s (with its expiry,
    or without it: then Azurite refuses it once it has passed, 403
    AuthorizationFailure, as Azure does with AuthenticationFailed) and
    a purge throttled to take longer than that gets new ones through its
    held entry (loadCredentials) and deletes everything, as S3's vended
    keys are refreshed (test_vended_credentials.py)."""
    cat, st, gate = env["catalog"], env["st"], env["gate"]
    loc, name, _ = new_table(env, "--snapshots", "3", "--data-files", "900",
                             "--files-per-manifest", "50")
    files = ow.list_location(st, loc)
    hold = "azhold_%s" % uuid.uuid4().hex[:6]
    cat.create_namespace(hold)
    srv = "azttl_%s" % uuid.uuid4().hex[:6]
    q(env, "CREATE SERVER %s FOREIGN DATA WRAPPER tms_iceberg OPTIONS (uri '%s',"
           " request_timeout '10s', azure_endpoint '%s', allowed_locations '%s',"
           " purge_hold_namespace '%s')" % (srv, cat.uri, gate.endpoint, ROOT, hold))
    q(env, "CREATE USER MAPPING FOR PUBLIC SERVER %s" % srv)
    gate.reset_log()
    cat.reset_requests()
    cat.set_vending(gate, 3, expiry_visible=expiry_visible)
    try:
        # 4 or more Blob Batch requests at one every 2 s: longer than a SAS lives
        gate.throttle(0.5, burst=1, mode="request", scope="delete")
        jid = q(env, "SELECT tms.purge_table(%s, 'az', %s)", (srv, name))[0][0]
        wait_for(lambda: q(env, "SELECT state FROM tms.purge_jobs WHERE id = %s",
                           (jid,))[0][0] in ("SUCCEEDED", "FAILED"), timeout=300,
                 what="the purge")
    finally:
        gate.unthrottle()
        cat.clear_vending()
    state, deleted, err, started, finished = q(
        env, "SELECT state, files_deleted, last_error, started_at, finished_at"
             " FROM tms.purge_jobs WHERE id = %s", (jid,))[0]
    assert state == "SUCCEEDED", err
    assert deleted == len(files)
    assert ow.list_location(st, loc) == {}
    issued = [v for v in cat.vended() if v.get("token", "").startswith("sv=")]
    assert len(issued) >= 2, "one SAS served the whole purge"
    assert cat.requests(r"/namespaces/%s/tables/tms_purge_%d/credentials$" % (hold, jid))[
        "requests"], "no loadCredentials through the held entry"
    # every request the purge sent carried a SAS the catalog vended
    sigs = {v["token"].rsplit("sig=", 1)[1] for v in issued}
    log = [e for e in gate.log() if e["method"] != "PUT"]
    assert log and all(urllib.parse.parse_qs(e["query"]).get("sig", [""])[0] in
                       {urllib.parse.unquote(s) for s in sigs} for e in log), log[:3]
    refused = [e for e in log if e.get("status") == 403]
    if expiry_visible:
        assert not refused, "fetched again before it expired, Azurite never refused it"
    else:
        assert refused, "Azurite never refused an expired SAS: nothing was tested"
    assert (finished - started).total_seconds() > 3, "the purge did not outlive its SAS"
