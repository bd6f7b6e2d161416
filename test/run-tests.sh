#!/usr/bin/env bash
# make test: install what is missing, build, install, then run every test:
#
#   1. make check-fast                (scripts/check-fast.sh, beside stage
#                                      2, its output printed after it):
#                                      nothing names shared/, the layers
#                                      are one-way, the
#                                      plain-C unit drivers and the fuzz
#                                      corpora under ASan and UBSan,
#                                      pg_regress and the isolation specs
#                                      (make installcheck, test/regress/ and
#                                      test/isolation/, on temporary instances
#                                      of their own in $root/regress,
#                                      test/regress.conf)
#   2. integration tests              (pytest test/integration in
#                                      $TMS_TEST_JOBS xdist worker processes,
#                                      one work unit (a test module, or a
#                                      part of a long one) each at a time
#                                      (--dist loadgroup); each worker starts
#                                      its own throwaway PostgreSQL 15 in
#                                      $root/pg-gwK with tms and pg_cron
#                                      preloaded (test/conftest.py), modules
#                                      marked own_cluster start clusters of
#                                      their own)
#   3. the integration tests marked serial, alone in one process, once 1
#      and 2 have ended
#
# Stages 1 and 2 run at once, so that check-fast (the sanitizer builds and
# drivers, pg_regress) fills what the integration tests leave of the cores
# while they wait on servers, instead of adding its minutes to theirs.
# check-fast does not install again (CHECK_FAST_INSTALLED=1): the build
# installed here is the one both stages test.
#
# Every server started here or by a test is stopped on exit, also on
# failure; on failure the regression diffs and the server log tail are
# printed.  Exit status: non-zero if any stage failed.
#
# The whole run holds /tmp/tms-install.lock (scripts/install-lock.sh): only
# one run at a time may install into the system PostgreSQL and test it.
#
# A user's clone has nothing beside it.  When this checkout has a directory
# named shared beside it or beside a directory above it (the reference tree
# of the machine tms is written on), the run copies the working tree
# (scripts/lone-clone.sh: tracked and untracked files, uncommitted work
# included) to $root/lone/tms, where nothing named shared is near, and runs
# the whole suite there (TMS_LONE_CLONE=1 marks that run).  So every make
# test is a run of a lone clone, and a test that reads the shared/ tree
# fails.
#
# Environment: TMS_TEST_ROOT (default: a new directory under /dev/shm or
# /tmp, below),
# TMS_TEST_JOBS (xdist workers, default 4: the tests mostly wait on
# servers, so more than the cores pays; measured in test/README.md),
# PYTEST_ARGS (extra pytest arguments, e.g. "-k workers"), MAKE_JOBS (make's
# -j for the build and check-fast, default 2).
set -uo pipefail
cd "$(dirname "$0")/.."
top=$(pwd)

. scripts/install-lock.sh
tms_install_lock

# The run's root: everything the test world writes (clusters, object
# stores, Parquet and Avro files, the lone clone and its build) and, through
# TMPDIR, every temporary file of the tests and the tools they start.  On a
# memory file system when the machine has one with room (/dev/shm with 8 GiB
# free): the tests write and remove hundreds of thousands of small files,
# and on a disk that discards freed blocks at each unlink, as the 2-core
# machines this is run on do, that alone took minutes.  A root made here is
# removed when every stage passed; after a failure it is kept for reading
# (and named at the end: in memory, it holds RAM until removed).
if [ -z "${TMS_TEST_ROOT:-}" ]; then
  base=/tmp
  if [ "$(stat -f -c %T /dev/shm 2>/dev/null)" = tmpfs ] &&
     [ "$(df -k --output=avail /dev/shm 2>/dev/null | tail -1)" -ge $((8 * 1024 * 1024)) ]; then
    base=/dev/shm
  fi
  root=$(mktemp -d "$base/tms-test.XXXXXX")
  own_root=1
else
  root=$TMS_TEST_ROOT
fi
mkdir -p "$root" "$root/tmp"
chmod 755 "$root"
chmod 1777 "$root/tmp"
export TMPDIR="$root/tmp"

# True when a directory named shared sits beside $1 or beside (or as) any
# directory above it.
shared_near() {
  local d=$1
  while [ "$d" != / ]; do
    d=$(dirname "$d")
    [ -e "$d/shared" ] && return 0
  done
  return 1
}

if shared_near "$top"; then
  if [ -n "${TMS_LONE_CLONE:-}" ]; then
    echo "error: $top is meant to be a lone clone, but a shared/ is beside or above it" >&2
    exit 1
  fi
  lone="$root/lone/tms"
  if shared_near "$lone"; then
    echo "error: a shared/ is beside or above $lone too; choose TMS_TEST_ROOT elsewhere" >&2
    exit 1
  fi
  echo "== $top has a shared/ near it: testing a copy of its working tree in $lone"
  bash scripts/lone-clone.sh "$lone" || exit 1
  cd "$lone" || exit 1
  TMS_LONE_CLONE=1 TMS_TEST_ROOT="$root" TMS_TEST_OWN_ROOT=${own_root:-} \
    exec bash test/run-tests.sh
