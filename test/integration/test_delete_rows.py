"""
test_delete_rows.py -- tms.delete_rows on engine 'local': the rows a where
matches leave the table, the data files whose rows all match by a
metadata-only 'delete', the files that may hold some by the compaction
helper rewriting them without those rows ('overwrite'), in one job like
any other; tms.plan_operation shows the same plan and changes nothing.

Every expectation is checked independently of tms: the rows through
icebird (the table's Parquet read by another implementation), the
snapshots' operations from the catalog's metadata, and the rows expected
computed here in Python from the rows read before:

  - an unpartitioned table, a where on the id (ranges, IN, BETWEEN):
    the files wholly inside dropped, two files rewritten, exactly the
    matching rows gone, the job's counts exact;
  - a table partitioned by category with position and equality deletes,
    a where mixing the partition column, an id and a boolean: the files of
    the partition dropped by their partition value, the others rewritten
    where they may match; exactly the matching rows gone;
  - mode metadata: only the files whose rows all match go;
  - mode delete-files, on the same two tables: the files whose rows all
    match dropped, the others kept untouched, exactly the matching rows
    deleted by new position delete files (one 'delete' row delta after the
    drop; its summary's added-position-deletes the visible matching rows,
    none a delete there deleted already); a "compaction" rewriting every
    data file between the plan and the commit of the row delta: the
    commit gets 409, is not built on the new files, what it wrote is
    deleted, the job plans again and the rows are still deleted, from the
    new files;
  - a where naming no column (42703), a literal of the wrong type (22023),
    a column of a type not filtered (0A000): refused with DETAIL and HINT
    when the table is loaded, no job recorded.

The module runs its own cluster, catalog, s3rver and file root.
Run: /usr/bin/python3 -m pytest -q test/integration/test_delete_rows.py
"""

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

pytestmark = pytest.mark.own_cluster


