#!/bin/bash
# test-root.sh - a Debian 12 root built by debootstrap for the container
# tests (tests/containers), cached so that it is built once per machine and
# reused by every later run: `test-root.sh NAME` prints the root's path.
#   minbase  debootstrap --variant=minbase: glibc, bash, coreutils, none of the
#            libraries the shim loads at run time (libconfig, http-parser,
#            OpenSSL, nghttp2), so a bundle can be shown to bring its own.
#   py       minbase with curl and python3-requests (and what they need):
#            the image the Docker part imports (curl, and the Python
#            retry-storm workers of tests/http/storm.py).
# The cache is $FAULTNET_ROOTS (default /var/tmp/faultnet-roots); a root is
# used only once complete (built into NAME.tmp, then renamed). Needs root.
set -u
name=${1:?usage: test-root.sh minbase|py}
case $name in
minbase) include="" ;;
py) include="--include=curl,python3-requests" ;;
*) echo "test-root: unknown root $name (minbase or py)" >&2; exit 2 ;;
esac
cache=${FAULTNET_ROOTS:-/var/tmp/faultnet-roots}
root=$cache/$name
if [ -x "$root/bin/bash" ]; then echo "$root"; exit 0; fi
[ "$(id -u)" = 0 ] || { echo "test-root: not root, so no root can be built" >&2; exit 1; }
command -v debootstrap >/dev/null 2>&1 || { echo "test-root: debootstrap is not installed" >&2; exit 1; }
# The Debian mirror this machine's apt uses (deb822 or one-line format).
mirror=$(grep -hs '^URIs:' /etc/apt/sources.list.d/*.sources | awk '{print $2}' | grep -v security | head -1)
[ -n "$mirror" ] || mirror=$(grep -hs '^deb ' /etc/apt/sources.list | awk '{print $2}' | grep -v security | head -1)
mirror=${mirror:-http://deb.debian.org/debian}
mkdir -p "$cache" && chmod 755 "$cache"
# Two test runs at once build it once: the second waits, then finds it.
exec 9>"$cache/.lock"
flock 9
if [ -x "$root/bin/bash" ]; then echo "$root"; exit 0; fi
rm -rf --one-file-system "$root.tmp"
# shellcheck disable=SC2086
if ! debootstrap --variant=minbase $include bookworm "$root.tmp" "$mirror" >"$root.log" 2>&1; then
	tail -5 "$root.log" >&2
	echo "test-root: debootstrap of $name from $mirror failed (log: $root.log)" >&2
	exit 1
fi
# Nothing of apt's download cache is needed to run: the root stays small.
rm -rf "$root.tmp"/var/cache/apt/archives/*.deb "$root.tmp"/var/lib/apt/lists/*
mv "$root.tmp" "$root" && rm -f "$root.log"
echo "$root"
