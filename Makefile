# Makefile for tms, built with PGXS.
#
#   make / make install       build and install the extension
#   make installcheck         pg_regress against a running server (see test/README.md)
#   make unit                 plain-C unit drivers, test/unit/<layer>_test.c
#   make fuzz-<name>          libFuzzer target test/fuzz/fuzz_<name>.c (FUZZ_SECONDS):
#                             dsl, iceberg, location, xml, rest
#   make test                 everything, on a throwaway cluster (test/run-tests.sh)
#   make demo / demo-stop     a running stack to play with (scripts/demo.sh)

EXTENSION = tms
EXTVERSION = $(shell sed -n "s/^default_version = '\(.*\)'/\1/p" tms.control)

MODULE_big = tms
SRCS = $(sort $(wildcard src/*.c src/*/*.c))
OBJS = $(SRCS:.c=.o)

# The install script is assembled from sql/install/NN_area.sql in name order,
# so that each area of the code keeps its SQL objects beside its own files.
INSTALL_PARTS = $(sort $(wildcard sql/install/*.sql))
DATA_built = $(EXTENSION)--$(EXTVERSION).sql
DATA = $(filter-out sql/$(EXTENSION)--$(EXTVERSION).sql,$(wildcard sql/$(EXTENSION)--*--*.sql))

# Every sql/<name>.sql is a pg_regress test; the workers keep a connection
# to the test database, so pg_regress must use an existing one.
REGRESS = $(sort $(patsubst sql/%.sql,%,$(filter-out sql/$(EXTENSION)--%,$(wildcard sql/*.sql))))
REGRESS_OPTS = --use-existing --inputdir=. --outputdir=.

LIBS_EXTERNAL = -lcurl -ljansson -lavro -lssl -lcrypto -lz
PG_CPPFLAGS = -Isrc
# PostgreSQL's own headers are not -Wextra clean for unused parameters.
PG_CFLAGS = -Wall -Wextra -Werror -Wno-unused-parameter
SHLIB_LINK = $(LIBS_EXTERNAL)
EXTRA_CLEAN = $(DATA_built) test/unit/build test/fuzz/build

PG_CONFIG ?= pg_config
PGXS := $(shell $(PG_CONFIG) --pgxs)
include $(PGXS)

# pgxs appends --dbname=$(CONTRIB_TESTDB) to REGRESS_OPTS; it must come after
# the include to take effect.
CONTRIB_TESTDB = tms_regress

# PGXS tracks no header dependencies: rebuild every object when any header
# changes (a stale struct layout in one object is a memory corruption).
HEADERS = $(wildcard src/*.h src/*/*.h)
$(OBJS): $(HEADERS)

# A call from tms.so to jansson's json_object() would bind at run time to
# PostgreSQL's json_object() in the postgres executable (src/tms_json.h).
all: check-symbols
.PHONY: check-symbols
check-symbols: $(shlib)
	@if nm -D --undefined-only $(shlib) | grep -qw json_object; then \
	    echo "error: $(shlib) calls json_object(); use tms_json_object_new() (src/tms_json.h)" >&2; \
	    rm -f $(shlib); exit 1; fi

$(DATA_built): $(INSTALL_PARTS) tms.control
	@{ echo '-- Generated from sql/install/*.sql by the Makefile; edit those files.'; \
	   for f in $(INSTALL_PARTS); do printf '\n-- %s\n' "$$f"; cat "$$f"; done; } > $@

# ---------------------------------------------------------------------------
# Plain-C layers outside the server: unit drivers and fuzz targets.

CC_PLAIN ?= gcc
PLAIN_CFLAGS = -std=gnu99 -g -O1 -Wall -Wextra -Werror -Isrc
UNIT_DRIVERS = $(sort $(wildcard test/unit/*_test.c))
UNIT_BINS = $(patsubst test/unit/%_test.c,test/unit/build/%_test,$(UNIT_DRIVERS))

# The plain-C layers a layer's unit driver and fuzz targets link besides its
# own src/<layer>/*.c (dependencies go one way: iceberg -> io).
LAYER_DEPS_iceberg = io
layer_srcs = $(wildcard src/$(1)/*.c) $(foreach d,$(LAYER_DEPS_$(1)),$(wildcard src/$(d)/*.c))

test/unit/build/%_test: test/unit/%_test.c $(wildcard src/*/*.c src/*/*.h)
	@mkdir -p $(dir $@)
	$(CC_PLAIN) $(PLAIN_CFLAGS) -o $@ $< $(call layer_srcs,$*) $(LIBS_EXTERNAL) -lm

.PHONY: unit
unit: $(UNIT_BINS)
	@rc=0; for b in $(UNIT_BINS); do echo "== $$b"; \
	  ./$$b || rc=1; done; exit $$rc

FUZZ_SECONDS ?= 300
FUZZ_CC ?= clang
FUZZ_FLAGS = -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -Isrc

# A fuzz target named after a part of a layer links that layer.
FUZZ_LAYER_location = io
FUZZ_LAYER_xml = io
FUZZ_LAYER_rest = io
fuzz_layer = $(or $(FUZZ_LAYER_$(1)),$(1))

test/fuzz/build/fuzz_%: test/fuzz/fuzz_%.c $(wildcard src/*/*.c src/*/*.h)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_FLAGS) -o $@ $< $(call layer_srcs,$(call fuzz_layer,$*)) $(LIBS_EXTERNAL) -lm

fuzz-%: test/fuzz/build/fuzz_%
	@mkdir -p test/fuzz/corpus-$*
	ASAN_OPTIONS=detect_leaks=1 $< -max_total_time=$(FUZZ_SECONDS) -print_final_stats=1 \
	    test/fuzz/corpus-$* test/fuzz/corpus/$*

# ---------------------------------------------------------------------------
# Whole-project entry points.

.PHONY: test demo demo-stop
test:
	bash test/run-tests.sh

demo:
	bash scripts/demo.sh start

demo-stop:
	bash scripts/demo.sh stop
