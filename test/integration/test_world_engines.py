"""
test_world_engines.py -- the engine test servers (test/engines/server.py as
Livy, Trino and Gravitino, started through world.EngineServer over a test
REST catalog):

  - protocol shapes: Livy sessions and statements (states, the output
    shape, the refusal of a second session of the same name), Trino's
    QueryResults pages (QUEUED -> ... -> FINISHED, columns, data, errors,
    X-Trino-User required, /v1/query with the client tags), Gravitino's
    job runs (envelope, statuses, tms_tag kept, ErrorResponse);
  - authentication: basic, bearer, OAuth2 client credentials; 401 otherwise;
  - effects on real tables (synthetic, file:// and one on s3rver): expiry
    follows opsworld.expected_expiry and keeps refs, orphans planted and
    deleted (new ones kept), manifests merged with identical live entries;
  - parser rejections: unknown argument, bad quoting, wrong type, a ';'
    inside a quoted name is part of the name, a second statement is a
    parse error; DELETE FROM ... WHERE in both dialects (its effect on
    tables: test_engine_retention.py);
  - Spark resources typed as the APIs define them: a Livy session request
    with a malformed one is 400, a Gravitino run with one fails;
  - faults: a status for N requests, fail-run, stuck-run with cancel and
    Trino's abandonment, a restart that forgets sessions.

Run: /usr/bin/python3 -m pytest -q test/integration/test_world_engines.py
"""

import os
import sys
import time
import uuid

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))

import world  # noqa: E402
import opsworld as ow  # noqa: E402

SPARK_PARSE = "org.apache.spark.sql.catalyst.parser.ParseException"
SPARK_ANALYSIS = "org.apache.spark.sql.AnalysisException"
TRINO_SESSION = "lake.expire_snapshots_min_retention=0s,lake.remove_orphan_files_min_retention=0s"


def await_(cond, what, timeout=20, step=0.05):
    """Poll cond() until it returns something true (bounded)."""
    deadline = time.time() + timeout
    while True:
        v = cond()
        if v:
            return v
        if time.time() > deadline:
            raise AssertionError("timed out waiting for " + what)
        time.sleep(step)


@pytest.fixture(scope="module")
def cat(catalog_dsn, s3, file_root):
    server = world.CatalogServer(catalog_dsn, "file://%s/wh_eng" % file_root,
                                 catalog_name="eng_%s" % uuid.uuid4().hex[:8], s3=s3,
                                 file_root=file_root)
    yield server
    server.stop()


@pytest.fixture(scope="module")
def livy(cat):
    e = world.EngineServer("livy", cat)
    yield e
    e.stop()


@pytest.fixture(scope="module")
def trino(cat):
    e = world.EngineServer("trino", cat, abandon_seconds=1.5)
    yield e
    e.stop()


@pytest.fixture(scope="module")
def grav(cat):
    e = world.EngineServer("gravitino", cat, metalake="ml")
    yield e
    e.stop()


@pytest.fixture(autouse=True)
def _clean_faults(request):
    yield
    for name in ("livy", "trino", "grav"):
        if name in request.fixturenames:
            request.getfixturevalue(name).clear_faults()


def new_table(cat, st, base, *args, ns="eng"):
    loc = "%s/%s/t" % (base.rstrip("/"), uuid.uuid4().hex[:10])
    res = ow.synth_table(loc, *args)
    name = "t_%s" % uuid.uuid4().hex[:8]
    cat.register(ns, name, res["metadata_location"])
    return loc, name, res


# -- clients of the three protocols ------------------------------------------

def livy_session(eng, name=None):
    body = {"kind": "sql"}
    if name:
        body["name"] = name
    s = eng.request("POST", "/sessions", body, expect=201)
    await_(lambda: eng.request("GET", "/sessions/%d/state" % s["id"])["state"] == "idle",
           "session idle")
    return s


def livy_sql(eng, code, name=None, keep=False):
    """Run code in a fresh session; the finished statement."""
    s = livy_session(eng, name)
    st = eng.request("POST", "/sessions/%d/statements" % s["id"],
                     {"code": code, "kind": "sql"}, expect=201)
    done = await_(lambda: (lambda x: x if x["state"] in ("available", "error", "cancelled")
                           else None)(eng.request("GET", "/sessions/%d/statements/%d"
                                                  % (s["id"], st["id"]))), "statement")
    if not keep:
        eng.request("DELETE", "/sessions/%d" % s["id"])
    return done


def livy_rows(stmt):
    out = stmt["output"]
    assert out["status"] == "ok", out
    js = out["data"]["application/json"]
    return [f["name"] for f in js["schema"]["fields"]], js["data"]


