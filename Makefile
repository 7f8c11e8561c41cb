# faultnet build. `make` builds build/libfaultnet.so and build/faultctl;
# `make test` runs every test; `make demo` shows a fault on a real client.
# SAN=1 builds with AddressSanitizer and UBSan into build/asan, TSAN=1 with
# ThreadSanitizer into build/tsan.

CC ?= gcc
SAN ?=
TSAN ?=
BUILD ?= $(if $(SAN),build/asan,$(if $(TSAN),build/tsan,build))
PREFIX ?= /usr/local

CFLAGS_BASE := -std=gnu11 -D_GNU_SOURCE -Wall -Wextra -Werror -O2 -g -fPIC
SANOPTS := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
SANFLAGS := $(if $(SAN),$(SANOPTS),$(if $(TSAN),-fsanitize=thread))
# Link-time optimisation folds each exported hook and its internal function
# into one: the unmatched path is then a bounds check, a load and a branch.
# (clang's LTO needs the gold plugin, which Debian ships separately.)
LTO := $(if $(findstring clang,$(CC)),,-flto=auto)
ALL_CFLAGS = $(CFLAGS_BASE) $(LTO) $(SANFLAGS) $(CFLAGS)

# The policy parser is shared by the shim, faultctl and the unit tests.
CORE := addr rules actions chance lcfg wideint config wire rundir
SHIM := $(CORE) libc fdtab sink relay relay_conn relay_pump reinject stats fault connect datagram tcpbytes fdlife control commands init hooks

