"""
test_retention.py -- the retention operation on engine 'local': the data
files whose rows are all older than a cutoff on a time column leave the
table by one metadata-only 'delete' snapshot; files straddling the cutoff
are kept and listed.

Every expectation is checked independently of tms's planner: the rows
through icebird (the table's Parquet read by another implementation), the
live files through the Python reader of test/opsworld.py, the snapshot's
operation and summary from the catalog's metadata:

  - an unpartitioned table, the cutoff on a file boundary: exactly the
    rows whose ts is before the cutoff are gone, every other row stays;
    tms.plan_operation listed those files and changed nothing; the job's
    message and its data_files_removed and rows_removed count the files and rows;
  - a table partitioned by category (identity), the cutoff inside a file:
    the files wholly before it are dropped, the straddling one is kept
    and listed with its estimate, so the rows before the cutoff that are
    left are exactly that file's;
  - a table whose spec evolved to day(ts): the new spec's files are
    dropped by their partition (wholly earlier days), the old spec's by
    their bounds; exactly the rows before the cutoff (a midnight) are
    gone;
  - a cutoff before every row changes nothing and commits nothing; an
    unknown column is refused (22023) before a job is recorded, and so is
    mode delete-files on a format v1 table (0A000), which v3 plans;
  - a writer's append interposed before the commit: refused, reloaded,
    re-planned, landed on top of it (the append kept);
  - a policy's rule schedules retention like every operation.

The module runs its own cluster, catalog, s3rver and file root.
Run: /usr/bin/python3 -m pytest -q test/integration/test_retention.py
"""

import datetime
import json
import os
import shutil
import sys
import tempfile
import uuid

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, os.path.join(HERE, "..", "engines"))

import opsworld as ow  # noqa: E402
import smallfiles  # noqa: E402
from pgcluster import FAST_WORKERS, wait_for  # noqa: E402

# smallfiles: row id x has ts = 2024-01-01 00:00:00+00 plus x minutes
EPOCH = datetime.datetime(2024, 1, 1, tzinfo=datetime.timezone.utc)

pytestmark = pytest.mark.own_cluster


@pytest.fixture(scope="module")
def env(tms_world):
    srv = "retcat"
    # a policy cycle every second: test_policy_schedules_retention awaits
    # the first one after its rule is added
    w = tms_world("ret", settings=dict(FAST_WORKERS, **{"tms.evaluation_cycle_interval": "1s"}),
                  catalog={}, real=True, sql=lambda w: [
        """CREATE SERVER %s FOREIGN DATA WRAPPER tms_iceberg OPTIONS (
             uri '%s', relative_path_root '%s', request_timeout '10s', retries '0',
             s3_vended_endpoint 'true',
             allowed_locations 'file://%s/, s3://warehouse/');
           CREATE USER MAPPING FOR PUBLIC SERVER %s;"""
        % (srv, w["catalog"].uri, w["file_root"], w["file_root"], srv)])
    return dict(w, server=srv)


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
    """The table's rows as icebird reads them, by id."""
    out = ow.icebird(mloc, s3_endpoint=env["s3"].endpoint, file_root=env["file_root"],
                     dump_rows=True)
    return {int(r["id"]): r for r in out["row_values"]}


def live(env, ns, name):
    mloc, meta = ow.load(env["catalog"], ns, name)
    return mloc, meta, ow.live_files(env["st"], meta)


def cutoff_text(minutes):
    return (EPOCH + datetime.timedelta(minutes=minutes)).strftime("%Y-%m-%d %H:%M:%S+00")


def ts_of(row):
    """A row's ts as icebird gives it (an ISO string or microseconds), as an aware datetime."""
    v = row["ts"]
    if isinstance(v, (int, float)):
        return datetime.datetime.fromtimestamp(v / 1e6, tz=datetime.timezone.utc)
    return datetime.datetime.fromisoformat(str(v).replace("Z", "+00:00"))


def older_ids(got, minutes):
    cut = EPOCH + datetime.timedelta(minutes=minutes)
    return {i for i, r in got.items() if ts_of(r) < cut}