def trino_query(eng, sql, tags=("tms",), session=TRINO_SESSION, headers=None, cancel_after=None):
    """Follow nextUri to the end: (last page, columns, rows, states seen)."""
    hdrs = {"X-Trino-User": "tms", "X-Trino-Catalog": "lake", "X-Trino-Client-Tags":
            ",".join(tags)}
    if session:
        hdrs["X-Trino-Session"] = session
    hdrs.update(headers or {})
    page = eng.request("POST", "/v1/statement", data=sql, headers=hdrs)
    states, cols, rows = [page["stats"]["state"]], None, []
    deadline = time.time() + 30
    while "nextUri" in page and time.time() < deadline:
        page = eng.request("GET", page["nextUri"])
        states.append(page["stats"]["state"])
        cols = page.get("columns", cols)
        rows += page.get("data") or []
    return page, cols, rows, states


def grav_run(eng, template, conf, wait=True):
    job = eng.request("POST", "/api/metalakes/ml/jobs/runs",
                      {"jobTemplateName": template, "jobConf": conf})
    assert job["code"] == 0
    jid = job["job"]["jobId"]
    if not wait:
        return job["job"]
    return await_(lambda: (lambda j: j if j["status"] in ("succeeded", "failed", "cancelled")
                           else None)(eng.request("GET", "/api/metalakes/ml/jobs/runs/" + jid)
                                      ["job"]), "job end")


# ---------------------------------------------------------------------------
# Livy
# ---------------------------------------------------------------------------

def test_livy_session_protocol_and_same_name_refusal(livy):
    name = "tms-%s" % uuid.uuid4().hex[:8]
    s = livy.request("POST", "/sessions", {"kind": "sql", "name": name}, expect=201)
    assert s["state"] in ("not_started", "starting") and s["name"] == name
    st_, body, _ = livy.raw("POST", "/sessions", {"kind": "sql", "name": name})
    assert st_ == 400 and body == {"msg": "Duplicate session name: Some(%s) for session %d"
                                   % (name, s["id"] + 1)}
    # a statement before the session is up is refused
    st_, body, _ = livy.raw("POST", "/sessions/%d/statements" % s["id"], {"code": "x"})
    assert st_ in (201, 400)
    await_(lambda: livy.request("GET", "/sessions/%d" % s["id"])["state"] == "idle", "idle")
    lst = livy.request("GET", "/sessions?from=0&size=100")
    assert s["id"] in [x["id"] for x in lst["sessions"]] and "total" in lst
    st_, body, _ = livy.raw("POST", "/sessions", {"kind": "sql", "bogus": 1})
    assert st_ == 400 and "Unrecognized field \"bogus\"" in body["msg"]
    assert livy.request("DELETE", "/sessions/%d" % s["id"]) == {"msg": "deleted"}
    st_, body, _ = livy.raw("GET", "/sessions/%d" % s["id"])
    assert st_ == 404 and body == {"msg": "Session '%d' not found." % s["id"]}
    # the name is free again once the session is gone
    s2 = livy.request("POST", "/sessions", {"kind": "sql", "name": name}, expect=201)
    livy.request("DELETE", "/sessions/%d" % s2["id"])


def test_livy_session_resources_are_typed_as_livy_types_them(livy):
    """driverMemory/executorMemory Spark size strings, cores and executors
    ints, conf a map of strings (Livy's POST /sessions); shown afterwards."""
    ok = {"kind": "sql", "driverMemory": "1g", "executorMemory": "2048m", "driverCores": 1,
          "executorCores": 2, "numExecutors": 3, "conf": {"spark.sql.shuffle.partitions": "8"}}
    s = livy.request("POST", "/sessions", ok, expect=201)
    got = livy.request("GET", "/sessions/%d" % s["id"])
    assert {k: got[k] for k in ok if k != "kind"} == {k: v for k, v in ok.items() if k != "kind"}
    livy.request("DELETE", "/sessions/%d" % s["id"])
    for bad in ({"executorMemory": "4 GB"}, {"driverMemory": 4096}, {"numExecutors": "3"},
                {"executorCores": 0}, {"conf": {"spark.x": 1}}, {"conf": ["spark.x"]}):
        st_, body, _ = livy.raw("POST", "/sessions", dict(bad, kind="sql"))
        assert st_ == 400 and "msg" in body, (bad, st_, body)


def test_gravitino_spark_resources_fail_a_run_as_spark_would(grav):
    base = {"catalog_name": "lake", "table_identifier": "nope.t", "older_than": ""}
    for bad in ({"spark_executor_memory": "4 GB"}, {"spark_executor_instances": "0"},
                {"spark_conf": "{\"spark.sql.catalog.lake.uri\": \"x\"}"},
                {"spark_conf": "{\"sql.x\": \"1\"}"}, {"spark_conf": "[1]"}):
        job = grav_run(grav, "builtin-iceberg-expire-snapshots", dict(base, **bad))
        assert job["status"] == "failed", (bad, job)
        assert "IllegalArgumentException" in job["details"]["errorMessage"], (bad, job)


