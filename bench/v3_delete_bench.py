#!/usr/bin/python3
"""Compaction on engine local of a format v3 table whose deleted rows are
deletion vectors, beside the same table in format v2 with position delete
files, in the same run.

Usage: bench/v3_delete_bench.py [--files N] [--rows-per-file N]
                                [--delete-every N] [--repeat N]
                                [--deadline S] [--json PATH] [--no-install]

The two tables hold the same --files (default 20) data files of
--rows-per-file rows (default 20,000), real Parquet written once by DuckDB
and shared, in one identity partition; every --delete-every-th row
(default 10: 10 % of the rows) of each file is deleted:

  v3   one Puffin file of deletion vectors (deletion-vector-v1 blobs, one
       per data file: https://iceberg.apache.org/puffin-spec/), written by
       the v3 test world (test/v3world.py), with row lineage;
  v2   one position delete file (Parquet, file_path and pos) per data file.

tms compacts each (rewrite-all: every file rewritten, the deletes applied
and removed) in turn, --repeat times (default 3), interleaved so that the
load of a shared machine falls on both alike; main is set back to the
tables' snapshot before each run.  A run is timed from the job's started_at
to its finished_at (server clock).  The figure: the median seconds of each
and their ratio v3 / v2, with the 1-minute load average at each run's start
and end.  The rows left are checked after each run (the deleted ones gone).

One throwaway world on 127.0.0.1 / Unix sockets, as bench/compact_bench.py's:
a PostgreSQL 15 cluster with tms, one for the test REST catalog's pointers,
the catalog, a file:// warehouse.  The bench takes the machine's install
lock (scripts/install-lock.sh) only while it installs (not with
--no-install): its figure is a ratio of two runs side by side.
"""

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
TEST = os.path.join(HERE, "..", "test")
sys.path.insert(0, HERE)
sys.path.insert(0, TEST)

import compact_bench as cb  # noqa: E402
import opsworld as ow  # noqa: E402
import v3world as v3  # noqa: E402
import world  # noqa: E402
from pgcluster import FAST_WORKERS, Cluster, wait_for  # noqa: E402

POS_IDS = "{file_path: 2147483546, pos: 2147483545}"


def log(msg):
    sys.stderr.write("[v3_delete_bench] %s\n" % msg)
    sys.stderr.flush()


def duck(statements, timeout):
    r = subprocess.run(["node", os.path.join(world.NODE_DIR, "duckdb_sql.mjs")],
                       input=json.dumps({"statements": statements}), capture_output=True,
                       text=True, timeout=timeout, cwd=world.NODE_DIR)
    if r.returncode != 0:
        raise RuntimeError(r.stderr[-3000:])
    return json.loads(r.stdout)["results"]


def lit(s):
    return "'" + s.replace("'", "''") + "'"


def data_files(tmp, n, rows, timeout):
    """n Parquet files of rows rows (id, name, part 0) with field ids."""
    out, stmts = [], []
    for k in range(n):
        path = os.path.join(tmp, "d%05d.parquet" % k)
        stmts.append("COPY (SELECT (%d + i)::BIGINT AS id, 'n' || i::VARCHAR AS name,"
                     " 0::INTEGER AS part FROM range(%d) t(i)) TO %s (FORMAT parquet,"
                     " COMPRESSION zstd, FIELD_IDS {id: 1, name: 2, part: 3})"
                     % (k * rows, rows, lit(path)))
        out.append(path)
    duck(stmts, timeout)
    return out


