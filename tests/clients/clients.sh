#!/bin/bash
# clients.sh - real clients written by other people (curl, Python, Node.js)
# under the shim: each must report its own timeout error at its own
# configured time. usage: clients.sh LIBFAULTNET [PRELOAD_FIRST]
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib.sh"

lib=$1
preload="${2:+$2:}$lib"
conf="$here/clients.conf"
under() { FAULTNET_CONFIG="$conf" LD_PRELOAD="$preload" "$@"; }
trap cleanup_servers EXIT

# A real server where the blackhole is: without the shim every call succeeds.
http_server 127.66.0.1 8080 || exit 1

echo "real clients (${lib})"
run curl -s -o /dev/null -w '%{http_code}' http://127.66.0.1:8080/
check "curl without the shim reaches the server" [ "$out" = 200 ]

# curl hangs in setlocale at start-up when only libasan is preloaded, with
# no faultnet at all; under the sanitizer run it is skipped, and says so.
curl_ok=1
if [ $# -ge 2 ] && ! timeout 5 env LD_PRELOAD="$2" curl --version >/dev/null 2>&1; then
	curl_ok=0
	echo "  skip - curl: hangs with $2 preloaded even without faultnet"
	echo skip >>"$FN_COUNTS"
fi
[ $curl_ok = 1 ] && {
run under curl -sS -o /dev/null --connect-timeout 2 http://127.66.0.1:8080/
check "curl --connect-timeout 2 vs blackhole: exit 28" [ "$rc" = 28 ]
check "curl vs blackhole: its own message" contains "$err" "Failed to connect to 127.66.0.1 port 8080"
check "curl vs blackhole: gives up at ~2 s ($ms ms)" between 1800 6000 "$ms"

run under curl -sS -o /dev/null --max-time 2 http://127.67.0.1:9000/
check "curl --max-time 2 vs stall: exit 28" [ "$rc" = 28 ]
check "curl vs stall: connected, then no byte" contains "$err" "with 0 bytes received"
check "curl vs stall: gives up at ~2 s ($ms ms)" between 1800 6000 "$ms"
}

py=/usr/bin/python3
for mode in socket asyncio; do
	run under $py "$here/py_client.py" $mode 127.66.0.1 8080 2
	set -- $out
	check "python $mode connect vs blackhole: TimeoutError ($out)" [ "${2:-}" = TimeoutError ]
	check "python $mode connect vs blackhole: ~2 s" between 1800 6000 "${3:-0}"
	run under $py "$here/py_client.py" $mode-read 127.67.0.1 9000 2
	set -- $out
	check "python $mode read vs stall: TimeoutError ($out)" [ "${2:-}" = TimeoutError ]
	check "python $mode read vs stall: ~2 s" between 1800 6000 "${3:-0}"
done
run $py "$here/py_client.py" socket 127.66.0.1 8080 2
check "python without the shim connects ($out)" contains "$out" "RESULT ok"

run under node "$here/node_client.js" connect 127.66.0.1 8080 2000
set -- $out
check "node net.connect vs blackhole: timeout before connect ($out)" [ "${2:-}" = connect-timeout ]
check "node net.connect vs blackhole: ~2 s" between 1800 6000 "${3:-0}"
run under node "$here/node_client.js" read 127.67.0.1 9000 2000
set -- $out
check "node net vs stall: connects, then read timeout ($out)" [ "${2:-}" = read-timeout ]
check "node net vs stall: ~2 s" between 1800 6000 "${3:-0}"

[ "$failed" = 0 ]
