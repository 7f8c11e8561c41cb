# cunit.sh - how tests/run.sh runs a CUnit program: under a time limit,
# its counts added to the run's, and what it left running found and
# killed. Sourced by run.sh, and by tests/style/cunit_test.sh, which
# checks it with stand-in programs. Needs FN_COUNTS.

# Those of the pids given that are still running, one per line (a zombie
# holds nothing; where pid 1 does not reap, an orphan that has ended stays
# one), and the same with their command lines, on one line.
live_pids() {
	local p st
	for p in $1; do
		st=$(cut -d')' -f2 "/proc/$p/stat" 2>/dev/null | cut -c2)
		[ -n "$st" ] && [ "$st" != Z ] && echo "$p"
	done
}
described() {
	local p
	for p in $1; do
		printf ' %s (%s)' "$p" "$(tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | cut -c1-80)"
	done
}

# Runs a CUnit program (its last argument; the ones before set its
# environment) and adds its test counts to the total. A program that has
# not ended within FN_PROG_LIMIT seconds (900; the longest, under a
# sanitizer, takes under a minute) is stopped with every process it forked
# (timeout makes its own process group and signals all of it): one failure
# naming the test it was in, and the rest of its section still runs, where
# a hang held the section until its own limit and took a core from the
# other lane all that time. What the program leaves running in that group
# once it has ended is killed and counted as a failure, as end_leftovers
# does for a section (which no longer sees that group: if the section's own
# limit stops it first, the group lives on until its program's limit).
cunit() {
	local log pidf tpid left
	log=$(mktemp)
	pidf=$(mktemp)
	sh -c 'echo $$ >"$0"; exec timeout -k 20 "$@"' "$pidf" "${FN_PROG_LIMIT:-900}" "$@" \
		>"$log" 2>&1
	local rc=$?
	tpid=$(cat "$pidf")
	rm -f "$pidf"
	grep -E '^\s+Test: .*(FAILED|passed)|^\s+[0-9]+\. |^Run Summary|^\s+(suites|tests|asserts) ' "$log"
	read -r _ _ ran ok bad _ < <(grep -E '^\s+tests ' "$log")
	left=$([ -n "$tpid" ] && live_pids "$(pgrep -g "$tpid")")
	if [ -n "$left" ]; then
		echo "  FAIL - ${*: -1} left processes running, now killed:$(described "$left")"
		kill -KILL -- "-$tpid" 2>/dev/null
		echo fail >>"$FN_COUNTS"
	fi
	if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
		echo "  FAIL - ${*: -1} did not end within ${FN_PROG_LIMIT:-900} s: stopped in:"
		tail -3 "$log"
		echo fail >>"$FN_COUNTS"
	elif [ -z "${ran:-}" ]; then
		echo "  FAIL - ${*: -1} did not finish (exit $rc):"
		tail -20 "$log"
		echo fail >>"$FN_COUNTS"
	else
		for _ in $(seq "$ok"); do echo pass >>"$FN_COUNTS"; done
		for _ in $(seq "$bad"); do echo fail >>"$FN_COUNTS"; done
		[ "$rc" = 0 ] || [ "$bad" != 0 ] || { echo "  FAIL - $1 exited $rc"; echo fail >>"$FN_COUNTS"; }
	fi
	rm -f "$log"
}
