"""h2_fidelity.py - HTTP/2 streams no rule takes reach both ends as they
would directly (issue 40, the fidelity part). Two kinds of test:

differential (test_basics, test_bulk, test_window): h2fid_peer.py's
conversations (python3-h2 over plain sockets, prior knowledge) played
without the shim and under a policy whose HTTP rule covers the server's
port but takes no request (respond on a path never used); compared per
stream, by path: the decoded response header list in order, DATA bytes by
sha256 (1 KiB to 64 MiB, eight streams at once, uploads echoed), trailers;
what the server saw of each request (header list, body); the server's
SETTINGS as the client sees them (unusual values), the client's as the
server sees them, the client's connection window, PINGs both ways
(answered by the far end, opaque data echoed), and a small initial window
each way holding the sender until the far end's WINDOW_UPDATE. Left out,
as a relay's own: HPACK's encoding, DATA frame boundaries, stream ids.
Nothing of a decoded header list is left out. Each play under the shim also
checks that faultnet took the streams as requests (run --stats: its
records per method, host and path).

real clients (test_curl_prior_knowledge, test_curl_h2c, test_node_http2,
test_java_httpclient): the same body and status directly and through
faultnet, HTTP/2 spoken both times, and a `respond status=503` rule on one
path seen as 503 over HTTP/2.

usage: h2_fidelity.py BUILD_DIR [PRELOAD_FIRST]"""
import hashlib
import json
import os
import queue
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)
import checks  # noqa: E402
from checks import check  # noqa: E402
import h2fid_peer as peer  # noqa: E402

BUILD = os.path.abspath(sys.argv[1])
FIRST = sys.argv[2] if len(sys.argv) > 2 else ""
LIB = (FIRST + ":" if FIRST else "") + os.path.join(BUILD, "libfaultnet.so")
CTL = os.path.join(BUILD, "faultctl")
PY = "/usr/bin/python3"
HOST = "127.84.3.1"  # loopback only
MAIN, WINDOW, H2C, NGHTTPD = 18240, 18241, 18242, 18243
TMP = tempfile.mkdtemp(prefix="fn-h2fid-")
SETTINGS4 = ["MAX_CONCURRENT_STREAMS", "INITIAL_WINDOW_SIZE", "MAX_FRAME_SIZE",
             "MAX_HEADER_LIST_SIZE"]


def policy(name, path):
    """A policy answering 503 for path on each server's port (and nothing
    else)."""
    rules = ['{ name = "h2fid%d"; action = "respond"; status = 503; body = "injected"; '
             'match = { to = "%s/32"; port = %d; path = "%s"; }; }' % (p, HOST, p, path)
             for p in (MAIN, WINDOW, H2C, NGHTTPD)]
    f = os.path.join(TMP, name + ".conf")
    with open(f, "w") as fh:
        fh.write("rules = (\n%s\n);\n" % ",\n".join(rules))
    return f


QUIET = policy("quiet", "/h2fid-never-used*")
FAULT = policy("fault", "/fault*")


def env(conf):
    e = {k: v for k, v in os.environ.items() if not k.startswith("FAULTNET_")}
    if conf:
        e.update(FAULTNET_CONFIG=conf, LD_PRELOAD=LIB, ASAN_OPTIONS="detect_leaks=0")
    return e


class Server(threading.Thread):
    """An h2fid_peer server on HOST:port; each connection's view queued."""

    def __init__(self, port, settings, h2c=False):
        super().__init__(daemon=True)
        self.ls = socket.socket()
        self.ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.ls.bind((HOST, port))
        self.ls.listen(16)
        self.settings, self.h2c = settings, h2c
        self.views = queue.Queue()

    def run(self):
        while True:
            c, _ = self.ls.accept()
            threading.Thread(target=self.one, args=(c,), daemon=True).start()

    def one(self, c):
        try:
            v = peer.serve(c, self.settings, self.h2c)
        except Exception as e:  # a view that says what broke, never a hang
            v = {"error": "%s: %s" % (type(e).__name__, e)}
        c.close()
        self.views.put(v)

    def view(self):
        try:
            return self.views.get(timeout=30)
        except queue.Empty:
            return None


SERVERS = {}


def play(conv, port, shim):
    """(client's view, server's view, faultnet's stats records) of one
    conversation, without the shim or under QUIET."""
    cmd = [PY, os.path.join(HERE, "h2fid_peer.py"), HOST, str(port), conv]
    if shim:
        cmd = [CTL, "run", "--config", QUIET, "--stats", "--json", "--"] + cmd
    p = subprocess.run(cmd, env=env(QUIET if shim else None), capture_output=True, text=True,
                       timeout=300)
    try:
        cv = json.loads(p.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        cv = {"error": "client: exit %d: %s" % (p.returncode, p.stderr[-600:])}
    stats = [json.loads(x) for x in p.stderr.splitlines() if x.startswith("{")]
    return cv, SERVERS[port].view() or {"error": "the server saw no connection"}, stats


def short(x, n=400):
    s = json.dumps(x)
    return s if len(s) <= n else s[:n] + "..."


def diff(a, b):
    """The keys of two dicts whose values differ, each as direct/faultnet."""
    a, b = a or {}, b or {}
    return {k: [a.get(k), b.get(k)] for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)}


