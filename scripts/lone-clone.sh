#!/usr/bin/env bash
# scripts/lone-clone.sh DEST -- copy this checkout's working tree into DEST,
# a new directory, as a fresh clone would have it: every file git tracks
# and every untracked file it does not ignore, as they are on disk (so
# uncommitted work is included; files deleted on disk are left out), then
# make DEST a git repository of one commit holding exactly those files.
#
# test/run-tests.sh uses it to run make test where no shared/ directory is
# beside or above the tree, as in every user's clone; to try the demo the
# same way:
#     bash scripts/lone-clone.sh /tmp/lonedemo/tms
#     make -C /tmp/lonedemo/tms demo && make -C /tmp/lonedemo/tms demo-stop
set -euo pipefail
if [ $# -ne 1 ]; then
  echo "usage: $0 DEST" >&2
  exit 2
fi
src=$(cd "$(dirname "$0")/.." && pwd)
dest=$1
if [ -e "$dest" ]; then
  echo "lone-clone: $dest exists already" >&2
  exit 1
fi
mkdir -p "$dest"
cd "$src"
head=$(git rev-parse --short HEAD)
git ls-files -z --cached --others --exclude-standard |
  sort -zu |
  while IFS= read -r -d '' f; do
    if [ -e "$f" ] || [ -L "$f" ]; then printf '%s\0' "$f"; fi
  done |
  tar --null -T - -cf - | tar -xf - -C "$dest"
cd "$dest"
git init -q
git add -A -f
git -c user.name=tms -c user.email=tms@localhost -c commit.gpgsign=false \
  commit -q -m "lone clone of $src at $head, with its working tree"
