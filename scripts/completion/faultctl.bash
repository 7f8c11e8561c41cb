# faultctl.bash - bash completion for faultctl: verbs, options, the rule
# names of the target group's live processes (asked of faultctl itself),
# and files where a verb takes one (policies: *.conf, scenarios: *.scenario).
# Installed as /usr/share/bash-completion/completions/faultctl.

_faultctl_rules()
{
	# The group or pids given so far on the line select the targets.
	local args=() i
	for ((i = 1; i < COMP_CWORD; i++)); do
		case "${COMP_WORDS[i]}" in
		-g | -p) args+=("${COMP_WORDS[i]}" "${COMP_WORDS[i + 1]}") ;;
		esac
	done
	faultctl "${args[@]}" --json rules 2>/dev/null |
		sed -n 's/.*"name":"\([^"]*\)".*/\1/p' | sort -u
}

_faultctl()
{
	local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD - 1]}
	# The verbs are faultctl's own table (faultctl help --verbs).
	local verbs
	verbs=$(faultctl help --verbs 2>/dev/null | cut -d: -f1)
	local verb="" i
	for ((i = 1; i < COMP_CWORD; i++)); do
		case "${COMP_WORDS[i]}" in
		-g | -p) ((i++)) ;;
		-*) ;;
		*) verb=${COMP_WORDS[i]}; break ;;
		esac
	done
	case "$prev" in
	-g | -p | --zone) return 0 ;;
	--config | load) COMPREPLY=($(compgen -f -X '!*.conf' -- "$cur") $(compgen -d -- "$cur")); return 0 ;;
	--report) COMPREPLY=($(compgen -d -- "$cur")); return 0 ;;
	--requests | --har) COMPREPLY=($(compgen -f -- "$cur")); return 0 ;;
	--rule | --host | --status) return 0 ;;
	esac
	if [ -z "$verb" ]; then
		COMPREPLY=($(compgen -W "$verbs -p -g --json --help --version" -- "$cur"))
		return 0
	fi
	case "$verb" in
	enable | disable | rm) COMPREPLY=($(compgen -W "$(_faultctl_rules)" -- "$cur")) ;;
	check) COMPREPLY=($(compgen -f -X '!*.@(conf|scenario)' -- "$cur") $(compgen -d -- "$cur")) ;;
	scenario) COMPREPLY=($(compgen -W "--report --strict --" -- "$cur") $(compgen -f -X '!*.scenario' -- "$cur")) ;;
	run) COMPREPLY=($(compgen -W "--config --zone -g --stats --requests --strict --allow-unreached --ca-vars --backend=shim --backend=bpf --backend=auto --" -- "$cur")) ;;
	events) COMPREPLY=($(compgen -W "--follow" -- "$cur")) ;;
	requests) COMPREPLY=($(compgen -W "--rule --host --status --json --follow --per-call --har" -- "$cur") $(compgen -f -- "$cur")) ;;
	add) COMPREPLY=($(compgen -W "--first" -- "$cur")) ;;
	esac
	return 0
}
complete -F _faultctl faultctl
