#!/usr/bin/env bash
# make demo: install what is missing, build, start a PostgreSQL 15 cluster
# with tms and pg_cron preloaded in /tmp/tms-demo (TMS_DEMO_DIR), create the extension, and show
# the tms workers at work.  `make demo-stop` (this script's "stop") stops
# everything it started.
set -euo pipefail
cd "$(dirname "$0")/.."
top=$(pwd)
demo="${TMS_DEMO_DIR:-/tmp/tms-demo}"
PY=/usr/bin/python3

stop_world() {
  if [ -f "$demo/world.pid" ]; then
    kill -TERM "$(cat "$demo/world.pid")" 2>/dev/null || true
    for _ in $(seq 1 100); do
      kill -0 "$(cat "$demo/world.pid")" 2>/dev/null || break
      sleep 0.1
    done
    rm -f "$demo/world.pid" "$demo/world.json"
  fi
}

stop() {
  stop_world
  if [ -d "$demo/pg" ]; then
    $PY test/pgcluster.py stop --dir "$demo/pg"
    echo "demo stopped (its files stay in $demo; rm -rf it to start afresh)"
  else
    echo "no demo is running"
  fi
}

if [ "${1:-start}" = stop ]; then
  stop
  exit 0
fi

# one install into the system PostgreSQL at a time (scripts/install-lock.sh);
# released before any server starts, so the demo does not keep it
. scripts/install-lock.sh
tms_install_lock
bash scripts/install-deps.sh
make -s WERROR=1
make -s WERROR=1 install >/dev/null
tms_install_unlock

mkdir -p "$demo"
chmod 755 "$demo"
eval "$($PY test/pgcluster.py start --dir "$demo/pg" --dbname tms)"
export PGHOST PGPORT PGUSER

psql() { command psql -X -v ON_ERROR_STOP=1 -d tms "$@"; }
# a fresh extension each time: the demo keeps no data worth an upgrade
psql -qc "DROP EXTENSION IF EXISTS tms CASCADE" -c "CREATE EXTENSION tms" 2>/dev/null
psql -qc "CREATE EXTENSION IF NOT EXISTS pg_cron"

# The test world: s3rver and the REST catalog with the real fixture tables,
# running in the background until make demo-stop.
stop_world
command psql -X -q -d postgres -c "DROP DATABASE IF EXISTS iceberg_catalog" \
  -c "CREATE DATABASE iceberg_catalog"
rm -rf "$demo/world"; mkdir -p "$demo/world"
nohup $PY scripts/demo_world.py --dir "$demo/world" \
  --dsn "host=$PGHOST port=$PGPORT dbname=iceberg_catalog user=postgres" \
  > "$demo/world.log" 2>&1 &
echo $! > "$demo/world.pid"
for _ in $(seq 1 600); do
  [ -f "$demo/world/world.json" ] && break
  kill -0 "$(cat "$demo/world.pid")" 2>/dev/null || { cat "$demo/world.log"; exit 1; }
  sleep 0.1
done
[ -f "$demo/world/world.json" ] || { echo "the test world did not start"; cat "$demo/world.log"; exit 1; }
catalog_uri=$($PY -c "import json,sys; print(json.load(open(sys.argv[1]))['catalog_uri'])" "$demo/world/world.json")
s3_endpoint=$($PY -c "import json,sys; print(json.load(open(sys.argv[1]))['s3_endpoint'])" "$demo/world/world.json")
engine_uri=$($PY -c "import json,sys; print(json.load(open(sys.argv[1]))['engine_uri'])" "$demo/world/world.json")
azure_endpoint=$($PY -c "import json,sys; print(json.load(open(sys.argv[1]))['azure_endpoint'])" "$demo/world/world.json")
# Azurite's documented development key (not a secret)
azurite_key='Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=='

psql -q <<SQL
DROP SERVER IF EXISTS demo CASCADE;
CREATE SERVER demo FOREIGN DATA WRAPPER tms_iceberg
    OPTIONS (uri '$catalog_uri', s3_endpoint '$s3_endpoint', s3_path_style 'true',
             azure_endpoint '$azure_endpoint',
             relative_path_root '$demo/world/files',
             allowed_locations 's3://hyperparam-iceberg/, file://$demo/world/files/, abfss://warehouse@devstoreaccount1.dfs.core.windows.net/');
CREATE USER MAPPING FOR CURRENT_USER SERVER demo
    OPTIONS (s3_access_key_id 'S3RVER', s3_secret_access_key 'S3RVER',
             azure_account_key '$azurite_key');
