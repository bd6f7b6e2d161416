"""
test_catalog_sql.py -- tms's catalog functions against the test world's
REST catalog (test/catalog/server.py) and s3rver: listings, load with
ETag/304, OAuth2 with token refresh, injected faults (500s, hangs,
malformed bodies, 429/503 with Retry-After), query cancel during a hanging
request or a Retry-After wait, and the counts of every real fixture table
through tms.table_metrics / tms.table_files; tms.allowed_hosts limiting
which catalog and storage addresses tms connects to.

Run: /usr/bin/python3 -m pytest test/integration/test_catalog_sql.py
"""

import email.utils
import os
import sys
import threading
import time
import uuid

import psycopg2
import psycopg2.errorcodes
import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import world  # noqa: E402
from pgcluster import wait_for  # noqa: E402

# test/fixtures/iceberg/<folder>/PROVENANCE.md of each table: snapshots in
# the current metadata, and the distinct data / position-delete /
# equality-delete files over all snapshots.
PROVENANCE = {
    "spark_v2_mor_posdeletes": dict(snapshots=3, data=2, pos=1, eq=0),
    "spark_v2_partitioned_bucket_identity": dict(snapshots=1, data=3, pos=0, eq=0),
    "java_v2_partitioned_eqdeletes": dict(snapshots=5, data=6, pos=0, eq=3),
    "pyiceberg_v1_overwrite": dict(snapshots=3, data=4, pos=0, eq=0),
    "pyiceberg_v2_partitioned_nullcodec": dict(snapshots=2, data=2, pos=0, eq=0),
    "spark_v1_gzip_metadata": dict(snapshots=1, data=1, pos=0, eq=0),
    "spark_v1_legacy_manifests_field": dict(snapshots=1, data=2, pos=0, eq=0),
}
EXPECTED = PROVENANCE


def make_server(pg, uri, file_root=None, mapping="", **options):
    """CREATE SERVER (a fresh name) for uri with a user mapping for the
    connecting role; returns the server name."""
    name = "cat_%s" % uuid.uuid4().hex[:10]
    opts = {"uri": uri, "retries": "0", "request_timeout": "5s", "connect_timeout": "2s",
            # the test catalog vends its s3rver endpoint with its credentials
            "s3_vended_endpoint": "true"}
    if file_root:
        # local files are read only below a local allowed location
        opts["relative_path_root"] = file_root
        opts["allowed_locations"] = "file://%s/" % file_root
    opts.update(options)
    with pg.connect() as conn, conn.cursor() as cur:
        cur.execute("CREATE EXTENSION IF NOT EXISTS tms")
        cur.execute("CREATE SERVER %s FOREIGN DATA WRAPPER tms_iceberg OPTIONS (%s)" % (
            name, ", ".join("%s %s" % (k, quote(v)) for k, v in opts.items())))
        cur.execute("CREATE USER MAPPING FOR CURRENT_USER SERVER %s %s" % (
            name, "OPTIONS (%s)" % mapping if mapping else ""))
    return name


def quote(v):
    return "'" + v.replace("'", "''") + "'"


def readable_by_server(root):
    """The server runs as another user: let it read the file warehouse
    (tempfile.mkdtemp makes 0700 directories)."""
    for dirpath, dirnames, filenames in os.walk(root):
        os.chmod(dirpath, 0o755)
        for f in filenames:
            os.chmod(os.path.join(dirpath, f), 0o644)


@pytest.fixture(scope="module")
def srv(pg, catalog, real_tables, file_root):
    readable_by_server(file_root)
    return make_server(pg, catalog.uri, file_root)


# ---------------------------------------------------------------------------
# listings, metadata, ETag
# ---------------------------------------------------------------------------

def test_list_namespaces_and_tables(pg, srv):
    nss = [r[0] for r in pg.query("SELECT * FROM tms.list_namespaces(%s)", (srv,))]
    assert "real" in nss
    tables = pg.query("SELECT table_name FROM tms.list_tables(%s, 'real') ORDER BY 1", (srv,))
    assert [t[0] for t in tables] == sorted(EXPECTED)
    everywhere = pg.query("SELECT namespace, table_name FROM tms.list_tables(%s)", (srv,))
    assert {("real", t) for t in EXPECTED} <= set(everywhere)


