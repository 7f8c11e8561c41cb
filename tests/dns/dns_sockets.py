"""dns_sockets.py - dns rules on the queries a process sends a nameserver
itself (dig, Node.js's dns.resolve* through c-ares, a hand-made resolver
in Python), over UDP and TCP: the shim's responder answers NXDOMAIN,
SERVFAIL, REFUSED, an empty answer, the rule's addresses or nothing, and
forwards every other query to the real nameserver, late when a rule says
so. Everything runs in a network namespace of its own whose only
interface is loopback, with a nameserver of the test's (upstream.py) on
127.0.0.53, which logs what reaches it.

usage: dns_sockets.py BUILD_DIR [PRELOAD_FIRST]"""
import json
import os
import re
import struct
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.dirname(HERE))
import checks  # noqa: E402
from checks import check  # noqa: E402

BUILD = os.path.abspath(sys.argv[1])
FIRST = sys.argv[2] if len(sys.argv) > 2 else ""
LIB = (FIRST + ":" if FIRST else "") + os.path.join(BUILD, "libfaultnet.so")
CTL = os.path.join(BUILD, "faultctl")
PY = "/usr/bin/python3"
NS = "127.0.0.53"

POLICY = """rules = (
  { name = "cut-ns"; action = "drop"; match = { to = "127.0.0.54/32"; port = "53"; }; },
  { name = "nx"; action = "dns"; error = "nxdomain"; match = { host = "*.missing.test"; }; },
  { name = "sf"; action = "dns"; error = "servfail"; match = { host = "broken.test"; }; },
  { name = "rf"; action = "dns"; error = "refused"; match = { host = "refused.test"; }; },
  { name = "nd"; action = "dns"; error = "nodata"; match = { host = "empty.test"; }; },
  { name = "to"; action = "dns"; error = "timeout"; match = { host = "silent.test"; }; },
  { name = "an"; action = "dns"; answer = [ "127.66.0.1", "::1" ]; match = { host = "storage.example.test"; }; },
  { name = "sl"; action = "dns"; delay_ms = 700; match = { host = "slow.test"; }; },
  { name = "flip"; action = "dns"; error = "nxdomain"; enabled = false; match = { host = "flip.test"; }; }
);
"""

# A query for NAME (type A) by hand; prints the sender, the peer the
# socket reports and the rcode, as JSON.
RAW = r"""
import json, socket, struct, sys
name, mode = sys.argv[1], sys.argv[2]
q = struct.pack("!HHHHHH", 0x1234, 0x0100, 1, 0, 0, 0)
q += b"".join(bytes([len(p)]) + p.encode() for p in name.split(".")) + b"\0" + struct.pack("!HH", 1, 1)
out = {}
if mode == "tcp":
    s = socket.create_connection(("127.0.0.53", 53), timeout=3)
    out["peer"] = list(s.getpeername())
    s.sendall(struct.pack("!H", len(q)) + q)
    n = struct.unpack("!H", s.recv(2, socket.MSG_WAITALL))[0]
    a = s.recv(n, socket.MSG_WAITALL)
else:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(3)
    if mode == "connected":
        s.connect(("127.0.0.53", 53))
        out["peer"] = list(s.getpeername())
        s.send(q)
    else:
        s.sendto(q, ("127.0.0.53", 53))
    a, frm = s.recvfrom(4096)
    out["from"] = list(frm)
out["id"] = struct.unpack("!H", a[:2])[0]
out["rcode"] = a[3] & 15
out["answers"] = struct.unpack("!H", a[6:8])[0]
print(json.dumps(out))
"""

NODE = r"""
const dns = require("dns");
const r = new dns.Resolver({ timeout: 800, tries: 1 });
r.setServers(["127.0.0.53"]);
(async () => {
  const out = {};
  for (const n of process.argv.slice(1))
    out[n] = await new Promise((ok) => r.resolve4(n, (e, a) => ok(e ? e.code : a)));
  console.log(JSON.stringify(out));
})();
"""


def env(conf, **extra):
    e = {k: v for k, v in os.environ.items() if not k.startswith("FAULTNET_")}
    e.update(FAULTNET_CONFIG=conf, LD_PRELOAD=LIB, ASAN_OPTIONS="detect_leaks=0")
    e.update(extra)
    return e


def run(conf, argv, timeout=60):
    return subprocess.run(argv, env=env(conf), capture_output=True, text=True, timeout=timeout)


