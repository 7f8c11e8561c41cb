"""cell_test.py - checks conformance.py's cell(): a cell whose outcome and
attempts match but whose time is off is measured once more, and only then;
a wrong outcome or a time off twice fails. measure() is replaced by a script
of results, so nothing is run. Usage: cell_test.py BUILD"""
import os
import shutil
import sys

sys.argv = [sys.argv[0], sys.argv[1], os.devnull]
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import checks  # noqa: E402
from checks import check  # noqa: E402
import conformance as cf  # noqa: E402

said = []
cf.check = lambda name, cond, detail="": said.append(name)  # not printed, not counted
shutil.rmtree(cf.JAVA_DIR, ignore_errors=True)
shutil.rmtree(cf.RUNDIR, ignore_errors=True)
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


def test_off_once():
    row, n = run([(True, False), (True, True)])
    check("time off once, then right: passes, measured twice (%d), and says so: %s" % (n, said[-1]),
          row["ok"] and n == 2 and row["measured"] == 2 and said[-1].endswith("(measured twice)"))


def test_right_first():
    row, n = run([(True, True)])
    check("right the first time: measured once (%d)" % n,
          row["ok"] and n == 1 and row["measured"] == 1)


def test_off_twice():
    row, n = run([(True, False), (True, False)])
    check("time off twice: fails after two measurements (%d)" % n, not row["ok"] and n == 2)


def test_wrong_outcome():
    row, n = run([(False, False), (True, True)])
    check("wrong outcome: fails, never measured again (%d)" % n, not row["ok"] and n == 1)


def test_wrong_attempts():
    row, n = run([(True, False), (True, True)], fault="blackhole", want_att=2)
    check("attempts wrong (1 counted, 2 implied): fails, never measured again (%d)" % n,
          not row["ok"] and n == 1)


print("=== conformance cells: one more measurement for a time that was off, and only for that")
for t in checks.selected([test_off_once, test_right_first, test_off_twice, test_wrong_outcome,
                          test_wrong_attempts]):
    t()
sys.exit(1 if checks.failed else 0)
