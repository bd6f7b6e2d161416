"""
test_catalog_commit.py -- the io layer's commit and drop against the test
catalog (through the command-line driver io_driver.c): success, a failed
requirement (409 -> conflict), injected 500/503 and a hang inside the
commit (-> commit state unknown, and the commit did apply), ETag reuse,
drop with and without purge.

Run: /usr/bin/python3 -m pytest test/integration/test_catalog_commit.py
"""

import json
import os
import sys
import tempfile
import time
import uuid

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from test_storage_s3 import driver  # noqa: E402,F401  (the compiled io driver)

SCHEMA = {"type": "struct", "schema-id": 0,
          "fields": [{"id": 1, "name": "id", "required": False, "type": "long"}]}


@pytest.fixture
def table(make_catalog):
    cat = make_catalog()
    ns = "c_%s" % uuid.uuid4().hex[:6]
    cat.create_namespace(ns)
    res = cat.request("POST", "namespaces/%s/tables" % ns, {"name": "t", "schema": SCHEMA})
    return cat, ns, res["metadata"]["table-uuid"]


def run(driver, *args, timeout_ms=None):
    import subprocess
    argv = [driver] + (["-T", str(timeout_ms)] if timeout_ms else []) + list(args)
    r = subprocess.run(argv, capture_output=True, timeout=60)
    return r.returncode, r.stdout.decode(), r.stderr.decode().rstrip("\n").split("\t")


def commit(driver, cat, ns, body, **kw):
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(body, f)
    try:
        return run(driver, "catalog-commit", cat.uri, ns, "t", f.name, **kw)
    finally:
        os.unlink(f.name)


def set_props(table_uuid, **props):
    return {"requirements": [{"type": "assert-table-uuid", "uuid": table_uuid}],
            "updates": [{"action": "set-properties", "updates": props}]}


def test_commit_success_and_conflict(driver, table):
    cat, ns, tu = table
    before = cat.load_table(ns, "t")["metadata-location"]
    rc, out, _ = commit(driver, cat, ns, set_props(tu, owner="tms"))
    assert rc == 0 and out.strip() and out.strip() != before
    assert cat.load_table(ns, "t")["metadata"]["properties"]["owner"] == "tms"
    rc, _, err = commit(driver, cat, ns, set_props(str(uuid.uuid4()), owner="x"))
    assert rc == 2 and err[1] == "conflict" and err[2] == "409", err
    assert "CommitFailedException" in err[4]


@pytest.mark.parametrize("status", [500, 502, 503, 504])
def test_commit_5xx_is_state_unknown(driver, table, status):
    cat, ns, tu = table
    cat.fault(r"/tables/t$", status=status, method="POST")
    rc, _, err = commit(driver, cat, ns, set_props(tu, a="b"))
    assert rc == 2 and err[1] == "commit state unknown" and err[2] == str(status), err
    # never retried by the client
    posts = [r for r in cat.requests(r"/tables/t$")["requests"] if r["method"] == "POST"]
    assert len(posts) == 1


def test_commit_timeout_is_state_unknown_and_it_applied(driver, table):
    cat, ns, tu = table
    cat.fault(r"/tables/t$", action="hang", seconds=2, method="POST", at="pointer-swap")
    rc, _, err = commit(driver, cat, ns, set_props(tu, late="yes"), timeout_ms=700)
    # the client gave up at its timeout, before the catalog's swap (2 s)
    assert rc == 2 and err[1] == "commit state unknown", err
    # the catalog finishes the swap after the client gave up
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        props = cat.load_table(ns, "t")["metadata"].get("properties", {})
        if props.get("late") == "yes":
            break
        time.sleep(0.2)
    assert props.get("late") == "yes"


def test_load_and_drop(driver, table):
    cat, ns, _ = table
    rc, out, _ = run(driver, "catalog-load", cat.uri, ns, "t")
    loc, etag = out.rstrip("\n").split("\t")
    assert rc == 0 and loc.startswith("file://") and etag
    rc, _, _ = run(driver, "catalog-drop", cat.uri, ns, "t", "0")
    assert rc == 0
    assert os.path.exists(loc[len("file://"):])          # not purged
    rc, _, err = run(driver, "catalog-load", cat.uri, ns, "t")
    assert rc == 2 and err[1] == "no such table" and err[2] == "404"
    rc, _, err = run(driver, "catalog-drop", cat.uri, ns, "t", "1")
    assert rc == 2 and err[1] == "no such table"
    rc, _, err = run(driver, "catalog-load", cat.uri, "no_such_ns", "t")
    assert rc == 2 and err[1] in ("no such namespace", "no such table")


def test_drop_with_purge_deletes_files(driver, table):
    cat, ns, _ = table
    loc = cat.load_table(ns, "t")["metadata-location"]
    rc, _, _ = run(driver, "catalog-drop", cat.uri, ns, "t", "1")
    assert rc == 0
    assert not os.path.exists(loc[len("file://"):])
