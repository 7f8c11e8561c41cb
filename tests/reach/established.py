"""established.py - a live fault that reaches connections already open
(rules with established = true), with pooled clients that call every 200 ms
over one keep-alive connection: requests.Session, httpx.Client and Node.js
fetch. An enable of an established blackhole makes the next call fail with
the client's own timeout; a disable lets the calls after it succeed. Also
reset, stall and latency on an open connection, TCP_USER_TIMEOUT ending a
connection whose route died, connections no established rule covers
never relayed, and an enable and disable reaching 48 open connections
carried by both relay threads. Loopback only.

usage: established.py BUILD_DIR"""
import json
import os
import select
import socket
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "http"))
import checks  # noqa: E402
from checks import check  # noqa: E402
import origin  # noqa: E402

BUILD = os.path.abspath(sys.argv[1])
CTL = os.path.join(BUILD, "faultctl")
PY = "/usr/bin/python3"
TMP = tempfile.mkdtemp(prefix="fn-est-")
HTTP_PORT, ECHO_PORT, OTHER_PORT, MANY_PORT = 18310, 18311, 18312, 18313

POLICY = """rules = (
  { name = "route"; action = "blackhole"; established = true; enabled = false;
    match = { to = "127.0.0.1/32"; port = "%(h)d,%(e)d"; }; },
  { name = "rst"; action = "reset"; established = true; enabled = false;
    match = { to = "127.0.0.1/32"; port = "%(h)d"; }; },
  { name = "hang"; action = "stall"; established = true; enabled = false;
    match = { to = "127.0.0.1/32"; port = "%(h)d"; }; },
  { name = "slow"; action = "latency"; latency_ms = 400; established = true; enabled = false;
    match = { to = "127.0.0.1/32"; port = "%(h)d"; }; },
  { name = "many"; action = "latency"; latency_ms = 300; established = true; enabled = false;
    match = { to = "127.0.0.1/32"; port = "%(m)d"; }; }
);
""" % {"h": HTTP_PORT, "e": ECHO_PORT, "m": MANY_PORT}

CLIENTS = {
    "requests.Session": [PY, "-u", "-c", r"""
import json, sys, time, requests
s = requests.Session()
while True:
    t = time.monotonic()
    try:
        r = s.get(sys.argv[1], timeout=1); out = {"ok": r.status_code}
    except Exception as e:
        out = {"err": type(e).__name__}
    out["t"] = round(time.monotonic() - t, 2)
    print(json.dumps(out), flush=True)
    time.sleep(0.2)
"""],
    "httpx.Client": [PY, "-u", "-c", r"""
import json, sys, time, httpx
s = httpx.Client(timeout=1)
while True:
    t = time.monotonic()
    try:
        r = s.get(sys.argv[1]); out = {"ok": r.status_code}
    except Exception as e:
        out = {"err": type(e).__name__}
    out["t"] = round(time.monotonic() - t, 2)
    print(json.dumps(out), flush=True)
    time.sleep(0.2)
"""],
    "Node.js fetch": ["NODE", "-e", r"""
(async () => {
  for (;;) {
    const t = Date.now();
    let out;
    try {
      const r = await fetch(process.argv[1], { signal: AbortSignal.timeout(1000) });
      await r.arrayBuffer();
      out = { ok: r.status };
    } catch (e) { out = { err: e.name }; }
    out.t = (Date.now() - t) / 1000;
    console.log(JSON.stringify(out));
    await new Promise((r) => setTimeout(r, 200));
  }
})();
"""],
}

TIMEOUTS = {"ReadTimeout", "TimeoutError", "ConnectTimeout"}


def plain_env():
    """The environment of every faultctl and client here: none of the
    caller's FAULTNET_ settings but its run directory, the same for all."""
    return {k: v for k, v in os.environ.items()
            if not k.startswith("FAULTNET_") or k == "FAULTNET_RUNDIR"}


def ctl(group, *args):
    return subprocess.run([CTL, "-g", group] + list(args), capture_output=True, text=True, timeout=30,
                          env=plain_env())