def test_list_pagination(pg, catalog, real_tables, file_root):
    """With page_size 3, seven tables take three pages; tms follows
    next-page-token to the end."""
    ns = "paged_%s" % uuid.uuid4().hex[:6]
    loc = real_tables["spark_v1_gzip_metadata"]["metadata_location"]
    for i in range(7):
        catalog.register(ns, "t%02d" % i, loc)
    name = make_server(pg, catalog.uri, file_root, page_size="3")
    catalog.reset_requests()
    rows = pg.query("SELECT table_name FROM tms.list_tables(%s, %s) ORDER BY 1", (name, ns))
    assert [r[0] for r in rows] == ["t%02d" % i for i in range(7)]
    pages = catalog.requests(r"/namespaces/%s/tables$" % ns)["requests"]
    assert len(pages) == 3, pages
    assert all("pageSize=3" in p["query"] for p in pages)


def test_catalog_config_hides_nothing_secret_and_has_prefix(pg, srv, catalog):
    rows = dict(pg.query("SELECT key, value FROM tms.catalog_config(%s)"
                         " WHERE key NOT LIKE '(endpoint)'", (srv,)))
    assert rows["(prefix)"] == catalog.prefix
    assert "warehouse" in rows


def test_table_metadata_and_etag_304(pg, srv, catalog):
    conn = pg.connect()
    try:
        catalog.reset_requests()
        md = pg.query("SELECT tms.table_metadata(%s, 'real', 'spark_v2_mor_posdeletes')",
                      (srv,), conn=conn)[0][0]
        assert md["format-version"] == 2
        md2 = pg.query("SELECT tms.table_metadata(%s, 'real', 'spark_v2_mor_posdeletes')",
                       (srv,), conn=conn)[0][0]
        assert md2 == md
        loads = [r for r in catalog.requests(r"/tables/spark_v2_mor_posdeletes$")["requests"]
                 if r["method"] == "GET"]
        assert [r["status"] for r in loads] == [200, 304]
        assert loads[0]["if_none_match"] is None and loads[1]["if_none_match"]
    finally:
        conn.close()


def test_missing_table_and_namespace(pg, srv):
    e = pg.query_error("SELECT tms.table_metadata(%s, 'real', 'no_such_table')", (srv,))
    assert e.pgcode == psycopg2.errorcodes.UNDEFINED_TABLE
    assert "NoSuchTable" in (e.diag.message_detail or "")
    e = pg.query_error("SELECT * FROM tms.list_tables(%s, 'no_such_ns')", (srv,))
    assert e.pgcode == psycopg2.errorcodes.INVALID_SCHEMA_NAME


def test_snapshots(pg, srv):
    rows = pg.query("SELECT snapshot_id, is_current, summary ->> 'operation' IS NOT NULL"
                    " FROM tms.table_snapshots(%s, 'real', 'java_v2_partitioned_eqdeletes')",
                    (srv,))
    assert len(rows) == 5
    assert sum(1 for r in rows if r[1]) == 1


# ---------------------------------------------------------------------------
# every real fixture table: counts through the SQL surface
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("name", sorted(PROVENANCE))
def test_real_table_counts(pg, srv, catalog, s3, file_root, name):
    """The current snapshot's live files agree with the test world's own
    (Python) manifest reader; over all snapshots, the distinct files are
    the PROVENANCE counts."""
    from test_world_fixtures import current_counts
    import storage

    exp = PROVENANCE[name]
    m = pg.query("SELECT tms.table_metrics(%s, 'real', %s)", (srv, name))[0][0]
    assert m["level"] == "deletes"
    assert m["snapshots"] == exp["snapshots"]
    meta = catalog.load_table("real", name)["metadata"]
    theirs = current_counts(storage.Storage(s3=s3.config(), file_root=file_root), meta)
    assert (m["dataFiles"], m["positionDeleteFiles"], m["equalityDeleteFiles"]) == (
        theirs["data_files"], theirs["position_delete_files"],
        theirs["equality_delete_files"]), (m, theirs)

    files = pg.query("SELECT content, count(*), sum(record_count), sum(file_size_in_bytes)"
                     " FROM tms.table_files(%s, 'real', %s) GROUP BY 1", (srv, name))
    by = {r[0]: r for r in files}
    assert by.get("data", (None, 0))[1] == m["dataFiles"]
    assert by.get("position_deletes", (None, 0))[1] == m["positionDeleteFiles"]
    assert by.get("equality_deletes", (None, 0))[1] == m["equalityDeleteFiles"]
    if m["dataFiles"]:
        assert by["data"][2] == m["dataRecords"]
        assert by["data"][3] == m["dataFilesSize"]

    every = pg.query("SELECT f.content, count(DISTINCT f.file_path)"
                     " FROM tms.table_snapshots(%s, 'real', %s) s,"
                     " LATERAL tms.table_files(%s, 'real', %s, s.snapshot_id) f GROUP BY 1",
                     (srv, name, srv, name))
    every = dict(every)
    assert (every.get("data", 0), every.get("position_deletes", 0),
            every.get("equality_deletes", 0)) == (exp["data"], exp["pos"], exp["eq"])


