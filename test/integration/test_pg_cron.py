"""
test_pg_cron.py -- pg_cron really drives tms: a pg_cron job runs
CALL tms.run_pending(), and that call runs a task.

The pool workers are off (tms.enabled = off), so only the pg_cron job can
run the task; its handler records the backend that ran it, which must be
the job's own (cron.job_run_details.job_pid).  Both of pg_cron's ways of
running a job are covered: a libpq connection to the server (cron.host,
the default) and a background worker (cron.use_background_workers).

Debian 12's pg_cron is 1.4.2, whose schedules have minute granularity
(second intervals came with 1.5), so the job is scheduled '@reboot' and
the server restarted: pg_cron's launcher runs such a job once when it
starts, through the same path as any scheduled run.  Each test starts a
cluster of its own (new_cluster), since it restarts it.

pg_cron's launcher may itself start after the job is created (it exits
until the database of cron.database_name exists, and the postmaster starts
it again a second later); it then runs the @reboot job before the restart
too, and the restart may cut that run short.  Either run may be the one
that runs the task; a run that fails after the restart fails the test.

Run: /usr/bin/python3 -m pytest test/integration/test_pg_cron.py
"""

import pytest

from pgcluster import wait_for

SETUP = """
CREATE EXTENSION tms;
CREATE EXTENSION pg_cron;
CREATE TABLE cron_probe_runs (instance text, data jsonb,
                              by_pid int DEFAULT pg_backend_pid());
CREATE PROCEDURE cron_probe(instance text, data jsonb) LANGUAGE sql
    AS $$ INSERT INTO cron_probe_runs (instance, data) VALUES (instance, data) $$;
SELECT tms.register_task_kind('cron-probe', 'cron_probe(text,jsonb)', 1);
SELECT tms.schedule_task('cron-probe', 'probe-1', '{"n": 1}');
SELECT cron.schedule('tms-run-pending', '@reboot', 'CALL tms.run_pending()');
"""


# clusters of its own (new_cluster): see test/integration/conftest.py
pytestmark = pytest.mark.own_cluster


@pytest.mark.parametrize("mode", ["libpq", "background_worker"])
def test_pg_cron_job_runs_a_tms_task(new_cluster, mode):
    settings = {"tms.enabled": "off"}
    if mode == "background_worker":
        settings["cron.use_background_workers"] = "on"
    c = new_cluster(settings=settings)
    c.psql(SETUP)     # the task may run at once (see above)

    c.restart()

    def run_after_restart():
        return c.psql("SELECT status, return_message FROM cron.job_run_details"
                      " WHERE start_time >= pg_postmaster_start_time()"
                      "   AND status IN ('succeeded', 'failed')") or None
    status = wait_for(run_after_restart, timeout=60,
                      what="pg_cron to run the job after the restart")
    assert status.startswith("succeeded|"), status

    # the task ran once, in the session of a run that succeeded (this one,
    # or the one before the restart)
    assert c.psql("SELECT p.instance, p.data->>'n', d.status FROM cron_probe_runs p"
                  " JOIN cron.job_run_details d ON d.job_pid = p.by_pid") \
        == "probe-1|1|succeeded"
    assert c.psql("SELECT count(*) FROM tms.scheduled_tasks"
                  " WHERE task_name = 'cron-probe'") == "0"
