#!/usr/bin/python3
"""
server.py -- the engine test servers of tms: Apache Livy, Trino and Apache
Gravitino, one program with three personalities.

No Spark, Livy, Trino or Gravitino can be installed on the test machines, so
this server speaks each engine's documented REST protocol and EXECUTES what
it receives for real against the test REST catalog (test/catalog/server.py,
through its REST API as a real engine commits) and its storage:

    /usr/bin/python3 test/engines/server.py --type livy|trino|gravitino \\
        --port PORT --catalog-uri http://127.0.0.1:CPORT --catalog-name lake
        [--catalog-token TOKEN] [--file-root DIR]
        [--s3-endpoint URL --s3-access-key-id ID --s3-secret-access-key KEY
         --s3-region REGION] [--metalake M]
        [--user U --password P | --token T | --oauth2-credential ID:SECRET]
        [--admin-token T] [--startup-delay SECONDS] [--abandon-seconds N]
        [--verbose]

It listens on 127.0.0.1 only, prints "engine listening on http://127.0.0.1:PORT"
once it accepts connections (--port 0 picks a port), exits cleanly on
SIGTERM/SIGINT (the HTTP scaffolding is test/httpserve.py).  Statements are
parsed by test/engines/grammar.py and run by test/engines/actions.py in a
background thread per run.  Besides the procedures, Livy (Spark SQL) and
Trino run DELETE FROM <catalog>.<ns>.<table> WHERE <predicate>, the
statement tms sends for retention (copy-on-write, compact.delete_rows;
Spark answers no rows, Trino its update count: column "rows", and
updateType DELETE with updateCount).

Served, livy (https://livy.apache.org/docs/latest/rest-api.html):
  POST/GET /sessions (?from=&size=)      GET/DELETE /sessions/{id}
  GET  /sessions/{id}/state              GET /sessions/{id}/log
  POST/GET /sessions/{id}/statements     GET /sessions/{id}/statements/{sid}
  POST /sessions/{id}/statements/{sid}/cancel
  Sessions go not_started -> starting -> idle (after --startup-delay,
  default 0.2 s) -> busy -> idle; a second session of a live session's name
  is 400 {"msg": "Duplicate session name: Some(NAME)"} (Livy's
  SessionManager.register; the Option shows in the message).  Errors are
  {"msg": ...}.  kind "sql" statements only (others answer an error output).
  Output {"status":"ok","execution_count":n,"data":{"application/json":
  {"schema":{"type":"struct","fields":[...]},"data":[[...]]}}} or
  {"status":"error","ename","evalue","traceback":[]}.
  A session request's resources are typed as Livy's API documents them
  (driverMemory/executorMemory: Spark size strings such as "4g";
  driverCores/executorCores/numExecutors: ints; conf: a map of strings);
  anything else is 400.  GET /sessions/{id} shows them.

Served, trino (https://trino.io/docs/current/develop/client-protocol.html):
  POST /v1/statement (X-Trino-User required; X-Trino-Catalog, X-Trino-Schema,
  X-Trino-Client-Tags, X-Trino-Session "k=v,..."), GET nextUri (pages:
  QUEUED, RUNNING, a page with columns + data, the last page without
  nextUri), DELETE nextUri (cancel: USER_CANCELED), GET /v1/query
  (BasicQueryInfo list), GET/DELETE /v1/query/{id}.  A query not polled
  for --abandon-seconds (default 300) fails ABANDONED_QUERY, as Trino's
  query.client.timeout.  Catalog session properties
  NAME.expire_snapshots_min_retention / NAME.remove_orphan_files_min_retention
  (default 7d) bound retention_threshold as in Trino's Iceberg connector.

Served, gravitino (https://gravitino.apache.org/docs/latest/manage-jobs-in-gravitino):
  POST/GET /api/metalakes/{m}/jobs/runs (?jobTemplateName=),
  GET  /api/metalakes/{m}/jobs/runs/{jobId},
  POST /api/metalakes/{m}/jobs/runs/{jobId} (cancel),
  GET  /api/metalakes/{m}/jobs/templates (?details=true),
  GET  /api/metalakes/{m}/jobs/templates/{name}.
  {"code":0,"job":{jobId, jobTemplateName, status, audit, jobConf, details}};
  statuses queued, started, succeeded, failed, cancelling, cancelled;
  errors {"code", "type", "message", "stack": []} (ErrorResponse).
  Built-in templates offered: those a Gravitino release ships
  (builtin-sparkpi, builtin-iceberg-rewrite-data-files,
  builtin-iceberg-update-stats, builtin-iceberg-expire-snapshots), or the
  list POST /admin/templates set (builtin-iceberg-rewrite-manifests, as
  later releases ship it, among them); a template not offered is 404
  NoSuchJobTemplateException everywhere.  The jobConf (strings) of
  rewrite-data-files, rewrite-manifests and expire-snapshots becomes the
  Spark CALL the job runs (sparkpi and update-stats runs fail: this
  server does not execute them) (options: a
  JSON object text; older_than: 'YYYY-MM-DD HH:MM:SS' UTC; snapshot_ids:
  comma-separated; booleans true/false); other keys (such as tms_tag) are
  kept and shown.  The Spark resources of a built-in job
  (spark_driver_memory, spark_executor_memory: Spark size strings;
  spark_executor_cores, spark_executor_instances: positive integers;
  spark_conf: a JSON object of spark.* properties, without
  spark.sql.catalog.*, spark.sql.extensions, spark.app.name) fail the run
  when malformed, as spark-submit or the job would.

Authentication: --user/--password (HTTP basic), --token (bearer), or
--oauth2-credential ID:SECRET (bearer tokens from POST /oauth/tokens,
grant_type=client_credentials, form or basic client authentication).
Without any, nothing is checked.  Otherwise 401 in the engine's way.

Test-only admin endpoints (not logged; open unless --admin-token is given,
then they need "X-Admin-Token: TOKEN"), like the catalog's:
  POST   /admin/faults   {"match": {"method": "GET", "path_regex": "..."},
                          "count": N, "action": ..., "seconds": s,
                          "status": 503, "body": "...", "message": "..."}
                          -> {"id": n}; actions:
            status       answer `status` (default 503) with `body` or the
                         engine's error shape, for N matching requests
            hang/latency sleep `seconds`, then serve normally
            close        close the connection unanswered
            fail-run     the next N runs (statement_regex in match) fail
                         with `message`, in the engine's error shape
            stuck-run    the next N runs never finish (until cancelled)
            slow-run     the next N runs take `seconds` longer (cancellable)
            restart      now: forget every session, statement, query and
                         running job (livy ids start again at 0; in-flight
                         gravitino jobs become failed); runs in flight stop
                         at their next checkpoint
            forget       now: as restart, and Gravitino also forgets every
                         job run (an engine whose store of runs was lost):
                         no run is known by its id or its tag afterwards;
                         GET /admin/runs still lists them
  GET    /admin/faults   armed faults          DELETE /admin/faults  disarm
  GET    /admin/runs     {"runs": [{id, engine_id, tag, statement, state,
                          submitted_at, finished_at, result, error,
                          resources}]}; resources: the Livy session's
                          resource members, or Gravitino's spark_* jobConf
  GET    /admin/requests {"counts": {"METHOD /path/{template}": {"200": n}},
                          "total": n}
  DELETE /admin/requests reset the counters
  POST   /admin/templates {"names": [...]} (gravitino) the built-in job
                          templates offered from now on
  POST   /admin/reset    forget everything (state, runs, faults, counters,
                          gravitino's templates)

Rules: 127.0.0.1 only; every wait is bounded; a run is cancelled only at a
checkpoint before its commit (or deletes), after which it completes.
"""

import argparse
import base64
import json
import os
import queue
import random
import re
import secrets
import sys
import threading
import time
import traceback
import urllib.parse

HERE = os.path.dirname(os.path.abspath(__file__))
TEST_DIR = os.path.dirname(HERE)
for _d in (HERE, TEST_DIR, os.path.join(TEST_DIR, "catalog")):
    if _d not in sys.path:
        sys.path.insert(0, _d)

import actions  # noqa: E402
import httpserve  # noqa: E402  (the test world's HTTP scaffolding)
import grammar  # noqa: E402
import storage as storage_mod  # noqa: E402
from grammar import EngineError  # noqa: E402

DAY = 86400

# the options Iceberg's rewrite actions accept (RewriteDataFiles, the bin-pack
# and sort rewriters, RewritePositionDeleteFiles); others are refused
REWRITE_DATA_OPTIONS = {
    "target-file-size-bytes", "min-file-size-bytes", "max-file-size-bytes", "min-input-files",
    "rewrite-all", "max-file-group-size-bytes", "delete-file-threshold", "delete-ratio-threshold",
    "partial-progress.enabled", "partial-progress.max-commits",
    "partial-progress.max-failed-commits", "max-concurrent-file-group-rewrites",
    "use-starting-sequence-number", "rewrite-job-order", "remove-dangling-deletes",
    "output-spec-id", "max-files-to-rewrite", "compression-factor",
    "shuffle-partitions-per-file"}
REWRITE_DELETE_OPTIONS = {
    "target-file-size-bytes", "min-file-size-bytes", "max-file-size-bytes", "min-input-files",
    "rewrite-all", "max-file-group-size-bytes", "partial-progress.enabled",
    "partial-progress.max-commits", "max-concurrent-file-group-rewrites", "rewrite-job-order"}


def check_options(options, allowed, rewriter):
    bad = sorted(set(options or {}) - allowed)
    if bad:
        raise EngineError(grammar.SPARK_ILLEGAL, "Cannot use options [%s], they are not "
                          "supported by the action or the rewriter %s" % (", ".join(bad),
                                                                         rewriter))
