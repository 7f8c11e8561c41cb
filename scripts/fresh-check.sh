#!/bin/bash
# fresh-check.sh - `make fresh-check`: the README's two commands, `make demo`
# and `make test`, run as root in a fresh Debian 12 root (debootstrap
# --variant=minbase with git and make only), on a clone of this commit, so
# that a package installed by hand on this machine cannot hide a missing
# install step. The root uses this machine's apt sources, CA certificates,
# resolver and npm configuration, so it reaches the same package mirrors.
# Where no root can be built (not root, no debootstrap to be had), it says
# so in one line and runs `make test` in place.
# usage: fresh-check.sh [KEEP_DIR]   (KEEP_DIR: build the root there and keep it)
set -u
src=$(cd "$(dirname "$0")/.." && pwd)

in_place() {
	echo "fresh-check: $1: running make test in place instead"
	exec make -C "$src" test
}

[ "$(id -u)" = 0 ] || in_place "not root, so no fresh root can be built"
if ! command -v debootstrap >/dev/null 2>&1; then
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap \
		>/dev/null 2>&1 || in_place "debootstrap is not installed and cannot be"
fi

# The Debian mirror this machine's apt uses (deb822 or one-line format).
mirror=$(grep -hs '^URIs:' /etc/apt/sources.list.d/*.sources | awk '{print $2}' | grep -v security | head -1)
[ -n "$mirror" ] || mirror=$(grep -hs '^deb ' /etc/apt/sources.list | awk '{print $2}' | grep -v security | head -1)
mirror=${mirror:-http://deb.debian.org/debian}

commit=$(git -C "$src" rev-parse HEAD)
fr=${1:-$(mktemp -d /var/tmp/faultnet-fresh.XXXXXX)}
mounted=()
cleanup() {
	for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do
		umount -R "${mounted[$i]}" 2>/dev/null || umount -lR "${mounted[$i]}"
	done
	# Never across a mount point: a mount left behind keeps its files.
	[ -z "${1:-}" ] && [ -z "$(findmnt -rno TARGET | grep "^$fr/")" ] && rm -rf --one-file-system "$fr"
}
trap 'cleanup "${KEEP:-}"' EXIT
KEEP=${1:-}

# mktemp makes it 0700: a root directory other accounts cannot enter.
chmod 755 "$fr"
echo "fresh-check: Debian 12 minbase with git and make from $mirror into $fr"
t0=$(date +%s)
if ! debootstrap --variant=minbase --include=git,make,ca-certificates bookworm "$fr" "$mirror" \
	>"$fr.debootstrap.log" 2>&1; then
	tail -20 "$fr.debootstrap.log"
	echo "fresh-check: FAIL - debootstrap failed"
	exit 1
fi
rm -f "$fr.debootstrap.log"
echo "fresh-check: root ready in $(($(date +%s) - t0)) s: $(chroot "$fr" dpkg-query -W | wc -l) packages"

# This machine's apt sources, resolver and npm configuration.
rm -f "$fr/etc/apt/sources.list"
for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.sources /etc/apt/sources.list.d/*.list; do
	[ -f "$f" ] && grep -qs 'debian' "$f" && mkdir -p "$fr$(dirname "$f")" && cp "$f" "$fr$f"
done
cp /etc/resolv.conf "$fr/etc/resolv.conf"
cp /etc/hosts "$fr/etc/hosts"
for f in /etc/npmrc /root/.npmrc; do [ -f "$f" ] && mkdir -p "$fr$(dirname "$f")" && cp "$f" "$fr$f"; done
# This machine's own CA certificates (a registry may be reached through a
# proxy that signs with one of them), installed the Debian way.
if ls /usr/local/share/ca-certificates/*.crt >/dev/null 2>&1; then
	cp /usr/local/share/ca-certificates/*.crt "$fr/usr/local/share/ca-certificates/"
	chroot "$fr" update-ca-certificates >/dev/null 2>&1
fi

# The root is made a mount point of its own (bound onto itself, private):
# inside a chroot whose / is no mount point, `unshare --mount` cannot make /
# private ("cannot change root filesystem propagation"), and the tests that
# mount a small tmpfs in a mount namespace of their own need it to.
mount --bind "$fr" "$fr" && mount --make-private "$fr" && mounted+=("$fr")
for m in proc sys dev; do
	case $m in
	proc) mount -t proc proc "$fr/proc" ;;
	*) mount --rbind "/$m" "$fr/$m" && mount --make-rslave "$fr/$m" ;;
	esac
	mounted+=("$fr/$m")
done

# Cloned where a newcomer would, root's home: mode 0700, closed to the
# other accounts the tests act as, so a test that runs the checkout's own
# programs as one of them fails here as on a fresh machine (issue 41 item 8).
chmod 700 "$fr/root"
git clone -q "$src" "$fr/root/faultnet" && git -C "$fr/root/faultnet" checkout -q "$commit"
echo "fresh-check: commit $commit; running the README's commands as root: make demo, make test"
chroot "$fr" /usr/bin/env -i HOME=/root TERM=dumb CI="${CI:-}" LANG=C.UTF-8 \
	PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
	bash -c 'cd /root/faultnet && make demo && make test'
rc=$?
# The package installs in this fresh root, and works from the installed
# paths: faultctl finds the library in /usr/lib, the policy in /usr/share.
if [ $rc = 0 ]; then
	chroot "$fr" /usr/bin/env -i HOME=/root LANG=C.UTF-8 PATH=/usr/sbin:/usr/bin:/sbin:/bin \
		bash -c 'cd /root/faultnet && dpkg -i build/deb/faultnet_*_amd64.deb >/dev/null || exit 1
			faultctl run --config /usr/share/faultnet/policies/egress-blackhole.conf -- \
				curl -s --connect-timeout 1 http://127.66.251.9:8080/
			[ $? = 28 ] && [ -f /usr/share/man/man1/faultctl.1.gz ]'
	deb=$?
	echo "fresh-check: the package installed with dpkg -i and ran curl under the installed policy: $([ $deb = 0 ] && echo ok || echo FAIL)"
	[ $deb = 0 ] || rc=1
fi
echo "fresh-check: packages in the root afterwards: $(chroot "$fr" dpkg-query -W | wc -l)"
echo "fresh-check: $([ $rc = 0 ] && echo ok || echo FAIL) (exit $rc) in $(($(date +%s) - t0)) s"
exit $rc
