"""
test_soak.py -- the randomized data-safety campaign (test/soakworld.py):
random Iceberg table histories, tms's maintenance operations run against
them with a concurrent writer (appends, deletes, to main or a branch) and
faults (catalog, storage 5xx and SlowDown, killed helpers and workers, the
cluster stopped at once), invariants checked by the test
world's own reference reader.

  test_histories        a fixed set of histories (SOAK_HISTORIES, default
                        50, numbered from SOAK_SEED, default 1), in batches
                        of SOAK_BATCH (25) on one cluster; `make soak`
                        runs it with other numbers (bench/README.md)
  test_regression       histories that once broke an invariant, each
                        alone; the comment beside each says what broke

A failure prints each violation with the history's number and a one-line
summary of it; `SOAK_SEED=N SOAK_HISTORIES=1` replays one history.

The module runs its own cluster, catalog, s3rver and S3 gate.
Run: /usr/bin/python3 -m pytest -q test/integration/test_soak.py
"""

import os
import sys
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))

import world  # noqa: E402
import soakworld as sw  # noqa: E402
from pgcluster import FAST_WORKERS  # noqa: E402

pytestmark = pytest.mark.own_cluster

SETTINGS = dict(FAST_WORKERS, **{"tms.max_workers": "6", "tms.max_active_operations": "16",
                                 "tms.maintenance_commit_retries": "4"})

# Histories of `make soak` (SOAK_FULL=1) that broke an invariant once
# (number: what broke), replayed alone.
REGRESSIONS = {
    # round 1 compaction beside a helper killed in the same batch: the
    # helper left NAME.tms-tmp-PID (fixed; deterministic test:
    # test_compaction_local.py
    # test_helper_killed_inside_a_local_write_leaves_no_temporary_file)
    3339: "a helper's temporary file left behind",
    # snapshot-expiry beside orphan-cleanup: the expiry failed after its
    # commit landed when the orphan cleanup had deleted the expired
    # snapshots' files first (fixed: a missing file of an expired snapshot
    # is skipped once the commit landed; deterministic test:
    # test_operations.py test_expiry_skips_missing_files_of_expired_snapshots)
    2317: "an expiry failing after its commit beside an orphan cleanup",
    # the writer's directory removed under it (test world, fixed)
    2163: "the writer's directory removed under it",
}


@pytest.fixture(scope="module")
def env(tms_world):
    s3 = world.S3Server(buckets=["warehouse"])
    gate = world.S3Gate(s3)
    srv = "soak"
    try:
        w = tms_world("soak", settings=SETTINGS, s3=s3, catalog=dict(s3=gate.config()),
                      pool=6, sql=lambda w: [
                          """CREATE SERVER %s FOREIGN DATA WRAPPER tms_iceberg OPTIONS (
                               uri '%s', relative_path_root '%s', request_timeout '2s',
                               retries '0', s3_vended_endpoint 'true',
                               allowed_locations 'file://%s/wh/, s3://warehouse/soak/');
                             CREATE USER MAPPING FOR PUBLIC SERVER %s;"""
                          % (srv, w["catalog"].uri, w["file_root"], w["file_root"], srv)])
        yield dict(w, gate=gate, server=srv)
    finally:
        gate.stop()
        s3.stop()


def campaign(env, numbers, batch, full=None):
    started = time.time()
    def log(line):
        sys.stderr.write(line + "\n")
        sys.stderr.flush()
    camp = sw.Campaign(env, env["server"], big=os.environ.get("SOAK_BIG") == "1",
                       fast=(os.environ.get("SOAK_FULL") != "1") if full is None else not full,
                       log=log)
    camp.run(numbers, batch=batch)
    c = camp.counts
    sys.stderr.write(
        "\nsoak: histories %d (numbers %d..%d) x moves %d x faults %d in %.0f s; violations %d; "
        "rows checked %d; files checked %d; writer commits %d; jobs %s; unchecked snapshots %d;"
        " expiry commits checked %d (kept more than the oracle: %d)\n" % (
            c["histories"], numbers[0], numbers[-1], c["moves"], c["faults"],
            time.time() - started, len(camp.violations), c["rows checked"], c["files checked"],
            c["writer commits"], {k[5:]: v for k, v in c.items() if k.startswith("jobs ")},
            c["unchecked snapshots"], c["expiry commits checked"],
            c["expiry kept more than the oracle"]))
    sys.stderr.write("soak: %s\n" % ", ".join("%s %.1f" % (k, v) for k, v in sorted(c.items())))
    for row in env["pg"].query(
            "SELECT operation, count(*), round(avg(extract(epoch FROM finished_at - created_at))::numeric, 1),"
            " round(max(extract(epoch FROM finished_at - created_at))::numeric, 1),"
            " round(avg(extract(epoch FROM started_at - created_at))::numeric, 1), sum(attempts)"
            " FROM tms.maintenance_jobs GROUP BY 1 ORDER BY 1"):
        sys.stderr.write("soak: jobs %s: %d, %s s on average (%s s at most, %s s waiting), %d attempts\n" % row)
    return camp


def test_histories(env):
    first = int(os.environ.get("SOAK_SEED", "1"))
    count = int(os.environ.get("SOAK_HISTORIES", "50"))
    camp = campaign(env, list(range(first, first + count)),
                    int(os.environ.get("SOAK_BATCH", "25")))
    assert not camp.violations, "\n".join(camp.violations[:20])


@pytest.mark.parametrize("number", sorted(REGRESSIONS))
def test_regression(env, number):
    camp = campaign(env, [number], 1, full=True)
    assert not camp.violations, "\n".join(camp.violations)


def test_orphan_location_outside_the_table_is_refused_before_a_job(env, tmp_path):
    """Found by the campaign (history 9 of the fixed set, when the
    generator gave orphan-cleanup's "location" as a relative path): the
    job was recorded and failed when it ran, where every other bad option
    is refused by tms.run_operation before a job exists."""
    import psycopg2
    plan = sw.Plan(900000009, "s3://warehouse/soak", "file://%s/wh/soak" % env["file_root"],
                   env["file_root"], int(time.time() * 1000), fast=True)
    sw.Campaign(env, env["server"])          # the namespace
    sw.write_files([plan], str(tmp_path))
    sw.Builder(plan, env["catalog"], env["st"], sw.Campaign.NS).run()
    jobs = env["pg"].one("SELECT count(*) FROM tms.maintenance_jobs")
    for where in ("data", plan.location + "-nb/data", "file:///tmp"):
        for sql in ("SELECT tms.run_operation(%s, %s, %s, 'orphan-cleanup', %s::jsonb)",
                    "SELECT count(*) FROM tms.plan_operation(%s, %s, %s, 'orphan-cleanup',"
                    " %s::jsonb)"):
            with pytest.raises(psycopg2.Error) as ei:
                env["pg"].query(sql, (env["server"], sw.Campaign.NS, plan.name,
                                      '{"location": "%s", "older-than": "3 days"}' % where))
            assert ei.value.pgcode == "22023", ei.value
            assert 'invalid option "location"' in str(ei.value)
    assert env["pg"].one("SELECT count(*) FROM tms.maintenance_jobs") == jobs
    # the table location and a place under it are accepted
    for where in (plan.location, plan.location + "/data"):
        env["pg"].query("SELECT count(*) FROM tms.plan_operation(%s, %s, %s, 'orphan-cleanup',"
                        " %s::jsonb)", (env["server"], sw.Campaign.NS, plan.name,
                                        '{"location": "%s"}' % where))