def test_livy_expire_snapshots_follows_the_oracle_and_keeps_refs(livy, cat, s3, file_root):
    st = ow.storage(s3, file_root)
    loc, name, _ = new_table(cat, st, "file://%s/eng" % file_root, "--snapshots", "6",
                             "--data-files", "12", "--files-per-manifest", "1",
                             "--branch", "b@2", "--tag", "t@3", "--stats-files", "6")
    mloc, meta = ow.load(cat, "eng", name)
    live_before = ow.live_files(st, meta)
    now_ms = int(time.time() * 1000)
    older = now_ms + 1000
    exp = ow.expected_expiry(meta, now_ms, older_than_ms=older, retain_last=2)
    deletes = ow.expected_expiry_deletes(st, meta, ow.metadata_after_expiry(meta, exp))
    assert exp["expired"]
    ts = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(older / 1000))
    tag = "tms-exp-%s" % uuid.uuid4().hex[:6]
    stmt = livy_sql(livy, "CALL lake.system.expire_snapshots(table => 'eng.%s', older_than => "
                    "TIMESTAMP '%s', retain_last => 2)" % (name, ts), name=tag)
    cols, rows = livy_rows(stmt)
    assert cols == ["deleted_data_files_count", "deleted_position_delete_files_count",
                    "deleted_equality_delete_files_count", "deleted_manifest_files_count",
                    "deleted_manifest_lists_count", "deleted_statistics_files_count"]
    fields = stmt["output"]["data"]["application/json"]["schema"]["fields"]
    assert fields[0] == {"name": "deleted_data_files_count", "type": "long", "nullable": True,
                         "metadata": {}}
    kinds = {}
    for k in deletes.values():
        kinds[k] = kinds.get(k, 0) + 1
    assert rows == [[kinds.get("data", 0), 0, 0, kinds.get("manifest", 0),
                     kinds.get("manifest-list", 0), kinds.get("statistics", 0)]]
    _, meta2 = ow.load(cat, "eng", name)
    assert {s["snapshot-id"] for s in meta2["snapshots"]} == exp["retained"]
    assert set(meta2["refs"]) == {"main", "b", "t"}
    assert ow.live_files(st, meta2) == live_before
    assert not any(st.exists(p) for p in deletes)
    assert all(st.exists(p) for p in ow.content_files(st, meta2))
    run = [r for r in livy.runs() if r["tag"] == tag][0]
    assert run["state"] == "succeeded" and "expire_snapshots" in run["statement"]
    assert run["finished_at"] >= run["submitted_at"]


def test_livy_remove_orphan_files(livy, cat, s3, file_root):
    st = ow.storage(s3, file_root)
    loc, name, _ = new_table(cat, st, "file://%s/eng" % file_root, "--data-files", "3")
    old = time.time() - 10 * 86400
    ow.age_tree(st, loc, old)
    planted_old = [ow.plant(st, loc + "/data/orphan-%d.parquet" % i, mtime=old) for i in range(3)]
    planted_new = ow.plant(st, loc + "/data/orphan-new.parquet")
    mloc, meta = ow.load(cat, "eng", name)
    cutoff = time.time() - 86400
    expected = ow.expected_orphans(st, meta, mloc, ow.list_location(st, loc), cutoff)
    assert expected == {ow.canon(st, p) for p in planted_old}
    ts = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(cutoff))
    call = ("CALL lake.system.remove_orphan_files(table => 'eng.%s', older_than => "
            "TIMESTAMP '%s'%s)")
    cols, rows = livy_rows(livy_sql(livy, call % (name, ts, ", dry_run => true")))
    assert cols == ["orphan_file_location"] and {r[0] for r in rows} == expected
    assert all(st.exists(p) for p in planted_old)
    cols, rows = livy_rows(livy_sql(livy, call % (name, ts, "")))
    assert {r[0] for r in rows} == expected
    assert not any(st.exists(p) for p in planted_old) and st.exists(planted_new)
    assert all(st.exists(p) for p in ow.content_files(st, meta))


def livy_error(livy, code):
    out = livy_sql(livy, code)["output"]
    assert out["status"] == "error", out
    assert out["traceback"] == []
    return out["ename"], out["evalue"]


