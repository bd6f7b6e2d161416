"""
test_retention_rewrite.py -- the retention operation's mode "rewrite" on
engine 'local': after the metadata-only 'delete' of the files wholly
older than the cutoff, the files straddling it are rewritten by the
compaction helper without their older rows, one 'overwrite' snapshot in
the same job, and the job records exactly the rows removed.

Every expectation is checked independently of tms: the rows through
icebird (the table's Parquet read by another implementation), the live
files through the Python reader of test/opsworld.py, the snapshots'
operations and summaries from the catalog's metadata:

  - an unpartitioned table, the cutoff inside a file: tms.plan_operation
    lists the straddling file as rewritten and the overwrite, and changes
    nothing; the run leaves exactly the rows at or after the cutoff; the
    snapshots are a 'delete' then an 'overwrite'; the job's rows_removed
    and message count exactly the rows removed;
  - a table partitioned by category with position and equality deletes,
    the cutoff inside a file that has position deletes: the rows already
    deleted are not counted again, the rows removed are exactly those
    visible before the cutoff, the delete files that applied only to the
    rewritten file go with it;
  - "scan" without mode rewrite or delete-files is refused before a job
    is recorded;
  - a file without column metrics is kept and listed without "scan", and
    read with it: its older rows are removed too, counted exactly;
  - mode delete-files with scan: the straddling file and the file without
    metrics stay as they are, their older rows deleted by one position
    delete file (the row delta's sequence number), a "delete" snapshot;
    exactly the rows at or after the cutoff are read back.

The module runs its own cluster, catalog, s3rver and file root.
Run: /usr/bin/python3 -m pytest -q test/integration/test_retention_rewrite.py
"""

import datetime
import json
import os
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, os.path.join(HERE, "..", "engines"))

import opsworld as ow  # noqa: E402
import smallfiles  # noqa: E402
from pgcluster import FAST_WORKERS  # noqa: E402

# smallfiles: row id x has ts = 2024-01-01 00:00:00+00 plus x minutes
EPOCH = datetime.datetime(2024, 1, 1, tzinfo=datetime.timezone.utc)

pytestmark = pytest.mark.own_cluster


@pytest.fixture(scope="module")
def env(tms_world):
    srv = "rwcat"
    w = tms_world("rrw", settings=dict(FAST_WORKERS), catalog={}, real=True, sql=lambda w: [
        """CREATE SERVER %s FOREIGN DATA WRAPPER tms_iceberg OPTIONS (
             uri '%s', relative_path_root '%s', request_timeout '10s', retries '0',
             s3_vended_endpoint 'true',
             allowed_locations 'file://%s/, s3://warehouse/');
           CREATE USER MAPPING FOR PUBLIC SERVER %s;"""
        % (srv, w["catalog"].uri, w["file_root"], w["file_root"], srv)])
    return dict(w, server=srv)


@pytest.fixture(autouse=True)
def server_log_on_failure(env, request):
    yield
    rep = getattr(request.node, "rep_call", None)
    if rep is not None and rep.failed:
        sys.stderr.write("---- server log (tail) ----\n%s\n" % env["pg"].log_tail(150))


def q(env, sql, args=None):
    return env["pg"].query(sql, args)


def run(env, ns, name, options):
    return q(env, "SELECT tms.run_operation(%s, %s, %s, 'retention', %s::jsonb)",
             (env["server"], ns, name, json.dumps(options)))[0][0]


def plan(env, ns, name, options):
    return [dict(action=a, target=t, detail=d) for a, t, d in q(
        env, "SELECT action, target, detail FROM tms.plan_operation(%s, %s, %s, 'retention',"
             " %s::jsonb)", (env["server"], ns, name, json.dumps(options)))]


def rows(env, mloc):
    """The table's rows as icebird reads them (deletes applied), by id."""
    out = ow.icebird(mloc, s3_endpoint=env["s3"].endpoint, file_root=env["file_root"],
                     dump_rows=True)
    return {int(r["id"]): r for r in out["row_values"]}


