# Makefile for tms, built with PGXS.
#
#   make install-deps         Debian and npm packages (libduckdb for tms_compactor)
#   make / make install       build and install the extension and its
#                             compaction helper (WERROR=1: warnings are
#                             errors, as in make test and demo)
#   make installcheck         pg_regress (test/regress/) and the isolation
#                             specs (test/isolation/), each on a temporary
#                             instance of its own (test/regress.conf; needs
#                             make install first)
#   make unit                 plain-C unit drivers, test/unit/<layer>_test.c
#   make unit-san             the same drivers under ASan (leaks too) and UBSan
#   make fuzz-<name>          libFuzzer target test/fuzz/fuzz_<name>.c (FUZZ_SECONDS):
#                             dsl, iceberg, location, xml, rest, engine, compact
#   make fuzz-replay          every fuzz target over test/fuzz/corpus/<name>/,
#                             once each, no fuzzing, under ASan and UBSan
#   make check-fast           build, install, checks of standalone, layers,
#                             file names and sizes, function sizes and the
#                             settings table, the C layout, unit-san,
#                             fuzz-replay,
#                             installcheck (pg_regress and isolation): under
#                             3 minutes
#                             (scripts/check-fast.sh)
#   make test                 check-fast, then the integration tests, on a
#                             throwaway cluster (test/run-tests.sh)
#   make check-standalone     the repository stands alone: no file names
#                             a tree outside it
#   make check-format         the C layout of src/ and test/unit is
#                             pgindent's (scripts/check-format.sh)
#   make pgindent             lay out src/ and test/unit as pgindent does
#                             (scripts/pgindent.sh)
#   make demo / demo-stop     a running stack to play with (scripts/demo.sh)

EXTENSION = tms
EXTVERSION = $(shell sed -n "s/^default_version = '\(.*\)'/\1/p" tms.control)

MODULE_big = tms
# src/compactor/ is the compaction helper, a program of its own (below)
# A layer's files are src/<layer>/*.c and src/<layer>/<part>/*.c (io and
# iceberg group theirs by concept, doc/architecture.md).
layer_files = $(wildcard src/$(1)/*.c src/$(1)/*/*.c)
SRCS = $(sort $(filter-out src/compactor/%,$(wildcard src/*.c src/*/*.c src/*/*/*.c)))
OBJS = $(SRCS:.c=.o)