def test_livy_parser_rejections(livy, cat, s3, file_root):
    st = ow.storage(s3, file_root)
    _, name, _ = new_table(cat, st, "file://%s/eng" % file_root, "--data-files", "1")
    ename, evalue = livy_error(livy, "CALL lake.system.expire_snapshots(table => 'eng.%s', "
                               "older => 1)" % name)
    assert ename == SPARK_ANALYSIS and evalue == "Unknown argument: older"
    ename, evalue = livy_error(livy, "CALL lake.system.expire_snapshots(table => 'eng.%s)"
                               % name)
    assert ename == SPARK_PARSE and "PARSE_SYNTAX_ERROR" in evalue
    ename, evalue = livy_error(livy, "CALL lake.system.expire_snapshots(table => 'eng.%s', "
                               "retain_last => 'two')" % name)
    assert ename == SPARK_ANALYSIS and evalue == \
        "Wrong arg type for retain_last: cannot cast StringType to IntegerType"
    ename, evalue = livy_error(livy, "CALL lake.system.expire_snapshot('eng.%s')" % name)
    assert evalue == "Procedure system.expire_snapshot not found"
    # a second statement is a parse error, nothing runs
    ename, evalue = livy_error(livy, "CALL lake.system.rewrite_manifests('eng.%s'); "
                               "CALL lake.system.expire_snapshots('eng.%s')" % (name, name))
    assert ename == SPARK_PARSE
    # ';' inside a quoted name part is part of the name: that table does not exist
    ename, evalue = livy_error(livy, "CALL lake.system.expire_snapshots(table => "
                               "'`eng`.`%s; DROP TABLE x`')" % name)
    assert ename == SPARK_ANALYSIS and "%s; DROP TABLE x" % name in evalue
    # unquoted, it does not parse as an identifier
    ename, evalue = livy_error(livy, "CALL lake.system.expire_snapshots(table => "
                               "'eng.%s; DROP TABLE x')" % name)
    assert ename == SPARK_PARSE
    # adjacent literals concatenate, backslash escapes: the table is found
    cols, rows = livy_rows(livy_sql(livy, "CALL lake.system.rewrite_manifests(table => 'en' "
                                    "\"g\\u002e%s\")" % name))
    assert cols == ["rewritten_manifests_count", "added_manifests_count"]
    ename, evalue = livy_error(livy, "CALL lake.system.rewrite_data_files(table => 'eng.%s', "
                               "where => 'nosuch = 1')" % name)
    assert ename == SPARK_ANALYSIS and "nosuch" in evalue


# ---------------------------------------------------------------------------
# Trino
# ---------------------------------------------------------------------------

def test_trino_optimize_manifests_merges_with_identical_entries(trino, cat, s3, file_root):
    st = ow.storage(s3, file_root)
    loc, name, res = new_table(cat, st, "file://%s/eng" % file_root, "--format-version", "2",
                               "--snapshots", "4", "--data-files", "12",
                               "--files-per-manifest", "2", "--partitions", "3",
                               "--pos-deletes", "2")
    mloc, meta = ow.load(cat, "eng", name)
    before = ow.live_files(st, meta)
    n_before = len(ow.manifest_records(st, ow.snapshot(meta, meta["current-snapshot-id"])))
    page, cols, rows, states = trino_query(
        trino, 'ALTER TABLE "lake"."eng"."%s" EXECUTE optimize_manifests' % name,
        tags=("tms", "opt-m"))
    assert "error" not in page, page
    assert states[0] == "QUEUED" and states[-1] == "FINISHED"
    assert page["updateType"] == "ALTER TABLE EXECUTE"
    _, meta2 = ow.load(cat, "eng", name)
    snap = ow.snapshot(meta2, meta2["current-snapshot-id"])
    assert snap["summary"]["operation"] == "replace"
    recs = ow.manifest_records(st, snap)
    data_recs = [r for r in recs if (r.get("content") or 0) == 0]
    assert len(data_recs) == 1 and len(recs) < n_before
    after = ow.live_files(st, meta2)
    assert ow.live_set(after) == ow.live_set(before)
    assert all(f["status"] == 0 for f in after.values() if f["content"] == 0)
    ib = ow.icebird(ow.load(cat, "eng", name)[0], s3.endpoint, file_root, list_files=True)
    assert sorted(f["path"] for f in ib["files"]) == sorted(before)
    q = [x for x in trino.request("GET", "/v1/query") if "opt-m" in x["session"]["clientTags"]]
    assert len(q) == 1 and q[0]["state"] == "FINISHED" and name in q[0]["query"]


