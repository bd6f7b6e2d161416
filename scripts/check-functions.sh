#!/usr/bin/env bash
# check-functions.sh: no C function in src/ is longer than a limit (200
# lines by default), so each one can be read and reviewed as one piece.
#
# A function is measured from the line that names it (its header, at
# column 0 in PostgreSQL style, the return type on the line above) to its
# closing brace, inclusive.  The sources follow PostgreSQL style, so the
# measurer needs no parser: a function body opens with "{" alone at
# column 0 right after a header that ends in ")", and closes with the next
# "}" at column 0.  A "{" at column 0 after anything else (a struct, enum
# or array initializer) is not a function.  Every .c file under src/ is
# measured, at any folder depth.
#
# Usage: scripts/check-functions.sh [LIMIT]
#        scripts/check-functions.sh --list     every function, longest first
# Exit status 1 and one line per function over the limit
# ("file:line: function NAME is N lines (limit L)") when the rule is broken.
set -euo pipefail
cd "$(dirname "$0")/.."

limit=200
list=0
case "${1:-}" in
  --list) list=1 ;;
  '') ;;
  *[!0-9]*) echo "usage: $0 [LIMIT | --list]" >&2; exit 2 ;;
  *) limit=$1 ;;
esac

files=$(find src -name '*.c' -type f | LC_ALL=C sort)
[ -n "$files" ] || { echo "check-functions: no .c file under src/" >&2; exit 2; }

# One line per function: "LENGTH FILE:LINE NAME".
measure() {
  # shellcheck disable=SC2086
  awk '
    FNR == 1 { depth = 0; nhdr = 0; infn = 0 }
    # Remember the recent lines outside any function: the header of the
    # next function is among them.
    !infn && /^\{[ \t]*$/ {
      # The last non-blank line before the brace must end the header: ")".
      # (A trailing comment is allowed; PostgreSQL style rarely has one.)
      last = ""
      for (i = nhdr; i >= 1; i--)
        if (hdr[i] !~ /^[ \t]*$/) { last = hdr[i]; break }
      sub(/[ \t]*\/\*.*\*\/[ \t]*$/, "", last)
      if (last ~ /\)[ \t]*$/) {
        # The function name: the identifier before the first "(" of the
        # nearest line back that starts at column 0 with one.
        name = ""; start = FNR
        for (i = nhdr; i >= 1; i--) {
          if (hdr[i] ~ /^[A-Za-z_][^(]*\(/) {
            s = hdr[i]; sub(/\(.*/, "", s); sub(/[ \t]+$/, "", s)
            n = split(s, w, /[ \t*]+/); name = w[n]
            start = hline[i]
            break
          }
          if (hdr[i] ~ /^[ \t]*$/ || hdr[i] ~ /;[ \t]*$/ || hdr[i] ~ /^}/) break
        }
        if (name != "") { infn = 1; fname = name; fstart = start }
      }
      nhdr = 0
      next
    }
    infn && /^\}/ {
      printf "%d %s:%d %s\n", FNR - fstart + 1, FILENAME, fstart, fname
      infn = 0; nhdr = 0
      next
    }
    !infn {
      if (/^[ \t]*$/ || /;[ \t]*$/ || /^\}/ || /^#/) nhdr = 0
      else if (nhdr < 50) { nhdr++; hdr[nhdr] = $0; hline[nhdr] = FNR }
    }
  ' $files
}

out=$(measure)
count=$(printf '%s\n' "$out" | grep -c . || true)
if [ "$count" -eq 0 ]; then
  echo "check-functions: found no function definition under src/ (measurer broken?)" >&2
  exit 2
fi

if [ "$list" = 1 ]; then
  printf '%s\n' "$out" | sort -k1,1nr
  exit 0
fi

bad=$(printf '%s\n' "$out" | awk -v lim="$limit" '$1 > lim' | sort -k1,1nr)
if [ -n "$bad" ]; then
  printf '%s\n' "$bad" | awk -v lim="$limit" \
    '{ printf "%s: function %s is %d lines (limit %d)\n", $2, $3, $1, lim }'
  echo "check-functions: split these into named static helpers (limit $limit lines)"
  exit 1
fi
echo "check-functions: $count functions in src/, none over $limit lines"