def cutoff_text(minutes):
    return (EPOCH + datetime.timedelta(minutes=minutes)).strftime("%Y-%m-%d %H:%M:%S+00")


def ts_of(row):
    v = row["ts"]
    if isinstance(v, (int, float)):
        return datetime.datetime.fromtimestamp(v / 1e6, tz=datetime.timezone.utc)
    return datetime.datetime.fromisoformat(str(v).replace("Z", "+00:00"))


def older_ids(got, minutes):
    cut = EPOCH + datetime.timedelta(minutes=minutes)
    return {i for i, r in got.items() if ts_of(r) < cut}


def data_files(files):
    return {p: f for p, f in files.items() if f["content"] == 0}


def rewrite_and_check(env, ns, name, minutes, want_dropped):
    """Plan and run a retention in mode rewrite at cutoff `minutes`; check
    the rows, the snapshots and the job; return (rows before, rows after,
    job row, the overwrite snapshot)."""
    mloc0, meta0 = ow.load(env["catalog"], ns, name)
    got0 = rows(env, mloc0)
    opts = {"column": "ts", "older-than": cutoff_text(minutes), "mode": "rewrite"}
    p = plan(env, ns, name, opts)
    s = [r for r in p if r["action"] == "summary"][0]["detail"]
    assert s["mode"] == "rewrite" and s["files_dropped"] == want_dropped, s
    strad = [r for r in p if r["action"] == "straddling-data-file"]
    assert len(strad) == 1 and strad[0]["detail"]["rewritten"] is True and \
        strad[0]["detail"]["kept"] is False, strad
    over = [r for r in p if r["action"] == "commit" and r["target"] == "overwrite"]
    assert len(over) == 1 and over[0]["detail"]["rewritten-data-files"] == 1, p
    # the plan changed nothing
    assert ow.load(env["catalog"], ns, name)[1]["current-snapshot-id"] == \
        meta0["current-snapshot-id"]
    row = env["pg"].wait_job(run(env, ns, name, opts))
    mloc, meta = ow.load(env["catalog"], ns, name)
    got = rows(env, mloc)
    # exactly the rows before the cutoff are gone; the others are unchanged
    assert set(got0) - set(got) == older_ids(got0, minutes)
    assert set(got) == set(got0) - older_ids(got0, minutes)
    assert all(got[i] == got0[i] for i in got)
    # a delete, then an overwrite on it, in the same job
    over_snap = ow.snapshot(meta, meta["current-snapshot-id"])
    assert over_snap["summary"]["operation"] == "overwrite", over_snap["summary"]
    delete_snap = ow.snapshot(meta, over_snap["parent-snapshot-id"])
    assert delete_snap["summary"]["operation"] == "delete", delete_snap["summary"]
    assert delete_snap["parent-snapshot-id"] == meta0["current-snapshot-id"]
    assert int(delete_snap["summary"]["deleted-data-files"]) == want_dropped
    assert over_snap["summary"]["deleted-data-files"] == "1", over_snap["summary"]
    # the job: the rows dropped with whole files (their record counts) and
    # the rows the rewrite removed (exact)
    rewritten = len(older_ids(got0, minutes)) - \
        len({i for i in older_ids(got0, minutes) if i < want_dropped * 10})
    assert row["rows_removed"] == int(delete_snap["summary"]["deleted-records"]) + rewritten, row
    assert "1 data files rewritten without their older rows, %d rows removed from them" \
        % rewritten in row["message"], row
    assert row["data_files_rewritten"] == 1 and row["data_files_added"] == 1, row
    return got0, got, row, over_snap