-- the test world's Trino-protocol engine, which knows the demo catalog as "lake"
DROP SERVER IF EXISTS trino CASCADE;
CREATE SERVER trino FOREIGN DATA WRAPPER tms_engine
    OPTIONS (type 'trino', uri '$engine_uri', catalog 'lake', poll_interval '100ms');
CREATE USER MAPPING FOR CURRENT_USER SERVER trino OPTIONS (user 'demo');
SQL

echo
echo "== tms processes (tms.workers)"
for i in $(seq 1 100); do
  n=$(psql -Atc "SELECT count(*) FROM tms.workers WHERE state = 'idle'")
  [ "$n" -ge 2 ] && break
  sleep 0.1
done
psql -c "SELECT pid, role, database, worker_number, state, started_at FROM tms.workers"
echo "== the same processes in pg_stat_activity"
psql -c "SELECT pid, backend_type, application_name FROM pg_stat_activity WHERE backend_type LIKE 'tms%' OR backend_type LIKE 'pg_cron%' ORDER BY 2, 3"
echo "== tms settings"
psql -c "SELECT name, setting, unit, context FROM pg_settings WHERE name LIKE 'tms.%' ORDER BY 1"

echo "== Iceberg tables in the demo catalog (real tables written by Spark, Iceberg Java, PyIceberg)"
psql -c "SELECT * FROM tms.list_tables('demo')"
echo "== what a policy condition sees: metrics of real.spark_v2_mor_posdeletes (S3, merge-on-read)"
psql -c "SELECT key, value FROM jsonb_each(tms.table_metrics('demo', 'real', 'spark_v2_mor_posdeletes')) ORDER BY 1"
echo "== a table stored on Azure (Azurite): azure.events, its metrics"
psql -c "SELECT key, value FROM jsonb_each(tms.table_metrics('demo', 'azure', 'events')) ORDER BY 1"
echo "== a condition, checked and explained against those metrics"
psql -c "SELECT ok, type, needs FROM tms.dsl_check('positionDeleteFiles > 0 AND (dataFiles > 10 OR snapshots > 2)')"
psql -c "SELECT tms.dsl_explain('positionDeleteFiles > 0 AND (dataFiles > 10 OR snapshots > 2)',
                               tms.table_metrics('demo', 'real', 'spark_v2_mor_posdeletes'))->>'text' AS explanation"
echo "== the scheduler: a task kind, three tasks, run by the pool workers"
psql -q <<'SQL'
DROP TABLE IF EXISTS demo_runs;
CREATE TABLE demo_runs (instance text, by_pid int DEFAULT pg_backend_pid(), at timestamptz DEFAULT now());
CREATE OR REPLACE PROCEDURE demo_hello(i text, d jsonb) LANGUAGE sql
    AS $$ INSERT INTO demo_runs (instance) VALUES (i) $$;
SELECT tms.register_task_kind('demo-hello', 'demo_hello(text,jsonb)', 2) \gset
SELECT count(tms.schedule_task('demo-hello', 'task-' || g, jsonb_build_object('n', g))) AS scheduled
  FROM generate_series(1, 3) g;
SQL
for _ in $(seq 1 100); do
  [ "$(psql -Atc "SELECT count(*) FROM tms.scheduled_tasks WHERE task_name = 'demo-hello'")" = 0 ] && break
  sleep 0.1
done
psql -c "SELECT r.instance, a.backend_type, a.application_name FROM demo_runs r LEFT JOIN pg_stat_activity a ON a.pid = r.by_pid ORDER BY r.at DESC LIMIT 3"
echo "== a policy over the real tables: which need compaction, and why (tms.evaluation_log)"
psql -q <<'SQL'
DO $$
BEGIN
    PERFORM tms.create_object_group('demo-real', 'demo', namespace_pattern => 'real', table_pattern => '*');
    PERFORM tms.create_policy('demo-compact', 'demo-real', 'compact tables with several small files');
    PERFORM tms.add_rule('demo-compact', 'compaction', 'trino', '{"commits-added": 1}',
                         'dataFiles > 1 AND avgDataFileSize < 128MB');
END $$;
SQL
# its task (kind policy-expand) evaluates it in a pool worker at once;
# evaluate_now would do the same in this session.  Show the log.
for _ in $(seq 1 300); do
  [ "$(psql -Atc "SELECT count(DISTINCT table_name) FROM tms.evaluation_log WHERE policy_name = 'demo-compact'")" -ge 7 ] && break
  sleep 0.1
