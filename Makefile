# faultnet build. `make` builds build/libfaultnet.so and build/faultctl;
# `make test` runs every test; `make demo` shows a fault on a real client.
# `make check` is the fast day-to-day subset; `make unit`, `make integration`,
# `make clients`, `make sanitize`, `make check-exports` run one part each.
# SAN=1 builds with AddressSanitizer and UBSan into build/asan, TSAN=1 with
# ThreadSanitizer into build/tsan. Packages are installed only by `make deps`
# (scripts/deps.sh), which the test and demo targets run first.

CC ?= gcc
SAN ?=
TSAN ?=
BUILD ?= $(if $(SAN),build/asan,$(if $(TSAN),build/tsan,build))
PREFIX ?= /usr/local

CFLAGS_BASE := -std=gnu11 -D_GNU_SOURCE -Wall -Wextra -Werror -O2 -g -fPIC -I.
SANOPTS := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
SANFLAGS := $(if $(SAN),$(SANOPTS),$(if $(TSAN),-fsanitize=thread))
# Link-time optimisation folds each exported hook and its internal function
# into one: the unmatched path is then a bounds check, a load and a branch.
# (clang's LTO needs the gold plugin, which Debian ships separately.)
IS_CLANG := $(findstring clang,$(CC))
LTO := $(if $(IS_CLANG),,-flto=auto)
AR := $(if $(IS_CLANG),ar,gcc-ar)
ALL_CFLAGS = $(CFLAGS_BASE) -I$(BUILD)/gen $(LTO) $(SANFLAGS) $(CFLAGS)

