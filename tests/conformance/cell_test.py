"""cell_test.py - checks conformance.py's cell(): a cell whose outcome and
attempts match but whose time is off is measured once more, and only then;
a wrong outcome or a time off twice fails. measure() is replaced by a script
of results, so nothing is run. Usage: cell_test.py BUILD"""
import os
import shutil
import sys

COUNTS = os.environ.get("FN_COUNTS", os.devnull)
sys.argv = [sys.argv[0], sys.argv[1], os.devnull]
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import conformance as cf  # noqa: E402

said = []
cf.check = lambda name, cond, detail="": said.append(name)  # not printed, not counted
shutil.rmtree(cf.JAVA_DIR, ignore_errors=True)
shutil.rmtree(cf.RUNDIR, ignore_errors=True)
failed = 0


def check(name, cond):
    global failed
    with open(COUNTS, "a") as f:
        f.write("pass\n" if cond else "fail\n")
    print(("  ok   - " if cond else "  FAIL - ") + name)
    failed += not cond


def scripted(results):
    """measure() that hands out results (same outcome, passes) in turn and
    counts its calls."""
    calls = []

    def fake(argv, classify, fault, baseline, slack, bpf):
        same, ok = results[len(calls)]
        calls.append(fault)
        return "ConnectException", 900 if not ok else 160, 1, "ConnectException", 160, "real", same, ok
    return fake, calls


def run(results, fault="refuse", want_att=1):
    fake, calls = scripted(results)
    cf.measure = fake
    row = cf.cell("scripted client", None, None, want_att, fault, None, 0.25)
    return row, len(calls)


print("=== conformance cells: one more measurement for a time that was off, and only for that")
row, n = run([(True, False), (True, True)])
check("time off once, then right: passes, measured twice (%d), and says so: %s" % (n, said[-1]),
      row["ok"] and n == 2 and row["measured"] == 2 and said[-1].endswith("(measured twice)"))
row, n = run([(True, True)])
check("right the first time: measured once (%d)" % n, row["ok"] and n == 1 and row["measured"] == 1)
row, n = run([(True, False), (True, False)])
check("time off twice: fails after two measurements (%d)" % n, not row["ok"] and n == 2)
row, n = run([(False, False), (True, True)])
check("wrong outcome: fails, never measured again (%d)" % n, not row["ok"] and n == 1)
row, n = run([(True, False), (True, True)], fault="blackhole", want_att=2)
check("attempts wrong (1 counted, 2 implied): fails, never measured again (%d)" % n,
      not row["ok"] and n == 1)
sys.exit(1 if failed else 0)
