#!/bin/bash
# layout.sh - the layout rules of docs/ARCHITECTURE.md, counted as checks:
# only preload/hooks.c refers to a name the shim exports (nm -u on every other
# object), calls and includes go only downward between rooms (function
# pointers called upward are the declared ones), every source is in its
# room's list, ARCHITECTURE.md's rooms and calls blocks are what the check
# prints and its locks table names every lock of the code, the library
# exports what preload/hooks.list declares (and the man page lists it), and
# every source file opens with a comment saying what it is for, every
# unit test is named after the source it tests, and the Python test scripts
# share tests/checks.py's check() and its choice of tests by name.
# usage: layout.sh BUILD_DIR
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
. "$here/../lib.sh"
build=${1:-build}

out=$(/usr/bin/python3 "$here/check_layout.py" "$root/$build" 2>&1)
rc=$?
echo "$out" | sed 's/^/    /'
check "layout: no object but the hooks refers to an exported name; no upward call, include or undeclared upcall; every source in its room's list; ARCHITECTURE.md's rooms and calls blocks and locks table match the code" [ "$rc" = 0 ]

# The shim's dynamic symbol table holds the functions preload/hooks.list
# declares, every one of them and nothing else; libfaultnet(7) lists the same.
listed=$(sed 's/#.*//' "$root/preload/hooks.list" | awk -F'|' 'NF >= 4 {gsub(/[ \t]/, "", $1); print $1}' | sort)
dynsyms=$(nm -D --defined-only "$root/$build/libfaultnet.so" | awk '{print $3}' | grep -vx '_init\|_fini' | sort)
differ=$(comm -3 <(echo "$listed") <(echo "$dynsyms") | tr -d '\t' | tr '\n' ' ')
check "libfaultnet.so exports exactly the $(echo "$listed" | wc -l) functions hooks.list declares${differ:+ (differ: $differ)}" \
	[ -n "$listed" -a -z "$differ" ]
# The shim needs libc (and ld.so) only: libresolv, which only dnswire.c
# used, was mapped and relocated at every start of every process.
needed=$(readelf -d "$root/$build/libfaultnet.so" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | tr '\n' ' ')
check "libfaultnet.so needs libc and ld.so only (needs: $needed)" \
	[ -n "$needed" -a -z "$(echo $needed | tr ' ' '\n' | grep -v '^libc\.so\|^ld-linux')" ]
# A start asks dlsym for nothing: the trampolines hooks.list does not mark
# "first call" come from the loaded objects' symbol tables (preload/base/
# elfsym.c; test_elfsym.c checks that it answers each of them as dlsym
# would), the "first call" ones at their first call. What dlsym looks up
# while the constructor runs, as LD_DEBUG=bindings prints it, in a start of
# true with no policy. (The constructor's own first calls of libc, bound
# lazily, name the version the shim was linked against, [GLIBC_...]; a
# dlsym names none.)
rd=$(mktemp -d)
looked=$(env -u FAULTNET_CONFIG FAULTNET_RUNDIR="$rd" LD_DEBUG=bindings LD_PRELOAD="$root/$build/libfaultnet.so" /usr/bin/true 2>&1 |
	sed -n '/calling init: .*libfaultnet\.so/,/initialize program/p' |
	grep -v "' \[GLIBC_[0-9.]*\]\$" | sed -n "s/.*binding file [^ ]*libfaultnet\.so .*symbol \`\([^']*\)'.*/\1/p" | sort)
inits=$(env -u FAULTNET_CONFIG FAULTNET_RUNDIR="$rd" LD_DEBUG=bindings LD_PRELOAD="$root/$build/libfaultnet.so" /usr/bin/true 2>&1 |
	grep -c 'calling init: .*libfaultnet\.so')
check "a start asks dlsym for no function: its trampolines come from the symbol tables (looked up: $(echo "$looked" | grep -c .)${looked:+: $(echo $looked)})" \
	[ "$inits" = 1 -a -z "$looked" ]
# With LD_DYNAMIC_WEAK (or LD_AUDIT), whose rules the tables alone do not
# follow, dlsym answers: the trampolines hooks.list does not mark "first
# call", each looked up, and no other.
eager=$(sed 's/#.*//' "$root/preload/hooks.list" | awk -F'|' 'NF == 4 {gsub(/[ \t]/, "", $1); print $1}' | sort)
looked=$(env -u FAULTNET_CONFIG FAULTNET_RUNDIR="$rd" LD_DYNAMIC_WEAK=1 LD_DEBUG=bindings LD_PRELOAD="$root/$build/libfaultnet.so" /usr/bin/true 2>&1 |
	sed -n '/calling init: .*libfaultnet\.so/,/initialize program/p' |
	grep -v "' \[GLIBC_[0-9.]*\]\$" | sed -n "s/.*binding file [^ ]*libfaultnet\.so .*symbol \`\([^']*\)'.*/\1/p" | sort)
