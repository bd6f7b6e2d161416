"""
test_v3_tables.py -- Iceberg format v3 tables (row lineage, deletion
vectors) under tms's local maintenance, checked independently of tms by the
v3 test world (test/v3world.py: its own writer of v3 metadata, Parquet by
DuckDB and Puffin deletion vectors, and its reference reader).

  - the world itself: the reference reader's rows of the written table are
    the writer's model (deletion vectors applied, _row_id inherited as
    first_row_id + position or kept from the file, the sequence number
    inherited or kept), and the table keeps the spec's row lineage rules;

The module runs its own cluster and catalog over a file root.
Run: /usr/bin/python3 -m pytest -q test/integration/test_v3_tables.py
"""

import json
import os
import sys
import uuid

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))

import opsworld as ow  # noqa: E402
import v3world as v3  # noqa: E402
from pgcluster import FAST_WORKERS, wait_for  # noqa: E402

pytestmark = pytest.mark.own_cluster
TERMINAL = ("succeeded", "failed", "skipped", "cancelled")


@pytest.fixture(scope="module")
def env(tms_world):
    srv = "v3cat"
    w = tms_world("v3", settings=dict(FAST_WORKERS), catalog={}, sql=lambda w: [
        """CREATE SERVER %s FOREIGN DATA WRAPPER tms_iceberg OPTIONS (
             uri '%s', relative_path_root '%s', request_timeout '5s', retries '0',
             allowed_locations 'file://%s/');
           CREATE USER MAPPING FOR PUBLIC SERVER %s;"""
        % (srv, w["catalog"].uri, w["file_root"], w["file_root"], srv)])
    w = dict(w, server=srv)
    w["st"] = ow.storage(file_root=w["file_root"])
    w["catalog"].create_namespace("v3")
    return w


def new_table(env, **kw):
    loc = "file://%s/v3/%s/t" % (env["file_root"], uuid.uuid4().hex[:10])
    res = v3.write_table(env["st"], loc, **kw)
    ow.give_to_server(env["st"].local_path(loc))
    name = "t_%s" % uuid.uuid4().hex[:8]
    env["catalog"].register("v3", name, res["metadata_location"])
    return name, res


def q(env, sql, args=None):
    return env["pg"].query(sql, args)


def run(env, name, op, options=None):
    return q(env, "SELECT tms.run_operation(%s, 'v3', %s, %s, %s::jsonb, 'local')",
             (env["server"], name, op, json.dumps(options or {})))[0][0]


def plan(env, name, op):
    return q(env, "SELECT action, target, detail FROM tms.plan_operation(%s, 'v3', %s, %s, '{}')",
             (env["server"], name, op))


def wait_job(env, jid, timeout=120):
    def row():
        r = q(env, "SELECT state, reason, last_error, manifests_rewritten, manifests_added"
                   " FROM tms.maintenance_jobs WHERE id = %s", (jid,))
        return r[0] if r else None
    wait_for(lambda: (row() or [None])[0] in TERMINAL, timeout=timeout,
             what="job %s to finish (%r)" % (jid, row()))
    return row()


def expected_rows(res):
    """The writer's model of the current snapshot (write_table's docstring)."""
    out = [(i, "a%d" % i, 0, i, 1) for i in range(5) if i not in (1, 3, 4)]
    out += [(100, "b0-modified", 1, 5, 3)] + [(100 + i, "b%d" % i, 1, 5 + i, 1) for i in range(1, 7)]
    out += [(200 + i, "c%d" % i, 0, 12 + i, 2) for i in range(1, 4)]
    # F: the first file of snapshot 6, whose first-row-id is 28
    out += [(1000 + i, "f%d" % i, 1, 28 + i, 6) for i in range(1, 6000, 2)]
    # extra appends: three rows each, ids from next-row-id 6028 on
    for k in range(sum(1 for f in res["files"] if f.startswith("G"))):
        out += [(5000 + 10 * k + i, "g", k % 2, 6028 + 3 * k + i, 7 + k) for i in range(3)]
    return sorted(out)


def test_world_reader_matches_writer(env):
    name, res = new_table(env)
    _, meta = ow.load(env["catalog"], "v3", name)
    assert meta["format-version"] == 3
    assert v3.rows(env["st"], meta) == expected_rows(res)
    assert v3.check_lineage(meta) == []
    assert meta["next-row-id"] == 6028
    # at most one deletion vector per data file; the replaced one is gone
    dvs = [e["ref"] for e in v3.live(env["st"], meta) if e["content"] == 1]
    assert len(dvs) == len(set(dvs)) == 3


def test_world_roaring_round_trip():
    for positions in ([], [0], [1, 3, 4], list(range(0, 9000, 2)), [5, 70000, 2 ** 33 + 7]):
        blob = v3.dv_blob(positions)
        assert v3.read_dv_blob(blob) == set(positions)
    bad = bytearray(v3.dv_blob([1, 2]))
    bad[-1] ^= 1
    with pytest.raises(ValueError):
        v3.read_dv_blob(bytes(bad))