def compare_streams(tag, d, f, side):
    d, f = d.get("streams") or {}, f.get("streams") or {}
    for path in sorted(set(d) | set(f)):
        ds, fs = d.get(path), f.get(path)
        if ds is None or fs is None:
            check("%s %s: the %s saw %s both times" % (tag, path, side, path), False,
                  "direct %s, faultnet %s" % (ds is not None, fs is not None))
            continue
        ds = {k: v for k, v in ds.items() if k != "window"}
        fs = {k: v for k, v in fs.items() if k != "window"}
        what = ("response header list, body (%d bytes, sha256), trailers, end" % ds["body"][0]
                if side == "client" else "request header list, body (%d bytes), end" % ds["body"][0])
        check("%s %s: the %s sees the same %s" % (tag, path, side, what), ds == fs,
              short(diff(ds, fs), 1500))


def compare(tag, conv, port, nstreams):
    dc, ds, _ = play(conv, port, False)
    fc, fs, stats = play(conv, port, True)
    for who, v in (("client", dc), ("server", ds)):
        if v.get("error"):
            check("%s directly: the %s ends without error" % (tag, who), False, v["error"])
    check("%s directly: every stream ended (the test's own conversation)" % tag,
          len(dc.get("streams", {})) == nstreams and
          all(s["ended"] or s["reset"] is not None for s in dc.get("streams", {}).values()),
          short(dc))
    check("%s through faultnet: the client and the server end without error" % tag,
          not fc.get("error") and not fs.get("error"),
          "client %s, server %s" % (fc.get("error"), fs.get("error")))
    if fc.get("error") and "streams" not in fc:
        return dc, ds, fc, fs
    compare_streams(tag, dc, fc, "client")
    compare_streams(tag, ds, fs, "server")
    for path, sent in dc.get("sent", {}).items():
        if path.startswith("/echo"):
            got = fc.get("streams", {}).get(path, {}).get("body")
            check("%s %s: the echo of %d bytes comes back whole through faultnet (sha256)"
                  % (tag, path, sent[0]), got == sent, "sent %s, got %s" % (sent, got))
    first = lambda v: {k: (v.get("settings_frames") or [{}])[0].get(k) for k in SETTINGS4}  # noqa
    want = {k: peer.SERVER_SETTINGS[getattr(peer.SettingCodes, k)] for k in SETTINGS4}
    if conv == "window":
        want["INITIAL_WINDOW_SIZE"] = 3000
    check("%s directly: the client's first SETTINGS from the server are the server's %s" %
          (tag, want), first(dc) == want, first(dc))
    check("%s through faultnet: the client's first SETTINGS carry the server's values" % tag,
          first(fc) == want, "got %s; every SETTINGS frame the client saw: %s" %
          (first(fc), fc.get("settings_frames")))
    eff = lambda v: {k: (v.get("settings_at_first_response") or {}).get(k) for k in SETTINGS4}  # noqa
    check("%s through faultnet: the server's values in force at the first response" % tag,
          eff(fc) == want, eff(fc))
    cs = lambda v: (v.get("client_settings") or [{}])[0]  # noqa
    check("%s through faultnet: the server sees the client's SETTINGS (%s)" % (tag, cs(ds)),
          cs(fs) == cs(ds), diff(cs(ds), cs(fs)))
    cli, srv = peer.CLIENT_PING.hex(), peer.SERVER_PING.hex()
    check("%s: the client's PING answered, its opaque data echoed (directly %s)" %
          (tag, dc.get("ping_acks")), fc.get("ping_acks") == [cli] == dc.get("ping_acks"),
          fc.get("ping_acks"))
    check("%s: the client's PING reaches the server (not answered on its way)" % tag,
          fs.get("pings") == [cli] == ds.get("pings"), "direct %s, faultnet %s" %
          (ds.get("pings"), fs.get("pings")))
    check("%s: the server's PING reaches the client" % tag,
          fc.get("pings") == [srv] == dc.get("pings"), "direct %s, faultnet %s" %
          (dc.get("pings"), fc.get("pings")))
    check("%s: the client's ACK of it reaches the server" % tag,
          fs.get("ping_acks") == [srv] == ds.get("ping_acks"), "direct %s, faultnet %s" %
          (ds.get("ping_acks"), fs.get("ping_acks")))
    check("%s: the server sees the client's GOAWAY (NO_ERROR) at the end" % tag,
          fs.get("goaway") == 0 == ds.get("goaway"), "direct %s, faultnet %s" %
          (ds.get("goaway"), fs.get("goaway")))
    # Streams no rule's path takes are counted per method, host and path
    # (the "http" records), as HTTP/1.1 requests are; the rule's own counts
    # are of the requests its match took (none here).
    recs = [r for r in stats if r.get("type") == "http"]
    got = tuple(sum(r.get(k, 0) for r in recs) for k in ("requests", "untouched", "answered"))
    check("%s: faultnet took the %d streams as requests and left them all untouched (run --stats)"
          % (tag, nstreams), got == (nstreams, nstreams, 0),
          "requests, untouched, answered: %s; records %s" % (got, short(stats, 800)))
    return dc, ds, fc, fs


