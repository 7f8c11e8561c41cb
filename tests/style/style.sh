#!/bin/bash
# style.sh - the code builds with clang as well as gcc, and follows
# .clang-format.
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
. "$root/tests/lib.sh"
cd "$root" || exit 1

run make -s CC=clang BUILD=build/clang all
check "builds with clang -Wall -Wextra -Werror" [ "$rc" = 0 ]
run clang-format --dry-run --Werror core/*.[ch] preload/*.c preload/*/*.[ch] ctl/*.[ch] ctl/*/*.[ch] bpf/*.[ch] tests/*.h tests/*/*.c tests/*/*.h
check "sources follow .clang-format" [ "$rc" = 0 ]
[ -n "$err" ] && echo "$err" | head -20
[ "$failed" = 0 ]