@pytest.fixture(scope="module")
def env(tms_world):
    srv = "drcat"
    w = tms_world("drw", settings=dict(FAST_WORKERS), catalog={}, real=True, sql=lambda w: [
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


def delete_rows(env, ns, name, where, options=None):
    return q(env, "SELECT tms.delete_rows(%s, %s, %s, %s, %s::jsonb)",
             (env["server"], ns, name, where, json.dumps(options or {})))[0][0]


def plan(env, ns, name, where, mode="rewrite"):
    return [dict(action=a, target=t, detail=d) for a, t, d in q(
        env, "SELECT action, target, detail FROM tms.plan_operation(%s, %s, %s, 'retention',"
             " %s::jsonb)", (env["server"], ns, name,
                             json.dumps({"where": where, "mode": mode})))]


def rows(env, mloc):
    """The table's rows as icebird reads them (deletes applied), by id."""
    out = ow.icebird(mloc, s3_endpoint=env["s3"].endpoint, file_root=env["file_root"],
                     dump_rows=True)
    return {int(r["id"]): r for r in out["row_values"]}


def flag_of(row):
    v = row["flag"]
    return v if v is None or isinstance(v, bool) else str(v).lower() == "true"


def delete_and_check(env, ns, name, where, matches, want_dropped, mode="rewrite"):
    """Plan, then run tms.delete_rows(where) in mode; matches(id, row) says
    which rows the where matches.  Checks the plan changed nothing, the rows
    read back, the snapshots; returns (plan summary, job row, rows before,
    the plan's rows)."""
    mloc0, meta0 = ow.load(env["catalog"], ns, name)
    got0 = rows(env, mloc0)
    gone = {i for i, r in got0.items() if matches(i, r)}
    assert gone and gone != set(got0)
    p = plan(env, ns, name, where, mode)
    s = [r for r in p if r["action"] == "summary"][0]["detail"]
    assert s["where"] == where and s["mode"] == mode, s
    assert s["files_dropped"] == want_dropped, s
    assert ow.load(env["catalog"], ns, name)[1]["current-snapshot-id"] == \
        meta0["current-snapshot-id"]
    row = env["pg"].wait_job(delete_rows(env, ns, name, where, {"mode": mode}))
    assert row["state"] == "succeeded", row
    mloc, meta = ow.load(env["catalog"], ns, name)
    got = rows(env, mloc)
    # exactly the matching rows are gone; the others are unchanged
    assert set(got) == set(got0) - gone
    assert all(got[i] == got0[i] for i in got)
    assert row["data_files_removed"] == want_dropped, row
    # a delete, then an overwrite (delete-files: a delete of position
    # deletes) on it, in the same job
    snap = ow.snapshot(meta, meta["current-snapshot-id"])
    assert snap["summary"]["operation"] == ("overwrite" if mode == "rewrite" else "delete"), \
        snap["summary"]
    delete_snap = ow.snapshot(meta, snap["parent-snapshot-id"])
    assert delete_snap["summary"]["operation"] == "delete", delete_snap["summary"]
    assert delete_snap["parent-snapshot-id"] == meta0["current-snapshot-id"]
    return s, row, got0, p


# The unpartitioned table of ten files of ids 0..99 and a where whose rows
# fill files 0..2 and part of files 4 and 8 (its string literal quoted).
FLAT_WHERE = "id < 30 OR id IN (45, 47) OR id BETWEEN 80 AND 84 OR category = 'it''s'"


def flat_matches(i, row):
    return i < 30 or i in (45, 47) or 80 <= i <= 84


def flat_table(env, name):
    smallfiles.make_table(env["catalog"], env["st"], "drw", name, files=10, rows_per_file=10,
                          partitioned=False, seed=21)
    ow.give_to_server(env["file_root"])


def test_unpartitioned(env):
    flat_table(env, "flat")
    s, row, got0, p = delete_and_check(env, "drw", "flat", FLAT_WHERE, flat_matches, 3)
    strad = [r["detail"] for r in p if r["action"] == "straddling-data-file"]
    # files 4 and 8 may match, the others cannot
    assert s["straddling_files"] == 2 and s["files_kept"] == 5, s
    # the plan's estimate from the metrics (even spread within each file's
    # ids): the 30 rows of the files dropped and about 2 + 5 of the others
    assert abs(s["rows_removed_estimated"] - 37) <= 2, s
    assert all(0 < d["rows_matching_estimated"] <= 10 for d in strad), strad
    # exact: 30 rows with the files, 7 by the rewrite
    assert row["rows_removed"] == 37, row
    assert row["data_files_rewritten"] == 2 and row["data_files_added"] == 1, row  # one group
    assert "2 data files rewritten without their matching rows, 7 rows removed from them" \
        in row["message"], row


def test_partitioned_with_deletes(env):
    smallfiles.make_table(env["catalog"], env["st"], "drw", "bycat", files=16, rows_per_file=10,
                          partitioned=True, with_deletes=True, seed=22)
    ow.give_to_server(env["file_root"])
    where = "category = 'c1' OR id = 5 OR (flag = true AND id >= 150)"
    s, row, got0, _ = delete_and_check(
        env, "drw", "bycat", where,
        lambda i, r: r["category"] == "c1" or i == 5 or (flag_of(r) is True and i >= 150), 4)
    # the four files of c1 by their partition value alone
    assert s["files_dropped_by_partition"] == 4, s
    assert s["straddling_files"] >= 1, s


def test_mode_metadata(env):
    """Mode metadata: the files whose rows all match go, the file that may
    hold some is listed and kept with its rows."""
    smallfiles.make_table(env["catalog"], env["st"], "drw", "meta", files=5, rows_per_file=10,
                          partitioned=False, seed=24)
    ow.give_to_server(env["file_root"])
    mloc0, meta0 = ow.load(env["catalog"], "drw", "meta")
    got0 = rows(env, mloc0)
    row = env["pg"].wait_job(delete_rows(env, "drw", "meta", "id < 25", {"mode": "metadata"}))
    assert row["state"] == "succeeded", row
    mloc, meta = ow.load(env["catalog"], "drw", "meta")
    got = rows(env, mloc)
    assert set(got) == {i for i in got0 if i >= 20}
    assert row["data_files_removed"] == 2 and row["rows_removed"] == 20, row
    assert "1 files may hold matching rows and were kept (mode metadata)" in row["message"], row
    snap = ow.snapshot(meta, meta["current-snapshot-id"])
    assert snap["summary"]["operation"] == "delete", snap["summary"]


def test_refused_when_loaded(env):
    smallfiles.make_table(env["catalog"], env["st"], "drw", "errs", files=2, rows_per_file=10,
                          partitioned=False, seed=23)
    ow.give_to_server(env["file_root"])
    n = q(env, "SELECT count(*) FROM tms.maintenance_jobs")[0][0]
    e = env["pg"].query_error("SELECT tms.delete_rows(%s, 'drw', 'errs', 'nosuch = 1')",
                              (env["server"],))
    assert e.pgcode == "42703" and "nosuch" in e.diag.message_primary, str(e)
    assert "id, category" in (e.diag.message_detail or ""), str(e)
    assert e.diag.message_hint, str(e)
    e = env["pg"].query_error("SELECT tms.delete_rows(%s, 'drw', 'errs', 'id = ''abc''')",
                              (env["server"],))
    assert e.pgcode == "22023" and "'abc'" in (e.diag.message_detail or ""), str(e)
    assert "integer" in (e.diag.message_hint or ""), str(e)
    e = env["pg"].query_error("SELECT tms.delete_rows(%s, 'drw', 'errs', 'day < ''soon''')",
                              (env["server"],))
    assert e.pgcode == "22023", str(e)
    e = env["pg"].query_error("SELECT tms.delete_rows(%s, 'drw', 'errs', 'score = 1')",
                              (env["server"],))
    assert e.pgcode == "0A000" and "double" in e.diag.message_primary, str(e)
    e = env["pg"].query_error(
        "SELECT * FROM tms.plan_operation(%s, 'drw', 'errs', 'retention', %s)",
        (env["server"], json.dumps({"where": "ts >= 'yesterday'"})))
    assert e.pgcode == "22023", str(e)
    assert q(env, "SELECT count(*) FROM tms.maintenance_jobs")[0][0] == n


# mode delete-files: position deletes instead of rewrites
# ---------------------------------------------------------------------------

def data_files_of(env, meta):
    return {p for p, f in ow.live_files(env["st"], meta).items() if f["content"] == 0}


def delete_files_check(env, ns, name, where, matches, want_dropped):
    """delete_and_check in mode delete-files, and: the data files are those
    of before less the ones dropped whole, untouched; the plan lists every
    straddling file as given position deletes; the row delta's summary
    counts the position deletes the job removed; returns (plan summary, job
    row, rows before, the row delta's summary)."""
    mloc0, meta0 = ow.load(env["catalog"], ns, name)
    before = ow.live_files(env["st"], meta0)
    s, row, got0, p = delete_and_check(env, ns, name, where, matches, want_dropped,
                                       mode="delete-files")
    straddling = [r for r in p if r["action"] == "straddling-data-file"]
    assert straddling and all(r["detail"]["position_deletes"] and r["detail"]["kept"]
                              for r in straddling), straddling
    assert [r["target"] for r in p if r["action"] == "commit"] == ["delete", "delete"] or \
        want_dropped == 0, p
    dropped = {r["target"] for r in p if r["action"] == "drop-data-file"}
    _, meta = ow.load(env["catalog"], ns, name)
    after = ow.live_files(env["st"], meta)
    assert data_files_of(env, meta) == data_files_of(env, meta0) - dropped
    new_deletes = {pth for pth, f in after.items() if f["content"] == 1 and pth not in before}
    assert new_deletes and len(new_deletes) == row["delete_files_added"], row
    summ = ow.snapshot(meta, meta["current-snapshot-id"])["summary"]
    assert int(summ["added-position-delete-files"]) == len(new_deletes), summ
    assert int(summ["added-delete-files"]) == len(new_deletes), summ
    assert "deleted-data-files" not in summ and "added-data-files" not in summ, summ
    dropped_rows = sum(before[d]["records"] for d in dropped)
    assert int(summ["added-position-deletes"]) == row["rows_removed"] - dropped_rows, (summ, row)
    assert "rows removed from them by %d position delete files" % len(new_deletes) \
        in row["message"], row
    return s, row, got0, summ


def test_delete_files_unpartitioned(env):
    flat_table(env, "dflat")
    s, row, _, _ = delete_files_check(env, "drw", "dflat", FLAT_WHERE, flat_matches, 3)
    assert s["straddling_files"] == 2, s
    # exact: 30 rows with the files, 7 by position deletes (one file: one group)
    assert row["rows_removed"] == 37 and row["delete_files_added"] == 1, row
    assert row["data_files_rewritten"] == 0 and row["data_files_added"] == 0, row


def test_delete_files_partitioned_with_deletes(env):
    """Position and equality deletes there already: a row they delete is
    not deleted again (not counted), the others matching are."""
    smallfiles.make_table(env["catalog"], env["st"], "drw", "dbycat", files=16, rows_per_file=10,
                          partitioned=True, with_deletes=True, seed=22)
    ow.give_to_server(env["file_root"])
    # ids 70 and 73 (file 7, category c3) a position delete removed already
    where = "category = 'c1' OR id = 5 OR (flag = true AND id >= 150) OR id BETWEEN 70 AND 73"
    s, row, got0, summ = delete_files_check(
        env, "drw", "dbycat", where,
        lambda i, r: r["category"] == "c1" or i == 5 or (flag_of(r) is True and i >= 150)
        or 70 <= i <= 73, 4)
    assert 70 not in got0 and 73 not in got0 and 71 in got0, sorted(got0)
    assert s["files_dropped_by_partition"] == 4, s
    # exact: the position deletes are the visible matching rows outside c1,
    # none that a delete there deleted already
    others = sum(1 for i, r in got0.items() if r["category"] != "c1" and (
        i == 5 or (flag_of(r) is True and i >= 150) or 70 <= i <= 73))
    assert int(summ["added-position-deletes"]) == others, (summ, others)


def test_delete_files_conflict_planned_again(env):
    """A compaction commits between the plan and the commit of the row
    delta, rewriting a data file the position deletes point at: that commit
    must not land (its deletes would miss the rows of the new file); the
    job plans again and deletes the rows in the new file."""
    smallfiles.make_table(env["catalog"], env["st"], "drw", "dconf", files=10, rows_per_file=10,
                          partitioned=False, seed=25)
    ow.give_to_server(env["file_root"])
    mloc0, meta0 = ow.load(env["catalog"], "drw", "dconf")
    got0 = rows(env, mloc0)
    before = ow.live_files(env["st"], meta0)
    where = "id IN (45, 47) OR id BETWEEN 82 AND 84"
    gone = {45, 47, 82, 83, 84}
    # every data file rewritten (copied under a new name) by the "compaction"
    man = sorted({f["manifest"] for f in before.values() if f["content"] == 0})
    body, written = ow.delete_manifests_commit(env["st"], meta0, man, seed=6, copy=True)
    ow.give_to_server(env["file_root"])
    env["catalog"].reset_requests()
    env["catalog"].fault(r"/tables/dconf$", action="interpose", method="POST", commits=[body])
    row = env["pg"].wait_job(delete_rows(env, "drw", "dconf", where, {"mode": "delete-files"}))
    assert row["state"] == "succeeded", row
    mloc, meta = ow.load(env["catalog"], "drw", "dconf")
    got = rows(env, mloc)
    assert set(got) == set(got0) - gone
    assert all(got[i] == got0[i] for i in got)
    assert row["rows_removed"] == len(gone), row
    # planned again within the job's one attempt, not failed and retried
    assert row["attempts"] == 1, row
    assert "of the retention no longer fit the table" in env["pg"].log_tail(300)
    # the row delta landed on the compaction, which stays
    posts = [(r["status"], r["fault"]) for r in
             env["catalog"].requests(r"/tables/dconf$")["requests"] if r["method"] == "POST"]
    assert posts[0] == (200, "interposed") and posts[1][0] == 409, posts
    snap = ow.snapshot(meta, meta["current-snapshot-id"])
    assert snap["summary"]["operation"] == "delete", snap["summary"]
    parent = ow.snapshot(meta, snap["parent-snapshot-id"])
    assert parent["summary"]["operation"] == "replace", parent["summary"]
    after = ow.live_files(env["st"], meta)
    assert not {p for p, f in before.items() if f["content"] == 0} & set(after)
    assert len(written) > 1
    # what the given-up commit wrote is gone: the only Parquet files below
    # data/ are the old data files (reachable from the first snapshot), the
    # copies and the live delete file
    st = env["st"]
    known = {ow.canon(st, p) for p in list(before) + list(after)}
    listed = {ow.canon(st, u) for u in
              ow.list_location(st, meta["location"].rstrip("/") + "/data")}
    deletes = [ow.canon(st, p) for p, f in after.items() if f["content"] == 1]
    assert len(deletes) == 1 and deletes[0] in listed, (deletes, sorted(listed))
    stray = [u for u in listed if u.endswith(".parquet") and u not in known]
    assert not stray, stray