rm -rf "$rd"
differ=$(comm -3 <(echo "$eager") <(echo "$looked") | tr -d '\t' | tr '\n' ' ')
check "with LD_DYNAMIC_WEAK set, dlsym looks up the $(echo "$eager" | wc -l) trampolines hooks.list does not mark first call, and no other${differ:+ (differ: $differ)}" \
	[ -n "$looked" -a -z "$differ" ]
# The pages of the shim's .bss a start touches (tests/layout/bsspages.c,
# mincore): each is a page fault of every start. Without a policy, none;
# with one whose compiled copy the start finds by the file's identity, only
# core/startmem.c's block, where the copy is read. A variable the start
# writes belongs in fn_start_data (core/startdata.h), on a page the loader
# has touched already.
bss_owners() { # the .bss symbols on each page offset of stdin
	/usr/bin/python3 -c '
import sys
syms = []
for l in open(sys.argv[1]):
    p = l.split()
    if len(p) == 4 and p[2] in "bB":
        syms.append((int(p[0], 16), int(p[1], 16), p[3]))
for pg in sys.stdin.read().split():
    pg = int(pg, 16)
    print(hex(pg) + ":" + ",".join(sorted({n for s, z, n in syms if s < pg + 4096 and s + z > pg})))
' <(nm -S "$root/$build/libfaultnet.so")
}
rd=$(mktemp -d)
chmod 700 "$rd"
touched=$(env -u FAULTNET_CONFIG FAULTNET_RUNDIR="$rd" LD_PRELOAD="$root/$build/libfaultnet.so" "$root/$build/tests/bsspages" | bss_owners)
check "a start without a policy touches no page of the shim's .bss${touched:+ (touched: $(echo $touched))}" [ -z "$touched" ]
for i in $(seq 10); do echo "{ name = \"r$i\"; action = \"refuse\"; match = { to = \"127.100.0.$i/32\"; }; },"; done |
	sed '$s/,$//' | { echo 'rules = ('; cat; echo ');'; } >"$rd/p.conf"
sleep 2.1 # settled: the first start names the copy by the file's identity
FAULTNET_CONFIG="$rd/p.conf" FAULTNET_RUNDIR="$rd" LD_PRELOAD="$root/$build/libfaultnet.so" /usr/bin/true
touched=$(FAULTNET_CONFIG="$rd/p.conf" FAULTNET_RUNDIR="$rd" LD_PRELOAD="$root/$build/libfaultnet.so" "$root/$build/tests/bsspages" | bss_owners)
others=$(echo "$touched" | grep -v ':block\.\|:block$')
check "a start that finds its policy's copy by the file's identity touches no page of the shim's .bss but its memory block's ($(echo "$touched" | grep -c .) touched${others:+; others: $(echo $others)})" \
	[ -n "$touched" -a -z "$others" -a -n "$(ls "$rd"/policy-s-*.compiled 2>/dev/null)" ]
# The pages of the shim's code a start maps (tests/layout/codepages.c,
# /proc/self/pagemap): the first fault in the code maps its first 64 KiB,
# so a start whose functions lie there takes one fault for them. A
# function a start runs belongs in the constructor's file or in
# FN_START_TEXT (core/startdata.h), which the link puts there; which one
# it was, `perf record -e page-faults -d` names. One more start first, as
# the bench's starts do: the copy then has its name by the file's
# identity (made by a start after the file has settled, which maps more).
FAULTNET_CONFIG="$rd/p.conf" FAULTNET_RUNDIR="$rd" LD_PRELOAD="$root/$build/libfaultnet.so" /usr/bin/true
for try in 1 2 3 4 5; do # exit 3: loaded where a page table's end clips the first fault
	pages=$(FAULTNET_CONFIG="$rd/p.conf" FAULTNET_RUNDIR="$rd" LD_PRELOAD="$root/$build/libfaultnet.so" "$root/$build/tests/codepages")
	rc=$?
	[ "$rc" = 3 ] || break
done
first=$(echo "$pages" | head -1)
far=$(for pg in $pages; do [ $((0x$pg - 0x${first:-0})) -ge 65536 ] && echo "0x$pg"; done)
check "a start that finds its policy's copy by the file's identity runs code from 64 KiB of the shim's ($(echo "$pages" | grep -c .) pages mapped from 0x$first${far:+; $(echo "$far" | wc -l) beyond, from $(echo "$far" | head -1)}; codepages exit $rc)" \
	[ "$rc" = 0 -a -n "$pages" -a -z "$far" ]
