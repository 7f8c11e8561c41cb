#!/bin/bash
# man_test.sh - the manual pages: each renders with groff -ww without a
# warning, faultctl(1) lists exactly the verbs `faultctl --help` lists, and
# faultnet.conf(5) describes every action the parser knows.
# usage: man_test.sh BUILD_DIR
set -u
build=$1
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root" || exit 1
ok() { echo "  ok   - $1"; echo pass >>"${FN_COUNTS:-/dev/null}"; }
bad() { echo "  FAIL - $1"; echo fail >>"${FN_COUNTS:-/dev/null}"; }

for page in faultctl.1 faultnet.conf.5 libfaultnet.7 faultnet-probe.1; do
	f="$build/man/$page"
	if [ ! -s "$f" ]; then
		bad "$page was not built (make man)"
		continue
	fi
	warn=$(groff -ww -man -z "$f" 2>&1)
	[ -z "$warn" ] && ok "$page renders with groff -ww without a warning" ||
		bad "$page: groff -ww: $warn"
done

# Verbs: faultctl's own table (help --verbs), against the *verb* entries of
# the VERBS section.
help=$("$build/faultctl" help --verbs | cut -d: -f1 | sort -u | tr '\n' ' ')
verbs=$(sed -n '/^# VERBS/,/^# ENVIRONMENT/p' docs/man/faultctl.1.scd)
page=$({
	echo "$verbs" | sed -n 's/^\*\([a-z][a-z]*\)\*.*/\1/p'
	echo "$verbs" | sed -n 's/^\*[a-z]*\*[^*]*\*\([a-z][a-z]*\)\*.*/\1/p'
} | sort -u | tr '\n' ' ')
[ "$help" = "$page" ] && ok "faultctl(1) lists the verbs of faultctl help --verbs ($help)" ||
	bad "verbs differ: help --verbs [$help], faultctl(1) [$page]"

# Actions: the parser names them all when given an unknown one.
tmp=$(mktemp)
printf 'rules = ( { name = "x"; action = "none-such"; } );\n' >"$tmp"
actions=$("$build/faultctl" check "$tmp" 2>&1 | sed 's/.*(expected //; s/)$//; s/ or /, /' | tr -d ' ' | tr ',' '\n')
rm -f "$tmp"
missing=""
for a in $actions; do
	grep -q "^\*$a\*" docs/man/faultnet.conf.5.scd || missing="$missing $a"
done
[ -n "$actions" ] && [ -z "$missing" ] && ok "faultnet.conf(5) describes every action ($(echo $actions | wc -w))" ||
	bad "faultnet.conf(5) lacks actions:$missing"

# faultctl VERB --help: every verb of the page answers with its own line.
badverbs=""
for v in $page; do
	"$build/faultctl" "$v" --help 2>/dev/null | grep -q "^  .*\b$v\b" || badverbs="$badverbs $v"
done
[ -z "$badverbs" ] && ok "faultctl VERB --help answers for every verb of faultctl(1)" ||
	bad "faultctl VERB --help fails for:$badverbs"

# Rule keys: every key the parser's tables name (core/actions.c's numbers
# and conditions, config_http.c's HTTP and dns keys, match keys) is in
# faultnet.conf(5).
keys=$(sed -n 's/^    {"\([a-z_]*\)", FN_KEY.*/\1/p' core/actions.c)
keys="$keys $(sed -n '/keys\[\] = {"status"/,/NULL}/p' core/config*.c | grep -o '"[a-z_]*"' | tr -d '"')"
keys="$keys answer to port proto from_zone to_zone host method path enabled"
missing=""
for k in $keys; do
	grep -q "\b$k\b" docs/man/faultnet.conf.5.scd || missing="$missing $k"
done
[ -z "$missing" ] && ok "faultnet.conf(5) names every rule key the parser knows ($(echo $keys | wc -w))" ||
	bad "faultnet.conf(5) lacks keys:$missing"