def test_metrics_levels_load_only_what_is_asked(pg, srv):
    m = pg.query("SELECT tms.table_metrics(%s, 'real', 'spark_v2_mor_posdeletes',"
                 " 'metadata')", (srv,))[0][0]
    assert m["level"] == "metadata" and "dataFiles" not in m and m["snapshots"] == 3
    m = pg.query("SELECT tms.table_metrics(%s, 'real', 'spark_v2_mor_posdeletes',"
                 " 'manifest_list')", (srv,))[0][0]
    assert m["level"] == "manifest_list" and m["manifests"] >= 1


def test_table_files_of_an_older_snapshot(pg, srv):
    snaps = pg.query("SELECT snapshot_id FROM tms.table_snapshots(%s, 'real',"
                     " 'java_v2_partitioned_eqdeletes') ORDER BY sequence_number", (srv,))
    first = snaps[0][0]
    n = pg.query("SELECT count(*) FROM tms.table_files(%s, 'real',"
                 " 'java_v2_partitioned_eqdeletes', %s)", (srv, first))[0][0]
    assert n >= 1
    e = pg.query_error("SELECT * FROM tms.table_files(%s, 'real',"
                       " 'java_v2_partitioned_eqdeletes', 42)", (srv,))
    assert e.pgcode == psycopg2.errorcodes.UNDEFINED_OBJECT


# ---------------------------------------------------------------------------
# authentication
# ---------------------------------------------------------------------------

def test_oauth_refresh_after_401(pg, make_catalog):
    cat = make_catalog(credential="tms-client:tms-secret")
    cat.create_namespace("auth_ns")
    name = make_server(pg, cat.uri, mapping="credential 'tms-client:tms-secret'")
    conn = pg.connect()
    try:
        assert ("auth_ns",) in pg.query("SELECT * FROM tms.list_namespaces(%s)", (name,), conn=conn)
        cat.reset_requests()
        cat.expire_tokens()
        assert ("auth_ns",) in pg.query("SELECT * FROM tms.list_namespaces(%s)", (name,), conn=conn)
        log = [(r["method"], r["path"], r["status"]) for r in cat.requests()["requests"]]
        ns_path = "/v1/%s/namespaces" % cat.prefix
        assert log == [("GET", ns_path, 401), ("POST", "/v1/oauth/tokens", 200),
                       ("GET", ns_path, 200)], log
    finally:
        conn.close()


def test_wrong_secret_is_an_authorization_error(pg, make_catalog):
    cat = make_catalog(credential="tms-client:tms-secret")
    name = make_server(pg, cat.uri, mapping="credential 'tms-client:wrong-s3cret'")
    e = pg.query_error("SELECT * FROM tms.list_namespaces(%s)", (name,))
    assert e.pgcode == psycopg2.errorcodes.INVALID_AUTHORIZATION_SPECIFICATION
    text = "%s %s %s" % (e.diag.message_primary, e.diag.message_detail, e.diag.message_hint)
    assert "wrong-s3cret" not in text


def test_static_token(pg, make_catalog):
    cat = make_catalog(static_token="fixed-token-123")
    cat.create_namespace("tok_ns")
    ok = make_server(pg, cat.uri, mapping="token 'fixed-token-123'")
    assert ("tok_ns",) in pg.query("SELECT * FROM tms.list_namespaces(%s)", (ok,))
    none = make_server(pg, cat.uri)
    e = pg.query_error("SELECT * FROM tms.list_namespaces(%s)", (none,))
    assert e.pgcode == psycopg2.errorcodes.INVALID_AUTHORIZATION_SPECIFICATION


