#!/bin/sh
# bench/world_synth.sh -- time the synthetic Iceberg table writer on a
# 1,000,000-data-file table (metadata only: --no-data-bytes), then check the
# result with icebird (an independent reader) when test/node is installed.
#
#   bench/world_synth.sh [DATA_FILES] [FILES_PER_MANIFEST] [SNAPSHOTS]
#
# Defaults: 1000000 files, 10000 per manifest, 10 snapshots, partitioned by
# identity(category) into 16 values, deflate.  The table is written under a
# temporary directory that is removed at the end.
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
files=${1:-1000000}
per=${2:-10000}
snaps=${3:-10}
out=$(mktemp -d /tmp/tms-bench-synth.XXXXXX)
trap 'rm -rf "$out"' EXIT INT TERM

echo "synth: $files data files, $per per manifest, $snaps snapshots, 16 partitions, deflate"
start=$(date +%s.%N)
/usr/bin/python3 "$here/test/fixtures/synth.py" --out "$out/t" --data-files "$files" \
    --files-per-manifest "$per" --snapshots "$snaps" --partitions 16 --no-data-bytes \
    --seed 1 > "$out/summary.json"
end=$(date +%s.%N)
echo "generation: $(echo "$end - $start" | bc) s wall clock"
echo "metadata on disk: $(du -sh "$out/t" | cut -f1) in $(find "$out/t" -type f | wc -l) files"
grep -E '"(manifests|data_files|seconds)"' "$out/summary.json"

if [ -d "$here/test/node/node_modules/icebird" ]; then
    meta=$(sed -n 's/.*"metadata_location": "\(.*\)".*/\1/p' "$out/summary.json")
    start=$(date +%s.%N)
    node "$here/test/node/icebird_count.mjs" --metadata "$meta"
    end=$(date +%s.%N)
    echo "icebird read back: $(echo "$end - $start" | bc) s"
fi
