#!/usr/bin/env bash
# make test: install what is missing, build, install, then run every test:
#
#   1. plain-C unit drivers           (make unit)
#   2. pg_regress                     (make installcheck, sql/ + expected/, on
#                                      a temporary instance of its own in
#                                      $root/regress, test/regress.conf)
#   3. integration tests              (pytest test/integration, on a
#                                      throwaway PostgreSQL 15 in $root/pg with
#                                      tms and pg_cron preloaded, and clusters
#                                      of their own)
#
# Every server started here or by a test is stopped on exit, also on
# failure; on failure the regression diffs and the server log tail are
# printed.  Exit status: non-zero if any stage failed.
#
# The whole run holds /tmp/tms-install.lock (scripts/install-lock.sh): only
# one run at a time may install into the system PostgreSQL and test it.
#
# Environment: TMS_TEST_ROOT (default: a new directory under /tmp),
# PYTEST_ARGS (extra pytest arguments, e.g. "-k workers").
set -uo pipefail
cd "$(dirname "$0")/.."
top=$(pwd)

. scripts/install-lock.sh
tms_install_lock

bash scripts/install-deps.sh || exit 1
make -s || exit 1
make -s install >/dev/null || exit 1

root=${TMS_TEST_ROOT:-$(mktemp -d /tmp/tms-test.XXXXXX)}
chmod 755 "$root"

as_pg() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }

cleanup() {
  /usr/bin/python3 test/pgcluster.py stop --dir "$root/pg" >/dev/null 2>&1
  # pg_regress stops its instance itself, unless it was killed
  if [ -f "$root/regress/tmp_check/data/postmaster.pid" ]; then
    (cd /tmp && as_pg "$(pg_config --bindir)/pg_ctl" -D "$root/regress/tmp_check/data" \
      -m immediate stop) >/dev/null 2>&1
  fi
  # anything a test left behind in its process group
  pkill -TERM -f "$root" >/dev/null 2>&1 || true
}
trap cleanup EXIT
trap 'exit 130' INT TERM

failed=()

echo "== unit tests (make unit)"
make -s unit || failed+=(unit)

echo "== pg_regress (make installcheck, temporary instance in $root/regress)"
if ! make -s installcheck REGRESS_DIR="$root/regress"; then
  failed+=(pg_regress)
  echo "---- regression.diffs ----"
  cat "$root/regress/regression.diffs" 2>/dev/null
  echo "---- server log (tail) ----"
  tail -n 80 "$root/regress/log/postmaster.log" 2>/dev/null
fi

echo "== starting PostgreSQL for the integration tests in $root/pg"
if ! env_lines=$(/usr/bin/python3 test/pgcluster.py start --dir "$root/pg"); then
  echo "could not start PostgreSQL"; cat "$root/pg/postgres.log" 2>/dev/null | tail -50
  exit 1
fi
eval "$env_lines"
export PGHOST PGPORT PGUSER

echo "== integration tests (pytest)"
# The integration tests share this cluster (fixture "pg") and start their
# own ones where they need to crash or reconfigure a server.
export TMS_TEST_ROOT="$root"
/usr/bin/python3 -m pytest -p no:cacheprovider -ra test/integration ${PYTEST_ARGS:-}
rc=$?
if [ $rc -eq 5 ]; then
  echo "pytest collected no tests"
  failed+=(pytest-empty)
elif [ $rc -ne 0 ]; then
  failed+=(pytest)
  echo "---- server log (tail) ----"
  tail -n 80 "$TMS_PGLOG"
fi

if [ ${#failed[@]} -gt 0 ]; then
  echo "FAILED: ${failed[*]}"
  exit 1
fi
echo "all test stages passed"
