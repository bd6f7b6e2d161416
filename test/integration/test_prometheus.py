"""
test_prometheus.py -- tms through Prometheus, as an operator runs it
(doc/operations.md, "Prometheus and Grafana"):

  PostgreSQL with tms and the test world (REST catalog, s3rver), Debian's
  prometheus-postgres-exporter with monitoring/postgres-exporter-queries.yaml
  connected as a role that is only a member of pg_monitor, and Debian's
  prometheus scraping it every second, everything on 127.0.0.1.  The
  workers run tasks (some failing), maintenance jobs, a purge, and catalog
  requests that fail; then, with the pool off, a maintenance job and a
  purge wait.  Then:

  - every target of every panel of monitoring/tms-dashboard.json, its
    variables substituted as Grafana's "All" does, returns series through
    Prometheus' /api/v1/query, and every variable query has values;
  - the values are those of the tms views: table health as
    tms.table_snapshot_metrics recorded it, the jobs, the purge backlog,
    the catalog's refused requests, the latency histogram's count equal to
    the requests;
  - every metric the queries file defines reaches Prometheus;
  - table health keeps the tms_exporter.max_tables tables with the most
    data files (a setting of the exporter's role).

Run: /usr/bin/python3 -m pytest -q test/integration/test_prometheus.py
(needs the Debian packages prometheus and prometheus-postgres-exporter:
scripts/install-deps.sh).  With TMS_DASHBOARD_SVG=path, the dashboard's
panels over the run are also drawn there (monitoring/render_dashboard.py).
"""

import json
import os
import re
import shutil
import sys
import tempfile
import time
import uuid

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, os.path.join(REPO, "monitoring"))

import world  # noqa: E402
import opsworld as ow  # noqa: E402
from render_dashboard import render, substitute  # noqa: E402
from pgcluster import FAST_WORKERS, Cluster, wait_for  # noqa: E402

QUERIES = os.path.join(REPO, "monitoring", "postgres-exporter-queries.yaml")
DASHBOARD = os.path.join(REPO, "monitoring", "tms-dashboard.json")
TERMINAL = ("succeeded", "failed", "skipped", "cancelled")


# ---------------------------------------------------------------------------
# the stack
# ---------------------------------------------------------------------------

# clusters of its own (new_cluster): see test/integration/conftest.py
pytestmark = pytest.mark.own_cluster


@pytest.fixture(scope="module")
def stack():
    root = tempfile.mkdtemp(prefix="tms-prom-", dir="/tmp")
    os.chmod(root, 0o755)
    started = []
    c = Cluster(os.path.join(root, "pg", "data"), settings=FAST_WORKERS)
    try:
        c.init()
        c.start()
        c.create_database()
        c.psql("CREATE EXTENSION tms")
        # the exporter's role: pg_monitor and nothing else
        c.psql("CREATE ROLE tms_exporter LOGIN IN ROLE pg_monitor")
        file_root = os.path.join(root, "files")
        os.makedirs(file_root)
        s3 = world.S3Server(buckets=["warehouse"])
        started.append(s3)
        cat = world.CatalogServer(c.dsn(), "file://%s/wh" % file_root,
                                  catalog_name="prom_%s" % uuid.uuid4().hex[:6],
                                  s3=s3, file_root=file_root)
        started.append(cat)
        ow.give_to_server(file_root)
        srv = "promcat"
        c.psql("""CREATE SERVER %s FOREIGN DATA WRAPPER tms_iceberg OPTIONS (
                    uri '%s', relative_path_root '%s', request_timeout '5s', retries '2',
                    s3_vended_endpoint 'true',
                    allowed_locations 'file://%s/, s3://warehouse/');
                  CREATE USER MAPPING FOR PUBLIC SERVER %s;"""
               % (srv, cat.uri, file_root, file_root, srv))
        exporter = world.PostgresExporter(
            "host=%s port=%d dbname=%s user=tms_exporter sslmode=disable"
            % (c.host, c.port, c.dbname), QUERIES)
        started.append(exporter)
        prom = world.Prometheus(["127.0.0.1:%d" % exporter.port], scrape_interval="1s")
        started.append(prom)
        wait_for(lambda: prom.query('up{job="tms"} == 1'), timeout=60,
                 what="prometheus to scrape the exporter")
        yield dict(pg=c, s3=s3, catalog=cat, file_root=file_root, server=srv,
                   exporter=exporter, prom=prom, started_at=time.time())
    finally:
        for p in reversed(started):
            p.stop()
        c.destroy()
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(autouse=True)
def logs_on_failure(stack, request):
    yield
    rep = getattr(request.node, "rep_call", None)
    if rep is not None and rep.failed:
        sys.stderr.write("---- server log (tail) ----\n%s\n" % stack["pg"].log_tail(100))
        for name in ("exporter", "prom"):
            sys.stderr.write("---- %s (tail) ----\n%s\n"
                             % (name, stack[name].child.output()[-4000:]))


