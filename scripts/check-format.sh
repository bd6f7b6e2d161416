#!/usr/bin/env bash
# check-format.sh: the C files of src/ and test/unit are laid out as
# PostgreSQL's pgindent lays them out (scripts/pgindent.sh: pg_bsd_indent
# with the options of PostgreSQL 15's pgindent and our typedef list).
#
#   scripts/check-format.sh [FILE...]   check the given files, or all of
#                                       src/ and test/unit/ under git
#   scripts/check-format.sh --diff ...  print what would change, too
#
# Exit status 1, with one line per file that differs (and the number of
# lines that would change), when any does; 2 when pg_bsd_indent is missing.
# Nothing is rewritten: scripts/pgindent.sh FILE... does that.
set -uo pipefail
cd "$(dirname "$0")/.."

if [ "${1:-}" = --diff ]; then
  shift
  exec bash scripts/pgindent.sh --diff "$@"
fi
exec bash scripts/pgindent.sh --check "$@"
