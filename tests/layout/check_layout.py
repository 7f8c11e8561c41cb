#!/usr/bin/python3
"""check_layout.py - the layout rules of docs/ARCHITECTURE.md, checked on the
built objects so that they cannot rot:

1. Only the hooks (preload/hooks.c) may refer to a name that preload/hooks.list
   declares (the names the shim exports): any other reference would bind to the shim's own hook and
   re-enter it. Everything else calls libc through LIBC().
2. Calls go only downward between rooms: an object may use a symbol
   defined in its own room or in a room listed below it in ALLOWED.
3. Includes follow the same rule, so a header cannot smuggle an upward
   dependency in as an inline function.

usage: check_layout.py BUILD_DIR   (prints one line per violation)
"""
import os
import re
import subprocess
import sys

# room -> rooms it may use (besides itself).
ALLOWED = {
    "preload": {"preload/intercept", "preload/control", "preload/relay", "preload/sink", "preload/stats", "preload/dns",
             "preload/fd", "preload/base", "core"},
    "preload/intercept": {"preload/relay", "preload/sink", "preload/stats", "preload/dns", "preload/fd", "preload/base",
                       "core"},
    "preload/dns": {"preload/stats", "preload/fd", "preload/base", "core"},
    "preload/control": {"preload/stats", "preload/fd", "preload/base", "core"},
    "preload/relay": {"preload/sink", "preload/stats", "preload/fd", "preload/base", "core"},
    "preload/sink": {"preload/fd", "preload/base", "core"},
    "preload/stats": {"preload/fd", "preload/base", "core"},
    "preload/fd": {"preload/base", "core"},
    "preload/base": {"core"},
    "core": set(),
    "ctl": {"core", "bpf"},
    "bpf": {"core"},
    "ctl/probe": set(),
}
HOOKS = "preload/hooks.c"


def exported_names(root):
    """The names preload/hooks.list declares: the first field of each line."""
    names = []
    for line in open(os.path.join(root, "preload/hooks.list")):
        if line.strip() and not line.lstrip().startswith("#"):
            names.append(line.split("|")[0].strip())
    return set(names)


def symbols(obj, flag):
    out = subprocess.run(["gcc-nm", flag, obj], capture_output=True, text=True, check=True).stdout
    names = set()
    for line in out.splitlines():
        parts = line.split()
        if flag == "-u" and len(parts) >= 2:
            names.add(parts[-1])
        elif flag == "--defined-only" and len(parts) == 3 and parts[1] in "TDBRtdbr":
            names.add(parts[2])
    return names


def sources(root):
    for room in ALLOWED:
        d = os.path.join(root, room)
        for f in sorted(os.listdir(d)):
            if f.endswith(".c") and not f.endswith(".bpf.c"):  # .bpf.c: kernel programs
                yield room, os.path.join(room, f)


def main():
    build = sys.argv[1]
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    exports = exported_names(root)
    srcs = list(sources(root))
    defs, undefs = {}, {}
    for room, src in srcs:
        obj = os.path.join(build, "obj", src[:-2] + ".o")
        if not os.path.exists(obj) and src in ("bpf/backend.c", "bpf/control.c", "bpf/endpoints.c"):
            print(f"layout: {src} is not built (no libbpf): not checked")
            continue
        if not os.path.exists(obj):
            print(f"layout: {obj} is not built")
            return 1
        # The exported names are libc's too: rule 1 covers them.
        for name in symbols(obj, "--defined-only") - exports:
            defs.setdefault(name, room)
        undefs[src] = (room, symbols(obj, "-u"))
    bad = 0
    for src, (room, names) in undefs.items():
        if src != HOOKS and not room.startswith("ctl") and room != "bpf":  # faultctl's own
            for n in sorted(names & exports):
                print(f"layout: {src} refers to {n}, which the shim exports: use LIBC({n})")
                bad += 1
        for n in sorted(names):
            home = defs.get(n)
            if home and home != room and home not in ALLOWED[room]:
                print(f"layout: {src} ({room}) calls {n} in {home}: upward")
                bad += 1
    inc = re.compile(r'^#include "((?:core|preload|ctl|bpf)/[^"]+)"', re.M)
    for room, src in srcs + [(r, os.path.join(r, f)) for r in ALLOWED
                             for f in os.listdir(os.path.join(root, r)) if f.endswith(".h")]:
        for h in inc.findall(open(os.path.join(root, src)).read()):
            home = os.path.dirname(h)
            if home != room and home not in ALLOWED[room]:
                print(f"layout: {src} ({room}) includes {h}: upward")
                bad += 1
    print(f"layout: {len(srcs)} sources in {len(ALLOWED)} rooms checked, {bad} violations")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