def one(stack, sql, args=None):
    rows = stack["pg"].query(sql, args)
    return rows[0] if rows else None


def new_table(stack, where, *args):
    tag = uuid.uuid4().hex[:10]
    loc = ("s3://warehouse/prom/%s/t" % tag if where == "s3"
           else "file://%s/prom/%s/t" % (stack["file_root"], tag))
    extra = ["--s3-endpoint", stack["s3"].endpoint] if where == "s3" else []
    res = ow.synth_table(loc, *(list(args) + extra))
    name = "t_%s" % uuid.uuid4().hex[:8]
    stack["catalog"].register("prom", name, res["metadata_location"])
    return name


def run_job(stack, table, operation, options):
    return one(stack, "SELECT tms.run_operation(%s, 'prom', %s, %s, %s::jsonb)",
               (stack["server"], table, operation, json.dumps(options)))[0]


def job_state(stack, jid):
    return one(stack, "SELECT state, last_error FROM tms.maintenance_jobs WHERE id = %s",
               (jid,))


def value(series):
    return float(series["value"][1])


# ---------------------------------------------------------------------------
# the dashboard's queries, as Grafana sends them
# ---------------------------------------------------------------------------

def dashboard():
    with open(DASHBOARD) as f:
        return json.load(f)


def panel_targets(dash):
    """(panel title, refId, expr) of every target of every panel."""
    out = []
    for p in dash["panels"]:
        for sub in [p] + p.get("panels", []):
            for t in sub.get("targets", []):
                out.append((sub["title"], t["refId"], t["expr"]))
    return out


