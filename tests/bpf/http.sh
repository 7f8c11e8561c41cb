#!/bin/bash
# http.sh - HTTP rules under the kernel-side backend (faultctl run
# --backend=bpf) on static Go programs, which the shim cannot reach: the
# relay hands a covered connection to faultnet-pump, whose shim runs the
# HTTP engine. A Go HTTP client meets `respond 503` over plain HTTP and over
# HTTPS (trusting a test CA through the user's SSL_CERT_FILE, with no flag),
# gets 200 without the rule, and is still refused by a server Go would not
# trust; Debian's grpc-go meets grpc_status 14 for the first two streams
# (a retry policy makes the call succeed, the server sees it once) and
# grpc_after_headers (fails at once); dns rules are refused by name. Needs
# root (CAP_BPF, CAP_NET_ADMIN) and cgroup v2; everything runs in a
# private network namespace.
# usage: http.sh BUILD_DIR
set -u
here=$(cd "$(dirname "$0")" && pwd)
if [ -z "${FN_BPF_NETNS:-}" ]; then # its own loopback: nothing leaves it
	FN_BPF_NETNS=1 exec unshare -n "$0" "$@"
fi
. "$here/../lib.sh"
build=$(cd "$1" && pwd)
ctl="$build/faultctl"
tmp=$(mktemp -d)
chmod 755 "$tmp"
trap 'cleanup_servers; rm -rf "$tmp"' EXIT
echo "HTTP rules under the kernel-side backend ($build)"
ip link set lo up
# The run's CA is made in a run directory of the test's own.
export FAULTNET_RUNDIR="$tmp/run"
mkdir -m 700 "$FAULTNET_RUNDIR"
unset SSL_CERT_FILE SSL_CERT_DIR

export GOCACHE="$tmp/gocache" GO111MODULE=off CGO_ENABLED=0
(cd "$here" && GOPATH="$tmp/gopath" go build -o "$tmp/gohttp" gohttp.go)
check "the static Go HTTP client builds" test -x "$tmp/gohttp"
# Debian packages Go libraries as source in /usr/share/gocode (no modules,
# no network): grpc-go 1.33 (golang-google-grpc-dev) and what it needs.
(cd "$here" && GOPATH=/usr/share/gocode go build -o "$tmp/gogrpc" gogrpc.go) 2>"$tmp/gobuild.err"
check "the static Go gRPC client builds offline from /usr/share/gocode ($(head -c 200 "$tmp/gobuild.err"))" \
	test -x "$tmp/gogrpc"

# Test CAs: "good" signs the leaf of the server Go trusts through the
# user's SSL_CERT_FILE; "rogue" the leaf of one it does not trust.
mkleaf() {
	openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=$1 test CA" \
		-keyout "$tmp/$1-ca.key" -out "$tmp/$1-ca.pem" -days 2 2>/dev/null &&
		openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=$2" \
			-keyout "$tmp/$1.key" -out "$tmp/$1.csr" 2>/dev/null &&
		printf 'subjectAltName=IP:%s\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n' "$2" >"$tmp/$1.ext" &&
		openssl x509 -req -in "$tmp/$1.csr" -CA "$tmp/$1-ca.pem" -CAkey "$tmp/$1-ca.key" \
			-CAcreateserial -days 2 -extfile "$tmp/$1.ext" -out "$tmp/$1.pem" 2>/dev/null
}
mkleaf good 127.87.0.2 && mkleaf rogue 127.87.0.3
check "the test CAs and leaves are made" holds '[ -s "$tmp/good.pem" ] && [ -s "$tmp/rogue.pem" ]'

# Servers answering 200, each counting its requests in a file: plain HTTP
# on 127.87.0.1:8081, HTTPS with the good leaf on 127.87.0.2:8443 and
# with the rogue leaf on 127.87.0.3:8443.
cat >"$tmp/srv.py" <<'PY'
import http.server, ssl, sys
n = [0]
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1" # keeps connections open
    def do_GET(self):
        n[0] += 1
        open(sys.argv[3], "w").write(str(n[0]))
        self.send_response(200); self.send_header("Content-Length", "2"); self.end_headers()
        self.wfile.write(b"ok")
    def log_message(self, *a): pass