def test_rewrite_unpartitioned(env):
    smallfiles.make_table(env["catalog"], env["st"], "rrw", "flat", files=10, rows_per_file=10,
                          partitioned=False, seed=11)
    ow.give_to_server(env["file_root"])
    # minute 65 lies inside file 6 (ids 60..69): files 0..5 dropped, 60..64 rewritten away
    got0, got, row, snap = rewrite_and_check(env, "rrw", "flat", 65, 6)
    assert not older_ids(got, 65) and len(got) == 35
    assert snap["summary"]["added-records"] == "5", snap["summary"]


def test_rewrite_partitioned_with_deletes(env):
    smallfiles.make_table(env["catalog"], env["st"], "rrw", "bycat", files=16, rows_per_file=10,
                          partitioned=True, with_deletes=True, seed=12)
    ow.give_to_server(env["file_root"])
    # minute 75 lies inside file 7 (ids 70..79, category c3), whose rows 0
    # and 3 (ids 70, 73) a position delete removed already: the rewrite
    # removes 71, 72 and 74, and the rows read back are exactly those at or
    # after the cutoff
    mloc0, _ = ow.load(env["catalog"], "rrw", "bycat")
    before = rows(env, mloc0)
    assert 70 not in before and 73 not in before and 71 in before
    got0, got, row, snap = rewrite_and_check(env, "rrw", "bycat", 75, 7)
    assert {71, 72, 74} <= set(got0) - set(got)
    assert not older_ids(got, 75)
    assert snap["summary"]["added-records"] == "5", snap["summary"]


def test_rewrite_refusals(env):
    n = q(env, "SELECT count(*) FROM tms.maintenance_jobs")[0][0]
    e = env["pg"].query_error(
        "SELECT tms.run_operation(%s, 'rrw', 'flat', 'retention', %s)",
        (env["server"], json.dumps({"column": "ts", "older-than": "1 day", "scan": True})))
    assert e.pgcode == "22023" and "mode" in (e.diag.message_hint or ""), str(e)
    assert q(env, "SELECT count(*) FROM tms.maintenance_jobs")[0][0] == n


def table_with_file_without_bounds(env, name, seed):
    """Ten files of ten rows, and a copy of the first, which lies wholly
    before minute 65, appended without column metrics (as another writer
    may): its rows cannot be told from the manifests."""
    import uuid
    cat, st = env["catalog"], env["st"]
    smallfiles.make_table(cat, st, "rrw", name, files=10, rows_per_file=10,
                          partitioned=False, seed=seed)
    opts = {"column": "ts", "older-than": cutoff_text(65), "mode": "rewrite"}
    p = plan(env, "rrw", name, opts)
    src = sorted(r["target"] for r in p if r["action"] == "drop-data-file")[0]
    _, meta = ow.load(cat, "rrw", name)
    files = ow.live_files(st, meta)
    src = [x for x in files if ow.canon(st, x) == ow.canon(st, src)][0]
    dst = src.rsplit("/", 1)[0] + "/nometrics-%s.parquet" % uuid.uuid4().hex[:8]
    data = st.read(src)
    st.write(dst, data)
    body, _ = ow.append_commit(st, meta, [{"path": dst, "records": files[src]["records"],
                                           "size": len(data), "partition": {}}], seed=5)
    cat.request("POST", "namespaces/rrw/tables/%s" % name, body)
    ow.give_to_server(env["file_root"])