def summary_of(p):
    return [r for r in p if r["action"] == "summary"][0]["detail"]


def data_files(files):
    return {p: f for p, f in files.items() if f["content"] == 0}


def check_dropped(env, ns, name, minutes, want_dropped, want_straddling=0):
    """Plan, run and check one retention at cutoff `minutes`; returns the
    rows before, the rows after and the summary."""
    mloc0, meta0, before = live(env, ns, name)
    got0 = rows(env, mloc0)
    opts = {"column": "ts", "older-than": cutoff_text(minutes)}
    p = plan(env, ns, name, opts)
    s = summary_of(p)
    assert s["files_dropped"] == want_dropped and s["straddling_files"] == want_straddling, s
    dropped = {r["target"] for r in p if r["action"] == "drop-data-file"}
    assert len(dropped) == want_dropped
    # the plan changed nothing
    assert ow.load(env["catalog"], ns, name)[1]["current-snapshot-id"] == \
        meta0["current-snapshot-id"]
    row = env["pg"].wait_job(run(env, ns, name, opts))
    mloc, meta, after = live(env, ns, name)
    got = rows(env, mloc)
    snap = ow.snapshot(meta, meta["current-snapshot-id"])
    assert snap["parent-snapshot-id"] == meta0["current-snapshot-id"]
    assert snap["summary"]["operation"] == "delete", snap["summary"]
    assert int(snap["summary"]["deleted-data-files"]) == want_dropped
    removed = set(got0) - set(got)
    assert int(snap["summary"]["deleted-records"]) == len(removed) == s["rows_removed"]
    # no row came back or changed
    assert set(got) <= set(got0) and all(got[i] == got0[i] for i in got)
    # the dropped files are exactly those no longer live; the data files stay in storage
    gone = set(data_files(before)) - set(data_files(after))
    assert {ow.canon(env["st"], x) for x in gone} == {ow.canon(env["st"], x) for x in dropped}
    assert "%d data files dropped whole, %d rows removed" % (want_dropped, len(removed)) in \
        row["message"], row
    assert (row["data_files_removed"], row["rows_removed"]) == (want_dropped, len(removed)), row
    return got0, got, s


# ---------------------------------------------------------------------------

def test_unpartitioned_exact_cutoff(env):
    smallfiles.make_table(env["catalog"], env["st"], "ret", "flat", files=20, rows_per_file=10,
                          partitioned=False, seed=1)
    ow.give_to_server(env["file_root"])
    # minute 60 is file 6's first row: files 0..5 hold exactly the rows before it
    got0, got, s = check_dropped(env, "ret", "flat", 60, 6)
    assert set(got0) - set(got) == older_ids(got0, 60)
    assert not older_ids(got, 60)
    assert s["files_dropped_by_partition"] == 0 and s["unknown_files"] == 0


def test_partitioned_straddling_file_kept(env):
    smallfiles.make_table(env["catalog"], env["st"], "ret", "bycat", files=20, rows_per_file=10,
                          partitioned=True, seed=2)
    ow.give_to_server(env["file_root"])
    p = plan(env, "ret", "bycat", {"column": "ts", "older-than": cutoff_text(65)})
    strad = [r for r in p if r["action"] == "straddling-data-file"]
    assert len(strad) == 1 and strad[0]["detail"]["records"] == 10, strad
    assert 1 <= strad[0]["detail"]["rows_older_estimated"] <= 9
    got0, got, s = check_dropped(env, "ret", "bycat", 65, 6, want_straddling=1)
    # the rows before the cutoff left are the straddling file's: 60..64
    assert set(got0) - set(got) == older_ids(got0, 60)
    assert older_ids(got, 65) == {60, 61, 62, 63, 64}
    assert s["straddling_rows_older_estimated"] == strad[0]["detail"]["rows_older_estimated"]
    # mode metadata keeps the straddling file: the estimate is the files dropped
    assert s["rows_removed_estimated"] == s["rows_removed"] == 60, s