s = http.server.ThreadingHTTPServer((sys.argv[1], int(sys.argv[2])), H)
if len(sys.argv) > 4:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER); ctx.load_cert_chain(sys.argv[4], sys.argv[5])
    s.socket = ctx.wrap_socket(s.socket, server_side=True)
s.serve_forever()
PY
/usr/bin/python3 "$tmp/srv.py" 127.87.0.1 8081 "$tmp/n.plain" &
FN_PIDS="${FN_PIDS:-} $!"
/usr/bin/python3 "$tmp/srv.py" 127.87.0.2 8443 "$tmp/n.good" "$tmp/good.pem" "$tmp/good.key" &
FN_PIDS="${FN_PIDS:-} $!"
# HTTP/2 over TLS (ALPN h2): nghttpd (nghttp2-server) with the good leaf
# on 127.87.0.2:9443.
mkdir "$tmp/www" && echo ok >"$tmp/www/index.html"
nghttpd -d "$tmp/www" --address=127.87.0.2 9443 "$tmp/good.key" "$tmp/good.pem" >/dev/null 2>&1 &
FN_PIDS="${FN_PIDS:-} $!"
/usr/bin/python3 "$tmp/srv.py" 127.87.0.3 8443 "$tmp/n.rogue" "$tmp/rogue.pem" "$tmp/rogue.key" &
FN_PIDS="${FN_PIDS:-} $!"
# A gRPC server (grpcio) answering grpc.health.v1.Health/Check, counting
# the calls it saw.
cat >"$tmp/gsrv.py" <<'PY'
import grpc, sys, time
from concurrent import futures
n = [0]
def check(req, ctx):
    n[0] += 1
    open(sys.argv[3], "w").write(str(n[0]))
    return b""
h = grpc.method_handlers_generic_handler("grpc.health.v1.Health",
    {"Check": grpc.unary_unary_rpc_method_handler(check)})
s = grpc.server(futures.ThreadPoolExecutor(4)); s.add_generic_rpc_handlers((h,))
s.add_insecure_port("%s:%s" % (sys.argv[1], sys.argv[2])); s.start()
while True: time.sleep(60)
PY
/usr/bin/python3 "$tmp/gsrv.py" 127.87.0.4 9090 "$tmp/n.grpc" &
FN_PIDS="${FN_PIDS:-} $!"
sleep 1.5

cat >"$tmp/503.conf" <<'CONF'
rules = (
  { name = "unavailable"; action = "respond"; status = 503; match = { to = "127.87.0.0/30"; }; }
);
CONF
cat >"$tmp/none.conf" <<'CONF'
rules = (
  { name = "elsewhere"; action = "respond"; status = 503; match = { to = "127.87.1.0/24"; }; }
);
CONF
served() { cat "$tmp/n.$1" 2>/dev/null || echo 0; }
# lines FILE N: waits (up to 10 s) until FILE has N lines.
lines() {
	for _ in $(seq 100); do
		[ "$(wc -l <"$1" 2>/dev/null || echo 0)" -ge "$2" ] && return 0
		sleep 0.1
	done
	return 1
}

# Plain HTTP.
run "$ctl" run --backend=bpf --stats --config "$tmp/503.conf" -- "$tmp/gohttp" http://127.87.0.1:8081/
req=$(echo "$err" | grep -E '^  rule unavailable ' | tr -s ' ')
check "Go over HTTP under respond 503: 503 (got '$out', exit $rc), the server saw none ($(served plain))" \
	holds '[ "$out" = 503 ] && [ "$rc" = 0 ] && [ "$(served plain)" = 0 ]'
check "--stats: the request counted against the rule under the run ($req)" \
	holds 'contains "$req" "requests=1 faults=1 answered=1"'
