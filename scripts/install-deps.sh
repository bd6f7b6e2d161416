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
# prometheus and prometheus-postgres-exporter are for the monitoring test
# (test/integration/test_prometheus.py), which starts its own on 127.0.0.1:
# their packaged services must not run (below).  python3-pytest-xdist runs
# the integration modules in parallel.  pg-bsd-indent is pg_bsd_indent 2.1.1,
# the indent program of PostgreSQL 15's pgindent: scripts/pgindent.sh lays out
# the C code with it and scripts/check-format.sh (make check-fast) checks the
# layout.
DEBS=(
  build-essential
  postgresql-15 postgresql-server-dev-15 postgresql-15-cron postgresql-client-15
  libcurl4-openssl-dev libjansson-dev libavro-dev libssl-dev zlib1g-dev libdeflate-dev
  python3 python3-psycopg2 python3-pytest python3-pytest-timeout python3-pytest-xdist python3-avro
  pg-bsd-indent
  clang-14 libclang-rt-14-dev
  libfaketime
  prometheus prometheus-postgres-exporter
)
# Services the packages above would start, listening on every address.
SERVICES=(prometheus prometheus-postgres-exporter prometheus-node-exporter)
# --bench-mariadb: also mariadb-server, for bench/store_bench.py
# --azurite-mariadb only (it starts a private mariadbd of its own on
# 127.0.0.1 and a socket in its temporary directory); the packaged service
# is kept stopped and off, as Prometheus's.  The tests do not need it.
for arg in "$@"; do
  case "$arg" in
    --bench-mariadb) DEBS+=(mariadb-server); SERVICES+=(mariadb) ;;
    *) echo "install-deps: unknown option $arg (known: --bench-mariadb)" >&2; exit 2 ;;
  esac
done

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
  # Debian's maintainer scripts start a service they install unless
  # policy-rc.d forbids it (exit 101): forbid it for this install, if the
  # machine has no policy of its own.
  own_policy=
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\n# tms scripts/install-deps.sh: start no service while installing\nexit 101\n' \
      >/usr/sbin/policy-rc.d
    chmod 755 /usr/sbin/policy-rc.d
    own_policy=1
    trap 'rm -f /usr/sbin/policy-rc.d' EXIT
  fi
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  [ -z "$own_policy" ] || { rm -f /usr/sbin/policy-rc.d; trap - EXIT; }
fi

# The packaged Prometheus, exporter (and MariaDB) services are never used (the tests
# start their own, on 127.0.0.1): keep them stopped and off at boot, also
# when they were installed before this script ran.
for s in "${SERVICES[@]}"; do
  if [ -d /run/systemd/system ] && command -v systemctl >/dev/null; then
    if systemctl is-enabled --quiet "$s" 2>/dev/null || systemctl is-active --quiet "$s" 2>/dev/null; then
      [ "$(id -u)" -eq 0 ] && systemctl disable --now --quiet "$s" 2>/dev/null || true
    fi
  elif [ -x "/etc/init.d/$s" ] && [ "$(id -u)" -eq 0 ]; then
    "/etc/init.d/$s" status >/dev/null 2>&1 && "/etc/init.d/$s" stop >/dev/null 2>&1 || true
    update-rc.d "$s" disable >/dev/null 2>&1 || true
  fi
done

# Debian's clang-14 package names its binary clang-14; the fuzz rule wants clang.
command -v clang >/dev/null || ln -sf "$(command -v clang-14)" /usr/local/bin/clang

# again when the lock file changed since (node_modules/.package-lock.json is
# npm's record of the last install): a new package, such as DuckDB for the
# engine look-alikes, reaches trees installed before it.  The build takes
# libduckdb.so for the compaction helper tms_compactor from the package
# @duckdb/node-bindings-linux-x64 (an optional dependency of DuckDB's Node
# API, installed on Linux x64): a tree without it is installed again.
duckdb=test/node/node_modules/@duckdb/node-bindings-linux-x64/libduckdb.so
if [ -f test/node/package-lock.json ] && { [ ! -d test/node/node_modules ] ||
     [ test/node/package-lock.json -nt test/node/node_modules/.package-lock.json ] ||
     { [ "$(uname -m)" = x86_64 ] && [ ! -f "$duckdb" ]; }; }; then
  echo "install-deps: npm ci in test/node"
  npm ci --prefix test/node --no-audit --no-fund --loglevel=error --prefer-offline >/dev/null
fi
