#!/usr/bin/env bash
# scripts/check-standalone.sh -- fail when a file of the repository names
# the reference tree that sat beside it while tms was written (a directory
# beside the checkout: fixtures, design notes, specs, reference texts).
# A user's clone has only the repository, so nothing may read, cite or
# link that tree: fixtures live in test/fixtures, the specs are cited by
# their upstream URLs, the design is in doc/.
#
# Checks every file git knows in the working tree (tracked, and untracked
# but not ignored), excluding only this script.  Prints each offending line
# and exits 1; exits 0 when there is none.  Run by make test (first stage).
set -euo pipefail
cd "$(dirname "$0")/.."
self=scripts/check-standalone.sh
# The tree's name is assembled here so that this script does not name it
# either: a clone that has none of it holds no path into it.
ref="shar""ed"
pattern="\\.\\./$ref|/work/$ref|$ref/(fixtures|design|spec|seed|hooks)|design/(ARCHITECTURE|ENVIRONMENT|policy-dsl)\\.md|iceberg-table-spec\\.md|iceberg-rest-catalog-open-api\\.yaml"

if ! git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  echo "check-standalone: not a git checkout, cannot list the repository's files" >&2
  exit 1
fi
files=()
while IFS= read -r -d '' f; do
  [ "$f" = "$self" ] && continue
  [ -f "$f" ] && files+=("$f")
done < <(git ls-files -z --cached --others --exclude-standard | sort -zu)

if hits=$(grep -n -E -- "$pattern" "${files[@]}"); then
  echo "$hits"
  echo "check-standalone: $(printf '%s\n' "$hits" | cut -d: -f1 | sort -u | wc -l) file(s) name the shared reference tree, which a clone does not have" >&2
  exit 1
fi
echo "check-standalone: ${#files[@]} files, none names the shared reference tree"
