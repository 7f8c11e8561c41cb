#!/bin/bash
# deb_test.sh - `make deb`: the package builds from the committed tree,
# lintian finds no error in it, it holds the library, faultctl, the man
# pages, the completion and the policies, and unpacked into an empty root
# its faultctl runs curl under the installed policy from the installed
# paths (the fresh-check root also installs it with dpkg: scripts/).
# usage: deb_test.sh
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root" || exit 1
ok() { echo "  ok   - $1"; echo pass >>"${FN_COUNTS:-/dev/null}"; }
bad() { echo "  FAIL - $1"; echo fail >>"${FN_COUNTS:-/dev/null}"; }
log=$(mktemp)
tmp=$(mktemp -d)
trap 'rm -rf "$log" "$tmp"' EXIT

if ! make --no-print-directory deb >"$log" 2>&1; then
	bad "make deb: $(tail -5 "$log")"
	exit 0
fi
deb=$(ls build/deb/faultnet_*_amd64.deb | head -1)
ok "make deb built $(basename "$deb")"
errors=$(lintian "$deb" 2>/dev/null | grep '^E:')
[ -z "$errors" ] && ok "lintian: no error ($(lintian "$deb" 2>/dev/null | grep -c '^W:') warnings)" ||
	bad "lintian: $errors"
want="usr/lib/libfaultnet.so usr/bin/faultctl usr/bin/faultnet-probe usr/share/man/man1/faultctl.1.gz
usr/share/man/man5/faultnet.conf.5.gz usr/share/man/man7/libfaultnet.7.gz
usr/share/bash-completion/completions/faultctl usr/share/zsh/vendor-completions/_faultctl
usr/share/faultnet/policies/egress-blackhole.conf"
have=$(dpkg-deb -c "$deb" | awk '{print $6}')
missing=""
for f in $want; do echo "$have" | grep -qx "./$f" || missing="$missing $f"; done
[ -z "$missing" ] && ok "the package holds the library, faultctl, man pages, completion, policies" ||
	bad "missing from the package:$missing"

dpkg -x "$deb" "$tmp"
# egress-blackhole.conf blackholes 127.66.0.0/16: curl's connect times out
# (exit 28) instead of being refused at once (exit 7) as without faultnet.
FAULTNET_RUNDIR=$tmp/run "$tmp/usr/bin/faultctl" run \
	--config "$tmp/usr/share/faultnet/policies/egress-blackhole.conf" -- \
	curl -s --connect-timeout 1 http://127.66.251.9:8080/ >/dev/null 2>&1
rc=$?
plain=$(curl -s --connect-timeout 1 http://127.66.251.9:8080/ >/dev/null 2>&1; echo $?)
[ "$rc" = 28 ] && [ "$plain" = 7 ] && ok "unpacked: faultctl runs curl under the installed policy (exit 28; 7 without)" ||
	bad "unpacked faultctl: curl exit $rc (without faultnet: $plain)"