STUCK_LIMIT = DAY           # a stuck run gives up after a day at most


def now_iso(t=None):
    t = time.time() if t is None else t
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + ".%03dZ" % int((t % 1) * 1000)


class HttpError(Exception):
    def __init__(self, status, body, headers=None):
        super().__init__(str(body))
        self.status = status
        self.body = body
        self.headers = headers or {}


# ---------------------------------------------------------------------------
# faults, request counters, runs
# ---------------------------------------------------------------------------

REQUEST_ACTIONS = ("status", "hang", "latency", "close")
RUN_ACTIONS = ("fail-run", "stuck-run", "slow-run")


class Faults:
    def __init__(self):
        self.lock = threading.Lock()
        self.items = []
        self.next_id = 1

    def add(self, spec):
        action = spec.get("action", "status")
        if action not in REQUEST_ACTIONS + RUN_ACTIONS + ("restart", "forget"):
            raise HttpError(400, {"error": "unknown fault action %r" % action})
        match = spec.get("match") or {}
        item = {"id": self.next_id, "action": action,
                "method": (match.get("method") or "").upper() or None,
                "path_regex": match.get("path_regex") or ".*",
                "statement_regex": match.get("statement_regex") or "",
                "count": int(spec.get("count", 1)), "status": int(spec.get("status", 503)),
                "seconds": float(spec.get("seconds", 5)), "body": spec.get("body"),
                "message": spec.get("message") or "injected failure"}
        try:
            re.compile(item["path_regex"])
            re.compile(item["statement_regex"])
        except re.error as e:
            raise HttpError(400, {"error": "bad regex: %s" % e})
        with self.lock:
            self.next_id += 1
            if action not in ("restart", "forget"):
                self.items.append(item)
        return item

    def take_request(self, method, path):
        with self.lock:
            for f in self.items:
                if f["count"] <= 0 or f["action"] not in REQUEST_ACTIONS:
                    continue
                if f["method"] and f["method"] != method:
                    continue
                if not re.search(f["path_regex"], path):
                    continue
                f["count"] -= 1
                return dict(f)
        return None

    def take_run(self, statement):
        with self.lock:
            for f in self.items:
                if f["count"] <= 0 or f["action"] not in RUN_ACTIONS:
                    continue
                if f["statement_regex"] and not re.search(f["statement_regex"], statement):
                    continue
                f["count"] -= 1
                return dict(f)
        return None

    def list(self):
        with self.lock:
            return [dict(f) for f in self.items if f["count"] > 0]

    def clear(self):
        with self.lock:
            self.items = []


class Counters:
    def __init__(self):
        self.lock = threading.Lock()
        self.counts = {}
        self.total = 0

    def add(self, method, template, status):
        with self.lock:
            by = self.counts.setdefault("%s %s" % (method, template), {})
            by[str(status)] = by.get(str(status), 0) + 1
            self.total += 1

    def snapshot(self):
        with self.lock:
            return {"counts": json.loads(json.dumps(self.counts)), "total": self.total}

    def reset(self):
        with self.lock:
            self.counts = {}
            self.total = 0


class Run:
    """One statement (or job) the engine runs: the admin view of it."""

    _seq = 0
    _lock = threading.Lock()

    def __init__(self, engine_id, tag, statement):
        with Run._lock:
            Run._seq += 1
            self.id = Run._seq
        self.engine_id = engine_id
        self.tag = tag
        self.statement = statement
        self.state = "submitted"
        self.submitted_at = time.time()
        self.started_at = None
        self.finished_at = None
        self.columns = None      # [(name, type)]
        self.rows = None
        self.result = None
        self.error = None        # EngineError
        self.cancel = threading.Event()
        self.generation = None
        self.done = threading.Event()
        self.resources = None    # what the run asked of Spark (see spark_resources)

    def view(self):
        return {"id": self.id, "engine_id": self.engine_id, "tag": self.tag,
                "statement": self.statement, "state": self.state,
                "submitted_at": self.submitted_at, "started_at": self.started_at,
                "finished_at": self.finished_at, "result": self.result,
                "columns": [c for c, _ in self.columns] if self.columns else None,
                "rows": self.rows, "resources": self.resources,
                "error": None if self.error is None else
                {"kind": self.error.kind, "message": self.error.message}}


# ---------------------------------------------------------------------------
# the engine: statements to effects
# ---------------------------------------------------------------------------

