#!/usr/bin/python3
"""Retry-After honoured: how long tms waits before it sends again a request
that a catalog or the storage refused with 429 or 503, with and without a
Retry-After, against the backoff it would use alone.

Usage: bench/retry_after_bench.py [--repeat N] [--files N] [--deadline SECONDS]
                                  [--json FILE]

The world of bench/delete_bench.py (PostgreSQL 15 with tms, s3rver, the S3
gate in front of it, the test REST catalog vending the gate), in one run:
  catalog   tms.list_namespaces() while the catalog answers the next GET
            /namespaces 503 without Retry-After (the backoff alone: 200 ms
            plus up to 50 % jitter), 503 or 429 with Retry-After: 1, and
            503 with an HTTP date 2 s ahead (whole seconds: 1 to 2 s);
            --repeat times each.  The wait is the time between the two
            requests in the catalog's log.
  storage   a purge of a synthetic table of --files files (batches of 50,
            tms.delete_concurrency 1) while the gate takes 4 requests a
            second (burst 2) of every kind and answers 503 SlowDown beyond,
            without and with Retry-After: 1.  The wait is, for each refused
            request, the time from its refusal to the arrival of the same
            request sent again (same method, path and first key) in the
            gate's log, for the reads (GET of metadata and manifests,
            retried by the request) and the DeleteObjects (held by the
            storage target's window) apart.

Everything is bounded by --deadline (SIGALRM) and stopped in `finally`.
"""

import argparse
import email.utils
import json
import os
import shutil
import signal
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from delete_bench import BUCKET, SERVER, World, log  # noqa: E402


def summary(waits):
    if not waits:
        return {"n": 0}
    return {"n": len(waits), "min_s": round(min(waits), 3),
            "median_s": round(statistics.median(waits), 3), "max_s": round(max(waits), 3)}


def catalog_wait(w, status, retry_after):
    w.q("SELECT * FROM tms.list_namespaces(%s)", (SERVER,))     # connected
    w.catalog.reset_requests()
    value = retry_after() if callable(retry_after) else retry_after
    w.catalog.fault(r"/namespaces$", status=status, count=1, method="GET",
                    headers={"Retry-After": value} if value else None)
    w.q("SELECT * FROM tms.list_namespaces(%s)", (SERVER,))
    reqs = w.catalog.requests(r"/namespaces$")["requests"]
    if [r["status"] for r in reqs] != [status, 200]:
        raise RuntimeError("unexpected requests: %r" % reqs)
    return reqs[1]["time"] - reqs[0]["time"]


def catalog_runs(w, repeat):
    cases = [("503, no Retry-After", 503, None),
             ("503, Retry-After: 1", 503, "1"),
             ("429, Retry-After: 1", 429, "1"),
             ("503, Retry-After: HTTP date 2 s ahead", 503,
              lambda: email.utils.formatdate(time.time() + 2, usegmt=True))]
    out = []
    for label, status, ra in cases:
        s = summary([catalog_wait(w, status, ra) for _ in range(repeat)])
        s["label"] = label
        log("catalog %s: retried after %s s (median %s, n %d)"
            % (label, "%.3f-%.3f" % (s["min_s"], s["max_s"]), s["median_s"], s["n"]))
        out.append(s)
    return out


def retry_waits(entries, kind):
    """Refusal of a request to the arrival of the same request again."""
    waits = []
    for i, e in enumerate(entries):
        if e["kind"] != kind or e["outcome"] != "throttled":
            continue
        same = (e["method"], e["path"], e["first_key"])
        for f in entries[i + 1:]:
            if (f["method"], f["path"], f["first_key"]) == same:
                waits.append(f["received"] - e["t"])
                break
    return waits


def storage_run(w, files, retry_after, timeout):
    name, prefix, _ = w.table(files)
    w.gate.reset_log()
    w.gate.throttle(rate=4, burst=2, mode="request", scope="all", retry_after=retry_after)
    t0 = time.monotonic()
    try:
        r = w.wait(w.purge(name), timeout)
    finally:
        w.gate.unthrottle()
    wall = time.monotonic() - t0
    entries = [e for e in w.gate.log()
               if e["path"].startswith("/%s/%s/" % (BUCKET, prefix)) or
               (e["kind"] == "delete" and (e["first_key"] or "").startswith(prefix + "/"))]
    if w.left(prefix):
        raise RuntimeError("objects left under %s" % prefix)
    res = {"label": "Retry-After: %s" % retry_after if retry_after else "no Retry-After",
           "files": r["files"], "wall_s": round(wall, 1),
           "requests": len(entries),
           "refused": sum(e["outcome"] == "throttled" for e in entries),
           "reads": summary(retry_waits(entries, "get")),
           "deletes": summary(retry_waits(entries, "delete"))}
    log("storage %s: %d files in %.1f s, %d requests, %d refused; reads sent again after %s, "
        "deletes after %s" % (res["label"], res["files"], wall, res["requests"],
                              res["refused"], res["reads"], res["deletes"]))
    return res


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--repeat", type=int, default=5, help="catalog refusals per case")
    p.add_argument("--files", type=int, default=2000, help="data files of each purged table")
    p.add_argument("--deadline", type=int, default=600)
    p.add_argument("--json", help="also write the results here")
    opts = p.parse_args()

    def on_alarm(signum, frame):
        raise TimeoutError("bench deadline of %d s reached" % opts.deadline)

    signal.signal(signal.SIGALRM, on_alarm)
    signal.signal(signal.SIGTERM, lambda s, f: sys.exit("terminated"))
    signal.alarm(opts.deadline)
    root = tempfile.mkdtemp(prefix="tms-retry-after-bench-", dir="/tmp")
    os.chmod(root, 0o755)
    w = World(root, 50)
    res = {"opts": vars(opts)}
    try:
        w.start()
        w.set_conf(delete_concurrency=1)
        log("world up")
        res["catalog"] = catalog_runs(w, opts.repeat)
        res["storage"] = [storage_run(w, opts.files, ra, 300) for ra in (None, 1)]
    finally:
        signal.alarm(0)
        try:
            w.stop()
        finally:
            shutil.rmtree(root, ignore_errors=True)
    log("done, world stopped")
    print(json.dumps(res, indent=1))
    if opts.json:
        with open(opts.json, "w") as f:
            json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
