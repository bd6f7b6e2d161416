#!/usr/bin/python3
"""Compaction on engine local: throughput on a table of many small Parquet
files, next to DuckDB alone copying the same files into one (the limit of
what the helper does) and the test world's engine (test/engines/compact.py
with test/node/compact.mjs) in the same run; the helper's peak RSS next to
its memory limit.

Usage: bench/compact_bench.py [--files N] [--rows-per-file N]
                              [--memory-limit 1GB[,256MB...]] [--threads N]
                              [--sort ORDER]... [--no-engine]
                              [--extra-columns N] [--nested N] [--fast-table]
                              [--repeat N] [--no-binpack]
                              [--deadline S] [--json PATH] [--no-install]

--repeat N (default 3): DuckDB alone and tms (each --memory-limit) run
bin-pack in turn N times on the same snapshot, interleaved, so that the
load of a shared machine falls on both alike; every run records the
1-minute load average at its start and end, and "median" in the JSON
holds the medians (tms against DuckDB alone's).  --nested N adds N nested
columns (a struct of a long and a string, a list of ints, a map of string
to double, in turn) after the --extra-columns ones; --fast-table (implied
by --nested) writes the table by one DuckDB COPY a file with Iceberg field
ids at every depth and no read-back check, manifests without column
metrics (optional in the spec; tms computes its own), for 1 GB tables and
nested columns.

Run it without an outer flock: the tables are written first, then the
bench takes /tmp/tms-install.lock (scripts/install-lock.sh; an inherited
lock is used as is), runs `make -s WERROR=1 install` (not with
--no-install) and holds the lock only while its tms cluster runs.

One throwaway world on 127.0.0.1 / Unix sockets: a PostgreSQL 15 cluster
with tms (pool of 4 workers), a second one for the test REST catalog's
pointers, the catalog, a file:// warehouse.  test/engines/smallfiles.py
writes a table of --files (default 10,000) small real Parquet files,
--rows-per-file rows each (default 20), in four identity partitions, once;
each contender compacts its first snapshot (main is set back to it before
each run; a compaction deletes no file):

  tms       tms.run_operation(..., 'compaction') on engine local, timed from
            the job's started_at to its finished_at (server clock): plan,
            the helper's downloads, DuckDB's rewrite, uploads, the manifests
            and four commits (one per partition);
  engine    test/engines/compact.py's compact() (bin-pack, the same plan),
            wall clock: the test world's engine, Python over DuckDB in Node;
  duckdb    DuckDB alone (the same libduckdb, through @duckdb/node-api), the
            same --threads: COPY (SELECT * FROM read_parquet([every data
            file])) TO one file, wall clock -- no plan, no deletes, no
            metrics, no commit: the limit.

Each --sort ORDER (the sort-order option: "id DESC", "zorder(score, id)")
adds two more contenders, run after the bin-pack ones on the same files,
in turn --repeat times as those (each tms-sort against the duckdb-sort of
the same order just before it; "median" holds their medians too):
  duckdb-sort  DuckDB alone, the same --threads, one COPY (SELECT * FROM
            read_parquet([a partition's files]) ORDER BY ...) TO one file
            per partition (the groups tms sorts), one after the other; for
            zorder the helper's z-value expressions (compactor_sort.c,
            rebuilt here), timed from the first COPY's start to the last's
            end;
  tms-sort  tms.run_operation(..., 'compaction', {"sort-order": ORDER})
            for each --memory-limit.
--no-engine leaves the test world's engine out (slow on large tables);
--no-binpack leaves out the bin-pack runs of DuckDB alone and tms (only the
sort-orders).

Throughput is the input data files' bytes over the time.  For each
--memory-limit (tms.compaction_memory_limit, default 1GB and 64MB) the tms
run is repeated on the same snapshot, and the helper's peak RSS (from its done
line, logged by the worker) is reported next to the limit.  Every loop is
bounded by --files and --deadline (SIGALRM); every server is stopped in
`finally`.
"""

