#!/bin/bash
# run.sh - runs each libFuzzer harness for SECONDS (make test: 30, make
# fuzz: 300), from the seed corpus in tests/fuzz/corpus, and reports the
# executions reached. A crash, leak or sanitizer report fails the check and
# leaves the input in build/fuzz/. usage: run.sh SECONDS
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
. "$root/tests/lib.sh"
secs=${1:-30}
echo "fuzzing, ${secs} s per harness"
for h in config rule protocol; do
	work="$root/build/fuzz/corpus-$h"
	mkdir -p "$work"
	log="$root/build/fuzz/$h.log"
	(cd "$root/build/fuzz" && ASAN_OPTIONS=detect_leaks=1 FAULTNET_RUNDIR="$root/build/fuzz" \
		LSAN_OPTIONS=suppressions="$root/tests/fuzz/lsan.supp" \
		./fuzz_$h -max_total_time="$secs" -max_len=4096 -print_final_stats=1 \
		"$work" "$root/tests/fuzz/corpus/$h" >"$log" 2>&1)
	rc=$?
	execs=$(grep -oE 'stat::number_of_executed_units: *[0-9]+' "$log" | grep -oE '[0-9]+$')
	check "fuzz_$h: ${execs:-?} executions in ${secs} s, no crash" [ "$rc" = 0 ]
	[ "$rc" = 0 ] || tail -30 "$log"
done
[ "$failed" = 0 ]
