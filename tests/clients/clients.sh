#!/bin/bash
# clients.sh - real clients written by other people (curl, Python, Node.js)
# under the shim: each must report its own timeout error at its own
# configured time. usage: clients.sh LIBFAULTNET [PRELOAD_FIRST]
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib.sh"

lib=$1
asan_first=${2:-}
preload="${2:+$2:}$lib"
conf="$here/clients.conf"
under() { FAULTNET_CONFIG="$conf" LD_PRELOAD="$preload" "$@"; }
trap cleanup_servers EXIT

# A real server where the blackhole is: without the shim every call succeeds.
http_server 127.66.0.1 8080 || exit 1
# Servers behind the catalogue's rules, with a 20000-byte and a 500-byte file.
www=$(mktemp -d)
head -c 20000 /dev/zero | tr '\0' x >"$www/big"
head -c 500 /dev/zero | tr '\0' y >"$www/small"
for i in 1 2 3 4 5 6; do http_server 127.78.0.$i 8080 "$www" || exit 1; done
trap 'cleanup_servers; rm -rf "$www"' EXIT

echo "real clients (${lib})"
run curl -s -o /dev/null -w '%{http_code}' http://127.66.0.1:8080/
check "curl without the shim reaches the server" [ "$out" = 200 ]

# curl and PHP hang or refuse to start when libasan is preloaded first,
# even without faultnet. Under the sanitizer build they run with libasan
# loaded as the shim's own dependency instead (the shim's code is still
# instrumented; heap checks are weaker there), and the output says so.
late() { ASAN_OPTIONS="${ASAN_OPTIONS:-}:verify_asan_link_order=0" FAULTNET_CONFIG="$conf" LD_PRELOAD="$lib" "$@"; }
curl_under=under
if [ -n "$asan_first" ] && ! timeout 5 env LD_PRELOAD="$asan_first" curl --version >/dev/null 2>&1; then
	curl_under=late
	echo "  note - curl hangs with $asan_first preloaded first: libasan comes in as the shim's dependency"