done
psql -c "SELECT DISTINCT ON (table_name) table_name, result, decision, explanation
           FROM tms.evaluation_log WHERE policy_name = 'demo-compact' ORDER BY table_name, id DESC"

echo "== maintenance inside tms, planned first: ops.events has 30 snapshots, 30 small manifests, orphans"
echo "-- tms.plan_operation changes nothing: what snapshot expiry would do"
psql -c "SELECT action, count(*), sum((detail->>'size')::bigint) AS bytes
           FROM tms.plan_operation('demo', 'ops', 'events', 'snapshot-expiry',
                                   '{\"retain-last\": 5, \"older-than\": \"1 second\"}')
          GROUP BY 1 ORDER BY 1"
echo "-- what orphan cleanup would delete (3 orphans backdated ten days; a young one is kept)"
psql -c "SELECT action, target, detail FROM tms.plan_operation('demo', 'ops', 'events', 'orphan-cleanup')"
echo "-- what a manifest rewrite would merge"
psql -c "SELECT action, count(*) FROM tms.plan_operation('demo', 'ops', 'events', 'manifest-rewrite') GROUP BY 1 ORDER BY 1"

echo "== a policy runs all three: its evaluation submits jobs, the workers run them"
psql -q <<'SQL'
DO $$
BEGIN
    PERFORM tms.create_object_group('demo-ops', 'demo', namespace_pattern => 'ops', table_pattern => '*');
    PERFORM tms.create_policy('demo-maint', 'demo-ops', 'keep ops tables lean');
    PERFORM tms.add_rule('demo-maint', 'manifest-rewrite', 'local', '{"commits-added": 1}',
                         'manifests > 10');
    PERFORM tms.add_rule('demo-maint', 'snapshot-expiry', 'local', '{"commits-added": 1}',
                         'snapshots > 5', options => '{"retain-last": 5, "older-than": "1 second"}');
    PERFORM tms.add_rule('demo-maint', 'orphan-cleanup', 'local', '{"time-elapsed": 1000}', 'true');
END $$;
SQL
for _ in $(seq 1 600); do
  [ "$(psql -Atc "SELECT count(*) FROM tms.maintenance_jobs WHERE policy = 'demo-maint' AND finished_at IS NOT NULL")" -ge 3 ] && break
  sleep 0.1
done
psql -c "SELECT operation, table_name, result, decision, job_id, explanation
           FROM tms.evaluation_log WHERE policy_name = 'demo-maint' ORDER BY id"
psql -c "SELECT id, operation, state, coalesce(reason, last_error) AS why, snapshots_expired AS expired,
                manifests_rewritten AS rewritten, manifests_added AS added,
                files_deleted, bytes_deleted, orphans_found
           FROM tms.maintenance_jobs WHERE policy = 'demo-maint' ORDER BY id"
echo "-- each job's effect: the table's metrics before -> after"
psql -c "SELECT j.operation,
                format('%s -> %s', b.metrics->>'snapshots', a.metrics->>'snapshots') AS snapshots,
                format('%s -> %s', b.metrics->>'manifests', a.metrics->>'manifests') AS manifests,
                format('%s -> %s', b.metrics->>'dataFiles', a.metrics->>'dataFiles') AS data_files
           FROM tms.maintenance_jobs j
           JOIN tms.table_snapshot_metrics b ON b.job_id = j.id AND b.phase = 'before'
           JOIN tms.table_snapshot_metrics a ON a.job_id = j.id AND a.phase = 'after'
          WHERE j.policy = 'demo-maint' ORDER BY j.id"

echo "== compaction on an engine: ops.clicks has 120 small Parquet files; Trino (the test world's) compacts it"
echo "-- the statement tms would submit (tms.engine_statement sends nothing)"
psql -Atc "SELECT tms.engine_statement('trino', 'ops', 'clicks', 'compaction', '{\"file-size-threshold\": \"128MB\"}')"
echo "-- the data files before"
psql -c "SELECT count(*) AS data_files, pg_size_pretty(avg(file_size_in_bytes)::bigint) AS avg_size,
                sum(record_count) AS records
           FROM tms.table_files('demo', 'ops', 'clicks') WHERE content = 'data'"
job=$(psql -Atc "SELECT tms.run_operation('demo', 'ops', 'clicks', 'compaction',
                                          '{\"file-size-threshold\": \"128MB\"}', 'trino')")