CORE_OBJ := $(CORE:%=$(BUILD)/obj/%.o)
SHIM_OBJ := $(SHIM:%=$(BUILD)/obj/%.o)
HEADERS := $(wildcard preload/*.h)
DEPS_STAMP := build/.deps-build
FUZZERS := build/fuzz/fuzz_config build/fuzz/fuzz_rule build/fuzz/fuzz_protocol

.PHONY: all deps test-deps install demo test conformance stress bench bench-progs fuzz unit integration clients sanitize check-exports clang clean format
all: $(BUILD)/libfaultnet.so $(BUILD)/faultctl

# Installs the Debian packages the build needs when they are missing.
$(DEPS_STAMP): scripts/deps.sh
	@scripts/deps.sh build
	@mkdir -p build && touch $@
deps: $(DEPS_STAMP)

$(BUILD)/obj/%.o: preload/%.c $(HEADERS) | $(DEPS_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -fvisibility=hidden -c -o $@ $<

$(BUILD)/libfaultnet.so: $(SHIM_OBJ) preload/exports.map
	$(CC) $(ALL_CFLAGS) -shared -o $@ $(SHIM_OBJ) -Wl,--version-script=preload/exports.map -Wl,-z,now -ldl -lpthread

CTL_SRC := $(wildcard ctl/*.c)
$(BUILD)/faultctl: $(CTL_SRC) $(wildcard ctl/*.h) $(CORE_OBJ) $(HEADERS)
	$(CC) $(ALL_CFLAGS) -o $@ $(CTL_SRC) $(CORE_OBJ) -ldl

install: all
	install -d $(DESTDIR)$(PREFIX)/lib $(DESTDIR)$(PREFIX)/bin
	install -m 0644 $(BUILD)/libfaultnet.so $(DESTDIR)$(PREFIX)/lib/libfaultnet.so
	install -m 0755 $(BUILD)/faultctl $(DESTDIR)$(PREFIX)/bin/faultctl

# ---- tests ---------------------------------------------------------------
TEST_STAMP := build/.deps-test
$(TEST_STAMP): scripts/deps.sh
	@scripts/deps.sh test
	@mkdir -p build && touch $@
test-deps: $(TEST_STAMP)

$(BUILD)/tests/unit: tests/unit/*.c $(CORE_OBJ) $(HEADERS) | $(TEST_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -o $@ tests/unit/*.c $(CORE_OBJ) -ldl -lcunit

$(BUILD)/tests/hammer: tests/stress/hammer.c tests/integration/testutil.h | $(TEST_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -o $@ $< -lpthread

$(BUILD)/tests/%: tests/integration/%.c tests/integration/*.h | $(TEST_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -o $@ $< -lcunit -lpthread

IT_PROGS := $(BUILD)/tests/it_faults $(BUILD)/tests/it_catalogue $(BUILD)/tests/it_hardening $(BUILD)/tests/hammer $(if $(SAN),,$(FUZZERS))
test-progs: all $(BUILD)/tests/unit $(IT_PROGS)

# The conformance suite's clients: Debian packages, and npm packages pinned
# by tests/conformance/package-lock.json.
CONF_STAMP := build/.deps-conformance
$(CONF_STAMP): scripts/deps.sh tests/conformance/package-lock.json
	@scripts/deps.sh conformance
	cd tests/conformance && npm ci --no-audit --no-fund --loglevel=error
	@mkdir -p build && touch $@

conformance: all $(CONF_STAMP)
	/usr/bin/python3 -u tests/conformance/conformance.py $(BUILD) CONFORMANCE.md

test: test-deps $(CONF_STAMP)
	@$(MAKE) --no-print-directory test-progs bench-progs
	@$(MAKE) --no-print-directory SAN=1 test-progs
	@$(MAKE) --no-print-directory TSAN=1 all $(addprefix build/tsan/tests/,it_catalogue hammer)
	tests/run.sh

# ---- stress: the long versions of the hardening tests ----------------------
STRESS_SECONDS ?= 600
stress: test-deps
	@$(MAKE) --no-print-directory test-progs
	tests/stress/stress.sh build $(STRESS_SECONDS) 100000 10

# ---- benchmarks ----------------------------------------------------------
# make bench writes BENCHMARKS.md from one run (under 10 minutes); make test
# runs the same harness in seconds (--smoke) so that it cannot rot.
BENCH_STAMP := build/.deps-bench
$(BENCH_STAMP): scripts/deps.sh
	@scripts/deps.sh bench
	@mkdir -p build && touch $@
BENCH_PROGS := $(BUILD)/bench/loop $(BUILD)/bench/stream $(BUILD)/bench/lookup
$(BUILD)/bench/loop $(BUILD)/bench/stream: $(BUILD)/bench/%: tests/bench/%.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_BASE) -o $@ $< -lpthread
# Without LTO, so that callgrind can count inside fn_policy_match.
LOOKUP_SRC := preload/addr.c preload/rules.c preload/actions.c preload/chance.c preload/lcfg.c preload/wideint.c preload/config.c preload/wire.c
$(BUILD)/bench/lookup: tests/bench/lookup.c $(LOOKUP_SRC) $(HEADERS) | $(DEPS_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_BASE) -o $@ $< $(LOOKUP_SRC) -ldl
bench-progs: all $(BENCH_PROGS)
bench: $(BENCH_STAMP)
	@$(MAKE) --no-print-directory bench-progs
	/usr/bin/python3 -u tests/bench/bench.py build BENCHMARKS.md

# ---- fuzzing (libFuzzer, clang) ------------------------------------------
FUZZ_FLAGS := -std=gnu11 -D_GNU_SOURCE -DFN_LCFG_RESIDENT -g -O1 -fsanitize=fuzzer,address,undefined
FUZZ_PARSE := preload/addr.c preload/rules.c preload/actions.c preload/chance.c preload/lcfg.c preload/wideint.c preload/config.c preload/wire.c
FUZZ_CMDS := $(FUZZ_PARSE) preload/rundir.c preload/commands.c preload/stats.c preload/fdtab.c preload/libc.c
FUZZ_SECONDS ?= 300
build/fuzz/fuzz_config build/fuzz/fuzz_rule: build/fuzz/fuzz_%: tests/fuzz/fuzz_%.c $(FUZZ_PARSE) $(HEADERS) | $(TEST_STAMP)
	@mkdir -p $(dir $@)
	clang $(FUZZ_FLAGS) -o $@ $< $(FUZZ_PARSE) -ldl
build/fuzz/fuzz_protocol: tests/fuzz/fuzz_protocol.c $(FUZZ_CMDS) $(HEADERS) | $(TEST_STAMP)
	@mkdir -p $(dir $@)
	clang $(FUZZ_FLAGS) -o $@ $< $(FUZZ_CMDS) -ldl -lpthread

fuzz: $(FUZZERS)
	tests/fuzz/run.sh $(FUZZ_SECONDS)

demo: all
	scripts/demo.sh

format:
	clang-format -i preload/*.c preload/*.h ctl/*.c tests/*/*.c tests/*/*.h

clean:
	rm -rf build
