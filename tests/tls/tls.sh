#!/bin/bash
# tls.sh - preload/tls on its own, through build/tests/tls_tool: the run's
# CA (made once per run directory, owner only, reused, refused when another
# account could have written it), the leaves it signs (verified by openssl
# and by curl; the right subjectAltName; one signature per name), real
# handshakes over loopback with the caller's ALPN choice, and OpenSSL kept
# out of the program's symbol scope until first used. Root: the hostile
# check creates an account (fntls) and removes it. Loopback only.
# usage: tls.sh BUILD_DIR
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
. "$here/../lib.sh"
build=${1:-build}
tool="$root/$build/tests/tls_tool"
W=$(mktemp -d)
SPID=""
trap '[ -n "$SPID" ] && kill "$SPID" 2>/dev/null; userdel fntls 2>/dev/null; rm -rf "$W"' EXIT

# A fresh run directory, mode 0700 as core/rundir.c makes them.
rundir() { mkdir -m 700 "$W/$1" && echo "$W/$1"; }

# serve N ALPN: tls_tool serving N connections, in the background; its
# port in SPORT, its log in $W/serve.log.
serve() {
	"$tool" serve "$1" "$2" >"$W/serve.log" 2>&1 &
	SPID=$!
	SPORT=""
	for _ in $(seq 50); do
		SPORT=$(head -1 "$W/serve.log" 2>/dev/null)
		[ -n "$SPORT" ] && return 0
		sleep 0.1
	done
	return 1
}

# Waits for the server to end (it serves a fixed count), at most 10 s.
served() {
	for _ in $(seq 100); do
		kill -0 "$SPID" 2>/dev/null || break
		sleep 0.1
	done
	kill "$SPID" 2>/dev/null
	wait "$SPID" 2>/dev/null
	SPID=""
}

# client NAME|- ARGS...: openssl s_client against the server with the run's
# CA, SNI NAME (- for none), one HTTP request; the whole transcript.
client() {
	local sni=$1
	shift
	local opt=(-servername "$sni")
	[ "$sni" = - ] && opt=(-noservername)
	printf 'GET / HTTP/1.1\r\nHost: x\r\n\r\n' |
		timeout 10 openssl s_client -connect "127.0.0.1:$SPORT" "${opt[@]}" -showcerts -ign_eof "$@" 2>&1
}

# The first certificate of a transcript: the leaf.
leaf_of() { awk '/BEGIN CERTIFICATE/{p=1} p{print} /END CERTIFICATE/{exit}'; }

echo "--- the run's CA"
R=$(rundir ca)
fp1=$("$tool" ca "$R")
check "the CA is made in a fresh run directory (fingerprint $fp1)" holds '[ ${#fp1} = 64 ]'
check "ca.key and ca.pem are mode 0600, owned by the euid" holds \
	"[ \"\$(stat -c '%a %u' $R/ca.key $R/ca.pem | sort -u)\" = '600 $(id -u)' ]"
fp2=$("$tool" ca "$R")
check "a second process reuses the same CA (same fingerprint)" [ "$fp1" = "$fp2" ]
fp3=$(FAULTNET_RUNDIR=$R "$tool" get)
check "the process's CA (FAULTNET_RUNDIR) is the run directory's" [ "$fp1" = "$fp3" ]
P=$(rundir race)
for i in 1 2 3 4 5 6; do "$tool" ca "$P" >"$W/race.$i" & done
wait
check "six processes starting at once make one CA between them" \
	[ "$(sort -u "$W"/race.* | wc -l)" = 1 ]
text=$(openssl x509 -in "$R/ca.pem" -noout -text)
check "the CA: basicConstraints critical CA:TRUE pathlen:0" holds \
	"grep -A1 'Basic Constraints: critical' <<<\"\$text\" | grep -q 'CA:TRUE, pathlen:0'"
check "the CA: keyUsage critical keyCertSign, cRLSign" holds \
	"grep -A1 'Key Usage: critical' <<<\"\$text\" | grep -q 'Certificate Sign, CRL Sign'"
check "the CA names faultnet and the owner's uid" holds \
	"grep -q 'Subject: O = faultnet, CN = \"faultnet run CA, uid $(id -u)\"' <<<\"\$text\""
nb=$(date -d "$(openssl x509 -in "$R/ca.pem" -noout -startdate | cut -d= -f2)" +%s)
check "the CA is valid from an hour ago ($(($(date +%s) - nb)) s)" between 3500 3700 $(($(date +%s) - nb))
check "ca.key is the key of ca.pem" holds \
	"[ \"\$(openssl pkey -in $R/ca.key -pubout)\" = \"\$(openssl x509 -in $R/ca.pem -noout -pubkey)\" ]"