def test_rewrite_scan_reads_file_without_bounds(env):
    """A data file without column metrics (appended by another writer) is
    kept and listed without scan; with "scan": true it is read and its
    older rows removed (here all of them: it is a copy of a file wholly
    before the cutoff), counted exactly."""
    cat = env["catalog"]
    table_with_file_without_bounds(env, "scanned", 13)
    opts = {"column": "ts", "older-than": cutoff_text(65), "mode": "rewrite"}
    # without scan the copy is unknown and kept
    p = plan(env, "rrw", "scanned", opts)
    unknown = [r for r in p if r["action"] == "unknown-data-file"]
    assert len(unknown) == 1 and unknown[0]["detail"]["kept"] is True, unknown
    over = [r for r in p if r["action"] == "commit" and r["target"] == "overwrite"][0]
    assert over["detail"]["rewritten-data-files"] == 1, over
    # with scan it is read too
    opts["scan"] = True
    p = plan(env, "rrw", "scanned", opts)
    unknown = [r for r in p if r["action"] == "unknown-data-file"]
    assert unknown[0]["detail"]["rewritten"] is True, unknown
    over = [r for r in p if r["action"] == "commit" and r["target"] == "overwrite"][0]
    assert over["detail"]["rewritten-data-files"] == 2, over
    row = env["pg"].wait_job(run(env, "rrw", "scanned", opts))
    mloc, meta = ow.load(cat, "rrw", "scanned")
    out = ow.icebird(mloc, s3_endpoint=env["s3"].endpoint, file_root=env["file_root"],
                     dump_rows=True)
    got = {int(r["id"]): r for r in out["row_values"]}
    # the rows at or after the cutoff, each once; nothing older
    assert len(out["row_values"]) == 35 and set(got) == set(range(65, 100))
    snap = ow.snapshot(meta, meta["current-snapshot-id"])
    assert snap["summary"]["operation"] == "overwrite"
    assert snap["summary"]["deleted-data-files"] == "2", snap["summary"]
    # 5 rows of the straddling file, 10 of the copy
    assert "2 data files rewritten without their older rows, 15 rows removed from them" in \
        row["message"], row


def test_delete_files_with_scan(env):
    """Mode delete-files with scan: the files wholly older dropped, the
    straddling file and the file without bounds kept as they are, their
    older rows deleted by one position delete file in a "delete" row delta
    (its sequence number the new snapshot's: it applies to them); exactly
    the rows at or after the cutoff are read back, the positions counted
    exactly."""
    cat, st = env["catalog"], env["st"]
    table_with_file_without_bounds(env, "dfiles", 14)
    opts = {"column": "ts", "older-than": cutoff_text(65), "mode": "delete-files", "scan": True}
    p = plan(env, "rrw", "dfiles", opts)
    s = [r for r in p if r["action"] == "summary"][0]["detail"]
    assert s["mode"] == "delete-files" and s["files_dropped"] == 6, s
    kept = [r for r in p if r["action"] in ("straddling-data-file", "unknown-data-file")]
    assert len(kept) == 2 and all(r["detail"]["position_deletes"] for r in kept), kept
    rd = [r for r in p if r["action"] == "commit" and r["target"] == "delete" and
          "data-files-read" in r["detail"]]
    assert len(rd) == 1 and rd[0]["detail"]["data-files-read"] == 2, p
    dropped = {r["target"] for r in p if r["action"] == "drop-data-file"}
    _, meta0 = ow.load(cat, "rrw", "dfiles")
    before = data_files(ow.live_files(st, meta0))
    row = env["pg"].wait_job(run(env, "rrw", "dfiles", opts))
    assert row["state"] == "succeeded", row
    mloc, meta = ow.load(cat, "rrw", "dfiles")
    out = ow.icebird(mloc, s3_endpoint=env["s3"].endpoint, file_root=env["file_root"],
                     dump_rows=True)
    got = {int(r["id"]): r for r in out["row_values"]}
    assert len(out["row_values"]) == 35 and set(got) == set(range(65, 100))
    after = ow.live_files(st, meta)
    assert set(data_files(after)) == set(before) - dropped
    snap = ow.snapshot(meta, meta["current-snapshot-id"])
    assert snap["summary"]["operation"] == "delete", snap["summary"]
    assert snap["summary"]["added-position-deletes"] == "15", snap["summary"]
    new = [f for pth, f in after.items() if f["content"] == 1]
    assert len(new) == 1 and new[0]["seq"] == snap["sequence-number"], new
    assert row["rows_removed"] == 60 + 15 and row["delete_files_added"] == 1, row
    assert "2 data files read for older rows, 15 rows removed from them by 1 position delete files" \
        in row["message"], row

