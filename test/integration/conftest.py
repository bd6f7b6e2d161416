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
"""

import os
import shutil
import sys
import tempfile
import uuid

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import world  # noqa: E402


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
