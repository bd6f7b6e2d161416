#!/usr/bin/python3
"""
server.py -- an Iceberg REST catalog for the tms tests.

No released Iceberg REST catalog can be installed on the test machines, so
this is a small one that follows the Iceberg REST catalog OpenAPI spec
(https://github.com/apache/iceberg/blob/main/open-api/rest-catalog-open-api.yaml)
for everything it serves.  Table pointers live in PostgreSQL in the layout of
Iceberg's JdbcCatalog (schema version V1: iceberg_tables with iceberg_type,
iceberg_namespace_properties), metadata files go to file:// or s3:// storage.

    /usr/bin/python3 test/catalog/server.py --port PORT --dsn DSN \\
        --warehouse URI [--catalog-name NAME] [--token-credential ID:SECRET]
        [--token-ttl SECONDS] [--static-token TOKEN] [--admin-token TOKEN]
        [--s3-endpoint URL --s3-access-key-id ID --s3-secret-access-key KEY
         --s3-region REGION] [--azure-endpoint URL]
         [--gcs-endpoint URL --gcs-token TOKEN] [--file-root DIR]
        [--sigv4-region REGION [--sigv4-service NAME]
         --sigv4-key ID:SECRET[:SESSION_TOKEN] ...]
        [--idempotency-key-lifetime DURATION] [--processes N]

--processes N (default 1) serves from N pre-forked processes
(httpserve.serve_processes), each with its own PostgreSQL connections, as
a catalog serving on many threads does.  What they share lives in
PostgreSQL: pointers and namespaces, read for every request (a commit
answered by one process is seen by the next load any other serves).  What
lives in a process's memory is kept correct or refused: the request log is
each process's own, and GET/DELETE /admin/requests gathers/resets all of
them (through each process's private port); every other admin endpoint
that changes state (faults, vending, table-config, config, sigv4,
idempotency, expire-tokens) answers 409, and --token-credential and
--idempotency-key-lifetime are refused at start (issued tokens and
remembered keys would be one process's); --static-token and --sigv4-* are
stateless and served.  Caches (ETags, encoded metadata by file identity)
are per process and keyed by what they describe.

Idempotency keys (REST spec, ConfigResponse.idempotency-key-lifetime):
with --idempotency-key-lifetime (an ISO-8601 duration such as PT30M) or
after POST /admin/idempotency, GET /v1/config advertises the lifetime at
its top level, and a mutating request (POST, PUT, DELETE; not the token
endpoint) carrying an Idempotency-Key header is answered, while that key
is remembered (the lifetime from its first answer), with the status, body
and headers of the first answer to it, without being applied again (a
5xx answer is not remembered; a repeat that arrives while the first is
still being served waits for it).  Every request's Idempotency-Key is in
the request log, advertised or not; a replayed answer is logged with
fault "idempotent-replay".

It listens on 127.0.0.1 only, prints "catalog listening on http://127.0.0.1:PORT"
on stdout once it accepts connections, and exits cleanly on SIGTERM/SIGINT
(the HTTP scaffolding is test/httpserve.py, shared with the other servers).

Served (prefix = the catalog name, advertised as overrides.prefix; requests
without a prefix are accepted too):
  GET  /v1/config                      POST /v1/oauth/tokens
  GET/POST /v1/{p}/namespaces          GET/HEAD/DELETE /v1/{p}/namespaces/{ns}
  POST /v1/{p}/namespaces/{ns}/properties
  GET/POST /v1/{p}/namespaces/{ns}/tables
  GET/HEAD/POST/DELETE /v1/{p}/namespaces/{ns}/tables/{t}
  POST /v1/{p}/namespaces/{ns}/register     POST /v1/{p}/tables/rename
  POST /v1/{p}/namespaces/{ns}/tables/{t}/metrics (accepted, ignored)
  GET  /v1/{p}/namespaces/{ns}/tables/{t}/credentials (loadCredentials)
  POST /v1/{p}/transactions/commit

Test-only admin endpoints (outside /v1; open unless --admin-token is given,
then they need the header "X-Admin-Token: TOKEN"):
  POST   /admin/faults    {"match": {"method": "GET", "path_regex": "...",
                                     "conditional": false},
                           "count": N, "action": "status|hang|late|lost|malformed|close|interpose",
                           "status": 503, "seconds": 5, "body": "...",
                           "body_repeat": {"head": "", "unit": "x", "count": n,
                                           "tail": ""},
                           "encoding": "gzip",
                           "headers": {...}, "at": "request"}   -> {"id": n}
                          conditional (optional): true matches only
                          requests carrying If-None-Match, false only those
                          without it (a conditional refresh versus a full
                          load of the same table).
                          status: answer with that status and body (default:
                          the error model); hang: sleep `seconds`, then serve
                          normally; late: serve normally (the request takes
                          effect), then hold the answer `seconds` before
                          sending it; lost: serve normally (the request
                          takes effect, and its answer is what an
                          Idempotency-Key remembers), then answer `status`
                          with the error model instead, as if the real
                          answer were lost on the way; malformed: 200 with a truncated JSON
                          body (or `body`); close: close the connection
                          unanswered.  body_repeat builds the body of status
                          and malformed as head + unit * count + tail (huge
                          bodies without sending them here); encoding "gzip"
                          sends that body gzip-compressed with
                          Content-Encoding: gzip.
                          "at": "pointer-swap" (hang only) fires inside a
                          commit, after the new metadata file is written and
                          before the compare-and-swap UPDATE.
                          interpose: {"commits": [{"requirements": [...],
                          "updates": [...]}, ...], "table": {"namespace":
                          [...], "name": "t"}}: a deterministic concurrent
                          writer.  When a matching request arrives, each
                          commit is first applied to the table (the one the
                          request's path names, or "table"), exactly as a
                          POST to that table would be, then the request is
                          served normally.  A commit request that asserts
                          the ref the interposed commit moved
                          (assert-ref-snapshot-id) then fails with 409
                          CommitFailedException.  Each interposed commit is
                          logged as a request of its own (method POST, the
                          table's path, its status, fault "interposed")
                          just before the request it preceded.
  GET    /admin/faults    the armed faults
  DELETE /admin/faults    disarm all
  GET    /admin/requests  {"requests": [...], "counts": {"METHOD path": {"status": n}}}
                          (?path_regex= filters)
  DELETE /admin/requests  reset the log and counters
  POST   /admin/expire-tokens   make every issued token expire now
  POST   /admin/table-config {"namespace": ["ns"], "table": "t", "config": {...}}
                          the LoadTableResult.config of that table from now
                          on (instead of the vended S3 settings), as a
                          hostile or odd catalog would vend it
  DELETE /admin/table-config   back to the default config for every table
  POST   /admin/vending   {"gate": "http://127.0.0.1:P", "endpoint": URL, "ttl": 5,
                           "expiry_visible": true, "credentials_endpoint": true}:
                          every load (and loadCredentials) of a table in S3
                          vends new temporary credentials (key, secret,
                          session token) in storage-credentials, registered
                          with the S3 gate (POST gate/admin/credentials) to
                          expire after ttl seconds, with
                          s3.session-token-expires-at-ms unless
                          expiry_visible is false, and endpoint (default:
                          the gate) as s3.endpoint; credentials_endpoint
                          false leaves loadCredentials out of /v1/config's
                          endpoints.  A table in GCS gets an OAuth2 token
                          (gcs.oauth2.token) registered with the GCS test
                          server at gate; a table in Azure an account SAS
                          (adls.sas-token.<account>, with
                          adls.sas-token-expires-at-ms.<account> unless
                          expiry_visible is false) signed with the
                          catalog's Azure key, which Azurite refuses once
                          its expiry (se) has passed
  GET    /admin/vending   {"issued": [{access_key_id, expires_at, via, issued_at}]}
  DELETE /admin/vending   back to the catalog's own S3 settings
  POST   /admin/config    {"defaults": {...}, "overrides": {...}}: extra
                          properties in the answer of GET /v1/config
  DELETE /admin/config    no extra properties
  POST   /admin/sigv4     {"region": "eu-west-1", "service": "glue",
                           "keys": {"AKID": {"secret": "...",
                                             "session_token": "..."}},
                           "max_skew_seconds": 900, "clock_offset_seconds": 0,
                           "error_shape": "aws"}
                          verify the AWS SigV4 signature of every /v1 request
                          from now on (sigv4.py; the OAuth2 token endpoint is
                          exempt), as AWS Glue's and S3 Tables' endpoints do;
                          a bearer token is then read from
                          Original-Authorization.  A refused request gets
                          the status, type and message AWS uses: "aws" shape
                          {"message"} with x-amzn-ErrorType, "iceberg" shape
                          the error model.  clock_offset_seconds shifts this
                          server's clock (a skewed client)
  GET    /admin/sigv4     what is verified (no secrets), or {}
  DELETE /admin/sigv4     stop verifying
  POST   /admin/idempotency {"lifetime": "PT30M"}: advertise and honour
                          Idempotency-Key from now on (see above)
  GET    /admin/idempotency {"lifetime": "PT30M" or null, "keys": n remembered}
  DELETE /admin/idempotency stop advertising and honouring; forget every key
"""

