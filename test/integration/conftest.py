"""
conftest.py (test/integration) -- pytest fixtures of the test world.

  world_pg       the lead's session `pg` fixture (test/conftest.py) when it
                 exists, else a throwaway PostgreSQL cluster (world.py)
  catalog_dsn    DSN of the database `iceberg_catalog` holding the pointers
  s3             a session s3rver (bucket "warehouse")
  s3_gate        a session S3 gate in front of `s3` (throttling and
                 credential checks off until a test turns them on; a test
                 that does turns them off again)
  file_root      a session directory relative fixture paths resolve against
  catalog        a session catalog: file:// warehouse under file_root, S3
                 through `s3`, no auth
  real_tables    every real fixture table loaded into `catalog` (namespace
                 "real"), as returned by world.load_real_fixtures
  make_catalog   factory for catalogs with other options (auth, S3 warehouse,
                 ...); each gets its own catalog name and is stopped at the
                 end of the test
  server_log_on_failure
                 (autouse) after a failed test of a module whose `env`
                 fixture is a world with a cluster (env["pg"]), the tail of
                 that cluster's server log in the test's report
  tms_world      module-scoped factory of a module's own tms world: a
                 cluster of its own with the module's settings and the pool,
                 a file root, an s3rver (its own, or one given), a catalog,
                 the real fixtures if asked, the module's SQL (servers,
                 procedures, task kinds); see make_world below.  Every
                 module it starts a cluster for is marked own_cluster (a
                 module-level `pytestmark = pytest.mark.own_cluster`); the
                 factory refuses to start one in an unmarked module, so the
                 marker says truly which modules run on a cluster of their
                 own.

Modules marked own_cluster start a cluster of their own (through
tms_world or new_cluster) because they need settings of their own, crash
or restart a server, or count what the whole database holds; the others
run on the session world only.  Session fixtures exist once per xdist
worker (test/run-tests.sh runs -n 4 --dist loadgroup; test/conftest.py), so
the modules a worker runs one after the other share them.

pytest_collection_modifyitems hands the longest modules out first
(LONG_FIRST), and a long module may split into units that run at once.

Tests marked serial assert what depends on the machine's speed, not
only on tms: test/run-tests.sh runs them alone,
after the parallel run (-m "not serial", then -m serial), so that the
other workers' load never decides their outcome.
"""

import os
import shutil
import sys
import tempfile
import uuid

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import world  # noqa: E402
import opsworld as ow  # noqa: E402
from pgcluster import FAST_WORKERS, Cluster, wait_for  # noqa: E402


# Work units of the parallel run (test/run-tests.sh: --dist loadgroup): a
# module's tests run in one worker, in order, as their module-scoped
# fixtures need; each test gets its module's xdist_group unless it names
# one of its own.  A long module splits by marking some of its tests
# @pytest.mark.xdist_group("test_x.py:part"): that part runs in a worker of
# its own beside the rest of the module, with its own instance of the
# module's fixtures (one more world set up, a few seconds).
#
# The longest units first, longest first (summed --durations=0 of a
# parallel run): the units are handed out in collection order, so these
# start first and the run does not end waiting for one begun last.  Order
# only; a unit missing here runs after them, in its usual order.
LONG_FIRST = (
    "test_compaction_local.py:scale",
    "test_operations.py:real",
    "test_compaction_local.py",
    "test_operations.py",
    "test_soak.py",
    "test_world_compact.py",
    "test_engine_jobs.py",
    "test_dump_upgrade.py",
    "test_posdel_local.py",
    "test_compaction_types.py",
    "test_workers.py",
    "test_schedules.py",
    "test_policy_memory.py",
    "test_purge_async.py",
    "test_storage_s3.py",
    "test_hostile_catalog.py",
    "test_storage_azure.py",
    "test_leases.py",
    "test_policy_cycle.py",
    "test_v3_tables.py",
    "test_gcs_world.py",
    "test_delete_pool.py",
    "test_sched.py",
)


