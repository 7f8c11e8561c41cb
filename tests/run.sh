#!/bin/bash
# run.sh - runs sections of the test suite and prints one closing line,
# "N passed, N failed, N skipped", counting CUnit tests and shell checks
# alike. usage: run.sh SECTION...; `all` is every section in order (what
# make test runs). The sections, and what each runs, are listed in
# tests/README.md; `run.sh --list` names them.
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
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
CATALOGUE="connect stream conditions udp"

# How a section and a CUnit program run: run_section, cunit.
. tests/runner.sh

# Runs an integration program under the shim with its policy (a path
# relative to tests/).
under() {
	local build=$1 first=$2 conf=$3 prog=$4
	cunit env FAULTNET_CONFIG="$root/tests/$conf" \
		LD_PRELOAD="${first:+$first:}$root/$build/libfaultnet.so" "$build/tests/$prog"
}

# Runs a Python test script; one that ends in error without a failed check
# of its own (a traceback before its first check, a server that could not
# bind) counts as a failure, never as nothing.
pyscript() {
	local before rc
	before=$(grep -c '^fail' "$FN_COUNTS")
	/usr/bin/python3 -u "$@"
	rc=$?
	if [ "$rc" != 0 ] && [ "$(grep -c '^fail' "$FN_COUNTS")" = "$before" ]; then
		echo "  FAIL - $1 exited $rc without a failed check"
		echo fail >>"$FN_COUNTS"
	fi
	return "$rc"
}

# ---- sections, each for a build (build, or build/asan with its runtime) ----
s_unit() {
	echo "=== $1: unit tests"
	cunit "$1/tests/unit"
}

s_faults() {
	echo "=== $1: connection faults under the shim"
	under "$1" "$2" faults/it.conf it_faults
	for fam in $CATALOGUE; do
		echo "=== $1: the fault catalogue under the shim: $fam"
		under "$1" "$2" faults/catalogue.conf "it_catalogue_$fam"
	done
	# strace times the normal build only: the sanitizers' own calls would
	# blur the count (and their slowness relay_diff's times).
	if [ "$1" = build ]; then
		echo "=== $1: the relay's system calls per round trip (strace)"
		pyscript tests/faults/relay_calls.py "$1"
		echo "=== $1: the byte relay against a direct connection, operation by operation"
		pyscript tests/faults/relay_diff.py "$1"
	fi
}

# What legitimate but unusual programs do to the shim, and what another
# account or bad input does (tests/hostile/).
s_hostile() {
	echo "=== $1: hostile app"
	under "$1" "$2" hostile/hostile.conf it_hostile_app
	ASAN_OPTIONS=detect_leaks=0 pyscript tests/hostile/hostile_app.py "$1" "$2"
	if [ -z "$2" ]; then
		# Run from behind a directory other accounts cannot enter, as a
		# tree cloned into root's home (0700) is: the suite must not need
		# them to reach the tree or the build.
		echo "=== $1: hostile user (tree and build behind a 0700 directory)"
		local priv
		priv=$(mktemp -d)
		mkdir -p "$priv/tests" && cp -r tests/hostile tests/checks.py "$priv/tests/" &&
			ln -s "$root/$1" "$priv/build"
		pyscript "$priv/tests/hostile/hostile_user.py" "$priv/build"
		rm -rf "$priv"
	fi
}

s_cli() {
	echo "=== $1: start-up and faultctl"
	tests/cli/cli.sh "$1" $2
}

# Interpreters (the Python agents, the real clients) leak at exit by
# design; leaks are checked on the project's own programs.
s_control() {
	echo "=== $1: faultctl and live control"
	ASAN_OPTIONS=detect_leaks=0 pyscript tests/control/control_test.py "$1" "$2"
	ASAN_OPTIONS=detect_leaks=0 pyscript tests/control/pidns_test.py "$1" "$2"
	ASAN_OPTIONS=detect_leaks=0 pyscript tests/control/compiled_test.py "$1" "$2"
}

