# runner.sh - how tests/run.sh runs a section and a CUnit program: each
# under a time limit, their counts added to the run's, and what they left
# running found, killed and counted. Sourced by run.sh, and by
# tests/style/runner_test.sh, which checks it with stand-ins. Needs
# FN_COUNTS (and for run_section, PER_BUILD and FN_PIPE).

# Those of the pids given that are still running, one per line (a zombie
# holds nothing; where pid 1 does not reap, an orphan that has ended stays
# one), and the same with their command lines, on one line.
live_pids() {
	local p st
	for p in $1; do
		st=$(cut -d')' -f2 "/proc/$p/stat" 2>/dev/null | cut -c2)
		[ -n "$st" ] && [ "$st" != Z ] && echo "$p"
	done
}
described() {
	local p
	for p in $1; do
		printf ' %s (%s)' "$p" "$(tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | cut -c1-80)"
	done
}

# Runs a CUnit program (its last argument; the ones before set its
# environment) and adds its test counts to the total. A program that has
# not ended within FN_PROG_LIMIT seconds (900; the longest, under a
# sanitizer, takes under a minute) is stopped with every process it forked
# (timeout makes its own process group and signals all of it): one failure
# naming the test it was in, and the rest of its section still runs, where
# a hang held the section until its own limit and took a core from the
# other lane all that time. What the program leaves running in that group
# once it has ended is killed and counted as a failure. The group's leader
# is noted in the section's FN_PROG_PIDS while it runs: if the section's
# own limit stops the section first, end_leftovers ends the group too.
cunit() {
	local log pidf tpid left limit=${FN_PROG_LIMIT:-900} t0=$SECONDS
	log=$(mktemp)
	pidf=$(mktemp -p "${FN_PROG_PIDS:-${TMPDIR:-/tmp}}" pid.XXXXXX)
	sh -c 'echo $$ >"$0"; exec timeout -k 20 "$@"' "$pidf" "$limit" "$@" >"$log" 2>&1
	local rc=$?
	tpid=$(cat "$pidf")
	rm -f "$pidf"
	grep -E '^\s+Test: .*(FAILED|passed)|^\s+[0-9]+\. |^Run Summary|^\s+(suites|tests|asserts) ' "$log"
	read -r _ _ ran ok bad _ < <(grep -E '^\s+tests ' "$log")
	# A test that skips prints "\n  skip - REASON" and returns, which
	# CUnit counts as passed (and ends the line with): a skip instead.
	local skips
	skips=$(grep -E '^\s+skip - ' "$log" | sed 's/passed$//')
	[ -n "$skips" ] && echo "$skips"
	left=$([ -n "$tpid" ] && live_pids "$(pgrep -g "$tpid")")
	if [ -n "$left" ]; then
		echo "  FAIL - ${*: -1} left processes running, now killed:$(described "$left")"
		kill -KILL -- "-$tpid" 2>/dev/null
		echo fail >>"$FN_COUNTS"
	fi
	# 124 (or 137 after the KILL) from timeout, at its limit: a SIGKILL
	# from elsewhere (the OOM killer) is a program that did not finish.
	if { [ "$rc" = 124 ] || [ "$rc" = 137 ]; } && [ $((SECONDS - t0)) -ge "$limit" ]; then
		echo "  FAIL - ${*: -1} did not end within $limit s: stopped in:"
		grep -E '^\s+Test: ' "$log" | tail -1
		tail -2 "$log"
		echo fail >>"$FN_COUNTS"
	elif [ -z "${ran:-}" ]; then
		echo "  FAIL - ${*: -1} did not finish (exit $rc):"
		tail -20 "$log"
		echo fail >>"$FN_COUNTS"
	else
		local k
		k=$(printf '%s' "$skips" | grep -c 'skip - ')
		for _ in $(seq "$k"); do echo skip >>"$FN_COUNTS"; done
		for _ in $(seq $((ok - k))); do echo pass >>"$FN_COUNTS"; done
		for _ in $(seq "$bad"); do echo fail >>"$FN_COUNTS"; done
		[ "$rc" = 0 ] || [ "$bad" != 0 ] || {
			echo "  FAIL - ${*: -1} exited $rc"
			echo fail >>"$FN_COUNTS"
		}
	fi
	rm -f "$log"
}

# Runs one section as a job of its own (its own process group) under a time
# limit, then ends whatever it left running: a test that dies before its
# cleanup must cost one failure, never the whole run. A process left holding
# the output pipe would otherwise keep tee, and so make test, waiting for
# ever. FN_SECTION_LIMIT: seconds a section may take (1,800: a run of about
# 48 minutes with one hung section still ends inside CI's 90).
run_section() {
	local section=$1 limit=${FN_SECTION_LIMIT:-1800} pid dog rc t0=$SECONDS
	export FN_PROG_PIDS
	FN_PROG_PIDS=$(mktemp -d)
	set -m
	case " $PER_BUILD " in
	*" $section "*) "s_$section" build "" & ;;
	*) "s_$section" & ;;
	esac
	pid=$!
	(sleep "$limit" && kill -TERM -- "-$pid" && sleep 20 && kill -KILL -- "-$pid") \
		</dev/null >/dev/null 2>&1 &
	dog=$!
	set +m
	wait "$pid"
	rc=$?
	kill -KILL -- "-$dog" 2>/dev/null
	wait "$dog" 2>/dev/null
	if [ $((SECONDS - t0)) -ge "$limit" ]; then
		echo "  FAIL - section $section did not end within $limit s (exit $rc): stopped"
		echo fail >>"$FN_COUNTS"
	fi
	end_leftovers "$section" "$pid"
	rm -rf "$FN_PROG_PIDS"
	echo "--- section $section: $((SECONDS - t0)) s"
}

# Ends, and counts as one failure, what a section left running: its process
# group, and any other process still holding this run's output pipe.
end_leftovers() {
	local section=$1 pgid=$2 scan pids p left self=$BASHPID
	scan=$(mktemp)
	pgrep -g "$pgid" >"$scan" 2>/dev/null
	# The groups of the CUnit programs it was running when stopped.
	for f in "$FN_PROG_PIDS"/pid.*; do
		[ -s "$f" ] && pgrep -g "$(cat "$f")" >>"$scan" 2>/dev/null
	done
	# Standard output and error only: tee reads the same pipe on its fd 0.
	find /proc/[0-9]*/fd/[12] -maxdepth 0 -lname "$FN_PIPE" -printf '%h\n' \
		</dev/null >>"$scan" 2>/dev/null
	pids=$(sed -n 's|^/proc/\([0-9]*\)/fd$|\1|p; /^[0-9]*$/p' "$scan" | sort -un)
	rm -f "$scan"
	left=$(live_pids "$(echo "$pids" | grep -vx "$self")")
	[ -z "$left" ] && return
	echo "  FAIL - section $section left processes running, now killed:$(described "$left")"
	for p in $left; do
		kill -KILL "$p" 2>/dev/null
	done
	echo fail >>"$FN_COUNTS"
}