def evolve_to_day(env, ns, name, files, rows_per_file, first_id):
    """Move the table to a new default spec day(ts) and append `files`
    Parquet files written in it, file i holding rows_per_file rows from id
    first_id + i * 1440 (one day apart: each file its own day)."""
    cat, st = env["catalog"], env["st"]
    _, meta = ow.load(cat, ns, name)
    spec = {"spec-id": 1, "fields": [{"name": "ts_day", "transform": "day",
                                      "source-id": 6, "field-id": 1001}]}
    ow.commit(cat, ns, name, {
        "requirements": [{"type": "assert-table-uuid", "uuid": meta["table-uuid"]}],
        "updates": [{"action": "add-spec", "spec": spec},
                    {"action": "set-default-spec", "spec-id": 1}]})
    _, meta = ow.load(cat, ns, name)
    import compact as cp
    import iceberg_avro_schemas as ias
    import avro_codec
    tmp = tempfile.mkdtemp(prefix="tms-retention-")
    try:
        data_dir = cp.data_location(meta)
        jobs, uris, days = [], [], []
        for i in range(files):
            first = first_id + i * 1440
            day = (EPOCH + datetime.timedelta(minutes=first)).date()
            days.append((day - datetime.date(1970, 1, 1)).days)
            prefix = "day-%05d-%s" % (i, uuid.uuid4())
            jobs.append({"mode": "write", "schema": {"fields": smallfiles.SCHEMA["fields"]},
                         "query": smallfiles._rows_query(first, rows_per_file, "e", 0),
                         "output_files": 1, "output_dir": os.path.join(tmp, "d%d" % i),
                         "file_prefix": prefix, "compression": "zstd",
                         "iceberg_schema": json.dumps(smallfiles.SCHEMA)})
            uris.append("%s/ts_day=%s/%s-00000.parquet" % (data_dir, day.isoformat(), prefix))
        outs = cp.run_node({"jobs": jobs})["results"]
        entries = []
        for uri, res, d in zip(uris, outs, days):
            o = res["files"][0]
            with open(o["path"], "rb") as fh:
                st.write(uri, fh.read())
            entries.append(smallfiles._data_file(uri, o, {"ts_day": d}))
        rnd = __import__("random").Random(11)
        snap = smallfiles._snapshot(meta, rnd, "append")
        _, _, records = ow._list_schema_and_meta(st, ow.snapshot(meta, meta["current-snapshot-id"]))
        schema = ias.manifest_entry_schema(2, [("ts_day", "int", 1001)])
        recs = [ow._conform({"status": 1, "snapshot_id": snap["snapshot-id"],
                             "sequence_number": None, "file_sequence_number": None,
                             "data_file": df}, json.loads(schema)) for df in entries]
        path = "%s/metadata/%s-m0.avro" % (meta["location"].rstrip("/"), uuid.uuid4())
        hmeta = {"schema": json.dumps(smallfiles.SCHEMA), "schema-id": "0",
                 "partition-spec": json.dumps(spec["fields"]), "partition-spec-id": "1",
                 "format-version": "2", "content": "data"}
        data = avro_codec.write_container(schema, recs, "deflate", hmeta)
        st.write(path, data)
        seq = snap["sequence-number"]
        rec = {"manifest_path": path, "manifest_length": len(data), "partition_spec_id": 1,
               "content": 0, "sequence_number": seq, "min_sequence_number": seq,
               "added_snapshot_id": snap["snapshot-id"], "added_files_count": len(entries),
               "existing_files_count": 0, "deleted_files_count": 0,
               "added_rows_count": sum(e["record_count"] for e in entries),
               "existing_rows_count": 0, "deleted_rows_count": 0, "partitions": None,
               "key_metadata": None}
        smallfiles._push(cat, [ns], name, st, meta, snap, [rec] + records)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    ow.give_to_server(env["file_root"])