def test_trino_expire_and_orphans_metrics_and_min_retention(trino, cat, s3, file_root):
    st = ow.storage(s3, file_root)
    loc, name, _ = new_table(cat, st, "file://%s/eng" % file_root, "--snapshots", "3",
                             "--data-files", "3", "--files-per-manifest", "1")
    page, _, _, _ = trino_query(trino, "ALTER TABLE eng.%s EXECUTE expire_snapshots"
                                "(retention_threshold => '1s')" % name, session=None)
    assert page["stats"]["state"] == "FAILED"
    err = page["error"]
    assert err["errorName"] == "INVALID_PROCEDURE_ARGUMENT" and err["errorType"] == "USER_ERROR"
    assert err["message"].startswith("Retention specified (0.00d) is shorter than the minimum "
                                     "retention configured in the system (7.00d)")
    page, cols, rows, _ = trino_query(trino, "ALTER TABLE eng.%s EXECUTE expire_snapshots"
                                      "(retention_threshold => '1s')" % name)
    assert [c["name"] for c in cols] == ["metric_name", "metric_value"]
    metrics = dict(rows)
    assert metrics["deleted_manifest_lists_count"] == 2
    _, meta = ow.load(cat, "eng", name)
    assert len(meta["snapshots"]) == 1
    old = time.time() - 10 * 86400
    ow.age_tree(st, loc, old)
    orphan = ow.plant(st, loc + "/metadata/stray.avro", mtime=old)
    page, cols, rows, _ = trino_query(trino, "ALTER TABLE eng.%s EXECUTE remove_orphan_files"
                                      "(retention_threshold => '1d')" % name)
    assert dict(rows)["deleted_files_count"] == 1 and not st.exists(orphan)
    # unknown argument, unknown procedure, bad duration, "" in a name
    for sql, ename in [
            ("ALTER TABLE eng.%s EXECUTE expire_snapshots(retention => '7d')" % name,
             "INVALID_PROCEDURE_ARGUMENT"),
            ("ALTER TABLE eng.%s EXECUTE vacuum" % name, "PROCEDURE_NOT_FOUND"),
            ("ALTER TABLE eng.%s EXECUTE expire_snapshots(retention_threshold => '7 days')"
             % name, "INVALID_PROCEDURE_ARGUMENT"),
            ("ALTER TABLE eng.\"%s; DROP TABLE x\"\"\" EXECUTE optimize_manifests" % name,
             "TABLE_NOT_FOUND"),
            ("ALTER TABLE eng.%s EXECUTE optimize_manifests; DROP TABLE x" % name,
             "SYNTAX_ERROR"),
            ("ALTER TABLE eng.'%s' EXECUTE optimize_manifests" % name, "SYNTAX_ERROR")]:
        page, _, _, _ = trino_query(trino, sql)
        assert page["stats"]["state"] == "FAILED" and page["error"]["errorName"] == ename, \
            (sql, page)
    page, _, _, _ = trino_query(trino, "ALTER TABLE eng.\"%s; DROP TABLE x\"\"\" EXECUTE "
                                "optimize_manifests" % name)
    assert "'lake.eng.%s; drop table x\"' does not exist" % name.lower() in \
        page["error"]["message"].lower()


def test_trino_protocol_errors_cancel_and_abandon(trino, cat):
    st_, body, _ = trino.raw("POST", "/v1/statement", data="ALTER TABLE a.b EXECUTE vacuum")
    assert st_ == 400 and "User must be set" in body
    # cancel a run that never finishes: USER_CANCELED
    trino.fault(action="stuck-run", statement_regex="cancel_me")
    hdrs = {"X-Trino-User": "tms", "X-Trino-Catalog": "lake", "X-Trino-Client-Tags": "c1"}
    page = trino.request("POST", "/v1/statement", headers=hdrs,
                         data="ALTER TABLE eng.cancel_me EXECUTE optimize_manifests")
    page = trino.request("GET", page["nextUri"])
    assert page["stats"]["state"] in ("QUEUED", "RUNNING")
    qid = page["id"]
    assert trino.raw("DELETE", page["nextUri"])[0] == 204
    info = await_(lambda: (lambda i: i if i["state"] == "FAILED" else None)(
        trino.request("GET", "/v1/query/" + qid)), "cancelled")
    assert info["errorCode"]["name"] == "USER_CANCELED"
    # a client that stops polling: abandoned after --abandon-seconds
    trino.fault(action="stuck-run", statement_regex="abandon_me")
    page = trino.request("POST", "/v1/statement", headers=hdrs,
                         data="ALTER TABLE eng.abandon_me EXECUTE optimize_manifests")
    qid = page["id"]
    info = await_(lambda: (lambda i: i if i["state"] == "FAILED" else None)(
        trino.request("GET", "/v1/query/" + qid)), "abandoned", timeout=15)
    assert info["errorCode"]["name"] == "ABANDONED_QUERY"
    st_, _, _ = trino.raw("GET", "/v1/statement/executing/%s/wrong/1" % qid)
    assert st_ == 404


# ---------------------------------------------------------------------------
# Gravitino
# ---------------------------------------------------------------------------

