#!/usr/bin/python3
"""Metadata-only retention at scale: wall time, catalog requests and the
worker's storage I/O of the retention operation on a table of many data
files, half of them wholly older than the cutoff.

Usage: bench/retention_bench.py [--data-files N] [--per-manifest N]
                                [--snapshots N] [--plan] [--json PATH]

One throwaway world (bench/ops_bench.py's: a PostgreSQL 15 cluster with
tms, the test REST catalog, file:// storage).  The table is
test/fixtures/synth.py's (through bench/purge_bench.py's fast writer,
metadata only: no data bytes): --data-files files in --snapshots append
snapshots, --per-manifest entries a manifest, identity-partitioned by
category; file k holds ids k*100 .. k*100+99 with exact bounds on id (a
required long).  Retention runs with {"column": "id", "unit": "s",
"older-than": <1970-01-01 plus half the ids in seconds>}: the first half of
the files are wholly older (dropped by their bounds), none straddles.

Measured (bench/ops_bench.py's run_op): the job's wall time (server and
client), the catalog's requests while it ran, the worker's read/write
syscalls and bytes (/proc/<pid>/io: local storage has no requests to
count; every manifest is read once to plan, the manifests holding dropped
files are read again and rewritten by the commit), its peak RSS.  With
--plan, tms.plan_operation is timed first (one row per file dropped).
The check reads the table back with test/opsworld.py: the live data files
are exactly the newer half, the snapshot a "delete".
"""

import argparse
import datetime
import json
import os
import shutil
import signal
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import ops_bench as ob  # noqa: E402
from ops_bench import NS, World, log  # noqa: E402
import opsworld as ow  # noqa: E402
import purge_bench  # noqa: E402

RECORDS_PER_FILE = 100


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--data-files", type=int, default=100000)
    p.add_argument("--per-manifest", type=int, default=1000)
    p.add_argument("--snapshots", type=int, default=10)
    p.add_argument("--plan", action="store_true")
    p.add_argument("--job-timeout", type=int, default=1800)
    p.add_argument("--deadline", type=int, default=3600)
    p.add_argument("--json")
    opts = p.parse_args()
    if not 2 <= opts.data_files <= 10000000 or not 1 <= opts.per_manifest <= 1000000 or \
            not 1 <= opts.snapshots <= 10000:
        p.error("sizes out of range")

    def on_alarm(signum, frame):
        raise TimeoutError("bench deadline of %d s reached" % opts.deadline)

    signal.signal(signal.SIGALRM, on_alarm)
    signal.alarm(opts.deadline)
    root = tempfile.mkdtemp(prefix="tms-retention-bench-", dir="/tmp")
    w = World(root)
    results = {"opts": vars(opts)}
    try:
        w.start()
        st = ow.storage(file_root=w.file_root)
        loc = os.path.join(w.file_root, "ret")
        t = datetime.datetime.now()
        out = purge_bench.make_table(loc, opts.data_files, 0, snapshots=opts.snapshots,
                                     no_data=True, per_manifest=opts.per_manifest)
        w.register("ret", out["metadata_location"])
        results["generate_s"] = (datetime.datetime.now() - t).total_seconds()
        _, meta0 = ow.load(w.catalog, NS, "ret")
        before = ow.live_files(st, meta0)
        half = opts.data_files // 2
        cutoff = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc) + \
            datetime.timedelta(seconds=half * RECORDS_PER_FILE)
        options = {"column": "id", "unit": "s",
                   "older-than": cutoff.strftime("%Y-%m-%d %H:%M:%S+00")}
        r = ob.run_op(w, "retention", "ret", "retention", options, opts.job_timeout, opts.plan)
        _, meta = ow.load(w.catalog, NS, "ret")
        after = ow.live_files(st, meta)
        snap = ow.snapshot(meta, meta["current-snapshot-id"])
        r["table"] = {"data_files": len(before), "manifests": len(ow.manifest_records(
            st, ow.snapshot(meta0, meta0["current-snapshot-id"])))}
        r["check"] = {"operation": snap["summary"]["operation"],
                      "deleted_data_files": snap["summary"].get("deleted-data-files"),
                      "live_after": len(after), "expected_live": opts.data_files - half,
                      "message": w.q("SELECT message FROM tms.maintenance_jobs"
                                     " WHERE operation = 'retention'")[0][0]}
        log("check: %s" % r["check"])
        results["run"] = r
    finally:
        signal.alarm(0)
        try:
            w.stop()
        except Exception as e:               # noqa: BLE001 -- still remove the files
            log("stopping the world: %s" % e)
        shutil.rmtree(root, ignore_errors=True)
    print(json.dumps(results, indent=1, default=str))
    if opts.json:
        with open(opts.json, "w") as f:
            json.dump(results, f, indent=1, default=str)


if __name__ == "__main__":
    main()
