#!/usr/bin/env python3
"""h2_engine.py - the HTTP/2 engine's own regressions, each seen failing
before its fix, observed at the frame level with nghttp (Debian's
nghttp2-client) against nghttpd, a server that speaks first:
- a server whose SETTINGS arrive before the app's preface: the app must
  still meet SETTINGS first, and the server the app's SETTINGS first (every
  connection failed when the server's SETTINGS were taken for a server
  greeting and passed on as bytes);
- rst_after = "headers": the response headers, then RST_STREAM with the
  rule's code, in the same pass (under a gRPC server, whose headers come
  alone, the reset used to wait for an event that never came);
- ALPN: an HTTPS client offering h2 and http/1.1 gets the server's choice
  (h2) through the termination, and a respond rule answers it over h2;
- ping = "unanswered" (a feature, no regression): keepalive PINGs met by
  silence, and the gRPC client giving its connection up;
- Upgrade: h2c: the streams of an upgraded connection are read (they
  went on as bytes, out of the rules' reach);
- a TLS client offering only h2 to a port where no server listens and the
  rules answer: h2 chosen once its handshake is done, never read as
  HTTP/1.1 (about one run in five was reset);
- an h2c client whose preface comes after the server's frames are in (the
  server sends its SETTINGS and an answer filling the relay's buffer with
  the 101): the server's bytes, held until the app's preface had gone
  out, waited for an event that never came (Java's HttpClient timed out on about one upgrade in five).
usage: h2_engine.py BUILD. Runs in its own network namespace."""
import os
import re
import socket
import ssl
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
import checks  # noqa: E402
from checks import check  # noqa: E402

BUILD = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "build")
LIB = os.path.join(BUILD, "libfaultnet.so")
PLAIN, TLS, NONE, GRPC, H2C = 18180, 18543, 18599, 18651, 18182


def reexec():
    if os.environ.get("FN_H2E_NS") == "1":
        return
    env = dict(os.environ, FN_H2E_NS="1")
    cmd = ["unshare", "-n", "sh", "-c", 'ip link set lo up && exec "$@"', "-",
           sys.executable, "-u"] + sys.argv
    sys.exit(subprocess.run(cmd, env=env).returncode)


def policy(d, name, rules):
    path = os.path.join(d, name + ".conf")
    with open(path, "w") as f:
        f.write("rules = (\n%s\n);\n" % ",\n".join(rules))
    return path


def env(d, conf):
    e = {k: v for k, v in os.environ.items() if not k.startswith("FAULTNET_")}
    e.update(LD_PRELOAD=LIB, FAULTNET_CONFIG=conf, FAULTNET_RUNDIR=os.path.join(d, "run"),
             ASAN_OPTIONS="detect_leaks=0")
    return e


def run(cmd, e, timeout=20):
    try:
        p = subprocess.run(cmd, env=e, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return 124, "timed out after %d s" % timeout
    return p.returncode, p.stdout + p.stderr


def frames(out):
    """The frame types nghttp -v says it received, in order."""
    return re.findall(r"\] recv (\w+) frame", out)


def wait_port(port):
    for _ in range(100):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.05)


# A client that lets the server speak first: connected, it waits before its
# preface, so the server's SETTINGS are in before the app's bytes.
LATE_CLIENT = """
import socket, sys, time
import h2.config, h2.connection, h2.events
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=10)
time.sleep(0.2)
c = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
c.initiate_connection()
c.send_headers(1, [(":method", "GET"), (":path", "/index.html"), (":scheme", "http"),
                   (":authority", "127.0.0.1")], end_stream=True)
s.sendall(c.data_to_send())
first, body = None, b""
while True:
    data = s.recv(65536)
    if not data:
        break
    for ev in c.receive_data(data):
        if first is None:
            first = type(ev).__name__
        if isinstance(ev, h2.events.DataReceived):
            body += ev.data
        if isinstance(ev, (h2.events.StreamEnded, h2.events.ConnectionTerminated)):
            print(first, body.decode(errors="replace").strip(), type(ev).__name__)
            sys.exit(0)
    s.sendall(c.data_to_send())
print(first, "closed")
"""


def server_first(d):
    conf = policy(d, "first", ['{ name = "never"; action = "respond"; status = 503; '
                               'match = { to = "127.0.0.1/32"; port = %d; path = "/never"; }; }'
                               % PLAIN])
    bad = []
    for i in range(5):
        rc, out = run([sys.executable, "-c", LATE_CLIENT, str(PLAIN)], env(d, conf))
        if rc != 0 or out.strip() != "RemoteSettingsChanged hello StreamEnded":
            bad.append((i, rc, out[-300:]))
    check("a server that speaks first, before the app's preface: 5 connections, each app "
          "meets the server's SETTINGS first and gets its answer (%d failed)" % len(bad),
          not bad, bad[:1])


