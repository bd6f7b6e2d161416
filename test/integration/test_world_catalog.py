"""
test_world_catalog.py -- the test REST catalog follows the spec.

Config, namespaces (with parent and pagination), tables (create, register,
load with ETag/304 and snapshots=refs, commit with every requirement type,
drop, rename), the JDBC pointer layout with its compare-and-swap, a trigger
refusing a pointer row, OAuth2 tokens and S3 storage-config vending.
"""

import json
import os
import sys
import threading
import time
import uuid

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import world  # noqa: E402
from pgcluster import wait_for  # noqa: E402

SCHEMA = {"type": "struct", "schema-id": 0, "fields": [
    {"id": 1, "name": "id", "type": "long", "required": True},
    {"id": 2, "name": "name", "type": "string", "required": False}]}


def uniq(prefix="t"):
    return "%s_%s" % (prefix, uuid.uuid4().hex[:8])


def create(cat, ns, name, **extra):
    cat.create_namespace(ns)
    body = {"name": name, "schema": SCHEMA}
    body.update(extra)
    return cat.request("POST", "namespaces/%s/tables" % ns, body)


def snapshot(sid, parent=None, seq=1, ts=None):
    s = {"snapshot-id": sid, "sequence-number": seq, "timestamp-ms": ts or int(time.time() * 1000),
         "manifest-list": "file:///nonexistent/snap-%d.avro" % sid,
         "summary": {"operation": "append"}, "schema-id": 0}
    if parent is not None:
        s["parent-snapshot-id"] = parent
    return s


def commit(cat, ns, name, updates, requirements=(), expect=None):
    return cat.request("POST", "namespaces/%s/tables/%s" % (ns, name),
                       {"requirements": list(requirements), "updates": updates}, expect=expect)


def test_config(catalog):
    cfg = catalog.request("GET", "/v1/config")
    assert cfg["overrides"]["prefix"] == catalog.prefix
    assert cfg["defaults"]["warehouse"].startswith("file://")
    assert "GET /v1/{prefix}/namespaces/{namespace}/tables/{table}" in cfg["endpoints"]
    st, body, _ = catalog.raw("GET", "/v1/config?warehouse=nope")
    assert st == 404 and body["error"]["type"] == "NoSuchWarehouseException"
    assert body["error"]["code"] == 404


def test_namespaces(catalog, catalog_dsn, world_pg):
    top = uniq("ns")
    catalog.request("POST", "namespaces", {"namespace": [top], "properties": {"owner": "me"}})
    st, body, _ = catalog.raw("POST", "/v1/%s/namespaces" % catalog.prefix, {"namespace": [top]})
    assert st == 409 and body["error"]["type"] == "AlreadyExistsException"
    catalog.request("POST", "namespaces", {"namespace": [top, "child"]})
    got = catalog.request("GET", "namespaces/%s" % top)
    assert got == {"namespace": [top], "properties": {"owner": "me"}}
    kids = catalog.request("GET", "namespaces?parent=%s" % top)
    assert kids["namespaces"] == [[top, "child"]]
    assert [top] in catalog.request("GET", "namespaces")["namespaces"]
    # the JDBC layout: dot-joined namespace, one row per property
    rows = world_pg.psql("SELECT namespace, property_key, property_value FROM "
                         "iceberg_namespace_properties WHERE catalog_name = '%s' "
                         "AND namespace LIKE '%s%%' ORDER BY 1, 2" % (catalog.prefix, top),
                         dbname="iceberg_catalog")
    assert rows.split("\n")[:2] == ["%s|owner|me" % top, "%s.child|exists|true" % top]
    upd = catalog.request("POST", "namespaces/%s/properties" % top,
                          {"updates": {"a": "1"}, "removals": ["owner", "missing"]})
    assert upd["updated"] == ["a"] and upd["removed"] == ["owner"] and upd["missing"] == ["missing"]
    st, body, _ = catalog.raw("POST", "/v1/%s/namespaces/%s/properties" % (catalog.prefix, top),
                              {"updates": {"x": "1"}, "removals": ["x"]})
    assert st == 422
    st, _, _ = catalog.raw("HEAD", "/v1/%s/namespaces/%s" % (catalog.prefix, top))
    assert st == 204
    st, body, _ = catalog.raw("DELETE", "/v1/%s/namespaces/%s" % (catalog.prefix, top))
    assert st == 409 and body["error"]["type"] == "NamespaceNotEmptyException"
    catalog.request("DELETE", "namespaces/%s%%1Fchild" % top, expect=204)
    catalog.request("DELETE", "namespaces/%s" % top, expect=204)
    st, body, _ = catalog.raw("GET", "/v1/%s/namespaces/%s" % (catalog.prefix, top))
    assert st == 404 and body["error"]["type"] == "NoSuchNamespaceException"