s_hardening() {
	echo "=== $1: the shim never harms its host"
	under "$1" "$2" hardening/hardening.conf it_hardening
	tests/hardening/stress.sh "$1" 20 1000 0 $2
	ASAN_OPTIONS=detect_leaks=0 pyscript tests/hardening/procs.py "$1" "$2"
}

s_policies() {
	echo "=== $1: the policies in policies/"
	ASAN_OPTIONS=detect_leaks=0 pyscript tests/policies/policy_test.py "$1" "$2"
}

s_http() {
	echo "=== $1: HTTP faults in front of a real server, per request"
	pyscript tests/http/http_faults.py "$1" "$2"
	echo "=== $1: HTTP conversations played directly and through the engine"
	pyscript tests/http/http_engine.py "$1" "$2"
	echo "=== $1: the request log (FAULTNET_REQUESTS) and faultctl requests: per call, HAR, credentials"
	ASAN_OPTIONS=detect_leaks=0 pyscript tests/http/reqlog_test.py "$1" "$2"
}

s_dns() {
	echo "=== $1: dns rules and hostname rules with real clients"
	pyscript tests/dns/dns_test.py "$1" "$2"
	echo "=== $1: dns rules on queries sent to a nameserver (UDP and TCP, own namespace)"
	pyscript tests/dns/dns_sockets.py "$1" "$2"
}

s_clients() {
	echo "=== $1: real clients"
	ASAN_OPTIONS=detect_leaks=0 tests/clients/clients.sh "$root/$1/libfaultnet.so" $2
}

PER_BUILD="unit faults hostile cli control hardening policies http dns clients"

# ---- sections that stand alone ---------------------------------------------
s_reach() {
	echo "=== programs the shim cannot reach: refused with the reason"
	tests/reach/reach.sh build
	echo "=== a live fault on connections already open (established = true)"
	pyscript tests/reach/established.py build
}

s_bpf() {
	echo "=== the kernel-side backend (--backend=bpf) on Go programs, against real outages"
	local before
	before=$(grep -c '^fail' "$FN_COUNTS")
	if ! tests/bpf/bpf.sh build && [ "$(grep -c '^fail' "$FN_COUNTS")" = "$before" ]; then
		echo "  FAIL - tests/bpf/bpf.sh ended without a failed check"
		echo fail >>"$FN_COUNTS"
	fi
	# HTTP rules (the pump under the shim) on Go HTTP, HTTPS and gRPC clients.
	before=$(grep -c '^fail' "$FN_COUNTS")
	if ! tests/bpf/http.sh build && [ "$(grep -c '^fail' "$FN_COUNTS")" = "$before" ]; then
		echo "  FAIL - tests/bpf/http.sh ended without a failed check"
		echo fail >>"$FN_COUNTS"
	fi
}

s_asan() {
	for s in $PER_BUILD; do "s_$s" build/asan "$asan"; done
}

s_tsan() {
	echo "=== ThreadSanitizer: the threaded tests against the shim built with -fsanitize=thread"
	local tsan
	tsan=$(gcc -print-file-name=libtsan.so)
	# die_after_fork=0: the shim starts a forked child's control thread at
	# once, which TSan would otherwise refuse in a child of a threaded process.
	TSAN_OPTIONS="halt_on_error=0 report_signal_unsafe=0 exitcode=66 die_after_fork=0 suppressions=$root/tests/tsan.supp" \
		IT_QUICK=1 under build/tsan "$tsan" faults/catalogue.conf it_catalogue_stream
	TSAN_OPTIONS="halt_on_error=0 report_signal_unsafe=0 exitcode=66 die_after_fork=0 suppressions=$root/tests/tsan.supp" \
		under build/tsan "$tsan" faults/catalogue.conf it_catalogue_udp
	TSAN_OPTIONS="halt_on_error=0 report_signal_unsafe=0 exitcode=66 die_after_fork=0 suppressions=$root/tests/tsan.supp" \
		tests/hardening/stress.sh build/tsan 15 300 0 "$tsan"
}