def test_gravitino_jobs(grav, cat, s3, file_root):
    st = ow.storage(s3, file_root)
    _, name, _ = new_table(cat, st, "file://%s/eng" % file_root, "--snapshots", "3",
                           "--data-files", "3", "--files-per-manifest", "1")
    # the templates a Gravitino release ships, as its REST API lists them
    shipped = ["builtin-iceberg-expire-snapshots", "builtin-iceberg-rewrite-data-files",
               "builtin-iceberg-update-stats", "builtin-sparkpi"]
    assert grav.request("GET", "/api/metalakes/ml/jobs/templates")["names"] == shipped
    details = grav.request("GET", "/api/metalakes/ml/jobs/templates?details=true")
    assert [t["name"] for t in details["jobTemplates"]] == shipped
    st_, body, _ = grav.raw("GET", "/api/metalakes/ml/jobs/templates/"
                            "builtin-iceberg-rewrite-manifests")
    assert st_ == 404 and body["type"] == "NoSuchJobTemplateException"
    st_, body, _ = grav.raw("POST", "/api/metalakes/ml/jobs/runs",
                            {"jobTemplateName": "builtin-iceberg-rewrite-manifests",
                             "jobConf": {"catalog_name": "lake", "table_identifier": "eng.x"}})
    assert st_ == 404 and body["type"] == "NoSuchJobTemplateException"
    # a later release's rewrite-manifests, when the test says the server has it
    assert "builtin-iceberg-rewrite-manifests" in grav.set_templates(
        shipped + ["builtin-iceberg-rewrite-manifests"])
    assert grav.request("GET", "/api/metalakes/ml/jobs/templates/"
                        "builtin-iceberg-rewrite-manifests")["code"] == 0
    grav.set_templates(shipped)
    tag = "tms-g-%s" % uuid.uuid4().hex[:6]
    job = grav_run(grav, "builtin-iceberg-expire-snapshots",
                   {"catalog_name": "lake", "table_identifier": "eng.%s" % name,
                    "older_than": time.strftime("%Y-%m-%d %H:%M:%S",
                                                time.gmtime(time.time() + 1)),
                    "retain_last": "1", "tms_tag": tag})
    assert job["status"] == "succeeded" and job["jobConf"]["tms_tag"] == tag
    assert job["jobTemplateName"] == "builtin-iceberg-expire-snapshots"
    assert len(ow.load(cat, "eng", name)[1]["snapshots"]) == 1
    runs = grav.request("GET", "/api/metalakes/ml/jobs/runs?jobTemplateName="
                        "builtin-iceberg-expire-snapshots")["jobs"]
    assert [j["jobConf"].get("tms_tag") for j in runs].count(tag) == 1
    assert [r for r in grav.runs() if r["tag"] == tag][0]["state"] == "succeeded"
    # errors
    st_, body, _ = grav.raw("POST", "/api/metalakes/ml/jobs/runs",
                            {"jobTemplateName": "nope", "jobConf": {}})
    assert st_ == 404 and body["code"] == 1003 and body["type"] == "NoSuchJobTemplateException"
    st_, body, _ = grav.raw("GET", "/api/metalakes/other/jobs/runs")
    assert st_ == 404 and body["type"] == "NoSuchMetalakeException"
    st_, body, _ = grav.raw("GET", "/api/metalakes/ml/jobs/runs/job-1")
    assert st_ == 404 and body["type"] == "NoSuchJobException"
    # a failed run, injected; a stuck run, cancelled
    grav.fault(action="fail-run", message="executor lost")
    job = grav_run(grav, "builtin-iceberg-expire-snapshots",
                   {"catalog_name": "lake", "table_identifier": "eng.%s" % name})
    assert job["status"] == "failed" and "executor lost" in job["details"]["errorMessage"]
    grav.fault(action="stuck-run")
    job = grav_run(grav, "builtin-iceberg-expire-snapshots",
                   {"catalog_name": "lake", "table_identifier": "eng.%s" % name}, wait=False)
    await_(lambda: grav.request("GET", "/api/metalakes/ml/jobs/runs/" + job["jobId"])
           ["job"]["status"] == "started", "started")
    c = grav.request("POST", "/api/metalakes/ml/jobs/runs/" + job["jobId"])
    assert c["job"]["status"] in ("cancelling", "cancelled")
    await_(lambda: grav.request("GET", "/api/metalakes/ml/jobs/runs/" + job["jobId"])
           ["job"]["status"] == "cancelled", "cancelled")


# ---------------------------------------------------------------------------
# authentication, faults, s3
# ---------------------------------------------------------------------------

def test_auth_basic_bearer_oauth2(cat):
    with world.EngineServer("trino", cat, user="svc", password="pw") as t:
        st_, body, rh = t.raw("GET", "/v1/query", auth=False)
        assert st_ == 401 and 'Basic realm="Trino"' in rh.get("WWW-Authenticate", "")
        assert t.raw("GET", "/v1/query", auth="Basic c3ZjOm5v")[0] == 401
        assert t.raw("GET", "/v1/query")[0] == 200
    with world.EngineServer("livy", cat, token="tok") as lv:
        assert lv.raw("GET", "/sessions", auth=False)[0] == 401
        assert lv.raw("GET", "/sessions", auth="Bearer nope")[0] == 401
        assert lv.raw("GET", "/sessions")[0] == 200
    with world.EngineServer("gravitino", cat, credential="cid:sec", metalake="ml") as g:
        st_, body, _ = g.raw("GET", "/api/metalakes/ml/jobs/runs", auth=False)
        assert st_ == 401 and body["type"] == "UnauthorizedException"
        st_, body, _ = g.raw("POST", "/oauth/tokens", form={
            "grant_type": "client_credentials", "client_id": "cid", "client_secret": "bad"},
            auth=False)
        assert st_ == 401 and body["error"] == "invalid_client"
        assert g.request("GET", "/api/metalakes/ml/jobs/runs") == {"code": 0, "jobs": []}


