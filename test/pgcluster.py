#!/usr/bin/python3
"""Throwaway PostgreSQL 15 clusters for tests, benchmarks and the demo.

One implementation used three ways:

* from Python (test/conftest.py and integration tests):
      c = Cluster(datadir, preload=("tms", "pg_cron")); c.init(); c.start()
      c.query(sql, args), c.one(...), c.query_error(...): one statement each;
      c.pool(on): switch the tms worker pool on or off and await it
      c.set_conf({name: value or None}): ALTER SYSTEM SET/RESET, reload,
      await the reload; c.reload_conf(): reload and await it
      fetch(conn, sql, args) on a connection of the caller's; error_text(e)
      FAST_WORKERS: worker intervals short enough for tests to await
* from shell scripts (test/run-tests.sh, scripts/demo.sh):
      test/pgcluster.py start --dir DIR [--port N] [--preload tms,pg_cron] [--set k=v ...]
      test/pgcluster.py stop --dir DIR
  `start` prints shell assignments (PGHOST=... PGPORT=...) for eval.

initdb and postgres refuse to run as root, so when run as root every server
command runs as the `postgres` user through runuser, from /tmp.  The server
listens on a Unix socket in the data directory's parent only
(listen_addresses = ''), never on a network address.

psycopg2 and pytest are imported only by the functions that use them, so
that the shell entry points need neither.
"""

import argparse
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import time

BINDIR = subprocess.run(["pg_config", "--bindir"], capture_output=True,
                        text=True, check=True).stdout.strip()
PG_USER = "postgres"

# Worker settings for tests that await what the pool does: a worker looks
# for work every 50 ms, a lease is dead after 1 s (5 missed heartbeats of
# 200 ms), a failed task is retried after 100 ms, the delay doubling up to
# 400 ms.  A test adding its own: dict(FAST_WORKERS, **{"tms.x": "..."}).
FAST_WORKERS = {
    "tms.naptime": "'50ms'",
    "tms.heartbeat_interval": "'200ms'",
    "tms.missed_heartbeats_limit": "5",
    "tms.retry_delay": "'100ms'",
    "tms.retry_delay_max": "'400ms'",
}


def _as_server_user(cmd):
    if os.geteuid() == 0:
        return ["runuser", "-u", PG_USER, "--"] + cmd
    return cmd


def _chown_to_server_user(path):
    if os.geteuid() == 0:
        pw = pwd.getpwnam(PG_USER)
        os.chown(path, pw.pw_uid, pw.pw_gid)


