#!/usr/bin/env bash
# Install what building and testing tms needs, and nothing that is there
# already: Debian packages (apt) and the test world's npm packages
# (test/node, from its lockfile).  Safe to run again; needs root to install.
set -euo pipefail
cd "$(dirname "$0")/.."

# libdeflate-dev: tms inflates Avro deflate blocks with it (the Makefile falls
# back to zlib without it).  libisal-dev is optional: bench/iceberg_manifest_bench.sh
# measures its inflate when it is there.
# libavro-dev is for bench/iceberg_manifest_bench.c only (its baseline); tms
# itself does not link libavro.  libfaketime runs a test cluster on a clock
# set to a daylight-saving change (test/integration/test_schedules.py).
DEBS=(
  build-essential
  postgresql-15 postgresql-server-dev-15 postgresql-15-cron postgresql-client-15
  libcurl4-openssl-dev libjansson-dev libavro-dev libssl-dev zlib1g-dev libdeflate-dev
  python3 python3-psycopg2 python3-pytest python3-avro
  clang-14 libclang-rt-14-dev
  libfaketime
)

missing=()
for p in "${DEBS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
command -v node >/dev/null && command -v npm >/dev/null || missing+=(nodejs npm)

if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "install-deps: missing packages: ${missing[*]} (run as root to install them)" >&2
    exit 1
  fi
  echo "install-deps: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# Debian's clang-14 package names its binary clang-14; the fuzz rule wants clang.
command -v clang >/dev/null || ln -sf "$(command -v clang-14)" /usr/local/bin/clang

# again when the lock file changed since (node_modules/.package-lock.json is
# npm's record of the last install): a new package, such as DuckDB for the
# engine look-alikes, reaches trees installed before it
if [ -f test/node/package-lock.json ] && { [ ! -d test/node/node_modules ] ||
     [ test/node/package-lock.json -nt test/node/node_modules/.package-lock.json ]; }; then
  echo "install-deps: npm ci in test/node"
  npm ci --prefix test/node --no-audit --no-fund --loglevel=error --prefer-offline >/dev/null
fi