def work_unit(item):
    """The xdist_group of item: its own mark's, else its module's name."""
    mark = item.get_closest_marker("xdist_group")
    if mark is not None:
        return mark.args[0] if mark.args else mark.kwargs.get("name", "default")
    return item.path.name


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(session, config, items):
    # before xdist's own hook, which names each test's unit after its mark
    for item in items:
        if item.get_closest_marker("xdist_group") is None:
            item.add_marker(pytest.mark.xdist_group(item.path.name))
    rank = {name: i for i, name in enumerate(LONG_FIRST)}
    # a stable sort: a unit's tests stay together and in their order
    items.sort(key=lambda item: rank.get(work_unit(item), len(rank)))


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "own_cluster: the module runs on a cluster of its own "
        "(tms_world or new_cluster), not on the session's `pg`")
    config.addinivalue_line(
        "markers", "serial: the test runs alone, after the parallel run "
        "(test/run-tests.sh): what it asserts depends on the machine's speed")


@pytest.fixture(autouse=True)
def server_log_on_failure(request):
    yield
    rep = getattr(request.node, "rep_call", None)
    if rep is None or not rep.failed or "env" not in request.fixturenames:
        return
    env = request.getfixturevalue("env")
    pg = env.get("pg") if isinstance(env, dict) else None
    if pg is not None:
        sys.stderr.write("---- server log (tail) ----\n%s\n" % pg.log_tail(150))


@pytest.fixture(scope="session")
def world_pg(request):
    try:
        yield request.getfixturevalue("pg")
        return
    except pytest.FixtureLookupError:
        pass
    pg = world.ThrowawayPostgres()
    yield pg
    pg.stop()


@pytest.fixture(scope="session")
def catalog_dsn(world_pg):
    world.ensure_database(world_pg.psql, "iceberg_catalog")
    return world_pg.dsn("iceberg_catalog")


@pytest.fixture(scope="session")
def s3():
    server = world.S3Server(buckets=["warehouse"])
    yield server
    server.stop()


@pytest.fixture(scope="session")
def s3_gate(s3):
    gate = world.S3Gate(s3)
    yield gate
    gate.stop()


@pytest.fixture(scope="session")
def file_root():
    d = tempfile.mkdtemp(prefix="tms-world-files-")
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope="session")
def catalog(catalog_dsn, s3, file_root):
    server = world.CatalogServer(catalog_dsn, "file://%s/warehouse" % file_root,
                                 catalog_name="world_%s" % uuid.uuid4().hex[:8],
                                 s3=s3, file_root=file_root)
    yield server
    server.stop()


@pytest.fixture(scope="session")
def real_tables(catalog, s3, file_root):
    return world.load_real_fixtures(catalog, s3=s3, file_root=file_root)


@pytest.fixture
def make_catalog(catalog_dsn, s3, file_root):
    started = []

    def make(**kw):
        kw.setdefault("catalog_name", "c_%s" % uuid.uuid4().hex[:10])
        kw.setdefault("s3", s3)
        kw.setdefault("file_root", file_root)
        warehouse = kw.pop("warehouse", "file://%s/wh_%s" % (file_root, kw["catalog_name"]))
        server = world.CatalogServer(catalog_dsn, warehouse, **kw)
        started.append(server)
        return server

    yield make
    for server in started:
        server.stop()