def rst_after_headers(d):
    conf = policy(d, "rsth", ['{ name = "rsth"; action = "abort"; rst_stream = "INTERNAL_ERROR"; '
                              'rst_after = "headers"; match = { to = "127.0.0.1/32"; port = %d; '
                              'path = "/big.bin"; }; }' % PLAIN])
    t = time.monotonic()
    rc, out = run(["nghttp", "-nv", "http://127.0.0.1:%d/big.bin" % PLAIN], env(d, conf))
    took = time.monotonic() - t
    recv = frames(out)
    got = recv[recv.index("HEADERS"):] if "HEADERS" in recv else recv
    check("rst_after = headers: the server's headers, then RST_STREAM INTERNAL_ERROR, no DATA, "
          "in %.2f s: %s" % (took, got[:3]),
          got[:2] == ["HEADERS", "RST_STREAM"] and "error_code=INTERNAL_ERROR" in out
          and took < 5, out[-600:])


GRPC_SERVER = """
import grpc, sys
from concurrent import futures
import time
h = grpc.method_handlers_generic_handler("pkg.Svc", {
    "Ping": grpc.unary_unary_rpc_method_handler(lambda req, ctx: b"pong:" + req),
    "Slow": grpc.unary_unary_rpc_method_handler(lambda req, ctx: time.sleep(3) or b"late")})
s = grpc.server(futures.ThreadPoolExecutor(2))
s.add_generic_rpc_handlers((h,))
s.add_insecure_port("127.0.0.1:" + sys.argv[1])
s.start()
s.wait_for_termination()
"""

GRPC_CALL = """
import grpc, sys, time
keep = [("grpc.keepalive_time_ms", 300), ("grpc.keepalive_timeout_ms", 500),
        ("grpc.http2.max_pings_without_data", 0)] if len(sys.argv) > 2 else []
ch = grpc.insecure_channel("127.0.0.1:" + sys.argv[1], options=keep)
t = time.monotonic()
try:
    print("ok", ch.unary_unary("/pkg.Svc/" + (sys.argv[2] if len(sys.argv) > 2 else "Ping"))(
        b"x", timeout=10), "%.1f" % (time.monotonic() - t))
except grpc.RpcError as e:
    print("err", e.code().name, "%.1f" % (time.monotonic() - t))
"""


def grpc_rst_after_headers(d):
    """gRPC's server sends its headers alone: the pass that sends them
    leaves the cut to a later, empty send, which must still reset."""
    conf = policy(d, "grpc", ['{ name = "rsth"; action = "abort"; rst_stream = "INTERNAL_ERROR"; '
                              'rst_after = "headers"; match = { to = "127.0.0.1/32"; port = %d; '
                              'path = "/pkg.Svc/*"; }; }' % GRPC])
    rc, out = run([sys.executable, "-c", GRPC_CALL, str(GRPC)], env(d, conf))
    check("a gRPC call under rst_after = headers fails at once with INTERNAL (the reset), "
          "never at its 10 s deadline: %r" % out.strip(),
          out.startswith("err INTERNAL") and float(out.split()[-1]) < 5, out[-300:])


# An h2c client that waits after the 101 before its preface, so that the
# server's SETTINGS and answer, sent with the 101, are in first.
H2C_LATE_CLIENT = """
import socket, sys, time
import h2.config, h2.connection, h2.events
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=5)
c = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
hs = c.initiate_upgrade_connection().decode()
s.sendall(("GET /late?n=200000 HTTP/1.1\\r\\nHost: 127.0.0.1\\r\\n"
           "Connection: Upgrade, HTTP2-Settings\\r\\nUpgrade: h2c\\r\\n"
           "HTTP2-Settings: %s\\r\\n\\r\\n" % hs).encode())
buf = b""
while b"\\r\\n\\r\\n" not in buf:
    buf += s.recv(65536)
head, _, rest = buf.partition(b"\\r\\n\\r\\n")
time.sleep(0.3)
s.sendall(c.data_to_send())
n = 0
try:
    for ev in c.receive_data(rest) if rest else []:
        pass
    while True:
        data = s.recv(65536)
        if not data:
            print(head.split(b"\\r\\n")[0].decode(), "closed", n)
            break
        for ev in c.receive_data(data):
            if isinstance(ev, h2.events.DataReceived):
                n += len(ev.data)
                c.acknowledge_received_data(len(ev.data), ev.stream_id)
            if isinstance(ev, h2.events.StreamEnded) and ev.stream_id == 1:
                print(head.split(b"\\r\\n")[0].decode(), "ended", n)
                sys.exit(0)
        s.sendall(c.data_to_send())
except socket.timeout:
    print(head.split(b"\\r\\n")[0].decode(), "stalled", n)
"""