def work_round(stack):
    """One round of work: ten tasks, snapshot expiry on two new tables and
    a manifest rewrite of the second, a purge through S3, the catalog
    refusing four requests.  Returns the two tables."""
    pg, cat, srv = stack["pg"], stack["catalog"], stack["server"]
    pg.psql("SELECT tms.schedule_task('ok', 'o' || g || '-' || gen_random_uuid())"
            " FROM generate_series(1, 10) g")

    t1 = new_table(stack, "file", "--snapshots", "6", "--data-files", "12")
    t2 = new_table(stack, "file", "--snapshots", "4", "--data-files", "8")
    later = one(stack, "SELECT (now() + interval '1 hour')::text")[0]
    jobs = [run_job(stack, t1, "snapshot-expiry", {"retain-last": 1, "older-than": later}),
            run_job(stack, t2, "snapshot-expiry", {"retain-last": 2, "older-than": later})]
    for jid in jobs:
        wait_for(lambda: job_state(stack, jid)[0] in TERMINAL, timeout=120,
                 what="job %s to end (now %r)" % (jid, job_state(stack, jid)))
        assert job_state(stack, jid)[0] == "succeeded", job_state(stack, jid)
    jobs.append(run_job(stack, t2, "manifest-rewrite", {}))
    wait_for(lambda: job_state(stack, jobs[-1])[0] in TERMINAL, timeout=120,
             what="the manifest rewrite (now %r)" % (job_state(stack, jobs[-1]),))
    assert job_state(stack, jobs[-1])[0] == "succeeded", job_state(stack, jobs[-1])

    # a purge through S3
    t3 = new_table(stack, "s3", "--snapshots", "2", "--data-files", "10", "--file-size", "1024")
    purge = one(stack, "SELECT tms.purge_table(%s, 'prom', %s)", (srv, t3))[0]
    wait_for(lambda: one(stack, "SELECT state FROM tms.purge_jobs WHERE id = %s",
                         (purge,))[0] in ("SUCCEEDED", "FAILED"),
             timeout=120, what="the purge")
    assert one(stack, "SELECT state FROM tms.purge_jobs WHERE id = %s", (purge,))[0] == "SUCCEEDED"

    # the catalog refuses: three 503s (a load tried three times), then a 404
    cat.fault(r"/tables/%s$" % t1, status=503, count=3, method="GET")
    pg.query_error("SELECT * FROM tms.plan_operation(%s, 'prom', %s, 'snapshot-expiry', '{}')",
                   (srv, t1))
    pg.query_error("SELECT * FROM tms.plan_operation(%s, 'prom', 'no_such_table',"
                   " 'snapshot-expiry', '{}')", (srv,))
    wait_for(lambda: one(stack, "SELECT count(*) FROM tms.scheduled_tasks"
                                " WHERE task_name = 'ok'")[0] == 0, what="the ten tasks")
    return t1, t2


def test_every_panel_has_series(stack):
    pg, prom, srv = stack["pg"], stack["prom"], stack["server"]
    svg = os.environ.get("TMS_DASHBOARD_SVG")
    # for the picture, rounds of work over a couple of minutes (bounded)
    rounds = 10 if svg else 1

    # tasks that succeed, and three that keep failing
    pg.psql("CREATE PROCEDURE ok(i text, d jsonb) LANGUAGE sql AS $$ SELECT 1 $$")
    pg.psql("CREATE PROCEDURE bad(i text, d jsonb) LANGUAGE plpgsql"
            " AS $$ BEGIN RAISE EXCEPTION 'no %', i USING ERRCODE = 'check_violation'; END $$")
    pg.psql("SELECT tms.register_task_kind('ok', 'ok(text, jsonb)', 4)")
    pg.psql("SELECT tms.register_task_kind('bad', 'bad(text, jsonb)', 4)")
    pg.psql("SELECT tms.schedule_task('bad', 'b' || g) FROM generate_series(1, 3) g")
    for i in range(rounds):
        t1, t2 = work_round(stack)
        if i + 1 < rounds:
            # the next round once Prometheus has seen this one's purge
            n = i + 1
            wait_for(lambda: prom.query('tms_purge_jobs_total{outcome="succeeded"} >= %d' % n),
                     timeout=60, what="round %d in prometheus" % n)
            time.sleep(10)              # spread over time, for the picture only

    # the failing tasks have failed (and will again)
    wait_for(lambda: one(stack, "SELECT failed FROM tms.stat_tasks WHERE kind = 'bad'"
                                " AND database = current_database()") not in (None, (0,)),
             what="the failing tasks to fail")

    # with the pool off, work waits: a maintenance job and a purge
    pg.pool(False)
    try:
        waiting_job = run_job(stack, t1, "snapshot-expiry", {"retain-last": 1})
        t4 = new_table(stack, "file", "--snapshots", "2")
        one(stack, "SELECT tms.purge_table(%s, 'prom', %s)", (srv, t4))

        # Prometheus has seen it all once it has seen the waiting work
        # (the exporter reads every view in one scrape)
        wait_for(lambda: prom.query('tms_purge_queue_pending{foreign_server="%s"} >= 1' % srv)
                 and prom.query('tms_maintenance_queue_pending{operation="snapshot-expiry"} >= 1'),
                 timeout=60, what="prometheus to see the waiting work")

        # every panel has series once the counters' latest values have
        # two samples in the window (rates)
        dash = dashboard()
        window = "%ds" % (int(time.time() - stack["started_at"]) + 60)
        targets = panel_targets(dash)
        assert len(targets) >= 20, targets
        queries = [("%s (%s)" % (title, ref), substitute(expr, dash, window))
                   for title, ref, expr in targets]

        def empty_panels():
            return ["%s: %s" % (what, q) for what, q in queries if not prom.query(q)]
        try:
            wait_for(lambda: not empty_panels(), timeout=30, interval=0.5,
                     what="every panel to have series")
        except TimeoutError:
            pass                        # named below
        empty = empty_panels()
        assert not empty, "panels without series:\n" + "\n".join(empty)

        # every variable has values, as Grafana's label_values() asks them
        for v in dash["templating"]["list"]:
            m = re.fullmatch(r"label_values\((.*),\s*(\w+)\)", v["query"]["query"], re.S)
            assert m, v["query"]
            match = substitute(m.group(1), dash, window)
            assert prom.label_values(m.group(2), match), (v["name"], match)

        check_values(stack, rounds, t1, t2, waiting_job)
        check_every_metric_reaches_prometheus(stack)

        if svg:
            render(prom, dash, stack["started_at"], time.time(), svg)
    finally:
        pg.pool(True)


