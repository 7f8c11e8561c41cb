#!/bin/bash
# cunit_test.sh - tests/cunit.sh, the runner of every CUnit program of the
# suite, with stand-in programs: one that passes, one that hangs (and has
# forked a child that would hang on after it), one that exits leaving a
# child running. Each must cost what cunit.sh says, and leave nothing.
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
. "$root/tests/lib.sh"
. "$root/tests/cunit.sh"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

summary='printf "  Test: stand-in ...passed\n              tests      1      1      1      0        0\n"'
printf '#!/bin/sh\n%s\n' "$summary" >"$tmp/passes"
printf '#!/bin/sh\necho "  Test: spins for ever ..."\nsleep 300 &\nsleep 300\n' >"$tmp/hangs"
printf '#!/bin/sh\nsleep 301 &\n%s\n' "$summary" >"$tmp/leaves"
chmod +x "$tmp/passes" "$tmp/hangs" "$tmp/leaves"

# Runs cunit on a stand-in with counts of its own: sets out, counts, ms.
stand_in() {
	local real=$FN_COUNTS t0
	FN_COUNTS="$tmp/counts"
	: >"$FN_COUNTS"
	t0=$(now_ms)
	out=$(FN_PROG_LIMIT=2 cunit env X=1 "$tmp/$1")
	ms=$(($(now_ms) - t0))
	counts=$(sort "$FN_COUNTS" | uniq -c | tr -s ' ' | tr '\n' ',')
	FN_COUNTS=$real
}

stand_in passes
check "a program that passes: its one test counted, nothing else ($counts)" \
	holds '[ "$counts" = " 1 pass," ] && ! contains "$out" FAIL'
stand_in hangs
check "a hung program: stopped at its limit, one failure naming it and its test ($ms ms, $counts)" \
	holds '[ "$ms" -lt 10000 ] && [ "$counts" = " 1 fail," ] && contains "$out" "hangs did not end within 2 s" && contains "$out" "spins for ever"'
check "...and the child it forked is gone with it" holds '! pgrep -f "sleep 300" >/dev/null'
stand_in leaves
check "a program that leaves a child running: its test counted and one failure naming the child ($counts)" \
	holds '[ "$counts" = " 1 fail, 1 pass," ] && contains "$out" "left processes running, now killed:" && contains "$out" "sleep 301"'
check "...which is killed" holds '! pgrep -f "sleep 301" >/dev/null'
[ "$failed" = 0 ]
