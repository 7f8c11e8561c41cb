"""tls_calls.py - what the relay spends per keep-alive HTTPS request, counted
with strace: a client under the shim sends GETs one after another on one
TLS connection the relay terminates (an HTTP rule that answers nothing, so
every request is parsed, re-encrypted and forwarded to a loopback TLS
server). Per request the relay thread must wait for each side once, read
each side's record once and write it once: no read that finds nothing
(EAGAIN) after a record is in, and no read of the side that had no event.
Without that, a request cost the relay 10.4 calls, 4 of them reads for
nothing. Every answer must arrive whole. Also: an app that offers its
earlier TLS session on a new connection resumes it with the server
directly, never with the relay (each handshake with the relay is a full
one, whose server chain the app's own store judges). Runs itself in a
network namespace of its own (loopback only). Root (unshare).

usage: tls_calls.py BUILD_DIR"""
import glob
import os
import re
import socket
import ssl
import subprocess
import sys
import tempfile
import threading

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
import checks  # noqa: E402
from checks import check  # noqa: E402

BUILD = os.path.abspath(sys.argv[1])
LIB = os.path.join(BUILD, "libfaultnet.so")
PY = "/usr/bin/python3"
TMP = tempfile.mkdtemp(prefix="fn-tlscalls-")
ADDR, NAME = "127.0.0.1", "calls.test"
REQUESTS = 1000
# The calls a request may cost the relay thread: two waits, two reads and
# two writes, plus a little for the handshakes and the idle wake-ups
# spread over the requests. It was 10.4.
BOUND = 7.5

POLICY = """rules = ( { name = "never"; action = "respond"; status = 503;
  match = { to = "127.0.0.1/32"; port = %d; path = "/never"; }; } );
"""

CLIENT = r"""
import socket, ssl, sys
port, n, ca, name = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
ctx = ssl.create_default_context(cafile=ca)
s = ctx.wrap_socket(socket.create_connection(("127.0.0.1", port)), server_hostname=name)
s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
good = 0
for i in range(n):
    s.sendall(b"GET /k%d HTTP/1.1\r\nHost: calls.test\r\n\r\n" % i)
    got = b""
    while not got.endswith(b"\r\n\r\nok%d" % i):
        b = s.recv(4096)
        if not b:
            break
        got += b
    good += got.startswith(b"HTTP/1.1 200 ")
print(good)
"""


# Two connections, the second offering the first's TLS session: whether
# the server resumed it, and every answer.
RESUME = r"""
import socket, ssl, sys
port, ca, name = int(sys.argv[1]), sys.argv[2], sys.argv[3]
ctx = ssl.create_default_context(cafile=ca)
sess, out = None, []
for i in range(2):
    s = ctx.wrap_socket(socket.create_connection(("127.0.0.1", port)), server_hostname=name,
                        session=sess)
    s.sendall(b"GET /k%d HTTP/1.1\r\nHost: calls.test\r\n\r\n" % i)
    got = b""
    while not got.endswith(b"ok%d" % i):
        b = s.recv(4096)
        if not b:
            break
        got += b
    out.append((got.startswith(b"HTTP/1.1 200 "), s.session_reused))
    sess = s.session
    s.close()
print(out)
"""


def reexec():
    """Into a network namespace of its own, once."""
    if os.environ.get("FN_TLSCALLS_NS") == "1":
        return
    env = dict(os.environ, FN_TLSCALLS_NS="1")
    cmd = ["unshare", "-n", "sh", "-c", 'ip link set lo up && exec "$@"', "-", PY, "-u"] + \
        sys.argv
    sys.exit(subprocess.run(cmd, env=env).returncode)


def certs():
    """A test CA and a leaf for NAME it signed: (CA file, leaf, key)."""
    f = {k: os.path.join(TMP, k) for k in ("ca.key", "ca.pem", "leaf.key", "leaf.csr",
                                           "leaf.pem", "ext")}
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"]
    run = lambda a: subprocess.run(["openssl"] + a, check=True, capture_output=True)  # noqa
    run(["req", "-x509"] + ec + ["-keyout", f["ca.key"], "-out", f["ca.pem"], "-days", "2",
                                 "-subj", "/CN=calls CA", "-addext",
                                 "basicConstraints=critical,CA:TRUE", "-addext",
                                 "keyUsage=critical,keyCertSign"])
    with open(f["ext"], "w") as fh:
        fh.write("subjectAltName=DNS:%s\nextendedKeyUsage=serverAuth\n" % NAME)
    run(["req"] + ec + ["-keyout", f["leaf.key"], "-out", f["leaf.csr"], "-subj", "/CN=" + NAME])
    run(["x509", "-req", "-in", f["leaf.csr"], "-CA", f["ca.pem"], "-CAkey", f["ca.key"],
         "-CAcreateserial", "-out", f["leaf.pem"], "-days", "2", "-extfile", f["ext"]])
    return f["ca.pem"], f["leaf.pem"], f["leaf.key"]