echo "--- a CA another account could have written is refused"
# refused NAME SETUP...: a copy of the CA, changed by SETUP (run in the
# copy), must be refused with a reason naming the defect.
refused() {
	local name=$1 why=$2 d out rc
	shift 2
	nbad=$((nbad + 1))
	d=$(rundir "bad$nbad")
	cp -p "$R/ca.pem" "$R/ca.key" "$d/"
	[ -n "$d" ] && (cd "$d" && eval "$*")
	out=$("$tool" ca "$d")
	rc=$?
	check "$name: refused ($out)" holds "[ $rc = 1 ] && grep -q -- '$why' <<<\"\$out\""
}
nbad=0
refused "ca.key group-readable (0640)" "is not mode 0600" chmod 640 ca.key
refused "ca.key world-readable (0604)" "is not mode 0600" chmod 604 ca.key
refused "ca.pem group-writable (0620)" "is not mode 0600" chmod 620 ca.pem
refused "ca.key a symbolic link to a 0600 key of ours" "is a symbolic link" \
	"mv ca.key ../real.key && ln -s ../real.key ca.key"
refused "ca.key owned by another uid" "is owned by another user" chown 65534 ca.key
refused "ca.key a FIFO (no hang)" "is not a regular file" "rm ca.key && mkfifo -m 600 ca.key"
refused "ca.pem a directory" "is not a regular file" "rm ca.pem && mkdir -m 700 ca.pem"
other=$(rundir other)
"$tool" ca "$other" >/dev/null
refused "ca.pem another CA's certificate (the key does not match)" "not a CA certificate and its key" \
	"cp -p $other/ca.pem ca.pem"
refused "ca.pem a leaf-like certificate (not a CA) with its own key" "not a CA certificate and its key" \
	"openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj /CN=x -keyout ca.key -out ca.pem -days 1 -addext basicConstraints=CA:FALSE 2>/dev/null && chmod 600 ca.key ca.pem"
d=$(rundir bad-untouched)
cp -p "$R/ca.pem" "$R/ca.key" "$d/" && chmod 640 "$d/ca.key"
"$tool" ca "$d" >/dev/null
check "a refused CA is left as it was (not replaced, still 0640, same key)" holds \
	"[ \"\$(stat -c %a $d/ca.key)\" = 640 ] && cmp -s $d/ca.key $R/ca.key"

echo "--- OpenSSL loaded privately, and only when first needed"
out=$("$tool" private)
check "libssl is not mapped before the first use, and is after ($out)" holds \
	"grep -q 'mapped-before=0 mapped-after=1' <<<\"\$out\""
check "the relay's OpenSSL is not in the program's symbol scope" holds "grep -q 'in-app-scope=0' <<<\"\$out\""
check "the program's own OpenSSL, loaded after, is a copy apart" holds "grep -q 'same-as-app=0' <<<\"\$out\""

echo "--- leaves: one per name, signed by the run's CA"
export FAULTNET_RUNDIR=$R
# Each name twice: the second handshake for a name must cost no signature.
names="api.example.test api.example.test bucket.s3.example.test *.s3.example.test - -"
serve 6 http/1.1
i=0
for n in $names; do
	i=$((i + 1))
	client "$n" -CAfile "$R/ca.pem" -verify_return_error >"$W/t.$i"
	leaf_of <"$W/t.$i" >"$W/leaf.$i"
done
served
for i in 1 3 4 5; do
	n=$(echo $names | cut -d' ' -f$i)
	want="DNS:$n"
	[ "$n" = - ] && want="IP Address:127.0.0.1"
	check "the leaf for ${n/-/no SNI (127.0.0.1)}: openssl verify -CAfile ca.pem accepts it" holds \
		"openssl verify -CAfile $R/ca.pem $W/leaf.$i | grep -q ': OK'"
	check "the leaf for ${n/-/no SNI}: subjectAltName is exactly $want" holds \
		"[ \"\$(openssl x509 -in $W/leaf.$i -noout -ext subjectAltName | sed -n 2p | tr -d ' ')\" = '${want// /}' ]"
done
check "s_client verified every handshake (Verify return code: 0)" \
	[ "$(grep -l 'Verify return code: 0 (ok)' "$W"/t.* | wc -l)" = 6 ]
ltext=$(openssl x509 -in "$W/leaf.1" -noout -text)
check "a leaf: extendedKeyUsage serverAuth, not a CA" holds \
	"grep -q 'TLS Web Server Authentication' <<<\"\$ltext\" && grep -q 'CA:FALSE' <<<\"\$ltext\""
