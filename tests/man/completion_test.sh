#!/bin/bash
# completion_test.sh - bash completion for faultctl, driven as bash drives
# it: verbs, options after a verb, rule names of a live group's process
# (asked of faultctl), policy files; and the zsh function parses.
# usage: completion_test.sh BUILD_DIR
set -u
build=$(cd "$1" && pwd)
root=$(cd "$(dirname "$0")/../.." && pwd)
ok() { echo "  ok   - $1"; echo pass >>"${FN_COUNTS:-/dev/null}"; }
bad() { echo "  FAIL - $1"; echo fail >>"${FN_COUNTS:-/dev/null}"; }
export PATH="$build:$PATH"
tmp=$(mktemp -d)
trap 'kill $agent 2>/dev/null; rm -rf "$tmp"' EXIT

complete_line() { # words...: what bash would offer for the last word
	bash -c 'source "$0"; COMP_WORDS=("${@}"); COMP_CWORD=$(($# - 1)); _faultctl; echo "${COMPREPLY[*]}"' \
		"$root/scripts/completion/faultctl.bash" "$@"
}

got=$(complete_line faultctl s)
[ "$got" = "scenario stats" ] && ok "verbs: 's' offers scenario and stats" || bad "verbs: got '$got'"
got=$(complete_line faultctl "")
want=$(faultctl help --verbs | cut -d: -f1 | tr '\n' ' ')
[ "$got" = "${want}-p -g --json --help --version" ] && ok "verbs: the completion offers faultctl's own verb table" ||
	bad "verbs: got '$got', want '${want}-p -g --json --help --version'"
grep -q "faultctl help --verbs" "$root/scripts/completion/_faultctl" && got=$(zsh -c 'verbs=(${(f)"$(faultctl help --verbs 2>/dev/null)"}); print -l $verbs' | cut -d: -f1 | tr '\n' ' ')
[ "$got" = "$want" ] && ok "zsh: the verbs come from faultctl's table" || bad "zsh verbs: got '$got'"
got=$(complete_line faultctl run --s)
[ "$got" = "--stats --strict" ] && ok "run's options: '--s' offers --stats and --strict" || bad "run options: got '$got'"
got=$(complete_line faultctl run --backend=b)
[ "$got" = "--backend=bpf" ] && ok "run's options: '--backend=b' offers --backend=bpf" || bad "backend: got '$got'"

printf 'rules = ( { name = "nat-lost"; action = "blackhole"; match = { to = "127.89.0.1/32"; }; },\n { name = "slow-db"; action = "delay"; delay_ms = 5; } );\n' >"$tmp/p.conf"
faultctl run --config "$tmp/p.conf" -g "comp-$$" -- sleep 60 &
agent=$!
for _ in $(seq 50); do faultctl -g "comp-$$" ps 2>/dev/null | grep -q sleep && break; sleep 0.1; done
got=$(complete_line faultctl -g "comp-$$" enable "")
[ "$got" = "nat-lost slow-db" ] && ok "enable: the rule names of the group's live process" ||
	bad "rule names: got '$got'"
(cd "$tmp" && got=$(complete_line faultctl load "") && [ "$got" = "p.conf" ]) &&
	ok "load: policy files (*.conf)" || bad "load: files"

zsh -n "$root/scripts/completion/_faultctl" && ok "the zsh completion parses (zsh -n)" || bad "zsh -n"
