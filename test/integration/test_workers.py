"""The tms process tree under signals, crashes, reloads and standbys.

Each test starts a cluster of its own (new_cluster), since it kills
processes or reconfigures the server.
"""

import os
import signal
import subprocess

import psycopg2
import pytest

from pgcluster import Cluster, wait_for

POOL = 4                       # tms.max_workers default
ALL_UP = "role = 'launcher' OR (role IN ('supervisor', 'worker') AND state = 'idle')"


# clusters of its own (new_cluster): see test/integration/conftest.py
pytestmark = pytest.mark.own_cluster


def workers(c):
    """{(role, worker_number): pid} of the running tms processes."""
    rows = c.psql("SELECT role, coalesce(worker_number, -1), pid FROM tms.workers")
    out = {}
    for line in rows.splitlines():
        role, num, pid = line.split("|")
        out[(role, int(num))] = int(pid)
    return out


def all_running(c):
    """The full tree is up and idle: launcher, supervisor, POOL workers."""
    n = c.psql("SELECT count(*) FROM tms.workers WHERE %s" % ALL_UP)
    return int(n) == 2 + POOL


@pytest.fixture
def cluster(new_cluster):
    c = new_cluster()
    c.psql("CREATE EXTENSION tms")
    wait_for(lambda: all_running(c), what="the tms workers to start")
    return c


def test_sigterm_worker_is_replaced(cluster):
    c = cluster
    conn = c.connect()            # a session that must survive
    pm = c.postmaster_pid()
    before = workers(c)
    victim = before[("worker", 2)]

    os.kill(victim, signal.SIGTERM)

    def replaced():
        w = workers(c)
        return w.get(("worker", 2)) not in (None, victim) and all_running(c)
    wait_for(replaced, what="worker 2 to be started again")

    after = workers(c)
    # only the killed worker changed; PostgreSQL did not restart
    for key, pid in before.items():
        if key != ("worker", 2):
            assert after[key] == pid, key
    assert c.postmaster_pid() == pm
    with conn.cursor() as cur:
        cur.execute("SELECT 1")
        assert cur.fetchone() == (1,)
    assert ('background worker "tms worker" (PID %d) exited with exit code 1'
            % victim) in c.log_tail(200)


def test_sigterm_supervisor_and_launcher_are_replaced(cluster):
    c = cluster
    before = workers(c)

    os.kill(before[("supervisor", -1)], signal.SIGTERM)
    wait_for(lambda: workers(c).get(("supervisor", -1)) not in
             (None, before[("supervisor", -1)]) and all_running(c),
             what="a new supervisor")
    # the pool kept running under the new supervisor: no duplicate workers
    after = workers(c)
    assert sum(1 for k in after if k[0] == "worker") == POOL
    for i in range(POOL):
        assert after[("worker", i)] == before[("worker", i)]

    # the launcher is a static worker: the postmaster restarts it (5 s)
    os.kill(before[("launcher", -1)], signal.SIGTERM)
    wait_for(lambda: workers(c).get(("launcher", -1)) not in
             (None, before[("launcher", -1)]), timeout=30,
             what="a new launcher")
    # and it adopts the running supervisor instead of starting a second one
    wait_for(lambda: all_running(c), what="the tree to settle")
    assert int(c.psql("SELECT count(*) FROM tms.workers WHERE role = 'supervisor'")) == 1


def test_sigkill_worker_crash_restarts_and_workers_return(cluster):
    c = cluster
    pm = c.postmaster_pid()
    before = workers(c)

    os.kill(before[("worker", 1)], signal.SIGKILL)

    # PostgreSQL reinitialises after the crash of a child, keeping its
    # postmaster; the launcher then brings back the whole tree
    wait_for(lambda: "all server processes terminated; reinitializing"
             in c.log_tail(400), what="crash recovery to start")
    wait_for(lambda: all_running(c), timeout=60, what="the tms workers after crash recovery")
    after = workers(c)
    assert c.postmaster_pid() == pm
    assert set(after) == set(before)
    assert not set(after.values()) & set(before.values())


def test_reload_disables_and_enables_without_restart(cluster):
    c = cluster
    before = workers(c)
    c.psql("ALTER SYSTEM SET tms.enabled = off")
    c.psql("SELECT pg_reload_conf()")
    wait_for(lambda: c.psql("SELECT count(*) FROM tms.workers WHERE state = 'disabled'")
             == str(1 + POOL), what="workers to go idle")
    c.psql("ALTER SYSTEM RESET tms.enabled")
    c.psql("SELECT pg_reload_conf()")
    wait_for(lambda: all_running(c), what="workers to resume")
    assert workers(c) == before