def test_faults_status_and_restart(livy):
    livy.reset_requests()
    livy.fault(r"^/sessions$", method="GET", count=2, status=503)
    assert [livy.raw("GET", "/sessions")[0] for _ in range(3)] == [503, 503, 200]
    counts = livy.requests()["counts"]
    assert counts["GET /sessions"] == {"503": 2, "200": 1}
    s = livy_session(livy, "before-restart")
    livy.restart()
    assert livy.raw("GET", "/sessions/%d" % s["id"])[0] == 404
    assert livy.request("GET", "/sessions")["total"] == 0
    # ids start again from 0 after a restart without recovery
    s2 = livy.request("POST", "/sessions", {"kind": "sql", "name": "before-restart"}, expect=201)
    assert s2["id"] == 0
    livy.request("DELETE", "/sessions/0")


def test_s3_table_expiry_through_trino(trino, cat, s3, file_root):
    st = ow.storage(s3, file_root)
    loc, name, _ = new_table(cat, st, "s3://warehouse/eng-%s" % uuid.uuid4().hex[:6],
                             "--snapshots", "3", "--data-files", "3", "--files-per-manifest",
                             "1", "--branch", "keep@1", "--s3-endpoint", s3.endpoint)
    _, meta = ow.load(cat, "eng", name)
    page, cols, rows, _ = trino_query(trino, "ALTER TABLE eng.%s EXECUTE expire_snapshots"
                                      "(retention_threshold => '0s')" % name)
    assert "error" not in page, page
    _, meta2 = ow.load(cat, "eng", name)
    assert set(meta2["refs"]) == {"main", "keep"}
    assert all(st.exists(p) for p in ow.content_files(st, meta2))
    assert dict(rows)["deleted_manifest_lists_count"] == len(meta["snapshots"]) - \
        len(meta2["snapshots"])


def test_livy_cancel_of_a_stuck_statement(livy):
    livy.fault(action="stuck-run", statement_regex="stuck_t")
    s = livy_session(livy)
    st = livy.request("POST", "/sessions/%d/statements" % s["id"],
                      {"code": "CALL lake.system.rewrite_manifests('eng.stuck_t')"}, expect=201)
    path = "/sessions/%d/statements/%d" % (s["id"], st["id"])
    await_(lambda: livy.request("GET", path)["state"] == "running", "running")
    assert livy.request("GET", "/sessions/%d/state" % s["id"])["state"] == "busy"
    assert livy.request("POST", path + "/cancel") == {"msg": "canceled"}
    await_(lambda: livy.request("GET", path)["state"] == "cancelled", "cancelled")
    await_(lambda: livy.request("GET", "/sessions/%d/state" % s["id"])["state"] == "idle", "idle")
    listed = livy.request("GET", "/sessions/%d/statements" % s["id"])
    assert listed["total_statements"] == 1
    livy.request("DELETE", "/sessions/%d" % s["id"])


def test_compaction_entry_points(livy, trino, cat, s3, file_root):
    """rewrite_data_files / optimize check their WHERE against the
    partition columns, then call test/engines/compact.py (or fail saying
    compaction is not available while it does not exist)."""
    st = ow.storage(s3, file_root)
    _, name, _ = new_table(cat, st, "file://%s/eng" % file_root, "--data-files", "4",
                           "--partitions", "2")
    _, meta = ow.load(cat, "eng", name)
    part = meta["partition-specs"][0]["fields"][0]["name"]
    page, _, _, _ = trino_query(trino, "ALTER TABLE eng.%s EXECUTE optimize WHERE id = 1" % name)
    assert page["error"]["errorName"] in ("NOT_SUPPORTED", "COLUMN_NOT_FOUND"), page
    stmt = livy_sql(livy, "CALL lake.system.rewrite_data_files(table => 'eng.%s', options => "
                    "map('min-input-files', '2', 'bogus', '1'))" % name)
    assert stmt["output"]["evalue"] == "Cannot use options [bogus], they are not supported by " \
        "the action or the rewriter BIN-PACK"
    have_compact = os.path.exists(os.path.join(HERE, "..", "engines", "compact.py"))
    stmt = livy_sql(livy, "CALL lake.system.rewrite_data_files(table => 'eng.%s', where => "
                    "'%s IN (\\'a\\', \\'b\\') OR %s IS NULL')" % (name, part, part))
    out = stmt["output"]
    if not have_compact:
        assert out["status"] == "error" and "compaction is not available" in out["evalue"]
    else:
        assert out["status"] == "ok", out