def test_evolved_spec_day_partitions(env):
    smallfiles.make_table(env["catalog"], env["st"], "ret", "evolved", files=8, rows_per_file=10,
                          partitioned=True, seed=3)
    # spec 1 day(ts): 6 files on days 10..15 after 2024-01-01 (ids from 14400)
    evolve_to_day(env, "ret", "evolved", files=6, rows_per_file=10, first_id=14400)
    _, _, before = live(env, "ret", "evolved")
    assert {tuple(k for k, _ in f["partition"]) for f in before.values()} == \
        {("category",), ("ts_day",)}
    # the cutoff: midnight of day 13 -- the 8 old files (day 0) by their
    # bounds, days 10, 11, 12 by their partition
    minutes = 13 * 1440
    got0, got, s = check_dropped(env, "ret", "evolved", minutes, 8 + 3)
    assert s["files_dropped_by_partition"] == 3, s
    assert set(got0) - set(got) == older_ids(got0, minutes)
    assert not older_ids(got, minutes) and len(got) == 30


def test_nothing_older_and_bad_column(env):
    smallfiles.make_table(env["catalog"], env["st"], "ret", "young", files=4, rows_per_file=10,
                          partitioned=False, seed=4)
    ow.give_to_server(env["file_root"])
    _, meta0, _ = live(env, "ret", "young")
    opts = {"column": "ts", "older-than": "2023-06-01 00:00Z"}
    s = summary_of(plan(env, "ret", "young", opts))
    assert s["files_dropped"] == 0 and s["files_kept"] == 4, s
    row = env["pg"].wait_job(run(env, "ret", "young", opts))
    assert ow.load(env["catalog"], "ret", "young")[1]["current-snapshot-id"] == \
        meta0["current-snapshot-id"]
    assert "0 data files dropped whole" in row["message"], row
    assert (row["data_files_removed"], row["rows_removed"]) == (0, 0), row
    n = q(env, "SELECT count(*) FROM tms.maintenance_jobs")[0][0]
    for opts, says in (({"column": "nosuch", "older-than": "1 day"}, "is not a column"),
                       ({"column": "category", "older-than": "1 day"}, "is of type string"),
                       ({"column": "id", "older-than": "1 day"}, "needs a unit")):
        with pytest.raises(Exception) as ei:
            run(env, "ret", "young", opts)
        assert says in str(ei.value) and "22023" in repr(ei.value) or says in str(ei.value), ei.value
    # a format v1 table: mode delete-files (v1 has no delete files) refused
    # before a job, with a hint that works; v3 writes deletion vectors
    # (test_v3_tables.py)
    env["catalog"].request("POST", "namespaces/ret/tables", {
        "name": "v1", "schema": smallfiles.SCHEMA, "properties": {"format-version": "1"}})
    for fn in ("run_operation", "plan_operation"):
        e = env["pg"].query_error("SELECT * FROM tms.%s(%%s, 'ret', 'v1', 'retention', %%s)" % fn,
                                  (env["server"], json.dumps({"column": "ts", "older-than": "1 day",
                                                              "mode": "delete-files"})))
        assert e.pgcode == "0A000", str(e)
        assert "format-version is 1" in (e.diag.message_detail or ""), e.diag.message_detail
        assert "mode" in (e.diag.message_hint or ""), e.diag.message_hint
    assert q(env, "SELECT count(*) FROM tms.maintenance_jobs")[0][0] == n
    env["catalog"].request("POST", "namespaces/ret/tables", {
        "name": "v3", "schema": smallfiles.SCHEMA, "properties": {"format-version": "3"}})
    rows = q(env, "SELECT action FROM tms.plan_operation(%s, 'ret', 'v3', 'retention', %s)",
             (env["server"], json.dumps({"column": "ts", "older-than": "1 day",
                                         "mode": "delete-files"})))
    assert ("summary",) in rows, rows
    # its other modes are planned (an empty table: nothing to drop)
    rows = q(env, "SELECT action FROM tms.plan_operation(%s, 'ret', 'v3', 'retention', %s)",
             (env["server"], json.dumps({"column": "ts", "older-than": "1 day"})))
    assert ("summary",) in rows, rows


