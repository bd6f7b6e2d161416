#!/bin/sh
# bench/iceberg_manifest_bench.sh -- manifest decoding benchmark of src/iceberg
#
#   sh bench/iceberg_manifest_bench.sh [FILES [PER_MANIFEST [DIR]]]
#
# Generates a synthetic Iceberg v2 table of FILES (default 1,000,000) data
# file entries, PER_MANIFEST (default 10,000) per deflate manifest, under DIR
# (default bench/results/iceberg-table, git-ignored), then in one run:
#   1. this layer's decoder (the fields tms uses, and every field),
#      avro-c's generic reader (every field) and raw inflate alone (zlib,
#      and libdeflate and ISA-L when their headers are installed) over the
#      same in-memory manifests, alternating, best of 3 wall-clock
#      (bench/iceberg_manifest_bench.c);
#   2. the same contenders' instruction counts under valgrind's callgrind,
#      on a table of CG_FILES (default 100,000) entries, PER_MANIFEST per
#      manifest: repeatable whatever else the machine runs (the loading of
#      the files, measured alone as "none", is subtracted); CG_FILES=0
#      skips it;
#   3. icebird 0.3.1 decoding the same manifests (bench/iceberg_icebird.js;
#      the module is test/node/node_modules/icebird, pinned by the test world);
#   4. the peak RSS of a full metrics walk (level DELETES) under
#      /usr/bin/time -v.
# The decoder is built as tms is: with libdeflate when the Makefile finds
# it (TMS_INFLATE=zlib forces the zlib fallback, to compare the two).
# BUILD_ONLY=1 builds bench/build/iceberg_manifest_bench and stops
# (bench/metrics_sql_bench.py uses it).
set -eu
cd "$(dirname "$0")/.."
FILES=${1:-1000000}
PER=${2:-10000}
DIR=${3:-bench/results/iceberg-table}
CG_FILES=${CG_FILES:-100000}
CG_DIR=bench/results/iceberg-table-cg
BIN=bench/build/iceberg_manifest_bench
mkdir -p bench/build "$(dirname "$DIR")"
EXTRA=""
LIBS=""
if [ -f /usr/include/libdeflate.h ]; then
	EXTRA="$EXTRA -DBENCH_LIBDEFLATE"
	LIBS="$LIBS -ldeflate"
fi
if [ -f /usr/include/isa-l/igzip_lib.h ]; then
	EXTRA="$EXTRA -DBENCH_ISAL"
	LIBS="$LIBS -lisal"
fi
INFLATE_CFLAGS=$(make -s --no-print-directory print-inflate-cflags ${TMS_INFLATE:+TMS_INFLATE=$TMS_INFLATE})
INFLATE_LIBS=$(make -s --no-print-directory print-inflate-libs ${TMS_INFLATE:+TMS_INFLATE=$TMS_INFLATE})
echo "decoder built with: ${INFLATE_CFLAGS:-zlib} $INFLATE_LIBS"
# shellcheck disable=SC2086
${CC:-gcc} -std=gnu99 -O2 -Wall -Wextra -Werror -Isrc $EXTRA $INFLATE_CFLAGS -o "$BIN" \
	bench/iceberg_manifest_bench.c src/iceberg/*.c src/iceberg/*/*.c src/io/*/*.c \
	-lcurl -ljansson $INFLATE_LIBS -lz -lavro -lssl -lcrypto -lm $LIBS
[ "${BUILD_ONLY:-0}" = 0 ] || exit 0
if [ ! -f "$DIR/metadata/v1.metadata.json" ]; then
	rm -rf "$DIR"
	"$BIN" gen "$DIR" "$FILES" "$PER"
fi
echo "== C decoders (in-memory manifests; load average $(cut -d' ' -f1-3 /proc/loadavg))"
"$BIN" bench "$DIR"
if [ "$CG_FILES" -gt 0 ] && command -v valgrind >/dev/null; then
	if [ ! -f "$CG_DIR/metadata/v1.metadata.json" ]; then
		rm -rf "$CG_DIR"
		"$BIN" gen "$CG_DIR" "$CG_FILES" "$PER" >/dev/null
	fi
	echo "== instructions (callgrind, $CG_FILES entries, loading subtracted)"
	count() {
		out=$(valgrind --tool=callgrind --callgrind-out-file=/dev/null "$BIN" one "$CG_DIR" "$1" 2>&1) ||
			return 0			# a contender this build lacks
		printf '%s\n' "$out" | sed -n 's/.*Collected : \([0-9]*\).*/\1/p'
	}
	base=$(count none)
	for c in ours full zlib libdeflate isal avroc; do
		n=$(count "$c")
		[ -n "$n" ] || continue
		awk -v c="$c" -v n="$n" -v b="$base" -v e="$CG_FILES" \
			'BEGIN { printf "%-12s %8.1f M instructions  %6.0f per entry\n", c, (n - b) / 1e6, (n - b) / e }'
	done
fi
echo "== icebird"
if [ -d test/node/node_modules/icebird ]; then
	node bench/iceberg_icebird.js "$DIR" test/node/node_modules/icebird
else
	echo "icebird not installed (cd test/node && npm ci)"
fi
echo "== metrics walk, peak memory"
/usr/bin/time -v "$BIN" walk "$DIR" 2>&1 | \
	grep -E 'metrics walk|Maximum resident|Elapsed \(wall'