@pytest.fixture(scope="module")
def tms_world(request):
    """make_world(name, settings=FAST_WORKERS, s3="own", catalog=None,
    pointers="tms", real=False, sql=None, task_kinds=None, pool=4): start a
    module's world and return it as a dict; everything is stopped and
    removed after the module (in reverse order).

      name        short tag: the directory $TMS_TEST_ROOT/tms-NAME-*, the
                  catalog name NAME_<random>
      settings    postgresql.conf of the module's cluster (FAST_WORKERS or
                  dict(FAST_WORKERS, **{...}))
      s3          "own": an s3rver of the module's own (bucket
                  "warehouse"); None: none; or a session S3Server/S3Gate
                  (not stopped here)
      catalog     None: no catalog; else keyword arguments of
                  world.CatalogServer besides the DSN (s3, azure,
                  credential, warehouse: by default file://<file root>/wh,
                  ...); s3 defaults to the s3rver and file_root to the
                  world's
      pointers    where the catalog keeps its pointers: "tms" (the module's
                  cluster, database tms_regress), "own" (a cluster of its
                  own without tms, one a crash of the first cannot cut off)
                  or a DSN
      cluster     False: no tms cluster at all (a world of the catalog only)
      real        load every real fixture table into the catalog
                  (world.load_real_fixtures, namespace "real")
      sql         callable(world) -> SQL strings run in order once the
                  catalog is up (servers, user mappings, procedures)
      task_kinds  {kind: (procedure signature, max concurrency)} registered
                  through tms.register_task_kind
      pool        await this many idle pool workers (None: do not)

    The dict has pg, s3, catalog, file_root, root, real, st (an
    opsworld.storage of the s3rver and the file root)."""
    marked = request.node.get_closest_marker("own_cluster") is not None
    stop = []

    def make_world(name, settings=FAST_WORKERS, s3="own", catalog=None, pointers="tms",
                   cluster=True, real=False, sql=None, task_kinds=None, pool=4):
        # below the run's root (test/run-tests.sh stops what is left there)
        root = tempfile.mkdtemp(prefix="tms-%s-" % name,
                                dir=os.environ.get("TMS_TEST_ROOT") or "/tmp")
        os.chmod(root, 0o755)
        stop.append(lambda: shutil.rmtree(root, ignore_errors=True))
        w = dict(root=root, pg=None, s3=None, catalog=None, real=None)
        if cluster and not marked:
            raise RuntimeError("%s starts a cluster through tms_world but is not marked"
                               " own_cluster" % request.node.nodeid)
        if cluster:
            c = Cluster(os.path.join(root, "pg", "data"), settings=settings)
            stop.append(c.destroy)
            c.init()
            c.start()
            c.create_database()
            c.psql("CREATE EXTENSION tms")
            w["pg"] = c
        file_root = os.path.join(root, "files")
        os.makedirs(file_root)
        os.chmod(file_root, 0o755)
        w["file_root"] = file_root
        if s3 == "own":
            s3 = world.S3Server(buckets=["warehouse"])
            stop.append(s3.stop)
        w["s3"] = s3
        if catalog is not None:
            if pointers == "tms":
                dsn = w["pg"].dsn()
            elif pointers == "own":
                catpg = Cluster(os.path.join(root, "catpg", "data"), preload=())
                stop.append(catpg.destroy)
                catpg.init()
                catpg.start()
                catpg.create_database()
                dsn = catpg.dsn()
            else:
                dsn = pointers
            kw = dict(catalog)
            kw.setdefault("catalog_name", "%s_%s" % (name, uuid.uuid4().hex[:6]))
            kw.setdefault("s3", s3)
            kw.setdefault("file_root", file_root)
            cat = world.CatalogServer(dsn, kw.pop("warehouse", "file://%s/wh" % file_root),
                                      **kw)
            stop.append(cat.stop)
            w["catalog"] = cat
            if real:
                w["real"] = world.load_real_fixtures(cat, s3=s3, file_root=file_root)
        ow.give_to_server(file_root)
        w["st"] = ow.storage(s3 if isinstance(s3, world.S3Server) else None, file_root,
                             azure=(catalog or {}).get("azure"))
        for stmt in (sql(w) if sql else ()):
            w["pg"].psql(stmt)
        for kind, (proc, concurrency) in (task_kinds or {}).items():
            w["pg"].psql("SELECT tms.register_task_kind('%s', '%s', %d)"
                         % (kind, proc, concurrency))
        if cluster and pool:
            wait_for(lambda: w["pg"].psql(
                "SELECT count(*) FROM tms.workers WHERE role = 'worker'"
                " AND state = 'idle'") == str(pool), what="the pool")
        return w

    try:
        yield make_world
    finally:
        for f in reversed(stop):
            f()