# ---------------------------------------------------------------------------
# faults
# ---------------------------------------------------------------------------

@pytest.fixture
def fault_catalog(make_catalog):
    cat = make_catalog()
    cat.create_namespace("f_ns")
    return cat


def test_catalog_500_is_a_clean_error(pg, fault_catalog):
    name = make_server(pg, fault_catalog.uri)
    pg.query("SELECT * FROM tms.list_namespaces(%s)", (name,))      # connect + cache
    fault_catalog.fault(r"/namespaces$", status=500, count=1, method="GET")
    e = pg.query_error("SELECT * FROM tms.list_namespaces(%s)", (name,))
    assert e.pgcode == "HV000"
    assert "ServiceFailureException: injected fault" in e.diag.message_detail
    assert "500" in e.diag.message_primary


def test_catalog_503_retried_when_retries_allowed(pg, fault_catalog):
    name = make_server(pg, fault_catalog.uri, retries="2")
    pg.query("SELECT * FROM tms.list_namespaces(%s)", (name,))
    fault_catalog.reset_requests()
    fault_catalog.fault(r"/namespaces$", status=503, count=2, method="GET")
    assert ("f_ns",) in pg.query("SELECT * FROM tms.list_namespaces(%s)", (name,))
    statuses = [r["status"] for r in fault_catalog.requests(r"/namespaces$")["requests"]]
    assert statuses == [503, 503, 200]


@pytest.mark.parametrize("status", [503, 429])
@pytest.mark.parametrize("form", ["seconds", "http-date"])
def test_refusal_waits_for_its_retry_after(pg, fault_catalog, status, form):
    """A 503 or 429 that says Retry-After is retried no sooner than it
    asks, whether it gives seconds or an HTTP date (RFC 9110 10.2.3); the
    backoff alone would retry after 200-300 ms."""
    name = make_server(pg, fault_catalog.uri, retries="2")
    pg.query("SELECT * FROM tms.list_namespaces(%s)", (name,))
    fault_catalog.reset_requests()
    if form == "seconds":
        value = "2"
    else:
        value = email.utils.formatdate(time.time() + 3, usegmt=True)
    fault_catalog.fault(r"/namespaces$", status=status, count=1, method="GET",
                        headers={"Retry-After": value})
    assert ("f_ns",) in pg.query("SELECT * FROM tms.list_namespaces(%s)", (name,))
    reqs = fault_catalog.requests(r"/namespaces$")["requests"]
    assert [r["status"] for r in reqs] == [status, 200]
    waited = reqs[1]["time"] - reqs[0]["time"]
    sys.stderr.write("%d Retry-After %r: retried after %.3f s\n" % (status, value, waited))
    if form == "seconds":
        assert 1.9 <= waited < 10
    else:
        # not before the date (the catalog logs on this machine's clock; the
        # date has whole seconds, 2 to 3 s after it was made, however late
        # the first request came), and far less than the one-minute cap
        due = email.utils.parsedate_to_datetime(value).timestamp()
        assert reqs[1]["time"] >= due - 0.05 and waited < 10, (reqs, due)


def test_retry_after_wait_ends_at_a_cancel(pg, fault_catalog):
    """The wait a Retry-After asks for (an hour, capped at a minute) ends
    at the statement timeout, a cancel, like any network wait."""
    name = make_server(pg, fault_catalog.uri, retries="2")
    conn = pg.connect()
    try:
        pg.query("SELECT * FROM tms.list_namespaces(%s)", (name,), conn=conn)
        fault_catalog.fault(r"/namespaces$", status=503, count=1, method="GET",
                            headers={"Retry-After": "3600"})
        pg.query("SET statement_timeout = '1s'", conn=conn)
        t0 = time.monotonic()
        e = pg.query_error("SELECT * FROM tms.list_namespaces(%s)", (name,), conn=conn)
        took = time.monotonic() - t0
        print("the Retry-After wait ended after %.2f s" % took)
        assert e.pgcode == psycopg2.errorcodes.QUERY_CANCELED, e
        assert took < 10, took
        pg.query("RESET statement_timeout", conn=conn)
        assert ("f_ns",) in pg.query("SELECT * FROM tms.list_namespaces(%s)", (name,), conn=conn)
    finally:
        conn.close()