# --requests: the pump, which parses the requests, writes the log (the
# tree before took the option and wrote nothing).
run "$ctl" run --backend=bpf --requests "$tmp/req.jsonl" --config "$tmp/503.conf" -- "$tmp/gohttp" http://127.87.0.1:8081/
listed=$("$ctl" requests "$tmp/req.jsonl" 2>&1)
check "--requests under the backend: the Go client's request logged, its rule and 503 ($listed)" \
	holds '[ "$out" = 503 ] && [ "$(echo "$listed" | wc -l)" = 1 ] && contains "$listed" "GET http://127.87.0.1:8081/ unavailable answered 503"'
echo 'rules = ( { name = "tcp"; action = "refuse"; match = { to = "127.87.1.0/24"; }; } );' >"$tmp/tcp.conf"
# --strict: an HTTP rule's requests, counted by the pump, say it fired.
run "$ctl" run --backend=bpf --strict --config "$tmp/503.conf" -- "$tmp/gohttp" http://127.87.0.1:8081/
check "--strict under the backend: the HTTP rule fired (pump's counts): passes ($rc; $err)" \
	holds '[ "$out" = 503 ] && [ "$rc" = 0 ] && ! contains "$err" "--strict"'
run "$ctl" run --backend=bpf --strict --config "$tmp/none.conf" -- /bin/true
check "--strict under the backend: an HTTP rule that never fired fails the run, named ($rc)" \
	holds '[ "$rc" = 1 ] && contains "$err" "rule elsewhere was on and never fired"'
run "$ctl" run --backend=bpf --requests "$tmp/none.jsonl" --config "$tmp/tcp.conf" -- /bin/true
check "--requests with no HTTP rule under the backend: said, not silent ($err)" \
	holds '[ "$rc" = 0 ] && contains "$err" "no HTTP rule, so no request is parsed"'
# Live: the pump is a member of the run's group.
"$ctl" run --backend=bpf -g bpfhttp --config "$tmp/503.conf" -- \
	/bin/sh -c "$tmp/gohttp http://127.87.0.1:8081/; sleep 2" >"$tmp/live.out" 2>&1 &
live=$!
lines "$tmp/live.out" 1 # the GET is answered; the run lasts 2 s more
run "$ctl" -g bpfhttp stats
stats=$(echo "$out" | grep -E ' unavailable +respond +- +1 +1 +503 +1 ' | tr -s ' ')
run "$ctl" -g bpfhttp ps
check "faultctl stats during the run: the request counted by the pump, a member of the run's group ($stats)" \
	holds '[ -n "$stats" ] && contains "$out" "faultnet-pump" && contains "$out" "kernel-side backend"'
wait "$live"
check "...and the Go client got 503 ($(cat "$tmp/live.out"))" [ "$(cat "$tmp/live.out")" = 503 ]
run "$ctl" run --backend=bpf --config "$tmp/none.conf" -- "$tmp/gohttp" http://127.87.0.1:8081/
check "Go over HTTP with the rule elsewhere: 200 from the server (got '$out', served $(served plain))" \
	holds '[ "$out" = 200 ] && [ "$(served plain)" = 1 ]'

# A rule switched off at the connect still takes the connection (as under
# the shim): enabled later, it answers the next request on that same open
# connection; disabled again, the server answers there.
cat >"$tmp/off.conf" <<'CONF'
rules = (
  { name = "later"; action = "respond"; status = 503; enabled = false;
    match = { to = "127.87.0.1/32"; port = 8081; }; }
);
CONF
"$ctl" run --backend=bpf -g bpfhttpoff --config "$tmp/off.conf" -- \
	"$tmp/gohttp" http://127.87.0.1:8081/ keep 3 1500 >"$tmp/off.out" 2>&1 &
live=$!
# Each change lands in the 1.5 s between two GETs.
lines "$tmp/off.out" 1
"$ctl" -g bpfhttpoff enable later >/dev/null
lines "$tmp/off.out" 2
"$ctl" -g bpfhttpoff disable later >/dev/null
wait "$live"
seq_of=$(tr '\n' ',' <"$tmp/off.out")
check "a rule off at the connect, enabled, then disabled: 200, then 503 and 200 on the same kept-alive connection ($seq_of)" \
	[ "$seq_of" = "200,503 reused,200 reused," ]