def server(leaf, key):
    """A TLS server outside the shim answering each GET with a 200 whose
    body names the request ("ok" and its number), in one record; its port."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(leaf, key)
    lst = socket.socket()
    lst.bind((ADDR, 0))
    lst.listen(8)

    def serve(raw):
        raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            c = ctx.wrap_socket(raw, server_side=True)
            buf = b""
            while True:
                b = c.recv(4096)
                if not b:
                    break
                buf += b
                while b"\r\n\r\n" in buf:
                    head, buf = buf.split(b"\r\n\r\n", 1)
                    k = re.match(rb"GET /k(\d+) ", head)
                    body = b"ok" + (k.group(1) if k else b"")
                    c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s"
                              % (len(body), body))
        except (OSError, ssl.SSLError):
            pass
        raw.close()

    def accept():
        while True:
            c, _ = lst.accept()
            threading.Thread(target=serve, args=(c,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    return lst.getsockname()[1]


def traced(cmd, env, log):
    """cmd under strace, each thread's calls in a file of its own; the run
    and the relay thread's calls (the thread that waits in epoll_wait)."""
    r = subprocess.run(["strace", "-ff", "-qq", "-o", log] + cmd, env=env,
                       capture_output=True, text=True, timeout=120)
    relay = []
    for name in sorted(glob.glob(log + ".*")):
        with open(name) as f:
            lines = f.read().splitlines()
        if any(line.startswith(("epoll_pwait", "epoll_wait")) for line in lines):
            relay += lines
    return r, relay


def main():
    reexec()
    if not os.path.exists("/usr/bin/strace"):
        checks.skip()
        print("  skip - keep-alive HTTPS calls: strace is not installed")
        return
    ca, leaf, key = certs()
    port = server(leaf, key)
    conf = os.path.join(TMP, "calls.conf")
    with open(conf, "w") as f:
        f.write(POLICY % port)
    rundir = os.path.join(TMP, "run")
    os.mkdir(rundir, 0o700)
    env = dict(os.environ, LD_PRELOAD=LIB, FAULTNET_CONFIG=conf, FAULTNET_RUNDIR=rundir)
    for t in checks.selected([lambda: keep_alive(env, port, ca),
                              lambda: no_resumption(env, port, ca)]):
        t()


def no_resumption(env, port, ca):
    """The relay's end for the app issues no session to resume (no TLS 1.3
    ticket, no TLS 1.2 ticket or session id): each of the app's
    connections is a full handshake in which its own store judges the
    chain of the server the relay reached on that connection (trust.h). A
    resumed session would show the app no chain: the server's, met afresh
    by the relay, would be taken on the app's word of an earlier one (and
    the tickets cost the relay two encryptions a connection)."""
    plain = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
    direct = subprocess.run([PY, "-c", RESUME, str(port), ca, NAME], env=plain,
                            capture_output=True, text=True, timeout=60)
    check("directly, the server resumes the session the client offers: %s"
          % direct.stdout.strip(), direct.stdout.strip() == "[(True, False), (True, True)]",
          direct.stderr[-500:])
    r = subprocess.run([PY, "-c", RESUME, str(port), ca, NAME], env=env, capture_output=True,
                       text=True, timeout=60)
    check("through the relay's TLS termination, no session is resumed: %s" % r.stdout.strip(),
          r.stdout.strip() == "[(True, False), (True, False)]", r.stderr[-500:])


def keep_alive(env, port, ca):
    r, relay = traced([PY, "-c", CLIENT, str(port), str(REQUESTS), ca, NAME], env,
                      os.path.join(TMP, "strace"))
    check("%d keep-alive HTTPS requests through the relay's TLS termination: every answer"
          " whole and the server's" % REQUESTS,
          r.returncode == 0 and r.stdout.strip() == str(REQUESTS), r.stdout + r.stderr[-800:])
    calls = [line for line in relay if re.match(r"[a-z_0-9]+\(", line)]
    empty = [line for line in calls if line.startswith(("recvfrom", "read")) and
             "EAGAIN" in line]
    kinds = {}
    for line in calls:
        k = line.split("(", 1)[0]
        kinds[k] = kinds.get(k, 0) + 1
    per = len(calls) / REQUESTS
    check("the relay thread's system calls per keep-alive HTTPS request: %.2f (bound %.1f;"
          " %s)" % (per, BOUND, ", ".join("%s %.2f" % (k, v / REQUESTS)
                                           for k, v in sorted(kinds.items()))),
          len(calls) > 0 and per < BOUND, "\n".join(calls[-60:]))
    check("... of them reads that found nothing (EAGAIN): %d for %d requests (under a tenth"
          " a request)" % (len(empty), REQUESTS),
          len(calls) > 0 and len(empty) < REQUESTS // 10, "\n".join(empty[-20:]))


main()
