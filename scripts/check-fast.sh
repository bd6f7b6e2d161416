#!/usr/bin/env bash
# make check-fast: the checks that need no test world, in a few minutes
# (under 3 on two cores):
#
#   the repository stands alone       (scripts/check-standalone.sh)
#   the layers are one-way            (scripts/check-layers.sh)
#   file names unique, .c files short (scripts/check-files.sh)
#   no function over 200 lines        (scripts/check-functions.sh)
#   README's settings table is right  (scripts/check-docs.sh)
#   the C layout is pgindent's        (scripts/check-format.sh,
#                                      pg_bsd_indent)
#   plain-C unit drivers, ASan/UBSan  (make unit-san; LeakSanitizer on, any
#                                      finding fails the driver)
#   fuzz corpora replayed, ASan/UBSan (make fuzz-replay, test/fuzz/corpus/)
#   pg_regress                        (make installcheck ISOLATION=,
#                                      test/regress/, on a temporary instance
#                                      of its own in $REGRESS_DIR)
#   isolation specs                   (make installcheck REGRESS=,
#                                      test/isolation/: races of concurrent
#                                      sessions, on another temporary
#                                      instance, results in
#                                      $REGRESS_DIR/output_iso)
#
# It builds and installs tms first (make WERROR=1, make install) holding the
# install lock (scripts/install-lock.sh), as pg_regress tests the installed
# extension.  test/run-tests.sh (make test) runs this script as its first
# stage, inside its own lock, then the integration tests.  Every stage runs
# even when one before it failed; the exit status is non-zero if any did,
# and the last line names them.  On a pg_regress or isolation failure the
# regression diffs and the server log tail are printed.
#
# Environment: REGRESS_DIR (default: a new directory under /tmp, removed
# when everything passed), MAKE_JOBS (default 2), CHECK_FAST_INSTALLED=1
# (the caller built and installed this tree a moment ago and holds the
# lock: no second make install, which would rewrite the installed library
# under the servers of tests running beside this script).
set -uo pipefail
cd "$(dirname "$0")/.."

. scripts/install-lock.sh
tms_install_lock

jobs=${MAKE_JOBS:-2}
start=$(date +%s)
failed=()

if [ -z "${REGRESS_DIR:-}" ]; then
  REGRESS_DIR=$(mktemp -d /tmp/tms-check-fast.XXXXXX)
  chmod 755 "$REGRESS_DIR"
  own_regress_dir=1
fi

if [ -z "${CHECK_FAST_INSTALLED:-}" ]; then
  echo "== build and install (make WERROR=1, make install)"
  if ! { make -s -j"$jobs" WERROR=1 && make -s WERROR=1 install >/dev/null; }; then
    echo "FAILED: build"
    exit 1
  fi
fi

echo "== the repository stands alone (scripts/check-standalone.sh)"
bash scripts/check-standalone.sh || failed+=(standalone)

echo "== the includes of src/ follow the layers (scripts/check-layers.sh)"
bash scripts/check-layers.sh || failed+=(layers)

echo "== every name under src/ unique, no .c file over 1,500 lines (scripts/check-files.sh)"
bash scripts/check-files.sh || failed+=(files)
echo "== no C function in src/ is over 200 lines (scripts/check-functions.sh)"
bash scripts/check-functions.sh || failed+=(functions)
echo "== README.md's settings table matches the settings of src/ (scripts/check-docs.sh)"
bash scripts/check-docs.sh || failed+=(docs)

echo "== the C layout of src/ and test/unit is pgindent's (scripts/check-format.sh)"
bash scripts/check-format.sh || failed+=(format)

# The drivers and replays in parallel, each one's output in one piece.
echo "== unit drivers and fuzz corpus replay under ASan and UBSan (make unit-san fuzz-replay)"
make -s -k -j"$jobs" -Otarget unit-san fuzz-replay || failed+=(unit-san/fuzz-replay)

echo "== pg_regress (make installcheck ISOLATION=, temporary instance in $REGRESS_DIR)"
if ! make -s installcheck ISOLATION= REGRESS_DIR="$REGRESS_DIR"; then
  failed+=(pg_regress)
  echo "---- regression.diffs ----"
  cat "$REGRESS_DIR/regression.diffs" 2>/dev/null
  echo "---- server log (tail) ----"
  tail -n 80 "$REGRESS_DIR/log/postmaster.log" 2>/dev/null
fi

echo "== isolation specs (make installcheck REGRESS=, temporary instance in $REGRESS_DIR)"
if ! make -s installcheck REGRESS= REGRESS_DIR="$REGRESS_DIR"; then
  failed+=(isolation)
  echo "---- output_iso/regression.diffs ----"
  cat "$REGRESS_DIR/output_iso/regression.diffs" 2>/dev/null
  echo "---- server log (tail) ----"
  tail -n 80 "$REGRESS_DIR/output_iso/log/postmaster.log" 2>/dev/null
fi

echo "== check-fast took $(( $(date +%s) - start )) s"
if [ ${#failed[@]} -gt 0 ]; then
  echo "FAILED: ${failed[*]}"
  exit 1
fi
[ -n "${own_regress_dir:-}" ] && rm -rf "$REGRESS_DIR"
echo "check-fast passed"
