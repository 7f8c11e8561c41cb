"""procs.py - process storms under the shim: a shell pipeline loop, and a
Python multiprocessing pool whose workers must meet the rules and answer
faultctl. Prints "ok"/"FAIL" lines and adds them to $FN_COUNTS.

usage: procs.py BUILD_DIR [PRELOAD_FIRST]
       procs.py --worker N      (a pool run, under the shim)
"""
import multiprocessing
import os
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import checks  # noqa: E402
from checks import check  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
CONF = os.path.join(HERE, "hardening.conf")
IP, PORT = "127.82.0.1", 7600   # refused by the rule; a real server listens


def attempt(i):
    s = socket.socket()
    s.settimeout(2)
    try:
        s.connect((IP, PORT))
        return "connected"
    except ConnectionRefusedError:
        return "refused"
    except OSError as e:
        return "error %s" % e
    finally:
        s.close()
        time.sleep(0.05)


def worker_main(n):
    with multiprocessing.Pool(4) as pool:
        out = pool.map(attempt, range(n))
        time.sleep(1.5)   # alive while the parent asks faultctl ps
    print(" ".join(sorted(set(out))), len(out))


def main():
    build = os.path.abspath(sys.argv[1])
    first = sys.argv[2] if len(sys.argv) > 2 and sys.argv[2] else None
    rundir = tempfile.mkdtemp(prefix="fn-procs-")

    env = dict(os.environ, FAULTNET_CONFIG=CONF, FAULTNET_RUNDIR=rundir, FAULTNET_GROUP="mp",
               LD_PRELOAD=(first + ":" if first else "") + os.path.join(build, "libfaultnet.so"))
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind((IP, PORT))
    ls.listen(64)
    print("process storms under the shim (%s)" % build)

    def test_pipeline():
        r = subprocess.run(["bash", "-c", "for i in $(seq 200); do echo x | cat | wc -l; done | "
                            "sort | uniq -c"], env=env, capture_output=True, text=True,
                           timeout=120)
        check("a shell pipeline loop, 200 rounds of 3 processes", r.stdout.split() == ["200", "1"],
              r.stdout + r.stderr)

    for t in checks.selected([test_pipeline, lambda: test_multiprocessing(build, first, env,
                                                                           rundir)]):
        t()
    ls.close()
    return 1 if checks.failed else 0


def test_multiprocessing(build, first, env, rundir):
    p = subprocess.Popen(["/usr/bin/python3", os.path.abspath(__file__), "--worker", "40"],
                         env=env, stdout=subprocess.PIPE, text=True)
    ctl_env = dict(os.environ, FAULTNET_RUNDIR=rundir)
    if first:
        ctl_env["LD_PRELOAD"] = first
    # Asked until the pool's workers are listed, while the pool lives (its
    # workers stay 1.5 s after their last connect): on a loaded machine
    # the pool may take over a second to start.
    while True:
        time.sleep(0.3)
        ps = subprocess.run([os.path.join(build, "faultctl"), "-g", "mp", "ps"], env=ctl_env,
                            capture_output=True, text=True, timeout=30)
        rows = [l for l in ps.stdout.splitlines()[1:] if l.strip()]
        if len(rows) >= 5 or p.poll() is not None:
            break
    out = p.communicate(timeout=60)[0].strip()
    check("multiprocessing: 40 connects from 4 workers, all refused by the rule (%s)" % out,
          out == "refused 40", out)
    check("multiprocessing: the parent and its 4 workers answer faultctl ps (%d)" % len(rows),
          len(rows) >= 5, ps.stdout + ps.stderr)


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--worker":
        worker_main(int(sys.argv[2]))
    else:
        sys.exit(main())