def check_values(stack, rounds, t1, t2, waiting_job):
    """What Prometheus holds is what the views say, after `rounds` rounds
    of work (t1 and t2: the last round's tables)."""
    prom, srv = stack["prom"], stack["server"]

    # table health: the metrics recorded after each table's last job
    for t in (t1, t2):
        rec = one(stack, "SELECT metrics FROM tms.table_snapshot_metrics WHERE table_name = %s"
                         " ORDER BY recorded_at DESC, id DESC LIMIT 1", (t,))[0]
        sel = '{foreign_server="%s", namespace="prom", table="%s"}' % (srv, t)
        for metric, key in (("snapshots", "snapshots"), ("manifests", "manifests"),
                            ("data_files", "dataFiles")):
            got = prom.query("tms_table_%s%s" % (metric, sel))
            assert [value(s) for s in got] == [float(rec[key])], (t, metric, got, rec)
        avg = prom.query("tms_table_avg_data_file_bytes%s" % sel)
        assert [value(s) for s in avg] == [pytest.approx(rec["dataFilesSize"] / rec["dataFiles"])]
    # snapshot expiry kept one snapshot of t1
    assert value(prom.query('tms_table_snapshots{table="%s"}' % t1)[0]) == 1.0

    # jobs: three succeeded, by operation
    ok = {s["metric"]["operation"]: value(s) for s in prom.query(
        'sum by (operation) (tms_maintenance_jobs_total{outcome="succeeded"})')}
    assert ok == {"snapshot-expiry": 2.0 * rounds, "manifest-rewrite": 1.0 * rounds}, ok
    assert value(prom.query('tms_maintenance_queue_pending{operation="snapshot-expiry"}')[0]) == 1
    assert one(stack, "SELECT state FROM tms.maintenance_jobs WHERE id = %s",
               (waiting_job,))[0] == "pending"

    # the purge, and the one waiting
    done = prom.query('tms_purge_jobs_total{foreign_server="%s", outcome="succeeded"}' % srv)
    assert [value(s) for s in done] == [1.0 * rounds], done
    files = one(stack, "SELECT sum(files_deleted) FROM tms.purge_jobs WHERE state = 'SUCCEEDED'")[0]
    assert value(prom.query('tms_purge_deleted_files_total{foreign_server="%s"}' % srv)[0]) == files
    assert value(prom.query('tms_purge_queue_pending{foreign_server="%s"}' % srv)[0]) == 1

    # the catalog's refusals, by class; the histogram counts every request
    throttled = prom.query('tms_http_errors_total{foreign_server="%s", service="catalog",'
                           ' class="throttled"}' % srv)
    assert [value(s) for s in throttled] == [3.0 * rounds], throttled
    assert value(prom.query('tms_http_errors_total{foreign_server="%s", service="catalog",'
                            ' class="client"}' % srv)[0]) >= rounds
    for service in ("catalog", "storage"):
        sel = '{foreign_server="%s", service="%s"}' % (srv, service)
        n = value(prom.query("tms_http_requests_total%s" % sel)[0])
        inf = prom.query('tms_http_request_duration_seconds_bucket{foreign_server="%s",'
                         ' service="%s", le="+Inf"}' % (srv, service))
        assert n > 0 and [value(s) for s in inf] == [n], (service, n, inf)
        assert value(prom.query("tms_http_request_duration_seconds_count%s" % sel)[0]) == n
        buckets = prom.query("tms_http_request_duration_seconds_bucket%s" % sel)
        assert len(buckets) == 12, buckets          # 11 bounds and +Inf

    # tasks: the ten that succeeded, the failing ones
    assert value(prom.query('tms_tasks_succeeded_total{kind="ok"}')[0]) == 10 * rounds
    assert value(prom.query('tms_tasks_failed_total{kind="bad"}')[0]) >= 3
    assert value(prom.query('tms_task_queue_failing{kind="bad"}')[0]) == 3