class Client:
    """A pooled client calling every 200 ms under faultctl run."""

    def __init__(self, conf, group, argv, url):
        env = plain_env()
        self.p = subprocess.Popen([CTL, "run", "--config", conf, "-g", group, "--"] + argv + [url],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        self.lines = []

    def next(self, timeout=10):
        r, _, _ = select.select([self.p.stdout], [], [], timeout)
        line = self.p.stdout.readline() if r else ""
        try:
            out = json.loads(line)
        except ValueError:
            out = {"none": line[-200:]}
        self.lines.append(out)
        return out

    def wait_ok(self, n, limit=30):
        got = 0
        for _ in range(limit):
            if "ok" in self.next():
                got += 1
                if got == n:
                    return True
        return False

    def stop(self):
        self.p.kill()
        self.p.wait()


def node():
    return checks.node_bin(ROOT)


def test_pooled(conf, name, argv, o):
    group = "est%d" % os.getpid()
    ctl(group, "reset")
    url = "http://127.0.0.1:%d/pooled" % HTTP_PORT
    before = len(o.requests)
    c = Client(conf, group, argv, url)
    try:
        warm = c.wait_ok(3)
        e = ctl(group, "enable", "route")
        c.next()  # a call may have been on its way when the rule came in
        hit = c.next()
        failed = [x for x in c.lines[-2:] if "err" in x]
        check("%s: calls succeed over the pooled connection before the enable" % name, warm,
              c.lines)
        check("%s: after `enable` of an established blackhole a call fails with the client's own "
              "timeout (~1 s)" % name,
              e.returncode == 0 and failed and failed[-1]["err"] in TIMEOUTS and
              0.8 <= failed[-1]["t"] <= 3, (e.stderr, c.lines[-4:], hit))
        d = ctl(group, "disable", "route")
        back = c.wait_ok(1, limit=6)
        check("%s: after `disable` the following calls succeed again" % name,
              d.returncode == 0 and back, c.lines[-4:])
        check("%s: the server saw the calls (%d)" % (name, len(o.requests) - before),
              len(o.requests) - before >= 4)
    finally:
        c.stop()
        ctl(group, "reset")


def test_actions(conf):
    argv = CLIENTS["requests.Session"]
    url = "http://127.0.0.1:%d/actions" % HTTP_PORT
    group = "esta%d" % os.getpid()
    ctl(group, "reset")
    c = Client(conf, group, argv, url)
    try:
        c.wait_ok(2)
        fast = max(x["t"] for x in c.lines if "ok" in x)
        ctl(group, "enable", "slow")
        c.next()
        slow = c.next()
        check("latency on an open connection: a call took %.2f s, under 0.2 s before" % slow.get("t", 0),
              "ok" in slow and slow["t"] >= 0.38 and fast < 0.2, c.lines[-4:])
        ctl(group, "disable", "slow")
        c.next()
        quick = c.next()
        check("latency disabled: calls fast again", "ok" in quick and quick["t"] < 0.3, c.lines[-3:])
        ctl(group, "enable", "hang")
        c.next()
        hung = c.next()
        check("stall on an open connection: the call times out (ReadTimeout)",
              hung.get("err") == "ReadTimeout" or c.lines[-2].get("err") == "ReadTimeout", c.lines[-3:])
        ctl(group, "disable", "hang")
        check("stall disabled: calls succeed again", c.wait_ok(1, limit=6), c.lines[-3:])
        ctl(group, "enable", "rst")
        c.next()
        rst = [x.get("err") for x in c.lines[-1:] + [c.next()]]
        check("reset on an open connection: the call fails with ConnectionError at once",
              "ConnectionError" in rst, c.lines[-3:])
        ctl(group, "disable", "rst")
        check("reset disabled: a new connection succeeds", c.wait_ok(1, limit=6), c.lines[-3:])
        # Each live rule that reached the open connection is an event too,
        # not only a count (none was said before).
        ev = ctl(group, "events").stdout
        got = [o for o in ("established-latency", "established-stall", "established-reset")
               if o in ev]
        check("faultctl events: an event for each live rule that reached the open connection (%s)"
              % ", ".join(got), len(got) == 3, ev[-600:])
    finally:
        c.stop()
        ctl(group, "reset")


def echo_server(port):
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", port))
    s.listen(8)

    def serve(c):
        with c:
            c.sendall(b"%d\n" % c.getpeername()[1])
            while True:
                d = c.recv(65536)
                if not d:
                    return
                c.sendall(d)

    def loop():
        while True:
            c, _ = s.accept()
            threading.Thread(target=serve, args=(c,), daemon=True).start()
    threading.Thread(target=loop, daemon=True).start()


# Connects, tells whether the connection is direct (not relayed): the
# server saw the app's port, and this process holds one established socket
# from that port (a relayed one holds two, the app's to the hold sink and
# the relay's to the server, which leaves from the app's port too); then
# sends a little every 100 ms with TCP_USER_TIMEOUT 1000 ms until an error.
RAW = r"""
import json, os, socket, sys, time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
s.setsockopt(socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT, 1000)
seen = int(s.makefile().readline())
mine = s.getsockname()[1]
fds = set()
for fd in os.listdir("/proc/self/fd"):
    try:
        fds.add(os.readlink("/proc/self/fd/" + fd))
    except OSError:
        pass
ours = 0
with open("/proc/self/net/tcp") as f:
    for line in list(f)[1:]:
        x = line.split()
        if x[3] == "01" and int(x[1].split(":")[1], 16) == mine and "socket:[%s]" % x[9] in fds:
            ours += 1
print(json.dumps({"direct": seen == mine and ours == 1, "sockets": ours}), flush=True)
if sys.argv[2] == "hold":
    sys.stdin.readline()
    t = time.monotonic()
    try:
        for i in range(200):
            s.send(b"x" * 1000)
            time.sleep(0.1)
        print(json.dumps({"err": None}), flush=True)
    except OSError as e:
        print(json.dumps({"err": e.errno, "t": round(time.monotonic() - t, 1)}), flush=True)
"""


def test_raw(conf):
    echo_server(ECHO_PORT)
    echo_server(OTHER_PORT)
    group = "estr%d" % os.getpid()
    ctl(group, "reset")
    env = plain_env()
    other = subprocess.run([CTL, "run", "--config", conf, "-g", group, "--", PY, "-c", RAW,
                            str(OTHER_PORT), "once"], capture_output=True, text=True, env=env, timeout=30)
    check("a connection no established rule covers is not relayed (one socket from the app's port)",
          '"direct": true' in other.stdout, other.stdout + other.stderr[-300:])
    p = subprocess.Popen([CTL, "run", "--config", conf, "-g", group, "--", PY, "-u", "-c", RAW,
                          str(ECHO_PORT), "hold"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, env=env)
    first = p.stdout.readline()
    check("a connection an established rule covers is relayed while the rule is off",
          '"direct": false' in first, first)
    ctl(group, "enable", "route")
    p.stdin.write("go\n")
    p.stdin.flush()
    r, _, _ = select.select([p.stdout], [], [], 25)
    last = json.loads(p.stdout.readline() or "{}") if r else {}
    p.kill()
    ctl(group, "reset")
    check("established blackhole: TCP_USER_TIMEOUT ends the open connection with ETIMEDOUT",
          last.get("err") == 110 and last.get("t", 99) < 15, last)


# 48 connections at once (the relay's second shard starts at 16, see
# preload/relay/relay_shard.h); on each line from stdin, a message on every
# one at once and each one's round trip, with this process's relay threads.
MANY = r"""
import json, os, select, socket, sys, time
conns = []
for i in range(48):
    s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
    s.makefile().readline()
    conns.append(s)
def threads():
    names = []
    for t in os.listdir("/proc/self/task"):
        with open("/proc/self/task/%s/comm" % t) as f:
            names.append(f.read().strip())
    return sorted(n for n in names if n.startswith("faultnet-relay"))
while sys.stdin.readline():
    t0 = time.monotonic()
    for i, s in enumerate(conns):
        s.sendall(b"%d\n" % i)
    rtt, left = {}, {s.fileno(): i for i, s in enumerate(conns)}
    while left and time.monotonic() - t0 < 10:
        r, _, _ = select.select(list(left), [], [], 1)
        for fd in r:
            i = left.pop(fd)
            ok = conns[i].recv(100) == b"%d\n" % i
            rtt[i] = round(time.monotonic() - t0, 3) if ok else -1
    print(json.dumps({"rtt": [rtt.get(i, 99) for i in range(48)], "threads": threads()}),
          flush=True)
"""


def test_shards(conf):
    """A live rule reaches the open connections of both relay threads."""
    echo_server(MANY_PORT)
    group = "ests%d" % os.getpid()
    ctl(group, "reset")
    p = subprocess.Popen([CTL, "run", "--config", conf, "-g", group, "--", PY, "-u", "-c", MANY,
                          str(MANY_PORT)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, env=plain_env())

    def rnd():
        p.stdin.write("go\n")
        p.stdin.flush()
        r, _, _ = select.select([p.stdout], [], [], 30)
        return json.loads(p.stdout.readline() or "{}") if r else {}
    try:
        before = rnd()
        both = before.get("threads") == ["faultnet-relay", "faultnet-relay2"]
        if not both and len(os.sched_getaffinity(0)) < 2:
            print("  skip - one CPU: the relay keeps one thread")
            checks.skip()
            return
        check("48 open connections: two relay threads (%s)" % before.get("threads"), both,
              before)
        check("before the enable every round trip is quick",
              before and max(before["rtt"]) < 0.25, before)
        ctl(group, "enable", "many")
        slow = rnd()
        check("after `enable` of an established latency rule of 300 ms, every one of the 48 "
              "connections (both relay threads') takes 0.6 s a round trip",
              slow and min(slow["rtt"]) >= 0.55 and max(slow["rtt"]) < 5, slow)
        ctl(group, "disable", "many")
        rnd()
        quick = rnd()
        check("after `disable` every one is quick again",
              quick and max(quick["rtt"]) < 0.25, quick)
    finally:
        p.kill()
        p.wait()
        ctl(group, "reset")


def main():
    conf = os.path.join(TMP, "est.conf")
    with open(conf, "w") as f:
        f.write(POLICY)
    o = origin.Origin(HTTP_PORT).start()
    for t in checks.selected([test_pooled, test_actions, test_raw, test_shards]):
        if t is not test_pooled:
            t(conf)
            continue
        for name, argv in CLIENTS.items():
            if argv[0] == "NODE":
                if not node():
                    check("Node.js is installed", False)
                    continue
                argv = [node()] + argv[1:]
            test_pooled(conf, name, argv, o)
    o.shutdown()
    subprocess.run(["rm", "-rf", TMP])
    sys.exit(1 if checks.failed else 0)


if __name__ == "__main__":
    main()