for _ in $(seq 1 600); do
  [ -n "$(psql -Atc "SELECT 1 FROM tms.maintenance_jobs WHERE id = $job AND finished_at IS NOT NULL")" ] && break
  sleep 0.1
done
psql -c "SELECT id, operation, engine, state, coalesce(reason, last_error) AS why, attempts,
                finished_at - started_at AS took, statement
           FROM tms.maintenance_jobs WHERE id = $job"
echo "-- the data files after"
psql -c "SELECT count(*) AS data_files, pg_size_pretty(avg(file_size_in_bytes)::bigint) AS avg_size,
                sum(record_count) AS records
           FROM tms.table_files('demo', 'ops', 'clicks') WHERE content = 'data'"
psql -c "SELECT format('%s -> %s', b.metrics->>'dataFiles', a.metrics->>'dataFiles') AS data_files,
                format('%s -> %s', b.metrics->>'dataRecords', a.metrics->>'dataRecords') AS records,
                format('%s -> %s', b.snapshot_id, a.snapshot_id) AS snapshot
           FROM tms.table_snapshot_metrics b
           JOIN tms.table_snapshot_metrics a ON a.job_id = b.job_id AND a.phase = 'after'
          WHERE b.job_id = $job AND b.phase = 'before'"
echo "-- the policy over the real tables ran its compactions on the same engine"
psql -c "SELECT j.table_name, j.state,
                format('%s -> %s', b.metrics->>'dataFiles', a.metrics->>'dataFiles') AS data_files,
                coalesce(j.reason, j.last_error) AS why
           FROM tms.maintenance_jobs j
           LEFT JOIN tms.table_snapshot_metrics b ON b.job_id = j.id AND b.phase = 'before'
           LEFT JOIN tms.table_snapshot_metrics a ON a.job_id = j.id AND a.phase = 'after'
          WHERE j.policy = 'demo-compact' ORDER BY j.id"

echo "== schedules: a nightly expiry in Berlin, and a rule that runs right after each commit"
psql -q <<'SQL'
DO $$
BEGIN
    PERFORM tms.add_rule('demo-maint', 'snapshot-expiry', 'local',
                         schedule => '{"crontab": "0 2 * * *", "time-zone": "Europe/Berlin"}',
                         min_interval => '12 hours', condition => 'snapshots > 100');
    PERFORM tms.add_rule('demo-compact', 'manifest-rewrite', 'local',
                         schedule => '{"on-commit": true}', condition => 'true');
END $$;
SQL
psql -c "SELECT policy, operation, schedule, min_interval, next_firing FROM tms.rules
          WHERE schedule IS NOT NULL ORDER BY id"
echo "-- a catalog's event listener reports a commit to real.spark_v2_mor_posdeletes"
t0=$(date +%s%N)
psql -Atc "SELECT tms.notify_commit('demo', 'real', 'spark_v2_mor_posdeletes') AS watched"
for _ in $(seq 1 300); do
  [ -n "$(psql -Atc "SELECT 1 FROM tms.maintenance_jobs WHERE policy = 'demo-compact'
                       AND operation = 'manifest-rewrite' AND finished_at IS NOT NULL")" ] && break
  sleep 0.05
done
echo "-- its commit-job evaluated the on-commit rule and the job ran, $(( ($(date +%s%N) - t0) / 1000000 )) ms after the call"
psql -c "SELECT table_name, operation, decision, explanation FROM tms.evaluation_log
          WHERE policy_name = 'demo-compact' AND operation = 'manifest-rewrite'"
psql -c "SELECT id, operation, table_name, state, coalesce(reason, last_error) AS why,
                manifests_rewritten AS rewritten, manifests_added AS added
           FROM tms.maintenance_jobs WHERE policy = 'demo-compact' AND operation = 'manifest-rewrite'"

cat <<MSG

The demo is running.
  connect:  psql -h $PGHOST -p $PGPORT -U postgres tms
  try:      SELECT * FROM tms.table_files('demo', 'real', 'java_v2_partitioned_eqdeletes');
            SELECT * FROM tms.plan_operation('demo', 'real', 'pyiceberg_v1_overwrite', 'snapshot-expiry');
            SELECT * FROM tms.tasks;  SELECT * FROM tms.workers;
  catalog:  $catalog_uri (REST), s3: $s3_endpoint (s3rver), azure: $azure_endpoint (Azurite)
  logs:     $demo/pg/postgres.log, $demo/world.log
  stop:     make demo-stop
MSG
