"""
test_catalog_processes.py -- the test REST catalog served from several
processes (server.py --processes) stays one catalog.

A commit answered by one serving process is seen by the conditional load
any other process serves right after it (read-your-writes across
processes: the pointers are read from PostgreSQL for every load); a 304
comes only while the table is unchanged; the request log is gathered from
every process and reset in all of them; admin changes kept in one
process's memory are refused, and so are the options whose state would be
one process's.
"""

import http.client
import json
import os
import sys
import uuid

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import world  # noqa: E402

PROCESSES = 3
SCHEMA = {"type": "struct", "schema-id": 0, "fields": [
    {"id": 1, "name": "id", "type": "long", "required": True}]}


def load(conn, path, etag=None):
    """One load on a kept-alive connection: (status, ETag, body or None)."""
    conn.request("GET", path, headers={"If-None-Match": etag} if etag else {})
    r = conn.getresponse()
    data = r.read()
    return r.status, r.getheader("ETag"), json.loads(data) if data else None


def served_by(cat, path):
    """The serving process of each GET of path, in the order they came."""
    return [e["process"] for e in cat.requests()["requests"]
            if e["method"] == "GET" and e["path"] == path]


def test_commit_seen_by_every_process(make_catalog):
    cat = make_catalog(processes=PROCESSES)
    ns, name = "np_%s" % uuid.uuid4().hex[:8], "t"
    cat.create_namespace(ns)
    created = cat.request("POST", "namespaces/%s/tables" % ns, {"name": name, "schema": SCHEMA})
    path = "/v1/%s/namespaces/%s/tables/%s" % (cat.prefix, ns, name)

    # kept-alive connections until every process serves at least one
    # (a new connection goes to the process with the fewest open ones)
    cat.reset_requests()
    conns, tag = [], None
    for _ in range(8 * PROCESSES):
        c = http.client.HTTPConnection("127.0.0.1", cat.port, timeout=30)
        st, tag, body = load(c, path)
        assert st == 200 and body["metadata-location"] == created["metadata-location"]
        conns.append(c)
        if len(set(served_by(cat, path))) == PROCESSES:
            break
    procs = served_by(cat, path)
    assert len(set(procs)) == PROCESSES, procs
    conn_proc = dict(zip(range(len(conns)), procs))

    try:
        location = created["metadata-location"]
        for i in range(3):
            # unchanged: a 304 from every process
            cat.reset_requests()
            for c in conns:
                st, t, body = load(c, path, tag)
                assert (st, t, body) == (304, tag, None)
            assert set(served_by(cat, path)) == set(procs)

            # a commit through the catalog (whichever process takes it) ...
            done = cat.request("POST", "namespaces/%s/tables/%s" % (ns, name), {
                "requirements": [{"type": "assert-table-uuid",
                                  "uuid": created["metadata"]["table-uuid"]}],
                "updates": [{"action": "set-properties", "updates": {"round": str(i)}}]})
            assert done["metadata-location"] != location
            location = done["metadata-location"]

            # ... is what every process answers to the old ETag right after
            cat.reset_requests()
            new_tags = set()
            for c in conns:
                st, t, body = load(c, path, tag)
                assert st == 200, (st, t)
                assert t != tag
                assert body["metadata-location"] == location
                assert body["metadata"]["properties"]["round"] == str(i)
                new_tags.add(t)
            assert len(new_tags) == 1
            assert [conn_proc[k] for k in range(len(conns))] == served_by(cat, path)
            tag = new_tags.pop()
    finally:
        for c in conns:
            c.close()

    # the log is every process's, numbered once; a reset empties all
    log = cat.requests()
    assert [e["seq"] for e in log["requests"]] == list(range(1, log["total"] + 1))
    assert log["counts"]["GET %s" % path] == {"200": len(conns)}
    cat.reset_requests()
    assert cat.requests()["total"] == 0


def test_state_of_one_process_refused(make_catalog):
    cat = make_catalog(processes=PROCESSES)
    for method, path, body in (("POST", "/admin/faults", {"match": {}}),
                               ("POST", "/admin/expire-tokens", None),
                               ("POST", "/admin/idempotency", {"lifetime": "PT1M"}),
                               ("DELETE", "/admin/vending", None)):
        st, parsed, _ = cat.raw(method, path, body, auth=False)
        assert st == 409, (method, path, st, parsed)
        assert "--processes %d" % PROCESSES in parsed["error"]["message"]
    st, parsed, _ = cat.raw("GET", "/admin/faults", auth=False)
    assert st == 200 and parsed == {"faults": []}
    with pytest.raises(RuntimeError, match="--token-credential keeps its state in one process"):
        make_catalog(processes=PROCESSES, credential="id:secret", timeout=15)
    with pytest.raises(RuntimeError, match="--processes must be at least 1"):
        world.CatalogServer("dbname=none", "file:///tmp", processes=-1, timeout=15)