import argparse
import fcntl
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
TEST = os.path.join(HERE, "..", "test")
sys.path.insert(0, TEST)
sys.path.insert(0, os.path.join(TEST, "engines"))

import compact as cp  # noqa: E402
import opsworld as ow  # noqa: E402
import smallfiles  # noqa: E402
import world  # noqa: E402
from pgcluster import FAST_WORKERS, Cluster, wait_for  # noqa: E402


def log(msg):
    sys.stderr.write("[compact_bench] %s\n" % msg)
    sys.stderr.flush()


def input_bytes(st, meta):
    return sum(f["size"] for f in ow.live_files(st, meta).values() if f["content"] == 0)


def install_lock():
    """Hold the machine's install lock (scripts/install-lock.sh) until the
    returned file is closed; None when an inherited descriptor holds it
    already (the bench run under `flock /tmp/tms-install.lock ...`)."""
    path = os.environ.get("TMS_INSTALL_LOCK", "/tmp/tms-install.lock")
    for fd in os.listdir("/proc/self/fd"):
        try:
            if os.readlink("/proc/self/fd/" + fd) == path:
                fcntl.flock(int(fd), fcntl.LOCK_EX | fcntl.LOCK_NB)
                return None
        except OSError:
            continue
    f = open(path, "a")
    log("waiting for %s" % path)
    fcntl.flock(f, fcntl.LOCK_EX)
    return f


def duckdb_copy(paths, out, threads):
    """DuckDB alone: every file into one, wall clock in seconds."""
    listing = os.path.join(os.path.dirname(out), "files.json")
    with open(listing, "w") as f:
        json.dump(paths, f)
    script = (
        "import { DuckDBInstance } from '@duckdb/node-api';"
        "import fs from 'fs';"
        "const files = JSON.parse(fs.readFileSync(%s));"
        "const c = await (await DuckDBInstance.create(':memory:', {threads: '%d'})).connect();"
        "const lit = files.map(p => \"'\" + p.replace(/'/g, \"''\") + \"'\").join(',');"
        "const t0 = performance.now();"
        "await c.run(`COPY (SELECT * FROM read_parquet([${lit}])) TO %s (FORMAT parquet, COMPRESSION zstd)`);"
        "console.log(JSON.stringify({ms: performance.now() - t0}));"
        % (json.dumps(listing), threads, json.dumps("'%s'" % out.replace("'", "''"))[1:-1]))
    r = subprocess.run(["node", "--input-type=module", "-e", script], cwd=ow.NODE_DIR,
                       capture_output=True, text=True, timeout=3600, check=True)
    return json.loads(r.stdout.strip().splitlines()[-1])["ms"] / 1000.0