def test_pagination(make_catalog):
    cat = make_catalog()
    for i in range(7):
        cat.create_namespace("p%02d" % i)
    for i in range(5):
        create(cat, "p00", "t%02d" % i)
    # without pageToken / pageSize: everything, no next-page-token key
    allns = cat.request("GET", "namespaces")
    assert len(allns["namespaces"]) == 7 and "next-page-token" not in allns
    seen, token, pages = [], "", 0
    while True:
        q = "namespaces?pageSize=3&pageToken=%s" % token
        page = cat.request("GET", q)
        pages += 1
        seen += page["namespaces"]
        assert len(page["namespaces"]) <= 3
        token = page["next-page-token"]
        if token is None:
            break
    assert pages == 3 and seen == [["p%02d" % i] for i in range(7)]
    t1 = cat.request("GET", "namespaces/p00/tables?pageSize=2")
    assert [i["name"] for i in t1["identifiers"]] == ["t00", "t01"]
    t2 = cat.request("GET", "namespaces/p00/tables?pageSize=2&pageToken=%s" % t1["next-page-token"])
    t3 = cat.request("GET", "namespaces/p00/tables?pageSize=2&pageToken=%s" % t2["next-page-token"])
    assert [i["name"] for i in t2["identifiers"] + t3["identifiers"]] == ["t02", "t03", "t04"]
    assert t3["next-page-token"] is None


def test_create_load_etag_304(catalog, world_pg):
    name = uniq()
    res = create(catalog, "etag", name, properties={"format-version": "1", "k": "v"})
    meta = res["metadata"]
    assert meta["format-version"] == 1 and "format-version" not in meta["properties"]
    assert meta["schema"]["fields"] == SCHEMA["fields"]
    assert res["metadata-location"].endswith(".metadata.json")
    assert "/metadata/00000-" in res["metadata-location"]
    row = world_pg.psql("SELECT metadata_location, previous_metadata_location IS NULL, iceberg_type "
                        "FROM iceberg_tables WHERE catalog_name = '%s' AND table_name = '%s'"
                        % (catalog.prefix, name), dbname="iceberg_catalog").strip()
    assert row == "%s|t|TABLE" % res["metadata-location"]
    path = "namespaces/etag/tables/%s" % name
    st, body, hdrs = catalog.raw("GET", "/v1/%s/%s" % (catalog.prefix, path))
    assert st == 200 and body["metadata"]["table-uuid"] == meta["table-uuid"]
    etag = hdrs["ETag"]
    st, body, hdrs2 = catalog.raw("GET", "/v1/%s/%s" % (catalog.prefix, path),
                                  headers={"If-None-Match": etag})
    assert st == 304 and body is None and hdrs2["ETag"] == etag
    # another representation (snapshots=refs) has another ETag
    st, _, hdrs3 = catalog.raw("GET", "/v1/%s/%s?snapshots=refs" % (catalog.prefix, path),
                               headers={"If-None-Match": etag})
    assert st == 200 and hdrs3["ETag"] != etag
    # after a commit the old ETag no longer matches
    commit(catalog, "etag", name, [{"action": "set-properties", "updates": {"x": "y"}}])
    st, body, hdrs4 = catalog.raw("GET", "/v1/%s/%s" % (catalog.prefix, path),
                                  headers={"If-None-Match": etag})
    assert st == 200 and hdrs4["ETag"] != etag and body["metadata"]["properties"]["x"] == "y"


