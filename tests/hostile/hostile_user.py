"""hostile_user.py - the hostile-user suite: what another account or bad
input does to faultnet. Creates two accounts (fnhostile, the attacker, and
fnvictim, a second ordinary user), runs the attacks, and removes both
accounts at the end. Each check is named after the defect it keeps fixed
(its number in tests/README.md). Needs root. Loopback only.

usage: hostile_user.py BUILD_DIR
"""
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
import checks  # noqa: E402
from checks import check  # noqa: E402
BUILD = os.path.abspath(sys.argv[1])
LIB = os.path.join(BUILD, "libfaultnet.so")
CTL = os.path.join(BUILD, "faultctl")
CONF = os.path.join(HERE, "hostile_user.conf")
PY = "/usr/bin/python3"
USERS = ("fnhostile", "fnvictim")


def share_with_others():
    """Copies what the other accounts run (the build's faultctl and library,
    this suite's scripts and policy) into a directory every account can
    read: a tree cloned into root's home (mode 0700, as on a fresh machine)
    cannot be entered by them, and runuser would fail with "Permission
    denied" before any attack ran. The copies are root's, mode 0755/0644,
    so no account can change what root then runs."""
    global HERE, LIB, CTL, CONF
    shared = tempfile.mkdtemp(prefix="fn-hostile-")
    os.chmod(shared, 0o755)
    for f in ("libfaultnet.so", "faultctl", "faultnet-probe"):
        if os.path.exists(os.path.join(BUILD, f)):
            shutil.copy(os.path.join(BUILD, f), shared)
    here = os.path.join(shared, "hostile")
    shutil.copytree(HERE, here)
    for root, dirs, files in os.walk(shared):
        for d in dirs:
            os.chmod(os.path.join(root, d), 0o755)
    HERE, LIB, CTL = here, os.path.join(shared, "libfaultnet.so"), os.path.join(shared, "faultctl")
    CONF = os.path.join(here, "hostile_user.conf")
    return shared


def as_user(user, cmd, **kw):
    return ["runuser", "-u", user, "--"] + cmd


def shim_env(**extra):
    env = dict(os.environ, FAULTNET_CONFIG=CONF, LD_PRELOAD=LIB)
    env.update(extra)
    return env