import argparse
import base64
import bisect
import datetime
import gzip
import hashlib
import json
import os
import re
import secrets
import sys
import threading
import time
import urllib.parse
import urllib.request
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.append(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import psycopg2  # noqa: E402
import psycopg2.errorcodes  # noqa: E402

import httpserve  # noqa: E402  (the test world's HTTP scaffolding)
import sigv4  # noqa: E402
import storage as storage_mod  # noqa: E402
import tablemeta  # noqa: E402
from tablemeta import CatalogError, bad_request  # noqa: E402

ENDPOINTS = [
    "GET /v1/{prefix}/namespaces",
    "POST /v1/{prefix}/namespaces",
    "GET /v1/{prefix}/namespaces/{namespace}",
    "HEAD /v1/{prefix}/namespaces/{namespace}",
    "DELETE /v1/{prefix}/namespaces/{namespace}",
    "POST /v1/{prefix}/namespaces/{namespace}/properties",
    "GET /v1/{prefix}/namespaces/{namespace}/tables",
    "POST /v1/{prefix}/namespaces/{namespace}/tables",
    "GET /v1/{prefix}/namespaces/{namespace}/tables/{table}",
    "HEAD /v1/{prefix}/namespaces/{namespace}/tables/{table}",
    "POST /v1/{prefix}/namespaces/{namespace}/tables/{table}",
    "DELETE /v1/{prefix}/namespaces/{namespace}/tables/{table}",
    "POST /v1/{prefix}/namespaces/{namespace}/register",
    "POST /v1/{prefix}/namespaces/{namespace}/tables/{table}/metrics",
    "GET /v1/{prefix}/namespaces/{namespace}/tables/{table}/credentials",
    "POST /v1/{prefix}/tables/rename",
    "POST /v1/{prefix}/transactions/commit",
]

DEFAULT_PAGE_SIZE = 100


def not_found(type_, msg):
    return CatalogError(404, type_, msg)


def no_such_namespace(ns):
    return not_found("NoSuchNamespaceException",
                     "Namespace does not exist: %s" % ".".join(ns))


def no_such_table(ns, name):
    return not_found("NoSuchTableException",
                     "Table does not exist: %s.%s" % (".".join(ns), name))


def db_message(e):
    """The database's own message for a psycopg2 error."""
    diag = getattr(e, "diag", None)
    if diag is not None and diag.message_primary:
        return diag.message_primary
    return str(e).strip()


# ---------------------------------------------------------------------------
# PostgreSQL: the JdbcCatalog layout
# ---------------------------------------------------------------------------

class Database:
    """Table pointers and namespace properties in PostgreSQL, in the tables
    and columns Iceberg's JdbcCatalog uses (JdbcUtil, schema version V1).

    Connections come from two small pools; every method runs one
    transaction, and the reads of one statement (a table's pointer, a
    page of names: what a refresh asks for most) run on connections in
    autocommit, one round trip each."""

    def __init__(self, dsn, catalog_name):
        self.dsn = dsn
        self.catalog = catalog_name
        self.pool = []
        self.read_pool = []
        # (connection, cursor) pairs of location(): a cursor kept open
        self.location_pool = []
        self.lock = threading.Lock()
        self.ensure_schema()

    def _get(self, pool, autocommit):
        """A connection: (conn, pooled), from pool when it has one, else new."""
        with self.lock:
            if pool:
                return pool.pop(), True
        conn = psycopg2.connect(self.dsn)
        if autocommit:
            conn.autocommit = True
            with conn.cursor() as cur:
                # planned once per connection: a 304 is mostly this lookup
                cur.execute("PREPARE pointer (text, text, text) AS"
                            " SELECT metadata_location, previous_metadata_location"
                            "   FROM iceberg_tables WHERE catalog_name = $1"
                            "    AND table_namespace = $2 AND table_name = $3"
                            "    AND (iceberg_type = 'TABLE' OR iceberg_type IS NULL)")
                cur.execute(self.PREPARE_LOCATION)
        return conn, False

    # what a load compares with its If-None-Match: the location alone, by
    # the primary key's index, planned once per connection
    PREPARE_LOCATION = ("PREPARE location (text, text, text) AS"
                        " SELECT metadata_location FROM iceberg_tables"
                        " WHERE catalog_name = $1 AND table_namespace = $2 AND table_name = $3"
                        "   AND (iceberg_type = 'TABLE' OR iceberg_type IS NULL)")

    def _put(self, pool, conn):
        if conn.closed:
            return
        with self.lock:
            if len(pool) < 8:
                pool.append(conn)
                return
        conn.close()

    def _drop_pools(self):
        """Close every pooled connection: after one was found dead (the
        server restarted, or terminated its backends), the others are too."""
        with self.lock:
            conns, self.pool[:], self.read_pool[:] = self.pool + self.read_pool, [], []
            conns += [c for c, _ in self.location_pool]
            self.location_pool[:] = []
        for c in conns:
            c.close()

    def _on_connection(self, fn, pool, autocommit):
        """Run fn(cursor) on a connection of pool (one transaction, or one
        autocommit statement).  A pooled connection that turns out dead is
        dropped with the whole pool and fn runs once more on a new one; an
        error of a new connection is the database's, and raised."""
        for attempt in (1, 2):
            conn, pooled = self._get(pool, autocommit)
            try:
                if autocommit:
                    with conn.cursor() as cur:
                        result = fn(cur)
                else:
                    with conn:
                        with conn.cursor() as cur:
                            result = fn(cur)
            except psycopg2.OperationalError:
                conn.close()
                if pooled and attempt == 1:
                    self._drop_pools()
                    continue
                raise
            except Exception:
                self._put(pool, conn)
                raise
            self._put(pool, conn)
            return result

    def read(self, fn):
        """Run fn(cursor), one statement that only reads, on a connection
        in autocommit: one round trip to PostgreSQL instead of three
        (BEGIN, the statement, COMMIT), and the same snapshot rule (a
        statement sees what was committed when it started)."""
        return self._on_connection(fn, self.read_pool, True)

    def run(self, fn):
        """Run fn(cursor) in one transaction and return its result."""
        return self._on_connection(fn, self.pool, False)

    def ensure_schema(self):
        """Create iceberg_tables and iceberg_namespace_properties if missing
        (JdbcCatalog's DDL, V0 then the V1 iceberg_type column)."""
        def ddl(cur):
            cur.execute("SELECT pg_advisory_xact_lock(7346118)")
            cur.execute("SELECT to_regclass('iceberg_tables')")
            if cur.fetchone()[0] is None:
                cur.execute(
                    "CREATE TABLE iceberg_tables("
                    "catalog_name VARCHAR(255) NOT NULL,"
                    "table_namespace VARCHAR(255) NOT NULL,"
                    "table_name VARCHAR(255) NOT NULL,"
                    "metadata_location VARCHAR(1000),"
                    "previous_metadata_location VARCHAR(1000),"
                    "PRIMARY KEY (catalog_name, table_namespace, table_name))")
            cur.execute(
                "SELECT 1 FROM pg_attribute WHERE attrelid = 'iceberg_tables'::regclass"
                " AND attname = 'iceberg_type' AND NOT attisdropped")
            if cur.fetchone() is None:
                cur.execute("ALTER TABLE iceberg_tables ADD COLUMN iceberg_type VARCHAR(5)")
            cur.execute("SELECT to_regclass('iceberg_namespace_properties')")
            if cur.fetchone()[0] is None:
                cur.execute(
                    "CREATE TABLE iceberg_namespace_properties("
                    "catalog_name VARCHAR(255) NOT NULL,"
                    "namespace VARCHAR(255) NOT NULL,"
                    "property_key VARCHAR(255),"
                    "property_value VARCHAR(1000),"
                    "PRIMARY KEY (catalog_name, namespace, property_key))")
        self.run(ddl)

    # -- namespaces -----------------------------------------------------------

    @staticmethod
    def _like_prefix(ns_str):
        return ns_str.replace("!", "!!").replace("%", "!%").replace("_", "!_") + ".%"

    def all_namespaces(self):
        """Every namespace string known (from properties and from tables)."""
        def q(cur):
            cur.execute("SELECT DISTINCT namespace FROM iceberg_namespace_properties"
                        " WHERE catalog_name = %s"
                        " UNION SELECT DISTINCT table_namespace FROM iceberg_tables"
                        " WHERE catalog_name = %s", (self.catalog, self.catalog))
            return [r[0] for r in cur.fetchall()]
        return self.run(q)

    def namespace_exists(self, ns_str):
        """JdbcCatalog's rule: the namespace or one below it appears in the
        properties table or in a table's namespace."""
        like = self._like_prefix(ns_str)

        def q(cur):
            cur.execute("SELECT 1 FROM iceberg_namespace_properties WHERE catalog_name = %s"
                        " AND (namespace = %s OR namespace LIKE %s ESCAPE '!') LIMIT 1",
                        (self.catalog, ns_str, like))
            if cur.fetchone():
                return True
            cur.execute("SELECT 1 FROM iceberg_tables WHERE catalog_name = %s"
                        " AND (table_namespace = %s OR table_namespace LIKE %s ESCAPE '!') LIMIT 1",
                        (self.catalog, ns_str, like))
            return cur.fetchone() is not None
        return self.run(q)

    def namespace_properties(self, ns_str):
        def q(cur):
            cur.execute("SELECT property_key, property_value FROM iceberg_namespace_properties"
                        " WHERE catalog_name = %s AND namespace = %s",
                        (self.catalog, ns_str))
            return {k: v for k, v in cur.fetchall()}
        return self.run(q)

    def create_namespace(self, ns_str, props):
        """Insert the namespace's properties ({"exists": "true"} when there
        are none, as JdbcCatalog does)."""
        props = props or {"exists": "true"}

        def q(cur):
            for k, v in props.items():
                cur.execute("INSERT INTO iceberg_namespace_properties"
                            " (catalog_name, namespace, property_key, property_value)"
                            " VALUES (%s, %s, %s, %s)", (self.catalog, ns_str, k, v))
        self.run(q)

    def update_namespace(self, ns_str, updates, removals):
        """Set and remove properties; return (updated, removed, missing)."""
        def q(cur):
            cur.execute("SELECT property_key FROM iceberg_namespace_properties"
                        " WHERE catalog_name = %s AND namespace = %s FOR UPDATE",
                        (self.catalog, ns_str))
            have = {r[0] for r in cur.fetchall()}
            removed = [k for k in removals if k in have]
            missing = [k for k in removals if k not in have]
            for k in removed:
                cur.execute("DELETE FROM iceberg_namespace_properties WHERE catalog_name = %s"
                            " AND namespace = %s AND property_key = %s",
                            (self.catalog, ns_str, k))
            for k, v in updates.items():
                cur.execute("INSERT INTO iceberg_namespace_properties"
                            " (catalog_name, namespace, property_key, property_value)"
                            " VALUES (%s, %s, %s, %s) ON CONFLICT (catalog_name, namespace,"
                            " property_key) DO UPDATE SET property_value = EXCLUDED.property_value",
                            (self.catalog, ns_str, k, v))
            return sorted(updates), removed, missing
        return self.run(q)

    def drop_namespace(self, ns_str):
        def q(cur):
            cur.execute("DELETE FROM iceberg_namespace_properties"
                        " WHERE catalog_name = %s AND namespace = %s", (self.catalog, ns_str))
        self.run(q)

    # -- tables ---------------------------------------------------------------

    def list_tables(self, ns_str, after=None, limit=None):
        """The namespace's table names in order: all of them, or at most
        limit names after the name `after`, read by key from the primary
        key's index (a page costs its own size, whatever the namespace's)."""
        def q(cur):
            cur.execute("SELECT table_name FROM iceberg_tables WHERE catalog_name = %s"
                        " AND table_namespace = %s AND (iceberg_type = 'TABLE'"
                        " OR iceberg_type IS NULL)"
                        " AND (%s::text IS NULL OR table_name > %s)"
                        " ORDER BY table_name LIMIT %s",
                        (self.catalog, ns_str, after, after, limit))
            return [r[0] for r in cur.fetchall()]
        return self.read(q)

    def get_table(self, ns_str, name):
        """Return (metadata_location, previous_metadata_location) or None."""
        def q(cur):
            cur.execute("EXECUTE pointer (%s, %s, %s)", (self.catalog, ns_str, name))
            return cur.fetchone()
        return self.read(q)

    def location(self, ns_str, name):
        """(metadata_location,) of the table, or None: the one statement of
        a load, on a pooled connection in autocommit with its cursor kept
        (what read() does, without its per-call cursor and closure: a
        refresh asks this 100,000 times).  A pooled connection found dead
        drops the pools and the statement runs once more on a new one."""
        args = (self.catalog, ns_str, name)
        for attempt in (1, 2):
            with self.lock:
                pair = self.location_pool.pop() if self.location_pool else None
            pooled = pair is not None
            if pair is None:
                conn, _ = self._get([], True)
                pair = (conn, conn.cursor())
            try:
                pair[1].execute("EXECUTE location (%s, %s, %s)", args)
                row = pair[1].fetchone()
            except psycopg2.OperationalError:
                pair[0].close()
                if pooled and attempt == 1:
                    self._drop_pools()
                    continue
                raise
            except Exception:
                self._put_location(pair)
                raise
            self._put_location(pair)
            return row

    def _put_location(self, pair):
        if pair[0].closed:
            return
        with self.lock:
            if len(self.location_pool) < 8:
                self.location_pool.append(pair)
                return
        pair[0].close()

    def insert_table(self, ns_str, name, location):
        """Insert a pointer (JdbcCatalog's create commit).  A unique violation
        becomes 409 AlreadyExistsException; any other database error (a
        trigger refusing the row, say) 409 with the database's message."""
        def q(cur):
            cur.execute("INSERT INTO iceberg_tables (catalog_name, table_namespace, table_name,"
                        " metadata_location, previous_metadata_location, iceberg_type)"
                        " VALUES (%s, %s, %s, %s, NULL, 'TABLE')",
                        (self.catalog, ns_str, name, location))
        try:
            self.run(q)
        except psycopg2.Error as e:
            if e.pgcode == psycopg2.errorcodes.UNIQUE_VIOLATION:
                raise CatalogError(409, "AlreadyExistsException",
                                   "Table already exists: %s.%s" % (ns_str, name))
            if isinstance(e, psycopg2.OperationalError):
                raise
            raise CatalogError(409, "CommitFailedException", db_message(e))

    def swap_pointer(self, ns_str, name, old, new):
        """Compare-and-swap the metadata location (JdbcCatalog's commit):
        409 when another commit won or when the database refuses."""
        def q(cur):
            cur.execute("UPDATE iceberg_tables SET metadata_location = %s,"
                        " previous_metadata_location = %s WHERE catalog_name = %s"
                        " AND table_namespace = %s AND table_name = %s AND metadata_location = %s"
                        " AND (iceberg_type = 'TABLE' OR iceberg_type IS NULL)",
                        (new, old, self.catalog, ns_str, name, old))
            return cur.rowcount
        try:
            n = self.run(q)
        except psycopg2.Error as e:
            if isinstance(e, psycopg2.OperationalError):
                raise
            raise CatalogError(409, "CommitFailedException", db_message(e))
        if n != 1:
            raise CatalogError(409, "CommitFailedException",
                               "Cannot commit %s.%s: metadata location %s has changed"
                               % (ns_str, name, old))

    def drop_table(self, ns_str, name):
        def q(cur):
            cur.execute("DELETE FROM iceberg_tables WHERE catalog_name = %s"
                        " AND table_namespace = %s AND table_name = %s"
                        " AND (iceberg_type = 'TABLE' OR iceberg_type IS NULL)",
                        (self.catalog, ns_str, name))
            return cur.rowcount
        return self.run(q)

    def rename_table(self, src_ns, src, dst_ns, dst):
        def q(cur):
            cur.execute("UPDATE iceberg_tables SET table_namespace = %s, table_name = %s"
                        " WHERE catalog_name = %s AND table_namespace = %s AND table_name = %s"
                        " AND (iceberg_type = 'TABLE' OR iceberg_type IS NULL)",
                        (dst_ns, dst, self.catalog, src_ns, src))
            return cur.rowcount
        try:
            return self.run(q)
        except psycopg2.Error as e:
            if e.pgcode == psycopg2.errorcodes.UNIQUE_VIOLATION:
                raise CatalogError(409, "AlreadyExistsException",
                                   "Table already exists: %s.%s" % (dst_ns, dst))
            if isinstance(e, psycopg2.OperationalError):
                raise
            raise CatalogError(409, "CommitFailedException", db_message(e))


# ---------------------------------------------------------------------------
# faults, request log, tokens
# ---------------------------------------------------------------------------

class Faults:
    """Armed faults: each matches method + path regex and fires count times."""

    def __init__(self):
        self.lock = threading.Lock()
        self.items = []
        self.next_id = 1

    def add(self, spec):
        action = spec.get("action", "status")
        if action not in ("status", "hang", "late", "lost", "malformed", "close",
                          "interpose"):
            raise bad_request("unknown fault action %r" % action)
        rep = spec.get("body_repeat")
        if rep is not None and (not isinstance(rep, dict) or
                                not isinstance(rep.get("unit"), str) or
                                not isinstance(rep.get("count"), int) or rep["count"] < 0):
            raise bad_request("body_repeat needs a string unit and a count >= 0")
        if spec.get("encoding") not in (None, "gzip"):
            raise bad_request("fault encoding must be gzip")
        commits = spec.get("commits")
        if action == "interpose":
            if (not isinstance(commits, list) or not commits or
                    not all(isinstance(c, dict) and isinstance(c.get("updates"), list)
                            for c in commits)):
                raise bad_request("an interpose fault needs commits: a list of "
                                  "{requirements, updates} objects")
            tbl = spec.get("table")
            if tbl is not None and (not isinstance(tbl, dict) or not tbl.get("name")
                                    or not isinstance(tbl.get("namespace"), list)):
                raise bad_request("interpose table must be {namespace: [...], name: ...}")
        match = spec.get("match") or {}
        item = {
            "id": self.next_id,
            "method": (match.get("method") or "").upper() or None,
            "path_regex": match.get("path_regex") or ".*",
            "conditional": match.get("conditional"),
            "count": int(spec.get("count", 1)),
            "action": action,
            "status": int(spec.get("status", 503)),
            "seconds": float(spec.get("seconds", 5)),
            "body": spec.get("body"),
            "body_repeat": rep,
            "encoding": spec.get("encoding"),
            "headers": spec.get("headers") or {},
            "at": spec.get("at") or "request",
            "commits": commits if action == "interpose" else None,
            "table": spec.get("table") if action == "interpose" else None,
        }
        if item["at"] not in ("request", "pointer-swap"):
            raise bad_request("fault 'at' must be request or pointer-swap")
        if item["at"] == "pointer-swap" and action != "hang":
            raise bad_request("only hang faults can fire at pointer-swap")
        re.compile(item["path_regex"])
        if item["conditional"] not in (None, True, False):
            raise bad_request("fault match conditional must be true or false")
        with self.lock:
            self.next_id += 1
            self.items.append(item)
        return item["id"]

    def take(self, method, path, at="request", conditional=None):
        """Return the first armed fault matching and use one of its firings.
        at is "request" (on arrival) or "pointer-swap" (in a commit, after the
        new metadata file is written, just before the compare-and-swap);
        conditional: whether the request carries If-None-Match (None: not
        known, matched by faults that do not ask)."""
        if not self.items:
            return None     # nothing armed (add and clear replace or extend the list)
        with self.lock:
            for f in self.items:
                if f["count"] <= 0 or f["at"] != at:
                    continue
                if f["method"] and f["method"] != method:
                    continue
                if f["conditional"] is not None and f["conditional"] != conditional:
                    continue
                if not re.search(f["path_regex"], path):
                    continue
                f["count"] -= 1
                return dict(f)
        return None

    def clear(self):
        with self.lock:
            self.items = []

    def list(self):
        with self.lock:
            return [dict(f) for f in self.items if f["count"] > 0]


class RequestLog:
    """Every non-admin request: method, path, query, status, fault, the
    serving process (its pid: --processes).  An
    entry is kept as a tuple (FIELDS) and made a dict when it is read:
    a refresh logs 100,000 of them and reads none."""

    FIELDS = ("seq", "time", "method", "path", "query", "status", "fault",
              "if_none_match", "idempotency_key", "authorization",
              "original_authorization", "sigv4", "process")

    def __init__(self):
        self.lock = threading.Lock()
        self.entries = []
        self.seq = 0

    def add(self, method, path, query, status, fault, headers, sigv4_result=None):
        if isinstance(headers, httpserve.Headers):
            get = headers.lowered().get     # a dict look-up each, names in lower case
            entry = (method, path, query, status, fault, get("if-none-match"),
                     get("idempotency-key"), "present" if get("authorization") else None,
                     "present" if get("original-authorization") else None, sigv4_result,
                     os.getpid())
        else:
            get = headers.get
            entry = (method, path, query, status, fault, get("If-None-Match"),
                     get("Idempotency-Key"), "present" if get("Authorization") else None,
                     "present" if get("Original-Authorization") else None, sigv4_result,
                     os.getpid())
        with self.lock:
            self.seq += 1
            self.entries.append((self.seq, time.time()) + entry)

    def snapshot(self, path_regex=None):
        fields = self.FIELDS
        with self.lock:
            entries = list(self.entries)
        if path_regex:
            rx = re.compile(path_regex)
            entries = [e for e in entries if rx.search(e[3])]
        return self.summary([dict(zip(fields, e)) for e in entries])

    @staticmethod
    def merged(logs):
        """The snapshots of several processes' logs as one: entries in the
        order of their times, numbered again."""
        entries = sorted((e for log in logs for e in log["requests"]),
                         key=lambda e: (e["time"], e["seq"]))
        for i, e in enumerate(entries):
            e["seq"] = i + 1
        return RequestLog.summary(entries)

    @staticmethod
    def summary(entries):
        counts = {}
        for e in entries:
            key = "%s %s" % (e["method"], e["path"])
            by = counts.setdefault(key, {})
            by[str(e["status"])] = by.get(str(e["status"]), 0) + 1
        return {"requests": entries, "counts": counts, "total": len(entries)}

    def reset(self):
        with self.lock:
            self.entries = []


ISO_DURATION = re.compile(r"^P(?:(\d+)W)?(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?"
                          r"(?:(\d+(?:[.,]\d+)?)S)?)?$")


def iso_duration_seconds(text):
    """Seconds of an ISO-8601 duration of fixed length (weeks to seconds),
    or None when text is not one."""
    m = ISO_DURATION.match(text) if isinstance(text, str) else None
    if m is None or text in ("P", "PT") or text.endswith("T") or not any(m.groups()):
        return None
    w, d, h, mi, sec = m.groups()
    return ((int(w or 0) * 7 + int(d or 0)) * 86400 + int(h or 0) * 3600 +
            int(mi or 0) * 60 + float((sec or "0").replace(",", ".")))


class Idempotency:
    """Idempotency-Key: the advertised lifetime (None: off) and the first
    answer to each key seen within it."""

    def __init__(self, lifetime=None):
        self.cond = threading.Condition()
        self.lifetime = None
        self.seconds = None
        self.answers = {}       # key -> (expires, status, data, headers, content_type)
        self.busy = set()       # keys whose first request is being served
        self.set(lifetime)

    def set(self, lifetime):
        if lifetime is None:
            with self.cond:
                self.lifetime = self.seconds = None
                self.answers = {}
                return
        seconds = iso_duration_seconds(lifetime)
        if seconds is None or seconds <= 0:
            raise bad_request("idempotency lifetime must be a positive ISO-8601 duration "
                              "such as PT30M, not %r" % (lifetime,))
        with self.cond:
            self.lifetime, self.seconds = lifetime, seconds

    def begin(self, key):
        """The remembered answer to key, or None after marking key as
        being served (then finish() must follow).  Waits, bounded, while
        another request with key is being served."""
        deadline = time.time() + 120
        with self.cond:
            while key in self.busy and time.time() < deadline:
                self.cond.wait(0.5)
            hit = self.answers.get(key)
            if hit is not None and hit[0] > time.time():
                return hit[1:]
            self.answers.pop(key, None)
            self.busy.add(key)
            return None

    def finish(self, key, answer):
        """Remember answer (status, data, headers, content_type) for key,
        unless it is None or a 5xx; let waiting repeats go on."""
        with self.cond:
            self.busy.discard(key)
            if answer is not None and not (isinstance(answer[0], int) and answer[0] >= 500) \
                    and self.seconds is not None:
                self.answers[key] = (time.time() + self.seconds,) + tuple(answer)
            self.cond.notify_all()

    def describe(self):
        with self.cond:
            now = time.time()
            return {"lifetime": self.lifetime,
                    "keys": sum(1 for a in self.answers.values() if a[0] > now)}


class Tokens:
    """OAuth2 client-credentials tokens with an expiry, plus a static token."""

    def __init__(self, credential, ttl, static_token):
        self.client_id = self.secret = None
        if credential:
            if ":" not in credential:
                raise SystemExit("--token-credential must be ID:SECRET")
            self.client_id, self.secret = credential.split(":", 1)
        self.ttl = ttl
        self.static = static_token
        self.issued = {}
        self.lock = threading.Lock()

    @property
    def enabled(self):
        return bool(self.client_id or self.static)

    def issue(self):
        token = secrets.token_urlsafe(24)
        with self.lock:
            self.issued[token] = time.time() + self.ttl
        return token

    def valid(self, token):
        if self.static and secrets.compare_digest(token, self.static):
            return True
        with self.lock:
            exp = self.issued.get(token)
        return exp is not None and exp > time.time()

    def expire_all(self):
        with self.lock:
            for k in self.issued:
                self.issued[k] = 0


class SigV4Check:
    """What the catalog verifies when it is told to: a sigv4.Verifier,
    AWS's error shape or the Iceberg error model for refusals, and a
    shift of this server's clock."""

    def __init__(self, spec):
        keys = spec.get("keys")
        if (not isinstance(spec.get("region"), str) or not spec["region"] or
                not isinstance(keys, dict) or not keys or
                not all(isinstance(v, dict) and isinstance(v.get("secret"), str)
                        for v in keys.values())):
            raise bad_request("sigv4 needs region and keys: {ID: {secret, session_token}}")
        if spec.get("error_shape", "aws") not in ("aws", "iceberg"):
            raise bad_request("sigv4 error_shape must be aws or iceberg")
        self.verifier = sigv4.Verifier(
            spec["region"], spec.get("service") or "execute-api",
            {k: sigv4.Key(v["secret"], v.get("session_token")) for k, v in keys.items()},
            max_skew=int(spec.get("max_skew_seconds", sigv4.MAX_SKEW_SECONDS)))
        self.error_shape = spec.get("error_shape", "aws")
        self.clock_offset = float(spec.get("clock_offset_seconds", 0))

    def describe(self):
        v = self.verifier
        return {"region": v.region, "service": v.service, "keys": sorted(v.keys),
                "max_skew_seconds": v.max_skew, "error_shape": self.error_shape,
                "clock_offset_seconds": self.clock_offset}

    @staticmethod
    def from_args(args):
        if not args.sigv4_region:
            return None
        keys = {}
        for k in args.sigv4_key or []:
            parts = k.split(":", 2)
            if len(parts) < 2:
                raise SystemExit("--sigv4-key must be ID:SECRET[:SESSION_TOKEN]")
            keys[parts[0]] = {"secret": parts[1],
                              "session_token": parts[2] if len(parts) > 2 else None}
        if not keys:
            raise SystemExit("--sigv4-region needs at least one --sigv4-key")
        return SigV4Check({"region": args.sigv4_region, "service": args.sigv4_service,
                           "keys": keys})


# ---------------------------------------------------------------------------
# the catalog
# ---------------------------------------------------------------------------

class Catalog:
    """Catalog operations over Database and Storage; each method returns a
    (status, body-or-None, extra-headers) triple or raises CatalogError."""

    def __init__(self, args):
        self.name = args.catalog_name
        self.warehouse = args.warehouse.rstrip("/")
        self.db = Database(args.dsn, self.name)
        s3 = None
        if args.s3_endpoint:
            s3 = storage_mod.S3Config(args.s3_endpoint, args.s3_access_key_id,
                                      args.s3_secret_access_key, args.s3_region)
        self.s3 = s3
        azure = (storage_mod.AzureConfig(args.azure_endpoint)
                 if getattr(args, "azure_endpoint", None) else None)
        gcs = None
        if getattr(args, "gcs_endpoint", None):
            gcs = storage_mod.GcsConfig(args.gcs_endpoint, args.gcs_token or "")
        self.storage = storage_mod.Storage(s3=s3, file_root=args.file_root, azure=azure,
                                           gcs=gcs)
        self.separator = "\x1f"
        self.faults = None
        self.current = threading.local()
        # set through the admin endpoints: config a table is vended instead
        # of the default, extra /v1/config properties
        self.table_configs = {}
        # loads' metadata, encoded, by metadata file and mode (refs_metadata)
        self.refs_cache = {}
        self.refs_cache_lock = threading.Lock()
        self.extra_config = {"defaults": {}, "overrides": {}}
        self.idempotency = None     # the server's Idempotency, set by main()
        # set through /admin/vending: short-lived S3 credentials, minted per
        # load and per loadCredentials and registered with an S3 gate
        self.vending = None
        self.issued = []
        self.issued_lock = threading.Lock()

    # -- helpers ----------------------------------------------------------------

    def parse_namespace(self, text):
        """A namespace path segment (already percent-decoded) to its levels."""
        levels = text.split(self.separator)
        if any(not lv for lv in levels):
            raise bad_request("invalid namespace %r" % text)
        return levels

    @staticmethod
    def ns_str(levels):
        for lv in levels:
            if "." in lv:
                raise bad_request("namespace level %r contains '.', which the JDBC layout "
                                  "uses as its separator" % lv)
        return ".".join(levels)

    def require_namespace(self, levels):
        if not self.db.namespace_exists(self.ns_str(levels)):
            raise no_such_namespace(levels)

    @staticmethod
    def page_args(query):
        """pageSize and pageToken of a listing: (None, None) with neither
        (everything, no token); otherwise (size, the key the page starts
        after, or None for the first page).  Tokens are the last key of the
        previous page, base64url."""
        token = query.get("pageToken")
        size = query.get("pageSize")
        if token is None and size is None:
            return None, None
        try:
            size = int(size) if size is not None else DEFAULT_PAGE_SIZE
        except ValueError:
            raise bad_request("pageSize must be an integer")
        if size < 1:
            raise bad_request("pageSize must be at least 1")
        after = None
        if token:
            try:
                after = base64.urlsafe_b64decode(token.encode()).decode()
            except Exception:
                raise bad_request("invalid pageToken %r" % token)
        return size, after

    @staticmethod
    def page_token(page, more, key=lambda x: x):
        return base64.urlsafe_b64encode(key(page[-1]).encode()).decode() if more else None

    @classmethod
    def paginate(cls, items, query, key=lambda x: x):
        """Apply pageToken/pageSize to sorted items (page_args)."""
        size, after = cls.page_args(query)
        if size is None:
            return items, None, False
        start = 0
        if after is not None:
            start = bisect.bisect_right([key(i) for i in items], after)
        page = items[start:start + size]
        return page, cls.page_token(page, start + size < len(items), key), True

    def storage_config(self, location):
        """LoadTableResult.config for a table: S3 client settings when the
        table lives in S3 and the server knows the endpoint."""
        if self.s3 is None or not location or not storage_mod.is_s3(location):
            return {}
        return {
            "s3.endpoint": self.s3.endpoint,
            "s3.access-key-id": self.s3.access_key_id,
            "s3.secret-access-key": self.s3.secret_access_key,
            "s3.path-style-access": "true",
            "client.region": self.s3.region,
        }

    def vend(self, location, via):
        """Mint temporary credentials for a table in S3, register them with
        the gate (which refuses them with 400 ExpiredToken after `ttl`
        seconds); the StorageCredential config, or None when not vending."""
        v = self.vending
        if v is not None and location and storage_mod.is_gs(location):
            return self.vend_gcs(v, via)
        if v is not None and location and storage_mod.is_azure(location):
            return self.vend_azure(v, location, via)
        if v is None or not location or not storage_mod.is_s3(location):
            return None
        key_id = "TMSV" + secrets.token_hex(8).upper()
        secret, token = secrets.token_urlsafe(24), secrets.token_urlsafe(32)
        expires_at = time.time() + v["ttl"]
        body = json.dumps({"access_key_id": key_id, "secret_access_key": secret,
                           "session_token": token, "expires_at": expires_at}).encode()
        req = urllib.request.Request(v["gate"] + "/admin/credentials", data=body,
                                     headers={"Content-Type": "application/json"},
                                     method="POST")
        with urllib.request.urlopen(req, timeout=10) as r:
            r.read()
        with self.issued_lock:
            self.issued.append({"access_key_id": key_id, "expires_at": expires_at,
                                "via": via, "issued_at": time.time()})
        cfg = {"s3.access-key-id": key_id, "s3.secret-access-key": secret,
               "s3.session-token": token}
        if v["expiry_visible"]:
            cfg["s3.session-token-expires-at-ms"] = str(int(expires_at * 1000))
        return cfg

    def vend_gcs(self, v, via):
        """A short-lived OAuth2 token for a table in GCS, registered with the
        GCS test server (v["gate"]) to expire `ttl` seconds from now."""
        token = "ya29.vended-" + secrets.token_urlsafe(24)
        expires_at = time.time() + v["ttl"]
        body = json.dumps({"token": token, "expires_at": expires_at,
                           "who": "vended"}).encode()
        req = urllib.request.Request(v["gate"] + "/admin/tokens", data=body,
                                     headers={"Content-Type": "application/json"},
                                     method="POST")
        with urllib.request.urlopen(req, timeout=10) as r:
            r.read()
        with self.issued_lock:
            self.issued.append({"access_key_id": token[:20], "token": token,
                                "expires_at": expires_at, "via": via,
                                "issued_at": time.time()})
        cfg = {"gcs.oauth2.token": token}
        if v["expiry_visible"]:
            cfg["gcs.oauth2.token-expires-at"] = str(int(expires_at * 1000))
        return cfg

    def vend_azure(self, v, location, via):
        """An account SAS for a table in Azure (signed with the account key
        the catalog reaches Azurite with) that expires `ttl` seconds from
        now, whole seconds as a SAS says; the storage (Azurite) refuses it
        after that, 403 AuthorizationFailure."""
        if self.storage.azure is None:
            return None
        account = storage_mod.split_azure(location)[0]
        expires_at = int(time.time() + v["ttl"] + 0.999)
        sas = storage_mod.account_sas(
            account, self.storage.azure.config.key,
            datetime.datetime.fromtimestamp(expires_at, datetime.timezone.utc))
        with self.issued_lock:
            self.issued.append({"access_key_id": "sas:" + sas.rsplit("sig=", 1)[1][:12],
                                "token": sas, "expires_at": expires_at, "via": via,
                                "issued_at": time.time()})
        cfg = {"adls.sas-token.%s" % account: sas}
        if v["expiry_visible"]:
            cfg["adls.sas-token-expires-at-ms.%s" % account] = str(expires_at * 1000)
        return cfg

    def storage_credentials(self, location, via):
        """LoadTableResult / LoadCredentialsResponse storage-credentials."""
        cfg = self.vend(location, via)
        if cfg is None:
            return None
        if storage_mod.is_gs(location):
            bucket, _ = storage_mod.split_gs(location)
            return [{"prefix": "gs://%s/" % bucket, "config": cfg}]
        if storage_mod.is_azure(location):
            parts = urllib.parse.urlsplit(location)
            return [{"prefix": "%s://%s/" % (parts.scheme, parts.netloc), "config": cfg}]
        bucket, _ = storage_mod.split_s3(location)
        return [{"prefix": "s3://%s/" % bucket, "config": cfg}]

    def load_credentials(self, levels, name):
        mloc = self.table_pointer(levels, name)
        meta = self.read_meta(mloc)
        creds = self.storage_credentials(meta.get("location"), "credentials")
        if creds is None:
            cfg = self.storage_config(meta.get("location"))
            creds = [{"prefix": meta.get("location") or "", "config": cfg}] if cfg else []
        return 200, {"storage-credentials": creds}, {}

    def set_table_config(self, levels, name, config):
        """Vend config for this table from now on (admin)."""
        self.table_configs[(tuple(levels), name)] = dict(config)

    def clear_table_configs(self):
        self.table_configs = {}

    _etags = {}

    @classmethod
    def etag(cls, location, mode):
        """A load's ETag: a hash of the metadata location and the snapshots
        mode, computed once per pair (a refresh asks for the same ones
        again and again; at most 65,536 kept, then forgotten at once)."""
        key = (location, mode)
        tag = cls._etags.get(key)
        if tag is None:
            tag = '"%s"' % hashlib.sha256(("%s|%s" % key).encode()).hexdigest()[:40]
            if len(cls._etags) >= 65536:
                cls._etags = {}
            cls._etags[key] = tag
        return tag

    REFS_CACHE_ENTRIES = 32
    # a snapshots=all answer's metadata is kept only up to this size (the
    # refs answers are small whatever the history)
    ALL_CACHE_BYTES = 1 << 20

    def refs_metadata(self, location, mode="refs"):
        """The metadata of a snapshots=refs (or, with mode "all", a full)
        answer for the file at location, JSON-encoded, and the table's
        location; None for a file that is not local.  A local file's answer
        is kept by the file's identity (device, inode, size, modification
        time: a file rewritten in place is read again), at most
        REFS_CACHE_ENTRIES, as a catalog keeps a table's current state
        instead of parsing its whole history at each load: without it a
        load of a table of 5,000 snapshots costs this catalog its 4 MB
        metadata file, read, parsed and answered (0.1-0.2 s), and a full
        load of a small table the file read, parsed and encoded again."""
        try:
            st = os.stat(self.storage.local_path(location))
        except (storage_mod.StorageError, OSError, ValueError):
            return None
        key = (location, mode, st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
        with self.refs_cache_lock:
            hit = self.refs_cache.get(key)
        if hit is not None:
            return hit
        meta = self.read_meta(location)
        body_meta = tablemeta.refs_view(meta) if mode == "refs" else meta
        hit = (json.dumps(body_meta).encode(), meta.get("location"))
        if mode == "all" and len(hit[0]) > self.ALL_CACHE_BYTES:
            return hit
        with self.refs_cache_lock:
            while len(self.refs_cache) >= self.REFS_CACHE_ENTRIES:
                self.refs_cache.pop(next(iter(self.refs_cache)))
            self.refs_cache[key] = hit
        return hit

    def load_result(self, location, meta, mode="all", ident=None, meta_json=None):
        """The LoadTableResult for meta read from location; with meta_json
        (the metadata already encoded, meta then only needs "location") the
        body comes encoded, as bytes."""
        body_meta = meta
        if mode == "refs" and meta_json is None:
            body_meta = tablemeta.refs_view(meta)
        config = self.table_configs.get(ident) if ident is not None else None
        creds = None
        if config is None:
            config = self.storage_config(meta.get("location"))
            creds = self.storage_credentials(meta.get("location"), "load")
        if creds is not None:
            # vended: the endpoint in config, the keys in storage-credentials
            config = {k: v for k, v in config.items()
                      if k not in ("s3.access-key-id", "s3.secret-access-key")}
            if storage_mod.is_s3(meta.get("location")):
                config["s3.endpoint"] = self.vending["endpoint"]
        body = {"metadata-location": location, "metadata": body_meta, "config": dict(config)}
        if creds is not None:
            body["storage-credentials"] = creds
        headers = {"ETag": self.etag(location, mode)} if location else {}
        if meta_json is not None:
            del body["metadata"]
            return json.dumps(body).encode()[:-1] + b', "metadata": ' + meta_json + b"}", headers
        return body, headers

    def read_meta(self, location):
        try:
            return tablemeta.read_metadata(self.storage, location)
        except storage_mod.NotFound:
            raise CatalogError(500, "NotFoundException",
                               "metadata file is missing: %s" % location)
        except storage_mod.StorageError as e:
            raise CatalogError(500, "RuntimeIOException", str(e))

    def write_meta(self, meta, location):
        try:
            self.storage.write(location, tablemeta.serialize_metadata(meta, location))
        except storage_mod.StorageError as e:
            raise CatalogError(500, "RuntimeIOException",
                               "cannot write %s: %s" % (location, e))

    def table_pointer(self, levels, name):
        row = self.db.location(self.ns_str(levels), name)
        if row is None:
            raise no_such_table(levels, name)
        return row[0]

    # -- config -----------------------------------------------------------------

    def config(self, query):
        wh = query.get("warehouse")
        if wh and wh not in (self.name, self.warehouse, self.warehouse + "/"):
            raise not_found("NoSuchWarehouseException",
                            "Warehouse does not exist: %s" % wh)
        body = {
            "defaults": dict(self.extra_config["defaults"], warehouse=self.warehouse),
            "overrides": dict(self.extra_config["overrides"], prefix=self.name,
                              warehouse=self.warehouse),
            "endpoints": [e for e in ENDPOINTS if not (
                e.endswith("/credentials") and self.vending is not None and
                not self.vending["credentials_endpoint"])],
        }
        lifetime = self.idempotency.lifetime if self.idempotency else None
        if lifetime:
            body["idempotency-key-lifetime"] = lifetime
        return 200, body, {}

    # -- namespaces -------------------------------------------------------------

    def list_namespaces(self, query):
        parent = query.get("parent") or ""
        plevels = self.parse_namespace(parent) if parent else []
        if plevels and not self.db.namespace_exists(self.ns_str(plevels)):
            raise no_such_namespace(plevels)
        children = set()
        for ns in self.db.all_namespaces():
            lv = ns.split(".")
            if len(lv) > len(plevels) and lv[:len(plevels)] == plevels:
                children.add(tuple(lv[:len(plevels) + 1]))
        items = sorted(children)
        page, nxt, paged = self.paginate(items, query, key=lambda t: "\x1f".join(t))
        body = {"namespaces": [list(t) for t in page]}
        if paged:
            body["next-page-token"] = nxt
        return 200, body, {}

    def create_namespace(self, body):
        levels = body.get("namespace")
        if not isinstance(levels, list) or not levels or not all(isinstance(x, str) and x for x in levels):
            raise bad_request("namespace must be a non-empty list of strings")
        props = body.get("properties") or {}
        s = self.ns_str(levels)
        if self.db.namespace_exists(s):
            raise CatalogError(409, "AlreadyExistsException",
                               "Namespace already exists: %s" % s)
        try:
            self.db.create_namespace(s, props)
        except psycopg2.Error as e:
            if isinstance(e, psycopg2.OperationalError):
                raise
            raise CatalogError(409, "AlreadyExistsException", db_message(e))
        return 200, {"namespace": levels, "properties": props}, {}

    def load_namespace(self, levels):
        self.require_namespace(levels)
        return 200, {"namespace": levels,
                     "properties": self.db.namespace_properties(self.ns_str(levels))}, {}

    def namespace_exists(self, levels):
        self.require_namespace(levels)
        return 204, None, {}

    def drop_namespace(self, levels):
        s = self.ns_str(levels)
        self.require_namespace(levels)
        if self.db.list_tables(s, limit=1) or any(n.startswith(s + ".") for n in self.db.all_namespaces()):
            raise CatalogError(409, "NamespaceNotEmptyException",
                               "Namespace %s is not empty" % s)
        self.db.drop_namespace(s)
        return 204, None, {}

    def update_namespace(self, levels, body):
        self.require_namespace(levels)
        updates = body.get("updates") or {}
        removals = body.get("removals") or []
        both = sorted(set(updates) & set(removals))
        if both:
            raise CatalogError(422, "UnprocessableEntityException",
                               "Properties present in both updates and removals: %s"
                               % ", ".join(both))
        updated, removed, missing = self.db.update_namespace(self.ns_str(levels), updates, removals)
        return 200, {"updated": updated, "removed": removed, "missing": missing or None}, {}

    # -- tables -----------------------------------------------------------------

    def list_tables(self, levels, query):
        self.require_namespace(levels)
        size, after = self.page_args(query)
        if size is None:
            page = self.db.list_tables(self.ns_str(levels))
        else:
            # one name more than the page tells whether another page follows
            page = self.db.list_tables(self.ns_str(levels), after, size + 1)
            more = len(page) > size
            page = page[:size]
        body = {"identifiers": [{"namespace": levels, "name": n} for n in page]}
        if size is not None:
            body["next-page-token"] = self.page_token(page, more)
        return 200, body, {}

    def default_location(self, levels, name):
        props = self.db.namespace_properties(self.ns_str(levels))
        if props.get("location"):
            return props["location"].rstrip("/") + "/" + name
        return "%s/%s/%s" % (self.warehouse, "/".join(levels), name)

    def create_table(self, levels, body):
        self.require_namespace(levels)
        name = body.get("name")
        if not name or "schema" not in body:
            raise bad_request("CreateTableRequest needs name and schema")
        s = self.ns_str(levels)
        if self.db.get_table(s, name) is not None:
            raise CatalogError(409, "AlreadyExistsException",
                               "Table already exists: %s.%s" % (s, name))
        location = (body.get("location") or self.default_location(levels, name)).rstrip("/")
        meta = tablemeta.new_table_metadata(body, location)
        if body.get("stage-create"):
            result, _ = self.load_result(None, meta)
            return 200, result, {}
        mloc = tablemeta.next_metadata_location(meta, None)
        self.write_meta(meta, mloc)
        try:
            self.db.insert_table(s, name, mloc)
        except CatalogError:
            self.storage.delete(mloc)
            raise
        result, headers = self.load_result(mloc, meta)
        return 200, result, headers

    def register_table(self, levels, body):
        self.require_namespace(levels)
        name = body.get("name")
        mloc = body.get("metadata-location")
        if not name or not mloc:
            raise bad_request("RegisterTableRequest needs name and metadata-location")
        try:
            meta = tablemeta.read_metadata(self.storage, mloc)
        except storage_mod.NotFound:
            raise bad_request("metadata file does not exist: %s" % mloc)
        except storage_mod.StorageError as e:
            raise bad_request("cannot read metadata file %s: %s" % (mloc, e))
        s = self.ns_str(levels)
        existing = self.db.get_table(s, name)
        if existing is not None:
            if not body.get("overwrite"):
                raise CatalogError(409, "AlreadyExistsException",
                                   "Table already exists: %s.%s" % (s, name))
            self.db.swap_pointer(s, name, existing[0], mloc)
        else:
            self.db.insert_table(s, name, mloc)
        result, headers = self.load_result(mloc, meta)
        return 200, result, headers

    def load_table(self, levels, name, query, headers):
        mode = query.get("snapshots") or "all"
        if mode not in ("all", "refs"):
            raise bad_request("snapshots must be all or refs, not %r" % mode)
        mloc = self.table_pointer(levels, name)
        tag = self.etag(mloc, mode)
        inm = headers.get("If-None-Match")
        if inm:
            wanted = [t.strip() for t in inm.split(",")]
            norm = [t[2:] if t.startswith("W/") else t for t in wanted]
            if "*" in norm or tag in norm or tag.strip('"') in norm:
                return 304, None, {"ETag": tag}
        cached = self.refs_metadata(mloc, mode)
        if cached is not None:
            result, hdrs = self.load_result(mloc, {"location": cached[1]}, mode,
                                            (tuple(levels), name), meta_json=cached[0])
            return 200, result, hdrs
        meta = self.read_meta(mloc)
        result, hdrs = self.load_result(mloc, meta, mode, (tuple(levels), name))
        return 200, result, hdrs

    def table_exists(self, levels, name):
        self.table_pointer(levels, name)
        return 204, None, {}

    def commit_table(self, levels, name, body):
        reqs = body.get("requirements")
        updates = body.get("updates")
        if not isinstance(reqs, list) or not isinstance(updates, list):
            raise bad_request("CommitTableRequest needs requirements and updates lists")
        s = self.ns_str(levels)
        row = self.db.get_table(s, name)
        if row is None:
            if not any(r.get("type") == "assert-create" for r in reqs):
                raise no_such_table(levels, name)
            self.require_namespace(levels)
            tablemeta.check_requirements(None, reqs)
            base, base_loc = tablemeta.empty_metadata(), None
        else:
            base_loc = row[0]
            base = self.read_meta(base_loc)
            tablemeta.check_requirements(base, reqs)
        meta = tablemeta.apply_updates(base, updates, base_loc)
        if base_loc is None:
            if not meta.get("location"):
                meta["location"] = self.default_location(levels, name)
            if meta.get("current-schema-id", -1) < 0 or not meta.get("schemas"):
                raise bad_request("a create transaction must add and set a schema")
            for k, d in (("default-spec-id", {"spec-id": 0, "fields": []}),
                         ("default-sort-order-id", {"order-id": 0, "fields": []})):
                if meta.get(k, -1) < 0:
                    coll = "partition-specs" if k == "default-spec-id" else "sort-orders"
                    meta[coll] = meta.get(coll) or [d]
                    meta[k] = 0
        elif meta == base:
            return 200, {"metadata-location": base_loc, "metadata": base}, {
                "ETag": self.etag(base_loc, "all")}
        mloc = tablemeta.next_metadata_location(meta, base_loc)
        self.write_meta(meta, mloc)
        self.pointer_swap_hook()
        try:
            if base_loc is None:
                self.db.insert_table(s, name, mloc)
            else:
                self.db.swap_pointer(s, name, base_loc, mloc)
        except CatalogError:
            self.storage.delete(mloc)
            raise
        return 200, {"metadata-location": mloc, "metadata": meta}, {
            "ETag": self.etag(mloc, "all")}

    def pointer_swap_hook(self):
        """Fire a hang fault armed with "at": "pointer-swap" (tests use it to
        make two commits race for the same pointer)."""
        if self.faults is None:
            return
        f = self.faults.take(getattr(self.current, "method", None),
                             getattr(self.current, "path", ""), at="pointer-swap")
        if f:
            time.sleep(f["seconds"])

    def commit_transaction(self, body):
        changes = body.get("table-changes")
        if not isinstance(changes, list):
            raise bad_request("CommitTransactionRequest needs table-changes")
        # Not atomic across tables: each change is committed in order; the
        # test world uses single-table transactions only.
        for ch in changes:
            ident = ch.get("identifier") or {}
            self.commit_table(ident.get("namespace") or [], ident.get("name"), ch)
        return 204, None, {}

    def drop_table(self, levels, name, query):
        s = self.ns_str(levels)
        mloc = self.table_pointer(levels, name)
        purge = (query.get("purgeRequested") or "false").lower() == "true"
        meta = None
        if purge:
            meta = self.read_meta(mloc)
        if self.db.drop_table(s, name) != 1:
            raise no_such_table(levels, name)
        if purge:
            for uri in tablemeta.reachable_files(self.storage, meta, mloc):
                try:
                    self.storage.delete(uri)
                except storage_mod.StorageError:
                    pass
        return 204, None, {}

    def rename_table(self, body):
        src = body.get("source") or {}
        dst = body.get("destination") or {}
        if not src.get("name") or not dst.get("name"):
            raise bad_request("RenameTableRequest needs source and destination")
        src_ns, dst_ns = src.get("namespace") or [], dst.get("namespace") or []
        self.table_pointer(src_ns, src["name"])
        self.require_namespace(dst_ns)
        if self.db.get_table(self.ns_str(dst_ns), dst["name"]) is not None:
            raise CatalogError(409, "AlreadyExistsException",
                               "Table already exists: %s.%s" % (self.ns_str(dst_ns), dst["name"]))
        if self.db.rename_table(self.ns_str(src_ns), src["name"],
                                self.ns_str(dst_ns), dst["name"]) != 1:
            raise no_such_table(src_ns, src["name"])
        return 204, None, {}


# ---------------------------------------------------------------------------
# HTTP
# ---------------------------------------------------------------------------

unquote = urllib.parse.unquote
_queries = {}


def split_target(target):
    """The path and the query string of a request target: as urlsplit
    gives them, without it for the usual origin form ("/path?query")."""
    if target.startswith("/") and not target.startswith("//") and "#" not in target:
        path, _, query = target.partition("?")
        return path, query
    parts = urllib.parse.urlsplit(target)
    return parts.path, parts.query


def parse_query(text):
    """The query string's parameters (the last of each name wins), parsed
    once per distinct string (a refresh sends "snapshots=all" 100,000
    times; at most 1,024 kept, then forgotten at once); a new dict."""
    if not text:
        return {}
    q = _queries.get(text)
    if q is None:
        q = dict(urllib.parse.parse_qsl(text, keep_blank_values=True))
        if len(_queries) >= 1024:
            _queries.clear()
        _queries[text] = q
    return dict(q)


class Handler(httpserve.Handler):
    """Routes one request; the server object carries catalog, faults, log,
    tokens and the admin token."""

    server_version = "tms-test-catalog/1"
    log_prefix = "catalog"
    # the plain header parser (httpserve.Headers): a refresh is 100,000 of
    # these requests
    MessageClass = httpserve.Headers

    # -- plumbing ---------------------------------------------------------------

    def _body(self):
        """The request body, read once."""
        if self._raw is None:
            self._raw = self.read_body()
        return self._raw

    def _json_body(self, raw):
        if not raw:
            return {}
        try:
            v = json.loads(raw)
        except ValueError as e:
            raise bad_request("Malformed request: %s" % e)
        if not isinstance(v, dict):
            raise bad_request("Malformed request: body must be a JSON object")
        return v

    def _record(self):
        """Log this request once, before its answer leaves: a client that
        has its answer must find the request in /admin/requests."""
        if self._pending_log is not None:
            method, path, query, action = self._pending_log
            self._pending_log = None
            self.server.log.add(method, path, query, self._status, action, self.headers,
                                self._sigv4)

    def _send(self, status, body=None, headers=None, content_type="application/json"):
        data = b""
        if body is not None:
            data = body if isinstance(body, bytes) else json.dumps(body).encode()
        if self._idem_key is not None:
            # the first answer to this key, whatever happens to it below
            key, self._idem_key = self._idem_key, None
            self.server.idempotency.finish(key, (status, data, dict(headers or {}),
                                                 content_type))
        if self._lost is not None:
            # a "lost" fault: the request took effect, another answer leaves
            f, self._lost = self._lost, None
            status = f["status"]
            data = json.dumps({"error": {"message": "injected fault: the answer was lost",
                                         "type": "ServiceFailureException" if status >= 500
                                         else "InjectedFaultException",
                                         "code": status}}).encode()
            headers, content_type = {}, "application/json"
        self._status = status
        self._record()
        if self._late:
            # a "late" fault: the request took effect, its answer waits
            seconds, self._late = self._late, None
            time.sleep(seconds)
        self.reply(status, data, headers, content_type if status not in (204, 304) else None)
        self._status = status

    def _error(self, status, type_, message):
        self._send(status, {"error": {"message": message, "type": type_, "code": status}})

    def _handle(self):
        self._status = None
        self._pending_log = None
        self._late = None
        self._lost = None
        self._idem_key = None
        self._raw = None
        self._sigv4 = None
        path, raw_query = split_target(self.path)
        query = parse_query(raw_query)
        if path.startswith("/admin/"):
            return self._admin(path, query)
        check = self.server.sigv4
        if check is not None and path != "/v1/oauth/tokens":
            # AWS's front end: the signature first, before faults and routes
            raw_path, _, raw_query = self.path.partition("?")
            try:
                self._sigv4 = check.verifier.verify(
                    self.command, raw_path, raw_query, self.headers.items(), self._body(),
                    now=time.time() + check.clock_offset)
                del self._sigv4["canonical_request"]    # it holds the tokens
            except sigv4.SigV4Error as e:
                self._sigv4 = {"error": e.type}
                self._pending_log = (self.command, path, raw_query, None)
                return self._sigv4_refusal(check, e)
        fault = self.server.faults.take(self.command, path,
                                        conditional=self.headers.get("If-None-Match") is not None)
        self._pending_log = (self.command, path, raw_query,
                             fault["action"] if fault else None)
        self.server.catalog.current.method = self.command
        self.server.catalog.current.path = path
        try:
            if fault and self._fault(fault):
                return
            if self._idempotent_replay(path):
                return
            self._route(path, query)
        except CatalogError as e:
            self._error(e.status, e.type, e.message)
        except psycopg2.Error as e:
            self._error(503, "ServiceUnavailableException", "database error: %s" % db_message(e))
        except Exception as e:  # a bug: still answer with the error model
            import traceback
            traceback.print_exc()
            self._error(500, "InternalServerError", "%s: %s" % (type(e).__name__, e))
        finally:
            if self._idem_key is not None:
                # no answer went out (a closed connection): nothing to remember
                key, self._idem_key = self._idem_key, None
                self.server.idempotency.finish(key, None)
            self._record()      # answers that did not go through _send

    def _idempotent_replay(self, path):
        """When Idempotency-Key is honoured and this mutating request
        carries a key already answered: send that answer again (True).
        Otherwise, with a key, mark it so that this answer is remembered."""
        idem = self.server.idempotency
        if idem.lifetime is None or self.command not in ("POST", "PUT", "DELETE"):
            return False
        key = self.headers.get("Idempotency-Key")
        if not key or path == "/v1/oauth/tokens" or not path.startswith("/v1/"):
            return False
        hit = idem.begin(key)
        if hit is None:
            self._idem_key = key
            return False
        status, data, headers, content_type = hit
        self._pending_log = self._pending_log[:3] + ("idempotent-replay",)
        self._send(status, data if data else None, headers, content_type)
        return True

    def _sigv4_refusal(self, check, e):
        """Refuse a request as AWS's front end does (or in the Iceberg
        error model, when the catalog is told to wrap it so)."""
        if check.error_shape == "iceberg":
            return self._error(e.status, e.type, e.message)
        self._send(e.status, {"message": e.message}, {"x-amzn-ErrorType": e.type})

    def _fault(self, f):
        """Carry out a fault; True when the request is finished."""
        if f["action"] == "close":
            self._status = "closed"
            self.close_connection = True
            try:
                self.connection.shutdown(2)
            except OSError:
                pass
            return True
        if f["action"] == "hang":
            time.sleep(f["seconds"])
            return False
        if f["action"] == "late":
            self._late = f["seconds"]
            return False
        if f["action"] == "lost":
            self._lost = f
            return False
        if f["action"] == "interpose":
            self._interpose(f)
            return False
        if f["action"] == "malformed":
            body = f["body"] if f["body"] is not None else '{"metadata": {"format-version": 2, "table-uuid": '
            data, headers = self._fault_body(f, body)
            self._send(f["status"] if f["status"] < 300 else 200, data, headers)
            return True
        body = f["body"]
        if body is None:
            body = json.dumps({"error": {"message": "injected fault", "type":
                                         "ServiceFailureException" if f["status"] >= 500
                                         else "InjectedFaultException", "code": f["status"]}})
        data, headers = self._fault_body(f, body)
        self._send(f["status"], data, headers)
        return True

    def _interpose(self, f):
        """An interpose fault: apply its commits to the table first (a
        concurrent writer that wins the race), each logged as a request."""
        cat = self.server.catalog
        path = urllib.parse.urlsplit(self.path).path
        if f.get("table"):
            levels, name = f["table"]["namespace"], f["table"]["name"]
            tpath = "/v1/%s/namespaces/%s/tables/%s" % (
                cat.name, urllib.parse.quote(cat.separator.join(levels)),
                urllib.parse.quote(name))
        else:
            segs = [urllib.parse.unquote(s) for s in path[4:].split("/")]
            if segs and segs[0] == cat.name:
                segs = segs[1:]
            if len(segs) < 4 or segs[0] != "namespaces" or segs[2] != "tables":
                raise bad_request("an interpose fault matched %s, which names no table; "
                                  "give the fault a table" % path)
            levels, name, tpath = cat.parse_namespace(segs[1]), segs[3], path
        for body in f["commits"]:
            try:
                status = cat.commit_table(levels, name, body)[0]
            except CatalogError as e:
                status = e.status
            self.server.log.add("POST", tpath, "", status, "interposed", {})

    @staticmethod
    def _fault_body(f, body):
        """The bytes and headers a status or malformed fault answers with:
        body, or the one body_repeat builds, gzip-compressed on request."""
        headers = dict(f["headers"])
        rep = f.get("body_repeat")
        if rep is not None:
            data = b"".join([rep.get("head", "").encode(),
                             rep["unit"].encode() * rep["count"],
                             rep.get("tail", "").encode()])
        else:
            data = body.encode()
        if f.get("encoding") == "gzip":
            data = gzip.compress(data, compresslevel=9)
            headers["Content-Encoding"] = "gzip"
        return data, headers

    def _auth_ok(self):
        tokens = self.server.tokens
        if not tokens.enabled:
            return True
        # under SigV4 the bearer token travels as Original-Authorization
        h = self.headers.get("Original-Authorization" if self.server.sigv4 else
                             "Authorization") or ""
        if not h.startswith("Bearer "):
            self._error(401, "NotAuthorizedException", "Not authorized: missing bearer token")
            return False
        if not tokens.valid(h[7:].strip()):
            self._error(401, "NotAuthorizedException",
                        "Not authorized: the bearer token is invalid or expired")
            return False
        return True

    def _token(self, raw):
        tokens = self.server.tokens
        form = dict(urllib.parse.parse_qsl(raw.decode("utf-8", "replace")))

        def oauth_error(status, err, desc):
            self._send(status, {"error": err, "error_description": desc})

        grant = form.get("grant_type")
        if not tokens.client_id:
            return oauth_error(400, "unsupported_grant_type",
                               "this catalog issues no tokens (no --token-credential)")
        if grant == "client_credentials":
            cid, sec = form.get("client_id"), form.get("client_secret")
            basic = self.headers.get("Authorization") or ""
            if basic.startswith("Basic "):
                try:
                    cid, sec = base64.b64decode(basic[6:]).decode().split(":", 1)
                except Exception:
                    return oauth_error(400, "invalid_request", "bad Basic credentials")
            if cid != tokens.client_id or sec != tokens.secret:
                return oauth_error(401, "invalid_client", "wrong client id or secret")
        elif grant == "urn:ietf:params:oauth:grant-type:token-exchange":
            subject = form.get("subject_token") or ""
            if not tokens.valid(subject):
                return oauth_error(401, "invalid_grant", "subject token is invalid or expired")
        else:
            return oauth_error(400, "unsupported_grant_type",
                               "unsupported grant_type %r" % grant)
        self._send(200, {"access_token": tokens.issue(), "token_type": "bearer",
                         "expires_in": int(tokens.ttl),
                         "issued_token_type": "urn:ietf:params:oauth:token-type:access_token"})

    def _route(self, path, query):
        cat = self.server.catalog
        m = self.command
        raw = self._body() if m in ("POST", "PUT") else b""
        if path == "/v1/oauth/tokens" and m == "POST":
            return self._token(raw)
        if not path.startswith("/v1/"):
            raise not_found("NotFoundException", "no such route: %s %s" % (m, path))
        if not self._auth_ok():
            return
        segs = [unquote(s) if "%" in s else s for s in path[4:].split("/")]
        if segs == ["config"]:
            if m != "GET":
                raise CatalogError(405, "MethodNotAllowedException", "use GET")
            return self._send(*self._ret(cat.config(query)))
        if len(segs) > 1 and segs[0] == cat.name:
            segs = segs[1:]
        elif segs[0] not in ("namespaces", "tables", "transactions"):
            raise not_found("NoSuchWarehouseException",
                            "unknown prefix %r (this catalog's prefix is %r)" % (segs[0], cat.name))
        r = None
        n = len(segs)
        if segs[0] == "namespaces":
            if n == 1:
                if m == "GET":
                    r = cat.list_namespaces(query)
                elif m == "POST":
                    r = cat.create_namespace(self._json_body(raw))
            else:
                ns = cat.parse_namespace(segs[1])
                if n == 2:
                    r = {"GET": lambda: cat.load_namespace(ns),
                         "HEAD": lambda: cat.namespace_exists(ns),
                         "DELETE": lambda: cat.drop_namespace(ns)}.get(m, lambda: None)()
                elif n == 3 and segs[2] == "properties" and m == "POST":
                    r = cat.update_namespace(ns, self._json_body(raw))
                elif n == 3 and segs[2] == "register" and m == "POST":
                    r = cat.register_table(ns, self._json_body(raw))
                elif n == 3 and segs[2] == "tables":
                    if m == "GET":
                        r = cat.list_tables(ns, query)
                    elif m == "POST":
                        r = cat.create_table(ns, self._json_body(raw))
                elif n == 4 and segs[2] == "tables":
                    t = segs[3]
                    if m == "GET":
                        r = cat.load_table(ns, t, query, self.headers)
                    elif m == "HEAD":
                        r = cat.table_exists(ns, t)
                    elif m == "POST":
                        r = cat.commit_table(ns, t, self._json_body(raw))
                    elif m == "DELETE":
                        r = cat.drop_table(ns, t, query)
                elif n == 5 and segs[2] == "tables" and segs[4] == "metrics" and m == "POST":
                    cat.table_pointer(ns, segs[3])
                    r = (204, None, {})
                elif n == 5 and segs[2] == "tables" and segs[4] == "credentials" and m == "GET":
                    r = cat.load_credentials(ns, segs[3])
        elif segs == ["tables", "rename"] and m == "POST":
            r = cat.rename_table(self._json_body(raw))
        elif segs == ["transactions", "commit"] and m == "POST":
            r = cat.commit_transaction(self._json_body(raw))
        if r is None:
            raise CatalogError(406 if n >= 1 else 404, "UnsupportedOperationException",
                               "not supported by the test catalog: %s %s" % (m, path))
        self._send(*self._ret(r))

    @staticmethod
    def _ret(r):
        status, body, headers = r
        return status, body, headers

    def _admin(self, path, query):
        tok = self.server.admin_token
        if tok and self.headers.get("X-Admin-Token") != tok:
            return self._error(403, "ForbiddenException", "admin token required")
        raw = self._body() if self.command in ("POST", "PUT") else b""
        try:
            if self.server.processes > 1 and self.command != "GET" and \
                    path != "/admin/requests":
                raise CatalogError(409, "UnsupportedOperationException",
                                   "%s %s changes state kept in one process's memory: not"
                                   " with --processes %d (start the catalog with one)"
                                   % (self.command, path, self.server.processes))
            if path == "/admin/faults":
                if self.command == "POST":
                    fid = self.server.faults.add(self._json_body(raw))
                    return self._send(200, {"id": fid})
                if self.command == "DELETE":
                    self.server.faults.clear()
                    return self._send(204)
                if self.command == "GET":
                    return self._send(200, {"faults": self.server.faults.list()})
            if path == "/admin/requests":
                if self.command == "GET":
                    snap = self.server.log.snapshot(query.get("path_regex"))
                    if self.server.siblings:
                        snap = RequestLog.merged([snap] + self._siblings("GET"))
                    return self._send(200, snap)
                if self.command == "DELETE":
                    self.server.log.reset()
                    self._siblings("DELETE")
                    return self._send(204)
            if path == "/admin/expire-tokens" and self.command == "POST":
                self.server.tokens.expire_all()
                return self._send(204)
            if path == "/admin/table-config":
                cat = self.server.catalog
                if self.command == "POST":
                    spec = self._json_body(raw)
                    levels, table = spec.get("namespace"), spec.get("table")
                    config = spec.get("config")
                    if (not isinstance(levels, list) or not all(isinstance(x, str) for x in levels)
                            or not isinstance(table, str) or not isinstance(config, dict)
                            or not all(isinstance(v, str) for v in config.values())):
                        raise bad_request("table-config needs namespace (a list), table and "
                                          "config (string values)")
                    cat.set_table_config(levels, table, config)
                    return self._send(204)
                if self.command == "DELETE":
                    cat.clear_table_configs()
                    return self._send(204)
            if path == "/admin/vending":
                cat = self.server.catalog
                if self.command == "POST":
                    spec = self._json_body(raw)
                    if not isinstance(spec.get("gate"), str) or not isinstance(
                            spec.get("ttl"), (int, float)) or spec["ttl"] <= 0:
                        raise bad_request("vending needs gate (its URL) and ttl (seconds > 0)")
                    cat.vending = {"gate": spec["gate"].rstrip("/"),
                                   "endpoint": spec.get("endpoint") or spec["gate"].rstrip("/"),
                                   "ttl": float(spec["ttl"]),
                                   "expiry_visible": bool(spec.get("expiry_visible", True)),
                                   "credentials_endpoint": bool(spec.get("credentials_endpoint",
                                                                         True))}
                    return self._send(204)
                if self.command == "DELETE":
                    cat.vending = None
                    return self._send(204)
                if self.command == "GET":
                    with cat.issued_lock:
                        return self._send(200, {"issued": list(cat.issued)})
            if path == "/admin/sigv4":
                if self.command == "POST":
                    self.server.sigv4 = SigV4Check(self._json_body(raw))
                    return self._send(204)
                if self.command == "GET":
                    check = self.server.sigv4
                    return self._send(200, check.describe() if check else {})
                if self.command == "DELETE":
                    self.server.sigv4 = None
                    return self._send(204)
            if path == "/admin/idempotency":
                idem = self.server.idempotency
                if self.command == "POST":
                    idem.set(self._json_body(raw).get("lifetime"))
                    return self._send(204)
                if self.command == "DELETE":
                    idem.set(None)
                    return self._send(204)
                if self.command == "GET":
                    return self._send(200, idem.describe())
            if path == "/admin/config":
                cat = self.server.catalog
                if self.command == "POST":
                    spec = self._json_body(raw)
                    extra = {k: spec.get(k) or {} for k in ("defaults", "overrides")}
                    if not all(isinstance(d, dict) and all(isinstance(v, str) for v in d.values())
                               for d in extra.values()):
                        raise bad_request("config needs defaults and overrides objects of strings")
                    cat.extra_config = extra
                    return self._send(204)
                if self.command == "DELETE":
                    cat.extra_config = {"defaults": {}, "overrides": {}}
                    return self._send(204)
            self._error(404, "NotFoundException", "no such admin route")
        except CatalogError as e:
            self._error(e.status, e.type, e.message)
        except re.error as e:
            self._error(400, "BadRequestException", "bad path_regex: %s" % e)

    def _siblings(self, method):
        """This admin request (its path and query) sent to every other
        serving process's private port: their decoded answers."""
        out = []
        for port in self.server.siblings or ():
            req = urllib.request.Request("http://127.0.0.1:%d%s" % (port, self.path),
                                         method=method)
            if self.server.admin_token:
                req.add_header("X-Admin-Token", self.server.admin_token)
            with urllib.request.urlopen(req, timeout=60) as r:
                data = r.read()
            out.append(json.loads(data) if data else None)
        return out

    def do_GET(self):
        self._handle()

    def do_POST(self):
        self._handle()

    def do_DELETE(self):
        self._handle()

    def do_HEAD(self):
        self._handle()

    def do_PUT(self):
        self._handle()


def parse_args(argv):
    p = argparse.ArgumentParser(description="Iceberg REST catalog for the tms tests")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--dsn", required=True, help="libpq connection string of the pointer database")
    p.add_argument("--warehouse", required=True, help="file:///dir or s3://bucket/prefix")
    p.add_argument("--catalog-name", default="tms_test",
                   help="catalog_name in the JDBC tables and the REST prefix")
    p.add_argument("--token-credential", help="ID:SECRET accepted by POST /v1/oauth/tokens")
    p.add_argument("--token-ttl", type=float, default=3600, help="token lifetime in seconds")
    p.add_argument("--static-token", help="a bearer token that is always valid")
    p.add_argument("--admin-token", help="require X-Admin-Token on /admin/*")
    p.add_argument("--s3-endpoint")
    p.add_argument("--s3-access-key-id", default="S3RVER")
    p.add_argument("--s3-secret-access-key", default="S3RVER")
    p.add_argument("--s3-region", default="us-east-1")
    p.add_argument("--azure-endpoint",
                   help="Azure Blob endpoint (Azurite, its development account) for abfs[s]:// and wasb[s]:// files")
    p.add_argument("--gcs-endpoint", help="the GCS (test) server of gs:// tables")
    p.add_argument("--gcs-token", help="the catalog's own bearer token there")
    p.add_argument("--file-root", default=None,
                   help="directory that relative and file://host/... paths resolve against "
                        "(default: the current directory)")
    p.add_argument("--sigv4-region",
                   help="verify the AWS SigV4 signature of every /v1 request for this region")
    p.add_argument("--sigv4-service", default="execute-api",
                   help="the service of the signatures (glue, s3tables; default execute-api)")
    p.add_argument("--sigv4-key", action="append",
                   help="ID:SECRET[:SESSION_TOKEN] a signature may use (repeatable)")
    p.add_argument("--idempotency-key-lifetime", metavar="DURATION",
                   help="advertise this idempotency-key-lifetime (ISO-8601, e.g. PT30M) "
                        "and honour Idempotency-Key")
    p.add_argument("--processes", type=int, default=1,
                   help="serve from this many pre-forked processes (see the module comment)")
    p.add_argument("--verbose", action="store_true", help="log every request to stderr")
    args = p.parse_args(argv)
    if args.processes < 1:
        p.error("--processes must be at least 1")
    if args.processes > 1:
        for opt, val in (("--token-credential", args.token_credential),
                         ("--idempotency-key-lifetime", args.idempotency_key_lifetime)):
            if val:
                p.error("%s keeps its state in one process: not with --processes %d"
                        % (opt, args.processes))
    return args


def main(argv=None):
    args = parse_args(argv if argv is not None else sys.argv[1:])
    if storage_mod.is_s3(args.warehouse) and not args.s3_endpoint:
        raise SystemExit("an s3:// warehouse needs --s3-endpoint")
    server = httpserve.Server(args.port, Handler, verbose=args.verbose)
    server.catalog = Catalog(args)
    server.faults = Faults()
    server.catalog.faults = server.faults
    server.log = RequestLog()
    server.tokens = Tokens(args.token_credential, args.token_ttl, args.static_token)
    server.admin_token = args.admin_token
    server.sigv4 = SigV4Check.from_args(args)
    try:
        server.idempotency = Idempotency(args.idempotency_key_lifetime)
    except CatalogError as e:
        raise SystemExit("--idempotency-key-lifetime: %s" % e.message)
    server.catalog.idempotency = server.idempotency
    if args.processes > 1:
        # each child opens its own PostgreSQL connections
        return httpserve.serve_processes(server, "catalog", args.processes,
                                         before_fork=server.catalog.db._drop_pools)
    httpserve.serve(server, "catalog")
    return 0


if __name__ == "__main__":
    sys.exit(main())
