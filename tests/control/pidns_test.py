"""pidns_test.py - faultctl on the host against members in pid namespaces
of their own (unshare --pid --fork --mount-proc, as a container runs them),
sharing the host's run directory: members named and found alive by their
file's lock, never by a pid faultctl may not see or may see as another
process. Run by tests/run.sh; prints "ok"/"FAIL" lines and adds them to
$FN_COUNTS.

usage: pidns_test.py BUILD_DIR [PRELOAD_FIRST]
"""
import glob
import json
import os
import select
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import traceback

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import checks  # noqa: E402
from checks import check  # noqa: E402

BUILD = os.path.abspath(sys.argv[1])
FIRST = sys.argv[2] if len(sys.argv) > 2 and sys.argv[2] else None
LIB = os.path.join(BUILD, "libfaultnet.so")
CTL = os.path.join(BUILD, "faultctl")
PY = "/usr/bin/python3"
RUNDIR = tempfile.mkdtemp(prefix="fn-pidns-")
WORK = tempfile.mkdtemp(prefix="fn-pidns-w-")
CONF = os.path.join(WORK, "pidns.conf")
# A process in a pid namespace of its own, as pid 1 there; without root,
# in a user namespace too (the run directory's owner is then its root).
# --kill-child: the member ends with unshare.
UNSHARE = ["unshare", "--pid", "--fork", "--mount-proc", "--kill-child"] + \
    ([] if os.geteuid() == 0 else ["--user", "--map-root-user"])

# Connects to PORT every 20 ms and prints each change of outcome.
PROBE = r"""
import socket, sys, time
last = None
while True:
    s = socket.socket()
    try:
        s.connect(("127.0.0.1", int(sys.argv[1])))
        now = "connected"
    except OSError as e:
        now = "refused" if e.errno == 111 else str(e)
    s.close()
    if now != last:
        print(now, flush=True)
        last = now
    time.sleep(0.02)
"""


class Lines:
    """A process's stdout read line by line, each wait bounded: a probe
    that says nothing fails its check instead of hanging the section."""

    def __init__(self, proc):
        self.fd, self.buf = proc.stdout.fileno(), b""

    def next(self, timeout=5.0):
        end = time.time() + timeout
        while b"\n" not in self.buf:
            left = end - time.time()
            if left <= 0 or not select.select([self.fd], [], [], left)[0]:
                return "(nothing within %.0f s)" % timeout
            got = os.read(self.fd, 4096)
            if not got:
                return "(ended)"
            self.buf += got
        line, self.buf = self.buf.split(b"\n", 1)
        return line.decode()


def env(group):
    e = dict(os.environ, FAULTNET_RUNDIR=RUNDIR, FAULTNET_GROUP=group, FAULTNET_CONFIG=CONF)
    e["LD_PRELOAD"] = (FIRST + ":" if FIRST else "") + LIB
    return e


def ctl(*args):
    e = dict(os.environ, FAULTNET_RUNDIR=RUNDIR)
    if FIRST:
        e["LD_PRELOAD"] = FIRST
    return subprocess.run([CTL] + list(args), env=e, capture_output=True, text=True, timeout=30)


def members(group):
    """ps --json's processes of group."""
    r = ctl("-g", group, "--json", "ps")
    return [json.loads(line) for line in r.stdout.splitlines() if line.startswith("{")]


def files(group, ext="mem"):
    return sorted(glob.glob(os.path.join(RUNDIR, "%s.*.%s" % (group, ext))))


def wait_for(cond, timeout=5.0):
    end = time.time() + timeout
    while time.time() < end:
        got = cond()
        if got:
            return got
        time.sleep(0.02)
    return cond()


def in_pidns(group, argv, **kw):
    """argv under the shim as pid 1 of a pid namespace; unshare itself is
    not under it."""
    inner = ["%s=%s" % kv for kv in env(group).items() if kv[0].startswith(("FAULTNET_", "LD_PRE"))]
    outer = dict(os.environ)
    outer.pop("LD_PRELOAD", None)
    if FIRST:
        outer["LD_PRELOAD"] = FIRST
    return subprocess.Popen(UNSHARE + ["env"] + inner + argv, env=outer, **kw)


def test_same_pid_two_members():
    """Two namespaces' pid 1 (same pid, often the same start tick) were one
    file, GROUP.1.mem: now two members, each shown by its host pid."""
    ps = [in_pidns("twins", checks.joined_sleep(30)) for _ in range(2)]
    got = wait_for(lambda: len(files("twins")) == 2 and files("twins"))
    names = [os.path.basename(f) for f in got or []]
    check("two pid namespaces' pid 1: two state files (%s)" % names,
          len(names) == 2 and all(n.startswith("twins.1.") for n in names), names)
    m = members("twins")
    hosts = sorted(p.pid for p in ps)
    shown = sorted(x.get("pid") for x in m)
    # The member is unshare's child: its host pid is not unshare's own.
    kids = sorted(int(open("/proc/%d/task/%d/children" % (p.pid, p.pid)).read().split()[0])
                  for p in ps)
    check("ps on the host lists both, by the pids the host sees (%s; unshare %s)"
          % (shown, hosts), shown == kids, m)
    for p in ps:
        p.kill()
        p.wait()


