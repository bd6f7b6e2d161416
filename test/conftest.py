"""Shared pytest fixtures for tms integration tests.

pg           the session's PostgreSQL 15 cluster with tms and pg_cron
             preloaded (tms.database_name = cron.database_name = tms_regress).
             Without xdist it is the cluster the caller started (PGPORT set
             and $TMS_TEST_ROOT/pg/data present: a cluster started with
             `test/pgcluster.py start --dir $TMS_TEST_ROOT/pg`) or else
             one started here in $TMS_TEST_ROOT/pg and stopped at the end.
             Under xdist (`-n N`, as test/run-tests.sh runs) every xdist
             worker process starts one of its own in
             $TMS_TEST_ROOT/pg-gwK: the tms workers of a cluster act on its
             one database (tms.database_name), so two modules running at
             once must never share one; the modules of one xdist worker run
             one after the other and share its cluster, as all modules did
             in a serial run.
new_cluster  a factory for clusters of a test's own, for tests that crash,
             restart or reconfigure a server: new_cluster(preload=..., settings=...)
             returns a started Cluster; every one is destroyed after the test.

On a failing test, the server log tail of every cluster it used is printed.

Everything a test starts must be safe to run beside the same test of
another xdist worker: directories come from tempfile.mkdtemp (under
$TMS_TEST_ROOT where a server runs from them), TCP ports are picked free
(world.free_port), catalog names carry a random suffix; nothing uses a fixed
port, path or lock file.
"""

import os
import sys
import tempfile

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from pgcluster import Cluster, wait_for  # noqa: E402,F401


def _test_root():
    root = os.environ.get("TMS_TEST_ROOT")
    if not root:
        root = tempfile.mkdtemp(prefix="tms-pytest.", dir="/tmp")
        os.environ["TMS_TEST_ROOT"] = root
    os.chmod(root, 0o755)
    return root


@pytest.hookimpl(tryfirst=True, hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    setattr(item, "rep_" + rep.when, rep)


def _report_logs(request, clusters):
    rep = getattr(request.node, "rep_call", None)
    if rep is not None and rep.failed:
        for c in clusters:
            sys.stderr.write("\n---- server log of %s (tail) ----\n%s\n"
                             % (c.datadir, c.log_tail()))


def xdist_worker():
    """The xdist worker id ("gw0", "gw1", ...), or None in a serial run."""
    return os.environ.get("PYTEST_XDIST_WORKER")


@pytest.fixture(scope="session")
def pg():
    root = _test_root()
    worker = xdist_worker()
    datadir = os.path.join(root, "pg-%s" % worker if worker else "pg", "data")
    if (not worker and os.environ.get("PGPORT")
            and os.path.exists(os.path.join(datadir, "PG_VERSION"))):
        c = Cluster(datadir, port=int(os.environ["PGPORT"]))
        c.psql("CREATE EXTENSION IF NOT EXISTS tms")
        yield c
        return
    c = Cluster(datadir)
    c.init()
    c.start()
    c.create_database()
    c.psql("CREATE EXTENSION IF NOT EXISTS tms")
    try:
        yield c
    finally:
        c.stop()


@pytest.fixture
def pg_logs_on_failure(request, pg):
    """Use in a test of the shared cluster to get its log tail on failure."""
    yield pg
    _report_logs(request, [pg])


@pytest.fixture
def new_cluster(request):
    made = []
    root = _test_root()

    def make(preload=("tms", "pg_cron"), settings=None, dbname="tms_regress"):
        d = tempfile.mkdtemp(prefix="cluster.", dir=root)
        c = Cluster(os.path.join(d, "data"), preload=preload,
                    settings=settings, dbname=dbname)
        made.append(c)
        c.init()
        c.start()
        c.create_database()
        return c

    yield make
    _report_logs(request, made)
    for c in made:
        c.destroy()