def h2c_late_preface(d):
    """h2c: the app's preface after the server's first frames are in."""
    conf = policy(d, "h2clate", ['{ name = "fail"; action = "respond"; status = 503; '
                                 'match = { to = "127.0.0.1/32"; port = %d; path = "/fail"; }; }'
                                 % H2C])
    bad = []
    for i in range(3):
        rc, out = run([sys.executable, "-c", H2C_LATE_CLIENT, str(H2C)], env(d, conf))
        if rc != 0 or out.strip() != "HTTP/1.1 101 Switching Protocols ended 200000":
            bad.append((i, rc, out[-300:]))
    check("h2c: a client whose preface follows the server's SETTINGS and answer (sent with the "
          "101) gets stream 1 whole, 3 connections (%d stalled or failed)" % len(bad),
          not bad, bad[:1])


def h2c_upgrade(d):
    """Upgrade: h2c (curl --http2 on http://): the upgraded request and the
    streams after it are read as HTTP/2, rules included."""
    conf = policy(d, "h2c", ['{ name = "fail"; action = "respond"; status = 503; body = "nope"; '
                             'match = { to = "127.0.0.1/32"; port = %d; path = "/fail"; }; }' % H2C])
    url = "http://127.0.0.1:%d/" % H2C
    args = ["curl", "-sS", "--http2", "-w", " %{http_code} %{http_version}\n"]
    rc, direct = run(args + [url + "a?n=100000", "-o", os.devnull, url + "b"],
                     {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"})
    rc1, via = run(args + [url + "a?n=100000", "-o", os.devnull, url + "b", url + "fail"],
                   env(d, conf))
    check("curl --http2 upgrades (h2c) through faultnet as directly: the upgraded stream 1 "
          "(100,000 bytes) and the next over HTTP/2 (%r, directly %r)" % (via, direct),
          rc1 == 0 and via.startswith(direct) and direct == " 200 2\n/b/b/b 200 2\n", via)
    check("and a respond rule answers a later stream of the upgraded connection over HTTP/2",
          via.endswith("nope 503 2\n"), via)


def ping_unanswered(d):
    """abort ping = "unanswered": a gRPC client's keepalive PINGs meet no
    answer, and it gives the connection up (UNAVAILABLE) within its
    keepalive timeout, long before the 3 s its call takes; without the
    rule the same client's PINGs are answered and the call ends."""
    conf = policy(d, "ping", ['{ name = "deaf"; action = "abort"; ping = "unanswered"; '
                              'match = { to = "127.0.0.1/32"; port = %d; path = "/pkg.Svc/Slow"; }; }'
                              % GRPC])
    rc, direct = run([sys.executable, "-c", GRPC_CALL, str(GRPC), "Slow"],
                     {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"})
    rc, via = run([sys.executable, "-c", GRPC_CALL, str(GRPC), "Slow"], env(d, conf))
    check("a gRPC call with 300 ms keepalive PINGs: answered directly (%r), unanswered under "
          "the rule: UNAVAILABLE well before the 3 s call ends (%r)" % (direct.strip(), via.strip()),
          direct.startswith("ok b'late'") and via.startswith("err UNAVAILABLE") and
          float(via.split()[-1]) < 2.5, (direct, via))


def make_certs(d):
    def o(*a):
        subprocess.run(["openssl"] + list(a), check=True, capture_output=True)
    ca, key = os.path.join(d, "ca.pem"), os.path.join(d, "ca.key")
    o("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", ca, "-days", "2",
      "-subj", "/CN=h2 engine test CA")
    skey, csr, crt = (os.path.join(d, n) for n in ("srv.key", "srv.csr", "srv.pem"))
    ext = os.path.join(d, "ext")
    with open(ext, "w") as f:
        f.write("subjectAltName=DNS:localhost,IP:127.0.0.1\n")
    o("req", "-newkey", "rsa:2048", "-nodes", "-keyout", skey, "-out", csr, "-subj", "/CN=localhost")
    o("x509", "-req", "-in", csr, "-CA", ca, "-CAkey", key, "-CAcreateserial", "-out", crt,
      "-days", "2", "-extfile", ext)
    return ca, skey, crt


def alpn_h2(d, ca):
    conf = policy(d, "tls", ['{ name = "fail"; action = "respond"; status = 503; body = "nope"; '
                             'match = { to = "127.0.0.1/32"; port = %d; path = "/fail"; }; }' % TLS])
    fmt = ["-w", "%{http_code} %{http_version}", "-o", os.devnull]
    rc, direct = run(["curl", "-s", "--cacert", ca] + fmt + ["https://localhost:%d/index.html" % TLS],
                     {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"})
    rc1, via = run(["curl", "-s", "--cacert", ca] + fmt + ["https://localhost:%d/index.html" % TLS],
                   env(d, conf))
    rc2, fail = run(["curl", "-s", "--cacert", ca] + fmt + ["https://localhost:%d/fail" % TLS],
                    env(d, conf))
    check("curl over TLS offering h2 and http/1.1 gets the server's choice through the "
          "termination: directly %r, through faultnet %r" % (direct, via),
          direct == "200 2" and via == "200 2" and rc1 == 0, via)
    check("and the respond rule answers it over h2: %r" % fail, rc2 == 0 and fail == "503 2", fail)


def h2_only_no_server(d):
    conf = policy(d, "none", ['{ name = "r"; action = "respond"; status = 503; '
                              'match = { to = "127.0.0.1/32"; port = %d; path = "/503"; }; }' % NONE])
    code = ("import socket, ssl, sys\n"
            "ctx = ssl.create_default_context(cafile=sys.argv[1]); ctx.set_alpn_protocols(['h2'])\n"
            "s = socket.create_connection(('127.0.0.1', %d), timeout=10)\n"
            "try:\n"
            "    t = ctx.wrap_socket(s, server_hostname='127.0.0.1')\n"
            "    print('ok', t.selected_alpn_protocol(), t.recv(9).hex())\n"
            "except Exception as e:\n"
            "    print('fail', type(e).__name__)\n" % NONE)
    ca = os.path.join(d, "run", "ca.pem")
    if not os.path.exists(ca):  # run alone: one terminated connection makes it
        run(["curl", "-sk", "-o", os.devnull, "https://127.0.0.1:%d/503" % NONE], env(d, conf))
    results = []
    for _ in range(10):
        rc, out = run([sys.executable, "-c", code, ca], env(d, conf))
        results.append(out.strip())
    want = "ok h2 000000040000000000"  # an empty SETTINGS frame: no server to mirror
    check("an h2-only TLS client with no server there: 10 handshakes, each given h2 and then "
          "the engine's SETTINGS (%s)" % sorted(set(results)),
          results == [want] * 10, results)


def main():
    reexec()
    d = tempfile.mkdtemp(prefix="fn-h2e-")
    os.mkdir(os.path.join(d, "run"), 0o700)
    www = os.path.join(d, "www")
    os.mkdir(www)
    with open(os.path.join(www, "index.html"), "w") as f:
        f.write("hello\n")
    with open(os.path.join(www, "big.bin"), "wb") as f:
        f.write(os.urandom(100000))
    ca, skey, crt = make_certs(d)
    procs = [subprocess.Popen(["nghttpd", "--no-tls", "-d", www, str(PLAIN)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL),
             subprocess.Popen(["nghttpd", "-d", www, str(TLS), skey, crt],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL),
             subprocess.Popen([sys.executable, "-c", GRPC_SERVER, str(GRPC)]),
             subprocess.Popen([sys.executable, os.path.join(HERE, "h2c_server.py"), str(H2C)])]
    try:
        wait_port(PLAIN)
        wait_port(TLS)
        wait_port(GRPC)
        wait_port(H2C)
        # h2_only_no_server reads the run's CA: a TLS connection must have
        # been terminated before it (alpn_h2) when both run.
        for t in checks.selected([lambda: server_first(d), lambda: h2c_upgrade(d),
                                  lambda: h2c_late_preface(d),
                                  lambda: rst_after_headers(d), lambda: grpc_rst_after_headers(d), lambda: ping_unanswered(d),
                                  lambda: alpn_h2(d, ca), lambda: h2_only_no_server(d)]):
            print("--- " + checks.name_of(t))
            t()
    finally:
        for p in procs:
            p.kill()
            p.wait()
        subprocess.run(["rm", "-rf", d])
    sys.exit(1 if checks.failed else 0)


if __name__ == "__main__":
    main()
