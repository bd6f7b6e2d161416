#!/usr/bin/env bash
# check-layers.sh: the include graph of src/ follows the layers of
# doc/architecture.md, one way only:
#
#   plain C (dsl, io; cron uses io for its calendar; iceberg uses io and
#   dsl; engine may use io)
#     <- observe <- bridge <- sched <- ops <- {worker, sql_api}
#
# observe (cumulative statistics, NOTIFY events) is the first layer inside
# PostgreSQL: it includes only the plain-C layers, so that bridge (whose
# catalog and engine connections feed the HTTP statistics) and everything
# above may use it.
#
# A file may include its own layer's headers and those of the layers below
# it; a layer is the directory under src/ (src/io/http/http.c is in io).  The plain-C layers include no PostgreSQL header at all: their quoted
# includes name only their own or allowed plain-C layers (system headers
# are <...>).  sql_api may read the worker layer's process slots
# (worker/worker.h) for the tms.workers view; nothing includes sql_api.
# src/tms.c, the library's entry point, sits above everything.
# src/compactor is a program of its own (the compaction helper): plain C
# over iceberg and io, never a PostgreSQL header.
#
# Exit status 1 and one line per offending include when the rule is broken.
set -euo pipefail
cd "$(dirname "$0")/.."

allowed() {                      # allowed() LAYER -> space-separated layers
  case "$1" in
    dsl|io)      echo "$1" ;;
    cron)        echo "cron io" ;;
    iceberg)     echo "iceberg io dsl" ;;
    engine)      echo "engine io" ;;
    observe)     echo "observe cron dsl io iceberg engine" ;;
    bridge)      echo "bridge observe cron dsl io iceberg engine" ;;
    sched)       echo "sched bridge observe cron dsl io iceberg engine" ;;
    ops)         echo "ops sched bridge observe cron dsl io iceberg engine" ;;
    worker)      echo "worker ops sched bridge observe cron dsl io iceberg engine" ;;
    sql_api)     echo "sql_api worker ops sched bridge observe cron dsl io iceberg engine" ;;
    compactor)   echo "compactor iceberg io dsl" ;;
    *)           echo "" ;;
  esac
}
plain() { case "$1" in cron|dsl|io|iceberg|engine|compactor) return 0 ;; esac; return 1; }

bad=0
for f in $(git ls-files -co --exclude-standard 'src/*/*.c' 'src/*/*.h'); do
  layer=$(echo "$f" | cut -d/ -f2)
  ok=" $(allowed "$layer") "
  if [ "$ok" = "  " ]; then
    echo "$f: unknown layer \"$layer\" (add it to scripts/check-layers.sh and doc/architecture.md)"
    bad=1
    continue
  fi
  while IFS= read -r inc; do
    target=${inc#*\"}; target=${target%%\"*}
    case "$target" in
      */*) tlayer=${target%%/*} ;;
      *)   # a header of the same directory, or a PostgreSQL header
           if [ -f "$(dirname "$f")/$target" ]; then continue; fi
           tlayer="postgres" ;;
    esac
    if [ "$tlayer" = postgres ] || ! [ -d "src/$tlayer" ]; then
      if plain "$layer"; then
        echo "$f: plain-C layer includes PostgreSQL header \"$target\""
        bad=1
      fi
      continue
    fi
    case "$ok" in
      *" $tlayer "*) ;;
      *) echo "$f: layer $layer must not include \"$target\" (layer $tlayer)"; bad=1 ;;
    esac
    if [ "$layer" = sql_api ] && [ "$tlayer" = worker ] && [ "$target" != worker/worker.h ]; then
      echo "$f: sql_api may include only worker/worker.h of the worker layer"; bad=1
    fi
  done < <(grep -E '^#[[:space:]]*include[[:space:]]+"' "$f" || true)
done
if [ $bad -ne 0 ]; then
  echo "check-layers: include against the layer order (see doc/architecture.md)" >&2
  exit 1
fi
echo "check-layers: the includes of src/ follow the layer order"
