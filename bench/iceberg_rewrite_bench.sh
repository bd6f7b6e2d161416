#!/bin/sh
# bench/iceberg_rewrite_bench.sh -- manifest rewrite benchmark of src/iceberg
#
#   sh bench/iceberg_rewrite_bench.sh [FILES [PER_MANIFEST [DIR [BUDGET_MB]]]]
#
# Generates (with bench/iceberg_manifest_bench.c's generator: realistic
# data_file records with a day partition and 12 columns of statistics) a
# table of FILES (default 1,000,000) entries in manifests of PER_MANIFEST
# (default 1,000), i.e. 1,000 manifests, under DIR (default
# bench/results/iceberg-rewrite-table, git-ignored), then:
#   1. the decoder's throughput over the same manifests, as the metrics
#      read them and as the rewrite reads them (raw spans + partition);
#   2. the rewrite of all of them (plan + execute, 8 MiB target, the
#      clustering budget BUDGET_MB, default 32), timed, under
#      /usr/bin/time -v for the peak RSS; the written files are deleted.
set -eu
cd "$(dirname "$0")/.."
FILES=${1:-1000000}
PER=${2:-1000}
DIR=${3:-bench/results/iceberg-rewrite-table}
BUDGET=${4:-32}
GEN=bench/build/iceberg_manifest_bench
BIN=bench/build/iceberg_rewrite_bench
mkdir -p bench/build "$(dirname "$DIR")"
${CC:-gcc} -std=gnu99 -O2 -Wall -Wextra -Werror -Isrc -o "$GEN" \
	bench/iceberg_manifest_bench.c src/iceberg/*.c src/iceberg/*/*.c src/io/*/*.c \
	-lcurl -ljansson -lz -lavro -lssl -lcrypto -lm
${CC:-gcc} -std=gnu99 -O2 -Wall -Wextra -Werror -Isrc -o "$BIN" \
	bench/iceberg_rewrite_bench.c src/iceberg/*.c src/iceberg/*/*.c src/io/*/*.c \
	-lcurl -ljansson -lz -lssl -lcrypto -lm
if [ ! -f "$DIR/metadata/v1.metadata.json" ]; then
	rm -rf "$DIR"
	"$GEN" gen "$DIR" "$FILES" "$PER"
fi
echo "== decoder over the same manifests (local files, best of 3)"
"$BIN" decode "$DIR"
echo "== rewrite (budget ${BUDGET} MiB), peak memory"
/usr/bin/time -v "$BIN" rewrite "$DIR" "$BUDGET" 2>&1 | \
	grep -E '^rewrite|Maximum resident|Elapsed \(wall'