# The install script and the update script to this version are built by
# scripts/sql-gen.sh (doc/developing.md, "Changing the schema"): the install
# script from sql/install/ (once-only NN_area.sql, then the idempotent
# functions/NN_area.sql, then post/NN_area.sql, each in name order, so that
# each area of the code keeps its SQL objects beside its own files); the
# update script from A, tms--A--$(EXTVERSION).sql, from the hand-written
# fragment sql/updates/A--$(EXTVERSION).sql followed by every idempotent
# file, as TimescaleDB builds its update scripts.
SQL_PARTS = $(sort $(wildcard sql/install/*.sql)) $(sort $(wildcard sql/install/functions/*.sql)) \
	$(sort $(wildcard sql/install/post/*.sql))
UPDATE_FRAGMENTS = $(wildcard sql/updates/*--$(EXTVERSION).sql)
UPDATE_SCRIPTS = $(patsubst sql/updates/%.sql,$(EXTENSION)--%.sql,$(UPDATE_FRAGMENTS))
DATA_built = $(EXTENSION)--$(EXTVERSION).sql $(UPDATE_SCRIPTS)
# Upgrade scripts of released versions (sql/tms--A--B.sql) and their install
# scripts (sql/tms--A.sql), frozen as released: the upgrade test installs an
# earlier version and updates it.  A release copies the two generated
# scripts into sql/ (doc/developing.md, "Releasing").
DATA = $(filter-out sql/$(EXTENSION)--$(EXTVERSION).sql sql/$(EXTENSION)--%--$(EXTVERSION).sql,\
	$(wildcard sql/$(EXTENSION)--*.sql))

# Every test/regress/sql/<name>.sql is a pg_regress test (expected output
# in test/regress/expected/<name>.out), and every
# test/isolation/specs/<name>.spec an isolation test, run by
# pg_isolation_regress (expected output in test/isolation/expected/): races
# of concurrent sessions, interleaved deterministically by lock waits
# (test/isolation/README.md).  make installcheck runs both, each on a
# temporary instance of its own (initdb in $(REGRESS_DIR)/tmp_check and
# tmp_check_iso, with test/regress.conf appended to its configuration: tms
# and pg_cron preloaded for the test database), as contrib/pg_stat_statements
# does; it never touches a running server.  The instance's database does not
# exist when the server starts: the tms launcher and pg_cron wait for it.
# REGRESS= or ISOLATION= on the command line skips one suite.
REGRESS = $(sort $(patsubst test/regress/sql/%.sql,%,$(wildcard test/regress/sql/*.sql)))
REGRESS_CONF = test/regress.conf
REGRESS_OPTS = --inputdir=$(REGRESS_IN)/test/regress --outputdir=$(REGRESS_DIR) \
	--temp-instance=$(REGRESS_DIR)/tmp_check \
	--temp-config=$(REGRESS_IN)/$(REGRESS_CONF)
ISOLATION = $(sort $(patsubst test/isolation/specs/%.spec,%,$(wildcard test/isolation/specs/*.spec)))
ISOLATION_OPTS = --inputdir=$(REGRESS_IN)/test/isolation --outputdir=$(REGRESS_DIR)/output_iso \
	--temp-instance=$(REGRESS_DIR)/tmp_check_iso \
	--temp-config=$(REGRESS_IN)/$(REGRESS_CONF) --load-extension=tms
REGRESS_PREP = regress-stage

# libavro is not linked: src/iceberg reads Avro itself (only
# bench/iceberg_manifest_bench.c links it, as its baseline).
#
# Avro's deflate blocks are inflated with libdeflate when it is installed
# (Debian: libdeflate-dev; 1.7-2x zlib's speed, bench/README.md), else with
# zlib, which is linked either way (gzip metadata, the Avro writer, CRCs).
# TMS_INFLATE=zlib builds the fallback on a machine that has libdeflate.
TMS_INFLATE ?= $(shell printf '\043include <libdeflate.h>\nint main(void){return libdeflate_alloc_decompressor()==0;}\n' | \
	$(CC) -x c - -ldeflate -o /dev/null >/dev/null 2>&1 && echo libdeflate || echo zlib)
ifeq ($(TMS_INFLATE),libdeflate)
INFLATE_CFLAGS = -DTMS_HAVE_LIBDEFLATE
INFLATE_LIBS = -ldeflate
endif
LIBS_EXTERNAL = -lcurl -ljansson -lssl -lcrypto $(INFLATE_LIBS) -lz
PG_CPPFLAGS = -Isrc $(INFLATE_CFLAGS)
# PostgreSQL's own headers are not -Wextra clean for unused parameters.
# Warnings are errors in the project's own builds (make test, make demo
# and CI pass WERROR=1; make unit and make fuzz-* always), not in a
# packager's plain "make && make install", which another compiler's new
# warning must not break.
WERROR ?=
PG_CFLAGS = -Wall -Wextra -Wno-unused-parameter $(if $(filter 1,$(WERROR)),-Werror)
SHLIB_LINK = $(LIBS_EXTERNAL)
EXTRA_CLEAN = $(DATA_built) test/unit/build test/fuzz/build $(REGRESS_STAGE) .build-flags \
	src/compactor/tms_compactor

PG_CONFIG ?= pg_config
PGXS := $(shell $(PG_CONFIG) --pgxs)
include $(PGXS)

# pgxs appends --dbname=$(CONTRIB_TESTDB) to REGRESS_OPTS and
# --dbname=$(ISOLATION_TESTDB) to ISOLATION_OPTS; they must come after the
# include to take effect.  test/regress.conf names the same database.
CONTRIB_TESTDB = tms_regress
ISOLATION_TESTDB = tms_regress

# initdb and postgres refuse to run as root, so as root pg_regress (and the
# instance it starts) runs as the postgres OS user, like test/pgcluster.py,
# on a copy of test/regress/, test/isolation/ and test/regress.conf in a
# directory that
# user owns: $(REGRESS_DIR), by default one per checkout under /tmp.  Other
# users run it in place.  pg_regress's results, regression.diffs and server
# log (log/postmaster.log) are in $(REGRESS_DIR), pg_isolation_regress's in
# $(REGRESS_DIR)/output_iso.
ifeq ($(shell id -u),0)
REGRESS_DIR ?= /tmp/tms-regress-$(shell printf '%s' '$(CURDIR)' | md5sum | cut -c1-12)
REGRESS_AS = runuser -u postgres --
REGRESS_STAGE = $(REGRESS_DIR)
REGRESS_IN = $(REGRESS_DIR)
else
REGRESS_DIR ?= $(CURDIR)
REGRESS_IN = $(CURDIR)
endif
pg_regress_installcheck = $(REGRESS_AS) $(top_builddir)/src/test/regress/pg_regress \
	--bindir='$(bindir)' $(pg_regress_locale_flags) $(EXTRA_REGRESS_OPTS)
pg_isolation_regress_installcheck = $(REGRESS_AS) \
	$(top_builddir)/src/test/isolation/pg_isolation_regress \
	--bindir='$(bindir)' $(pg_regress_locale_flags) $(EXTRA_REGRESS_OPTS)

.PHONY: regress-stage
regress-stage:
	@rm -rf $(REGRESS_DIR)/tmp_check $(REGRESS_DIR)/tmp_check_iso $(REGRESS_DIR)/results \
	    $(REGRESS_DIR)/log $(REGRESS_DIR)/output_iso \
	    $(REGRESS_DIR)/regression.diffs $(REGRESS_DIR)/regression.out
	@mkdir -p $(REGRESS_DIR)/output_iso
ifdef REGRESS_STAGE
	@rm -rf $(REGRESS_STAGE)/test
	@mkdir -p $(REGRESS_STAGE)/test
	@cp -R test/regress test/isolation $(REGRESS_STAGE)/test/
	@cp $(REGRESS_CONF) $(REGRESS_STAGE)/$(REGRESS_CONF)
	@chown -R postgres: $(REGRESS_STAGE)
endif

# PGXS tracks no header dependencies: rebuild every object when any header
# changes (a stale struct layout in one object is a memory corruption).
HEADERS = $(wildcard src/*.h src/*/*.h src/*/*/*.h)
$(OBJS): $(HEADERS)

# Nor flags: .build-flags changes when PG_CFLAGS do, so that a WERROR=1
# build after a plain one compiles every file again.
.build-flags: FORCE
	@echo '$(PG_CFLAGS) $(PG_CPPFLAGS)' | cmp -s - $@ || echo '$(PG_CFLAGS) $(PG_CPPFLAGS)' > $@
.PHONY: FORCE
$(OBJS): .build-flags

# A call from tms.so to jansson's json_object() would bind at run time to
# PostgreSQL's json_object() in the postgres executable (src/io/util/jsonmem.h).
all: check-symbols
.PHONY: check-symbols
check-symbols: $(shlib)
	@if nm -D --undefined-only $(shlib) | grep -qw json_object; then \
	    echo "error: $(shlib) calls json_object(); use json_pack(\"{}\") (src/io/util/jsonmem.h)" >&2; \
	    rm -f $(shlib); exit 1; fi

$(EXTENSION)--$(EXTVERSION).sql: $(SQL_PARTS) scripts/sql-gen.sh tms.control
	@bash scripts/sql-gen.sh install > $@.tmp && mv $@.tmp $@ || { rm -f $@.tmp; exit 1; }

$(UPDATE_SCRIPTS): $(EXTENSION)--%.sql: sql/updates/%.sql $(wildcard sql/updates/*.post.sql) \
		$(SQL_PARTS) scripts/sql-gen.sh tms.control
	@bash scripts/sql-gen.sh update $< > $@.tmp && mv $@.tmp $@ || { rm -f $@.tmp; exit 1; }

# ---------------------------------------------------------------------------
# The compaction helper, tms_compactor (src/compactor/): the program a
# worker starts for a compaction on engine "local".  It links DuckDB's C
# API (libduckdb.so) and the plain-C layers, never PostgreSQL.  libduckdb
# comes from the npm package @duckdb/node-bindings-linux-x64 that
# scripts/install-deps.sh installs (DUCKDB_DIR to use another copy, or
# DUCKDB_DIR= to build without it: the extension then refuses local
# compaction with a hint).  Installed into $(pkglibdir)/tms/ with its
# libduckdb.so (found through RPATH $ORIGIN): a helper of the library,
# not a command for users' PATH, so beside the library (as $libdir/tms)
# rather than in bindir, and versioned with it.
DUCKDB_DIR ?= test/node/node_modules/@duckdb/node-bindings-linux-x64
ifneq ($(wildcard $(DUCKDB_DIR)/libduckdb.so),)
COMPACTOR = src/compactor/tms_compactor
endif
COMPACTOR_SRCS = $(wildcard src/compactor/*.c) $(foreach l,iceberg io dsl,$(call layer_files,$(l)))
COMPACTOR_CFLAGS = -std=gnu99 -g -O2 -Wall -Wextra -Isrc $(INFLATE_CFLAGS) $(if $(filter 1,$(WERROR)),-Werror)

all: $(COMPACTOR)

src/compactor/tms_compactor: $(COMPACTOR_SRCS) $(HEADERS) .build-flags
	$(CC_PLAIN) $(COMPACTOR_CFLAGS) -o $@ $(COMPACTOR_SRCS) \
	    -L$(DUCKDB_DIR) -lduckdb -Wl,-rpath,'$$ORIGIN' $(LIBS_EXTERNAL) -lm -lpthread

.PHONY: install-compactor
install: install-compactor
install-compactor: $(COMPACTOR)
ifdef COMPACTOR
	$(MKDIR_P) '$(DESTDIR)$(pkglibdir)/tms'
	@# 70 MB, the same on most installs: written only when it changed
	cmp -s $(DUCKDB_DIR)/libduckdb.so '$(DESTDIR)$(pkglibdir)/tms/libduckdb.so' || \
	    $(INSTALL_SHLIB) $(DUCKDB_DIR)/libduckdb.so '$(DESTDIR)$(pkglibdir)/tms/libduckdb.so'
	$(INSTALL_PROGRAM) $(COMPACTOR) '$(DESTDIR)$(pkglibdir)/tms/tms_compactor'
else
	@echo "tms: libduckdb.so not found in $(DUCKDB_DIR): tms_compactor is not built, compaction on engine local is refused" >&2
endif

# ---------------------------------------------------------------------------
# Plain-C layers outside the server: unit drivers and fuzz targets.

CC_PLAIN ?= gcc
PLAIN_CFLAGS = -std=gnu99 -g -O1 -Wall -Wextra -Werror -Isrc $(INFLATE_CFLAGS)
UNIT_DRIVERS = $(sort $(wildcard test/unit/*_test.c))
UNIT_BINS = $(patsubst test/unit/%_test.c,test/unit/build/%_test,$(UNIT_DRIVERS))

# The plain-C layers a layer's unit driver and fuzz targets link besides its
# own files (layer_files; dependencies go one way: iceberg -> io, engine ->
# io for the string buffer of io/util/strbuf.h, cron -> io for the civil
# dates of io_base.c).
LAYER_DEPS_iceberg = io
LAYER_DEPS_engine = io
LAYER_DEPS_cron = io
layer_srcs = $(call layer_files,$(1)) $(foreach d,$(LAYER_DEPS_$(1)),$(call layer_files,$(d)))
PLAIN_TREE = $(wildcard src/*/*.c src/*/*/*.c) $(HEADERS)

# A unit driver named after a part of a layer links that layer.
UNIT_LAYER_expire = iceberg
UNIT_LAYER_rewrite = iceberg
UNIT_LAYER_compact = iceberg
UNIT_LAYER_posdel = iceberg
UNIT_LAYER_rest_sigv4 = io
UNIT_LAYER_reach = io
UNIT_LAYER_azure = io
UNIT_LAYER_memory = iceberg
UNIT_LAYER_gcs = io
UNIT_LAYER_dv = iceberg
UNIT_LAYER_row_filter = iceberg
UNIT_LAYER_retention = iceberg
UNIT_LAYER_health = dsl
unit_layer = $(or $(UNIT_LAYER_$(1)),$(1))

test/unit/build/%_test: test/unit/%_test.c test/unit/unit.h $(PLAIN_TREE)
	@mkdir -p $(dir $@)
	$(CC_PLAIN) $(PLAIN_CFLAGS) -o $@ $< $(call layer_srcs,$(call unit_layer,$*)) $(LIBS_EXTERNAL) -lm

# The integration tests' drivers of the io layer (test/integration/
# io_driver.c, engine_driver.c), built once here rather than by each test
# module that runs them: make test builds them with the extension
# (test-drivers), and world.built_driver() makes them, under a lock, for a
# module run alone.
TEST_DRIVERS = test/integration/build/io_driver test/integration/build/engine_driver
.PHONY: test-drivers
test-drivers: $(TEST_DRIVERS)
test/integration/build/%_driver: test/integration/%_driver.c $(PLAIN_TREE)
	@mkdir -p $(dir $@)
	$(CC_PLAIN) $(PLAIN_CFLAGS) -o $@ $< $(call layer_files,io) $(LIBS_EXTERNAL) -lm

.PHONY: unit
unit: $(UNIT_BINS)
	@rc=0; for b in $(UNIT_BINS); do echo "== $$b"; \
	  ./$$b || rc=1; done; exit $$rc

# The same drivers under AddressSanitizer (with LeakSanitizer) and
# UndefinedBehaviorSanitizer: any finding ends the driver with an error.
# The layers are compiled once into test/unit/build/san/src/, and those
# objects are shared by every sanitized driver and every fuzz replay
# binary (below).  Run in parallel with make -j2 -Otarget -k.
SAN_FLAGS = -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
SAN_CFLAGS = $(PLAIN_CFLAGS) $(SAN_FLAGS)
SAN_ENV = ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
SAN_DIR = test/unit/build/san
san_objs = $(patsubst %.c,$(SAN_DIR)/%.o,$(call layer_srcs,$(1)))
UNIT_SAN_BINS = $(patsubst test/unit/%_test.c,$(SAN_DIR)/%_test,$(UNIT_DRIVERS))

$(SAN_DIR)/src/%.o: src/%.c $(HEADERS)
	@mkdir -p $(dir $@)
	$(CC_PLAIN) $(SAN_CFLAGS) -c -o $@ $<

.SECONDEXPANSION:
$(SAN_DIR)/%_test: test/unit/%_test.c test/unit/unit.h $$(call san_objs,$$(call unit_layer,$$*)) \
	$(HEADERS)
	@mkdir -p $(dir $@)
	$(CC_PLAIN) $(SAN_CFLAGS) -o $@ $< $(call san_objs,$(call unit_layer,$*)) $(LIBS_EXTERNAL) -lm

.PHONY: unit-san
unit-san: $(patsubst test/unit/%_test.c,unit-san-%,$(UNIT_DRIVERS))
unit-san-%: $(SAN_DIR)/%_test
	@echo "== $< (ASan, UBSan)"; $(SAN_ENV) $<

FUZZ_SECONDS ?= 300
FUZZ_CC ?= clang
FUZZ_FLAGS = -g -O1 -Wall -Wextra -Werror -fsanitize=fuzzer,address,undefined \
	-fno-sanitize-recover=undefined -Isrc $(INFLATE_CFLAGS)

# A fuzz target named after a part of a layer links that layer.
FUZZ_LAYER_location = io
FUZZ_LAYER_xml = io
FUZZ_LAYER_rest = io
FUZZ_LAYER_gcs_batch = io
FUZZ_LAYER_compact = iceberg
FUZZ_LAYER_blob_batch = io
fuzz_layer = $(or $(FUZZ_LAYER_$(1)),$(1))

test/fuzz/build/fuzz_%: test/fuzz/fuzz_%.c $(PLAIN_TREE)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_FLAGS) -o $@ $< $(call layer_srcs,$(call fuzz_layer,$*)) $(LIBS_EXTERNAL) -lm

