#!/usr/bin/python3
"""The demo's test world: s3rver, Azurite and the Iceberg REST catalog test server,
with every real fixture table registered, a synthetic table for the
maintenance operations to work on (ops.events: 30 snapshots, many small
manifests, statistics files, and orphan files planted under it, three of
them backdated ten days), a synthetic table stored on Azure (azure.events,
in Azurite's development account), a table of many small real Parquet files
(ops.clicks: 120 files of 50 rows) and the test world's Trino-protocol
engine (test/engines/server.py --type trino), which compacts it, kept
running until SIGTERM.

    scripts/demo_world.py --dir DIR --dsn DSN

Writes DIR/world.json ({"catalog_uri", "s3_endpoint", "azure_endpoint", "engine_uri",
"tables"}) once
everything is up, then waits; SIGTERM stops the servers it started.  Both
listen on 127.0.0.1 only.  Started in the background by scripts/demo.sh.
"""

import argparse
import json
import os
import signal
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "test"))
sys.path.insert(0, os.path.join(HERE, "..", "test", "engines"))

import opsworld  # noqa: E402
import smallfiles  # noqa: E402
import world  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", required=True)
    ap.add_argument("--dsn", required=True, help="database for the catalog's pointers")
    a = ap.parse_args()

    files = os.path.join(a.dir, "files")
    os.makedirs(files, exist_ok=True)
    os.chmod(files, 0o755)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())

    s3 = world.S3Server(directory=os.path.join(a.dir, "s3"))
    azure = world.AzuriteServer(containers=["warehouse"])
    engine = None
    catalog = world.CatalogServer(a.dsn, "file://" + os.path.join(files, "warehouse"),
                                  s3=s3, file_root=files, catalog_name="demo", azure=azure)
    try:
        catalog.create_namespace(world.REAL_NAMESPACE)
        tables = world.load_real_fixtures(catalog, s3=s3, file_root=files)
        events = "file://" + os.path.join(files, "warehouse", "ops", "events")
        res = opsworld.synth_table(events, "--snapshots", "30", "--data-files", "300",
                                   "--files-per-manifest", "10", "--partitioned",
                                   "--stats-files", "2", "--version-hint",
                                   "--file-size", "4096")
        catalog.create_namespace("ops")
        catalog.register("ops", "events", res["metadata_location"])
        st = opsworld.storage(s3, file_root=files, azure=azure)
        azure_events = "abfss://warehouse@%s.dfs.core.windows.net/azure/events" % azure.account
        res = opsworld.synth_table(azure_events, "--snapshots", "12", "--data-files", "60",
                                   "--files-per-manifest", "5", "--stats-files", "1",
                                   "--azure-endpoint", azure.endpoint)
        catalog.create_namespace("azure")
        catalog.register("azure", "events", res["metadata_location"])
        ten_days_ago = time.time() - 10 * 86400
        for i in range(3):
            opsworld.plant(st, "%s/data/orphan-%d.parquet" % (events, i), mtime=ten_days_ago)
        opsworld.plant(st, events + "/data/young-orphan.parquet")
        smallfiles.make_table(catalog, st, "ops", "clicks", files=120, rows_per_file=50,
                              partitioned=True, seed=1)
        engine = world.EngineServer("trino", catalog, catalog_name="lake", file_root=files,
                                    user="demo")
        tables = sorted(tables) + ["azure.events", "ops.clicks", "ops.events"]
        # the server process (postgres) reads the file tables, and deletes
        # what maintenance unreferences
        opsworld.give_to_server(files)
        for root, dirs, names in os.walk(files):
            for d in dirs:
                os.chmod(os.path.join(root, d), 0o755)
            for n in names:
                os.chmod(os.path.join(root, n), 0o644)
        with open(os.path.join(a.dir, "world.json.tmp"), "w") as f:
            json.dump({"catalog_uri": catalog.uri, "s3_endpoint": s3.endpoint,
                       "azure_endpoint": azure.endpoint,
                       "engine_uri": engine.uri,
                       "file_root": files, "tables": tables}, f)
        os.rename(os.path.join(a.dir, "world.json.tmp"), os.path.join(a.dir, "world.json"))
        stop.wait()
    finally:
        if engine is not None:
            engine.stop()
        catalog.stop()
        azure.stop()
        s3.stop()


if __name__ == "__main__":
    main()