def test_commit_snapshots_refs_and_logs(catalog):
    name = uniq()
    res = create(catalog, "commits", name)
    loc0 = res["metadata-location"]
    now = int(time.time() * 1000)
    r = commit(catalog, "commits", name, [
        {"action": "add-snapshot", "snapshot": snapshot(101, None, 1, now)},
        {"action": "set-snapshot-ref", "ref-name": "main", "type": "branch", "snapshot-id": 101}],
        [{"type": "assert-ref-snapshot-id", "ref": "main", "snapshot-id": None}])
    m = r["metadata"]
    assert m["current-snapshot-id"] == 101 and m["last-sequence-number"] == 1
    assert m["snapshot-log"] == [{"timestamp-ms": now, "snapshot-id": 101}]
    assert m["metadata-log"][-1]["metadata-file"] == loc0
    assert "/metadata/00001-" in r["metadata-location"]
    r = commit(catalog, "commits", name, [
        {"action": "add-snapshot", "snapshot": snapshot(102, 101, 2)},
        {"action": "set-snapshot-ref", "ref-name": "main", "type": "branch", "snapshot-id": 102},
        {"action": "set-snapshot-ref", "ref-name": "audit", "type": "branch", "snapshot-id": 101,
         "max-snapshot-age-ms": 1000, "min-snapshots-to-keep": 2},
        {"action": "set-snapshot-ref", "ref-name": "v1", "type": "tag", "snapshot-id": 101,
         "max-ref-age-ms": 5000}],
        [{"type": "assert-ref-snapshot-id", "ref": "main", "snapshot-id": 101}])
    m = r["metadata"]
    assert m["refs"]["audit"] == {"snapshot-id": 101, "type": "branch", "max-snapshot-age-ms": 1000,
                                  "min-snapshots-to-keep": 2}
    assert m["refs"]["v1"] == {"snapshot-id": 101, "type": "tag", "max-ref-age-ms": 5000}
    refs = catalog.load_table("commits", name)
    assert len(refs["metadata"]["snapshots"]) == 2
    # snapshots=refs: only referenced snapshots (add an unreferenced one first)
    commit(catalog, "commits", name, [{"action": "add-snapshot", "snapshot": snapshot(103, 102, 3)}])
    full = catalog.load_table("commits", name)
    only = catalog.request("GET", "namespaces/commits/tables/%s?snapshots=refs" % name)
    assert {s["snapshot-id"] for s in full["metadata"]["snapshots"]} == {101, 102, 103}
    assert {s["snapshot-id"] for s in only["metadata"]["snapshots"]} == {101, 102}
    # its snapshot log keeps the entries of those snapshots only, as Iceberg's
    # TableMetadata.Builder.suppressHistoricalSnapshots() does
    assert only["metadata"]["snapshot-log"] == [
        e for e in full["metadata"]["snapshot-log"] if e["snapshot-id"] in (101, 102)]
    # answered again (from the catalog's cache of refs answers): the same
    again = catalog.request("GET", "namespaces/commits/tables/%s?snapshots=refs" % name)
    assert again["metadata"] == only["metadata"]
    assert again["metadata-location"] == only["metadata-location"]
    r = commit(catalog, "commits", name, [
        {"action": "remove-snapshot-ref", "ref-name": "v1"},
        {"action": "remove-snapshots", "snapshot-ids": [103]},
        {"action": "set-location", "location": "file:///elsewhere/t"},
        {"action": "remove-properties", "removals": ["nope"]},
        {"action": "set-properties", "updates": {"a": "b"}}])
    m = r["metadata"]
    assert "v1" not in m["refs"] and 103 not in [s["snapshot-id"] for s in m["snapshots"]]
    assert m["location"] == "file:///elsewhere/t" and m["properties"]["a"] == "b"
    assert len(m["metadata-log"]) == 4
    # an unknown update action is a 400
    st, body, _ = catalog.raw("POST", "/v1/%s/namespaces/commits/tables/%s" % (catalog.prefix, name),
                              {"requirements": [], "updates": [{"action": "fly"}]})
    assert st == 400 and body["error"]["type"] == "BadRequestException"