fuzz-%: test/fuzz/build/fuzz_%
	@mkdir -p test/fuzz/corpus-$*
	ASAN_OPTIONS=detect_leaks=1 $< -max_total_time=$(FUZZ_SECONDS) -print_final_stats=1 \
	    test/fuzz/corpus-$* test/fuzz/corpus/$*

# Replay every fuzz target over its corpus (test/fuzz/corpus/<name>/), under
# ASan and UBSan, without fuzzing: each file is one input, as libFuzzer's
# "fuzz_<name> -runs=0 test/fuzz/corpus/<name>" does.  The replay binaries
# are gcc builds of the target with test/fuzz/replay.c as their main(), on
# the sanitized objects of make unit-san: compiling every layer again with
# clang's -fsanitize=fuzzer takes minutes on two cores, this takes seconds.
FUZZ_TARGETS = $(sort $(patsubst test/fuzz/fuzz_%.c,%,$(wildcard test/fuzz/fuzz_*.c)))

test/fuzz/build/replay_%: test/fuzz/fuzz_%.c test/fuzz/replay.c $$(call san_objs,$$(call fuzz_layer,$$*)) $(HEADERS)
	@mkdir -p $(dir $@)
	$(CC_PLAIN) $(SAN_CFLAGS) -o $@ $< test/fuzz/replay.c $(call san_objs,$(call fuzz_layer,$*)) \
	    $(LIBS_EXTERNAL) -lm

