#!/bin/bash
# run.sh - every test, twice: against the normal build and against the shim
# built with AddressSanitizer and UBSan. Prints one closing line,
# "N passed, N failed", counting CUnit tests and shell checks alike.
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root" || exit 1
export FN_COUNTS
FN_COUNTS=$(mktemp)
# A private run directory: control sockets and group journals of the tests
# never mix with the user's.
export FAULTNET_RUNDIR
FAULTNET_RUNDIR=$(mktemp -d)
trap 'rm -rf "$FN_COUNTS" "$FAULTNET_RUNDIR"' EXIT
asan=$(gcc -print-file-name=libasan.so)

# Runs a CUnit program and adds its test counts to the total.
cunit() {
	local log
	log=$(mktemp)
	"$@" >"$log" 2>&1
	local rc=$?
	grep -E '^\s+Test: .*(FAILED|passed)|^\s+[0-9]+\. |^Run Summary|^\s+(suites|tests|asserts) ' "$log"
	read -r _ _ ran ok bad _ < <(grep -E '^\s+tests ' "$log")
	if [ -z "${ran:-}" ]; then
		echo "  FAIL - $1 did not finish (exit $rc):"
		tail -20 "$log"
		echo fail >>"$FN_COUNTS"
	else
		for _ in $(seq "$ok"); do echo pass >>"$FN_COUNTS"; done
		for _ in $(seq "$bad"); do echo fail >>"$FN_COUNTS"; done
		[ "$rc" = 0 ] || [ "$bad" != 0 ] || { echo "  FAIL - $1 exited $rc"; echo fail >>"$FN_COUNTS"; }
	fi
	rm -f "$log"
}

variant() {
	local build=$1 first=$2 preload
	preload="${first:+$first:}$root/$build/libfaultnet.so"
	echo "=== $build: unit tests"
	cunit "$build/tests/unit"
	echo "=== $build: integration tests under the shim"
	cunit env FAULTNET_CONFIG="$root/tests/integration/it.conf" LD_PRELOAD="$preload" "$build/tests/it_faults"
	echo "=== $build: the fault catalogue under the shim"
	cunit env FAULTNET_CONFIG="$root/tests/integration/catalogue.conf" LD_PRELOAD="$preload" "$build/tests/it_catalogue"
	echo "=== $build: start-up and faultctl"
	tests/integration/cli.sh "$build" $first
	# Interpreters (the Python agents, the real clients) leak at exit by
	# design; leaks are checked on the project's own programs above.
	echo "=== $build: faultctl and live control"
	ASAN_OPTIONS=detect_leaks=0 /usr/bin/python3 -u tests/integration/control_test.py "$build" "$first"
	echo "=== $build: the shim never harms its host"
	cunit env FAULTNET_CONFIG="$root/tests/integration/hardening.conf" LD_PRELOAD="$preload" "$build/tests/it_hardening"
	tests/stress/stress.sh "$build" 20 1000 0 $first
	ASAN_OPTIONS=detect_leaks=0 /usr/bin/python3 -u tests/stress/procs.py "$build" "$first"
	echo "=== $build: the policies in policies/"
	ASAN_OPTIONS=detect_leaks=0 /usr/bin/python3 -u tests/policies/policy_test.py "$build" "$first"
	echo "=== $build: real clients"
	ASAN_OPTIONS=detect_leaks=0 tests/clients/clients.sh "$root/$build/libfaultnet.so" $first
}

export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
variant build ""
variant build/asan "$asan"

echo "=== ThreadSanitizer: the threaded tests against the shim built with -fsanitize=thread"
tsan=$(gcc -print-file-name=libtsan.so)
# die_after_fork=0: the shim starts a forked child's control thread at once,
# which TSan would otherwise refuse in a child of a threaded process.
export TSAN_OPTIONS="halt_on_error=0 report_signal_unsafe=0 exitcode=66 die_after_fork=0 suppressions=$root/tests/tsan.supp"
cunit env IT_QUICK=1 FAULTNET_CONFIG="$root/tests/integration/catalogue.conf" LD_PRELOAD="$tsan:$root/build/tsan/libfaultnet.so" build/tsan/tests/it_catalogue
tests/stress/stress.sh build/tsan 15 300 0 "$tsan"
unset TSAN_OPTIONS

echo "=== valgrind memcheck: the integration tests under the normal build"
vglog=$(mktemp -d)
for prog in it_faults it_catalogue; do
	conf=it.conf
	[ $prog = it_catalogue ] && conf=catalogue.conf
	cunit env FAULTNET_CONFIG="$root/tests/integration/$conf" LD_PRELOAD="$root/build/libfaultnet.so" \
		valgrind --log-file="$vglog/$prog.%p" build/tests/$prog
done
# Forked children that exec leave logs without a summary; any error shows
# as a non-zero summary or an error line.
if grep -q 'ERROR SUMMARY: [1-9]\|Invalid\|uninitialised' "$vglog"/*; then
	echo "  FAIL - valgrind found errors:"
	grep -h -A8 'ERROR SUMMARY: [1-9]\|Invalid\|uninitialised' "$vglog"/* | head -40
	echo fail >>"$FN_COUNTS"
else
	echo "  ok   - valgrind: no invalid access or uninitialised read in $(ls "$vglog" | wc -l) processes"
	echo pass >>"$FN_COUNTS"
fi
rm -rf "$vglog"

echo "=== conformance: real clients against each fault, and the stories"
ASAN_OPTIONS=detect_leaks=0 /usr/bin/python3 -u tests/conformance/conformance.py build CONFORMANCE.md

echo "=== make bench's harness, in seconds (--smoke)"
smoke=$(mktemp)
if /usr/bin/python3 -u tests/bench/bench.py build "$smoke" --smoke >"$smoke.log" 2>&1 &&
	[ "$(grep -c '^## ' "$smoke")" = 6 ]; then
	echo "  ok   - bench.py --smoke wrote all six sections"
	echo pass >>"$FN_COUNTS"
else
	echo "  FAIL - bench.py --smoke:"
	tail -20 "$smoke.log"
	echo fail >>"$FN_COUNTS"
fi
rm -f "$smoke" "$smoke.log"

echo "=== fuzzing: the config parser, the rule syntax, the control protocol"
tests/fuzz/run.sh 30

echo "=== source checks"
tests/style.sh

p=$(grep -c '^pass$' "$FN_COUNTS")
f=$(grep -c '^fail$' "$FN_COUNTS")
s=$(grep -c '^skip$' "$FN_COUNTS")
echo
echo "$p passed, $f failed, $s skipped"
[ "$f" = 0 ]
