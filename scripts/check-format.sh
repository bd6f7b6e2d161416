#!/usr/bin/env bash
# check-format.sh: the C files of src/ and test/unit are laid out as
# .clang-format says (PostgreSQL's pgindent layout, as near as
# clang-format gets: see the comments there).
#
#   scripts/check-format.sh [FILE...]   check the given files, or all of
#                                       src/ and test/unit/ under git
#   scripts/check-format.sh --diff ...  print what clang-format would change
#
# Exit status 1, with one line per file that differs (and the number of
# lines that would change), when any does; 2 when clang-format is missing.
# Nothing is rewritten: clang-format-14 -i FILE does that.
#
# Environment: CLANG_FORMAT (default clang-format-14, else clang-format).
# scripts/check-fast.sh runs this only with TMS_CHECK_FORMAT=1: the tree
# has not had its formatting pass yet.
set -uo pipefail
cd "$(dirname "$0")/.."

show_diff=
if [ "${1:-}" = "--diff" ]; then
  show_diff=1
  shift
fi

cf=${CLANG_FORMAT:-}
if [ -z "$cf" ]; then
  for c in clang-format-14 clang-format; do
    if command -v "$c" >/dev/null; then cf=$c; break; fi
  done
fi
if [ -z "$cf" ] || ! command -v "$cf" >/dev/null; then
  echo "check-format: no clang-format (set CLANG_FORMAT; Debian: clang-format-14)" >&2
  exit 2
fi

if [ $# -gt 0 ]; then
  files=("$@")
else
  mapfile -t files < <(git ls-files 'src/*.c' 'src/*.h' 'test/unit/*.c' 'test/unit/*.h')
fi

bad=0
lines=0
for f in "${files[@]}"; do
  if ! out=$("$cf" --style=file "$f"); then
    echo "check-format: $cf failed on $f" >&2
    exit 2
  fi
  if ! d=$(diff -u "$f" - <<< "$out"); then
    n=$(grep -c '^[-+][^-+]' <<< "$d" || true)
    echo "$f: $n lines differ"
    [ -n "$show_diff" ] && printf '%s\n' "$d"
    bad=$((bad + 1))
    lines=$((lines + n))
  fi
done

if [ $bad -gt 0 ]; then
  echo "check-format: $bad of ${#files[@]} files differ from .clang-format ($lines lines); $cf -i FILE lays one out"
  exit 1
fi
echo "check-format: ${#files[@]} files laid out as .clang-format says"