class Engine:
    def __init__(self, args):
        self.args = args
        self.catalog_name = args.catalog_name
        s3 = None
        if args.s3_endpoint:
            s3 = storage_mod.S3Config(args.s3_endpoint, args.s3_access_key_id,
                                      args.s3_secret_access_key, args.s3_region)
        self.st = storage_mod.Storage(s3=s3, file_root=args.file_root)
        self.faults = Faults()
        self.counters = Counters()
        self.runs_lock = threading.Lock()
        self.runs = []
        self.generation = 0
        self.stopping = threading.Event()

    def rest(self):
        return actions.RestCatalog(self.args.catalog_uri, self.args.catalog_token)

    def add_run(self, run):
        run.generation = self.generation
        with self.runs_lock:
            self.runs.append(run)

    def start(self, run, fn):
        """Run fn(run) -> (columns, rows, result) in a thread, recording
        the outcome on run (state running, succeeded, failed, cancelled)."""
        def body():
            run.started_at = time.time()
            run.state = "running"
            try:
                fault = self.faults.take_run(run.statement)
                if fault and fault["action"] == "fail-run":
                    raise EngineError("INJECTED", fault["message"])
                if fault and fault["action"] == "stuck-run":
                    deadline = time.time() + STUCK_LIMIT
                    while time.time() < deadline and not self.stopping.is_set():
                        if run.cancel.wait(0.2):
                            break
                    raise actions.Cancelled()
                if fault and fault["action"] == "slow-run":
                    if run.cancel.wait(min(float(fault.get("seconds") or 0), STUCK_LIMIT)):
                        raise actions.Cancelled()
                self.checkpoint(run)
                cols, rows, result = fn(run)
                run.columns, run.rows, run.result = cols, rows, result
                run.state = "succeeded"
            except actions.Cancelled:
                run.state = "cancelled"
            except EngineError as e:
                run.error = e
                run.state = "failed"
            except Exception as e:     # a bug or an I/O error: the engine's internal error
                traceback.print_exc()
                run.error = EngineError("java.lang.RuntimeException", "%s: %s"
                                        % (type(e).__name__, e))
                run.state = "failed"
            run.finished_at = time.time()
            run.done.set()
        threading.Thread(target=body, daemon=True).start()

    def checkpoint(self, run):
        if run.cancel.is_set() or run.generation != self.generation:
            raise actions.Cancelled()

    # -- Spark (livy, gravitino) ---------------------------------------------------

    def spark_table(self, text):
        try:
            parts = grammar.parse_multipart(text)
        except EngineError as e:
            raise EngineError(grammar.SPARK_PARSE, e.message)
        if len(parts) > 1 and parts[0] == self.catalog_name:
            parts = parts[1:]
        if len(parts) == 1:
            parts = ["default"] + parts
        return parts[:-1], parts[-1]

    def partition_fields(self, meta):
        names = set()
        for spec in meta.get("partition-specs") or []:
            for f in spec.get("fields") or []:
                names.add(f["name"])
        return names

    def check_predicate(self, pred, ns, name, dialect):
        if pred is None:
            return
        _, meta = self.rest().load(ns, name)
        have = self.partition_fields(meta)
        cols = {c for s in meta.get("schemas") or [] for c in
                [f["name"] for f in s.get("fields") or []]}
        for c in pred.columns:
            if c in have:
                continue
            if dialect == "spark":
                if c not in cols:
                    raise EngineError(grammar.SPARK_ANALYSIS,
                                      "[UNRESOLVED_COLUMN.WITH_SUGGESTION] A column or function "
                                      "parameter with name `%s` cannot be resolved." % c)
                raise EngineError(grammar.SPARK_ANALYSIS,
                                  "Cannot translate Spark expression to data source filter: "
                                  "%s is not a partition column of this test engine" % c)
            if c not in cols:
                raise EngineError("COLUMN_NOT_FOUND", "line 1:1: Column '%s' cannot be resolved"
                                  % c, 47)
            raise EngineError("NOT_SUPPORTED", "Unexpected FilterNode found in plan; probably "
                              "connector was not able to handle provided WHERE expression", 13)

    def check_row_columns(self, pred, ns, name, dialect):
        """Every column a DELETE's WHERE names is one of the table's (Trino:
        names fold to lower case)."""
        _, meta = self.rest().load(ns, name)
        schema = next(s for s in meta["schemas"] if s.get("schema-id") ==
                      meta.get("current-schema-id", 0))
        cols = {f["name"].lower() if dialect == "trino" else f["name"]
                for f in schema["fields"]}
        for c in pred.columns:
            if c in cols:
                continue
            if dialect == "spark":
                raise EngineError(grammar.SPARK_ANALYSIS, "[UNRESOLVED_COLUMN.WITH_SUGGESTION] A "
                                  "column or function parameter with name `%s` cannot be "
                                  "resolved." % c)
            raise EngineError("COLUMN_NOT_FOUND", "line 1:1: Column '%s' cannot be resolved"
                              % c, 47)

    def run_spark_delete(self, run, text):
        """DELETE FROM cat.ns.t WHERE ...: Spark answers no rows."""
        d = grammar.parse_delete(text, "spark")
        if len(d.name) < 3 or d.name[0] != self.catalog_name:
            raise EngineError(grammar.SPARK_ANALYSIS, "[TABLE_OR_VIEW_NOT_FOUND] The table or "
                              "view %s cannot be found." % ".".join(
                                  grammar.spark_ident(x) for x in d.name))
        ns, name = d.name[1:-1], d.name[-1]
        try:
            self.check_row_columns(d.where, ns, name, "spark")
            self.checkpoint(run)
            res = actions.delete_rows(self.rest(), self.st, ns, name, d.where)
        except actions.NoSuchTable:
            raise EngineError(grammar.SPARK_ANALYSIS, "[TABLE_OR_VIEW_NOT_FOUND] The table or "
                              "view %s cannot be found." % ".".join(d.name))
        return [], [], res

    def run_spark(self, run, text):
        """Parse and execute a Spark SQL CALL (or DELETE); returns (columns, rows, result)."""
        if grammar.is_delete(text):
            return self.run_spark_delete(run, text)
        call = grammar.parse_spark(text)
        if call.catalog is None or call.catalog != self.catalog_name:
            raise EngineError(grammar.SPARK_ANALYSIS, "[CATALOG_NOT_FOUND] The catalog `%s` not "
                              "found." % (call.catalog or "spark_catalog"))
        a = call.args
        ns, name = self.spark_table(a["table"])
        cat = self.rest()
        check = lambda: self.checkpoint(run)  # noqa: E731
        now = time.time()
        try:
            if call.procedure == "expire_snapshots":
                if a.get("retain_last") is not None and a["retain_last"] < 1:
                    raise EngineError(grammar.SPARK_ILLEGAL, "Number of snapshots to retain must "
                                      "be at least 1, cannot be: %d" % a["retain_last"])
                if a.get("max_concurrent_deletes") is not None and a["max_concurrent_deletes"] <= 0:
                    raise EngineError(grammar.SPARK_ILLEGAL, "max_concurrent_deletes should have "
                                      "value > 0, value: %d" % a["max_concurrent_deletes"])
                older = a["older_than"].micros // 1000 if a.get("older_than") else None
                res = actions.expire_snapshots(cat, self.st, ns, name, older_than_ms=older,
                                               retain_last=a.get("retain_last"),
                                               snapshot_ids=a.get("snapshot_ids") or (),
                                               check=check)
            elif call.procedure == "remove_orphan_files":
                mode = a.get("prefix_mismatch_mode")
                if mode is not None and mode.upper() not in ("ERROR", "IGNORE", "DELETE"):
                    raise EngineError(grammar.SPARK_ILLEGAL, "No enum constant org.apache."
                                      "iceberg.actions.DeleteOrphanFiles.PrefixMismatchMode.%s"
                                      % mode)
                if a.get("max_concurrent_deletes") is not None and a["max_concurrent_deletes"] <= 0:
                    raise EngineError(grammar.SPARK_ILLEGAL, "max_concurrent_deletes should have "
                                      "value > 0, value: %d" % a["max_concurrent_deletes"])
                older = a["older_than"].micros / 1e6 if a.get("older_than") else now - 3 * DAY
                out = actions.remove_orphan_files(cat, self.st, ns, name, older,
                                                  location=a.get("location"),
                                                  dry_run=bool(a.get("dry_run")), check=check)
                res = {"orphan_file_location": out["orphans"]}
                return (call.columns, [[u] for u in out["orphans"]], res)
            elif call.procedure == "rewrite_manifests":
                res = actions.rewrite_manifests(cat, self.st, ns, name, spec_id=a.get("spec_id"),
                                                check=check)
            elif call.procedure == "rewrite_position_delete_files":
                check_options(a.get("options"), REWRITE_DELETE_OPTIONS, "POSITION-DELETES")
                pred = grammar.parse_predicate(a["where"]) if a.get("where") else None
                self.check_predicate(pred, ns, name, "spark")
                res = actions.rewrite_position_delete_files(cat, self.st, ns, name, pred,
                                                            a.get("options"))
            else:
                strategy = a.get("strategy", "binpack")
                if strategy.lower() not in ("binpack", "sort"):
                    raise EngineError(grammar.SPARK_ILLEGAL, "unsupported strategy: %s. Only "
                                      "binpack or sort is supported" % strategy)
                if a.get("sort_order") and strategy.lower() == "binpack" and "strategy" in a:
                    raise EngineError(grammar.SPARK_ILLEGAL, "Cannot set strategy to binpack "
                                      "with a sort_order")
                check_options(a.get("options"), REWRITE_DATA_OPTIONS,
                              "SORT" if strategy.lower() == "sort" else "BIN-PACK")
                pred = grammar.parse_predicate(a["where"]) if a.get("where") else None
                self.check_predicate(pred, ns, name, "spark")
                check()
                res = actions.rewrite_data_files(cat, self.st, ns, name,
                                                 strategy=strategy.lower(),
                                                 sort_order=a.get("sort_order"), predicate=pred,
                                                 options=a.get("options") or {})
        except actions.NoSuchTable:
            raise EngineError(grammar.SPARK_ANALYSIS, "Couldn't load table '%s' in catalog '%s'"
                              % (a["table"], self.catalog_name))
        row = [res.get(c, 0) for c, _ in call.columns]
        return call.columns, [row], {c: res.get(c, 0) for c, _ in call.columns}

    # -- Trino ----------------------------------------------------------------

    def run_trino(self, run, text, catalog, schema, session):
        delete = grammar.parse_delete(text, "trino") if grammar.is_delete(text) else None
        ex = delete or grammar.parse_trino(text)
        run.update_type = "DELETE" if delete else "ALTER TABLE EXECUTE"
        name = list(ex.name)
        if len(name) == 1:
            if not schema:
                raise EngineError("MISSING_SCHEMA_NAME", "line 1:13: Schema must be specified "
                                  "when session schema is not set", 42)
            name = [schema] + name
        if len(name) == 2:
            if not catalog:
                raise EngineError("MISSING_CATALOG_NAME", "line 1:13: Catalog must be specified "
                                  "when session catalog is not set", 41)
            name = [catalog] + name
        cname, sname, tname = name
        if cname != self.catalog_name:
            raise EngineError("CATALOG_NOT_FOUND", "line 1:13: Catalog '%s' not found" % cname, 44)
        ns = [sname]
        cat = self.rest()
        check = lambda: self.checkpoint(run)  # noqa: E731
        props = {k[len(cname) + 1:]: v for k, v in session.items() if k.startswith(cname + ".")}
        try:
            if delete:
                # Trino answers a DELETE with its update count, column "rows"
                self.check_row_columns(delete.where, ns, tname, "trino")
                check()
                res = actions.delete_rows(cat, self.st, ns, tname, delete.where, fold_case=True)
                return [("rows", "bigint")], [[res["rows"]]], res
            if ex.procedure in ("expire_snapshots", "remove_orphan_files"):
                threshold = ex.args.get("retention_threshold", 7 * DAY)
                key = ex.procedure + "_min_retention"
                minimum = grammar.parse_duration(props.get(key, "7d"))
                if minimum is None:
                    raise EngineError("INVALID_SESSION_PROPERTY", "%s.%s is invalid: %s"
                                      % (cname, key, props[key]), 14)
                if threshold < minimum:
                    conf = key.replace("_", "-").replace("-min-retention", ".min-retention")
                    raise EngineError("INVALID_PROCEDURE_ARGUMENT",
                                      "Retention specified (%.2fd) is shorter than the minimum "
                                      "retention configured in the system (%.2fd). Minimum "
                                      "retention can be changed with iceberg.%s configuration "
                                      "property or iceberg.%s session property"
                                      % (threshold / DAY, minimum / DAY, conf, key), 30)
                cutoff = time.time() - threshold
                if ex.procedure == "expire_snapshots":
                    res = actions.expire_snapshots(cat, self.st, ns, tname,
                                                   older_than_ms=int(cutoff * 1000), check=check)
                    metrics = [("deleted_data_files_count", res["deleted_data_files_count"]),
                               ("deleted_position_delete_files_count",
                                res["deleted_position_delete_files_count"]),
                               ("deleted_equality_delete_files_count",
                                res["deleted_equality_delete_files_count"]),
                               ("deleted_manifests_count", res["deleted_manifest_files_count"]),
                               ("deleted_manifest_lists_count",
                                res["deleted_manifest_lists_count"]),
                               ("deleted_statistics_files_count",
                                res["deleted_statistics_files_count"])]
                else:
                    out = actions.remove_orphan_files(cat, self.st, ns, tname, cutoff,
                                                      check=check)
                    metrics = [("processed_manifests_count", out["manifests"]),
                               ("active_files_count", out["active"]),
                               ("scanned_files_count", out["scanned"]),
                               ("deleted_files_count", len(out["orphans"]))]
                    res = dict(metrics, orphans=out["orphans"])
                return ([("metric_name", "varchar"), ("metric_value", "bigint")],
                        [[k, v] for k, v in metrics], res)
            if ex.procedure == "optimize_manifests":
                res = actions.rewrite_manifests(cat, self.st, ns, tname, check=check)
                return None, None, res
            self.check_predicate(ex.where, ns, tname, "trino")
            check()
            # Trino's default threshold is 100MB (its Iceberg connector docs)
            res = actions.rewrite_data_files(cat, self.st, ns, tname, predicate=ex.where,
                                             file_size_threshold=ex.args.get(
                                                 "file_size_threshold", 100 * 1024 * 1024))
            rows = actions.added_rows(cat, self.st, ns, tname) \
                if res.get("added_data_files_count") else 0
            return [("rows", "bigint")], [[rows]], dict(res, rows=rows)
        except actions.NoSuchTable:
            raise EngineError("TABLE_NOT_FOUND", "line 1:13: Table '%s.%s.%s' does not exist"
                              % (cname, sname, tname), 46)