# The libc functions a start calls (each first call binds it, and may
# fault in its page of code: a microsecond or two apiece): only these, in
# a start that finds its policy's copy by the file's identity and has a CA
# bundle of its own in NODE_EXTRA_CA_CERTS. String tests and compares are
# the shim's own (core/pathcat.h).
allowed="__errno_location __register_atfork dl_iterate_phdr memcpy secure_getenv strlen syscall"
bound=$(NODE_EXTRA_CA_CERTS=/etc/ssl/certs/ca-certificates.crt FAULTNET_CONFIG="$rd/p.conf" FAULTNET_RUNDIR="$rd" \
	LD_DEBUG=bindings LD_PRELOAD="$root/$build/libfaultnet.so" /usr/bin/true 2>&1 |
	sed -n '/calling init: .*libfaultnet\.so/,/initialize program/p' |
	sed -n "s/.*binding file [^ ]*libfaultnet\.so .* to [^ ]*libc\.so[^ ]* .*symbol \`\([^']*\)' \[GLIBC_[0-9.]*\]\$/\1/p" | sort -u)
extra=$(comm -13 <(echo "$allowed" | tr ' ' '\n' | sort) <(echo "$bound"))
check "a start calls no libc function but $(echo "$allowed" | wc -w) ($(echo $bound)${extra:+; beyond them: $(echo $extra)})" \
	[ -n "$bound" -a -z "$extra" ]
rm -rf "$rd"
manlist=$(sed -n '/^# INTERCEPTED/,/^# /{/^#/d;p}' "$root/docs/man/libfaultnet.7.scd" | sed 's/\\//g; s/\.$//' | tr ' ' '\n' |
	grep -v '^$' | sort)
differ=$(comm -3 <(echo "$listed") <(echo "$manlist") | tr -d '\t' | tr '\n' ' ')
check "libfaultnet(7)'s INTERCEPTED section names what hooks.list declares${differ:+ (differ: $differ)}" [ -z "$differ" ]

missing=""
for f in "$root"/core/*.[ch] "$root"/preload/*.c "$root"/preload/*/*.[ch] "$root"/ctl/*.[ch] "$root"/ctl/*/*.[ch] "$root"/bpf/*.[ch]; do
	head -c 2 "$f" | grep -q '^/\*' || missing="$missing ${f#"$root"/}"
done
check "every source opens with a comment saying what it is for${missing:+ (not:$missing)}" [ -z "$missing" ]
# A unit test is named after the source it tests: tests/unit/test_X.c for
# a source X.c of the tree (test_main.c, the runner, aside).
unnamed=""
for t in "$root"/tests/unit/test_*.c; do
	x=$(basename "$t" .c)
	x=${x#test_}
	[ "$x" = main ] && continue
	[ -n "$(find "$root/core" "$root/bpf" "$root/preload" "$root/ctl" -name "$x.c" -print -quit)" ] ||
		unnamed="$unnamed ${t#"$root"/}"
done
check "every unit test is named after the source it tests (tests/unit/test_X.c for X.c)${unnamed:+ (not:$unnamed)}" [ -z "$unnamed" ]
# A folder per section: tests/NAME holds the programs of section NAME, and
# every folder is a section's. Not folders of their own: asan, tsan and
# valgrind run other sections' programs against other builds, http_sdk
# shares tests/http's origin and clients, helpers are bindings/*/tests,
# h2fid (HTTP/2 fidelity) shares tests/h2's peers with h2 (gRPC and the
# engine's regressions), run as two sections side by side.
nofolder="" nosection=""
sections=$("$root/tests/run.sh" --list)
for s in $sections; do
	case $s in asan | tsan | valgrind | http_sdk | helpers | h2fid) continue ;; esac
	[ -d "$root/tests/$s" ] || nofolder="$nofolder $s"
done
for d in $(cd "$root" && git ls-files 'tests/*/*' | cut -d/ -f2 | sort -u); do
	case " $sections " in *" $d "*) ;; *) nosection="$nosection $d" ;; esac
done
check "every section has its folder in tests/${nofolder:+ (none for:$nofolder)}" [ -z "$nofolder" ]
check "every folder of tests/ is a section's${nosection:+ (not:$nosection)}" [ -z "$nosection" ]

# One check() for the Python test scripts (tests/checks.py): a script that
# counts checks uses that one, never one of its own, and picks its tests
# through it (checks.selected or chosen), so FN_CHECK runs one by name.
own="" nopick=""
for f in $(cd "$root" && git ls-files 'tests/*.py' 'tests/**/*.py'); do
	[ "$f" = tests/checks.py ] && continue
	grep -q '^ *def check(' "$root/$f" && own="$own $f"
	grep -q 'from checks import check' "$root/$f" && ! grep -q -e 'checks\.selected(' -e 'checks\.chosen(' -e 'checks")\.chosen(' "$root/$f" &&
		nopick="$nopick $f"
done
check "no Python test script has a check() of its own${own:+ (own:$own)}" [ -z "$own" ]
check "every Python test script picks its tests by name through checks.py${nopick:+ (not:$nopick)}" [ -z "$nopick" ]
[ "$failed" = 0 ]
