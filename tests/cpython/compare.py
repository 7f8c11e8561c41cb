"""compare.py - CPython's own test suite with and without the shim. Runs
the modules below from Debian's libpython3.11-testsuite twice, each run in
a private network namespace (loopback only), once plainly and once under
the shim with unused.conf, and compares the outcome of every test case.
A case that fails without the shim is compared like any other, not
skipped. A case whose outcome differs is run again, alone, in both ways
(CPython's suite has timing-dependent cases); the shim has changed an
outcome when it differs every time. Prints "ok"/"FAIL" lines for
tests/run.sh.

usage: compare.py BUILD_DIR [PRELOAD_FIRST]
"""
import os
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
import checks  # noqa: E402
from checks import check  # noqa: E402

BUILD = os.path.abspath(sys.argv[1])
FIRST = sys.argv[2] if len(sys.argv) > 2 else ""
LIB = (FIRST + ":" if FIRST else "") + os.path.join(BUILD, "libfaultnet.so")
PY = "/usr/bin/python3"
MODULES = ["test_socket", "test_selectors", "test_ssl", "test_httplib", "test_urllib2_localnet",
           "test_asyncio", "test_subprocess", "test_os", "test_signal", "test_threading",
           "test_poll", "test_epoll", "test_select", "test_fcntl", "test_logging"]
AGAIN = 2  # reruns of a case that differs, in both ways
# Left out, with the reason: test_socket's VSOCK cases wait in accept()
# forever on a machine whose vsock device is there but unreachable from
# the guest itself (seen here without the shim); the shim covers only
# AF_INET and AF_INET6.
IGNORE = ["*VSOCK*"]


def env_for(shim, rundir):
    env = {k: v for k, v in os.environ.items() if not k.startswith("FAULTNET_") and k != "LD_PRELOAD"}
    if shim:
        env.update(LD_PRELOAD=LIB, FAULTNET_CONFIG=os.path.join(HERE, "unused.conf"),
                   FAULTNET_RUNDIR=rundir)
    return env


def run(shim, work, modules, matchfile=None):
    """One regrtest run; {test id: outcome}."""
    xml = os.path.join(work, "%s.xml" % ("shim" if shim else "plain"))
    if os.path.exists(xml):
        os.unlink(xml)
    cmd = ["unshare", "-n", "sh", "-c", 'ip link set lo up && exec "$@"', "sh", PY, "-m", "test",
           "-j2", "--timeout", "900", "--junit-xml", xml]
    for pattern in IGNORE:
        cmd += ["-i", pattern]
    if matchfile:
        cmd += ["--matchfile", matchfile]
    log = open(os.path.join(work, "%s.log" % ("shim" if shim else "plain")), "a")
    subprocess.run(cmd + modules, env=env_for(shim, work), cwd=work, stdout=log,
                   stderr=subprocess.STDOUT, timeout=2400)
    log.close()
    return outcomes(xml)


def outcomes(xml):
    res = {}
    if not os.path.exists(xml):
        return res
    for case in ET.parse(xml).getroot().iter("testcase"):
        kinds = [c.tag for c in case if c.tag in ("failure", "error", "skipped", "output")]
        res[case.get("name")] = kinds[0] if kinds else "ok"
    return res


def differing(plain, shim):
    return sorted(k for k in set(plain) | set(shim) if plain.get(k) != shim.get(k))


def main():
    modules = checks.chosen(MODULES)  # FN_CHECK=test_poll: that module alone
    work = tempfile.mkdtemp(prefix="fn-cpython-")
    print("  skip - test_socket's VSOCK cases (%s): without the shim they wait in accept() forever"
          " on a machine whose vsock device the guest cannot reach" % ", ".join(IGNORE))
    plain = run(False, work, modules)
    shim = run(True, work, modules)
    print("  figure: %d test cases without the shim, %d with it; %d fail or err without it"
          % (len(plain), len(shim), sum(v in ("failure", "error") for v in plain.values())))
    diff = differing(plain, shim)
    for _ in range(AGAIN):
        if not diff:
            break
        print("  %d cases differ; running them again both ways: %s" % (len(diff), ", ".join(diff[:8])))
        mf = os.path.join(work, "again")
        with open(mf, "w") as f:
            f.write("".join(d + "\n" for d in diff))
        mods = sorted({m for m in modules if any(d.startswith("test." + m + ".") for d in diff)})
        p2, s2 = run(False, work, mods, mf), run(True, work, mods, mf)
        diff = [d for d in diff if p2.get(d) != s2.get(d) or d not in p2]
    check("CPython's suite (%d modules): the shim changes no test case's outcome" % len(modules),
          plain != {} and not diff,
          "; ".join("%s: %s without, %s with" % (d, plain.get(d), shim.get(d)) for d in diff[:20])
          or "no results (see %s)" % work)
    check("CPython's suite ran every module both ways (%d and %d cases)" % (len(plain), len(shim)),
          len(plain) > (1000 if modules == MODULES else 0) and len(shim) == len(plain), work)
    if not diff:
        subprocess.run(["rm", "-rf", work])
    return 0


sys.exit(main())