s_valgrind() {
	echo "=== valgrind memcheck: the integration tests under the normal build"
	local vglog
	vglog=$(mktemp -d)
	for prog in it_faults $(printf 'it_catalogue_%s ' $CATALOGUE); do
		local conf=catalogue.conf
		[ "$prog" = it_faults ] && conf=it.conf
		cunit env FAULTNET_CONFIG="$root/tests/faults/$conf" LD_PRELOAD="$root/build/libfaultnet.so" \
			valgrind --log-file="$vglog/$prog.%p" build/tests/$prog
	done
	# Forked children that exec leave logs without a summary; any error
	# shows as a non-zero summary or an error line.
	if grep -q 'ERROR SUMMARY: [1-9]\|Invalid\|uninitialised' "$vglog"/*; then
		echo "  FAIL - valgrind found errors:"
		grep -h -A8 'ERROR SUMMARY: [1-9]\|Invalid\|uninitialised' "$vglog"/* | head -40
		echo fail >>"$FN_COUNTS"
	else
		echo "  ok   - valgrind: no invalid access or uninitialised read in $(ls "$vglog" | wc -l) processes"
		echo pass >>"$FN_COUNTS"
	fi
	rm -rf "$vglog"
}

s_conformance() {
	echo "=== conformance: real clients against each fault, and the stories"
	pyscript tests/conformance/cell_test.py build
	pyscript tests/conformance/h2_section_test.py build
	ASAN_OPTIONS=detect_leaks=0 pyscript tests/conformance/conformance.py build CONFORMANCE.md
}

s_cpython() {
	echo "=== CPython's own test suite (21 modules) without the shim, and under unused rules, a byte relay and an HTTP rule: no outcome may change"
	pyscript tests/cpython/compare.py build
}

s_http_sdk() {
	echo "=== HTTP faults and real SDKs: the S3 retry quota, boto3, a retry storm, the HTTP policies"
	ASAN_OPTIONS=detect_leaks=0 pyscript tests/http/http_sdk.py build
}

s_scenarios() {
	echo "=== faultctl scenario: the scenarios of tests/scenarios, their reports (build/scenarios), SIGINT"
	ASAN_OPTIONS=detect_leaks=0 pyscript tests/scenarios/scenario_test.py build
}

s_bench() {
	echo "=== make bench's harness, in seconds (--smoke)"
	local smoke
	smoke=$(mktemp)
	if /usr/bin/python3 -u tests/bench/bench.py build "$smoke" --smoke >"$smoke.log" 2>&1 &&
		[ "$(grep -c '^## ' "$smoke")" = 12 ]; then
		echo "  ok   - bench.py --smoke wrote all twelve sections"
		echo pass >>"$FN_COUNTS"
	else
		echo "  FAIL - bench.py --smoke:"
		tail -20 "$smoke.log"
		echo fail >>"$FN_COUNTS"
	fi
	rm -f "$smoke" "$smoke.log"
}

s_fuzz() {
	echo "=== fuzzing: the config parser, the rule syntax, the control protocol"
	tests/fuzz/run.sh 30
}

# A pytest run's results into the counts: "N passed, M failed" from -q.
pytest_counts() {
	local log=$1 p f
	p=$(grep -oE '[0-9]+ passed' "$log" | tail -1 | cut -d' ' -f1)
	f=$(grep -oE '[0-9]+ (failed|error)' "$log" | awk '{s+=$1} END {print s+0}')
	tail -30 "$log" | grep -E 'passed|failed|Error|assert' | tail -8
	for _ in $(seq "${p:-0}"); do echo pass >>"$FN_COUNTS"; done
	for _ in $(seq "$f"); do echo fail >>"$FN_COUNTS"; done
	[ -n "$p" ] || { echo "  FAIL - pytest did not run"; echo fail >>"$FN_COUNTS"; }
}

s_helpers() {
	echo "=== the Python client and its pytest plugin (installed offline into a venv)"
	local venv log
	venv=$(mktemp -d)
	log=$venv/log
	# Installed from a copy: a build writes build/ and *.egg-info beside
	# its sources, and the tree stays as committed.
	cp -r bindings/python "$venv/src"
	if ! /usr/bin/python3 -m venv --system-site-packages "$venv/v" ||
		! "$venv/v/bin/pip" install -q --no-index --no-build-isolation "$venv/src"; then
		echo "  FAIL - pip install ./bindings/python"
		echo fail >>"$FN_COUNTS"
		return
	fi
	PATH="$root/build:$PATH" "$venv/v/bin/python" -m pytest -q -p no:cacheprovider \
		bindings/python/tests/test_client.py >"$log" 2>&1
	pytest_counts "$log"
	printf 'rules = (\n { name = "nat-lost"; action = "blackhole"; enabled = false; match = { to = "127.89.0.1/32"; }; }\n);\n' >"$venv/p.conf"
	PATH="$root/build:$PATH" build/faultctl run --config "$venv/p.conf" -- "$venv/v/bin/python" -m pytest \
		-q -p no:cacheprovider bindings/python/tests/test_inprocess.py >"$log" 2>&1
	pytest_counts "$log"
	echo "=== the Node.js helper (node:test)"
	PATH="$root/build:$PATH" node --test bindings/node/test/ >"$log" 2>&1
	local p f
	p=$(sed -n 's/^# pass //p' "$log")
	f=$(sed -n 's/^# fail //p' "$log")
	grep -E '^(not )?ok ' "$log" | sed 's/^/  /'
	[ "${f:-1}" = 0 ] || grep -A20 '^not ok' "$log" | head -40
	for _ in $(seq "${p:-0}"); do echo pass >>"$FN_COUNTS"; done
	for _ in $(seq "${f:-1}"); do echo fail >>"$FN_COUNTS"; done
	rm -rf "$venv"
}

s_man() {
	echo "=== manual pages and shell completion"
	tests/man/man_test.sh build
	tests/man/completion_test.sh build
}

s_deb() {
	echo "=== the Debian package (make deb)"
	tests/deb/deb_test.sh
}

s_style() {
	echo "=== source checks"
	tests/style/style.sh
}

s_docs() {
	echo "=== docs: README.md a front page of at most 300 lines, links resolve, figures from BENCHMARKS.md"
	pyscript tests/docs/docs_test.py
}

s_tls() {
	echo "=== preload/tls on its own: the run's CA, leaves, handshakes over loopback"
	local before
	before=$(grep -c '^fail' "$FN_COUNTS")
	if ! tests/tls/tls.sh build && [ "$(grep -c '^fail' "$FN_COUNTS")" = "$before" ]; then
		echo "  FAIL - tests/tls/tls.sh ended without a failed check"
		echo fail >>"$FN_COUNTS"
	fi
	echo "=== TLS termination in the relay: HTTPS clients under HTTP rules"
	pyscript tests/tls/https.py build
	echo "=== TLS faults (the tls action) against real servers doing them; match.host on the SNI name"
	pyscript tests/tls/tls_faults.py build
	echo "=== system calls per keep-alive HTTPS request through the TLS termination (strace)"
	pyscript tests/tls/tls_calls.py build
}

s_h2fid() {
	echo "=== HTTP/2 fidelity: h2 streams no rule takes, played directly and through faultnet; real h2 clients"
	pyscript tests/h2/h2_fidelity.py build
	echo "=== HTTP/2 over TLS (ALPN h2) through the HTTPS termination: curl, Node and Java against nghttpd"
	pyscript tests/h2/h2fid_tls.py build
	echo "=== the HTTP engine's differential test, h2 mode: generated HTTP/2 conversations directly and through the engine"
	pyscript tests/http/http_engine.py build --h2 --count 40
}

# Containers (issue 44): the bundle in a chroot with no engine, then a real
# Docker engine started by the section itself (tests/containers/).
s_containers() {
	echo "=== containers: the bundle (make bundle) in a debootstrap chroot, in pid and mount namespaces"
	if [ "$(id -u)" != 0 ]; then
		echo "  skip - containers: needs root (mounts, chroot, debootstrap, dockerd)"
		echo skip >>"$FN_COUNTS"
		return
	fi
	if ! make -s bundle >/dev/null; then
		echo "  FAIL - make bundle"
		echo fail >>"$FN_COUNTS"
		return
	fi
	pyscript tests/containers/ns_bundle_test.py build
	echo "=== containers: faultctl docker run and compose on a Docker engine of the section's own"
	pyscript tests/containers/docker_test.py build
}

s_h2() {
	echo "=== HTTP/2 and gRPC: grpcio and grpc-js against real servers doing each fault, and under faultnet"
	ASAN_OPTIONS=detect_leaks=0 pyscript tests/h2/grpc_test.py build
	echo "=== the HTTP/2 engine's own regressions: a server that speaks first, h2c, resets, PINGs, ALPN"
	ASAN_OPTIONS=detect_leaks=0 pyscript tests/h2/h2_engine.py build
}

s_layout() {
	echo "=== layout: only the hooks name exported symbols; calls go only downward"
	tests/layout/layout.sh build
}

ALL="$PER_BUILD reach bpf tls h2 h2fid containers asan tsan valgrind conformance cpython http_sdk scenarios helpers bench fuzz man docs deb style layout"
[ $# = 0 ] && set -- all
if [ "$1" = --list ]; then
	echo "$ALL"
	exit 0
fi
for section in "$@"; do
	if [ "$section" = all ]; then
		set -- $ALL
		break
	fi
done
for section in "$@"; do
	case " $PER_BUILD $ALL " in
	*" $section "*) ;;
	*) echo "run.sh: no section '$section' (run.sh --list)" >&2; exit 2 ;;
	esac
done

# ---- two lanes side by side ------------------------------------------------
# `all` on two cores runs as two lanes at once, each section still once: the
# long sanitizer, valgrind and peer-suite sections (LANE_B) in a network
# namespace of their own, so that the fixed loopback ports of one lane's
# servers never meet the other's, and the rest here (the Docker engine and
# the kernel-side backend's cgroups stay in the host's namespace). Each lane
# is a run.sh of its own with its own run directory and counts; lane B's
# output follows lane A's, and the closing lines add both. FN_LANES=1, one
# core, or no right to make a namespace: one lane, in order.
LANE_B="asan valgrind cpython fuzz tsan scenarios http_sdk"
lanes_wanted() {
	[ "$*" = "$ALL" ] && [ -z "${FN_LANE:-}" ] && [ "${FN_LANES:-2}" != 1 ] &&
		[ "$(nproc)" -ge 2 ] && unshare -n true 2>/dev/null
}

# The totals line a lane printed last, or one failure for a lane that ended
# without one.
lane_totals() {
	local line
	line=$(grep -E '^[0-9]+ passed, [0-9]+ failed, [0-9]+ skipped$' "$1" | tail -1)
	[ -n "$line" ] && echo "$line" && return
	echo "0 passed, 1 failed, 0 skipped"
	echo "  FAIL - lane $2 ended without its closing line" >>"$1"
}

run_lanes() {
	local a="" b="" s alog blog bpid t0=$SECONDS pa fa sa pb fb sb
	for s in $ALL; do
		case " $LANE_B " in
		*" $s "*) b="$b $s" ;;
		*) a="$a $s" ;;
		esac
	done
	alog=$(mktemp)
	blog=$(mktemp)
	echo "run.sh: two lanes at once: lane A here:$a; lane B in a network namespace of its own:$b (its output follows lane A's)"
	FN_LANE=B unshare -n sh -c 'ip link set lo up && exec "$0" "$@"' tests/run.sh $b >"$blog" 2>&1 &
	bpid=$!
	FN_LANE=A tests/run.sh $a 2>&1 | tee "$alog"
	wait "$bpid"
	echo
	echo "=== lane B (in its own network namespace):$b"
	cat "$blog"
	read -r pa _ fa _ sa _ < <(lane_totals "$alog" A)
	read -r pb _ fb _ sb _ < <(lane_totals "$blog" B)
	echo
	echo "--- both lanes: $((SECONDS - t0)) s"
	if [ $((fa + fb)) != 0 ]; then
		echo "what failed:"
		cat "$alog" "$blog" | grep -E '^\s+FAIL - |Test: .*FAILED|^FAILED |^ERROR |^not ok ' | cut -c1-300
	fi
	echo "$((pa + pb)) passed, $((fa + fb)) failed, $((sa + sb)) skipped"
	rm -f "$alog" "$blog"
	[ $((fa + fb)) = 0 ]
}

if lanes_wanted "$@"; then
	run_lanes
	exit
fi
# The default run directory after the sections (issue 41 item 4): the
# sections use a run directory of their own, but some tests, and runs by
# hand, use the default one. faultctl gc, then no file of a group with no
# live member may be older than the kept hour there.
gc_default() {
	local d f left=""
	d="/tmp/faultnet-$(id -u)"
	[ -x build/faultctl ] && [ -d "$d" ] || return 0
	env -u FAULTNET_RUNDIR -u XDG_RUNTIME_DIR build/faultctl gc >/dev/null
	# A .done past the hour is one; a group's other files are while it has
	# no member, no counts kept (a .done within the hour) and none of them
	# changed within the hour (gc keeps them together: a group used again
	# later keeps its first lock's time).
	while IFS= read -r f; do
		case $f in
		*.done) left="$left $f" ;;
		*) compgen -G "$d/${f%.*}.*.*.*.mem" >/dev/null ||
			compgen -G "$d/${f%.*}.*.*.*.done" >/dev/null ||
			[ -n "$(find "$d" -maxdepth 1 -type f -mmin -61 \( -name "${f%.*}.journal" \
				-o -name "${f%.*}.seq" -o -name "${f%.*}.lock" -o -name "${f%.*}.marks" \))" ] ||
			left="$left $f" ;;
		esac
	# The run's CA (preload/tls/ca.c: ca.lock among its files) is no
	# group's, as gc knows: a CA made over an hour ago kept its lock.
	done < <(find "$d" -maxdepth 1 -type f -mmin +61 \( -name '*.journal' -o -name '*.seq' \
		-o -name '*.lock' -o -name '*.marks' -o -name '*.done' \) ! -name 'ca.*' -printf '%f\n')
	if [ -z "$left" ]; then
		echo "  ok   - after faultctl gc, $d holds no file of a finished group past the kept hour"
		echo pass >>"$FN_COUNTS"
	else
		echo "  FAIL - after faultctl gc, $d still holds files of finished groups past the kept hour:$(echo "$left" | cut -c1-300)"
		echo fail >>"$FN_COUNTS"
	fi
}

# The whole run is also kept in a log, so that the closing lines can name
# what failed: a long run's first failure may be far above its end.
FN_LOG=$(mktemp)
trap 'rm -rf "$FN_COUNTS" "$FAULTNET_RUNDIR" "$FN_LOG"' EXIT
for section in "$@"; do
	if [ -z "${FN_PIPE:-}" ]; then
		# find -lname's pattern for this subshell's output, "pipe:[N]".
		me=$BASHPID
		FN_PIPE=$(readlink "/proc/$me/fd/1" | sed 's/[][]/\\&/g')
	fi
	run_section "$section"
done 2>&1 | tee "$FN_LOG"
gc_default 2>&1 | tee -a "$FN_LOG"

p=$(grep -c '^pass$' "$FN_COUNTS")
f=$(grep -c '^fail$' "$FN_COUNTS")
s=$(grep -c '^skip$' "$FN_COUNTS")
echo
if [ "$f" != 0 ]; then
	echo "what failed:"
	grep -E '^\s+FAIL - |Test: .*FAILED|^FAILED |^ERROR |^not ok ' "$FN_LOG" | cut -c1-300
fi
echo "$p passed, $f failed, $s skipped"
[ "$f" = 0 ]
