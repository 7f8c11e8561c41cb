#!/bin/bash
# demo.sh - faultnet in one minute: a real HTTP server on loopback, curl
# reaching it, then the same curl under a blackhole rule timing out at its
# own --connect-timeout, then succeeding again with the rule disabled.
# Every address is on loopback: 127.66.0.1 stands for a remote host.
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
ctl="$root/build/faultctl"
scripts_dir="$root/scripts"
"$scripts_dir/deps.sh" test >/dev/null || exit 1
tmp=$(mktemp -d)
trap 'kill $srv 2>/dev/null; rm -rf "$tmp"' EXIT

(cd "$tmp" && exec /usr/bin/python3 -m http.server 8080 --bind 127.66.0.1 >/dev/null 2>&1) &
srv=$!
for _ in $(seq 50); do curl -s -o /dev/null http://127.66.0.1:8080/ && break; sleep 0.1; done

say() { printf '\n\033[1m%s\033[0m\n' "$*"; }
attempt() {
	local t0=$(date +%s%3N)
	"$@" -sS -o /dev/null -w 'HTTP %{http_code}\n' --connect-timeout 3 http://127.66.0.1:8080/
	local rc=$?
	echo "curl exit $rc after $(($(date +%s%3N) - t0)) ms"
	return $rc
}

say "1. A server listens on 127.66.0.1:8080; curl reaches it:"
attempt curl

say "2. The NAT route is gone (policies/egress-blackhole.conf): SYNs vanish, curl gives up at its own 3 s connect timeout:"
cat "$root/policies/egress-blackhole.conf" | grep -v '^#'
attempt "$ctl" run --config "$root/policies/egress-blackhole.conf" -- curl
rc1=$?

say "3. The same rule, disabled (enabled = false): the route is back:"
sed 's/port = "80,443,8000-8999"; }; }/port = "80,443,8000-8999"; }; enabled = false; }/' \
	"$root/policies/egress-blackhole.conf" >"$tmp/restored.conf"
grep -v '^#' "$tmp/restored.conf"
attempt "$ctl" run --config "$tmp/restored.conf" -- curl
rc2=$?

[ $rc1 = 28 ] && [ $rc2 = 0 ] && say "demo ok: timeout under the fault, success without it" && exit 0
say "demo FAILED (exit $rc1 under the fault, $rc2 without)"
exit 1
