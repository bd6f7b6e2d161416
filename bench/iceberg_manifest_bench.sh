#!/bin/sh
# bench/iceberg_manifest_bench.sh -- manifest decoding benchmark of src/iceberg
#
#   sh bench/iceberg_manifest_bench.sh [FILES [PER_MANIFEST [DIR]]]
#
# Generates a synthetic Iceberg v2 table of FILES (default 1,000,000) data
# file entries, PER_MANIFEST (default 10,000) per deflate manifest, under DIR
# (default bench/results/iceberg-table, git-ignored), then in one run:
#   1. this layer's decoder, avro-c's generic reader and zlib raw inflate
#      alone over the same in-memory manifests (bench/iceberg_manifest_bench.c);
#   2. icebird 0.3.1 decoding the same manifests (bench/iceberg_icebird.js;
#      the module is test/node/node_modules/icebird, pinned by the test world);
#   3. the peak RSS of a full metrics walk (level DELETES) under
#      /usr/bin/time -v.
# The machine's other load shows in the numbers: run it on a quiet machine.
set -eu
cd "$(dirname "$0")/.."
FILES=${1:-1000000}
PER=${2:-10000}
DIR=${3:-bench/results/iceberg-table}
BIN=bench/build/iceberg_manifest_bench
mkdir -p bench/build "$(dirname "$DIR")"
${CC:-gcc} -std=gnu99 -O2 -Wall -Wextra -Werror -Isrc -o "$BIN" \
	bench/iceberg_manifest_bench.c src/iceberg/*.c src/io/*.c \
	-lcurl -ljansson -lz -lavro -lssl -lcrypto -lm
if [ ! -f "$DIR/metadata/v1.metadata.json" ]; then
	rm -rf "$DIR"
	"$BIN" gen "$DIR" "$FILES" "$PER"
fi
echo "== C decoders (in-memory manifests)"
"$BIN" bench "$DIR"
echo "== icebird"
if [ -d test/node/node_modules/icebird ]; then
	node bench/iceberg_icebird.js "$DIR" test/node/node_modules/icebird
else
	echo "icebird not installed (cd test/node && npm ci)"
fi
echo "== metrics walk, peak memory"
/usr/bin/time -v "$BIN" walk "$DIR" 2>&1 | \
	grep -E 'metrics walk|Maximum resident|Elapsed \(wall'