@pytest.mark.parametrize("req", [
    {"type": "assert-create"},
    {"type": "assert-table-uuid", "uuid": "00000000-0000-0000-0000-000000000000"},
    {"type": "assert-ref-snapshot-id", "ref": "main", "snapshot-id": 42},
    {"type": "assert-ref-snapshot-id", "ref": "tagged", "snapshot-id": None},
    {"type": "assert-last-assigned-field-id", "last-assigned-field-id": 99},
    {"type": "assert-current-schema-id", "current-schema-id": 7},
    {"type": "assert-last-assigned-partition-id", "last-assigned-partition-id": 1234},
    {"type": "assert-default-spec-id", "default-spec-id": 3},
    {"type": "assert-default-sort-order-id", "default-sort-order-id": 5},
])
def test_failed_requirement_is_409(catalog, req):
    name = uniq()
    res = create(catalog, "reqs", name)
    commit(catalog, "reqs", name, [
        {"action": "add-snapshot", "snapshot": snapshot(7, None, 1)},
        {"action": "set-snapshot-ref", "ref-name": "tagged", "type": "tag", "snapshot-id": 7}])
    before = catalog.load_table("reqs", name)["metadata-location"]
    st, body, _ = catalog.raw("POST", "/v1/%s/namespaces/reqs/tables/%s" % (catalog.prefix, name),
                              {"requirements": [req],
                               "updates": [{"action": "set-properties", "updates": {"z": "1"}}]})
    assert st == 409, body
    assert body["error"]["type"] == "CommitFailedException" and body["error"]["code"] == 409
    assert catalog.load_table("reqs", name)["metadata-location"] == before
    # the same requirement with the table's true value passes
    m = catalog.load_table("reqs", name)["metadata"]
    good = dict(req)
    truth = {"assert-table-uuid": ("uuid", m["table-uuid"]),
             "assert-ref-snapshot-id": ("snapshot-id", m["refs"].get(req.get("ref"), {}).get("snapshot-id")),
             "assert-last-assigned-field-id": ("last-assigned-field-id", m["last-column-id"]),
             "assert-current-schema-id": ("current-schema-id", m["current-schema-id"]),
             "assert-last-assigned-partition-id": ("last-assigned-partition-id", m["last-partition-id"]),
             "assert-default-spec-id": ("default-spec-id", m["default-spec-id"]),
             "assert-default-sort-order-id": ("default-sort-order-id", m["default-sort-order-id"])}
    if req["type"] in truth:
        k, v = truth[req["type"]]
        good[k] = v
        commit(catalog, "reqs", name, [{"action": "set-properties", "updates": {"z": "1"}}], [good])
        assert catalog.load_table("reqs", name)["metadata"]["properties"]["z"] == "1"
    assert res["metadata"]["table-uuid"] == m["table-uuid"]


def test_create_transaction_with_assert_create(catalog):
    name = uniq()
    catalog.create_namespace("txn")
    staged = catalog.request("POST", "namespaces/txn/tables",
                             {"name": name, "schema": SCHEMA, "stage-create": True})
    assert staged["metadata-location"] is None
    assert catalog.raw("GET", "/v1/%s/namespaces/txn/tables/%s" % (catalog.prefix, name))[0] == 404
    m = staged["metadata"]
    r = commit(catalog, "txn", name, [
        {"action": "assign-uuid", "uuid": m["table-uuid"]},
        {"action": "upgrade-format-version", "format-version": 2},
        {"action": "add-schema", "schema": SCHEMA},
        {"action": "set-current-schema", "schema-id": -1},
        {"action": "add-spec", "spec": {"spec-id": 0, "fields": []}},
        {"action": "set-default-spec", "spec-id": -1},
        {"action": "add-sort-order", "sort-order": {"order-id": 0, "fields": []}},
        {"action": "set-default-sort-order", "sort-order-id": -1},
        {"action": "set-location", "location": m["location"]},
        {"action": "set-properties", "updates": {"created": "by-txn"}}],
        [{"type": "assert-create"}])
    assert r["metadata"]["table-uuid"] == m["table-uuid"]
    loaded = catalog.load_table("txn", name)
    assert loaded["metadata"]["properties"]["created"] == "by-txn"
    # a second create transaction fails its assert-create
    st, body, _ = catalog.raw("POST", "/v1/%s/namespaces/txn/tables/%s" % (catalog.prefix, name),
                              {"requirements": [{"type": "assert-create"}], "updates": []})
    assert st == 409