def test_a_misspelt_setting_in_postgresql_conf(new_cluster):
    """README.md, "Settings": tms reserves the prefix tms., so a misspelt
    tms.* line of postgresql.conf is removed at start with a WARNING (the
    server starts), refused with a LOG line at a reload (the other changes
    are applied), and SET of it is an error."""
    c = new_cluster(settings={"tms.max_workrs": "3", "tms.enabled": "off"})
    with open(c.logfile, errors="replace") as f:
        log = f.read()
    assert 'WARNING:  invalid configuration parameter name "tms.max_workrs", removing it' in log
    assert '"tms" is now a reserved prefix' in log
    assert c.query_error("SHOW tms.max_workrs").pgcode == "42704"
    e = c.query_error("SET tms.max_workrs = 1")
    assert e.pgcode == "42602" and "reserved prefix" in e.diag.message_detail

    with open(os.path.join(c.datadir, "postgresql.conf"), "a") as f:
        f.write("tms.naptme = '2s'\ntms.enabled = on\n")
    c.query("SELECT pg_reload_conf()")
    wait_for(lambda: c.one("SHOW tms.enabled") == "on", what="the reload to apply tms.enabled")
    with open(c.logfile, errors="replace") as f:
        log = f.read()
    assert 'invalid configuration parameter name "tms.naptme"' in log
    assert "contains errors; unaffected changes were applied" in log


def test_workers_wait_for_the_extension(new_cluster):
    c = new_cluster()
    # the database exists but has no CREATE EXTENSION tms yet: the view is
    # not there, so ask pg_stat_activity, then install and watch them turn idle
    wait_for(lambda: c.psql("SELECT count(*) FROM pg_stat_activity "
                            "WHERE backend_type IN ('tms supervisor', 'tms worker')")
             == str(1 + POOL), what="supervisor and pool")
    c.psql("CREATE EXTENSION tms")
    wait_for(lambda: all_running(c), what="workers to see the extension")


def test_without_preload(new_cluster):
    c = new_cluster(preload=())
    c.psql("CREATE EXTENSION tms")
    assert c.psql("SELECT count(*) FROM pg_stat_activity WHERE backend_type LIKE 'tms%'") == "0"
    conn = c.connect()
    with conn.cursor() as cur:
        with pytest.raises(psycopg2.Error) as e:
            cur.execute("SELECT * FROM tms.workers")
    assert e.value.pgcode == "55000"
    assert "shared_preload_libraries" in e.value.diag.message_hint
    assert "requires tms to be loaded" in e.value.diag.message_primary


def test_hot_standby_runs_no_workers(new_cluster, request):
    primary = new_cluster(settings={"wal_level": "replica", "max_wal_senders": "4"})
    primary.psql("CREATE EXTENSION tms")
    wait_for(lambda: all_running(primary), what="workers on the primary")

    root = os.path.dirname(primary.root)
    standby_root = os.path.join(root, "standby-%d" % os.getpid())
    standby = Cluster(os.path.join(standby_root, "data"))
    os.makedirs(standby_root)
    os.chmod(standby_root, 0o755)
    if os.geteuid() == 0:
        subprocess.run(["chown", "postgres", standby_root], check=True)
    try:
        # -c fast: the backup's checkpoint at once, not spread over
        # checkpoint_completion_target of checkpoint_timeout (minutes);
        # --no-sync: a test cluster survives no OS crash (fsync = off too)
        cmd = ["pg_basebackup", "-D", standby.datadir, "-R", "-X", "stream",
               "-c", "fast", "--no-sync", "-h", primary.host, "-p", str(primary.port), "-U", "postgres"]
        if os.geteuid() == 0:
            cmd = ["runuser", "-u", "postgres", "--"] + cmd
        subprocess.run(cmd, check=True, cwd="/tmp")
        os.makedirs(standby.host, exist_ok=True)
        if os.geteuid() == 0:
            subprocess.run(["chown", "postgres", standby.host], check=True)
        with open(os.path.join(standby.datadir, "postgresql.conf"), "a") as f:
            f.write("port = %d\nunix_socket_directories = '%s'\nhot_standby = on\n"
                    % (standby.port, standby.host))
        standby.start()
        assert standby.psql("SELECT pg_is_in_recovery()") == "t"
        # the standby has the extension (replicated) but no tms process;
        # a write on the primary replicates, proving the standby is live
        primary.psql("CREATE TABLE probe AS SELECT 1 AS x")
        wait_for(lambda: standby.psql("SELECT count(*) FROM pg_class WHERE relname = 'probe'") == "1",
                 what="replication of a probe table")
        assert standby.psql("SELECT count(*) FROM tms.workers") == "0"
        assert standby.psql("SELECT count(*) FROM pg_stat_activity "
                            "WHERE backend_type LIKE 'tms%'") == "0"

        # after promotion the launcher starts and the tree comes up
        standby.psql("SELECT pg_promote()")
        wait_for(lambda: all_running(standby), timeout=60, what="workers after promotion")
    finally:
        rep = getattr(request.node, "rep_call", None)
        if rep is not None and rep.failed:
            print("---- standby log ----\n" + standby.log_tail())
        standby.destroy()
