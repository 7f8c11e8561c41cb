#!/bin/bash
# style.sh - the code builds with clang as well as gcc, and follows
# .clang-format; tests/runner.sh, which runs every section and CUnit
# program, does what it says (runner_test.sh).
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
. "$root/tests/lib.sh"
cd "$root" || exit 1

run make -s CC=clang BUILD=build/clang all
check "builds with clang -Wall -Wextra -Werror" [ "$rc" = 0 ]
run clang-format --dry-run --Werror core/*.[ch] preload/*.c preload/*/*.[ch] ctl/*.[ch] ctl/*/*.[ch] bpf/*.[ch] tests/*.h tests/*/*.c tests/*/*.h
check "sources follow .clang-format" [ "$rc" = 0 ]
[ -n "$err" ] && echo "$err" | head -20
# The runner of every CUnit program, with stand-ins (its own counts).
bash tests/style/runner_test.sh || failed=$((failed + 1))
[ "$failed" = 0 ]
