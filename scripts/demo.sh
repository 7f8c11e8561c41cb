#!/bin/bash
# demo.sh - faultnet in one minute: a real HTTP server on loopback and a
# client asking it every half second under faultctl run; faultctl flips a
# blackhole on while it runs (each request then times out at curl's own
# --connect-timeout) and off again (requests succeed again). Every address
# is on loopback: 127.66.250.1 stands for a remote host behind a NAT.
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/deps.sh" test >/dev/null || exit 1
ctl="$root/build/faultctl"
tmp=$(mktemp -d)
export FAULTNET_RUNDIR="$tmp/run"
mkdir -m 700 "$FAULTNET_RUNDIR"
trap 'kill $srv 2>/dev/null; rm -rf "$tmp"' EXIT

(cd "$tmp" && exec /usr/bin/python3 -m http.server 8089 --bind 127.66.250.1 >/dev/null 2>&1) &
srv=$!
for _ in $(seq 50); do curl -s -o /dev/null http://127.66.250.1:8089/ && break; sleep 0.1; done

say() { printf '\033[1m%s\033[0m\n' "$*"; }

# The policy of policies/egress-blackhole.conf, switched off to begin with.
sed 's/port = "80,443,8000-8999"; }; }/port = "80,443,8000-8999"; }; enabled = false; }/' \
	"$root/policies/egress-blackhole.conf" >"$tmp/demo.conf"
say "policy (rule off for now):"
grep -v '^#' "$tmp/demo.conf"

say "client: a request every 0.5 s, curl --connect-timeout 2, in faultctl group 'demo'"
say "(faultctl run --stats sums what every process of the tree did when it ends)"
"$ctl" run -g demo --stats --config "$tmp/demo.conf" -- bash -c '
for i in $(seq 10); do
	t0=$(date +%s%3N)
	code=$(curl -s -o /dev/null -w "%{http_code}" --connect-timeout 2 http://127.66.250.1:8089/)
	echo "  request $i: HTTP $code, curl exit $? after $(($(date +%s%3N) - t0)) ms"
	sleep 0.5
done' | tee "$tmp/log" &
client=$!

sleep 2.2
say "\$ faultctl -g demo enable nat-lost      # the NAT route is gone"
"$ctl" -g demo enable nat-lost
sleep 5
say "\$ faultctl -g demo disable nat-lost     # the route is back"
"$ctl" -g demo disable nat-lost
wait $client

timeouts=$(grep -c 'curl exit 28' "$tmp/log")
oks=$(grep -c 'HTTP 200' "$tmp/log")
if [ "$timeouts" -ge 1 ] && [ "$oks" -ge 2 ] && tail -1 "$tmp/log" | grep -q 'HTTP 200'; then
	say "demo ok: $oks requests succeeded, $timeouts timed out at curl's own connect timeout while the rule was on"
	exit 0
fi
say "demo FAILED: expected successes, then timeouts, then successes"
exit 1