def exporter_query(prefix):
    """The SQL of a top-level key of the queries file."""
    with open(QUERIES) as f:
        lines = f.read().split("\n")
    start = lines.index("%s:" % prefix)
    q = lines.index("  query: |", start)
    end = lines.index("  metrics:", q)
    return "\n".join(line[4:] for line in lines[q + 1:end])


def test_table_health_limit(stack):
    """tms_table_* keeps the tms_exporter.max_tables tables with the most
    data files, a setting of the exporter's role (default 500)."""
    import psycopg2
    pg = stack["pg"]
    sql = exporter_query("tms_table")
    tables = pg.query("SELECT count(DISTINCT (server, namespace, table_name)),"
                      " max((metrics ->> 'dataFiles')::int) FROM tms.table_snapshot_metrics")[0]
    assert tables[0] >= 2, tables       # after test_every_panel_has_series
    pg.psql("ALTER ROLE tms_exporter SET tms_exporter.max_tables = 1")
    try:
        conn = psycopg2.connect("host=%s port=%d dbname=%s user=tms_exporter"
                                % (pg.host, pg.port, pg.dbname))
        try:
            with conn.cursor() as cur:
                cur.execute(sql)
                rows = cur.fetchall()
                assert len(rows) == 1 and rows[0][6] == tables[1], rows
                cur.execute("SET tms_exporter.max_tables = 0")
                cur.execute(sql)
                assert cur.fetchall() == []
                cur.execute("SET tms_exporter.max_tables = ''")      # unset: 500
                cur.execute(sql)
                assert len(cur.fetchall()) == tables[0]
        finally:
            conn.close()
    finally:
        pg.psql("ALTER ROLE tms_exporter RESET tms_exporter.max_tables")


def check_every_metric_reaches_prometheus(stack):
    """Every metric of the queries file (prefix_column) has series: no
    query of the file fails, as the exporter would only log it."""
    names = set()
    prefix = None
    usage = {}
    with open(QUERIES) as f:
        for line in f:
            m = re.match(r"^(tms_\w+):\s*$", line)
            if m:
                prefix = m.group(1)
                continue
            m = re.match(r"^\s+- (\w+): \{usage: (\w+),", line)
            if m and prefix:
                usage[(prefix, m.group(1))] = m.group(2)
    for (prefix, column), use in usage.items():
        if use == "LABEL":
            continue
        name = "%s_%s" % (prefix, column)
        names.add(name + "_bucket" if use == "HISTOGRAM" else name)
    assert len(names) >= 40, sorted(names)
    missing = [n for n in sorted(names) if not stack["prom"].query(n)]
    assert not missing, "metrics without series: %s\n%s" % (
        missing, stack["exporter"].child.output()[-3000:])