# ---------------------------------------------------------------------------
# authentication
# ---------------------------------------------------------------------------

class Auth:
    def __init__(self, args):
        self.user = args.user
        self.password = args.password
        self.token = args.token
        self.client_id = self.secret = None
        if args.oauth2_credential:
            if ":" not in args.oauth2_credential:
                raise SystemExit("--oauth2-credential must be ID:SECRET")
            self.client_id, self.secret = args.oauth2_credential.split(":", 1)
        self.issued = {}
        self.lock = threading.Lock()

    @property
    def enabled(self):
        return bool(self.password is not None or self.token or self.client_id)

    def check(self, header):
        """The authenticated user name ("" when anonymous), or None."""
        if not self.enabled:
            return ""
        if not header:
            return None
        scheme, _, cred = header.partition(" ")
        if scheme.lower() == "basic" and self.password is not None:
            try:
                u, _, p = base64.b64decode(cred.strip()).decode().partition(":")
            except Exception:
                return None
            if secrets.compare_digest(u, self.user or "") and \
                    secrets.compare_digest(p, self.password):
                return u
            return None
        if scheme.lower() == "bearer":
            cred = cred.strip()
            if self.token and secrets.compare_digest(cred, self.token):
                return self.user or "token"
            with self.lock:
                exp = self.issued.get(cred)
            if exp is not None and exp > time.time():
                return self.client_id
        return None

    def issue(self, form, header):
        cid, sec = form.get("client_id"), form.get("client_secret")
        if header and header.lower().startswith("basic "):
            try:
                cid, _, sec = base64.b64decode(header[6:].strip()).decode().partition(":")
                cid, sec = urllib.parse.unquote(cid), urllib.parse.unquote(sec)
            except Exception:
                cid = sec = None
        if form.get("grant_type") != "client_credentials":
            raise HttpError(400, {"error": "unsupported_grant_type",
                                  "error_description": "grant_type must be client_credentials"})
        if not self.client_id or cid != self.client_id or not sec or \
                not secrets.compare_digest(sec, self.secret):
            raise HttpError(401, {"error": "invalid_client",
                                  "error_description": "Client authentication failed"})
        tok = secrets.token_urlsafe(24)
        with self.lock:
            self.issued[tok] = time.time() + 3600
        return {"access_token": tok, "token_type": "bearer", "expires_in": 3600,
                "issued_token_type": "urn:ietf:params:oauth:token-type:access_token",
                "scope": form.get("scope") or ""}


# ---------------------------------------------------------------------------
# Livy
# ---------------------------------------------------------------------------

class LivySession:
    def __init__(self, sid, req, owner):
        self.id = sid
        self.name = req.get("name")
        self.kind = req.get("kind") or "shared"
        self.owner = owner or None
        self.proxy_user = req.get("proxyUser")
        self.conf = req.get("conf") or {}
        self.resources = {k: req[k] for k in LIVY_RESOURCE_FIELDS if req.get(k) is not None}
        self.state = "not_started"
        self.statements = []
        self.queue = queue.Queue()
        self.log = ["stdout: ", "\nstderr: "]
        self.created = time.time()

    def view(self):
        return {"id": self.id, "name": self.name, "appId": None, "owner": self.owner,
                "proxyUser": self.proxy_user, "state": self.state, "kind": self.kind,
                "appInfo": {"driverLogUrl": None, "sparkUiUrl": None},
                "log": self.log[-100:], "ttl": None,
                "driverMemory": self.resources.get("driverMemory"),
                "driverCores": self.resources.get("driverCores", 0),
                "executorMemory": self.resources.get("executorMemory"),
                "executorCores": self.resources.get("executorCores", 0), "conf": self.conf,
                "archives": [], "files": [], "heartbeatTimeoutInSecond": 0, "jars": [],
                "numExecutors": self.resources.get("numExecutors", 0), "pyFiles": [],
                "queue": None}


class LivyStatement:
    def __init__(self, sid, code, kind, run):
        self.id = sid
        self.code = code
        self.kind = kind
        self.run = run
        self.state = "waiting"
        self.output = None
        self.started = 0
        self.completed = 0

    def view(self):
        return {"id": self.id, "code": self.code, "state": self.state, "output": self.output,
                "progress": 1.0 if self.state in ("available", "cancelled") else 0.0,
                "started": self.started, "completed": self.completed}


LIVY_SESSION_FIELDS = {"kind", "proxyUser", "jars", "pyFiles", "files", "driverMemory",
                       "driverCores", "executorMemory", "executorCores", "numExecutors",
                       "archives", "queue", "name", "conf", "heartbeatTimeoutInSecond", "ttl"}
LIVY_KINDS = ("spark", "pyspark", "sparkr", "sql", "shared")
# The resources of a session request and their types, as Livy's REST API
# documents them (https://livy.apache.org/docs/latest/rest-api.html, POST
# /sessions): memory strings as spark-submit reads them, counts ints, conf a
# map of strings.
LIVY_RESOURCE_FIELDS = ("driverMemory", "driverCores", "executorMemory", "executorCores",
                        "numExecutors", "conf")
# Spark's size strings (JavaUtils.byteStringAs): digits and an optional unit.
SPARK_MEMORY = re.compile(r"(?i)[0-9]+(b|k|kb|m|mb|g|gb|t|tb|p|pb)?")


def livy_resources_error(body):
    """Why Livy's request parser would refuse the resources of body, or None."""
    for k in ("driverMemory", "executorMemory"):
        v = body.get(k)
        if v is not None and (not isinstance(v, str) or not SPARK_MEMORY.fullmatch(v)):
            return "Cannot deserialize value of type `java.lang.String` for %s: %r" % (k, v) \
                if not isinstance(v, str) else \
                "Invalid %s %r: size must be specified as bytes (b), kibibytes (k), " \
                "mebibytes (m), gibibytes (g), tebibytes (t), or pebibytes(p)" % (k, v)
    for k in ("driverCores", "executorCores", "numExecutors"):
        v = body.get(k)
        if v is not None and (not isinstance(v, int) or isinstance(v, bool)
                              or not 0 < v < 2 ** 31):
            return "Cannot deserialize value of type `int` for %s: %r" % (k, v)
    conf = body.get("conf")
    if conf is not None and (not isinstance(conf, dict) or
                             any(not isinstance(v, str) for v in conf.values())):
        return "Cannot deserialize value of type `Map[String,String]` for conf: %r" % (conf,)
    return None