fi

bash scripts/install-deps.sh || exit 1
# Built and installed without the LLVM bitcode (with_llvm=no), which only
# JIT inlining reads and which was half of the build's compile time; the
# bitcode an earlier install left is removed, so that JIT never inlines an
# older tms.  A plain make install (the demo's, a user's) installs it.
make -s -j"${MAKE_JOBS:-2}" WERROR=1 with_llvm=no all test-drivers || exit 1
make -s WERROR=1 with_llvm=no install >/dev/null || exit 1
rm -rf "$(pg_config --pkglibdir)/bitcode/tms" "$(pg_config --pkglibdir)/bitcode/tms.index.bc"

as_pg() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }

cleanup() {
  # the clusters of the xdist workers (stopped by pytest, unless it was killed)
  for d in "$root"/pg*; do
    [ -d "$d/data" ] && /usr/bin/python3 test/pgcluster.py stop --dir "$d" >/dev/null 2>&1
  done
  # pg_regress and pg_isolation_regress stop their instances themselves,
  # unless they were killed
  for d in tmp_check tmp_check_iso; do
    if [ -f "$root/regress/$d/data/postmaster.pid" ]; then
      (cd /tmp && as_pg "$(pg_config --bindir)/pg_ctl" -D "$root/regress/$d/data" \
        -m immediate stop) >/dev/null 2>&1
    fi
  done
  # check-fast, when this run ends before it (its own process group)
  [ -n "${check_fast_pid:-}" ] && kill -TERM -- -"$check_fast_pid" >/dev/null 2>&1
  # anything a test left behind in its process group
  pkill -TERM -f "$root" >/dev/null 2>&1 || true
}
trap cleanup EXIT
trap 'exit 130' INT TERM

failed=()

echo "== make check-fast (scripts/check-fast.sh), beside the integration tests; its output follows them"
REGRESS_DIR="$root/regress" CHECK_FAST_INSTALLED=1 \
  setsid bash scripts/check-fast.sh >"$root/check-fast.log" 2>&1 &
check_fast_pid=$!

echo "== integration tests (pytest, ${TMS_TEST_JOBS:-4} xdist workers)"
# Every xdist worker starts its own cluster for the session fixture "pg"
# in $root/pg-gwK (test/conftest.py): the tms workers of a cluster act on
# its one database, so modules running at once never share one.  Modules
# that crash or reconfigure a server start clusters of their own
# (own_cluster, test/integration/conftest.py).  --dist loadgroup: a work
# unit's tests run in one worker, in order, as their module-scoped fixtures
# need; a unit is a module, or a part of a long module marked with an
# xdist_group of its own (test/integration/conftest.py).
export TMS_TEST_ROOT="$root"
# Every test has 10 minutes at most (python3-pytest-timeout), so a hung
# test fails with its stack instead of holding the run; the 25 slowest are
# listed at the end of every run.
# Tests marked serial (test/integration/conftest.py: what they assert
# depends on the machine's speed) are left out here and run afterwards,
# alone, in one process.  Exit status 5 is "no test collected": an empty
# stage is fine (PYTEST_ARGS may select tests of one stage only), both
# empty is not.
/usr/bin/python3 -m pytest -p no:cacheprovider -ra --timeout=600 --durations=25 \
  -n "${TMS_TEST_JOBS:-4}" --dist loadgroup -m "not serial" test/integration ${PYTEST_ARGS:-}
rc_par=$?
wait "$check_fast_pid"
rc_fast=$?
check_fast_pid=
echo "== make check-fast (scripts/check-fast.sh), its output"
cat "$root/check-fast.log"
[ $rc_fast -ne 0 ] && failed+=(check-fast)
echo "== integration tests marked serial (pytest, alone)"
/usr/bin/python3 -m pytest -p no:cacheprovider -ra --timeout=600 --durations=10 \
  -m serial test/integration ${PYTEST_ARGS:-}
rc_ser=$?
if [ $rc_par -eq 5 ] && [ $rc_ser -eq 5 ]; then
  rc=5
elif [ $rc_par -ne 0 ] && [ $rc_par -ne 5 ]; then
  rc=$rc_par
elif [ $rc_ser -ne 0 ] && [ $rc_ser -ne 5 ]; then
  rc=$rc_ser
else
  rc=0
fi
if [ $rc -eq 5 ]; then
  echo "pytest collected no tests"
  failed+=(pytest-empty)
elif [ $rc -ne 0 ]; then
  failed+=(pytest)
  for log in "$root"/pg*/postgres.log; do
    [ -f "$log" ] || continue
    echo "---- server log $log (tail) ----"
    tail -n 80 "$log"
  done
fi

if [ ${#failed[@]} -gt 0 ]; then
  echo "FAILED: ${failed[*]}"
  echo "the run's files are kept in $root (remove them when read)"
  exit 1
fi
echo "all test stages passed"
if [ -n "${own_root:-}${TMS_TEST_OWN_ROOT:-}" ]; then
  cd / && rm -rf "$root"
fi