def test_gone_within_a_second():
    """A member in a pid namespace is pid 1 there, which on the host is
    init, alive: by its pid it never looked gone. Its file's lock is let go
    when it exits."""
    p = in_pidns("gone", checks.joined_sleep(30))
    listed = wait_for(lambda: len(members("gone")) == 1)
    check("the namespaced member is listed", listed)
    r = ctl("-g", "gone", "disable", "off")
    check("a group change counts it", "(1 process)" in r.stdout, r.stdout + r.stderr)
    p.kill()
    p.wait()
    t0 = time.time()
    gone = wait_for(lambda: members("gone") == [], timeout=3)
    took = time.time() - t0
    check("a namespaced member that exited (its pid 1 a live host process) is gone "
          "for ps within a second (%.2f s)" % took, listed and gone and took < 1.0)
    r = ctl("-g", "gone", "enable", "off")
    check("and for a group change, which looks at each member quickly",
          "no process of group 'gone' is running" in r.stderr, r.stdout + r.stderr)
    check("its counts are kept as its .done", len(files("gone", "done")) == 1,
          os.listdir(RUNDIR))


def test_start_keeps_host_files():
    """Every start sweeps the run directory (at most every 10 s): from
    inside a pid namespace every host pid looked dead, so a start there
    moved the host members' files away."""
    host = subprocess.Popen(checks.joined_sleep(30), env=env("mixed"))
    wait_for(lambda: files("mixed"))
    before = files("mixed")
    stamp = os.path.join(RUNDIR, ".sweep")
    if os.path.exists(stamp):
        os.utime(stamp, (time.time() - 60, time.time() - 60))
    inner = in_pidns("mixed", checks.joined_sleep(30))
    wait_for(lambda: len(files("mixed")) == 2)
    check("a start in a pid namespace (its sweep due) removes no host member's file",
          all(os.path.exists(f) for f in before) and len(before) == 1, os.listdir(RUNDIR))
    pids = sorted(x.get("pid") for x in members("mixed"))
    check("a group spans the host and the namespace (%s)" % pids,
          len(pids) == 2 and host.pid in pids, pids)
    for p in (host, inner):
        p.kill()
        p.wait()


def test_live_flip_reaches_pidns():
    """faultctl enable on the host reaches a member in a pid namespace:
    its connects meet the refuse rule at once; -p with its host pid names
    it alone; rules, stats and events read on the host show it by that
    pid."""
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("127.0.0.1", 0))
    srv.listen(512)
    port = srv.getsockname()[1]
    with open(CONF, "w") as f:
        f.write('rules = ( { name = "cut"; action = "refuse"; '
                'match = { to = "127.0.0.1/32"; port = %d; }; enabled = false; } );\n' % port)
    p = in_pidns("flip", [PY, "-c", PROBE, str(port)], stdout=subprocess.PIPE)
    out = Lines(p)
    try:
        first = out.next()
        check("the namespaced probe connects with the rule off", first == "connected", first)
        r = ctl("-g", "flip", "enable", "cut")
        check("faultctl -g enable on the host: in force in the namespaced member",
              r.returncode == 0 and "1 process" in r.stdout, r.stdout + r.stderr)
        t0 = time.time()
        now = out.next()
        check("its next connects are refused (%.2f s)" % (time.time() - t0),
              now == "refused", now)
        m = members("flip")
        pid = m[0]["pid"] if m else 0
        r = ctl("-p", str(pid), "disable", "cut")
        now = out.next()
        check("faultctl -p HOSTPID disable reaches it too", r.returncode == 0
              and now == "connected", (now, r.stdout, r.stderr))
        r = ctl("-g", "flip", "--json", "rules")
        rule = [json.loads(x) for x in r.stdout.splitlines() if '"cut"' in x]
        check("its counts are read on the host (faults > 0)",
              rule and rule[0].get("faults", 0) > 0, r.stdout)
        r = ctl("-g", "flip", "--json", "stats")
        stat = [json.loads(x) for x in r.stdout.splitlines() if '"cut"' in x]
        check("stats on the host: its faults, under its host pid",
              stat and stat[0].get("faults", 0) > 0 and stat[0].get("pid") == pid, r.stdout)
        r = ctl("-p", str(pid), "--json", "events")
        ev = [json.loads(x) for x in r.stdout.splitlines() if '"cut"' in x]
        check("events on the host: its refused connects, under its host pid",
              ev and all(e.get("pid") == pid for e in ev), r.stdout[-500:] + r.stderr)
    finally:
        p.kill()
        p.wait()
        srv.close()


def main():
    print("faultctl across pid namespaces (%s)" % BUILD)
    with open(CONF, "w") as f:
        f.write('rules = ( { name = "off"; action = "refuse"; '
                'match = { to = "127.0.0.9/32"; }; enabled = false; } );\n')
    tests = [test_same_pid_two_members, test_gone_within_a_second,
             test_start_keeps_host_files, test_live_flip_reaches_pidns]
    try:
        for t in checks.selected(tests):
            try:
                t()
            except Exception:
                check("%s ran to its end" % checks.name_of(t), False, traceback.format_exc())
    finally:
        shutil.rmtree(WORK, ignore_errors=True)
        shutil.rmtree(RUNDIR, ignore_errors=True)
    sys.exit(1 if checks.failed else 0)


main()
