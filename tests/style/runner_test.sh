#!/bin/bash
# runner_test.sh - tests/runner.sh, which runs every section and CUnit
# program of the suite, with stand-in programs: one that passes, one that
# hangs (having forked a child that would hang on after it), one that exits
# leaving a child running, one killed at once, and a section stopped at its
# limit while a program of it hangs. Each must cost what runner.sh says,
# and leave nothing running.
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
. "$root/tests/lib.sh"
. "$root/tests/runner.sh"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

summary='printf "  Test: stand-in ...passed\n              tests      1      1      1      0        0\n"'
printf '#!/bin/sh\n%s\n' "$summary" >"$tmp/passes"
printf '#!/bin/sh\nprintf "  Test: left out ...\\n  skip - no such thing herepassed\\n"\n%s\n' \
	"$summary" >"$tmp/skips"
printf '#!/bin/sh\necho "  Test: spins for ever ..."\nsleep 300 &\nsleep 300\n' >"$tmp/hangs"
printf '#!/bin/sh\nsleep 301 &\n%s\n' "$summary" >"$tmp/leaves"
printf '#!/bin/sh\necho "  Test: dies ..."\nkill -KILL $$\n' >"$tmp/killed"
printf '#!/bin/sh\necho "  Test: spins in a stopped section ..."\nsleep 302 &\nsleep 302\n' >"$tmp/stuck"
chmod +x "$tmp"/*

# Runs a command with counts of its own: sets out, counts, ms.
counted() {
	local t0
	: >"$tmp/counts"
	t0=$(now_ms)
	out=$(FN_COUNTS="$tmp/counts" "$@" 2>&1)
	ms=$(($(now_ms) - t0))
	counts=$(sort "$tmp/counts" | uniq -c | tr -s ' ' | tr '\n' ',')
}
stand_in() { counted env FN_PROG_LIMIT=2 bash -c '. "$0"; cunit env X=1 "$1"' \
	"$root/tests/runner.sh" "$tmp/$1"; }
# A process killed a moment ago may not have ended yet: up to 2 s.
gone() {
	for _ in $(seq 20); do
		pgrep -f "$1" >/dev/null || return 0
		sleep 0.1
	done
	return 1
}

stand_in passes
check "a program that passes: its one test counted, nothing else ($counts)" \
	holds '[ "$counts" = " 1 pass," ] && ! contains "$out" FAIL'
stand_in skips
check "a program one of whose tests skips: the reason on a line of its own, counted as a skip ($counts)" \
	holds '[ "$counts" = " 1 skip," ] && echo "$out" | grep -qx "  skip - no such thing here"'
stand_in hangs
check "a hung program: stopped at its limit, one failure naming it and its test ($ms ms, $counts)" \
	holds '[ "$ms" -lt 10000 ] && [ "$counts" = " 1 fail," ] && contains "$out" "hangs did not end within 2 s" && contains "$out" "spins for ever"'
check "...and the child it forked is gone with it" gone "sleep 300"
stand_in leaves
check "a program that leaves a child running: its test counted and one failure naming the child ($counts)" \
	holds '[ "$counts" = " 1 fail, 1 pass," ] && contains "$out" "left processes running, now killed:" && contains "$out" "sleep 301"'
check "...which is killed" gone "sleep 301"
stand_in killed
check "a program killed at once (SIGKILL, as by the OOM killer): not taken for one at its limit ($counts)" \
	holds '[ "$counts" = " 1 fail," ] && contains "$out" "killed did not finish (exit 137)" && ! contains "$out" "within"'

# A section stopped at its limit (2 s) while its program (limit 60 s) hangs.
counted env FN_SECTION_LIMIT=2 PER_BUILD= FN_PIPE=none STUCK="$tmp/stuck" bash -c \
	'. "$0"; s_stuck() { FN_PROG_LIMIT=60 cunit "$STUCK"; }; run_section stuck' \
	"$root/tests/runner.sh"
check "a section stopped at its limit: its hung program's group is ended with it ($ms ms, $counts)" \
	holds '[ "$ms" -lt 40000 ] && contains "$out" "section stuck did not end within 2 s" && contains "$out" "sleep 302"'
check "...nothing of it left running" gone "sleep 302"
[ "$failed" = 0 ]