class Livy:
    ROUTES = [
        ("GET", r"/sessions", "/sessions", "list"),
        ("POST", r"/sessions", "/sessions", "create"),
        ("GET", r"/sessions/(\d+)", "/sessions/{id}", "get"),
        ("DELETE", r"/sessions/(\d+)", "/sessions/{id}", "delete"),
        ("GET", r"/sessions/(\d+)/state", "/sessions/{id}/state", "state"),
        ("GET", r"/sessions/(\d+)/log", "/sessions/{id}/log", "log"),
        ("GET", r"/sessions/(\d+)/statements", "/sessions/{id}/statements", "stmts"),
        ("POST", r"/sessions/(\d+)/statements", "/sessions/{id}/statements", "submit"),
        ("GET", r"/sessions/(\d+)/statements/(\d+)", "/sessions/{id}/statements/{sid}", "stmt"),
        ("POST", r"/sessions/(\d+)/statements/(\d+)/cancel",
         "/sessions/{id}/statements/{sid}/cancel", "cancel"),
    ]

    def __init__(self, engine, args):
        self.engine = engine
        self.args = args
        self.lock = threading.Lock()
        self.reset()

    def reset(self):
        with self.lock:
            self.sessions = {}
            self.next_id = 0

    def error(self, status, msg):
        return HttpError(status, {"msg": msg})

    def unauthorized(self):
        return HttpError(401, "<html><body><h2>HTTP ERROR 401</h2><p>Authentication required"
                         "</p></body></html>", {"Content-Type": "text/html",
                                                "WWW-Authenticate": "Basic realm=\"livy\""})

    def not_found(self, path):
        return HttpError(404, "Not Found: %s" % path, {"Content-Type": "text/plain"})

    def session(self, sid):
        with self.lock:
            s = self.sessions.get(int(sid))
        if s is None:
            raise self.error(404, "Session '%s' not found." % sid)
        return s

    def handle(self, name, m, req):
        return getattr(self, "h_" + name)(m, req)

    def h_list(self, m, req):
        q = req.query
        try:
            frm = int(q.get("from", 0))
            size = int(q.get("size", 100))
        except ValueError:
            raise self.error(400, "from and size must be numbers")
        with self.lock:
            all_ = sorted(self.sessions.values(), key=lambda s: s.id)
        return 200, {"from": frm, "total": len(all_),
                     "sessions": [s.view() for s in all_[frm:frm + size]]}

    def h_create(self, m, req):
        body = req.json()
        if not isinstance(body, dict):
            raise self.error(400, "Rejected, request body is not a JSON object")
        for k in body:
            if k not in LIVY_SESSION_FIELDS:
                raise self.error(400, "Unrecognized field \"%s\" (class org.apache.livy.server."
                                 "interactive.CreateInteractiveRequest), not marked as ignorable"
                                 % k)
        if body.get("kind") is not None and body["kind"] not in LIVY_KINDS:
            raise self.error(400, "Invalid kind: %s" % body["kind"])
        bad = livy_resources_error(body)
        if bad:
            raise self.error(400, bad)
        with self.lock:
            sid = self.next_id
            self.next_id += 1
            s = LivySession(sid, body, req.user)
            if s.name is not None:
                if any(o.name == s.name for o in self.sessions.values()):
                    raise self.error(400, "Duplicate session name: Some(%s) for session %d"
                                     % (s.name, sid))
            self.sessions[sid] = s
        gen = self.engine.generation
        threading.Thread(target=self.session_main, args=(s, gen), daemon=True).start()
        return 201, s.view(), {"Location": "/sessions/%d" % sid}

    def session_main(self, s, gen):
        """Start the session, then run its statements one at a time."""
        time.sleep(0.01)
        s.state = "starting"
        time.sleep(max(0.0, self.args.startup_delay))
        if s.state != "starting":
            return
        s.state = "idle"
        while not self.engine.stopping.is_set() and gen == self.engine.generation:
            try:
                stmt = s.queue.get(timeout=0.2)
            except queue.Empty:
                if s.state in ("shutting_down", "dead", "killed"):
                    return
                continue
            if stmt is None:
                return
            if stmt.state != "waiting":
                continue
            s.state = "busy"
            stmt.state = "running"
            stmt.started = int(time.time() * 1000)
            self.engine.start(stmt.run, lambda run, st=stmt: self.execute(run, st))
            stmt.run.done.wait(STUCK_LIMIT + 60)
            self.finish(s, stmt)

    def execute(self, run, stmt):
        if stmt.kind != "sql":
            raise EngineError("NotImplementedError", "this test engine runs kind \"sql\" only")
        return self.engine.run_spark(run, stmt.code)

    def finish(self, s, stmt):
        run = stmt.run
        stmt.completed = int(time.time() * 1000)
        if run.state == "cancelled":
            stmt.state = "cancelled"
        elif run.state == "succeeded":
            fields = [{"name": c, "type": grammar.LIVY_TYPE.get(t, t), "nullable": True,
                       "metadata": {}} for c, t in run.columns]
            stmt.output = {"status": "ok", "execution_count": stmt.id,
                           "data": {"application/json": {
                               "schema": {"type": "struct", "fields": fields},
                               "data": run.rows}}}
            stmt.state = "available"
        else:
            e = run.error
            stmt.output = {"status": "error", "execution_count": stmt.id, "ename": e.kind,
                           "evalue": e.message, "traceback": []}
            stmt.state = "available"
        s.log.append("statement %d: %s" % (stmt.id, run.state))
        if s.state == "busy":
            s.state = "idle"

    def h_get(self, m, req):
        return 200, self.session(m.group(1)).view()

    def h_state(self, m, req):
        s = self.session(m.group(1))
        return 200, {"id": s.id, "state": s.state}

    def h_log(self, m, req):
        s = self.session(m.group(1))
        frm = int(req.query.get("from", 0))
        size = int(req.query.get("size", 100))
        return 200, {"id": s.id, "from": frm, "total": len(s.log), "log": s.log[frm:frm + size]}

    def h_delete(self, m, req):
        s = self.session(m.group(1))
        s.state = "shutting_down"
        for st in s.statements:
            st.run.cancel.set()
            if st.state == "waiting":
                st.state = "cancelled"
                st.run.state = "cancelled"
                st.run.finished_at = time.time()
                st.run.done.set()
        s.queue.put(None)
        with self.lock:
            self.sessions.pop(s.id, None)
        s.state = "dead"
        return 200, {"msg": "deleted"}

    def h_stmts(self, m, req):
        s = self.session(m.group(1))
        return 200, {"total_statements": len(s.statements),
                     "statements": [st.view() for st in s.statements]}

    def h_submit(self, m, req):
        s = self.session(m.group(1))
        body = req.json()
        if not isinstance(body, dict) or "code" not in body:
            raise self.error(400, "Rejected, code is required")
        for k in body:
            if k not in ("code", "kind"):
                raise self.error(400, "Unrecognized field \"%s\" (class org.apache.livy."
                                 "ExecuteRequest), not marked as ignorable" % k)
        if s.state not in ("idle", "busy"):
            raise self.error(400, "Session is in state %s" % s.state)
        kind = body.get("kind") or (s.kind if s.kind != "shared" else "spark")
        if kind not in LIVY_KINDS[:4]:
            raise self.error(400, "Invalid kind: %s" % kind)
        run = Run("%d/%d" % (s.id, len(s.statements)), s.name, body["code"])
        run.resources = dict(s.resources) or None
        stmt = LivyStatement(len(s.statements), body["code"], kind, run)
        self.engine.add_run(run)
        s.statements.append(stmt)
        s.queue.put(stmt)
        return 201, stmt.view(), {"Location": "/sessions/%d/statements/%d" % (s.id, stmt.id)}

    def stmt(self, m):
        s = self.session(m.group(1))
        k = int(m.group(2))
        if k >= len(s.statements):
            raise self.error(404, "Statement not found")
        return s, s.statements[k]

    def h_stmt(self, m, req):
        return 200, self.stmt(m)[1].view()

    def h_cancel(self, m, req):
        s, st = self.stmt(m)
        if st.state == "waiting":
            st.state = "cancelled"
            st.run.state = "cancelled"
            st.run.finished_at = time.time()
            st.run.done.set()
        elif st.state == "running":
            st.state = "cancelling"
            st.run.cancel.set()
        return 200, {"msg": "canceled"}

    def restart(self):
        with self.lock:
            for s in self.sessions.values():
                for st in s.statements:
                    st.run.cancel.set()
                s.queue.put(None)
        self.reset()


# ---------------------------------------------------------------------------
# Trino
# ---------------------------------------------------------------------------

TRINO_ERRORS = {"USER_CANCELED": (3, "USER_ERROR"), "ABANDONED_QUERY": (2, "USER_ERROR"),
                "SYNTAX_ERROR": (1, "USER_ERROR"), "GENERIC_INTERNAL_ERROR": (65536,
                                                                              "INTERNAL_ERROR")}


class TrinoQuery:
    def __init__(self, qid, text, user, catalog, schema, tags, session, run):
        self.id = qid
        self.slug = "x" + secrets.token_hex(16)
        self.text = text
        self.user = user
        self.catalog = catalog
        self.schema = schema
        self.tags = tags
        self.session = session
        self.run = run
        self.expect = 1
        self.pages = {}
        self.last_access = time.time()
        self.data_sent = False
        self.created = time.time()
        self.killed = None      # (errorName, message)
        self.done_at = None

    def state(self):
        st = self.run.state
        if st in ("submitted",):
            return "QUEUED"
        if st == "running":
            return "RUNNING"
        if st == "succeeded":
            return "FINISHED" if self.data_sent or not self.run.columns else "RUNNING"
        return "FAILED"