def test_basics():
    dc, _, fc, _ = compare("basics:", "basics", MAIN, 5)
    check("basics: the client's connection window as the server set it (directly %s)" %
          dc.get("conn_window"), fc.get("conn_window") == dc.get("conn_window"),
          fc.get("conn_window"))
    h = dc["streams"]["/headers"]["headers"]
    check("basics directly: /headers came as the server sent it (the test's own)",
          h == [list(x) for x in peer.ODD_HEADERS], h)
    r = dc["streams"][peer.RESET_PATH]
    check("basics directly: %s came as HEADERS, 20000 bytes, RST_STREAM CANCEL (the test's own)"
          % peer.RESET_PATH, (r["headers"] is not None, r["body"][0], r["reset"]) ==
          (True, 20000, 8), r)
    t = dc["streams"]["/trailers"]["trailers"]
    check("basics directly: /trailers' trailers came after its DATA (the test's own)",
          t == [list(x) for x in peer.TRAILERS], t)


def test_bulk():
    compare("bulk (8 streams at once):", "bulk", MAIN, 8)


def test_window():
    dc, ds, fc, fs = compare("window:", "window", WINDOW, 2)
    for tag, c, s in (("directly", dc, ds), ("through faultnet", fc, fs)):
        w = c["streams"].get("/slowack", {}).get("window", {})
        check("window %s: the client's upload stops at the server's window (3000 bytes) until "
              "the server's WINDOW_UPDATE, a second later" % tag,
              w.get("sent_when_blocked") == 3000 and w.get("waited", 0) >= 0.8, w)
        w = s["streams"].get("/blockdl/50000", {}).get("window", {})
        check("window %s: the server's response stops at the client's window (5000 bytes) "
              "until the client's WINDOW_UPDATE, a second later" % tag,
              w.get("sent_when_blocked") == 5000 and w.get("waited", 0) >= 0.8, w)


# ---------------------------------------------------------- real clients ----
BLOB = peer.body(1 << 20, 5)
BLOB_SHA = hashlib.sha256(BLOB).hexdigest()


def lines(p, who):
    """The JSON lines a client printed, one per request (an error else)."""
    out = []
    for ln in p.stdout.splitlines():
        try:
            out.append(json.loads(ln))
        except ValueError:
            pass
    return out or [{"error": "%s exit %d: %s" % (who, p.returncode, p.stderr[-400:])}]


def curl(mode):
    def get(base, paths, conf):
        outs = [os.path.join(TMP, "curl%d.out" % i) for i in range(len(paths))]
        args = []
        for o, path in zip(outs, paths):
            if os.path.exists(o):
                os.unlink(o)
            args += ["-o", o, base + path]
        p = subprocess.run(["curl", "-s", mode, "--max-time", "30", "-w",
                            "%{http_code} %{http_version}\n"] + args, env=env(conf),
                           capture_output=True, text=True, timeout=60)
        res = []
        for o, ln in zip(outs, p.stdout.splitlines()):
            status, version = ln.split()
            data = open(o, "rb").read() if os.path.exists(o) else b""
            res.append({"status": int(status), "version": version,
                        "sha": hashlib.sha256(data).hexdigest(), "n": len(data)})
        return res or [{"error": "curl exit %d: %r" % (p.returncode, p.stdout)}]
    return get


def node(base, paths, conf):
    n = checks.node_bin(os.path.dirname(HERE))
    p = subprocess.run([n, os.path.join(HERE, "h2fid_node.js"), base] + paths, env=env(conf),
                       capture_output=True, text=True, timeout=60)
    res = lines(p, "node")
    for r in res:
        if r.get("status") is not None:
            r["status"] = int(r["status"])
    return res


JAVA_DIR = os.path.join(TMP, "java")


def java(base, paths, conf):
    p = subprocess.run(["java", "-cp", JAVA_DIR, "H2fidClient"] + [base + x for x in paths],
                       env=env(conf), capture_output=True, text=True, timeout=90)
    return lines(p, "java")