def zorder_sql(cols):
    """The ORDER BY of zorder(cols) over the bench table's columns, as the
    helper builds it (src/compactor/compactor_sort.c)."""
    types = {"id": "long", "score": "double", "day": "date", "category": "string",
             "flag": "boolean"}
    keys = []
    for c in cols:
        t = types[c]
        if t == "long":
            keys.append("coalesce((%s::HUGEINT + 9223372036854775808)::UBIGINT, 0::UBIGINT)" % c)
        elif t == "date":
            keys.append("coalesce(((%s - DATE '1970-01-01')::HUGEINT + 9223372036854775808)"
                        "::UBIGINT, 0::UBIGINT)" % c)
        elif t == "double":
            keys.append("CASE WHEN {0} IS NULL THEN 0::UBIGINT WHEN {0}::DOUBLE::BIT::BIGINT < 0"
                        " THEN (-1 - {0}::DOUBLE::BIT::BIGINT)::UBIGINT ELSE"
                        " ({0}::DOUBLE::BIT::BIGINT::HUGEINT + 9223372036854775808)::UBIGINT END"
                        .format(c))
        elif t == "string":
            keys.append("coalesce(('0x' || rpad(left(hex(left(%s, 8)), 16), 16, '0'))::UBIGINT,"
                        " 0::UBIGINT)" % c)
        else:
            keys.append("CASE WHEN %s THEN 9295429630892703744::UBIGINT ELSE 0::UBIGINT END" % c)
    n = len(cols)
    words = []
    for w in range(n):
        words.append("(" + " | ".join(
            "(((z%d >> %d) & 1::UBIGINT) << %d)" % ((w * 64 + b) % n, 63 - (w * 64 + b) // n, 63 - b)
            for b in range(64)) + ")")
    return keys, words


def duckdb_sort(groups, outdir, threads, order):
    """DuckDB alone: each group's files (a list of lists) into one file
    ORDER BY order (a sort-order option), wall clock in seconds."""
    listing = os.path.join(outdir, "groups.json")
    with open(listing, "w") as f:
        json.dump(groups, f)
    m = re.match(r"^\s*zorder\((.*)\)\s*$", order, re.I)
    if m:
        keys, words = zorder_sql([c.strip() for c in m.group(1).split(",")])
        query = "SELECT * EXCLUDE (%s) FROM (SELECT *, %s FROM read_parquet([${lit}])) ORDER BY %s" % (
            ", ".join("z%d" % i for i in range(len(keys))),
            ", ".join("%s AS z%d" % (k, i) for i, k in enumerate(keys)), ", ".join(words))
    else:
        # ASC NULLS FIRST and DESC NULLS LAST by default, as the option
        terms = []
        for t in order.split(","):
            t = t.strip()
            if "NULLS" not in t.upper():
                t += " NULLS LAST" if t.upper().endswith(" DESC") else " NULLS FIRST"
            terms.append(t)
        query = "SELECT * FROM read_parquet([${lit}]) ORDER BY " + ", ".join(terms)
    script = (
        "import { DuckDBInstance } from '@duckdb/node-api';"
        "import fs from 'fs';"
        "const groups = JSON.parse(fs.readFileSync(%s));"
        "const c = await (await DuckDBInstance.create(':memory:', {threads: '%d'})).connect();"
        "const t0 = performance.now();"
        "for (const [i, files] of groups.entries()) {"
        " const lit = files.map(p => \"'\" + p.replace(/'/g, \"''\") + \"'\").join(',');"
        " await c.run(`COPY (%s) TO '%s/sorted-${i}.parquet' (FORMAT parquet, COMPRESSION zstd)`); }"
        "console.log(JSON.stringify({ms: performance.now() - t0}));"
        % (json.dumps(listing), threads, query.replace("`", "\\`"), outdir.replace("'", "''")))
    r = subprocess.run(["node", "--input-type=module", "-e", script], cwd=ow.NODE_DIR,
                       capture_output=True, text=True, timeout=3600)
    if r.returncode != 0:
        raise RuntimeError(r.stdout + r.stderr)
    for i in range(len(groups)):
        os.unlink(os.path.join(outdir, "sorted-%d.parquet" % i))
    return json.loads(r.stdout.strip().splitlines()[-1])["ms"] / 1000.0


NESTED_TYPES = [
    {"type": "struct", "fields": [
        {"id": 0, "name": "a", "required": False, "type": "long"},
        {"id": 0, "name": "b", "required": False, "type": "string"}]},
    {"type": "list", "element-id": 0, "element-required": False, "element": "int"},
    {"type": "map", "key-id": 0, "key": "string", "value-id": 0, "value-required": False,
     "value": "double"}]
NESTED_SQL = [
    "CASE WHEN x %% 13 = 0 THEN NULL ELSE {'a': (x * %d)::BIGINT, 'b': 'n' || (x %% 977)::VARCHAR} END",
    "[(x %% 1000)::INTEGER, ((x * %d) %% 1000)::INTEGER, NULL]::INTEGER[]",
    "map_from_entries([{'key': 'k' || (x %% 5)::VARCHAR, 'value': (x * 1.5 + %d)::DOUBLE}])"]


def wide_schema(extra_columns, nested):
    """smallfiles.schema_of(extra_columns) with `nested` more columns of
    the types of NESTED_TYPES in turn (struct, list, map), ids after."""
    schema = smallfiles.schema_of(extra_columns)
    fields = list(schema["fields"])
    nxt = 8 + extra_columns + nested
    for k in range(nested):
        t = json.loads(json.dumps(NESTED_TYPES[k % len(NESTED_TYPES)]))
        if t["type"] == "struct":
            for f in t["fields"]:
                f["id"] = nxt
                nxt += 1
        elif t["type"] == "list":
            t["element-id"] = nxt
            nxt += 1
        else:
            t["key-id"], t["value-id"] = nxt, nxt + 1
            nxt += 2
        fields.append({"id": 8 + extra_columns + k, "name": "n%d" % (8 + extra_columns + k),
                       "required": False, "type": t})
    return dict(schema, fields=fields), nxt - 1


def _ids(t, fid):
    if isinstance(t, str):
        return str(fid)
    if t["type"] == "struct":
        return "{__duckdb_field_id: %d%s}" % (fid, "".join(
            ", %s: %s" % (f["name"], _ids(f["type"], f["id"])) for f in t["fields"]))
    if t["type"] == "list":
        return "{__duckdb_field_id: %d, element: %s}" % (fid, _ids(t["element"], t["element-id"]))
    return "{__duckdb_field_id: %d, key: %s, value: %s}" % (
        fid, _ids(t["key"], t["key-id"]), _ids(t["value"], t["value-id"]))


def fast_table(cat, st, files, rows_per_file, extra_columns, nested, deadline):
    """The bench table written fast (1 GB and more): each data file one
    DuckDB COPY of rows derived from their ids (smallfiles' columns, file i
    in category c(i %% 4)), Iceberg field ids at every depth, no read-back
    check; manifest entries without column metrics (optional in the spec;
    the compaction computes its own); one append snapshot."""
    schema, last_id = wide_schema(extra_columns, nested)
    levels = smallfiles._create(cat, "b", "t", True, schema)
    _, meta = ow.load(cat, levels, "t")
    if last_id > meta.get("last-column-id", 0):
        raise RuntimeError("last-column-id %s below %d" % (meta.get("last-column-id"), last_id))
    data_dir = cp.data_location(meta)
    tmp = tempfile.mkdtemp(prefix="tms-bench-table-")
    try:
        ids = "{%s}" % ", ".join('"%s": %s' % (f["name"], _ids(f["type"], f["id"]))
                                 for f in schema["fields"])
        names = ", ".join('c_%d AS "%s"' % (f["id"], f["name"]) for f in schema["fields"])
        stmts, paths = [], []
        for i in range(files):
            local = os.path.join(tmp, "data-%05d.parquet" % i)
            ncols = smallfiles._columns("'c%d'" % (i % smallfiles.CATEGORIES), 1, extra_columns)
            nest = "".join(", %s AS c_%d" % (NESTED_SQL[k % 3] % ((8 + extra_columns + k) * 31),
                                              8 + extra_columns + k) for k in range(nested))
            stmts.append("COPY (SELECT %s FROM (SELECT %s%s FROM (SELECT i::BIGINT AS x FROM"
                         " range(%d, %d) t(i)))) TO '%s' (FORMAT parquet, COMPRESSION zstd,"
                         " FIELD_IDS %s)" % (names, ncols, nest, i * rows_per_file,
                                             (i + 1) * rows_per_file, local, ids))
            paths.append(local)
        r = subprocess.run(["node", os.path.join(ow.NODE_DIR, "duckdb_sql.mjs")],
                           input=json.dumps({"statements": stmts}), capture_output=True,
                           text=True, timeout=deadline, cwd=ow.NODE_DIR)
        if r.returncode != 0:
            raise RuntimeError(r.stderr[-3000:])
        snap = smallfiles._snapshot(meta, __import__("random").Random(1), "append")
        entries = []
        for i, local in enumerate(paths):
            c = "c%d" % (i % smallfiles.CATEGORIES)
            uri = "%s/category=%s/%05d-%s.parquet" % (data_dir, c, i, uuid.uuid4())
            size = os.path.getsize(local)
            smallfiles._put(st, uri, local)
            entries.append({"content": 0, "file_path": uri, "file_format": "PARQUET",
                            "partition": {"category": c}, "record_count": rows_per_file,
                            "file_size_in_bytes": size, "key_metadata": None,
                            "split_offsets": None, "equality_ids": None, "sort_order_id": 0,
                            "referenced_data_file": None})
        rec = smallfiles._manifest(st, meta, snap, True, entries, 0, schema)
        snap["summary"].update({
            "added-data-files": str(files), "added-records": str(files * rows_per_file),
            "added-files-size": str(sum(e["file_size_in_bytes"] for e in entries)),
            "total-data-files": str(files), "total-records": str(files * rows_per_file),
            "total-files-size": str(sum(e["file_size_in_bytes"] for e in entries)),
            "total-delete-files": "0", "total-position-deletes": "0",
            "total-equality-deletes": "0"})
        smallfiles._push(cat, levels, "t", st, meta, snap, [rec])
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def median(xs):
    xs = sorted(xs)
    n = len(xs)
    return xs[n // 2] if n % 2 else (xs[n // 2 - 1] + xs[n // 2]) / 2


def load():
    return round(os.getloadavg()[0], 1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--files", type=int, default=10000)
    ap.add_argument("--rows-per-file", type=int, default=20)
    ap.add_argument("--memory-limit", default="1GB,64MB")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--sort", action="append", default=[],
                    help="a sort-order to compact with too (repeatable)")
    ap.add_argument("--no-engine", action="store_true")
    ap.add_argument("--extra-columns", type=int, default=0,
                    help="wider rows: columns added to the table's 7 (smallfiles.schema_of)")
    ap.add_argument("--nested", type=int, default=0,
                    help="nested columns added after the extra ones (struct, list, map in turn)")
    ap.add_argument("--fast-table", action="store_true",
                    help="write the table by one DuckDB COPY a file, no read-back check, no"
                    " column metrics in the manifests (large tables, nested columns)")
    ap.add_argument("--repeat", type=int, default=3,
                    help="runs of DuckDB alone and tms, interleaved (median reported), for"
                    " bin-pack and each --sort")
    ap.add_argument("--no-binpack", action="store_true",
                    help="only the --sort contenders")
    ap.add_argument("--deadline", type=int, default=3600)
    ap.add_argument("--json")
    ap.add_argument("--no-install", action="store_true",
                    help="test the tms already installed (no make install)")
    a = ap.parse_args()

    def alarm(*_):
        raise TimeoutError("deadline of %d s reached" % a.deadline)
    signal.signal(signal.SIGALRM, alarm)
    signal.alarm(a.deadline)

    root = tempfile.mkdtemp(prefix="tms-compact-bench-", dir="/tmp")
    os.chmod(root, 0o755)
    pg = catpg = cat = lock = None
    limits = a.memory_limit.split(",")
    out = {"files": a.files, "rows_per_file": a.rows_per_file, "threads": a.threads,
           "columns": 7 + a.extra_columns + a.nested, "repeat": a.repeat, "runs": []}
    try:
        # the catalog's pointers live in a plain PostgreSQL (no tms)
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

        # one table; every contender compacts its first snapshot (main is
        # set back to it between runs: compaction deletes no file)
        t0 = time.monotonic()
        if a.fast_table or a.nested:
            fast_table(cat, st, a.files, a.rows_per_file, a.extra_columns, a.nested, a.deadline)
        else:
            smallfiles.make_table(cat, st, "b", "t", files=a.files,
                                  rows_per_file=a.rows_per_file, seed=1, timeout=a.deadline,
                                  extra_columns=a.extra_columns)
        ow.give_to_server(files)
        _, meta0 = ow.load(cat, "b", "t")
        log("table: %d files written in %.1f s" % (a.files, time.monotonic() - t0))

        def rollback():
            _, meta = ow.load(cat, "b", "t")
            ow.commit(cat, "b", "t", {
                "requirements": [{"type": "assert-table-uuid", "uuid": meta["table-uuid"]}],
                "updates": [{"action": "set-snapshot-ref", "ref-name": "main", "type": "branch",
                             "snapshot-id": meta0["current-snapshot-id"]}]})
            assert ow.load(cat, "b", "t")[1]["current-snapshot-id"] == meta0["current-snapshot-id"]

        # DuckDB alone, then the test world's engine
        paths = [st.local_path(p) for p, f in ow.live_files(st, meta0).items() if f["content"] == 0]
        nbytes = input_bytes(st, meta0)
        target = os.path.join(root, "duck-out.parquet")
        out["input_bytes"] = nbytes
        log("table: %.1f MB of input" % (nbytes / 1e6))

        def duck_run(rep):
            l0 = load()
            secs = duckdb_copy(paths, target, a.threads)
            os.unlink(target)
            out["runs"].append({"who": "duckdb", "seconds": secs, "input_bytes": nbytes,
                                "mb_per_s": nbytes / secs / 1e6, "repeat": rep,
                                "load": [l0, load()]})
            log("duckdb alone: %.2f s, %.1f MB/s (load %s)" % (secs, nbytes / secs / 1e6,
                                                                out["runs"][-1]["load"]))

        if not a.no_engine:
            t0 = time.monotonic()
            res = cp.compact(cat.uri, None, st, ["b"], "t")
            secs = time.monotonic() - t0
            assert res["rewritten_data_files_count"] == a.files, res
            out["runs"].append({"who": "engine", "seconds": secs, "input_bytes": nbytes,
                                "mb_per_s": nbytes / secs / 1e6})
            log("test world engine: %.2f s, %.1f MB/s" % (secs, nbytes / secs / 1e6))
            ow.give_to_server(files)

        # DuckDB alone sorting each partition's files (the groups tms sorts)
        by_part = {}
        for p, f in ow.live_files(st, meta0).items():
            if f["content"] == 0:
                by_part.setdefault(str(f["partition"]), []).append(st.local_path(p))
        duck_sort = {}

        def duck_sort_run(order, rep):
            l0 = load()
            secs = duckdb_sort(list(by_part.values()), root, a.threads, order)
            duck_sort[order] = secs
            out["runs"].append({"who": "duckdb-sort", "sort_order": order, "seconds": secs,
                                "input_bytes": nbytes, "mb_per_s": nbytes / secs / 1e6,
                                "repeat": rep, "load": [l0, load()]})
            log("duckdb alone, ORDER BY %s: %.2f s, %.1f MB/s (load %s)"
                % (order, secs, nbytes / secs / 1e6, out["runs"][-1]["load"]))

        # tms: this tree installed, under the machine's install lock
        lock = install_lock()
        if not a.no_install:
            subprocess.run(["make", "-s", "WERROR=1", "install"], cwd=os.path.join(HERE, ".."),
                           check=True, stdout=subprocess.DEVNULL)
        pg = Cluster(os.path.join(root, "pg", "data"),
                     settings=dict(FAST_WORKERS, **{"tms.compaction_threads": str(a.threads)}))
        pg.init()
        pg.start()
        pg.create_database()
        pg.psql("CREATE EXTENSION tms")
        pg.psql("CREATE SERVER cat FOREIGN DATA WRAPPER tms_iceberg OPTIONS (uri '%s',"
                " relative_path_root '%s', allowed_locations 'file://%s/');"
                " CREATE USER MAPPING FOR PUBLIC SERVER cat;" % (cat.uri, files, files))
        wait_for(lambda: pg.psql("SELECT count(*) FROM tms.workers WHERE role = 'worker'"
                                 " AND state = 'idle'") == "4", what="the pool")
        # bin-pack: DuckDB alone and tms under each limit, interleaved, a.repeat
        # times; then each sort-order the same way
        plan_ = []
        for r in range(0 if a.no_binpack else a.repeat):
            plan_ += [("duck", None, None, r)] + [("tms", None, lim, r) for lim in limits]
        for o in a.sort:
            for r in range(a.repeat):
                plan_ += [("duck", o, None, r)] + [("tms", o, lim, r) for lim in limits]
        for who, order, limit, rep in plan_:
            if who == "duck":
                if order:
                    duck_sort_run(order, rep)
                else:
                    duck_run(rep)
                continue
            rollback()
            l0 = load()
            name = "t"
            pg.psql("ALTER SYSTEM SET tms.compaction_memory_limit = '%s'" % limit)
            pg.psql("SELECT pg_reload_conf()")
            opts = json.dumps({"sort-order": order} if order else {}).replace("'", "''")
            jid = int(pg.psql("SELECT tms.run_operation('cat', 'b', '%s', 'compaction', '%s')"
                              % (name, opts)))
            wait_for(lambda: pg.psql("SELECT finished_at IS NOT NULL FROM"
                                     " tms.maintenance_jobs WHERE id = %d" % jid) == "t",
                     timeout=a.deadline, interval=0.5, what="job %d" % jid)
            state, secs, rewritten = pg.psql(
                "SELECT state, extract(epoch FROM finished_at - started_at),"
                " data_files_rewritten FROM tms.maintenance_jobs WHERE id = %d" % jid).split("|")
            assert state == "succeeded" and int(rewritten) == a.files, (state, rewritten)
            secs = float(secs)
            m = re.findall(r"maintenance job %d: compaction of \d+ groups.*peak RSS was (\d+) MB,"
                           r" its memory limit (\d+) MB" % jid, pg.log_tail(400))
            peak, lim = (int(m[-1][0]), int(m[-1][1])) if m else (None, None)
            run_ = {"who": "tms-sort" if order else "tms", "memory_limit_mb": lim,
                    "peak_rss_mb": peak, "seconds": secs, "input_bytes": nbytes,
                    "mb_per_s": nbytes / secs / 1e6, "repeat": rep, "load": [l0, load()],
                    "limit": limit}
            if order:
                run_["sort_order"] = order
                run_["vs_duckdb"] = duck_sort[order] / secs
            else:
                # against DuckDB alone's run just before it
                run_["vs_duckdb"] = [x for x in out["runs"] if x["who"] == "duckdb"][-1]["seconds"] / secs
            out["runs"].append(run_)
            log("tms (limit %s%s): %.2f s, %.1f MB/s, %.2fx DuckDB alone, helper peak RSS %s MB"
                " (load %s)" % (limit, ", sort-order %s" % order if order else "", secs,
                                nbytes / secs / 1e6, run_["vs_duckdb"], peak, run_["load"]))
        # the medians of the interleaved runs: bin-pack, then each sort-order
        out["median"] = {}
        for order in [None] + a.sort:
            duck_who, tms_who = ("duckdb-sort", "tms-sort") if order else ("duckdb", "tms")
            ds = [x["seconds"] for x in out["runs"]
                  if x["who"] == duck_who and x.get("sort_order") == order]
            if not ds:
                continue
            duck_med = median(ds)
            suffix = ", sort-order " + order if order else ""
            out["median"][duck_who + suffix] = duck_med
            for lim in limits:
                xs = [x for x in out["runs"]
                      if x["who"] == tms_who and x["limit"] == lim and x.get("sort_order") == order]
                if xs:
                    med = median([x["seconds"] for x in xs])
                    out["median"]["tms " + lim + suffix] = {
                        "seconds": med, "vs_duckdb": duck_med / med,
                        "peak_rss_mb": max(x["peak_rss_mb"] or 0 for x in xs),
                        "load": [min(min(x["load"]) for x in xs),
                                 max(max(x["load"]) for x in xs)]}
        log("medians: %s" % json.dumps(out["median"]))
        pg.destroy()
        pg = None
        if lock is not None:
            lock.close()
            lock = None
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
