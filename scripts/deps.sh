#!/bin/sh
# deps.sh - installs the Debian 12 packages faultnet needs when they are
# missing: `deps.sh build` for the build, `deps.sh test` for the tests,
# `deps.sh conformance` for the real-client conformance suite too,
# `deps.sh bench` for make bench (valgrind, and the peers it compares with:
# libfiu's preload from fiu-utils, and trickle).
# As root it runs apt-get; otherwise it names the packages and stops.
# A package written as command=package counts as present when the command
# is on PATH (Node.js and npm may come from elsewhere than Debian).
set -eu

# --check: only say what is missing, install nothing.
check_only=""
if [ "${1:-}" = --check ]; then
	check_only=1
	shift
fi

build_pkgs="gcc libc6-dev libconfig-dev libhttp-parser-dev libssl-dev libnghttp2-dev"
# clang brings its sanitizer and libFuzzer runtimes only as a recommendation
# (libclang-rt-14-dev), and this script installs without recommendations.
test_pkgs="libcunit1-dev openssl python3-cryptography libbpf-dev bpftool liburing-dev curl dig=bind9-dnsutils python3-requests python3-httpx python3 node=nodejs clang libclang-rt-14-dev clang-format binutils procps valgrind strace go=golang-go php=php-cli php-curl nft=nftables ip=iproute2 rsvg-convert=librsvg2-bin python3-pil chromium fonts-dejavu-core scdoc groff=groff-base zsh python3-venv python3-pytest python3-setuptools python3-wheel build-essential dpkg-dev debhelper fakeroot lintian libpython3.11-testsuite patchelf debootstrap dockerd=docker.io docker-compose python3-h2 nghttpd=nghttp2-server javac=openjdk-17-jdk-headless"
# grpcio: the h2 section's gRPC clients and reference servers (hyper-h2 is above).
test_pkgs="$test_pkgs python3-grpcio"
# grpc-go 1.33 as Go source in /usr/share/gocode: the bpf section's static
# Go gRPC client (tests/bpf/gogrpc.go), built offline.
test_pkgs="$test_pkgs golang-google-grpc-dev"
# nghttp: h2_engine.py watches frames with it (nghttp2-client; also bench's h2load).
test_pkgs="$test_pkgs nghttp=nghttp2-client"
# wget and git (libcurl-gnutls): the tls section's GnuTLS clients (tests/tls/https.py).
test_pkgs="$test_pkgs wget git"
# h2load, nghttpd and nghttpx: the HTTP/2 section (one connection, many
# streams; nghttpx is the h2 relay faultnet is compared with); haproxy: the
# many-connections section (its TCP relay, nbthread 2).
bench_pkgs="valgrind fiu-utils trickle python3 socat nghttp2-client nghttp2-proxy nghttp2-server haproxy"
# stunnel4: the TLS-terminating relay bench.py section 12 compares with (beside socat).
bench_pkgs="$bench_pkgs stunnel4"
deb_pkgs="build-essential dpkg-dev debhelper fakeroot lintian scdoc"
conformance_pkgs="wget python3-requests python3-boto3 python3-httpx python3-aiohttp perl javac=openjdk-17-jdk-headless psql=postgresql-client redis-cli=redis-tools npm=npm"

case "${1:-build}" in
build) want="$build_pkgs" ;;
test) want="$build_pkgs $test_pkgs" ;;
conformance) want="$build_pkgs $test_pkgs $conformance_pkgs" ;;
bench) want="$build_pkgs $bench_pkgs" ;;
deb) want="$build_pkgs $deb_pkgs" ;;
*) echo "usage: $0 build|test|conformance|bench|deb" >&2; exit 2 ;;
esac

missing=""
for p in $want; do
	case "$p" in
	*=*)
		command -v "${p%%=*}" >/dev/null 2>&1 && continue
		p=${p#*=}
		;;
	esac
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
		missing="$missing $p"
	fi
done
[ -z "$missing" ] && exit 0

if [ -n "$check_only" ]; then
	echo "faultnet: missing Debian packages:$missing" >&2
	echo "faultnet: 'make deps' (as root) installs them" >&2
	exit 1
fi

if [ "$(id -u)" != 0 ]; then
	echo "faultnet: missing Debian packages:$missing" >&2
	echo "faultnet: run as root: apt-get install$missing" >&2
	exit 1
fi
echo "faultnet: installing$missing" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# shellcheck disable=SC2086
apt-get install -y -qq --no-install-recommends $missing >/dev/null
