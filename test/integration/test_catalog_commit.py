"""
test_catalog_commit.py -- the io layer's commit and drop against the test
catalog (through the command-line driver io_driver.c): success, a failed
requirement (409 -> conflict), injected 500/503 and a hang inside the
commit (-> commit state unknown, and the commit did apply), ETag reuse,
drop with and without purge; Idempotency-Key: sent only when the catalog
advertises idempotency-key-lifetime, and then a commit whose answer was
lost after the catalog applied it is retried with the same key and lands
exactly once.

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


def run(driver, *args, timeout_ms=None, retries=None):
    import subprocess
    argv = ([driver] + (["-T", str(timeout_ms)] if timeout_ms else []) +
            (["-N", str(retries)] if retries is not None else []) + list(args))
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


def posts_to_t(cat):
    return [r for r in cat.requests(r"/tables/t$")["requests"] if r["method"] == "POST"]


def metadata_log_len(cat, ns):
    return len(cat.load_table(ns, "t")["metadata"].get("metadata-log", []))


def test_lost_commit_answer_retried_with_same_idempotency_key(driver, table):
    """The catalog advertises idempotency-key-lifetime; it applies the
    commit, then its answer is lost (503 instead).  The client retries with
    the same key, the catalog answers with the first outcome, and the
    commit landed exactly once."""
    cat, ns, tu = table
    cat.set_idempotency("PT30M")
    log_before = metadata_log_len(cat, ns)
    cat.reset_requests()
    cat.fault(r"/tables/t$", action="lost", status=503, method="POST")
    rc, out, err = commit(driver, cat, ns, set_props(tu, owner="tms"), retries=2)
    assert rc == 0, err
    loaded = cat.load_table(ns, "t")
    assert out.strip() == loaded["metadata-location"]
    assert loaded["metadata"]["properties"]["owner"] == "tms"
    # exactly one new metadata version: applied once, not twice
    assert metadata_log_len(cat, ns) == log_before + 1
    posts = posts_to_t(cat)
    assert [(p["status"], p["fault"]) for p in posts] == [(503, "lost"),
                                                         (200, "idempotent-replay")]
    key = posts[0]["idempotency_key"]
    assert key and posts[1]["idempotency_key"] == key
    # a UUIDv7: version 7, variant 10
    assert uuid.UUID(key).version == 7 and key[19] in "89ab"


def test_idempotent_commit_keys_differ_and_a_conflict_is_not_retried(driver, table):
    cat, ns, tu = table
    cat.set_idempotency("PT30M")
    cat.reset_requests()
    assert commit(driver, cat, ns, set_props(tu, a="1"), retries=2)[0] == 0
    assert commit(driver, cat, ns, set_props(tu, a="2"), retries=2)[0] == 0
    rc, _, err = commit(driver, cat, ns, set_props(str(uuid.uuid4()), a="3"), retries=2)
    assert rc == 2 and err[1] == "conflict", err
    keys = [p["idempotency_key"] for p in posts_to_t(cat)]
    assert len(keys) == 3 and all(keys) and len(set(keys)) == 3


def test_idempotent_commit_gives_up_after_its_retries(driver, table):
    """Every answer lost: bounded retries with the same key, then state
    unknown; the commit still landed once."""
    cat, ns, tu = table
    cat.set_idempotency("PT30M")
    log_before = metadata_log_len(cat, ns)
    cat.reset_requests()
    # faults fire in the order armed: the first attempt is applied and its
    # answer lost, the retries are answered 502
    cat.fault(r"/tables/t$", action="lost", status=503, method="POST")
    cat.fault(r"/tables/t$", action="status", status=502, method="POST", count=5)
    rc, _, err = commit(driver, cat, ns, set_props(tu, b="c"), retries=2)
    posts = posts_to_t(cat)
    assert rc == 2 and err[1] == "commit state unknown", err
    assert len(posts) == 3 and len({p["idempotency_key"] for p in posts}) == 1
    assert metadata_log_len(cat, ns) == log_before + 1


def test_no_idempotency_key_without_the_advertisement(driver, table):
    """Without idempotency-key-lifetime: no Idempotency-Key header, and a
    lost answer is never retried (commit state unknown)."""
    cat, ns, tu = table
    assert "idempotency-key-lifetime" not in cat.request("GET", "/v1/config")
    cat.reset_requests()
    cat.fault(r"/tables/t$", action="lost", status=503, method="POST")
    rc, _, err = commit(driver, cat, ns, set_props(tu, owner="x"), retries=2)
    assert rc == 2 and err[1] == "commit state unknown", err
    posts = posts_to_t(cat)
    assert len(posts) == 1 and posts[0]["idempotency_key"] is None
    assert cat.load_table(ns, "t")["metadata"]["properties"]["owner"] == "x"
    rc, _, _ = commit(driver, cat, ns, set_props(tu, owner="y"), retries=2)
    assert rc == 0 and posts_to_t(cat)[-1]["idempotency_key"] is None
