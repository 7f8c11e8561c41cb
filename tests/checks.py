"""checks.py - what the Python test scripts share: one "ok"/"FAIL" line per
check, counted into $FN_COUNTS for tests/run.sh's closing line. Imported
by the scripts of tests/hostile/ (which put tests/ on sys.path)."""
import os

COUNTS = os.environ.get("FN_COUNTS", os.devnull)
failed = 0


def check(name, cond, detail=""):
    global failed
    with open(COUNTS, "a") as f:
        f.write("pass\n" if cond else "fail\n")
    print(("  ok   - " if cond else "  FAIL - ") + name + ("" if cond else ": " + str(detail)))
    failed += not cond