def make_table(st, loc, fv, files, rows, every, tmp, timeout):
    """The table at loc (file://) in format fv: the files appended, then one
    delete snapshot (v3: one Puffin file of DVs; v2: a position delete file
    per data file).  Its metadata location."""
    t = v3._Table(st, loc, tmp, fv=fv)
    dfs = []
    for k, local in enumerate(files):
        uri = "%s/data/part=0/%05d-%s.parquet" % (t.loc, k, uuid.uuid4())
        with open(local, "rb") as fh:
            data = fh.read()
        st.write(uri, data)
        dfs.append({"path": uri, "records": rows, "size": len(data), "part": 0})

    def entry(f, content=0, fmt="PARQUET", extra=None):
        d = {"content": content, "file_path": f["path"], "file_format": fmt,
             "partition": {"part": 0}, "record_count": f["records"],
             "file_size_in_bytes": f["size"]}
        if fv >= 3:
            d["first_row_id"] = None
        d.update(extra or {})
        return (1, d, None, None)

    t.commit("append", [lambda s: t.manifest(0, [entry(f) for f in dfs], s)], [])
    positions = list(range(0, rows, every))
    if fv >= 3:
        blobs = t.puffin([(f, positions) for f in dfs])
        ents = [entry(b, 1, "PUFFIN", {"referenced_data_file": b["ref"],
                                       "content_offset": b["offset"],
                                       "content_size_in_bytes": b["length"]}) for b in blobs]
    else:
        stmts, dels = [], []
        for k, f in enumerate(dfs):
            local = os.path.join(tmp, "pd%05d.parquet" % k)
            stmts.append("COPY (SELECT %s AS file_path, i::BIGINT AS pos FROM range(0, %d, %d) t(i))"
                         " TO %s (FORMAT parquet, COMPRESSION zstd, FIELD_IDS %s)"
                         % (lit(f["path"]), rows, every, lit(local), POS_IDS))
            dels.append(local)
        duck(stmts, timeout)
        ents = []
        for local, f in zip(dels, dfs):
            uri = "%s/data/part=0/%s-deletes.parquet" % (t.loc, uuid.uuid4())
            with open(local, "rb") as fh:
                data = fh.read()
            st.write(uri, data)
            ents.append(entry({"path": uri, "records": len(positions), "size": len(data)}, 1))
    kept = list(t.manifests)
    t.commit("delete", [lambda s: t.manifest(1, ents, s)], kept)
    return t.write_metadata()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--files", type=int, default=20)
    ap.add_argument("--rows-per-file", type=int, default=20000)
    ap.add_argument("--delete-every", type=int, default=10)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--deadline", type=int, default=3600)
    ap.add_argument("--json")
    ap.add_argument("--no-install", action="store_true",
                    help="bench the tms already installed (no make install)")
    a = ap.parse_args()

    def alarm(*_):
        raise TimeoutError("deadline of %d s reached" % a.deadline)
    signal.signal(signal.SIGALRM, alarm)
    signal.alarm(a.deadline)
    root = tempfile.mkdtemp(prefix="tms-v3-delete-bench-", dir="/tmp")
    os.chmod(root, 0o755)
    pg = catpg = cat = lock = None
    rows_total = a.files * a.rows_per_file
    left = rows_total - a.files * len(range(0, a.rows_per_file, a.delete_every))
    out = {"files": a.files, "rows_per_file": a.rows_per_file,
           "deleted_fraction": 1 - left / rows_total, "repeat": a.repeat, "runs": []}
    try:
        catpg = Cluster(os.path.join(root, "catpg", "data"), preload=())
        catpg.init()
        catpg.start()
        catpg.create_database()
        files = os.path.join(root, "files")
        os.makedirs(files)
        os.chmod(files, 0o755)
        cat = world.CatalogServer(catpg.dsn(), "file://%s/wh" % files,
                                  catalog_name="bench_%s" % uuid.uuid4().hex[:6], file_root=files)
        st = ow.storage(None, files)
        tmp = os.path.join(root, "tmp")
        os.makedirs(tmp)
        local = data_files(tmp, a.files, a.rows_per_file, a.deadline)
        base = {}
        for fv in (2, 3):
            mloc = make_table(st, "file://%s/wh/b/v%d" % (files, fv), fv, local, a.rows_per_file,
                              a.delete_every, tmp, a.deadline)
            cat.register("b", "v%d" % fv, mloc)
            base[fv] = ow.load(cat, "b", "v%d" % fv)[1]["current-snapshot-id"]
        ow.give_to_server(files)
        log("tables: %d files of %d rows, %.1f %% deleted" % (a.files, a.rows_per_file,
                                                               100 * out["deleted_fraction"]))

        def rollback(fv):
            _, meta = ow.load(cat, "b", "v%d" % fv)
            ow.commit(cat, "b", "v%d" % fv, {
                "requirements": [{"type": "assert-table-uuid", "uuid": meta["table-uuid"]}],
                "updates": [{"action": "set-snapshot-ref", "ref-name": "main", "type": "branch",
                             "snapshot-id": base[fv]}]})

        if not a.no_install:
            lock = cb.install_lock()
            subprocess.run(["make", "-s", "WERROR=1", "install"], cwd=os.path.join(HERE, ".."),
                           check=True, stdout=subprocess.DEVNULL)
            if lock is not None:
                lock.close()
                lock = None
        pg = Cluster(os.path.join(root, "pg", "data"), settings=dict(FAST_WORKERS))
        pg.init()
        pg.start()
        pg.create_database()
        pg.psql("CREATE EXTENSION tms")
        pg.psql("CREATE SERVER cat FOREIGN DATA WRAPPER tms_iceberg OPTIONS (uri '%s',"
                " relative_path_root '%s', allowed_locations 'file://%s/');"
                " CREATE USER MAPPING FOR PUBLIC SERVER cat;" % (cat.uri, files, files))
        wait_for(lambda: pg.psql("SELECT count(*) FROM tms.workers WHERE role = 'worker'"
                                 " AND state = 'idle'") == "4", what="the pool")
        for rep in range(a.repeat):
            for fv in (2, 3):
                rollback(fv)
                l0 = cb.load()
                jid = int(pg.psql("SELECT tms.run_operation('cat', 'b', 'v%d', 'compaction',"
                                  " '{\"rewrite-all\": true}')" % fv))
                wait_for(lambda: pg.psql("SELECT finished_at IS NOT NULL FROM"
                                         " tms.maintenance_jobs WHERE id = %d" % jid) == "t",
                         timeout=a.deadline, interval=0.5, what="job %d" % jid)
                state, secs, err = pg.psql(
                    "SELECT state, extract(epoch FROM finished_at - started_at), last_error"
                    " FROM tms.maintenance_jobs WHERE id = %d" % jid).split("|")
                assert state == "succeeded", (state, err)
                _, meta = ow.load(cat, "b", "v%d" % fv)
                live = ow.live_files(st, meta).values()
                assert not [f for f in live if f["content"] != 0], "deletes left"
                assert sum(f["records"] for f in live) == left
                out["runs"].append({"format": fv, "seconds": float(secs), "repeat": rep,
                                    "load": [l0, cb.load()]})
                log("v%d: %.2f s (load %s)" % (fv, float(secs), out["runs"][-1]["load"]))
        med = {fv: cb.median([r["seconds"] for r in out["runs"] if r["format"] == fv])
               for fv in (2, 3)}
        out["median"] = {"v2 position deletes": med[2], "v3 deletion vectors": med[3],
                         "v3 / v2": med[3] / med[2]}
        log("medians: %s" % json.dumps(out["median"]))
        print(json.dumps(out, indent=1))
        if a.json:
            with open(a.json, "w") as f:
                json.dump(out, f, indent=1)
    finally:
        signal.alarm(0)
        if cat:
            cat.stop()
        for c in (pg, catpg):
            if c:
                c.destroy()
        if lock is not None:
            lock.close()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
