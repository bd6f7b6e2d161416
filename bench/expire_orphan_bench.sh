#!/bin/sh
# bench/expire_orphan_bench.sh -- peak memory of snapshot expiry's kept set
# and orphan cleanup's valid set on a 1,000,000-data-file synthetic table
# (metadata only: --no-data-bytes), one process per phase so that each
# peak RSS is that phase's own:
#   walk     iceberg_walk of every file (the baseline both build on)
#   expired  iceberg_expired_files, expiring the first snapshot: the kept
#            set holds a hash of every file of the other snapshots
#   expired-most  the same, expiring all but the first snapshot: nearly
#            every file streams (the set of streamed files is the cost)
#   valid    iceberg_valid_set_add_table + seal over every file
#
#   bench/expire_orphan_bench.sh [DATA_FILES] [FILES_PER_MANIFEST] [SNAPSHOTS]
#
# Defaults: 1000000 files, 10000 per manifest, 10 snapshots, 16 partitions.
# The driver is test/unit/expire_test.c in its EXPIRE_BENCH mode, built
# with -O2.  The table is written under a temporary directory, removed at
# the end.
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
files=${1:-1000000}
per=${2:-10000}
snaps=${3:-10}
out=$(mktemp -d /tmp/tms-bench-expire.XXXXXX)
trap 'rm -rf "$out"' EXIT INT TERM

/usr/bin/python3 "$here/test/fixtures/synth.py" --out "$out/t" --data-files "$files" \
    --files-per-manifest "$per" --snapshots "$snaps" --partitions 16 --no-data-bytes \
    --stats-files 3 --seed 1 > "$out/summary.json"
meta=$(sed -n 's/.*"metadata_location": "\(.*\)".*/\1/p' "$out/summary.json")
cd "$here"
gcc -std=gnu99 -O2 -Wall -Wextra -Werror -Isrc -o "$out/bench" test/unit/expire_test.c \
    src/iceberg/*.c src/iceberg/*/*.c src/io/*/*.c -lcurl -ljansson -lssl -lcrypto -lz -lm
for phase in walk expired expired-most valid; do
    EXPIRE_BENCH="$meta" EXPIRE_BENCH_PHASE=$phase "$out/bench"
done
