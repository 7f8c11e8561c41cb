"""dns_test.py - dns rules and hostname rules with real clients, loopback
only: NXDOMAIN, SERVFAIL, NODATA and timeout as curl, Python, requests,
Node.js and Java meet them; an answer rule sending a real hostname (and
the S3 SDK's real endpoint name, in a network namespace with nothing but
loopback) to a local server; a blackhole scoped to names; the gethostbyname
family with h_errno; the per-name counts.

usage: dns_test.py BUILD_DIR [PRELOAD_FIRST]"""
import json
import os
import socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "http"))
import checks  # noqa: E402
from checks import check  # noqa: E402
import origin  # noqa: E402

BUILD = os.path.abspath(sys.argv[1])
FIRST = sys.argv[2] if len(sys.argv) > 2 else ""
LIB = (FIRST + ":" if FIRST else "") + os.path.join(BUILD, "libfaultnet.so")
CTL = os.path.join(BUILD, "faultctl")
PY = "/usr/bin/python3"
TMP = tempfile.mkdtemp(prefix="fn-dns-")
PORT = 18200

POLICY = """rules = (
  { name = "nx"; action = "dns"; error = "nxdomain"; match = { host = "*.missing.test"; }; },
  { name = "sf"; action = "dns"; error = "servfail"; match = { host = "broken.test"; }; },
  { name = "nd"; action = "dns"; error = "nodata"; match = { host = "empty.test"; }; },
  { name = "to"; action = "dns"; error = "timeout"; match = { host = "slow.test"; }; },
  { name = "storage"; action = "dns"; answer = [ "127.88.0.1" ]; match = { host = "storage.example.test"; }; },
  { name = "late"; action = "dns"; answer = [ "127.88.0.1" ]; delay_ms = 600; match = { host = "late.example.test"; }; },
  { name = "s3-name"; action = "dns"; answer = [ "127.88.0.2" ]; match = { host = "*.amazonaws.com"; }; },
  { name = "s3-slowdown"; action = "respond"; status = 503;
    headers = [ "Content-Type: application/xml" ];
    body = "<Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message></Error>";
    match = { to = "127.88.0.2/32"; host = "*.amazonaws.com"; }; },
  { name = "scoped"; action = "blackhole"; match = { host = "*.scoped.test"; }; },
  { name = "scoped-name"; action = "dns"; answer = [ "127.88.0.3" ]; match = { host = "api.scoped.test"; }; }
);
"""


def env(conf, **extra):
    e = {k: v for k, v in os.environ.items() if not k.startswith("FAULTNET_")}
    e.update(FAULTNET_CONFIG=conf, LD_PRELOAD=LIB, ASAN_OPTIONS="detect_leaks=0")
    e.update(extra)
    return e


def run(conf, argv, timeout=60, **extra):
    return subprocess.run(argv, env=env(conf, **extra), capture_output=True, text=True,
                          timeout=timeout)