class Trino:
    ROUTES = [
        ("POST", r"/v1/statement", "/v1/statement", "submit"),
        ("GET", r"/v1/statement/(queued|executing)/([^/]+)/([^/]+)/(\d+)",
         "/v1/statement/{phase}/{queryId}/{slug}/{token}", "next"),
        ("DELETE", r"/v1/statement/(queued|executing)/([^/]+)/([^/]+)/(\d+)",
         "/v1/statement/{phase}/{queryId}/{slug}/{token}", "cancel"),
        ("GET", r"/v1/query", "/v1/query", "list"),
        ("GET", r"/v1/query/([^/]+)", "/v1/query/{queryId}", "info"),
        ("DELETE", r"/v1/query/([^/]+)", "/v1/query/{queryId}", "kill"),
        ("GET", r"/v1/info", "/v1/info", "serverinfo"),
    ]

    def __init__(self, engine, args):
        self.engine = engine
        self.args = args
        self.lock = threading.Lock()
        self.seq = 0
        self.reset()
        threading.Thread(target=self.reaper, daemon=True).start()

    def reset(self):
        with self.lock:
            self.queries = {}

    def base(self):
        return "http://127.0.0.1:%d" % self.args.port

    def error(self, status, msg):
        return HttpError(status, msg, {"Content-Type": "text/plain"})

    def unauthorized(self):
        scheme = "Basic" if self.engine.args.password is not None else "Bearer"
        return HttpError(401, "Unauthorized", {"Content-Type": "text/plain",
                                               "WWW-Authenticate": '%s realm="Trino"' % scheme})

    def not_found(self, path):
        return HttpError(404, "Error 404 Not Found", {"Content-Type": "text/plain"})

    def handle(self, name, m, req):
        return getattr(self, "h_" + name)(m, req)

    def new_id(self):
        with self.lock:
            self.seq += 1
            n = self.seq
        return time.strftime("%Y%m%d_%H%M%S", time.gmtime()) + "_%05d_%s" % (
            n, "".join(random.choice("abcdefghijkmnpqrstuvwxyz23456789") for _ in range(5)))

    def h_serverinfo(self, m, req):
        return 200, {"nodeVersion": {"version": "tms-test"}, "environment": "test",
                     "coordinator": True, "starting": False, "uptime": "1.00m"}

    def h_submit(self, m, req):
        user = req.headers.get("X-Trino-User")
        if not user:
            raise self.error(400, "User must be set")
        text = req.body.decode("utf-8", "replace")
        if not text.strip():
            raise self.error(400, "SQL statement is empty")
        tags = [t.strip() for t in (req.headers.get("X-Trino-Client-Tags") or "").split(",")
                if t.strip()]
        session = {}
        for part in (req.headers.get("X-Trino-Session") or "").split(","):
            if not part.strip():
                continue
            if "=" not in part:
                raise self.error(400, "Invalid X-Trino-Session header")
            k, v = part.split("=", 1)
            session[k.strip()] = urllib.parse.unquote(v.strip())
        qid = self.new_id()
        run = Run(qid, ",".join(tags) or None, text)
        q = TrinoQuery(qid, text, user, req.headers.get("X-Trino-Catalog"),
                       req.headers.get("X-Trino-Schema"), tags, session, run)
        self.engine.add_run(run)
        with self.lock:
            self.queries[qid] = q
        self.engine.start(run, lambda r: self.engine.run_trino(r, text, q.catalog, q.schema,
                                                                 q.session))
        page = self.results(q, "queued", 0, first=True)
        return 200, page

    def uri(self, q, phase, token):
        return "%s/v1/statement/%s/%s/%s/%d" % (self.base(), phase, q.id, q.slug, token)

    def stats(self, q, state):
        return {"state": state, "queued": state == "QUEUED", "scheduled": state != "QUEUED",
                "nodes": 1, "totalSplits": 0, "queuedSplits": 0, "runningSplits": 0,
                "completedSplits": 0, "cpuTimeMillis": 0, "wallTimeMillis":
                int((time.time() - q.created) * 1000), "queuedTimeMillis": 0,
                "elapsedTimeMillis": int((time.time() - q.created) * 1000),
                "processedRows": 0, "processedBytes": 0, "physicalInputBytes": 0,
                "peakMemoryBytes": 0, "spilledBytes": 0}

    def error_obj(self, q):
        if q.run.state == "cancelled":
            name, msg = q.killed or ("USER_CANCELED", "Query was canceled")
        else:
            e = q.run.error
            if e is None:
                name, msg = "USER_CANCELED", "Query was canceled"
            else:
                name, msg = e.kind, e.message
        code, etype = TRINO_ERRORS.get(name, (None, None))
        e = q.run.error
        if code is None:
            if e is not None and e.code is not None:
                code, etype = e.code, "USER_ERROR"
            elif name == "INJECTED" or "." in name:
                code, etype, name = 65536, "INTERNAL_ERROR", "GENERIC_INTERNAL_ERROR"
            else:
                code, etype = 0, "USER_ERROR"
        return {"message": msg, "errorCode": code, "errorName": name, "errorType": etype,
                "failureInfo": {"type": "io.trino.spi.TrinoException", "message": msg,
                                "suppressed": [], "stack": []}}

    def results(self, q, phase, token, first=False):
        """The QueryResults page of token; the next page's token follows."""
        state = q.state()
        page = {"id": q.id, "infoUri": "%s/ui/query.html?%s" % (self.base(), q.id),
                "stats": self.stats(q, "QUEUED" if first else state), "warnings": []}
        if first:
            page["nextUri"] = self.uri(q, "queued", 1)
            return page
        if state == "FAILED":
            page["error"] = self.error_obj(q)
            q.done_at = q.done_at or time.time()
            return page
        if q.run.state == "succeeded":
            page["updateType"] = getattr(q.run, "update_type", "ALTER TABLE EXECUTE")
            if page["updateType"] == "DELETE" and q.run.rows:
                page["updateCount"] = q.run.rows[0][0]
            if q.run.columns and not q.data_sent:
                page["columns"] = [{"name": c, "type": t, "typeSignature": {
                    "rawType": t, "arguments": []}} for c, t in q.run.columns]
                page["data"] = q.run.rows
                q.data_sent = True
                page["stats"] = self.stats(q, "RUNNING")
                page["nextUri"] = self.uri(q, "executing", token + 1)
                return page
            page["stats"] = self.stats(q, "FINISHED")
            if q.run.columns:
                page["columns"] = [{"name": c, "type": t, "typeSignature": {
                    "rawType": t, "arguments": []}} for c, t in q.run.columns]
            q.done_at = q.done_at or time.time()
            return page
        page["nextUri"] = self.uri(q, "executing", token + 1)
        return page

    def query(self, qid, slug=None):
        with self.lock:
            q = self.queries.get(qid)
        if q is None or (slug is not None and slug != q.slug):
            raise self.error(404, "Query not found: %s" % qid)
        return q

    def h_next(self, m, req):
        phase, qid, slug, token = m.group(1), m.group(2), m.group(3), int(m.group(4))
        q = self.query(qid, slug)
        q.last_access = time.time()
        if token in q.pages:
            return 200, q.pages[token]
        if token != q.expect:
            raise self.error(404, "Query not found: %s" % qid)
        q.run.done.wait(0.2)       # Trino's long poll, shortened
        page = self.results(q, phase, token)
        q.pages = {token: page}
        q.expect = token + 1
        return 200, page

    def h_cancel(self, m, req):
        q = self.query(m.group(2), m.group(3))
        self.cancel(q, ("USER_CANCELED", "Query was canceled"))
        return 204, None

    def cancel(self, q, why):
        """Ask the run to stop: it does at its next checkpoint (before a
        commit); one past its commit finishes."""
        if q.run.state in ("succeeded", "failed", "cancelled"):
            return
        if q.killed is None:
            q.killed = why
        q.run.cancel.set()

    def info(self, q, full=False):
        st = q.state()
        out = {"queryId": q.id, "state": st, "query": q.text, "scheduled": st != "QUEUED",
               "self": "%s/v1/query/%s" % (self.base(), q.id), "memoryPool": "general",
               "session": {"queryId": q.id, "user": q.user, "catalog": q.catalog,
                           "schema": q.schema, "clientTags": q.tags,
                           "systemProperties": {k: v for k, v in q.session.items()
                                                if "." not in k},
                           "catalogProperties": {}},
               "queryStats": {"createTime": now_iso(q.created),
                              "endTime": now_iso(q.done_at) if q.done_at else None},
               "queryType": "ALTER_TABLE_EXECUTE"}
        if st == "FAILED":
            e = self.error_obj(q)
            out["errorType"] = e["errorType"]
            out["errorCode"] = {"code": e["errorCode"], "name": e["errorName"],
                                "type": e["errorType"]}
            if full:
                out["failureInfo"] = e["failureInfo"]
        return out

    def h_list(self, m, req):
        with self.lock:
            qs = list(self.queries.values())
        want = req.query.get("state")
        out = [self.info(q) for q in qs]
        if want:
            out = [i for i in out if i["state"] == want.upper()]
        return 200, out

    def h_info(self, m, req):
        q = self.query(m.group(1))
        return 200, self.info(q, full=True)

    def h_kill(self, m, req):
        q = self.query(m.group(1))
        self.cancel(q, ("USER_CANCELED", "Query was canceled"))
        return 204, None

    def reaper(self):
        while not self.engine.stopping.wait(0.25):
            limit = self.args.abandon_seconds
            with self.lock:
                qs = list(self.queries.values())
            for q in qs:
                if q.state() in ("QUEUED", "RUNNING") and time.time() - q.last_access > limit:
                    self.cancel(q, ("ABANDONED_QUERY",
                                    "Query %s was abandoned by the client, as it may have exited "
                                    "or stopped checking for query results. Query results have "
                                    "not been accessed since %s: currentTime %s"
                                    % (q.id, now_iso(q.last_access), now_iso())))

    def restart(self):
        with self.lock:
            for q in self.queries.values():
                q.run.cancel.set()
        self.reset()


# ---------------------------------------------------------------------------
# Gravitino
# ---------------------------------------------------------------------------

# What each built-in template runs: (procedure, required jobConf keys,
# optional keys); procedure None: listed and accepted, but this server does
# not execute it (its run fails saying so).
GRAVITINO_TEMPLATES = {
    "builtin-sparkpi": (None, [], ["slices"]),
    "builtin-iceberg-update-stats": (None, ["catalog_name", "table_identifier"], []),
    "builtin-iceberg-rewrite-data-files": (
        "rewrite_data_files", ["catalog_name", "table_identifier"],
        ["strategy", "sort_order", "where", "options"]),
    "builtin-iceberg-rewrite-manifests": (
        "rewrite_manifests", ["catalog_name", "table_identifier"],
        ["use_caching", "spec_id"]),
    "builtin-iceberg-expire-snapshots": (
        "expire_snapshots", ["catalog_name", "table_identifier"],
        ["older_than", "retain_last", "max_concurrent_deletes", "stream_results",
         "snapshot_ids", "clean_expired_metadata"]),
}
# The templates a Gravitino release ships (its job system's documentation,
# https://gravitino.apache.org/docs/latest/manage-jobs-in-gravitino, lists
# rewrite-data-files, update-stats and expire-snapshots besides sparkpi):
# what this server offers until POST /admin/templates says otherwise (later
# Gravitino releases add builtin-iceberg-rewrite-manifests).
GRAVITINO_SHIPPED = ["builtin-sparkpi", "builtin-iceberg-rewrite-data-files",
                     "builtin-iceberg-update-stats", "builtin-iceberg-expire-snapshots"]
G_ILLEGAL, G_INTERNAL, G_NOT_FOUND, G_UNAUTHORIZED = 1001, 1002, 1003, 1011
# The Spark resources of a built-in job: the placeholders of its template's
# Spark configs (spark.driver.memory = {{spark_driver_memory}}, ...) and its
# --spark-conf argument, a JSON object of spark.* properties from which the
# job refuses those the template manages (Gravitino's IcebergJobUtils /
# IcebergRewriteDataFilesJob.validateSparkConfigs).
GRAVITINO_SPARK_KEYS = ("spark_master", "spark_driver_memory", "spark_executor_memory",
                        "spark_executor_cores", "spark_executor_instances", "spark_conf")
GRAVITINO_MANAGED = ("spark.sql.catalog.", "spark.sql.extensions", "spark.app.name")