# ---- sources: each named once, by room -----------------------------------
# core/ is the policy model every program links (as a static library); the
# shim's rooms sit on it, top to bottom (see docs/ARCHITECTURE.md).
room = $(wildcard $(1)/*.c)
CORE_SRC := $(call room,core)
PRELOAD_ROOMS := preload preload/intercept preload/control preload/relay preload/h2 preload/sink preload/stats preload/dns preload/fd preload/tls \
	preload/base
PRELOAD_SRC := $(foreach r,$(PRELOAD_ROOMS),$(call room,$(r)))
CTL_SRC := $(foreach r,ctl ctl/scenario ctl/state,$(call room,$(r)))
HEADERS := $(wildcard core/*.h preload/*/*.h ctl/*.h ctl/*/*.h)
# bpf/'s headers are read by faultctl's objects (and the unit tests) only: a
# change there rebuilds neither the shim nor its tests' programs.
BPF_HEADERS := $(wildcard bpf/*.h)

# The kernel-side backend (bpf/): its programs are built with clang
# (-target bpf) and bpftool's skeleton; faultctl loads libbpf when a run uses the
# backend (bpf/lbpf.h), so no other verb pays for it at start. Without
# libbpf-dev, bpftool or clang, faultctl is built without it and says so.
BPFTOOL := $(or $(shell command -v bpftool 2>/dev/null),$(wildcard /usr/sbin/bpftool))
HAVE_BPF := $(if $(and $(BPFTOOL),$(wildcard /usr/include/bpf/libbpf.h),$(shell command -v clang 2>/dev/null)),1)
MULTIARCH := $(shell gcc -print-multiarch 2>/dev/null)
BPF_SRC := bpf/compile.c $(if $(HAVE_BPF),bpf/backend.c bpf/lbpf.c bpf/cgroup.c bpf/control.c bpf/endpoints.c bpf/events.c bpf/httppump.c bpf/maps.c bpf/pump.c bpf/relay.c bpf/slots.c)
BPF_LIBS :=
obj = $(patsubst %.c,$(BUILD)/obj/%.o,$(1))

CORE_LIB := $(BUILD)/libfaultnet-core.a
FUZZERS := build/fuzz/fuzz_config build/fuzz/fuzz_rule build/fuzz/fuzz_protocol

.PHONY: all deps test-deps install man deb demo test test-progs check unit integration clients sanitize \
	check-exports conformance stress bench bench-progs fuzz fresh-check clean format depcheck \
	bundle
all: $(BUILD)/libfaultnet.so $(BUILD)/faultctl $(BUILD)/faultnet-probe $(if $(HAVE_BPF),$(BUILD)/faultnet-pump)

# Installs the Debian packages the build and the tests need when missing.
deps:
	@scripts/deps.sh test

# Says which packages are missing (and that `make deps` installs them)
# instead of failing on a missing header; installs nothing.
depcheck:
	@scripts/deps.sh --check build

$(BUILD)/obj/%.o: %.c $(HEADERS) | depcheck
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -fvisibility=hidden -c -o $@ $<

# The hooks' signatures, trampolines and export map, made from their one
# declaration list (preload/hooks.list) into the build directory, so that
# nothing generated is committed and nothing can drift from the list.
HOOKS_GEN := $(BUILD)/gen/hooks.gen.h
%/gen/hooks.gen.h: preload/hooks.list scripts/hooks.awk
	@mkdir -p $(dir $@)
	awk -v out=header -f scripts/hooks.awk $< >$@.tmp && mv $@.tmp $@
%/gen/exports.map: preload/hooks.list scripts/hooks.awk
	@mkdir -p $(dir $@)
	awk -v out=map -f scripts/hooks.awk $< >$@.tmp && mv $@.tmp $@
$(call obj,$(PRELOAD_SRC)): $(HOOKS_GEN)

$(CORE_LIB): $(call obj,$(CORE_SRC))
	@rm -f $@
	$(AR) rcs $@ $^

# Bound lazily (no -z now): of the ~140 libc functions the shim imports a
# start binds only the few its constructor calls, not all of them (about 95k
# instructions, a third of what the shim added to a start of true). The
# hooks' pass-through paths bind nothing after the constructor (it_hardening:
# lazy binding), so no async-signal-safe call of the app meets ld.so's resolver
# on them in a handler or a vfork child.
$(BUILD)/libfaultnet.so: $(call obj,$(PRELOAD_SRC)) $(CORE_LIB) $(BUILD)/gen/exports.map preload/startdata.ld
	$(CC) $(ALL_CFLAGS) -shared -o $@ $(call obj,$(PRELOAD_SRC)) $(CORE_LIB) \
		-Wl,--version-script=$(BUILD)/gen/exports.map -Wl,-T,preload/startdata.ld -Wl,--no-undefined-version -Wl,-z,defs -Wl,-O1 -ldl -lpthread

$(call obj,$(CTL_SRC) $(BPF_SRC)): $(BPF_HEADERS)
# faultctl run makes the run's CA before the command starts (ctl/cavars.c),
# with the shim's own code for it: preload/tls's CA, on libc's trampolines.
CTL_TLS := $(call obj,preload/tls/ca.c preload/tls/cert.c preload/tls/ossl.c preload/base/libc.c preload/base/elfsym.c)
$(BUILD)/faultctl: $(call obj,$(CTL_SRC) $(BPF_SRC)) $(CTL_TLS) $(CORE_LIB)
	$(if $(HAVE_BPF),,@echo "faultnet: libbpf-dev, bpftool or clang missing: faultctl is built without the kernel-side backend (--backend=bpf)")
	$(CC) $(ALL_CFLAGS) -o $@ $^ -ldl -lresolv $(BPF_LIBS)

# The BPF programs, and the skeleton that embeds them in faultctl.
$(BUILD)/bpf/faultnet.bpf.o: bpf/faultnet.bpf.c bpf/shared.h
	@mkdir -p $(dir $@)
	clang -O2 -g -target bpf -I. -I/usr/include/$(MULTIARCH) -Wall -Werror -c -o $@ $<
$(BUILD)/bpf/faultnet.skel.h: $(BUILD)/bpf/faultnet.bpf.o
	$(BPFTOOL) gen skeleton $< name faultnet_bpf >$@.tmp && mv $@.tmp $@
$(BUILD)/obj/bpf/backend.o: $(BUILD)/bpf/faultnet.skel.h
$(BUILD)/obj/bpf/backend.o: CFLAGS += -I$(BUILD)
$(BUILD)/obj/ctl/run.o: CFLAGS += $(if $(HAVE_BPF),-DFAULTNET_BPF)
# run.o is rebuilt when the backend comes or goes (make demo may build
# before make test installs libbpf-dev): the stamp's name says which.
BPF_STAMP := $(BUILD)/.bpf-$(if $(HAVE_BPF),on,off)
$(BPF_STAMP):
	@mkdir -p $(BUILD) && rm -f $(BUILD)/.bpf-on $(BUILD)/.bpf-off && touch $@
$(BUILD)/obj/ctl/run.o: $(BPF_STAMP)
# faultctl --version: the package's version, from debian/changelog.
FN_VERSION := $(shell sed -n '1s/^[^(]*(\([^)]*\)).*/\1/p' debian/changelog)
$(BUILD)/obj/ctl/faultctl.o: debian/changelog
$(BUILD)/obj/ctl/faultctl.o: CFLAGS += -DFN_VERSION='"$(FN_VERSION)"'

# A scenario's url probes: a program of its own, so that it can run under
# the shim (faultctl keeps the shim idle in itself).
$(BUILD)/faultnet-probe: $(call obj,ctl/probe/probe.c)
	$(CC) $(ALL_CFLAGS) -o $@ $^

# The kernel-side backend's HTTP pump (bpf/pumpd.c): a program of its own,
# run under the shim, whose connects meet the shim's HTTP engine.
$(BUILD)/faultnet-pump: $(call obj,bpf/pumpd.c)
	$(CC) $(ALL_CFLAGS) -o $@ $^ -lpthread

# The self-contained bundle for containers: the shim and every library it
# loads at run time, in $(BUILD)/bundle, mounted read-only into an image by
# faultctl docker run and compose (scripts/bundle.sh, ctl/container.c).
bundle: $(BUILD)/libfaultnet.so
	@command -v patchelf >/dev/null 2>&1 || scripts/deps.sh test
	scripts/bundle.sh $(BUILD)

# Manual pages, from one scdoc source each (docs/man).
MAN_PAGES := $(patsubst docs/man/%.scd,$(BUILD)/man/%,$(wildcard docs/man/*.scd))
$(BUILD)/man/%: docs/man/%.scd
	@mkdir -p $(dir $@)
	scdoc <$< >$@
man: $(MAN_PAGES)

install: all man
	install -d $(DESTDIR)$(PREFIX)/lib $(DESTDIR)$(PREFIX)/bin
	for p in $(MAN_PAGES); do s=$${p##*.}; install -d $(DESTDIR)$(PREFIX)/share/man/man$$s; \
		install -m 0644 $$p $(DESTDIR)$(PREFIX)/share/man/man$$s/; done
	install -d $(DESTDIR)$(PREFIX)/share/bash-completion/completions \
		$(DESTDIR)$(PREFIX)/share/zsh/vendor-completions
	install -m 0644 scripts/completion/faultctl.bash \
		$(DESTDIR)$(PREFIX)/share/bash-completion/completions/faultctl
	install -m 0644 scripts/completion/_faultctl $(DESTDIR)$(PREFIX)/share/zsh/vendor-completions/
	install -m 0644 $(BUILD)/libfaultnet.so $(DESTDIR)$(PREFIX)/lib/libfaultnet.so
	install -m 0755 $(BUILD)/faultctl $(DESTDIR)$(PREFIX)/bin/faultctl
	install -m 0755 $(BUILD)/faultnet-probe $(DESTDIR)$(PREFIX)/bin/faultnet-probe
	# The kernel-side backend's HTTP pump: faultctl's helper, not a command.
	if [ -f $(BUILD)/faultnet-pump ]; then install -d $(DESTDIR)$(PREFIX)/lib/faultnet && \
		install -m 0755 $(BUILD)/faultnet-pump $(DESTDIR)$(PREFIX)/lib/faultnet/faultnet-pump; fi
	install -d $(DESTDIR)$(PREFIX)/share/faultnet/policies
	install -m 0644 policies/*.conf $(DESTDIR)$(PREFIX)/share/faultnet/policies/
	# The container bundle, when made (make bundle): faultctl docker finds it there.
	if [ -f $(BUILD)/bundle/faultnet-bundle.txt ]; then install -d $(DESTDIR)$(PREFIX)/lib/faultnet/bundle && \
		install -m 0644 $(BUILD)/bundle/* $(DESTDIR)$(PREFIX)/lib/faultnet/bundle/; fi

# A Debian package from the committed tree (git archive), built apart from
# the working tree: build/deb/faultnet_VERSION_amd64.deb.
deb:
	@scripts/deps.sh deb
	rm -rf build/deb && mkdir -p build/deb/src
	git archive HEAD | tar -x -C build/deb/src
	cd build/deb/src && dpkg-buildpackage -b -us -uc
	ls build/deb/*.deb

# ---- test programs -------------------------------------------------------
# The unit tests link core/, the relay's pure shaping functions, the
# policy's reclamation and the kernel-side backend's policy compiler, and
# the stats room's request and HTTP/2 counting (test_h2sent.c stands in for
# the rest of the room), the resolved-name memory (test_hostidx.c) and the
# per-name counts (test_lookups.c) and faultctl's table of file locks
# (test_locktab.c), and the start's reading of symbol tables (test_elfsym.c).
UNIT_LINK := $(CORE_LIB) $(call obj,preload/relay/shape.c preload/base/policy.c bpf/compile.c \
	preload/stats/requests.c preload/stats/h2sent.c preload/dns/names.c preload/base/signals.c \
	preload/stats/lookups.c ctl/state/locktab.c preload/base/elfsym.c)
$(BUILD)/tests/unit: $(wildcard tests/unit/*.c tests/unit/*.h) $(UNIT_LINK) $(HEADERS) $(BPF_HEADERS) \
		preload/stats/reqlog.c
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -o $@ $(wildcard tests/unit/*.c) $(UNIT_LINK) -ldl -lresolv -lcunit -lpthread

# preload/tls on its own (the run's CA, leaves, the ClientHello): it calls
# libc through preload/base's trampolines, so it links libc.o too.
TLS_LINK := $(call obj,$(call room,preload/tls) preload/base/libc.c preload/base/elfsym.c) $(CORE_LIB)
$(BUILD)/tests/tls_tool: tests/tls/tls_tool.c $(TLS_LINK) $(HEADERS)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -o $@ $< $(TLS_LINK) -ldl -lresolv -lpthread

$(BUILD)/tests/hammer: tests/hardening/hammer.c tests/faults/testutil.h
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -o $@ $< -lpthread

# it_catalogue_stream preloads it in a child of its own (a fork test).
$(BUILD)/tests/forkprobe.so: tests/faults/forkprobe.c
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -shared -o $@ $< -ldl

# hostile_app.py test_19 preloads it beside the shim (a thread's fd race).
$(BUILD)/tests/fdracer.so: tests/hostile/fdracer.c
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -shared -o $@ $< -ldl -lpthread

$(BUILD)/tests/%: tests/faults/%.c tests/faults/*.h
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -o $@ $< -lcunit -lpthread

$(BUILD)/tests/%: tests/hardening/%.c tests/faults/*.h
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -o $@ $< -lcunit -lpthread

# it_hostile_app's own time() stands in for libc's in the shim (i38.19).
$(BUILD)/tests/it_hostile_app: CFLAGS += -Wl,--export-dynamic-symbol=time
$(BUILD)/tests/%: tests/hostile/%.c tests/faults/*.h
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -o $@ $< -lcunit -lpthread

IT_NAMES := $(basename $(notdir $(wildcard tests/faults/it_*.c tests/hardening/it_*.c tests/hostile/it_*.c)))
# hostile_app.py i42.bias preloads both after the shim: linked at one
# fixed address, the second is loaded below it.
BIAS_LIBS := $(BUILD)/tests/libbias_a.so $(BUILD)/tests/libbias_b.so
$(BIAS_LIBS): tests/hostile/biaslib.c
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -shared -o $@ $< -Wl,-Ttext-segment=0x7ffe00000000

# layout.sh runs them under the shim: the pages of the shim's .bss a start
# touched, and those of its code a start mapped.
$(BUILD)/tests/bsspages: tests/layout/bsspages.c tests/layout/shimseg.h
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -o $@ $<
$(BUILD)/tests/codepages: tests/layout/codepages.c tests/layout/shimseg.h
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -o $@ $<

IT_PROGS := $(IT_NAMES:%=$(BUILD)/tests/%) $(BUILD)/tests/hammer $(BUILD)/tests/forkprobe.so $(BUILD)/tests/fdracer.so \
	$(BIAS_LIBS) $(BUILD)/tests/bsspages $(BUILD)/tests/codepages
test-progs: all $(BUILD)/tests/unit $(BUILD)/tests/tls_tool $(IT_PROGS) $(if $(SAN),,$(FUZZERS) man)

# ---- running the tests: tests/run.sh runs any set of sections ------------
# The conformance suite's clients: Debian packages, and npm packages pinned
# by tests/conformance/package-lock.json.
CONF_STAMP := build/.deps-conformance
$(CONF_STAMP): scripts/deps.sh tests/conformance/package-lock.json tests/conformance/node20/package-lock.json
	@scripts/deps.sh conformance
	cd tests/conformance && npm ci --no-audit --no-fund --loglevel=error
	@# The S3 SDK needs Node.js 20; Debian 12's is 18: a pinned one from npm.
	@major=$$(node --version 2>/dev/null | sed 's/^v//; s/\..*//'); \
	if [ "$${major:-0}" -lt 20 ]; then \
		echo "faultnet: Node.js $${major:-none} < 20: installing tests/conformance/node20"; \
		cd tests/conformance/node20 && npm ci --no-audit --no-fund --loglevel=error; \
	fi
	@mkdir -p build && touch $@

test-deps:
	@scripts/deps.sh test

test: test-deps $(CONF_STAMP)
	@$(MAKE) --no-print-directory test-progs bench-progs
	@$(MAKE) --no-print-directory SAN=1 test-progs
	@$(MAKE) --no-print-directory TSAN=1 all $(addprefix build/tsan/tests/,it_catalogue_stream it_catalogue_udp hammer)
	tests/run.sh all

# Under two minutes: the unit tests, the layout check, the fault tests under
# the shim and faultctl's checks, against the normal build only.
check: test-deps
	@$(MAKE) --no-print-directory test-progs
	tests/run.sh unit layout faults cli

unit: test-deps
	@$(MAKE) --no-print-directory $(BUILD)/tests/unit
	tests/run.sh unit

integration: test-deps
	@$(MAKE) --no-print-directory test-progs
	tests/run.sh faults cli control hardening policies http reach scenarios

clients: test-deps $(CONF_STAMP)
	@$(MAKE) --no-print-directory all
	tests/run.sh clients conformance

sanitize: test-deps
	@$(MAKE) --no-print-directory SAN=1 test-progs
	@$(MAKE) --no-print-directory TSAN=1 all $(addprefix build/tsan/tests/,it_catalogue_stream it_catalogue_udp hammer)
	tests/run.sh asan tsan

check-exports: test-deps
	@$(MAKE) --no-print-directory all
	tests/run.sh layout

# The README's two commands in a fresh Debian 12 root (what CI runs).
fresh-check:
	scripts/fresh-check.sh

conformance: all $(CONF_STAMP)
	/usr/bin/python3 -u tests/conformance/conformance.py $(BUILD) CONFORMANCE.md

# ---- stress: the long versions of the hardening tests ----------------------
STRESS_SECONDS ?= 600
stress: test-deps
	@$(MAKE) --no-print-directory test-progs
	tests/hardening/stress.sh build $(STRESS_SECONDS) 100000 10

# ---- benchmarks ----------------------------------------------------------
# make bench writes BENCHMARKS.md from one run (under 10 minutes); make test
# runs the same harness in seconds (--smoke) so that it cannot rot.
BENCH_PROGS := $(BUILD)/bench/loop $(BUILD)/bench/stream $(BUILD)/bench/lookup \
	$(BUILD)/bench/copyrelay $(BUILD)/bench/resolve $(BUILD)/bench/conc $(BUILD)/bench/member
$(BUILD)/bench/loop $(BUILD)/bench/stream $(BUILD)/bench/copyrelay $(BUILD)/bench/resolve \
		$(BUILD)/bench/conc $(BUILD)/bench/member: \
		$(BUILD)/bench/%: tests/bench/%.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_BASE) -o $@ $< -lpthread
# Without LTO, so that callgrind can count inside fn_policy_match.
$(BUILD)/bench/lookup: tests/bench/lookup.c $(CORE_SRC) $(HEADERS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_BASE) -o $@ $< $(CORE_SRC) -ldl -lresolv
# The TLS section's client: the system's OpenSSL, as real clients link it.
BENCH_PROGS += $(BUILD)/bench/tlsload
$(BUILD)/bench/tlsload: tests/bench/tlsload.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_BASE) -o $@ $< -lssl -lcrypto
bench-progs: all $(BENCH_PROGS)
bench:
	@scripts/deps.sh bench
	@$(MAKE) --no-print-directory bench-progs
	/usr/bin/python3 -u tests/bench/bench.py build BENCHMARKS.md

# ---- fuzzing (libFuzzer, clang) ------------------------------------------
FUZZ_FLAGS := -std=gnu11 -D_GNU_SOURCE -I. -Ibuild/gen -DFN_LCFG_RESIDENT -g -O1 -fsanitize=fuzzer,address,undefined
# The protocol fuzzer runs the control commands: the rooms below control.
FUZZ_CMDS := $(CORE_SRC) $(foreach r,preload/control preload/stats preload/fd preload/base,$(call room,$(r)))
FUZZ_SECONDS ?= 300
build/fuzz/fuzz_config build/fuzz/fuzz_rule: build/fuzz/fuzz_%: tests/fuzz/fuzz_%.c $(CORE_SRC) $(HEADERS)
	@mkdir -p $(dir $@)
	clang $(FUZZ_FLAGS) -o $@ $< $(CORE_SRC) -ldl -lresolv
build/fuzz/fuzz_protocol: tests/fuzz/fuzz_protocol.c $(FUZZ_CMDS) $(HEADERS) build/gen/hooks.gen.h
	@mkdir -p $(dir $@)
	clang $(FUZZ_FLAGS) -o $@ $< $(FUZZ_CMDS) -ldl -lresolv -lpthread

# Then the HTTP engine's generated conversations (tests/http/conv_gen.py)
# from a new seed each run (printed; CONV_SEED=N replays one), with a
# larger budget than make test's http section.
CONV_SEED ?= $(shell date +%s)
CONV_COUNT ?= 600
CONV_MIB ?= 4096
fuzz: test-deps $(FUZZERS) $(BUILD)/libfaultnet.so
	tests/fuzz/run.sh $(FUZZ_SECONDS)
	/usr/bin/python3 -u tests/http/http_engine.py $(BUILD) --generated-only --seed $(CONV_SEED) \
		--count $(CONV_COUNT) --mib $(CONV_MIB) --seconds 3600

demo: deps
	@$(MAKE) --no-print-directory all
	scripts/demo.sh

format:
	clang-format -i core/*.[ch] preload/*.c preload/*/*.[ch] ctl/*.[ch] ctl/*/*.[ch] bpf/*.[ch] tests/*/*.c tests/*/*.h

clean:
	rm -rf build