def fault_fired(catalog, fault_id):
    """Await the arrival at the catalog of the request a count=1 fault
    matches (the fault is then no longer armed)."""
    wait_for(lambda: fault_id not in catalog.armed_faults(), timeout=30,
             what="the request to reach the catalog")


def test_hang_ends_at_the_request_timeout(pg, fault_catalog):
    """The catalog takes the request and does not answer for 20 s: the query
    fails with a timeout.  Without the 1 s request timeout it would succeed
    when the hang ends; and the request did reach the catalog (the timeout
    is not a connect failure)."""
    name = make_server(pg, fault_catalog.uri, request_timeout="1s")
    pg.query("SELECT * FROM tms.list_namespaces(%s)", (name,))
    fid = fault_catalog.fault(r"/namespaces$", action="hang", seconds=20, method="GET")
    e = pg.query_error("SELECT * FROM tms.list_namespaces(%s)", (name,))
    assert e.pgcode == psycopg2.errorcodes.CONNECTION_FAILURE
    assert "timed out" in e.diag.message_primary
    fault_fired(fault_catalog, fid)


def test_malformed_body(pg, fault_catalog):
    name = make_server(pg, fault_catalog.uri)
    pg.query("SELECT * FROM tms.list_namespaces(%s)", (name,))
    fault_catalog.fault(r"/namespaces$", action="malformed", method="GET")
    e = pg.query_error("SELECT * FROM tms.list_namespaces(%s)", (name,))
    assert e.pgcode == psycopg2.errorcodes.PROTOCOL_VIOLATION
    fault_catalog.fault(r"/namespaces$", action="malformed", body='{"namespaces": [[1]]}',
                        method="GET")
    e = pg.query_error("SELECT * FROM tms.list_namespaces(%s)", (name,))
    assert e.pgcode == psycopg2.errorcodes.PROTOCOL_VIOLATION


def test_connection_closed(pg, fault_catalog):
    name = make_server(pg, fault_catalog.uri)
    pg.query("SELECT * FROM tms.list_namespaces(%s)", (name,))
    # libcurl retries once by itself when a reused connection turns out dead
    fault_catalog.fault(r"/namespaces$", action="close", method="GET", count=2)
    e = pg.query_error("SELECT * FROM tms.list_namespaces(%s)", (name,))
    assert e.pgcode == psycopg2.errorcodes.SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION


def test_cancel_during_a_hanging_request(pg, fault_catalog):
    name = make_server(pg, fault_catalog.uri, request_timeout="60s")
    conn = pg.connect()
    try:
        pg.query("SELECT * FROM tms.list_namespaces(%s)", (name,), conn=conn)
        pid = pg.query("SELECT pg_backend_pid()", conn=conn)[0][0]
        fid = fault_catalog.fault(r"/namespaces$", action="hang", seconds=60, method="GET")
        result = {}

        def run():
            try:
                pg.query("SELECT * FROM tms.list_namespaces(%s)", (name,), conn=conn)
            except psycopg2.Error as e:
                result["error"] = e
            result["ended"] = time.monotonic()

        th = threading.Thread(target=run)
        th.start()
        # cancel once the request hangs at the catalog
        fault_fired(fault_catalog, fid)
        cancel_at = time.monotonic()
        assert pg.query("SELECT pg_cancel_backend(%s)", (pid,))[0][0]
        # the hang lasts 60 s: ending well before it means the cancel
        # interrupted the request
        th.join(30)
        assert not th.is_alive(), "the query outlived its cancel"
        assert result["error"].pgcode == psycopg2.errorcodes.QUERY_CANCELED
        print("cancel took %.0f ms" % ((result["ended"] - cancel_at) * 1000))
        # the backend is still usable, the cached connection too
        fault_catalog.clear_faults()
        assert ("f_ns",) in pg.query("SELECT * FROM tms.list_namespaces(%s)", (name,), conn=conn)
    finally:
        conn.close()


# ---------------------------------------------------------------------------
# memory of the io layer: its context, scopes, the cached connection
# ---------------------------------------------------------------------------