check "a leaf: a 16-byte serial, signed with SHA-256" holds \
	"[ \$(openssl x509 -in $W/leaf.1 -noout -serial | cut -d= -f2 | tr -d '\n' | wc -c) = 32 ] && grep -q 'ecdsa-with-SHA256' <<<\"\$ltext\""
lnb=$(date -d "$(openssl x509 -in "$W/leaf.1" -noout -startdate | cut -d= -f2)" +%s)
lna=$(date -d "$(openssl x509 -in "$W/leaf.1" -noout -enddate | cut -d= -f2)" +%s)
cna=$(date -d "$(openssl x509 -in "$R/ca.pem" -noout -enddate | cut -d= -f2)" +%s)
check "a leaf is valid from an hour ago and ends no later than the CA" holds \
	"between 3500 3700 $(($(date +%s) - lnb)) && [ $lna -le $cna ]"
check "openssl verify with the system's roots alone rejects a leaf (the CA is in no system store)" holds \
	"! openssl verify $W/leaf.1 >/dev/null 2>&1"
sigs=$(sed -n 's/.*signatures=\([0-9]*\).*/\1/p' "$W/serve.log" | tr '\n' ' ')
check "only the first handshake for a name pays a signature (signatures after each: $sigs)" \
	[ "$sigs" = "1 1 2 3 4 4 " ]
same=$(cmp -s "$W/leaf.1" "$W/leaf.2" && echo same)
check "the second handshake for a name gets the same leaf" [ "$same" = same ]

echo "--- curl over loopback"
serve 2 http/1.1
out=$(timeout 10 curl -sS --cacert "$R/ca.pem" --resolve "api.example.test:$SPORT:127.0.0.1" \
	-w '%{http_version}' "https://api.example.test:$SPORT/" 2>&1 | tr '\n' ' ')
check "curl --cacert ca.pem https://api.example.test verifies the leaf and gets the answer ($out)" \
	[ "$out" = "ok 1.1" ]
out=$(timeout 10 curl -sS --resolve "api.example.test:$SPORT:127.0.0.1" "https://api.example.test:$SPORT/" 2>&1)
rc=$?
check "curl without --cacert refuses it (exit $rc: the CA is never in the system store)" holds \
	"[ $rc = 60 ] && grep -q 'unable to get local issuer certificate' <<<\"\$out\""
served

echo "--- ALPN: the caller's choice among the client's offer (h2,http/1.1)"
for choice in http/1.1 h2 h2,http/1.1 -; do
	serve 1 "$choice"
	out=$(client api.example.test -CAfile "$R/ca.pem" -alpn h2,http/1.1 | grep -E 'ALPN|No ALPN')
	served
	want="ALPN protocol: ${choice%%,*}"
	[ "$choice" = - ] && want="No ALPN negotiated"
	check "the caller chose ${choice/-/none}: the client gets '$want'" [ "$out" = "$want" ]
done
serve 1 spdy/3
out=$(client api.example.test -CAfile "$R/ca.pem" -alpn h2,http/1.1)
served
check "a choice the client did not offer: no ALPN, the handshake still verified" holds \
	"grep -q '^No ALPN negotiated' <<<\"\$out\" && grep -q '^Verify return code: 0 (ok)' <<<\"\$out\""

echo "--- another account"
if [ "$(id -u)" = 0 ] && command -v useradd >/dev/null; then
	userdel fntls 2>/dev/null
	useradd -M -N -s /usr/sbin/nologin fntls
	# The directories opened to it, so that only the files' own modes stand.
	chmod 755 "$W" "$R"
	out=$(runuser -u fntls -- cat "$R/ca.key" 2>&1)
	check "another account cannot read ca.key, even through an open directory ($out)" holds \
		"grep -q 'Permission denied' <<<\"\$out\""
	# A copy it can run: a tree cloned into root's home (mode 0700) is
	# closed to it, and runuser would fail before the tool ran.
	cp "$tool" "$W/tls_tool.other" && chmod 755 "$W/tls_tool.other"
	out=$(runuser -u fntls -- "$W/tls_tool.other" ca "$R" 2>&1)
	check "another account's process cannot take the run's CA as its own ($out)" holds \
		"grep -q '^refused: .*ca.pem Permission denied' <<<\"\$out\""
	check "its attempt changed nothing (same CA)" [ "$("$tool" ca "$R")" = "$fp1" ]
	chmod 700 "$W" "$R"
	userdel fntls
else
	echo "  skip - another account: needs root and useradd"
	echo skip >>"$FN_COUNTS"
fi
[ "$failed" = 0 ]