def test_pointer_cas_race(catalog):
    """Two commits read the same base; the one that swaps second loses with
    409 because the UPDATE ... WHERE metadata_location = old matches nothing,
    and its orphan metadata file is deleted."""
    name = uniq()
    create(catalog, "race", name)
    path = "/v1/%s/namespaces/race/tables/%s$" % (catalog.prefix, name)
    catalog.fault(path, action="hang", seconds=2, method="POST", at="pointer-swap")
    result = {}

    def slow():
        result["slow"] = catalog.raw("POST", path[:-1], {"requirements": [], "updates": [
            {"action": "set-properties", "updates": {"who": "slow"}}]})

    t = threading.Thread(target=slow)
    t.start()
    # the fault disappears from the armed list once the slow commit reaches
    # the pointer swap (its new metadata file is written by then)
    deadline = time.time() + 10
    while catalog._admin("GET", "/admin/faults")["faults"] and time.time() < deadline:
        time.sleep(0.02)
    fast = commit(catalog, "race", name, [{"action": "set-properties", "updates": {"who": "fast"}}])
    t.join()
    st, body, _ = result["slow"]
    assert st == 409 and body["error"]["type"] == "CommitFailedException"
    assert "has changed" in body["error"]["message"]
    final = catalog.load_table("race", name)
    assert final["metadata"]["properties"]["who"] == "fast"
    assert final["metadata-location"] == fast["metadata-location"]
    mdir = final["metadata"]["location"][len("file://"):] + "/metadata"
    assert len([f for f in os.listdir(mdir) if f.endswith(".metadata.json")]) == 2


def test_trigger_refusal_becomes_409(catalog, world_pg):
    fn = "refuse_%s" % uuid.uuid4().hex[:6]
    world_pg.psql("""
        CREATE FUNCTION %(fn)s() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
          IF NEW.table_name LIKE 'refused%%' THEN
            RAISE EXCEPTION 'pointer refused by trigger for %%', NEW.table_name;
          END IF;
          RETURN NEW;
        END $$;
        CREATE TRIGGER %(fn)s BEFORE INSERT OR UPDATE ON iceberg_tables
          FOR EACH ROW EXECUTE FUNCTION %(fn)s();""" % {"fn": fn}, dbname="iceberg_catalog")
    try:
        catalog.create_namespace("trig")
        st, body, _ = catalog.raw("POST", "/v1/%s/namespaces/trig/tables" % catalog.prefix,
                                  {"name": "refused_one", "schema": SCHEMA})
        assert st == 409
        assert body["error"]["message"] == "pointer refused by trigger for refused_one"
        assert catalog.raw("GET", "/v1/%s/namespaces/trig/tables/refused_one" % catalog.prefix)[0] == 404
        # a commit (the UPDATE) refused after a rename into the refused name space
        name = uniq()
        create(catalog, "trig", name)
        catalog.request("POST", "tables/rename", {
            "source": {"namespace": ["trig"], "name": name},
            "destination": {"namespace": ["trig"], "name": "refused_" + name}}, expect=409)
    finally:
        world_pg.psql("DROP TRIGGER %(fn)s ON iceberg_tables; DROP FUNCTION %(fn)s();" % {"fn": fn},
                      dbname="iceberg_catalog")


def test_rename_drop_register(catalog):
    name = uniq()
    res = create(catalog, "rn", name)
    catalog.create_namespace("rn2")
    catalog.request("POST", "tables/rename", {"source": {"namespace": ["rn"], "name": name},
                                              "destination": {"namespace": ["rn2"], "name": name}},
                    expect=204)
    assert catalog.raw("HEAD", "/v1/%s/namespaces/rn/tables/%s" % (catalog.prefix, name))[0] == 404
    assert catalog.raw("HEAD", "/v1/%s/namespaces/rn2/tables/%s" % (catalog.prefix, name))[0] == 204
    st, body, _ = catalog.raw("POST", "/v1/%s/tables/rename" % catalog.prefix, {
        "source": {"namespace": ["rn"], "name": "missing"},
        "destination": {"namespace": ["rn2"], "name": "x"}})
    assert st == 404 and body["error"]["type"] == "NoSuchTableException"
    catalog.request("DELETE", "namespaces/rn2/tables/%s" % name, expect=204)
    assert catalog.raw("DELETE", "/v1/%s/namespaces/rn2/tables/%s" % (catalog.prefix, name))[0] == 404
    # without purge the files stay: register them again under a new name
    reg = catalog.request("POST", "namespaces/rn/register",
                          {"name": name + "_again", "metadata-location": res["metadata-location"]})
    assert reg["metadata"]["table-uuid"] == res["metadata"]["table-uuid"]
    st, body, _ = catalog.raw("POST", "/v1/%s/namespaces/rn/register" % catalog.prefix,
                              {"name": name + "_again", "metadata-location": res["metadata-location"]})
    assert st == 409 and body["error"]["type"] == "AlreadyExistsException"