def free_port():
    """A TCP port number nobody listens on now (used only to name sockets)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Cluster:
    """A PostgreSQL cluster in `datadir`, socket in `datadir`/../sock."""

    def __init__(self, datadir, port=None, preload=("tms", "pg_cron"),
                 dbname="tms_regress", settings=None, server_env=None):
        self.datadir = os.path.abspath(datadir)
        self.root = os.path.dirname(self.datadir)
        self.host = os.path.join(self.root, "sock")
        self.logfile = os.path.join(self.root, "postgres.log")
        self.port = port or free_port()
        self.preload = tuple(preload)
        self.dbname = dbname
        self.settings = dict(settings or {})
        # extra environment of the server (e.g. libfaketime's LD_PRELOAD)
        self.server_env = dict(server_env or {})

    # -- lifecycle -------------------------------------------------------

    def init(self):
        """initdb and write the configuration; the directory must not exist."""
        for d in (self.root, self.host):
            os.makedirs(d, exist_ok=True)
            os.chmod(d, 0o755)
            _chown_to_server_user(d)
        subprocess.run(_as_server_user(
            [os.path.join(BINDIR, "initdb"), "-D", self.datadir, "-A", "trust",
             "-U", PG_USER, "--no-sync", "-E", "UTF8", "--locale=C"]),
            cwd="/tmp", check=True, stdout=subprocess.DEVNULL)
        conf = {
            "listen_addresses": "''",
            "unix_socket_directories": "'%s'" % self.host,
            "port": str(self.port),
            # fsync off is safe for tests (the OS does not crash);
            # synchronous_commit stays on, since a crash test would lose
            # the commits still in WAL buffers
            "fsync": "off",
            "full_page_writes": "off",
            "max_worker_processes": "32",
            "max_connections": "100",
            "log_line_prefix": "'%m [%p] %b %a: '",
            "log_min_messages": "info",
            "restart_after_crash": "on",
            # a placeholder set_conf() writes to await a reload (ALTER
            # SYSTEM takes only a name the server knows)
            "tms_test.reload_token": "''",
        }
        if self.preload:
            conf["shared_preload_libraries"] = "'%s'" % ",".join(self.preload)
        if "tms" in self.preload:
            conf["tms.database_name"] = "'%s'" % self.dbname
            conf["tms.naptime"] = "'200ms'"
        if "pg_cron" in self.preload:
            conf["cron.database_name"] = "'%s'" % self.dbname
            conf["cron.host"] = "'%s'" % self.host
        conf.update(self.settings)
        with open(os.path.join(self.datadir, "postgresql.conf"), "a") as f:
            f.write("\n# written by test/pgcluster.py\n")
            for k, v in conf.items():
                f.write("%s = %s\n" % (k, v))

    def start(self):
        r = subprocess.run(_as_server_user(
            [os.path.join(BINDIR, "pg_ctl"), "-D", self.datadir, "-l",
             self.logfile, "-w", "-t", "60", "start"]),
            cwd="/tmp", stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            env=dict(os.environ, **self.server_env))
        if r.returncode != 0:
            raise RuntimeError("could not start PostgreSQL in %s: %s\n%s"
                               % (self.datadir, r.stdout.strip(), self.log_tail(20)))

    def stop(self, mode="fast"):
        if not os.path.exists(os.path.join(self.datadir, "postmaster.pid")):
            return
        subprocess.run(_as_server_user(
            [os.path.join(BINDIR, "pg_ctl"), "-D", self.datadir, "-m", mode,
             "-w", "-t", "60", "stop"]),
            cwd="/tmp", stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def restart(self):
        self.stop()
        self.start()

    def destroy(self):
        self.stop("immediate")
        shutil.rmtree(self.root, ignore_errors=True)

    def running(self):
        r = subprocess.run(_as_server_user(
            [os.path.join(BINDIR, "pg_ctl"), "-D", self.datadir, "status"]),
            cwd="/tmp", stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        return r.returncode == 0

    def postmaster_pid(self):
        with open(os.path.join(self.datadir, "postmaster.pid")) as f:
            return int(f.readline())

    def pool(self, on, workers=4):
        """Turn the tms worker pool on or off (tms.enabled) and await its
        `workers` pool workers saying so: off, no worker claims anything
        any more."""
        self.psql("ALTER SYSTEM SET tms.enabled = %s" % ("on" if on else "off"))
        self.psql("SELECT pg_reload_conf()")
        wait_for(lambda: self.psql(
            "SELECT count(*) FILTER (WHERE state %s 'disabled') FROM tms.workers"
            " WHERE role = 'worker'" % ("<>" if on else "=")) == str(workers),
            what="the pool to be %s" % ("on" if on else "off"))

    def set_conf(self, settings):
        """ALTER SYSTEM SET each name to its value (a string, quoted here),
        or RESET it for None, then reload and await the reload: a new
        session sees the token of this call in tms_test.reload_token, a
        placeholder (see init()) written with the settings.  The postmaster reads the
        whole file at once and signals its children (the tms workers among
        them) before it accepts that session, so a worker waiting for work
        has the new values before it claims anything queued after this
        returns; tms exposes no reload count of a worker's to await.  A
        worker busy with a task reads them when it next waits."""
        for k, v in settings.items():
            if v is None:
                self.psql("ALTER SYSTEM RESET %s" % k)
            else:
                self.psql("ALTER SYSTEM SET %s = '%s'" % (k, str(v).replace("'", "''")))
        self.reload_conf()

    def reload_conf(self):
        """pg_reload_conf() and await it (see set_conf) after ALTER SYSTEM
        statements of the caller's."""
        import uuid
        token = uuid.uuid4().hex
        self.psql("ALTER SYSTEM SET tms_test.reload_token = '%s'" % token)
        self.psql("SELECT pg_reload_conf()")
        wait_for(lambda: self.psql(
            "SELECT current_setting('tms_test.reload_token', true)") == token,
            interval=0.01, what="the configuration reload")

    # -- access ----------------------------------------------------------

    def dsn(self, dbname=None):
        return "host=%s port=%d dbname=%s user=%s" % (
            self.host, self.port, dbname or self.dbname, PG_USER)

    def env(self):
        return {"PGHOST": self.host, "PGPORT": str(self.port), "PGUSER": PG_USER}

    def psql(self, sql, dbname=None, check=True):
        """Run sql through psql -X -A -t; return stdout."""
        r = subprocess.run(
            ["psql", "-X", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-d",
             dbname or self.dbname, "-c", sql],
            env=dict(os.environ, **self.env()), capture_output=True, text=True)
        if check and r.returncode != 0:
            raise RuntimeError("psql failed: %s" % r.stderr.strip())
        return r.stdout.strip()

    def create_database(self, dbname=None):
        name = dbname or self.dbname
        if self.psql("SELECT 1 FROM pg_database WHERE datname = '%s'" % name,
                     dbname="postgres") != "1":
            self.psql('CREATE DATABASE "%s"' % name, dbname="postgres")

    def connect(self, dbname=None, autocommit=True):
        import psycopg2
        conn = psycopg2.connect(self.dsn(dbname))
        conn.autocommit = autocommit
        return conn

    def query(self, sql, args=None, *, dbname=None, conn=None):
        """Run one statement; return fetch()'s answer (its rows, or None).

        Without conn: on a new autocommit connection to dbname (default the
        cluster's database), closed afterwards.  With conn: on that open
        connection, left open, in whatever transaction state it is (dbname
        is then not used).
        """
        if conn is not None:
            return fetch(conn, sql, args)
        conn = self.connect(dbname)
        try:
            return fetch(conn, sql, args)
        finally:
            conn.close()

    def one(self, sql, args=None, *, dbname=None, conn=None):
        """The first column of query()'s first row; None when it has none."""
        rows = self.query(sql, args, dbname=dbname, conn=conn)
        return rows[0][0] if rows else None

    def query_error(self, sql, args=None, *, dbname=None, conn=None):
        """The psycopg2.Error query() raises; for pytest only: fails the
        test if the statement succeeds."""
        import psycopg2
        import pytest
        with pytest.raises(psycopg2.Error) as ei:
            self.query(sql, args, dbname=dbname, conn=conn)
        return ei.value

    def job(self, jid):
        """The row of tms.maintenance_jobs of job jid, as a dict by column
        name; None when there is none."""
        conn = self.connect()
        try:
            with conn.cursor() as cur:
                cur.execute("SELECT * FROM tms.maintenance_jobs WHERE id = %s", (jid,))
                row = cur.fetchone()
                return dict(zip((d.name for d in cur.description), row)) if row else None
        finally:
            conn.close()

    def wait_job(self, jid, states=("succeeded",), timeout=300):
        """Await the end of job jid (any of JOB_ENDS); return its row (job()),
        and fail, with the row and the server log's tail, unless its state is
        one of states."""
        wait_for(lambda: (self.job(jid) or {}).get("state") in JOB_ENDS, timeout=timeout,
                 what="job %s to end (now %r)" % (jid, self.job(jid)))
        row = self.job(jid)
        assert row["state"] in states, (row, self.log_tail(40))
        return row

    def log_tail(self, lines=80):
        try:
            with open(self.logfile, errors="replace") as f:
                return "".join(f.readlines()[-lines:])
        except OSError:
            return "(no server log)"