def io_contexts(pg, conn):
    """This backend's "tms io" context (parent, used bytes) and the number
    of "tms io scope" contexts alive."""
    row = pg.query("SELECT parent, total_bytes - free_bytes FROM pg_backend_memory_contexts"
                   " WHERE name = 'tms io'", conn=conn)
    scopes = pg.query("SELECT count(*) FROM pg_backend_memory_contexts"
                      " WHERE name = 'tms io scope'", conn=conn)[0][0]
    return (row[0] if row else None), scopes


def test_io_memory_shows_in_its_context(pg, srv):
    """What the io layer keeps (the cached catalog connection with its copy
    of the loaded table) is in the memory context "tms io", a child of
    TopMemoryContext; the scope of the call is gone after it."""
    conn = pg.connect()
    try:
        md = pg.query("SELECT tms.table_metadata(%s, 'real', 'spark_v2_mor_posdeletes')::text",
                      (srv,), conn=conn)[0][0]
        (parent, used), scopes = io_contexts(pg, conn)
        assert parent == "TopMemoryContext"
        # the table cache holds the metadata JSON (and its ETag) there
        assert used > len(md), (used, len(md))
        assert scopes == 0
    finally:
        conn.close()


def test_error_caught_in_a_subtransaction_leaves_no_scope(pg, srv):
    """An error a PL/pgSQL handler catches (a subtransaction rolled back,
    the caller's memory not reset) leaves no scope current: the next calls
    on the backend work, and no "tms io scope" context is left."""
    conn = pg.connect()
    try:
        pg.query("DO $$ BEGIN PERFORM tms.table_metadata(%s, 'real', 'no_such_table');"
                 " EXCEPTION WHEN undefined_table THEN NULL; END $$" % quote(srv), conn=conn)
        pg.query("DO $$ BEGIN PERFORM * FROM tms.list_tables(%s, 'no_such_ns');"
                 " EXCEPTION WHEN invalid_schema_name THEN NULL; END $$" % quote(srv), conn=conn)
        assert io_contexts(pg, conn)[1] == 0
        md = pg.query("SELECT tms.table_metadata(%s, 'real', 'spark_v2_mor_posdeletes')",
                      (srv,), conn=conn)[0][0]
        assert md["format-version"] == 2
        assert io_contexts(pg, conn)[1] == 0
    finally:
        conn.close()


def test_timeout_in_a_scoped_call_keeps_the_cached_connection(pg, make_catalog, real_tables):
    """A statement timeout ends table_metadata while its request hangs,
    after the call fetched a new OAuth2 token for the cached catalog
    connection: the error frees the call's scope, the token (allocated
    during that call) survives it, and the next call on the same backend
    and connection succeeds with that token and the cached table (one 304,
    no new token).  A token allocated from the call's scope would be
    freed (wiped) by the error: the next call would send a garbage token
    and fetch another, or crash the backend."""
    cat = make_catalog(credential="tms-client:tms-secret")
    loc = real_tables["spark_v1_gzip_metadata"]["metadata_location"]
    cat.register("m_ns", "t", loc)
    name = make_server(pg, cat.uri, mapping="credential 'tms-client:tms-secret'",
                       request_timeout="60s")
    conn = pg.connect()
    try:
        q = "SELECT tms.table_metadata(%s, 'm_ns', 't')"
        md = pg.query(q, (name,), conn=conn)[0][0]
        # the next load: a 401 (a new token is fetched in the call), then a hang
        cat.fault(r"/tables/t$", action="status", status=401, method="GET",
                  body='{"error": {"message": "expired", "type": "NotAuthorizedException",'
                       ' "code": 401}}')
        hang = cat.fault(r"/tables/t$", action="hang", seconds=60, method="GET")
        pg.query("SET statement_timeout = '3s'", conn=conn)
        e = pg.query_error(q, (name,), conn=conn)
        assert e.pgcode == psycopg2.errorcodes.QUERY_CANCELED
        assert hang not in cat.armed_faults(), "the hang was reached"
        pg.query("RESET statement_timeout", conn=conn)
        assert io_contexts(pg, conn)[1] == 0, "the scope went with the error"
        log = [(r["method"], r["path"].rsplit("/", 1)[-1], r["status"])
               for r in cat.requests()["requests"]]
        assert ("POST", "tokens", 200) in log, log
        cat.reset_requests()
        assert pg.query(q, (name,), conn=conn)[0][0] == md
        log = [(r["method"], r["path"].rsplit("/", 1)[-1], r["status"])
               for r in cat.requests()["requests"]]
        assert log == [("GET", "t", 304)], log
    finally:
        conn.close()