def test_oauth_tokens_and_expiry(make_catalog):
    cat = make_catalog(credential="client:s3cret", token_ttl=2)
    p = "/v1/%s/namespaces" % cat.prefix
    st, body, _ = cat.raw("GET", p, auth=False)
    assert st == 401 and body["error"]["type"] == "NotAuthorizedException" and body["error"]["code"] == 401
    assert cat.raw("GET", p, auth="not-a-token")[0] == 401
    assert cat.raw("GET", "/v1/config", auth=False)[0] == 401
    st, body, _ = cat.raw("POST", "/v1/oauth/tokens", form={
        "grant_type": "client_credentials", "client_id": "client", "client_secret": "wrong"})
    assert st == 401 and body["error"] == "invalid_client"
    st, body, _ = cat.raw("POST", "/v1/oauth/tokens", form={"grant_type": "password"})
    assert st == 400 and body["error"] == "unsupported_grant_type"
    st, tok, _ = cat.raw("POST", "/v1/oauth/tokens", form={
        "grant_type": "client_credentials", "client_id": "client", "client_secret": "s3cret",
        "scope": "catalog"})
    assert st == 200 and tok["token_type"] == "bearer" and tok["expires_in"] == 2
    assert cat.raw("GET", p, auth=tok["access_token"])[0] == 200
    # refresh by token exchange while still valid
    st, tok2, _ = cat.raw("POST", "/v1/oauth/tokens", form={
        "grant_type": "urn:ietf:params:oauth:grant-type:token-exchange",
        "subject_token": tok["access_token"],
        "subject_token_type": "urn:ietf:params:oauth:token-type:access_token"})
    assert st == 200 and tok2["access_token"] != tok["access_token"]
    # the first token expires 2 s after it was issued
    def refused():
        r = cat.raw("GET", p, auth=tok["access_token"])
        return r if r[0] != 200 else None
    st, body, _ = wait_for(refused, timeout=10, what="the token to expire")
    assert st == 401 and "expired" in body["error"]["message"]
    # admin: expire everything now
    fresh = cat.token(fresh=True)
    assert cat.raw("GET", p, auth=fresh)[0] == 200
    cat.expire_tokens()
    assert cat.raw("GET", p, auth=fresh)[0] == 401


def test_static_token(make_catalog):
    cat = make_catalog(static_token="fixed-token")
    p = "/v1/%s/namespaces" % cat.prefix
    assert cat.raw("GET", p, auth=False)[0] == 401
    assert cat.raw("GET", p, auth="fixed-token")[0] == 200
    assert cat.raw("GET", p, auth="other")[0] == 401


def test_s3_warehouse_and_config_vending(make_catalog, s3):
    cat = make_catalog(warehouse="s3://warehouse/wh")
    res = create(cat, "s3ns", "t1")
    loc = res["metadata-location"]
    assert loc.startswith("s3://warehouse/wh/s3ns/t1/metadata/00000-")
    cfg = res["config"]
    assert cfg["s3.endpoint"] == s3.endpoint and cfg["s3.path-style-access"] == "true"
    assert cfg["s3.access-key-id"] == "S3RVER" and cfg["client.region"] == "us-east-1"
    body = json.loads(s3.client().get("warehouse", loc[len("s3://warehouse/"):]))
    assert body["table-uuid"] == res["metadata"]["table-uuid"]
    r = commit(cat, "s3ns", "t1", [{"action": "set-properties", "updates": {"k": "v"}}])
    assert s3.client().head("warehouse", r["metadata-location"][len("s3://warehouse/"):])
    # file:// tables get no S3 config
    local = make_catalog()
    assert create(local, "f", "t")["config"] == {}
