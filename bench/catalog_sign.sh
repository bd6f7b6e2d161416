#!/bin/sh
# Build bench/catalog_sign_bench.c with -O2 and run it: the CPU time of a
# catalog request's headers, bearer only against SigV4-signed.
# Usage: bench/catalog_sign.sh [requests]
set -e
cd "$(dirname "$0")/.."
out=${TMPDIR:-/tmp}/tms_catalog_sign_bench
${CC:-gcc} -std=gnu99 -O2 -Wall -Wextra -Werror -Isrc -o "$out" bench/catalog_sign_bench.c \
    src/io/*/*.c -lcurl -ljansson -lssl -lcrypto -lz -lm
exec "$out" "${1:-100000}"