def real(name, get, port):
    """A client's GETs of the file directly and through faultnet; then under
    `respond status=503` on /fault*: that path alone, and the file then that
    path on one connection (for an h2c client: its upgrade, then a stream)."""
    base = "http://%s:%d" % (HOST, port)
    key = lambda r: (r.get("status"), r.get("version"), r.get("sha"))  # noqa: E731
    d = get(base, ["/blob.bin"], None)[0]
    f = get(base, ["/blob.bin"], QUIET)[0]
    check("%s directly: 200 over HTTP/2, the file whole (the test's own)" % name,
          key(d) == (200, "2", BLOB_SHA), d)
    check("%s through faultnet: the same status, body (sha256) and HTTP/2" % name,
          key(f) == key(d), "direct %s, faultnet %s" % (d, f))
    d = get(base, ["/fault.bin"], None)[0]
    check("%s directly: /fault.bin is 200 over HTTP/2 (the rule's path exists on the server)"
          % name, key(d) == (200, "2", BLOB_SHA), d)
    f = get(base, ["/fault.bin"], FAULT)[0]
    check("%s under `respond status=503` on /fault*: its first request, /fault.bin, is 503 "
          "(HTTP/%s)" % (name, f.get("version")), f.get("status") == 503, f)
    d = get(base, ["/blob.bin", "/fault.bin"], None)
    if [key(r) for r in d] != [(200, "2", BLOB_SHA)] * 2:
        # curl 7.88.1's second transfer on a reused prior-knowledge
        # connection fails even directly (status 000).
        print("  skip - %s, two requests on one connection: the client fails it directly: %s"
              % (name, d))
        checks.skip()
        return
    f = get(base, ["/blob.bin", "/fault.bin"], FAULT)
    want = [(200, "2", BLOB_SHA), (503, "2")]
    got = [key(f[0])] + [key(r)[:2] for r in f[1:2]]
    check("%s under the same rule, one connection: /blob.bin forwarded whole, then "
          "/fault.bin 503, both over HTTP/2" % name, got == want, f)


def test_policy_control():
    """The rule of the 503 checks does answer /fault* (HTTP/1.1 to the h2c
    server): an h2 client's 200 there is the engine's, not the policy's."""
    f = curl("--http1.1")("http://%s:%d" % (HOST, H2C), ["/fault.bin"], FAULT)[0]
    check("control: curl --http1.1 under `respond status=503` on /fault*: 503 over HTTP/1.1",
          (f.get("status"), f.get("version")) == (503, "1.1"), f)


def test_curl_prior_knowledge():
    real("curl --http2-prior-knowledge (nghttpd)", curl("--http2-prior-knowledge"), NGHTTPD)


def test_curl_h2c():
    real("curl --http2 (Upgrade: h2c, python3-h2 server)", curl("--http2"), H2C)


def test_node_http2():
    if not checks.node_bin(os.path.dirname(HERE)):
        print("  skip - Node's http2 client: no Node.js 20 or later")
        checks.skip()
        return
    real("Node http2 client (nghttpd)", node, NGHTTPD)


def test_java_httpclient():
    os.makedirs(JAVA_DIR, exist_ok=True)
    p = subprocess.run(["javac", "-d", JAVA_DIR, os.path.join(HERE, "H2fidClient.java")],
                       capture_output=True, text=True, timeout=120)
    if p.returncode:
        check("javac H2fidClient.java", False, p.stderr[-400:])
        return
    real("Java HttpClient HTTP_2 (Upgrade: h2c, python3-h2 server)", java, H2C)


def main():
    for port, settings, h2c in ((MAIN, peer.SERVER_SETTINGS, False),
                                (WINDOW, peer.WINDOW_SERVER_SETTINGS, False),
                                (H2C, peer.SERVER_SETTINGS, True)):
        SERVERS[port] = Server(port, settings, h2c)
        SERVERS[port].start()
    root = os.path.join(TMP, "www")
    os.makedirs(root)
    for name in ("blob.bin", "fault.bin"):
        with open(os.path.join(root, name), "wb") as f:
            f.write(BLOB)
    ng = subprocess.Popen(["nghttpd", "--no-tls", "--address=" + HOST, "-d", root, str(NGHTTPD)],
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(100):  # nghttpd listening
        try:
            socket.create_connection((HOST, NGHTTPD), timeout=1).close()
            break
        except OSError:
            time.sleep(0.05)
    try:
        for t in checks.selected([test_basics, test_bulk, test_window, test_policy_control,
                                  test_curl_prior_knowledge,
                                  test_curl_h2c, test_node_http2, test_java_httpclient]):
            print("  -- %s" % t.__name__)
            t()
    finally:
        ng.terminate()
        ng.wait()
        shutil.rmtree(TMP, ignore_errors=True)
    sys.exit(1 if checks.failed else 0)


if __name__ == "__main__":
    main()