def test_dead_port_fails_fast(pg):
    """Nobody listens: the refused connection is the error at once (no
    retries with retries=0), not a connect timeout."""
    name = make_server(pg, "http://127.0.0.1:%d" % world.free_port())
    e = pg.query_error("SELECT * FROM tms.list_namespaces(%s)", (name,))
    assert e.pgcode == psycopg2.errorcodes.SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION
    assert "timed out" not in e.diag.message_primary, e.diag.message_primary


def test_alter_server_takes_effect(pg, fault_catalog):
    """A cached connection is dropped when the server's options change."""
    name = make_server(pg, fault_catalog.uri, request_timeout="30s")
    conn = pg.connect()
    try:
        pg.query("SELECT * FROM tms.list_namespaces(%s)", (name,), conn=conn)
        pg.query("ALTER SERVER %s OPTIONS (SET request_timeout '1s')" % name)
        # a 10 s hang: with the old 30 s timeout the query would succeed when
        # it ends, so a timeout error means the new 1 s took effect
        fid = fault_catalog.fault(r"/namespaces$", action="hang", seconds=10, method="GET")
        e = pg.query_error("SELECT * FROM tms.list_namespaces(%s)", (name,), conn=conn)
        assert e.pgcode == psycopg2.errorcodes.CONNECTION_FAILURE
        assert "timed out" in e.diag.message_primary
        fault_fired(fault_catalog, fid)
    finally:
        conn.close()



def test_allowed_hosts_limit_catalog_and_storage(pg, srv, catalog, s3, real_tables):
    """tms.allowed_hosts: a catalog on 127.0.0.1 is refused (42501, before
    any request reaches it) when the setting lists only other hosts, and
    reached when it lists its address, its network, or its address and
    port; the storage the catalog sends tms to is checked as well."""
    port = int(catalog.uri.rsplit(":", 1)[1])
    s3_port = int(s3.endpoint.rsplit(":", 1)[1])
    in_s3 = sorted(n for n, t in real_tables.items() if t["storage"] == "s3")
    assert in_s3, real_tables
    table = in_s3[0]
    conn = pg.connect()
    conn.autocommit = True
    try:
        def with_list(value, sql):
            with conn.cursor() as cur:
                cur.execute("SET tms.allowed_hosts = %s", (value,))
                cur.execute(sql, (srv, table))
                return cur.fetchall()

        list_sql = "SELECT * FROM tms.list_namespaces(%s) WHERE %s IS NOT NULL"
        metrics_sql = "SELECT tms.table_metrics(%s, 'real', %s)"
        catalog.reset_requests()
        with pytest.raises(psycopg2.Error) as ei:
            with_list("10.9.9.9, catalog.example.com", list_sql)
        e = ei.value
        assert e.pgcode == psycopg2.errorcodes.INSUFFICIENT_PRIVILEGE, e
        assert "is not allowed by tms.allowed_hosts" in e.diag.message_primary
        assert "127.0.0.1" in e.diag.message_primary
        assert "Address 127.0.0.1 port %d is not listed" % port in e.diag.message_detail
        # refused before connecting: the catalog saw nothing
        assert catalog.requests(r"^/v1")["requests"] == []

        for allowed in ("127.0.0.1", "10.0.0.0/8, 127.0.0.0/8",
                        "127.0.0.1:%d, 127.0.0.1:%d" % (port, s3_port),
                        "::ffff:127.0.0.1"):
            names = with_list(allowed, list_sql)
            assert ("real",) in names, (allowed, names)
            # the table's files come from storage on another port: allowed too
            m = with_list(allowed, metrics_sql)
            assert m[0][0]["snapshots"] >= 1, (allowed, m)

        # the catalog's port only: the catalog answers, its storage is refused
        with pytest.raises(psycopg2.Error) as ei:
            with_list("127.0.0.1:%d" % port, metrics_sql)
        assert ei.value.pgcode == psycopg2.errorcodes.INSUFFICIENT_PRIVILEGE, ei.value
        # (the storage layer says which file it could not read, and why)
        assert "is not allowed by tms.allowed_hosts" in str(ei.value), ei.value
        assert "port %d is not listed" % s3_port in str(ei.value), ei.value
    finally:
        conn.close()
