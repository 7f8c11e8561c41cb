#!/bin/bash
# layout.sh - the layout rules of docs/ARCHITECTURE.md, counted as checks:
# only preload/hooks.c refers to a name the shim exports (nm -u on every other
# object), calls and includes go only downward between rooms, and every
# source file opens with a comment saying what it is for.
# usage: layout.sh BUILD_DIR
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
. "$here/../lib.sh"
build=${1:-build}

out=$(/usr/bin/python3 "$here/check_layout.py" "$root/$build" 2>&1)
rc=$?
echo "$out" | sed 's/^/    /'
check "layout: no object but the hooks refers to an exported name; no upward call or include" [ "$rc" = 0 ]

# The shim's dynamic symbol table holds the interposed functions only.
extra=$(nm -D --defined-only "$root/$build/libfaultnet.so" | awk '{print $3}' | grep -v '^_init$\|^_fini$' |
	grep -vxF -f <(sed 's|/\*.*\*/||' "$root/preload/exports.map" | tr ';' '\n' | sed 's/global://; s/ //g' | grep -v '^$'))
check "libfaultnet.so exports only what exports.map names${extra:+ (extra: $extra)}" [ -z "$extra" ]

missing=""
for f in "$root"/core/*.[ch] "$root"/preload/*.c "$root"/preload/*/*.[ch] "$root"/ctl/*.[ch] "$root"/bpf/*.[ch]; do
	head -c 2 "$f" | grep -q '^/\*' || missing="$missing ${f#"$root"/}"
done
check "every source opens with a comment saying what it is for${missing:+ (not:$missing)}" [ -z "$missing" ]
[ "$failed" = 0 ]
