#!/bin/sh
# Build bench/dsl_bench.c with -O2 and run it: DSL evaluations per second
# against hand-written C predicates.  Usage: bench/dsl.sh [seconds per cell]
set -e
cd "$(dirname "$0")/.."
out=${TMPDIR:-/tmp}/tms_dsl_bench
${CC:-gcc} -std=gnu99 -O2 -Wall -Wextra -Werror -Isrc -o "$out" bench/dsl_bench.c src/dsl/*.c -lm
exec "$out" "${1:-0.5}"
