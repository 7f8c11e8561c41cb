#!/bin/bash
# stress.sh - hammer (32 threads of matched, relayed and unmatched traffic, a
# signal handler writing and sending) under the shim while faultctl flips
# its two rules (up to FLIPS times); then checks that no byte was lost or changed,
# no fd leaked, and nothing crashed or hung. With SAMPLE set (make stress)
# it also prints resident memory every SAMPLE seconds and checks that its
# floor (the least of a minute's samples) rises by at most 1 MiB from the
# third minute to the last (32 threads' malloc arenas and the relay's
# buffers reach their size in the first two).
# usage: stress.sh BUILD_DIR SECONDS FLIPS [SAMPLE] [PRELOAD_FIRST]
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib.sh"
build=$(cd "$1" && pwd)
seconds=$2 flips=$3 sample=${4:-0} first=${5:-}
rundir=$(mktemp -d)
out=$(mktemp)
trap 'rm -rf "$rundir" "$out"' EXIT
export FAULTNET_RUNDIR=$rundir

echo "stress: 32 threads, $flips flips, ${seconds} s ($build)"
# The preload goes on hammer itself, not on timeout: a sanitizer runtime
# must not see timeout's fork.
FAULTNET_CONFIG="$here/stress.conf" timeout $((seconds + 60)) \
	env LD_PRELOAD="${first:+$first:}$build/libfaultnet.so" "$build/tests/hammer" 32 "$seconds" "$sample" >"$out" &
hp=$!
for _ in $(seq 300); do grep -q '^ready' "$out" && break; sleep 0.1; done
pid=$(awk '/^ready/ {print $2}' "$out")
done_flips=0
ctl() { ${first:+env LD_PRELOAD=$first} "$build/faultctl" -p "$pid" "$@" >/dev/null 2>&1; }
while [ "$done_flips" -lt "$flips" ] && kill -0 $hp 2>/dev/null; do
	rule=flip-relay
	[ $((done_flips % 4)) -ge 2 ] && rule=flip-bh
	verb=enable
	[ $((done_flips % 2)) = 1 ] && verb=disable
	ctl "$verb" "$rule" && done_flips=$((done_flips + 1))
done
wait $hp
rc=$?
last=$(grep '^ops' "$out")
echo "  $last"
# Flips are asked for until FLIPS are done or the traffic stops: how many fit
# in the time is the machine's speed, so a quarter of them is enough to say
# they ran under traffic. Under a sanitizer each faultctl run starts the
# sanitizer's runtime first (80 ms alone on a 2-CPU machine, 200 ms beside
# 32 hammering threads: 100 to 225 of 1,000 in 20 s), and ten rounds of the
# four flips are enough there.
least=$((flips / 4))
[ -n "$first" ] && least=40
check "faultctl flipped the rules while traffic ran ($done_flips of $flips asked for; at least $least)" \
	[ "$done_flips" -ge "$least" ]
check "hammer finished: no lost or changed byte, no fd leaked, no hang (exit $rc)" [ "$rc" = 0 ]
if [ "$sample" != 0 ]; then
	grep '^rss' "$out" | awk '{printf "  rss at %4d s: %d KiB\n", $2, $3}'
	# A leak lifts the floor: the least resident memory of the last minute
	# against that of the third. Single samples are not compared: one taken
	# while the relay's buffers are in use reads up to 5 MiB above its
	# neighbours (here 8.6 MiB, then 13.5, then 8.6 again, on this tree and
	# on the one before), so max - min failed runs that leaked nothing.
	rise=$(awk '/^rss/ {t[NR] = $2; k[NR] = $3; if ($2 > end) end = $2}
		END {for (i in t) {
			if (t[i] >= 120 && t[i] < 180 && (e == "" || k[i] < e)) e = k[i]
			if (t[i] > end - 60 && (l == "" || k[i] < l)) l = k[i]}
		if (e != "" && l != "") print l - e}' "$out")
	check "resident memory's floor rises at most 1 MiB from the third minute to the last (${rise:-no samples} KiB)" \
		[ "${rise:-99999}" -le 1024 ]
fi
[ "$failed" = 0 ]