def py(conf, code, **extra):
    p = run(conf, [PY, "-c", code], **extra)
    try:
        return json.loads(p.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        return {"stdout": p.stdout[-300:], "stderr": p.stderr[-600:]}


GAI = """
import json, socket, sys, time
t = time.monotonic()
try:
    socket.getaddrinfo(sys.argv[1] if len(sys.argv) > 1 else %r, 80)
    r = ["ok"]
except socket.gaierror as e:
    r = [e.errno]
print(json.dumps(r + [round(time.monotonic() - t, 2)]))
"""


def node_bin():
    return checks.node_bin(ROOT)


# With libasan preloaded (the sanitizer build), curl hangs at start-up and
# the JVM and Node.js do not start: those clients run in the normal build.
OTHERS = not FIRST


def test_errors(conf):
    if OTHERS:
        r = run(conf, ["curl", "-s", "-o", "/dev/null", "--max-time", "5", "http://www.missing.test/"])
        check("NXDOMAIN: curl exits 6 (could not resolve host)", r.returncode == 6,
              (r.returncode, r.stderr))
    check("NXDOMAIN: Python socket.gaierror errno -2 (EAI_NONAME)",
          py(conf, GAI % "www.missing.test")[0] == -2)
    out = py(conf, "import json, requests\ntry:\n requests.get('http://api.missing.test/', timeout=5); "
             "print(json.dumps(['ok']))\nexcept requests.exceptions.ConnectionError as e:\n "
             "print(json.dumps(['ConnectionError', 'Name or service not known' in str(e)]))")
    check("NXDOMAIN: requests raises ConnectionError (name not known)", out == ["ConnectionError", True], out)
    if not OTHERS:
        print("  note - curl, Node.js and Java run against the normal build only (libasan)")
        check("SERVFAIL: Python errno -3 (EAI_AGAIN)", py(conf, GAI % "broken.test")[0] == -3)
        return
    node = node_bin() or "node"
    js = ("require('dns').lookup(process.argv[1], (e) => console.log(JSON.stringify("
          "[e ? e.code : 'ok'])))")
    for name, want in (("www.missing.test", "ENOTFOUND"), ("broken.test", "EAI_AGAIN")):
        r = run(conf, [node, "-e", js, name])
        got = r.stdout.strip()
        check("%s: Node.js dns.lookup %s" % (name, want), got == json.dumps([want]), (got, r.stderr[-300:]))
    java = os.path.join(TMP, "Lookup.java")
    with open(java, "w") as f:
        f.write("public class Lookup { public static void main(String[] a) { try {"
                " java.net.InetAddress.getByName(a[0]); System.out.println(\"ok\"); }"
                " catch (java.net.UnknownHostException e) { System.out.println(\"UnknownHostException\"); } } }")
    r = run(conf, ["java", java, "www.missing.test"], timeout=120)
    check("NXDOMAIN: Java UnknownHostException", r.stdout.strip() == "UnknownHostException",
          (r.stdout, r.stderr[-300:]))
    check("SERVFAIL: Python errno -3 (EAI_AGAIN)", py(conf, GAI % "broken.test")[0] == -3)
    check("NODATA: Python errno -5 (EAI_NODATA)", py(conf, GAI % "empty.test")[0] == -5)


def resolver_wait(timeout, attempts, resolv="/etc/resolv.conf"):
    """What glibc's res_send waits on silent nameservers: per attempt, the
    first server's timeout, then timeout << n shared among the servers."""
    try:
        n = sum(1 for line in open(resolv) if line.split()[:1] == ["nameserver"])
    except OSError:
        n = 0
    n = min(max(n, 1), 3)
    per = sum(max(1, (timeout << i) // (n if i else 1)) for i in range(n))
    return per * attempts


def test_timeout(conf):
    """With RES_OPTIONS="timeout:1 attempts:2" (which glibc's resolver
    reads over /etc/resolv.conf's options)."""
    want = resolver_wait(1, 2)
    out = py(conf, GAI % "slow.test", RES_OPTIONS="timeout:1 attempts:2")
    err, took = (out + [None, None])[:2] if isinstance(out, list) else (None, None)
    check("timeout: Python errno -3 after the resolver's configured %d s (%s s)" % (want, took),
          err == -3 and took is not None and abs(took - want) <= 0.1 * want, out)


def test_answer(conf):
    o = origin.Origin(PORT, "127.88.0.1").start()
    r = run(conf, [PY, "-c", "import urllib.request, sys; print(urllib.request.urlopen(sys.argv[1]).status)",
                   "http://storage.example.test:%d/y" % PORT]) if not OTHERS else None
    if r is not None:
        check("answer: Python urllib reaches the local server under the real name (200)",
              r.stdout.strip() == "200", (r.stdout, r.stderr[-300:]))
        o.shutdown()
        return
    r = run(conf, ["curl", "-s", "--max-time", "5", "-o", "/dev/null", "-w", "%{http_code}",
                   "http://storage.example.test:%d/x" % PORT])
    check("answer: curl http://storage.example.test:PORT/ reaches the local server (200)",
          r.stdout == "200" and o.requests and o.requests[-1][1] == "/x", (r.stdout, r.stderr))
    out = py(conf, GAI % "late.example.test")
    check("answer with delay_ms 600: the lookup takes 0.6 s (%s)" % out[1:],
          out[0] == "ok" and 0.55 <= out[1] < 1.5, out)
    o.shutdown()


def test_s3(conf):
    if not OTHERS:
        return
    node = node_bin()
    if not node:
        check("Node.js 20 for the S3 SDK (make test installs it)", False)
        return
    # Nothing but loopback: if the rules let anything out, it could not go.
    script = os.path.join(ROOT, "tests/http/s3_quota.js")
    ns = ["unshare", "-n", "sh", "-c", 'ip link set lo up && exec "$@"', "sh", node, script,
          "s3.us-east-1.amazonaws.com", "9000", "1", "fast", "1"]
    p = subprocess.run(ns, env=env(conf), capture_output=True, text=True, timeout=120)
    out = json.loads(p.stdout.strip().splitlines()[-1]) if p.stdout.strip() else {}
    check("the S3 SDK with its real endpoint name meets a respond rule on *.amazonaws.com "
          "(SlowDown), sent to loopback by an answer rule", out.get("outcomes") == ["SlowDown"],
          (out, p.stderr[-400:]))
    bare = os.path.join(TMP, "no-rules.conf")
    with open(bare, "w") as f:
        f.write("rules = ();\n")
    p = subprocess.run(ns, env=env(bare), capture_output=True, text=True, timeout=120)
    out = json.loads(p.stdout.strip().splitlines()[-1]) if p.stdout.strip() else {}
    check("without the rules the same SDK fails to resolve in the loopback-only namespace (%s)"
          % out.get("outcomes"), out.get("outcomes") in (["EAI_AGAIN"], ["ENOTFOUND"]),
          (out, p.stderr[-300:]))


CONNECT = """
import json, socket, sys
out = []
for host in sys.argv[1:]:
    s = socket.socket(); s.settimeout(1)
    try:
        s.connect((host, %d)); out.append("connected")
    except socket.timeout:
        out.append("timeout")
    except OSError as e:
        out.append(e.__class__.__name__)
print(json.dumps(out))
"""


def test_scoped(conf):
    o = origin.Origin(PORT, "127.88.0.3").start()
    p = run(conf, [PY, "-c", CONNECT % PORT, "api.scoped.test", "127.88.0.1"])
    got = json.loads(p.stdout) if p.stdout else p.stderr
    check("hostname-scoped blackhole: a connect to api.scoped.test times out; one to an "
          "address no such name resolved to connects", got == ["timeout", "ConnectionRefusedError"]
          or got == ["timeout", "connected"], got)
    p = run(conf, [PY, "-c", CONNECT % PORT, "127.88.0.3"])
    check("...and a process that connects to the same address without the name connects",
          p.stdout.strip() == '["connected"]', p.stdout + p.stderr)
    o.shutdown()


def test_gethostbyname(conf):
    code = """
import ctypes, json, socket
libc = ctypes.CDLL(None)
libc.gethostbyname.restype = ctypes.c_void_p
herr = ctypes.CDLL(None).__h_errno_location
herr.restype = ctypes.POINTER(ctypes.c_int)
out = []
for n in [b"www.missing.test", b"broken.test", b"empty.test"]:
    out.append([libc.gethostbyname(n) is None, herr().contents.value])
out.append(socket.gethostbyname_ex("storage.example.test")[2])
print(json.dumps(out))
"""
    out = py(conf, code)
    check("gethostbyname: HOST_NOT_FOUND (1), TRY_AGAIN (2), NO_DATA (4) in h_errno; "
          "gethostbyname_r gives the answer", out == [[True, 1], [True, 2], [True, 4], ["127.88.0.1"]],
          out)


def test_counts(conf):
    o = origin.Origin(PORT, "127.88.0.1").start()
    code = ("import socket\nfor n in ['a.missing.test', 'b.missing.test']:\n try: socket.getaddrinfo(n, 80)\n"
            " except OSError: pass\nfor i in range(3):\n s = socket.create_connection(('storage.example.test', %d));"
            " s.close()\n" % PORT)
    p = subprocess.run([CTL, "run", "--config", conf, "--stats", "--json", "--", PY, "-c", code],
                       env=env(conf), capture_output=True, text=True, timeout=60)
    recs = {r.get("name"): r for r in map(json.loads, [x for x in p.stderr.splitlines() if x.startswith("{")])
            if r.get("type") == "name"}
    st = recs.get("storage.example.test", {})
    check("per-name counts: storage.example.test looked up 3 times, answered 3, 3 connects",
          (st.get("lookups"), st.get("answered"), st.get("connects")) == (3, 3, 3), recs)
    check("per-name counts: each missing name looked up once, NXDOMAIN once",
          all(recs.get(n, {}).get("nxdomain") == 1 for n in ("a.missing.test", "b.missing.test")), recs)
    o.shutdown()


def test_gai_a(conf):
    exe = os.path.join(TMP, "gai_a")
    b = subprocess.run(["gcc", "-O2", "-Wall", "-o", exe, os.path.join(HERE, "gai_a.c")],
                       capture_output=True, text=True, env={k: v for k, v in os.environ.items()
                                                            if k != "LD_PRELOAD"})
    if b.returncode:
        check("gai_a.c builds", False, b.stderr[-400:])
        return
    names = ["broken.test", "localhost", "storage.example.test", "late.example.test"]
    want = [[-3, ""], [0, "127.0.0.1"], [0, "127.88.0.1"], [0, "127.88.0.1"]]
    for mode in ("wait", "nowait"):
        p = run(conf, [exe, mode] + names)
        try:
            got = json.loads(p.stdout.strip().splitlines()[-1])
        except (IndexError, ValueError):
            got = {"stderr": p.stderr[-400:]}
        check("getaddrinfo_a (%s): servfail -3, localhost from glibc, the answer rule's address, "
              "the late one after 600 ms" % mode,
              got.get("rc") == 0 and got.get("results") == want and got.get("done_ms", 0) >= 550, got)
        if mode == "nowait":
            check("getaddrinfo_a (nowait): one notification, when the last request is done",
                  got.get("notices") == 1 and got.get("notice_ms", 0) >= 550, got)
    p = run(conf, [exe, "nowait", "localhost"])
    check("getaddrinfo_a: a call no rule takes goes to glibc whole (result and notification)",
          '"notices": 1' in p.stdout and '[0, "127.0.0.1"]' in p.stdout, p.stdout + p.stderr[-300:])


def race_exe():
    exe = os.path.join(TMP, "dns_race")
    if not os.path.exists(exe):
        b = subprocess.run(["gcc", "-O2", "-Wall", "-pthread", "-o", exe, os.path.join(HERE, "dns_race.c")],
                           capture_output=True, text=True,
                           env={k: v for k, v in os.environ.items() if k != "LD_PRELOAD"})
        if b.returncode:
            check("dns_race.c builds", False, b.stderr[-400:])
            return None
    return exe


def test_fork_names(conf):
    """i38.15: names.c's lock was not reset in a fork child, so a child forked
    while another thread recorded a name waited for it for ever (stuck within
    the first 20 forks on the old code)."""
    exe = race_exe()
    if not exe:
        return
    p = run(conf, [exe, "fork", "1000", "storage.example.test"], timeout=300)
    check("i38.15: 1,000 children forked while 4 threads record names each resolve and exit (%s)"
          % p.stdout.strip(), p.stdout.strip() == "forks 1000 stuck 0", (p.stdout, p.stderr[-300:]))


def test_gai_a_reuse(conf):
    """i38.12: the shim's faultnet-gai thread called gai_suspend and gai_error
    on the app's requests after glibc had finished them, when the app may
    legally free or reuse them: a segfault within seconds on the old code."""
    exe = race_exe()
    if not exe:
        return
    p = run(conf, [exe, "reuse", "8", "storage.example.test", "localhost"], timeout=120)
    out = p.stdout.strip().split()
    check("i38.12: getaddrinfo_a(GAI_NOWAIT), 4 threads x 8 requests (odd ones answered by a rule), "
          "each freed and reused once done, for 8 s: %s (exit %d)" % (" ".join(out), p.returncode),
          p.returncode == 0 and len(out) == 4 and int(out[1]) > 100 and out[3] == "0",
          (p.stdout, p.stderr[-300:]))


MEMO_POLICY = """rules = (
  { name = "other"; action = "dns"; answer = [ "127.88.0.9" ]; match = { host = "other.memo.test"; }; },
  { name = "flip"; action = "dns"; answer = [ "127.88.0.7" ]; match = { host = "flip.memo.test"; }; },
  { name = "rest"; action = "dns"; answer = [ "127.88.0.8" ]; match = { host = "*.memo.test"; }; }
);
"""


def memo_run(group, opts, steps):
    """A program under faultctl run (opts, group) with MEMO_POLICY that
    looks flip.memo.test up, in one thread, at each line it reads: asked
    twice, then once after each change of steps (faultctl arguments; None:
    no change), then ended and its group reset. Returns the answers (an
    address, or E<errno>) and the run's stderr."""
    conf = os.path.join(TMP, "memo.conf")
    with open(conf, "w") as f:
        f.write(MEMO_POLICY)
    code = ("import socket,sys\nfor line in sys.stdin:\n"
            " try: print(socket.getaddrinfo('flip.memo.test',80,socket.AF_INET,socket.SOCK_STREAM)"
            "[0][4][0],flush=True)\n except OSError as e: print('E%d' % e.errno,flush=True)\n")
    p = subprocess.Popen([CTL, "run", "--config", conf, "-g", group] + opts + ["--", PY, "-u",
                         "-c", code], env=env(conf), stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def ask():
        p.stdin.write("go\n")
        p.stdin.flush()
        return p.stdout.readline().strip()

    got = [ask(), ask()]
    for change in steps:
        if change:
            subprocess.run([CTL, "-g", group] + change, env=env(conf), capture_output=True,
                           timeout=30)
        got.append(ask())
    p.stdin.close()
    err = p.stderr.read()
    p.wait(timeout=30)
    subprocess.run([CTL, "-g", group, "reset"], env=env(conf), capture_output=True)
    return got, err


def test_same_name_live(conf):
    """The hook keeps, per thread, the last name and the dns rules covering
    it (preload/dns/resolve.c), by their places in the policy: one thread
    looks the same name up again after live changes, each of which must
    be seen: a rule before it removed (the places move), it disabled (the
    next covering rule answers), it enabled again; and the counts of its
    name are each lookup's."""
    group = "dnsmemo%d" % os.getpid()
    got, err = memo_run(group, ["--stats", "--json"],
                        [["rm", "other"], ["disable", "flip"], ["enable", "flip"]])
    check("one thread, the same name after live changes: answered by its rule, again, after "
          "the rule before it is removed, by the next rule when it is disabled, by it again "
          "when enabled (%s)" % " ".join(got),
          got == ["127.88.0.7", "127.88.0.7", "127.88.0.7", "127.88.0.8", "127.88.0.7"],
          (got, err[-400:]))
    recs = [json.loads(x) for x in err.splitlines() if x.startswith("{")]
    name = [r for r in recs if r.get("type") == "name" and r.get("name") == "flip.memo.test"]
    check("per-name counts: flip.memo.test looked up 5 times, answered 5",
          name and (name[0].get("lookups"), name[0].get("answered")) == (5, 5), recs)


MEMO_LOAD = """rules = (
  { name = "rest"; action = "dns"; answer = [ "127.88.0.8" ]; match = { host = "*.memo.test"; }; },
  { name = "flip"; action = "dns"; answer = [ "127.88.0.7" ]; match = { host = "flip.memo.test"; }; }
);
"""


def test_same_name_edits(conf):
    """The memo's candidates after edits that keep the rule count or the
    names: the rule removed and added again under its name (now last, after
    the wildcard), a rule added first with a condition counted per lookup
    (every = 2: each second lookup), a load that reorders the rules, the
    wildcard disabled, a reset. One thread, the same name each time."""
    reorder = os.path.join(TMP, "memo-load.conf")
    with open(reorder, "w") as f:
        f.write(MEMO_LOAD)
    group = "dnsedit%d" % os.getpid()
    steps = [["rm", "flip"],
             ["add", '{ name = "flip"; action = "dns"; answer = [ "127.88.0.17" ]; '
                     'match = { host = "flip.memo.test"; }; }'],
             ["add", "--first", '{ name = "first"; action = "dns"; error = "nxdomain"; every = 2; '
                                'match = { host = "flip.memo.test"; }; }'],
             None, None, ["rm", "first"], ["load", reorder], ["disable", "rest"], ["reset"]]
    got, err = memo_run(group, [], steps)
    nx = "E%d" % socket.EAI_NONAME
    want = ["127.88.0.7", "127.88.0.7", "127.88.0.8", "127.88.0.8", "127.88.0.8", nx,
            "127.88.0.8", "127.88.0.8", "127.88.0.8", "127.88.0.7", "127.88.0.7"]
    check("one thread, the same name after edits: removed, added again last, a rule added first "
          "that takes each second lookup, a reordering load, the wildcard disabled, a reset (%s)"
          % " ".join(got), got == want, (got, want, err[-400:]))


# names.c's home() for an IPv4 address (preload/dns/names.c): the slot its
# 8-slot window starts at in the table of 1,024.
def names_home(ip):
    m = 2 ** 64
    w = int.from_bytes(bytes(int(x) for x in ip.split(".")), "little")
    return ((((w * 0x9e3779b97f4a7c15) % m) ^ 1) * 0xff51afd7ed558ccd % m >> 32) % 1024


def same_window(n):
    """n loopback addresses that share one window of the name memory."""
    got = []
    for x in range(1, 256):
        for y in range(1, 256):
            ip = "127.90.%d.%d" % (x, y)
            if not got or names_home(ip) == names_home(got[0]):
                got.append(ip)
            if len(got) == n:
                return got
    return got


EVICT = """
import errno, json, socket, sys
from concurrent.futures import ThreadPoolExecutor
t1, t2 = ThreadPoolExecutor(1), ThreadPoolExecutor(1)
def look(name):
    return socket.getaddrinfo(name, 80, socket.AF_INET, socket.SOCK_STREAM)[0][4][0]
def on(t, *names):
    return [t.submit(look, n).result() for n in names]
bs = ["b%d.evict.test" % i for i in range(1, 8)]
on(t2, *bs)                    # 7 slots of the window written
on(t1, "keep.evict.test", "keep.evict.test")  # the 8th; its list kept by t1's memo
on(t2, *bs)                    # each renewed: younger than keep's
on(t1, "keep.evict.test")      # renews keep's (the memo: skipped)
on(t2, "c.evict.test")         # a 9th address: the oldest slot goes
def fate(ip):
    s = socket.socket()
    s.settimeout(5)
    e = s.connect_ex((ip, 9))
    s.close()
    return errno.errorcode.get(e, e)
print(json.dumps([fate(sys.argv[1]), fate(sys.argv[2])]))
"""


def test_memo_eviction(conf):
    """The name memory replaces the oldest slot of an address's window;
    each lookup renews its addresses' stamps. A thread's memo skips
    recording a list it recorded last while the table is unchanged and
    the stamps' clock moved less than FN_NAMES_FRESH: the same name
    looked up again while another thread renewed others' then left its
    address the oldest, forgotten by the next new address, and a connect
    rule naming it no longer applied to a connect there."""
    ips = same_window(9)
    rules = ['{ name = "keep"; action = "dns"; answer = [ "%s" ]; match = { host = "keep.evict.test"; }; }'
             % ips[0]]
    rules += ['{ name = "b%d"; action = "dns"; answer = [ "%s" ]; match = { host = "b%d.evict.test"; }; }'
              % (i, ips[i], i) for i in range(1, 8)]
    rules += ['{ name = "c"; action = "dns"; answer = [ "%s" ]; match = { host = "c.evict.test"; }; }'
              % ips[8]]
    rules += ['{ name = "keep-off"; action = "unreachable"; match = { host = "keep.evict.test"; }; }',
              '{ name = "b1-off"; action = "unreachable"; match = { host = "b1.evict.test"; }; }']
    conf = os.path.join(TMP, "evict.conf")
    with open(conf, "w") as f:
        f.write("rules = (\n  %s\n);\n" % ",\n  ".join(rules))
    p = run(conf, [PY, "-c", EVICT, ips[0], ips[1]])
    try:
        keep, b1 = json.loads(p.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        check("memo eviction: the program runs", False, (p.stdout[-300:], p.stderr[-600:]))
        return
    check("memo eviction: 9 addresses in one window of the name memory, the 9th replaces the "
          "least recently looked up (b1.evict.test's: connect %s, no rule)" % b1,
          b1 == "ECONNREFUSED", (keep, b1, p.stderr[-300:]))
    check("memo eviction: keep.evict.test, looked up again by its thread after b1..b7 were, "
          "is still remembered: its connect rule applies (connect %s)" % keep,
          keep != "ECONNREFUSED", (keep, b1, p.stderr[-300:]))


def test_go(conf):
    if FIRST:
        return  # the Go runtime and libasan do not start together
    tmp = os.path.join(TMP, "go")
    goenv = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
    goenv.update(GOCACHE=tmp + "/cache", GOPATH=tmp + "/path", GO111MODULE="off", CGO_ENABLED="1")
    exe = os.path.join(TMP, "golookup")
    b = subprocess.run(["go", "build", "-o", exe, os.path.join(HERE, "golookup.go")], env=goenv,
                       capture_output=True, text=True, timeout=300)
    if b.returncode:
        check("golookup.go builds with cgo", False, b.stderr[-400:])
        return
    r = run(conf, [exe, "www.missing.test"], GODEBUG="netdns=cgo")
    check("Go with cgo (netdns=cgo): NXDOMAIN is 'no such host'", r.stdout.strip() == "no such host",
          r.stdout + r.stderr[-300:])
    r = run(conf, [exe, "storage.example.test"], GODEBUG="netdns=cgo")
    check("Go with cgo (netdns=cgo): an answer rule's address", r.stdout.strip() == "127.88.0.1",
          r.stdout + r.stderr[-300:])


def test_bad_rules():
    cases = [('{ name = "d"; action = "dns"; }', "action dns needs error, answer or delay_ms"),
             ('{ name = "d"; action = "dns"; error = "lost"; }',
              "error 'lost' must be \"nxdomain\", \"servfail\", \"nodata\", \"timeout\" or \"refused\""),
             ('{ name = "d"; action = "dns"; answer = [ "not-an-ip" ]; }',
              "answer 'not-an-ip' is not an IPv4 or IPv6 address"),
             ('{ name = "d"; action = "dns"; error = "nxdomain"; match = { host = "a b"; }; }',
              "match.host 'a b' must be a host name")]
    for rule, want in cases:
        path = os.path.join(TMP, "bad.conf")
        with open(path, "w") as f:
            f.write("rules = (\n%s\n);\n" % rule)
        p = subprocess.run([CTL, "check", path], capture_output=True, text=True)
        check("a bad dns rule is refused with file and line: %s" % want,
              p.returncode == 1 and want in p.stderr and ":2:" in p.stderr, p.stderr)


def main():
    conf = os.path.join(TMP, "dns.conf")
    with open(conf, "w") as f:
        f.write(POLICY)
    for t in checks.selected([test_errors, test_timeout, test_answer, test_s3, test_scoped,
                              test_gethostbyname, test_counts, test_gai_a, test_gai_a_reuse,
                              test_fork_names, test_same_name_live, test_same_name_edits, test_memo_eviction, test_go,
                              lambda _: test_bad_rules()]):
        t(conf)
    subprocess.run(["rm", "-rf", TMP])
    sys.exit(1 if checks.failed else 0)


if __name__ == "__main__":
    main()