def upstream_names(log):
    with open(log) as f:
        return [line.split()[1] for line in f if line.strip()]


def dig(conf, name, tcp=False, extra=(), server=NS):
    argv = ["dig", "+time=2", "+tries=1", "@" + server, name] + (["+tcp"] if tcp else []) + list(extra)
    out = run(conf, argv).stdout
    status = re.search(r"status: (\w+)", out)
    return (status.group(1) if status else "none", re.findall(r"\tIN\tA\t(\S+)", out), out)


def test_dig(conf, log):
    for tcp in (False, True):
        how = "TCP" if tcp else "UDP"
        for name, want in (("www.missing.test", "NXDOMAIN"), ("broken.test", "SERVFAIL"),
                           ("refused.test", "REFUSED")):
            status, _, out = dig(conf, name, tcp)
            check("dig over %s: %s gets %s from the responder" % (how, name, want),
                  status == want, out[-400:])
        status, addrs, out = dig(conf, "empty.test", tcp)
        check("dig over %s: nodata is NOERROR with no answer" % how,
              status == "NOERROR" and addrs == [] and "ANSWER: 0" in out, out[-400:])
        status, addrs, out = dig(conf, "storage.example.test", tcp)
        check("dig over %s: an answer rule gives its address" % how,
              status == "NOERROR" and addrs == ["127.66.0.1"], out[-400:])
        status, addrs, out = dig(conf, "other-%s.test" % how.lower(), tcp)
        check("dig over %s: a name no rule takes gets the real nameserver's answer" % how,
              status == "NOERROR" and addrs == ["127.0.0.9"], out[-400:])
    seen = upstream_names(log)
    check("the real nameserver saw the forwarded names and none of the faulted ones",
          "other-udp.test" in seen and "other-tcp.test" in seen and
          not {"www.missing.test", "broken.test", "refused.test", "empty.test",
               "storage.example.test"} & set(seen), seen)
    t = time.monotonic()
    _, _, out = dig(conf, "silent.test", extra=["+time=1"])
    took = time.monotonic() - t
    check("dig: a timeout rule answers nothing (dig's own 1 s timeout, 'timed out')",
          "timed out" in out and 0.8 < took < 5 and "silent.test" not in upstream_names(log),
          "%.2f s %s" % (took, out[-300:]))
    _, addrs, out = dig(conf, "slow.test", extra=["+time=4"])
    ms = re.search(r"Query time: (\d+) msec", out)
    check("dig: delay_ms = 700 gives the real answer, late (650-3000 ms)",
          addrs == ["127.0.0.9"] and ms and 650 <= int(ms.group(1)) < 3000, out[-300:])
    status, _, out = dig(conf, "other.test", extra=["+time=1"], server="127.0.0.54")
    check("an address rule before the dns rules keeps first-match order (drop: no answer)",
          "timed out" in out, out[-300:])


