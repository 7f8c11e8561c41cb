#!/bin/bash
# reach.sh - faultnet says when it cannot reach a program instead of
# skipping its faults silently: faultctl run refuses static binaries, Go
# programs (static and cgo) and setuid/setgid files with exit 2 and the
# reason, runs them with --allow-unreached, and faultctl ps shows a process
# that loaded the shim but never made a socket call through it.
# usage: reach.sh BUILD_DIR [PRELOAD_FIRST]
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
. "$here/../lib.sh"
build=$(cd "$1" && pwd)
ctl="$build/faultctl"
[ -n "${2:-}" ] && export LD_PRELOAD="$2"
tmp=$(mktemp -d)
trap 'cleanup_servers; rm -rf "$tmp"' EXIT
echo "programs the shim cannot reach ($build)"

# Built without the sanitizer runtime in the way.
printf 'int main(void) { return 0; }\n' >"$tmp/s.c"
env -u LD_PRELOAD gcc -static -o "$tmp/static" "$tmp/s.c"
run "$ctl" run -- "$tmp/static"
check "static binary: refused with exit 2" [ "$rc" = 2 ]
check "static binary: says why and what to do" \
	contains "$err" "is a static binary: it has no program interpreter" &&
	contains "$err" "--allow-unreached"
run "$ctl" run --allow-unreached -- "$tmp/static"
check "static binary: --allow-unreached runs it, with a warning" \
	[ "$rc" = 0 ] && contains "$err" "running it without faults"

cp /bin/true "$tmp/suid" && chmod u+s "$tmp/suid"
run "$ctl" run -- "$tmp/suid"
check "setuid file: refused, the loader drops LD_PRELOAD" holds '[ "$rc" = 2 ] && contains "$err" "is setuid"'
printf '#!%s\n' "$tmp/static" >"$tmp/script" && chmod +x "$tmp/script"
run "$ctl" run -- "$tmp/script"
check "a script is judged by its interpreter" holds '[ "$rc" = 2 ] && contains "$err" "static binary"'
run "$ctl" run -- sh -c true
check "a dynamic program runs" [ "$rc" = 0 ]

# Go, static and cgo.
export GOCACHE="$tmp/gocache" GOPATH="$tmp/gopath" GOFLAGS=-mod=mod GO111MODULE=off
(cd "$here" && env -u LD_PRELOAD CGO_ENABLED=0 go build -o "$tmp/go-static" goclient.go) &&
	(cd "$here" && env -u LD_PRELOAD CGO_ENABLED=1 go build -o "$tmp/go-cgo" goclient.go)
check "the Go clients build (static and cgo)" holds '[ -x "$tmp/go-static" ] && [ -x "$tmp/go-cgo" ]'
check "the cgo build is dynamic" sh -c "readelf -l '$tmp/go-cgo' | grep -q 'program interpreter'"
conf="$tmp/bh.conf"
echo 'rules = ( { name = "bh"; action = "blackhole"; match = { to = "127.67.0.1/32"; }; } );' >"$conf"
http_server 127.67.0.1 8091 || exit 1
for kind in static cgo; do
	run "$ctl" run --config "$conf" -- "$tmp/go-$kind" http://127.67.0.1:8091/ 1
	check "Go ($kind): refused with exit 2, naming the Go runtime" \
		[ "$rc" = 2 ] && contains "$err" "is a Go program"
done
# With --allow-unreached the cgo program loads the shim, answers faultctl,
# and reads as "not joined: no covered call yet" (its raw socket calls
# never reach the shim, so it never joins); its requests go through
# untouched.
export FAULTNET_RUNDIR="$tmp/run"
mkdir -m 700 "$FAULTNET_RUNDIR"
"$ctl" run -g goreach --allow-unreached --config "$conf" -- "$tmp/go-cgo" http://127.67.0.1:8091/ 3 \
	>"$tmp/go.out" 2>"$tmp/go.err" &
gopid=$!
for _ in $(seq 50); do
	"$ctl" -g goreach ps 2>/dev/null | grep -q go-cgo && break
	sleep 0.1
done
run "$ctl" -g goreach ps
check "Go (cgo) under --allow-unreached: ps says it made no covered call" \
	contains "$out" "not joined: no covered call yet" && contains "$out" go-cgo
wait $gopid
check "Go (cgo): the blackhole never reached it (its requests got 200)" grep -q "status 200" "$tmp/go.out"
[ "$failed" = 0 ]
