# lib.sh - a few helpers for the shell-level tests: each check prints one
# "ok"/"FAIL" line and is counted; tests/run.sh adds up the counts.
# Sourced, not run.

: "${FN_COUNTS:=/dev/null}"
passed=0
failed=0

pass() {
	passed=$((passed + 1))
	echo "  ok   - $1"
	echo pass >>"$FN_COUNTS"
}

fail() {
	failed=$((failed + 1))
	echo "  FAIL - $1${2:+: $2}"
	echo fail >>"$FN_COUNTS"
}

# check NAME CONDITION... : evaluates the condition as a command.
check() {
	name=$1
	shift
	if "$@"; then pass "$name"; else fail "$name" "$*"; fi
}

# holds 'A && B': a whole condition for check, evaluated when checked.
# Written bare, `check NAME A && B` checks A only, and B's answer is lost.
holds() { eval "$1"; }

# between LOW HIGH VALUE (integers, milliseconds)
between() { [ "$3" -ge "$1" ] && [ "$3" -le "$2" ]; }

contains() { case "$1" in *"$2"*) return 0 ;; esac; return 1; }

now_ms() { date +%s%3N; }

# Runs a command and sets rc, out, err and ms (elapsed wall time).
run() {
	_t0=$(now_ms)
	out=$("$@" 2>/tmp/fn-err.$$)
	rc=$?
	ms=$(($(now_ms) - _t0))
	err=$(cat /tmp/fn-err.$$)
	rm -f /tmp/fn-err.$$
}

# Starts a loopback HTTP server on ip:port (serving directory $3, /tmp by
# default) in the background; waits until it answers. Its pid is appended
# to FN_PIDS for cleanup.
http_server() {
	(cd "${3:-/tmp}" && exec /usr/bin/python3 -m http.server "$2" --bind "$1" >/dev/null 2>&1) &
	FN_PIDS="${FN_PIDS:-} $!"
	for _ in $(seq 50); do
		curl -s -o /dev/null "http://$1:$2/" && return 0
		sleep 0.1
	done
	echo "could not start a server on $1:$2" >&2
	return 1
}

cleanup_servers() {
	# shellcheck disable=SC2086
	[ -n "${FN_PIDS:-}" ] && kill $FN_PIDS 2>/dev/null
	FN_PIDS=""
}