def test_unknown_paths_answer_as_the_engines_do(livy, trino, grav):
    assert livy.raw("GET", "/batches/x")[0] == 404
    assert trino.raw("GET", "/v1/nothing")[0] == 404
    st_, body, _ = grav.raw("GET", "/api/metalakes/ml/nothing")
    assert st_ == 404 and body["code"] == 1003
    assert livy.raw("PUT", "/sessions")[0] == 405


# ---------------------------------------------------------------------------
# the grammar on its own (no servers)
# ---------------------------------------------------------------------------

def test_grammar_predicate_and_quoting():
    sys.path.insert(0, os.path.join(HERE, "..", "engines"))
    import grammar as g
    p = g.parse_predicate("d >= DATE '2024-01-02' AND (c IN ('x', NULL) OR n IS NOT NULL)")
    assert p.columns == ["c", "d", "n"]
    day = (__import__("datetime").date(2024, 1, 2) - __import__("datetime").date(1970, 1, 1)).days
    assert p({"d": day, "c": "x", "n": None})
    assert not p({"d": day, "c": "y", "n": None})        # IN with a NULL: unknown
    assert not p({"d": None, "c": "x", "n": 1})          # NULL comparison: unknown
    assert g.parse_predicate("NOT (a = 1)")({"a": None}) is False
    ts = g.parse_predicate("t < TIMESTAMP '1970-01-01 00:00:01'")
    assert ts({"t": 999999}) and not ts({"t": 1000000})
    t = g.parse_trino('ALTER TABLE "Lake".S."a""b" EXECUTE optimize WHERE p = \'it\'\'s\'')
    assert t.name == ["Lake", "s", 'a"b'] and t.where({"p": "it's"})
    assert g.parse_multipart("`a.b`.c") == ["a.b", "c"]
    for bad in ("a = ", "a IN ()", "(a = 1", "a = 1 b"):
        with pytest.raises(g.EngineError) as ei:
            g.parse_predicate(bad)
        assert ei.value.kind == g.SPARK_PARSE
    with pytest.raises(g.EngineError) as ei:
        g.parse_spark("CALL lake.system.expire_snapshots('t', retain_last => 1)")
    assert ei.value.message == "Named and positional arguments cannot be mixed"
    with pytest.raises(g.EngineError) as ei:
        g.parse_spark("CALL lake.system.expire_snapshots(retain_last => 1)")
    assert ei.value.message == "Missing required parameters: [table]"


def test_grammar_delete():
    """DELETE FROM ... WHERE as tms sends it: names quoted each engine's way,
    the row predicate three-valued (NULL keeps a row), Spark's
    TIMESTAMP_NTZ, Trino's zoned TIMESTAMP and case-folded names; no WHERE
    or a second statement is a parse error."""
    sys.path.insert(0, os.path.join(HERE, "..", "engines"))
    import grammar as g
    d = g.parse_delete("DELETE FROM `lake`.`a``b`.`t` WHERE ((`x` < TIMESTAMP_NTZ "
                       "'1970-01-01 00:00:01.000000') OR (`s` = 'it\\'s'))", "spark")
    assert d.name == ["lake", "a`b", "t"] and d.where.columns == ["s", "x"]
    assert d.where({"x": 999999, "s": None}) and d.where({"x": None, "s": "it's"})
    assert not d.where({"x": None, "s": None}) and not d.where({"x": 1000000, "s": "its"})
    d = g.parse_delete('DELETE FROM "lake"."S"."t" WHERE ("X" >= TIMESTAMP '
                       "'1970-01-01 00:00:01.000000 UTC') AND (\"b\" IN (true))", "trino")
    assert d.name == ["lake", "S", "t"] and d.where.columns == ["b", "x"]
    assert d.where({"x": 1000000, "b": True}) and not d.where({"x": 999999, "b": True})
    for bad, dialect in (("DELETE FROM t", "spark"), ("DELETE FROM t WHERE a = 1; DROP t", "trino"),
                         ("DELETE FROM `t` WHERE (a = TIMESTAMP_NTZ '1970-01-01 00:00:00Z')",
                          "spark")):
        with pytest.raises(g.EngineError):
            g.parse_delete(bad, dialect)


def test_admin_token(cat):
    with world.EngineServer("livy", cat, admin_token="adm") as e:
        assert e.runs() == []
        e.admin_token = None
        assert e.raw("GET", "/admin/runs", auth=False)[0] == 401
        assert e.raw("GET", "/admin/runs", headers={"X-Admin-Token": "x"})[0] == 401
        assert e.raw("GET", "/admin/runs", headers={"X-Admin-Token": "adm"})[0] == 200