def gravitino_resources_error(conf):
    """Why spark-submit or the built-in job would fail on these jobConf
    resources (the run fails, as the real one would), or None."""
    for k in ("spark_driver_memory", "spark_executor_memory"):
        v = conf.get(k)
        if v and not SPARK_MEMORY.fullmatch(v):
            return "Invalid %s %r: size must be specified as bytes (b), kibibytes (k), " \
                "mebibytes (m), gibibytes (g), tebibytes (t), or pebibytes(p)" % (k, v)
    for k in ("spark_executor_cores", "spark_executor_instances"):
        v = conf.get(k)
        if v and not (re.fullmatch(r"[0-9]+", v) and 0 < int(v) < 2 ** 31):
            return "%s must be a positive integer: %r" % (k, v)
    v = conf.get("spark_conf")
    if v:
        try:
            sc = json.loads(v)
            assert isinstance(sc, dict)
        except (ValueError, AssertionError):
            return "Failed to parse Spark configurations JSON: %s" % v
        for key in sc:
            for prefix in GRAVITINO_MANAGED:
                if key.startswith(prefix):
                    return "Configuration '%s' cannot be overridden. Configs starting with " \
                        "'%s' are managed by the job template." % (key, prefix)
            if not key.startswith("spark."):
                return "Invalid Spark configuration key '%s'. All Spark configs must start " \
                    "with 'spark.'" % key
    return None



class GravitinoJob:
    def __init__(self, jid, template, conf, creator, run):
        self.id = jid
        self.template = template
        self.conf = conf
        self.creator = creator
        self.run = run
        self.created = time.time()
        self.status = "queued"
        self.cancel_requested = False
        self.lost = False

    def current(self):
        if self.lost:
            return "failed"
        st = self.run.state
        if st == "submitted":
            return "cancelling" if self.cancel_requested else "queued"
        if st == "running":
            return "cancelling" if self.cancel_requested else "started"
        return {"succeeded": "succeeded", "failed": "failed", "cancelled": "cancelled"}[st]

    def view(self):
        d = {"jobId": self.id, "jobTemplateName": self.template, "status": self.current(),
             "audit": {"creator": self.creator or "anonymous",
                       "createTime": now_iso(self.created)},
             "jobConf": dict(self.conf)}
        details = {"statement": self.run.statement}
        if self.run.result is not None:
            details["result"] = self.run.result
        if self.lost:
            details["errorMessage"] = "java.lang.RuntimeException: Job lost: the server restarted"
        elif self.run.error is not None:
            details["errorMessage"] = "%s: %s" % (self.run.error.kind, self.run.error.message)
        if self.run.finished_at:
            details["finishTime"] = now_iso(self.run.finished_at)
        d["details"] = details
        return d


class Gravitino:
    ROUTES = [
        ("POST", r"/api/metalakes/([^/]+)/jobs/runs", "/api/metalakes/{metalake}/jobs/runs",
         "submit"),
        ("GET", r"/api/metalakes/([^/]+)/jobs/runs", "/api/metalakes/{metalake}/jobs/runs",
         "list"),
        ("GET", r"/api/metalakes/([^/]+)/jobs/runs/([^/]+)",
         "/api/metalakes/{metalake}/jobs/runs/{jobId}", "get"),
        ("POST", r"/api/metalakes/([^/]+)/jobs/runs/([^/]+)",
         "/api/metalakes/{metalake}/jobs/runs/{jobId}", "cancel"),
        ("GET", r"/api/metalakes/([^/]+)/jobs/templates",
         "/api/metalakes/{metalake}/jobs/templates", "templates"),
        ("GET", r"/api/metalakes/([^/]+)/jobs/templates/([^/]+)",
         "/api/metalakes/{metalake}/jobs/templates/{name}", "template"),
    ]

    def __init__(self, engine, args):
        self.engine = engine
        self.args = args
        self.lock = threading.Lock()
        self.jobs = {}
        self.templates = list(GRAVITINO_SHIPPED)

    def reset(self):
        with self.lock:
            self.jobs = {}
            self.templates = list(GRAVITINO_SHIPPED)

    def set_templates(self, names):
        """POST /admin/templates: the built-in templates offered from now on."""
        if not isinstance(names, list) or any(n not in GRAVITINO_TEMPLATES for n in names):
            raise HttpError(400, {"error": "names must be a list of %s"
                                  % ", ".join(sorted(GRAVITINO_TEMPLATES))})
        with self.lock:
            self.templates = list(names)

    def offered(self):
        with self.lock:
            return sorted(self.templates)

    @staticmethod
    def err(status, code, type_, msg):
        return HttpError(status, {"code": code, "type": type_, "message": msg, "stack": []})

    def error(self, status, msg):
        return self.err(status, G_INTERNAL if status >= 500 else G_ILLEGAL,
                        "RuntimeException" if status >= 500 else "IllegalArgumentException", msg)

    def unauthorized(self):
        return HttpError(401, {"code": G_UNAUTHORIZED, "type": "UnauthorizedException",
                               "message": "The provided credentials did not support",
                               "stack": []}, {"WWW-Authenticate": "Bearer"})

    def not_found(self, path):
        return self.err(404, G_NOT_FOUND, "NotFoundException", "HTTP 404 Not Found")

    def handle(self, name, m, req):
        ml = urllib.parse.unquote(m.group(1))
        if ml != self.args.metalake:
            raise self.err(404, G_NOT_FOUND, "NoSuchMetalakeException",
                           "Metalake %s does not exist" % ml)
        return getattr(self, "h_" + name)(m, req)

    def template_view(self, name):
        proc, req_keys, opt_keys = GRAVITINO_TEMPLATES[name]
        return {"name": name, "jobType": "spark", "comment": "%s (built-in)" % (proc or name),
                "executable": "gravitino-jobs.jar", "className":
                "org.apache.gravitino.maintenance.jobs.iceberg.IcebergProcedureJob",
                "arguments": ["--%s" % k for k in req_keys + opt_keys],
                "customFields": {"requiredKeys": req_keys, "optionalKeys": opt_keys},
                "audit": {"creator": "system", "createTime": now_iso(0)}}

    def h_templates(self, m, req):
        if req.query.get("details", "false").lower() == "true":
            return 200, {"code": 0, "jobTemplates": [self.template_view(n)
                                                    for n in self.offered()]}
        return 200, {"code": 0, "names": self.offered()}

    def h_template(self, m, req):
        name = urllib.parse.unquote(m.group(2))
        if name not in self.offered():
            raise self.err(404, G_NOT_FOUND, "NoSuchJobTemplateException",
                           "Job template %s does not exist" % name)
        return 200, {"code": 0, "jobTemplate": self.template_view(name)}

    @staticmethod
    def bad_resources(msg):
        raise EngineError("IllegalArgumentException", msg)

    @staticmethod
    def not_executed(run):
        raise EngineError("NOT_EXECUTED", "this test server does not execute %s"
                          % run.statement[3:])

    def statement(self, template, conf):
        """The Spark SQL CALL a built-in template runs for this jobConf."""
        proc, req_keys, opt_keys = GRAVITINO_TEMPLATES[template]
        missing = [k for k in req_keys if not conf.get(k)]
        if missing:
            raise self.err(400, G_ILLEGAL, "IllegalArgumentException",
                           "Missing required job conf keys %s for job template %s"
                           % (missing, template))
        args = ["table => %s" % grammar.spark_literal(conf["table_identifier"])]
        for k in opt_keys:
            v = conf.get(k)
            if v is None or v == "":
                continue
            if not isinstance(v, str):
                raise self.err(400, G_ILLEGAL, "IllegalArgumentException",
                               "job conf value of %s must be a string" % k)
            if k in ("strategy", "sort_order", "where"):
                args.append("%s => %s" % (k, grammar.spark_literal(v)))
            elif k == "options":
                try:
                    opts = json.loads(v)
                    assert isinstance(opts, dict)
                except (ValueError, AssertionError):
                    raise self.err(400, G_ILLEGAL, "IllegalArgumentException",
                                   "options must be a JSON object of strings: %s" % v)
                args.append("options => map(%s)" % ", ".join(
                    "%s, %s" % (grammar.spark_literal(str(a)), grammar.spark_literal(str(b)))
                    for a, b in opts.items()))
            elif k == "older_than":
                args.append("older_than => TIMESTAMP %s" % grammar.spark_literal(v))
            elif k == "snapshot_ids":
                if not re.fullmatch(r"\s*-?\d+(\s*,\s*-?\d+)*\s*", v):
                    raise self.err(400, G_ILLEGAL, "IllegalArgumentException",
                                   "snapshot_ids must be comma-separated numbers: %s" % v)
                args.append("snapshot_ids => array(%s)" % ", ".join(
                    x.strip() + "L" for x in v.split(",")))
            elif k in ("use_caching", "stream_results", "clean_expired_metadata"):
                if v.lower() not in ("true", "false"):
                    raise self.err(400, G_ILLEGAL, "IllegalArgumentException",
                                   "%s must be true or false: %s" % (k, v))
                args.append("%s => %s" % (k, v.lower()))
            else:
                if not re.fullmatch(r"-?\d+", v.strip()):
                    raise self.err(400, G_ILLEGAL, "IllegalArgumentException",
                                   "%s must be an integer: %s" % (k, v))
                args.append("%s => %s" % (k, v.strip()))
        return "CALL %s.system.%s(%s)" % (grammar.spark_ident(conf["catalog_name"]), proc,
                                          ", ".join(args))

    def h_submit(self, m, req):
        body = req.json()
        if not isinstance(body, dict) or not body.get("jobTemplateName"):
            raise self.err(400, G_ILLEGAL, "IllegalArgumentException",
                           "\"jobTemplateName\" is required and cannot be empty")
        for k in body:
            if k not in ("jobTemplateName", "jobConf"):
                raise self.err(400, G_ILLEGAL, "IllegalArgumentException",
                               "Unrecognized field \"%s\"" % k)
        template = body["jobTemplateName"]
        if template not in self.offered():
            raise self.err(404, G_NOT_FOUND, "NoSuchJobTemplateException",
                           "Job template %s does not exist" % template)
        conf = body.get("jobConf") or {}
        if not isinstance(conf, dict):
            raise self.err(400, G_ILLEGAL, "IllegalArgumentException", "jobConf must be a map")
        bad = gravitino_resources_error(conf)
        if GRAVITINO_TEMPLATES[template][0] is None:
            text = "-- %s" % template
            runner = self.not_executed
        else:
            text = self.statement(template, conf)
            runner = lambda r: self.engine.run_spark(r, text)  # noqa: E731
        if bad:
            runner = lambda r: self.bad_resources(bad)  # noqa: E731
        jid = "job-%d" % random.getrandbits(62)
        run = Run(jid, conf.get("tms_tag"), text)
        run.resources = {k: conf[k] for k in GRAVITINO_SPARK_KEYS if conf.get(k)} or None
        job = GravitinoJob(jid, template, conf, req.user, run)
        self.engine.add_run(run)
        with self.lock:
            self.jobs[jid] = job
        self.engine.start(run, runner)
        return 200, {"code": 0, "job": job.view()}

    def h_list(self, m, req):
        t = req.query.get("jobTemplateName")
        with self.lock:
            jobs = sorted(self.jobs.values(), key=lambda j: j.created)
        return 200, {"code": 0, "jobs": [j.view() for j in jobs
                                         if t is None or j.template == t]}

    def job(self, m):
        jid = urllib.parse.unquote(m.group(2))
        with self.lock:
            j = self.jobs.get(jid)
        if j is None:
            raise self.err(404, G_NOT_FOUND, "NoSuchJobException",
                           "Job %s does not exist under metalake %s" % (jid, self.args.metalake))
        return j

    def h_get(self, m, req):
        return 200, {"code": 0, "job": self.job(m).view()}

    def h_cancel(self, m, req):
        j = self.job(m)
        if j.current() in ("queued", "started"):
            j.cancel_requested = True
            j.run.cancel.set()
        return 200, {"code": 0, "job": j.view()}

    def restart(self):
        with self.lock:
            for j in self.jobs.values():
                if j.run.state in ("submitted", "running"):
                    j.run.cancel.set()
                    j.lost = True