def test_node(conf):
    node = checks.node_bin(ROOT)
    if not node:
        check("Node.js is installed for the c-ares checks", False)
        return
    names = ["www.missing.test", "broken.test", "refused.test", "empty.test",
             "storage.example.test", "other-node.test", "silent.test"]
    p = run(conf, [node, "-e", NODE] + names)
    try:
        got = json.loads(p.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        got = {"stdout": p.stdout[-300:], "stderr": p.stderr[-500:]}
    want = {"www.missing.test": "ENOTFOUND", "broken.test": "ESERVFAIL", "refused.test": "EREFUSED",
            "empty.test": "ENODATA", "storage.example.test": ["127.66.0.1"],
            "other-node.test": ["127.0.0.9"], "silent.test": "ETIMEOUT"}
    for n, w in want.items():
        check("Node.js dns.resolve4 (c-ares): %s -> %s" % (n, w), got.get(n) == w, got)


def test_raw(conf):
    for mode in ("sendto", "connected", "tcp"):
        p = run(conf, [PY, "-c", RAW, "www.missing.test", mode])
        try:
            got = json.loads(p.stdout.strip().splitlines()[-1])
        except (IndexError, ValueError):
            got = {"stderr": p.stderr[-500:]}
        ok = got.get("rcode") == 3 and got.get("id") == 0x1234
        if mode == "sendto":
            ok = ok and got.get("from") == [NS, 53]
        else:
            ok = ok and got.get("peer") == [NS, 53]
        check("a resolver of its own (%s): NXDOMAIN with its id, from/peer %s:53" % (mode, NS),
              ok, got)


# The responder after a fork (the child's own, even once the parent that
# made the first one has gone) and after the app closed every fd it did not
# open (os.closerange, as a daemon does).
LIFE = r"""
import json, os, socket, struct, sys, time
def ask(name):
    q = struct.pack("!HHHHHH", 7, 0x0100, 1, 0, 0, 0)
    q += b"".join(bytes([len(p)]) + p.encode() for p in name.split(".")) + b"\0" + struct.pack("!HH", 1, 1)
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(3)
    s.sendto(q, ("127.0.0.53", 53))
    try:
        a, frm = s.recvfrom(4096)
        return [a[3] & 15, frm[0]]
    except OSError as e:
        return [str(e)]
    finally:
        s.close()
out = {"first": ask("a.missing.test")}
r, w = os.pipe()
pid = os.fork()
if pid == 0:
    os.close(r)
    os.write(w, json.dumps(ask("b.missing.test")).encode())
    os._exit(0)
os.close(w)
out["child"] = json.loads(os.read(r, 4096) or b"null")
os.closerange(3, 65536)
out["closed"] = ask("c.missing.test")
print(json.dumps(out))
"""


def test_life(conf):
    p = run(conf, [PY, "-c", LIFE])
    try:
        got = json.loads(p.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        got = {"stderr": p.stderr[-500:]}
    nx = [3, NS]
    check("responder: answered in the parent, in a fork child, and after the app closed every "
          "fd it did not open (NXDOMAIN from %s each time)" % NS,
          got.get("first") == nx and got.get("child") == nx and got.get("closed") == nx, got)


def test_flip_and_counts(conf, log):
    code = RAW.replace('name, mode = sys.argv[1], sys.argv[2]', 'name, mode = "flip.test", "sendto"')
    # One process asks before and after a live enable; its stats count both.
    # A group of its own: a group's journal outlives its processes.
    group = "dnsflip%d" % os.getpid()
    p = subprocess.Popen([CTL, "run", "--config", conf, "-g", group, "--stats", "--json", "--", PY, "-u", "-c",
                          "import subprocess,sys\ncode=%r\n"
                          "for i in range(2):\n sys.stdin.readline()\n"
                          " print(subprocess.run([sys.executable,'-c',code],capture_output=True,"
                          "text=True).stdout.strip(),flush=True)\n" % code],
                         env=env(conf), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    p.stdin.write("go\n")
    p.stdin.flush()
    before = p.stdout.readline().strip()
    ctl = subprocess.run([CTL, "-g", group, "enable", "flip"], env=env(conf), capture_output=True,
                         text=True, timeout=30)
    p.stdin.write("go\n")
    p.stdin.flush()
    after = p.stdout.readline().strip()
    _, err = p.communicate(timeout=30)
    subprocess.run([CTL, "-g", group, "reset"], env=env(conf), capture_output=True)
    b = json.loads(before) if before.startswith("{") else {}
    a = json.loads(after) if after.startswith("{") else {}
    check("live enable of a dns rule: answered by the nameserver before, NXDOMAIN after",
          b.get("rcode") == 0 and b.get("answers") == 1 and a.get("rcode") == 3,
          (before, after, ctl.stderr[-300:]))
    recs = [json.loads(x) for x in err.splitlines() if x.startswith("{")]
    flip = [r for r in recs if r.get("type") == "name" and r.get("name") == "flip.test"]
    check("run --stats counts the socket queries per name (flip.test: 2 lookups, 1 nxdomain)",
          flip and flip[0].get("lookups") == 2 and flip[0].get("nxdomain") == 1, recs)


# 400 queries for slow.test (delay_ms = 700) from one socket, every 2 ms or
# all at once; prints how many came back and the earliest answer's delay.
MANY = r"""
import json, select, socket, struct, sys, time
paced = sys.argv[1] == "paced"
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.setsockopt(socket.SOL_SOCKET, 33, 1 << 22)  # SO_RCVBUFFORCE (root, in the namespace)
sent, got = {}, {}
name = b"".join(bytes([len(p)]) + p.encode() for p in "slow.test".split(".")) + b"\0"
for i in range(400):
    sent[i] = time.monotonic()
    s.sendto(struct.pack("!HHHHHH", i, 0x0100, 1, 0, 0, 0) + name + struct.pack("!HH", 1, 1),
             ("127.0.0.53", 53))
    if paced:
        time.sleep(0.002)
end = time.monotonic() + 6
while len(got) < 400 and time.monotonic() < end:
    if select.select([s], [], [], 0.2)[0]:
        a = s.recv(4096)
        i = struct.unpack("!H", a[:2])[0]
        got.setdefault(i, time.monotonic() - sent.get(i, 0))
print(json.dumps({"answered": len(got), "earliest_ms": round(min(got.values(), default=0) * 1000)}))
"""


def test_many_late(conf):
    """i38.14: answers late by delay_ms waited in a list of 256 and queries
    waiting for the nameserver in another: with 400 outstanding, 144 paced
    ones were answered at once and 144 of a burst were lost."""
    for mode in ("paced", "burst"):
        p = run(conf, [PY, "-c", MANY, mode], timeout=60)
        try:
            got = json.loads(p.stdout.strip().splitlines()[-1])
        except (IndexError, ValueError):
            got = {"stderr": p.stderr[-300:]}
        check("i38.14: 400 queries for a delay_ms = 700 name (%s): all answered, none before 650 ms (%s)"
              % (mode, got), got.get("answered") == 400 and got.get("earliest_ms", 0) >= 650, got)


# A query for slow.test, its answer held 700 ms by the responder's thread
# (the nameserver, a local one, answers at once); a fork 400 ms in; prints
# the allocator calls forkprobe.so counted in the child before fork()
# returned there (its fork handlers), and whether the parent had its
# answer late: then it was held at the fork.
FORK_LATE = r"""
import ctypes, os, socket, struct, time
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
name = b"".join(bytes([len(p)]) + p.encode() for p in "slow.test".split(".")) + b"\0"
t0 = time.monotonic()
s.sendto(struct.pack("!HHHHHH", 7, 0x0100, 1, 0, 0, 0) + name + struct.pack("!HH", 1, 1),
         ("127.0.0.53", 53))
time.sleep(0.4)
pid = os.fork()
if pid == 0:
    os._exit(min(ctypes.CDLL(None).forkprobe_allocs(), 100))
s.settimeout(5)
calls = os.waitpid(pid, 0)[1] >> 8
print(calls, len(s.recv(4096)) > 12 and time.monotonic() - t0 >= 0.65)
"""


def test_fork_late(conf):
    """The fork child's handler freed the answers the responder held late:
    a parent thread may hold the allocator's lock at the fork, and an
    allocator without fork handlers of its own (ASan's) then never returns
    in the child."""
    preload = checks.forkprobe_preload(BUILD, FIRST, LIB)
    if not preload:
        return
    p = subprocess.run([PY, "-c", FORK_LATE], env=env(conf, LD_PRELOAD=preload),
                       capture_output=True, text=True, timeout=60)
    check("a fork child while an answer is held late: no allocator call in its fork handlers, "
          "and the parent gets the answer (%s)" % p.stdout.strip(),
          p.stdout.strip() == "0 True", (p.stdout, p.stderr[-300:]))


def inside():
    tmp = tempfile.mkdtemp(prefix="fn-dnss-")
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    log = os.path.join(tmp, "upstream.log")
    open(log, "w").close()
    up = subprocess.Popen([PY, os.path.join(HERE, "upstream.py"), NS, "53", log],
                          stdout=subprocess.PIPE, text=True)
    up.stdout.readline()
    conf = os.path.join(tmp, "dns.conf")
    with open(conf, "w") as f:
        f.write(POLICY)
    try:
        tests = [lambda: test_raw(conf), lambda: test_life(conf), lambda: test_many_late(conf),
                 lambda: test_fork_late(conf)]
        if FIRST:
            print("  note - dig and Node.js run against the normal build only (libasan)")
        else:
            tests += [lambda: test_dig(conf, log), lambda: test_node(conf)]
        for t in checks.selected(tests + [lambda: test_flip_and_counts(conf, log)]):
            t()
    finally:
        up.kill()
        subprocess.run(["rm", "-rf", tmp])
    sys.exit(1 if checks.failed else 0)


if __name__ == "__main__":
    if os.environ.get("FN_DNS_INSIDE") == "1":
        inside()
    # Its own network namespace: loopback only, its own 127.0.0.53.
    sys.exit(subprocess.run(["unshare", "-n", PY, "-u"] + sys.argv,
                            env=dict(os.environ, FN_DNS_INSIDE="1")).returncode)