# HTTPS: Go trusts the good CA through the user's SSL_CERT_FILE.
export SSL_CERT_FILE="$tmp/good-ca.pem"
direct=$("$tmp/gohttp" https://127.87.0.2:8443/)
check "Go over HTTPS directly: 200 (the user's SSL_CERT_FILE trusts the good CA: $direct)" [ "$direct" = 200 ]
run "$ctl" run --backend=bpf --stats --config "$tmp/503.conf" -- "$tmp/gohttp" https://127.87.0.2:8443/
tls=$(echo "$err" | grep -E '^  tls ' | tr -s ' ')
check "Go over HTTPS under respond 503: 503 with no flag (got '$out', exit $rc), the server saw none ($(($(served good) - 1)))" \
	holds '[ "$out" = 503 ] && [ "$rc" = 0 ] && [ "$(served good)" = 1 ]'
check "...terminated by the pump's shim ($tls)" contains "$tls" "terminated=1"
run "$ctl" run --backend=bpf --config "$tmp/none.conf" -- "$tmp/gohttp" https://127.87.0.2:8443/
check "Go over HTTPS with the rule elsewhere: 200 (got '$out')" [ "$out" = 200 ]
# --ca-vars: a run started with no HTTP rule takes one added live, over
# HTTPS too (the pump and SSL_CERT_FILE from the start); the tree before
# refused the add ("only when its --config has one at the start").
"$ctl" run --backend=bpf --ca-vars -g bpfadd --config "$tmp/tcp.conf" -- \
	/bin/sh -c "sleep 1.5; $tmp/gohttp https://127.87.0.2:8443/" >"$tmp/add.out" 2>&1 &
added=$!
sleep 0.5
run "$ctl" -g bpfadd add '{ name = "live"; action = "respond"; status = 503; match = { to = "127.87.0.2/32"; }; }'
addrc=$rc adderr=$err
wait "$added"
check "--ca-vars: an HTTP rule added live reaches Go over HTTPS: 503 (add: $addrc $adderr; got '$(cat "$tmp/add.out")'), the server saw none" \
	holds '[ "$addrc" = 0 ] && [ "$(cat "$tmp/add.out")" = 503 ] && [ "$(served good)" = 2 ]'
direct=$("$tmp/gohttp" https://127.87.0.2:9443/ h2)
check "Go over HTTP/2 with TLS directly: 200 over HTTP/2 ($direct)" [ "$direct" = "200 HTTP/2.0" ]
run "$ctl" run --backend=bpf --stats --config "$tmp/503.conf" -- "$tmp/gohttp" https://127.87.0.2:9443/ h2
h2=$(echo "$err" | grep -E '^  h2 ' | tr -s ' ')
check "Go over HTTP/2 with TLS under respond 503: 503 over HTTP/2 (got '$out'; $h2)" \
	holds '[ "$out" = "503 HTTP/2.0" ] && contains "$h2" "connections=1 tls=1"'
check "...and SSL_CERT_FILE is the user's again after the run ($SSL_CERT_FILE)" \
	[ "$SSL_CERT_FILE" = "$tmp/good-ca.pem" ]

# A server Go would not trust stays untrusted, under the rule too.
direct=$("$tmp/gohttp" https://127.87.0.3:8443/)
check "Go refuses the rogue server directly ($direct)" contains "$direct" "x509: certificate signed by unknown authority"
run "$ctl" run --backend=bpf --stats --config "$tmp/503.conf" -- "$tmp/gohttp" https://127.87.0.3:8443/
tls=$(echo "$err" | grep -E '^  tls ' | tr -s ' ')
check "...and under respond 503: an error, never the injected 503 ($out)" \
	holds 'contains "$out" "error:" && ! contains "$out" 503 && [ "$(served rogue)" = 0 ]'
check "...the relay refused the server ($tls)" contains "$tls" "server_unverified=1"
# Without the user's SSL_CERT_FILE, Go's roots are the system's: the good
# CA is not among them, and the run's CA added for the relay's leaves does
# not make the server trusted.
unset SSL_CERT_FILE
run "$ctl" run --backend=bpf --config "$tmp/503.conf" -- "$tmp/gohttp" https://127.87.0.2:8443/
check "with the system's roots only, the good server is refused under the rule too ($out)" \
	holds 'contains "$out" "error:" && ! contains "$out" 503'
# What the command is given: the roots it would have read, then the CA.
run "$ctl" run --backend=bpf --config "$tmp/503.conf" -- /bin/sh -c 'echo "$SSL_CERT_FILE"'
bundle=$out
check "SSL_CERT_FILE for the command: the system's bundle then the run's CA ($bundle)" \
	holds '[ -f "$bundle" ] && [ "$(head -c 4096 "$bundle")" = "$(head -c 4096 /etc/ssl/certs/ca-certificates.crt)" ] && [ "$(tail -c 200 "$bundle")" = "$(tail -c 200 "$FAULTNET_RUNDIR/ca.pem")" ]'

# gRPC: UNAVAILABLE for the first two streams; the retry policy makes the
# call succeed; the server sees it once; faultnet counts 3 streams.
cat >"$tmp/grpc14.conf" <<'CONF'
rules = (
  { name = "unavail"; action = "respond"; grpc_status = 14; grpc_message = "try later"; first = 2;
    match = { to = "127.87.0.4/32"; port = 9090; }; }
);
CONF
cat >"$tmp/grpcah.conf" <<'CONF'
rules = (
  { name = "committed"; action = "respond"; grpc_status = 14; grpc_message = "try later";
    grpc_after_headers = true; match = { to = "127.87.0.4/32"; port = 9090; }; }
);
CONF
export GRPC_GO_RETRY=on
direct=$("$tmp/gogrpc" 127.87.0.4:9090)
check "Go gRPC directly: OK (served $(served grpc))" holds '[ "$direct" = OK ] && [ "$(served grpc)" = 1 ]'
run "$ctl" run --backend=bpf --stats --json --config "$tmp/grpc14.conf" -- "$tmp/gogrpc" 127.87.0.4:9090
rule=$(echo "$err" | grep '"type":"rule","name":"unavail"')
h2=$(echo "$err" | grep '"type":"h2"')
check "Go gRPC under grpc_status 14, first 2, retryPolicy maxAttempts 4: OK (got '$out'), the server saw it once ($(($(served grpc) - 1)))" \
	holds '[ "$out" = OK ] && [ "$(served grpc)" = 2 ]'
check "...faultnet counted 3 streams, 2 answered ($rule; $h2)" \
	holds 'contains "$rule" "\"requests\":3" && contains "$rule" "\"answered\":2" && contains "$h2" "UNAVAILABLE"'
run "$ctl" run --backend=bpf --stats --json --config "$tmp/grpcah.conf" -- "$tmp/gogrpc" 127.87.0.4:9090
rule=$(echo "$err" | grep '"type":"rule","name":"committed"')
check "Go gRPC under grpc_after_headers: fails at once, not retried ('$out', $ms ms; $rule)" \
	holds '[ "$out" = "Unavailable try later" ] && between 0 5000 "$ms" && contains "$rule" "\"requests\":1,\"faults\":1,\"answered\":1"'
unset GRPC_GO_RETRY

# dns rules stay the shim's: refused by name.
cat >"$tmp/dns.conf" <<'CONF'
rules = ( { name = "nx"; action = "dns"; error = "nxdomain"; match = { host = "*.test"; }; } );
CONF
run "$ctl" run --backend=bpf --config "$tmp/dns.conf" -- "$tmp/gohttp" http://127.87.0.1:8081/
check "a dns rule under --backend=bpf: exit 2 naming the rule and why ($(echo "$err" | head -1))" \
	holds '[ "$rc" = 2 ] && contains "$err" "nx" && contains "$err" "dns rules act on the shim'"'"'s resolver hooks"'
check "nothing of the runs is left: no faultnet-pump process in this session" \
	holds '! pgrep -s 0 -x faultnet-pump >/dev/null'
echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