.PHONY: fuzz-replay
fuzz-replay: $(addprefix fuzz-replay-,$(FUZZ_TARGETS))
fuzz-replay-%: test/fuzz/build/replay_%
	@echo "== $< test/fuzz/corpus/$* (ASan, UBSan)"; $(SAN_ENV) $< test/fuzz/corpus/$*

# The inflater's flags, for the benches that build src/iceberg themselves.
.PHONY: print-inflate-cflags print-inflate-libs
print-inflate-cflags:
	@echo '$(INFLATE_CFLAGS)'
print-inflate-libs:
	@echo '$(INFLATE_LIBS)'

# ---------------------------------------------------------------------------
# Whole-project entry points.

.PHONY: test soak check-fast demo demo-stop check-standalone check-format pgindent install-deps
# Debian packages and the test world's npm packages, libduckdb among them
# (scripts/install-deps.sh; make test runs it first).
install-deps:
	bash scripts/install-deps.sh

test:
	bash test/run-tests.sh

# the randomized data-safety campaign (test/soak.sh, test/README.md):
# SOAK_HISTORIES histories numbered from SOAK_SEED, on an installed build
SOAK_HISTORIES ?= 200
SOAK_SEED ?= 1
soak:
	SOAK_HISTORIES=$(SOAK_HISTORIES) SOAK_SEED=$(SOAK_SEED) bash test/soak.sh

check-fast:
	bash scripts/check-fast.sh

check-standalone:
	bash scripts/check-standalone.sh

check-format:
	bash scripts/check-format.sh

pgindent:
	bash scripts/pgindent.sh

demo:
	bash scripts/demo.sh start

demo-stop:
	bash scripts/demo.sh stop