# The states a maintenance job ends in (tms.maintenance_jobs.state).
JOB_ENDS = ("succeeded", "failed", "skipped", "cancelled")


def fetch(conn, sql, args=None):
    """Execute sql with args on the open connection conn; return all its
    rows, or None for a statement that returns none.  Leaves conn open and
    its transaction to the caller."""
    with conn.cursor() as cur:
        cur.execute(sql, args)
        return cur.fetchall() if cur.description else None


def error_text(e):
    """A psycopg2 error's primary message, detail, hint and context, one a
    line (an empty line for a missing one): all the text a user is shown,
    for asserting on what an error says or must not say."""
    return "\n".join(x or "" for x in (e.diag.message_primary, e.diag.message_detail,
                                        e.diag.message_hint, e.diag.context))


def wait_for(predicate, timeout=30.0, interval=0.05, what="condition"):
    """Poll predicate() until it returns a true value; return that value.

    For conditions no notification exists for (a process restarted by the
    postmaster, a row written by a worker).  Raises TimeoutError with `what`.
    """
    deadline = time.monotonic() + timeout
    last_exc = None
    while time.monotonic() < deadline:
        try:
            v = predicate()
            if v:
                return v
        except Exception as e:  # the server may be restarting
            last_exc = e
        time.sleep(interval)
    raise TimeoutError("timed out after %.0fs waiting for %s%s" % (
        timeout, what, " (last error: %s)" % last_exc if last_exc else ""))


def _main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("command", choices=["start", "stop", "logtail"])
    ap.add_argument("--dir", required=True, help="cluster root directory")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--preload", default="tms,pg_cron")
    ap.add_argument("--dbname", default="tms_regress")
    ap.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                    help="extra postgresql.conf setting (value as written)")
    a = ap.parse_args()

    datadir = os.path.join(os.path.abspath(a.dir), "data")
    if a.command == "stop":
        Cluster(datadir).stop()
        return
    if a.command == "logtail":
        print(Cluster(datadir).log_tail())
        return

    settings = dict(s.split("=", 1) for s in a.set)
    preload = [p for p in a.preload.split(",") if p]
    c = Cluster(datadir, port=a.port or None, preload=preload,
                dbname=a.dbname, settings=settings)
    if os.path.exists(os.path.join(datadir, "PG_VERSION")):
        # reuse: read the port it was created with
        with open(os.path.join(datadir, "postgresql.conf")) as f:
            for line in f:
                if line.startswith("port = "):
                    c.port = int(line.split("=")[1])
    else:
        c.init()
    if c.running():
        c.restart()             # picks up a freshly installed library
    else:
        c.start()
    c.create_database()
    print("PGHOST=%s" % c.host)
    print("PGPORT=%d" % c.port)
    print("PGUSER=%s" % PG_USER)
    print("TMS_PGLOG=%s" % c.logfile)


if __name__ == "__main__":
    signal.signal(signal.SIGINT, signal.default_int_handler)
    sys.exit(_main())
