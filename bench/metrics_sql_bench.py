#!/usr/bin/python3
"""tms.table_metrics() through SQL against the decoder alone, on one table.

Usage: bench/metrics_sql_bench.py [--files N] [--per-manifest N] [--rounds N]
                                  [--table-dir DIR]

The table is bench/iceberg_manifest_bench.c's synthetic Iceberg v2 table
(the shape of bench/iceberg_manifest_bench.sh: --files data-file entries,
--per-manifest per deflate manifest, 529 bytes an entry inflated), written
once under --table-dir with file:// paths so that a catalog can serve it
(kept for the next run: delete the directory to write it again).

One throwaway world on 127.0.0.1 / a Unix socket: a PostgreSQL 15 cluster
with tms and the test REST catalog (test/catalog/server.py) that has the
table registered.  Each round runs, in alternating order:

  sql      SELECT tms.table_metrics(server, 'bench', 't') on one connection
           kept for the run, timed on the client (the catalog's load of a
           2 KB metadata file, the manifest list, every manifest read from
           the local file system and decoded, the JSON answer);
  decoder  bench/build/iceberg_manifest_bench walk: the same walk
           (iceberg_table_metrics() at level deletes through the local
           FileIO: the metadata file, the manifest list, every manifest read
           and decoded) in a process of its own, with no PostgreSQL, no
           catalog; its own timing (process start excluded).

Printed: each round's times and ratio sql / decoder, then the medians and
the ratios' min-max.  Both answers' data-file counts must agree.
"""

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..")
sys.path.insert(0, os.path.join(ROOT, "test"))

import world  # noqa: E402
from pgcluster import Cluster  # noqa: E402

BIN = os.path.join(ROOT, "bench", "build", "iceberg_manifest_bench")
SERVER = "benchcat"


def log(msg):
    print(msg)
    sys.stdout.flush()


def build_and_gen(table_dir, files, per):
    subprocess.run(["sh", os.path.join(ROOT, "bench", "iceberg_manifest_bench.sh")],
                   env=dict(os.environ, BUILD_ONLY="1"), check=True, cwd=ROOT)
    if not os.path.exists(os.path.join(table_dir, "metadata", "v1.metadata.json")):
        os.makedirs(table_dir, exist_ok=True)
        subprocess.run([BIN, "gen", table_dir, str(files), str(per), "file://"], check=True)
    # the server reads it
    d = table_dir
    while d != "/":
        os.chmod(d, os.stat(d).st_mode | 0o005)
        d = os.path.dirname(d)


def run_decoder(table_dir):
    out = subprocess.run([BIN, "walk", table_dir], check=True, capture_output=True,
                         text=True).stdout
    m = re.search(r"data files (\d+) .* in ([0-9.]+) s", out)
    if m is None:
        raise SystemExit("bench: unexpected walk output: %r" % out)
    return float(m.group(2)), int(m.group(1))


def run_sql(conn):
    with conn.cursor() as cur:
        t0 = time.monotonic()
        cur.execute("SELECT tms.table_metrics(%s, 'bench', 't')", (SERVER,))
        m = cur.fetchone()[0]
        t1 = time.monotonic()
    if isinstance(m, str):
        m = json.loads(m)
    return t1 - t0, m


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--files", type=int, default=1000000)
    ap.add_argument("--per-manifest", type=int, default=10000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--table-dir", default="/tmp/tms-bench-metrics-table")
    a = ap.parse_args()
    table_dir = os.path.abspath(a.table_dir)
    build_and_gen(table_dir, a.files, a.per_manifest)

    root = tempfile.mkdtemp(prefix="tms-metrics-bench.")
    os.chmod(root, 0o755)
    pg = catalog = None
    try:
        pg = Cluster(os.path.join(root, "pg", "data"),
                     settings={"tms.enabled": "off", "log_min_messages": "warning"})
        pg.init()
        pg.start()
        pg.create_database()
        pg.psql("CREATE EXTENSION tms")
        catalog = world.CatalogServer(pg.dsn(), "file://%s/wh" % root,
                                      catalog_name="bench_%s" % uuid.uuid4().hex[:6],
                                      file_root=root, timeout=300)
        pg.psql("""CREATE SERVER %s FOREIGN DATA WRAPPER tms_iceberg OPTIONS (
                     uri '%s', request_timeout '300s', allowed_locations 'file://%s/');
                   CREATE USER MAPPING FOR PUBLIC SERVER %s;"""
                % (SERVER, catalog.uri, table_dir, SERVER))
        catalog.register("bench", "t", "file://%s/metadata/v1.metadata.json" % table_dir)
        conn = pg.connect()
        rows = []
        for r in range(a.rounds):
            if r % 2 == 0:
                dec, dec_files = run_decoder(table_dir)
                sql, m = run_sql(conn)
            else:
                sql, m = run_sql(conn)
                dec, dec_files = run_decoder(table_dir)
            if m.get("level") != "deletes":
                raise SystemExit("bench: table_metrics stopped at level %r" % m.get("level"))
            sql_files = m.get("dataFiles")
            if sql_files is not None and int(sql_files) != dec_files:
                raise SystemExit("bench: data files differ: sql %s, decoder %d"
                                 % (sql_files, dec_files))
            rows.append((sql, dec))
            log("round %d: sql %.3f s, decoder alone %.3f s, ratio %.2f, load %.1f"
                % (r + 1, sql, dec, sql / dec, os.getloadavg()[0]))
        conn.close()
        ratios = [s / d for s, d in rows]
        log("entries %d: sql median %.3f s, decoder alone median %.3f s; sql / decoder "
            "median %.2f (min-max %.2f-%.2f)"
            % (dec_files, statistics.median(s for s, _ in rows),
               statistics.median(d for _, d in rows), statistics.median(ratios),
               min(ratios), max(ratios)))
    finally:
        if catalog is not None:
            catalog.stop()
        if pg is not None:
            pg.destroy()
        subprocess.run(["rm", "-rf", root], check=False)


if __name__ == "__main__":
    main()
