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

stop() {
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

bash scripts/install-deps.sh
make -s
make -s install >/dev/null

mkdir -p "$demo"
chmod 755 "$demo"
eval "export $($PY test/pgcluster.py start --dir "$demo/pg" --dbname tms)"

psql() { command psql -X -v ON_ERROR_STOP=1 -d tms "$@"; }
psql -qc "CREATE EXTENSION IF NOT EXISTS tms"
psql -qc "CREATE EXTENSION IF NOT EXISTS pg_cron"

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

cat <<MSG

The demo is running.
  connect:  psql -h $PGHOST -p $PGPORT -U postgres tms
  log:      $demo/pg/postgres.log
  stop:     make demo-stop
MSG
