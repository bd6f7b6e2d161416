#!/usr/bin/env bash
# check-files.sh: the files of src/ keep the rules of doc/architecture.md
# ("The source tree"):
#
#   - every file name under src/ is unique (a name in a comment, a log line
#     or a review then points at one file): src/io/http/http.c and a second
#     http.c anywhere under src/ is an error;
#   - no .c file is longer than MAX_LINES (1,500) lines: a longer file is
#     split by concern (as the REST client, storage and compaction are).
#
# The files checked are those git knows plus untracked ones not ignored, so
# a new file is checked before it is added.
#
# Exit status 1 and one line per offending file when a rule is broken.
set -euo pipefail
cd "$(dirname "$0")/.."

MAX_LINES=1500
bad=0

files=$(git ls-files -co --exclude-standard 'src/' | while IFS= read -r f; do
  [ -f "$f" ] && echo "$f"; done | sort)

# Unique names: group the paths by their last component.
dups=$(printf '%s\n' "$files" | awk -F/ '{ n[$NF]++; p[$NF] = p[$NF] " " $0 }
  END { for (b in n) if (n[b] > 1) print b ":" p[b] }' | sort)
if [ -n "$dups" ]; then
  printf '%s\n' "$dups" | while IFS= read -r line; do
    echo "file name ${line%%:*} is used more than once:${line#*:}"
  done
  bad=1
fi

# Length of the .c files.
while IFS= read -r f; do
  case "$f" in *.c) ;; *) continue ;; esac
  n=$(wc -l < "$f")
  if [ "$n" -gt "$MAX_LINES" ]; then
    echo "$f: $n lines (at most $MAX_LINES: split it by concern)"
    bad=1
  fi
done <<< "$files"

if [ $bad -ne 0 ]; then
  echo "check-files: src/ breaks the file rules (see doc/architecture.md, \"The source tree\")" >&2
  exit 1
fi
echo "check-files: every name under src/ is unique and no .c file is over $MAX_LINES lines"
