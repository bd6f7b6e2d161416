"""
test_world_iceberg_js.py -- conformance of the test catalog, shown by a
third-party client: iceberg-js (npm) drives list, load, create, commit,
register, rename and drop through test/node/iceberg_js_conformance.mjs.
"""

import json
import os
import subprocess
import sys
import uuid

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import world  # noqa: E402

SCRIPT = os.path.join(world.NODE_DIR, "iceberg_js_conformance.mjs")


def run(cat, token=None):
    world.node_modules()
    argv = ["node", SCRIPT, "--uri", cat.uri, "--warehouse", cat.prefix,
            "--namespace", "conf_%s" % uuid.uuid4().hex[:8]]
    if token:
        argv += ["--token", token]
    r = subprocess.run(argv, capture_output=True, text=True, timeout=120, cwd=world.NODE_DIR)
    assert r.returncode == 0, r.stdout + r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_iceberg_js_conformance(catalog):
    out = run(catalog)
    assert out["ok"]
    assert [s["step"] for s in out["steps"]] == [
        "config", "create namespace", "list namespaces", "load namespace", "create table",
        "list tables", "load table with ETag", "commit", "register table", "rename table",
        "drop table", "drop namespace"]
    # iceberg-js's requests reached the server under the advertised prefix
    log = catalog.requests(path_regex="conf_")["requests"]
    assert any(e["method"] == "GET" and e["status"] == 304 for e in log)
    assert all(e["path"].startswith("/v1/%s/" % catalog.prefix) for e in log)


def test_iceberg_js_with_bearer_token(make_catalog):
    cat = make_catalog(credential="js:secret")
    out = run(cat, token=cat.token())
    assert out["ok"]