def test_concurrent_append_kept(env):
    """A writer's append lands between the plan and the commit (the
    catalog's interpose fault): the retention's first commit is refused
    (409), it reloads and plans again, and lands on top of the append,
    whose file (a copy without column metrics: unknown, kept) stays live."""
    smallfiles.make_table(env["catalog"], env["st"], "ret", "cappend", files=12, rows_per_file=10,
                          partitioned=True, seed=6)
    _, meta, before = live(env, "ret", "cappend")
    src = sorted(p for p, f in before.items()
                 if f["content"] == 0 and dict(f["partition"]).get("category") == "c3")[-1]
    dst = src.rsplit("/", 1)[0] + "/concurrent-%s.parquet" % uuid.uuid4().hex[:8]
    data = env["st"].read(src)
    env["st"].write(dst, data)
    body, _ = ow.append_commit(env["st"], meta, [{
        "path": dst, "records": before[src]["records"], "size": len(data),
        "partition": dict(before[src]["partition"])}], seed=3)
    ow.give_to_server(env["file_root"])
    env["catalog"].reset_requests()
    env["catalog"].fault(r"/tables/cappend$", action="interpose", method="POST", commits=[body])
    row = env["pg"].wait_job(run(env, "ret", "cappend",
                                 {"column": "ts", "older-than": cutoff_text(60)}))
    log = [(r["status"], r["fault"]) for r in
           env["catalog"].requests(r"/tables/cappend$")["requests"] if r["method"] == "POST"]
    assert log[:2] == [(200, "interposed"), (409, "interpose")] and log[-1][0] == 200, log
    _, meta2, after = live(env, "ret", "cappend")
    assert dst in after
    snap = ow.snapshot(meta2, meta2["current-snapshot-id"])
    assert snap["summary"]["operation"] == "delete" and snap["summary"]["deleted-data-files"] == "6"
    # the append is the delete snapshot's parent: nothing of it was undone
    appended = ow.snapshot(meta2, snap["parent-snapshot-id"])
    assert appended["parent-snapshot-id"] == meta["current-snapshot-id"]
    assert len(data_files(after)) == 12 - 6 + 1
    assert "1 files without bounds on the column were kept" in row["message"], row


def test_policy_schedules_retention(env):
    """A policy's rule runs retention like every operation: its job drops
    the files wholly before the cutoff, recorded with the rule."""
    smallfiles.make_table(env["catalog"], env["st"], "ret", "bypolicy", files=12,
                          rows_per_file=10, partitioned=False, seed=7)
    ow.give_to_server(env["file_root"])
    tag = uuid.uuid4().hex[:6]
    q(env, "SELECT tms.create_object_group(%s, server => %s, namespace_pattern => 'ret',"
           " table_pattern => 'bypolicy')", ("g-" + tag, env["server"]))
    q(env, "SELECT tms.create_policy(%s, %s)", ("p-" + tag, "g-" + tag))
    rule = q(env, "SELECT tms.add_rule(%s, 'retention', 'local', %s::jsonb, 'true', 'catch-up',"
                  " %s::jsonb)", ("p-" + tag, json.dumps({"commits-added": 1}),
                                  json.dumps({"column": "ts",
                                              "older-than": cutoff_text(60)})))[0][0]
    try:
        wait_for(lambda: q(env, "SELECT count(*) FROM tms.maintenance_jobs WHERE rule_id = %s"
                                "   AND state IN ('succeeded', 'failed')", (rule,))[0][0] > 0,
                 timeout=120, what="the policy's retention job")
        jid = q(env, "SELECT min(id) FROM tms.maintenance_jobs WHERE rule_id = %s", (rule,))[0][0]
        row = env["pg"].wait_job(jid)
    finally:
        q(env, "SELECT tms.drop_policy(%s)", ("p-" + tag,))
    assert "6 data files dropped whole, 60 rows removed" in row["message"], row
    assert (row["data_files_removed"], row["rows_removed"]) == (6, 60), row
    _, meta, after = live(env, "ret", "bypolicy")
    assert len(data_files(after)) == 6
    assert ow.snapshot(meta, meta["current-snapshot-id"])["summary"]["operation"] == "delete"