fi
{
run $curl_under curl -sS -o /dev/null --connect-timeout 2 http://127.66.0.1:8080/
check "curl --connect-timeout 2 vs blackhole: exit 28" [ "$rc" = 28 ]
check "curl vs blackhole: its own message" contains "$err" "Failed to connect to 127.66.0.1 port 8080"
check "curl vs blackhole: gives up at ~2 s ($ms ms)" between 1800 6000 "$ms"

run $curl_under curl -sS -o /dev/null --max-time 2 http://127.67.0.1:9000/
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

# The catalogue: refuse, delay, stall after 1000 bytes, drip, reset after
# 1000 bytes, each met by curl, Python and Node.js.
{
# The real refusal: the same request to an address where nothing listens
# (curl 7.88 says "Couldn't connect to server", not the errno's text).
run curl -sS -o /dev/null http://127.78.0.7:8080/big
real_err=$(echo "$err" | sed 's/127\.78\.0\.7/127.78.0.1/; s/after [0-9]* ms/after N ms/')
run $curl_under curl -sS -o /dev/null http://127.78.0.1:8080/big
err=$(echo "$err" | sed 's/after [0-9]* ms/after N ms/')
check "curl vs refuse: exit 7 at once ($ms ms), the real refusal's error ($err)" holds '[ "$rc" = 7 ] && [ "$err" = "$real_err" ] && between 0 1500 "$ms"'
run $curl_under curl -sS -o /dev/null -w '%{http_code} %{time_connect}' http://127.78.0.2:8080/small
ok=false
[ "${out%% *}" = 200 ] && awk -v t="${out#* }" 'BEGIN { exit !(t >= 0.7 && t < 5) }' && ok=true
check "curl vs delay 800 ms: 200, connected after ~0.8 s ($out)" $ok
run $curl_under curl -sS -o /dev/null --max-time 2 http://127.78.0.3:8080/big
check "curl vs stall after 1000 bytes: exit 28, part of the body" holds '[ "$rc" = 28 ] && contains "$err" "out of 20000 bytes received"'
run $curl_under curl -sS -o /dev/null -w '%{size_download}' http://127.78.0.4:8080/small
check "curl vs drip 100 B/100 ms: the whole body, slowly ($ms ms)" holds '[ "$out" = 500 ] && between 400 10000 "$ms"'
run $curl_under curl -sS -o /dev/null http://127.78.0.5:8080/big
check "curl vs reset after 1000 bytes: exit 56, reset by peer" holds '[ "$rc" = 56 ] && contains "$err" "Connection reset by peer"'
}
run under $py "$here/py_client.py" socket 127.78.0.1 8080 2
check "python vs refuse: ConnectionRefusedError ($out)" contains "$out" "RESULT ConnectionRefusedError"
run under $py "$here/py_client.py" socket 127.78.0.2 8080 5
set -- $out
ok=false
[ "${2:-}" = ok ] && between 700 5000 "${3:-0}" && ok=true
check "python vs delay 800 ms: connects after ~0.8 s ($out)" $ok
run under $py "$here/py_client.py" fetch 127.78.0.3 8080 1 /big
set -- $out
ok=false
[ "${2:-}" = TimeoutError ] && [ "${4:-}" = 1000 ] && ok=true
check "python vs stall after 1000 bytes: 1000 bytes then TimeoutError ($out)" $ok
run under $py "$here/py_client.py" fetch 127.78.0.4 8080 2 /small
set -- $out
ok=false
[ "${2:-}" = ok ] && [ "${5:-0}" -ge 5 ] && between 400 10000 "${3:-0}" && ok=true
check "python vs drip: everything, 100 bytes at a time ($out)" $ok
run under $py "$here/py_client.py" fetch 127.78.0.5 8080 2 /big
set -- $out
ok=false
[ "${2:-}" = ConnectionResetError ] && [ "${4:-}" = 1000 ] && ok=true
check "python vs reset after 1000 bytes: ConnectionResetError after 1000 ($out)" $ok
run under node "$here/node_client.js" connect 127.78.0.1 8080 2000
check "node vs refuse: ECONNREFUSED ($out)" contains "$out" "RESULT error:ECONNREFUSED"
run under node "$here/node_client.js" connect 127.78.0.2 8080 5000
set -- $out
ok=false
[ "${2:-}" = connect ] && between 700 5000 "${3:-0}" && ok=true
check "node vs delay 800 ms: connect event after ~0.8 s ($out)" $ok
run under node "$here/node_client.js" fetch 127.78.0.3 8080 1000 /big
set -- $out
ok=false
[ "${2:-}" = read-timeout ] && [ "${4:-}" = 1000 ] && ok=true
check "node vs stall after 1000 bytes: 1000 bytes then read timeout ($out)" $ok
run under node "$here/node_client.js" fetch 127.78.0.4 8080 2000 /small
set -- $out
ok=false
[ "${2:-}" = end ] && [ "${5:-0}" -ge 5 ] && ok=true
check "node vs drip: everything in small chunks ($out)" $ok
run under node "$here/node_client.js" fetch 127.78.0.5 8080 2000 /big
set -- $out
ok=false
[ "${2:-}" = error:ECONNRESET ] && [ "${4:-}" = 1000 ] && ok=true
check "node vs reset after 1000 bytes: ECONNRESET after 1000 ($out)" $ok

# PHP's curl extension is loaded with RTLD_DEEPBIND, which binds libcurl's
# socket calls straight to libc unless the shim loads it without the flag.
# Each fault is compared with the same client against the real outage,
# built in a private network namespace (tests/clients/outage.py): the same
# curl error, and a time within 25% (+ 300 ms) of the real one.
php_under() { $php_with php "$here/php_client.php" "$@"; }
php_with=under
if [ -n "$asan_first" ] && ! timeout 5 env LD_PRELOAD="$asan_first" php -r 'exit(0);' >/dev/null 2>&1; then
	php_with=late
	echo "  note - php refuses RTLD_DEEPBIND with $asan_first preloaded first: libasan comes in as the shim's dependency"
fi
for cell in "blackhole 127.66.0.1 8080 curl-28" "stall 127.67.0.1 9000 curl-28" \
	"refuse 127.78.0.1 8080 curl-7" "reset 127.78.0.6 8080 curl-56"; do
	set -- $cell
	run php_real "$1" "$2" "$3"
	real=$out
	run php_under "http://$2:$3/"
	set -- $cell $out
	real_err=$(echo "$real" | awk '{print $2}')
	real_ms=$(echo "$real" | awk '{print $3}')
	check "php curl vs $1: ${6:-nothing} in ${7:-?} ms; real outage: $real_err in $real_ms ms" \
		[ "${6:-}" = "$4" ] && [ "$real_err" = "$4" ] &&
		between $((real_ms * 3 / 4 - 300)) $((real_ms * 5 / 4 + 300)) "${7:-0}"
done

[ "$failed" = 0 ]
