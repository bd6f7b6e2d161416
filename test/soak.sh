#!/usr/bin/env bash
# make soak: the randomized data-safety campaign (test/soakworld.py) over
# SOAK_HISTORIES histories numbered from SOAK_SEED, with the full generator
# (SOAK_FULL=1: longer histories) and, with SOAK_BIG=1, files of several MB.
# Needs tms built and installed (make && make install) and the test world's
# npm packages (make install-deps).  Prints the counts at the end and every
# violation with its history's number and summary; exit status non-zero if
# any invariant broke.  Everything runs below a new directory of its own
# (TMS_TEST_ROOT), removed at the end.
set -uo pipefail
cd "$(dirname "$0")/.."
root=$(mktemp -d /tmp/tms-soak.XXXXXX)
chmod 755 "$root"
trap 'rm -rf "$root"' EXIT
export TMS_TEST_ROOT="$root"
export SOAK_HISTORIES="${SOAK_HISTORIES:-200}" SOAK_SEED="${SOAK_SEED:-1}"
export SOAK_FULL="${SOAK_FULL:-1}" SOAK_BATCH="${SOAK_BATCH:-25}"
/usr/bin/python3 -m pytest -p no:cacheprovider -q -s --timeout=0 \
    test/integration/test_soak.py -k test_histories