# ---------------------------------------------------------------------------
# HTTP
# ---------------------------------------------------------------------------

class Request:
    def __init__(self, handler, method, path, query, body, user, personality):
        self.handler = handler
        self.personality = personality
        self.method = method
        self.path = path
        self.query = query
        self.body = body
        self.headers = handler.headers
        self.user = user

    def json(self):
        try:
            return json.loads(self.body or b"null")
        except ValueError as e:
            raise self.personality.error(400, "Rejected, invalid JSON: %s" % e)


def make_handler(engine, personality, auth, args):
    class Handler(httpserve.Handler):
        server_version = "tms-test-engine"
        log_prefix = "engine"

        def send(self, status, body, headers=None):
            """Answer body: JSON for a dict or list, text otherwise, nothing
            for None (headers may name another Content-Type)."""
            if body is None:
                self.reply(status, b"", headers)
            elif isinstance(body, (dict, list)):
                self.reply(status, json.dumps(body).encode(), headers, "application/json")
            else:
                self.reply(status, str(body).encode(), headers, "text/plain")

        def dispatch(self):
            parts = urllib.parse.urlsplit(self.path)
            path = parts.path.rstrip("/") or "/"
            query = dict(urllib.parse.parse_qsl(parts.query))
            body = self.read_body()
            if path.startswith("/admin/") or path == "/admin":
                return self.admin(path, query, body)
            if path == "/oauth/tokens" and self.command == "POST" and auth.client_id:
                return self.oauth(body)
            template, status = path, None
            try:
                fault = engine.faults.take_request(self.command, path)
                if fault:
                    if fault["action"] in ("hang", "latency"):
                        time.sleep(min(fault["seconds"], 3600))
                    elif fault["action"] == "close":
                        engine.counters.add(self.command, path, "closed")
                        self.close_connection = True
                        self.connection.close()
                        return
                    elif fault["action"] == "status":
                        b = fault["body"]
                        if b is None:
                            b = personality.error(fault["status"], "injected fault").body
                        status = fault["status"]
                        raise HttpError(status, b)
                route = None
                known_path = False
                for method, rx, tmpl, name in personality.ROUTES:
                    m = re.fullmatch(rx, path)
                    if m:
                        known_path = True
                        template = tmpl
                        if method == self.command:
                            route = (m, name)
                            break
                if route is None:
                    if known_path:
                        raise HttpError(405, personality.error(405, "HTTP 405 Method Not "
                                                               "Allowed").body)
                    raise personality.not_found(path)
                user = auth.check(self.headers.get("Authorization"))
                if user is None:
                    raise personality.unauthorized()
                req = Request(self, self.command, path, query, body, user, personality)
                out = personality.handle(route[1], route[0], req)
                status, payload = out[0], out[1]
                extra = out[2] if len(out) > 2 else None
            except HttpError as e:
                status, payload, extra = e.status, e.body, e.headers
            except Exception as e:
                traceback.print_exc()
                status, extra = 500, None
                payload = personality.error(500, "%s: %s" % (type(e).__name__, e)).body
            # counted before the answer leaves: a client that reads the
            # counts once it has its answer finds it there
            engine.counters.add(self.command, template, status)
            self.send(status, payload, extra)

        def oauth(self, body):
            form = dict(urllib.parse.parse_qsl(body.decode("utf-8", "replace")))
            try:
                status, payload = 200, auth.issue(form, self.headers.get("Authorization"))
            except HttpError as e:
                status, payload = e.status, e.body
            engine.counters.add("POST", "/oauth/tokens", status)
            self.send(status, payload)

        def admin(self, path, query, body):
            if args.admin_token and not secrets.compare_digest(
                    self.headers.get("X-Admin-Token") or "", args.admin_token):
                return self.reply_error(401, "admin token required")
            try:
                spec = json.loads(body) if body else {}
            except ValueError:
                return self.reply_error(400, "invalid JSON")
            c = self.command
            try:
                if path == "/admin/faults" and c == "POST":
                    item = engine.faults.add(spec)
                    if item["action"] in ("restart", "forget"):
                        engine.generation += 1
                        personality.restart()
                    if item["action"] == "forget":
                        personality.reset()
                    return self.send(200, {"id": item["id"]})
                if path == "/admin/faults" and c == "GET":
                    return self.send(200, {"faults": engine.faults.list()})
                if path == "/admin/faults" and c == "DELETE":
                    engine.faults.clear()
                    return self.send(204, None)
                if path == "/admin/runs" and c == "GET":
                    with engine.runs_lock:
                        runs = [r.view() for r in engine.runs]
                    return self.send(200, {"runs": runs})
                if path == "/admin/requests" and c == "GET":
                    return self.send(200, engine.counters.snapshot())
                if path == "/admin/requests" and c == "DELETE":
                    engine.counters.reset()
                    return self.send(204, None)
                if path == "/admin/templates" and c == "POST" and \
                        hasattr(personality, "set_templates"):
                    personality.set_templates(spec.get("names"))
                    return self.send(200, {"names": personality.offered()})
                if path == "/admin/reset" and c == "POST":
                    engine.faults.clear()
                    engine.counters.reset()
                    engine.generation += 1
                    personality.restart()
                    personality.reset()
                    with engine.runs_lock:
                        engine.runs = []
                    return self.send(204, None)
            except HttpError as e:
                return self.send(e.status, e.body)
            return self.reply_error(404, "no such admin endpoint")

        do_GET = do_POST = do_DELETE = do_PUT = do_HEAD = do_PATCH = dispatch

    return Handler


def main():
    ap = argparse.ArgumentParser(description="tms test engine server (livy, trino, gravitino)")
    ap.add_argument("--type", required=True, choices=("livy", "trino", "gravitino"))
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--catalog-uri", required=True)
    ap.add_argument("--catalog-name", required=True)
    ap.add_argument("--catalog-token")
    ap.add_argument("--file-root")
    ap.add_argument("--s3-endpoint")
    ap.add_argument("--s3-access-key-id", default="S3RVER")
    ap.add_argument("--s3-secret-access-key", default="S3RVER")
    ap.add_argument("--s3-region", default="us-east-1")
    ap.add_argument("--metalake", default="metalake")
    ap.add_argument("--user")
    ap.add_argument("--password")
    ap.add_argument("--token")
    ap.add_argument("--oauth2-credential")
    ap.add_argument("--admin-token")
    ap.add_argument("--startup-delay", type=float, default=0.2)
    ap.add_argument("--abandon-seconds", type=float, default=300)
    ap.add_argument("--verbose", action="store_true")
    args = ap.parse_args()
    kinds = sum(1 for x in (args.password is not None, bool(args.token),
                            bool(args.oauth2_credential)) if x)
    if kinds > 1:
        ap.error("one of --user/--password, --token, --oauth2-credential")
    if args.password is not None and not args.user:
        ap.error("--password needs --user")

    engine = Engine(args)
    auth = Auth(args)
    httpd = httpserve.Server(args.port, None, verbose=args.verbose)
    args.port = httpd.port
    personality = {"livy": Livy, "trino": Trino, "gravitino": Gravitino}[args.type](engine, args)
    httpd.RequestHandlerClass = make_handler(engine, personality, auth, args)
    httpserve.serve(httpd, "engine", on_stop=engine.stopping.set)


if __name__ == "__main__":
    main()