def test_endpoints_not_takeable():
    """1: the refuse endpoint and the UDP drop sink cannot be bound by
    another account, so it can neither answer a refused connect nor read a
    dropped datagram."""
    victim = subprocess.Popen([PY, os.path.join(HERE, "victim.py")], env=shim_env(),
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    ports = []
    for line in victim.stdout:
        if line.startswith("first"):
            break
        ports.append(line.strip())
    attacker = subprocess.Popen(as_user("fnhostile", [PY, os.path.join(HERE, "attacker.py")]),
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    attacker.stdin.write("\n".join(ports) + "\n\n")
    attacker.stdin.flush()
    results = []
    for line in attacker.stdout:
        if line.startswith("done"):
            break
        results.append(line.strip())
    victim.stdin.close()
    then = victim.stdout.readline().strip()
    victim.wait(timeout=10)
    attacker.stdin.close()
    rest = attacker.stdout.read()
    attacker.wait(timeout=10)
    kinds = {p.split()[0] for p in ports}
    check("1: the victim's refuse endpoint and UDP sink were found (%s)" % ports, kinds == {"tcp", "udp"}, ports)
    check("1: another account cannot bind them (%s)" % results,
          results and all(r.startswith("refused") for r in results), results)
    check("1: the victim's next connect is still refused (%s)" % then, then == "then ConnectionRefusedError", then)
    check("1: no dropped datagram reached the other account", "secret" not in rest, rest)


def test_rundir_taken():
    """2: another account creates /tmp/faultnet-UID first; the victim's
    processes and its faultctl fall back to the same private directory, so
    live control keeps working."""
    uid = pwd.getpwnam("fnvictim").pw_uid
    taken = "/tmp/faultnet-%d" % uid
    shutil.rmtree(taken, ignore_errors=True)
    subprocess.run(as_user("fnhostile", ["mkdir", "-m", "0777", taken]), check=True)
    home = tempfile.mkdtemp(prefix="fnvictim-")
    shutil.chown(home, "fnvictim")
    env = {"PATH": os.environ["PATH"]}
    app = subprocess.Popen(as_user("fnvictim", ["env", "HOME=" + home, "FAULTNET_CONFIG=" + CONF,
                                                "LD_PRELOAD=" + LIB, "sleep", "20"]),
                           env=env, stderr=subprocess.PIPE, text=True)
    ps = ""
    for _ in range(50):
        ps = subprocess.run(as_user("fnvictim", ["env", "HOME=" + home, CTL, "ps"]), env=env,
                            capture_output=True, text=True).stdout
        if "sleep 20" in ps:
            break
        subprocess.run(["sleep", "0.1"])
    ch = subprocess.run(as_user("fnvictim", ["env", "HOME=" + home, CTL, "disable", "bh"]), env=env,
                        capture_output=True, text=True)
    app.kill()
    err = app.communicate()[1]
    check("2: /tmp/faultnet-UID taken by another account: faultctl still finds the process", "sleep 20" in ps, ps)
    check("2: and a change reaches it (%s)" % ch.stdout.strip(), ch.returncode == 0 and ": ok " in ch.stdout,
          ch.stdout + ch.stderr)
    check("2: the process did not run uncontrollable", "control disabled" not in err, err)
    check("2: the other account's directory was left alone, unused",
          os.listdir(taken) == [] and os.stat(taken).st_uid != uid, os.listdir(taken))
    shutil.rmtree(taken, ignore_errors=True)
    shutil.rmtree(home, ignore_errors=True)


def test_journal():
    """3: a change that is not one well-formed protocol line never reaches
    the group journal, and sequence numbers cannot wrap."""
    rundir = tempfile.mkdtemp(prefix="fn-journal-")
    env = dict(os.environ, FAULTNET_RUNDIR=rundir)
    journal = os.path.join(rundir, "j.journal")

    # --ahead: the journal is made before any process has joined j.
    def ctl(*args):
        return subprocess.run([CTL, "-g", "j", "--ahead"] + list(args), env=env, capture_output=True, text=True)
    r = ctl("enable", "bh\n9 rm bh")
    check("3: a newline inside a name is refused (exit %d)" % r.returncode,
          r.returncode == 2 and not os.path.exists(journal), r.stderr)
    big = os.path.join(rundir, "big.conf")
    with open(big, "w") as f:
        f.write("rules = (\n" + "".join('{ name = "r%d"; action = "blackhole"; match = { to = "127.99.%d.%d/32"; }; },\n'
                                          % (i, i // 250, i % 250) for i in range(1500)) +
                '{ name = "last"; action = "drop"; } );\n')
    r = ctl("load", big)
    check("3: a load over the protocol's line limit is refused before the journal",
          r.returncode == 2 and "over the control protocol's limit" in r.stderr and not os.path.exists(journal),
          r.stderr)
    with open(journal, "w") as f:
        f.write("18446744073709551615 rm bh\n")
    r = ctl("enable", "bh")
    check("3: a sequence number faultctl never wrote is reported, not wrapped",
          r.returncode == 1 and "was not written by faultctl" in r.stderr, r.stderr)
    r = ctl("reset")
    with open(journal) as f:
        content = f.read()
    check("3: reset starts the journal over at 1", r.returncode == 0 and content == "1 reset\n", content)
    app = subprocess.Popen(["sleep", "10"], env=dict(env, LD_PRELOAD=LIB, FAULTNET_CONFIG=CONF,
                                                     FAULTNET_GROUP="j"))
    rules = ""
    for _ in range(50):
        rules = ctl("--json", "rules").stdout
        if rules:
            break
        time.sleep(0.1)
    r = ctl("add", '{ name = "bogus"; action = "refuse"; match = { to = "127.73.6.9/32"; from_zone = "nowhere"; }; }')
    with open(journal) as f:
        kept = f.read()
    check("24: a change every live member refused is not kept in the journal (%s)" % r.stderr.strip()[-60:],
          r.returncode != 0 and "bogus" not in kept, kept)
    app.kill()
    app.wait()
    r = ctl("--json", "enable", "refuse")
    check("24: a change to a group with no live process says so, --json too",
          r.returncode == 0 and "no process of group" in r.stderr, r.stderr)
    check("24: rules and stats use one word, faults (%s)" % rules.splitlines()[:1],
          '"faults":' in rules and "hits" not in rules, rules)
    shutil.rmtree(rundir, ignore_errors=True)


COUNTING = r"""
import socket, subprocess, sys
ctl, group, other = sys.argv[1], sys.argv[2], sys.argv[3]
def refused(n):
    for _ in range(n):
        s = socket.socket()
        try:
            s.connect(("127.73.6.1", 80))
        except OSError:
            pass
        s.close()
refused(4)
subprocess.run([ctl, "-g", group, "reset"], capture_output=True)
refused(4)
subprocess.run([ctl, "-g", group, "load", other], capture_output=True)
refused(4)
subprocess.run([ctl, "-g", group, "rm", "refuse"], capture_output=True)
"""


def test_counters_cumulative():
    """24: --stats counts a rule by name over the process's life: reset,
    load and rm used to drop what came before (4 attempts reported of 12)."""
    rundir = tempfile.mkdtemp(prefix="fn-count-")
    env = dict(os.environ, FAULTNET_RUNDIR=rundir)
    r = subprocess.run([CTL, "run", "-g", "count", "--stats", "--config", CONF, "--", PY, "-c", COUNTING,
                        CTL, "count", CONF], env=env, capture_output=True, text=True, timeout=60)
    line = [l for l in r.stderr.splitlines() if "rule refuse" in l]
    check("24: reset, load and rm keep a rule's counts: %s" % (line[0].strip() if line else r.stderr),
          bool(line) and "attempts=12 " in line[0] and "faults=12 " in line[0], r.stderr)
    subprocess.run([CTL, "-g", "count", "reset"], env=env, capture_output=True)
    shutil.rmtree(rundir, ignore_errors=True)


def test_config_edges():
    """25: policy files that are wrong in unusual ways are refused with the
    file, the line and the reason; none hangs the app or is cut short."""
    d = tempfile.mkdtemp(prefix="fn-conf-")

    def write(name, data):
        path = os.path.join(d, name)
        with open(path, "wb") as f:
            f.write(data)
        return path

    def checked(path):
        r = subprocess.run([CTL, "check", path], capture_output=True, text=True, timeout=10)
        return r.returncode, r.stderr.strip()
    rc, err = checked(write("f0.conf", b'rules = ( { name = "a"; action = "drop"; first = 0; } );\n'))
    check("25: first = 0 is refused, not taken as always (%s)" % err, rc != 0 and "f0.conf:1:" in err
          and "first = 0" in err, err)
    write("inner.conf", b'{ name = "a"; action = "drop"; },\n{ name = "b"; action = "bogus"; }\n')
    rc, err = checked(write("outer.conf", b'# outer\nrules = (\n@include "inner.conf"\n);\n'))
    check("25: an error in an @include'd file names that file and its line (%s)" % err,
          rc != 0 and "inner.conf:2: rule 'b'" in err, err)
    rc, err = checked(write("nul.conf", b'rules = ( { name = "a"; action = "drop"; } );\n\0rules = 5;\n'))
    check("25: a NUL byte is an error with its line, not the end of the file (%s)" % err,
          rc != 0 and "nul.conf:2: a NUL byte" in err, err)
    big = write("big.conf", b"")
    os.truncate(big, 70 << 20)
    rc, err = checked(big)
    check("25: a 70 MB file is too large, with the limit (%s)" % err,
          rc != 0 and "too large" in err and "limit" in err, err)
    fifo = os.path.join(d, "fifo")
    os.mkfifo(fifo)
    t0 = time.monotonic()
    try:
        r = subprocess.run(["true"], env=dict(os.environ, FAULTNET_CONFIG=fifo, LD_PRELOAD=LIB),
                           capture_output=True, text=True, timeout=10)
        rc, err = r.returncode, r.stderr.strip()
    except subprocess.TimeoutExpired:
        rc, err = "hung", "still blocked after 10 s"
    check("25: a FIFO as FAULTNET_CONFIG stops the app at once with a message (%s)" % err,
          rc == 78 and "not a regular file" in err and time.monotonic() - t0 < 5, err)
    shutil.rmtree(d, ignore_errors=True)


DNS_VICTIM = r"""
import json, os, socket, struct, sys
def ask(name, addr=("127.0.0.53", 53)):
    q = struct.pack("!HHHHHH", 9, 0x0100, 1, 0, 0, 0)
    q += b"".join(bytes([len(p)]) + p.encode() for p in name.split(".")) + b"\0" + struct.pack("!HH", 1, 1)
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(3)
    s.sendto(q, addr)
    try:
        return s.recv(4096)[3] & 15
    except OSError as e:
        return type(e).__name__
    finally:
        s.close()
first = ask("a.missing.test")
ports = []
for fd in os.listdir("/proc/self/fd"):
    try:
        s = socket.socket(fileno=os.dup(int(fd)))
    except OSError:
        continue
    try:
        if s.type == socket.SOCK_DGRAM and s.getsockname()[0] == "127.0.0.1":
            ports.append(s.getsockname()[1])
    except OSError:
        pass
    s.close()
print(json.dumps({"first": first, "ports": ports}), flush=True)
sys.stdin.readline()
print(json.dumps({"then": ask("c.missing.test")}), flush=True)
"""

DNS_ATTACKER = r"""
import json, socket, struct, sys
port = int(sys.argv[1])
q = struct.pack("!HHHHHH", 7, 0x0100, 1, 0, 0, 0)
q += b"\x01b\x07missing\x04test\x00" + struct.pack("!HH", 1, 1)
out = {}
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
u.settimeout(1.5)
u.sendto(q, ("127.0.0.1", port))
try:
    out["udp"] = u.recv(4096)[3] & 15
except OSError as e:
    out["udp"] = type(e).__name__
try:
    t = socket.create_connection(("127.0.0.1", port), timeout=1.5)
    t.sendall(struct.pack("!H", len(q)) + q)
    a = t.recv(4096)
    out["tcp"] = (a[5] & 15) if len(a) > 5 else "closed"
except OSError as e:
    out["tcp"] = type(e).__name__
print(json.dumps(out))
"""


def test_i38_13_responder_own_only():
    """i38.13: another account could query the victim's DNS responder on its
    loopback port: answered by the victim's rules (spending their budgets,
    counted as the victim's lookups, forwarded upstream as the victim)."""
    tmp = tempfile.mkdtemp(prefix="fn-dnsown-")
    conf = os.path.join(tmp, "dns.conf")
    with open(conf, "w") as f:
        f.write('rules = ({ name = "nx"; action = "dns"; error = "nxdomain"; '
                'match = { host = "*.missing.test"; }; });\n')
    v = subprocess.Popen([PY, "-c", DNS_VICTIM], env=shim_env(FAULTNET_CONFIG=conf, FAULTNET_RUNDIR=tmp),
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    import json
    try:
        got = json.loads(v.stdout.readline() or "{}")
        ports = got.get("ports") or []
        att = [subprocess.run(as_user("fnhostile", [PY, "-c", DNS_ATTACKER, str(p)]), capture_output=True,
                              text=True, timeout=30).stdout.strip() for p in ports]
        v.stdin.write("\n")
        v.stdin.flush()
        then = json.loads(v.stdout.readline() or "{}")
    finally:
        v.kill()
        v.wait()
    check("i38.13: the victim's own query is answered by its responder (NXDOMAIN, responder port %s)" % ports,
          got.get("first") == 3 and len(ports) == 1, got)
    check("i38.13: another account's UDP and TCP queries to that port get no answer (%s)" % att,
          att and all(json.loads(a or "{}").get("udp") == "TimeoutError" and
                     json.loads(a or "{}").get("tcp") in ("closed", "ConnectionResetError") for a in att), att)
    check("i38.13: the victim's next query is still answered (%s)" % then, then.get("then") == 3, then)
    shutil.rmtree(tmp, ignore_errors=True)


def main():
    print("hostile user (%s)" % BUILD)
    tests = checks.selected([test_endpoints_not_takeable, test_i38_13_responder_own_only,
                             test_rundir_taken, test_journal, test_config_edges,
                             test_counters_cumulative])
    if os.geteuid() != 0:
        print("  skip - the hostile-user suite needs root to create accounts")
        with open(checks.COUNTS, "a") as f:
            f.write("skip\n")
        return 0
    for u in USERS:
        subprocess.run(["userdel", u], capture_output=True)
        subprocess.run(["useradd", "-M", "-N", "-s", "/usr/sbin/nologin", u], check=True)
    shared = share_with_others()
    reach = subprocess.run(as_user("fnhostile", ["test", "-x", CTL]), capture_output=True)
    check("the other accounts can run the copies of faultctl and the library, wherever the tree is",
          reach.returncode == 0, reach.stderr)
    try:
        for t in tests:
            t()
    finally:
        for u in USERS:
            subprocess.run(["userdel", u], capture_output=True)
        shutil.rmtree(shared, ignore_errors=True)
    gone = all(subprocess.run(["id", u], capture_output=True).returncode != 0 for u in USERS)
    check("the suite's accounts are removed", gone)
    return 1 if checks.failed else 0


sys.exit(main())
