"""https.py - TLS termination in the relay, end to end: real HTTPS servers
on loopback whose certificates come from a test CA the clients trust as a
public CA is trusted (the system store, replaced by a bind mount inside a
private mount namespace), and clients under the shim with no CA variable
and no -k: curl, Python's urllib and requests, wget and git (GnuTLS, through
the hook on gnutls_certificate_verify_peers*). Under a rule that answers,
they get faultnet's answer (the relay presents a leaf of the run's CA, and
the trust hook lets the app's verification trust that CA when the server
passes the app's own store); under a rule that forwards, the server's
bodies arrive byte for byte on one kept-alive connection; a server from a
CA the client does not trust still fails for the client under the rule,
also when the system trusts it but the app trusts a private CA alone; a connection no rule covers is never
terminated (the client sees the server's own certificate, byte for byte);
faultctl run sets the CA variables for a policy from FAULTNET_CONFIG and
for a scenario whose step adds an HTTP rule. Runs itself in a new
mount and network namespace (loopback only). Root.

usage: https.py BUILD_DIR"""
import hashlib
import http.server
import json
import os
import random
import shutil
import socket
import socketserver
import ssl
import struct
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
import checks  # noqa: E402
from checks import check  # noqa: E402

BUILD = os.path.abspath(sys.argv[1])
LIB = os.path.join(BUILD, "libfaultnet.so")
PY = "/usr/bin/python3"
BUNDLE = "/etc/ssl/certs/ca-certificates.crt"
PORT, ROGUE, FAKE, NONE, PRIV = 18443, 18444, 18445, 18446, 18447
OWN = 18461  # a server from a CA only the app's own cafile names
DENY, RESET = 18462, 18463  # servers that refuse every handshake
SEEN = 18464  # a server from the rogue CA that notes how each handshake ended
GOOD_CERT = []  # the test CA's server's certificate and key files
CA_VARS = ("SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE",
           "AWS_CA_BUNDLE", "NODE_EXTRA_CA_CERTS")


def reexec():
    """Into a private mount and network namespace, once."""
    if os.environ.get("FN_HTTPS_NS") == "1":
        return
    env = dict(os.environ, FN_HTTPS_NS="1")
    cmd = ["unshare", "-m", "-n", "sh", "-c", 'ip link set lo up && exec "$@"', "-",
           PY, "-u"] + sys.argv
    sys.exit(subprocess.run(cmd, env=env).returncode)


def openssl(*args):
    subprocess.run(["openssl"] + list(args), check=True, capture_output=True)


def make_ca(d, name, cn):
    key, pem = os.path.join(d, name + ".key"), os.path.join(d, name + ".pem")
    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
            "-keyout", key, "-out", pem, "-days", "2", "-subj", "/CN=" + cn,
            "-addext", "basicConstraints=critical,CA:TRUE",
            "-addext", "keyUsage=critical,keyCertSign")
    return key, pem


def make_leaf(d, name, ca):
    key, csr, pem = (os.path.join(d, name + s) for s in (".key", ".csr", ".pem"))
    ext = os.path.join(d, name + ".ext")
    with open(ext, "w") as f:
        f.write("subjectAltName=DNS:api.test,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n")
    openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
            "-keyout", key, "-out", csr, "-subj", "/CN=api.test")
    openssl("x509", "-req", "-in", csr, "-CA", ca[1], "-CAkey", ca[0], "-CAcreateserial",
            "-out", pem, "-days", "2", "-extfile", ext)
    return pem, key


def body(n):
    return random.Random(n).randbytes(n)


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def setup(self):
        super().setup()
        self.server.conns += 1

    def do_GET(self):
        self.server.requests += 1
        b = body(int(self.path.strip("/") or "10"))
        self.send_response(200)
        self.send_header("Content-Length", str(len(b)))
        self.end_headers()
        self.wfile.write(b)

    def do_POST(self):
        """Answers the sha256 of the body it read (Content-Length or chunked)."""
        self.server.requests += 1
        h = hashlib.sha256()
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            while True:
                n = int(self.rfile.readline().split(b";")[0], 16)
                h.update(self.rfile.read(n))
                self.rfile.readline()
                if n == 0:
                    break
        else:
            left = int(self.headers.get("Content-Length", "0"))
            while left:
                got = self.rfile.read(min(left, 1 << 20))
                h.update(got)
                left -= len(got)
        b = h.hexdigest().encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(b)))
        self.end_headers()
        self.wfile.write(b)

    def log_message(self, *a):
        pass


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True

    def __init__(self, port, cert):
        super().__init__(("127.0.0.1", port), Handler)
        self.cert = cert[0]
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(*cert)
        self.ctx = ctx
        self.conns = self.requests = 0
        threading.Thread(target=self.serve_forever, daemon=True).start()

    def handle_error(self, request, client_address):
        pass  # a client that refused the handshake: what some checks want

    def get_request(self):
        s, a = self.socket.accept()
        return self.ctx.wrap_socket(s, server_side=True, do_handshake_on_connect=False), a


def refusing_server(port, cert, how):
    """A TLS server that refuses every handshake: "deny" with an
    access_denied alert (its SNI callback's answer), "reset" by resetting
    the connection once the ClientHello is in; or, "note", one that
    completes them and notes in its list how each ended. Returns the list."""
    ended = []
    ls = socket.create_server(("127.0.0.1", port))
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(*cert)
    if how != "note":
        ctx.sni_callback = lambda *a: ssl.ALERT_DESCRIPTION_ACCESS_DENIED

    def serve():
        while True:
            c, _ = ls.accept()
            try:
                if how == "reset":
                    c.recv(4096)
                    c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                else:
                    ctx.wrap_socket(c, server_side=True).close()
                    ended.append("completed")
            except (OSError, ssl.SSLError) as e:
                ended.append(getattr(e, "reason", None) or type(e).__name__)
            c.close()
    threading.Thread(target=serve, daemon=True).start()
    return ended


def policy(d, name, rules):
    path = os.path.join(d, name + ".conf")
    with open(path, "w") as f:
        f.write("rules = (\n%s\n);\n" % ",\n".join(rules))
    return path


def rule(name, port, extra="", action='action = "respond"; status = 503; body = "injected";'):
    return ('{ name = "%s"; %s match = { to = "127.0.0.1/32"; port = %d; %s }; }'
            % (name, action, port, extra))


def env(d, conf):
    e = {k: v for k, v in os.environ.items()
         if not k.startswith("FAULTNET_") and k not in CA_VARS}
    e.update(FAULTNET_CONFIG=conf, FAULTNET_RUNDIR=os.path.join(d, "run"), LD_PRELOAD=LIB,
             ASAN_OPTIONS="detect_leaks=0")
    if conf is None:  # the same client without faultnet
        del e["FAULTNET_CONFIG"], e["LD_PRELOAD"]
    return e


def client(d, conf, *args):
    p = subprocess.run([PY, os.path.join(HERE, "https_client.py")] + list(args),
                       env=env(d, conf), capture_output=True, text=True, timeout=120)
    try:
        return json.loads(p.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        return {"error": "no result: " + p.stderr[-600:]}


def curl(d, conf, url, *opts):
    p = subprocess.run(["curl", "-sS", "--max-time", "20", "-w", " %{http_code}", url] +
                       list(opts), env=env(d, conf), capture_output=True, timeout=60)
    return (p.returncode, p.stdout.decode(errors="replace").strip(),
            p.stderr.decode(errors="replace").strip())


def answered(d, srv):
    conf = policy(d, "answer", [rule("r503", PORT)])
    before = srv.requests
    rc, out, err = curl(d, conf, "https://api.test:%d/10" % PORT)
    check("curl (no -k, no CA variable) under respond 503 gets faultnet's answer: %r" % out,
          rc == 0 and out == "injected 503", err)
    rc, out, err = curl(d, conf, "https://127.0.0.1:%d/10" % PORT)
    check("curl to the address (no SNI: a leaf for the IP) gets it too: %r" % out,
          rc == 0 and out == "injected 503", err)
    rc, out, err = curl(d, conf, "https://api.test:%d/10" % PORT, "--http2")
    check("curl --http2 (offers h2 and http/1.1) is given what the server chose (no ALPN: "
          "http/1.1) and gets it: %r" % out,
          rc == 0 and out == "injected 503", err)
    r = client(d, conf, "urllib", "https://api.test:%d/10" % PORT)
    check("Python urllib gets 503 'injected'", r.get("status") == 503 and r.get("body") == "injected", r)
    r = client(d, conf, "requests", "https://api.test:%d/10" % PORT)
    check("Python requests gets 503 'injected'", r.get("status") == 503 and r.get("body") == "injected", r)
    r = client(d, conf, "fork", "api.test", str(PORT))
    check("across a fork: the parent's terminated connection goes on (503, then 503), the "
          "child terminates one of its own (503)",
          r.get("results") == [[503, "injected"], [503, "injected"], 0], r)
    r = client(d, conf, "ctypes")
    check("the hook called through ctypes (from libffi, libcrypto loaded locally) reaches the "
          "real X509_verify_cert: it returns 1", r.get("returned") == 1, r)
    r, direct = (client(d, c, "peercert", "api.test", str(PORT)) for c in (conf, None))
    check("the terminated connection's client reads the server's own certificate (subject, "
          "issuer, serial, dates, names: %s), though its bytes (its key) are the relay's"
          % (r.get("cert") or {}).get("serialNumber"),
          r.get("cert") and r.get("cert") == direct.get("cert")
          and r.get("der") != direct.get("der"), (r, direct))
    check("every request was answered by the rule: the server saw none (%d)"
          % (srv.requests - before), srv.requests == before)


def no_server(d):
    """As for plain HTTP: no server is needed where the rules answer."""
    conf = policy(d, "none", [rule("r503", NONE, 'path = "/503*";')])
    rc, out, err = curl(d, conf, "https://api.test:%d/503" % NONE)
    check("no server at the destination: a request the rule answers gets 503 (%r)" % out,
          rc == 0 and out == "injected 503", err)
    rc, out, err = curl(d, conf, "https://api.test:%d/other" % NONE)
    check("...and one to forward meets a reset after the handshake (curl exit %d: 56 wanted)" % rc,
          rc == 56 and "injected" not in out, err)
    r = client(d, conf, "issuer", "api.test", str(NONE), "h2")
    check("an h2-only client there is terminated too (HTTP/2 is read): no server to choose, "
          "it is given h2 with the run's leaf (%s)" % r,
          r.get("alpn") == "h2" and "faultnet run CA" in r.get("issuer", ""), r)


def forwarded(d, srv):
    conf = policy(d, "forward", [rule("never", PORT, 'path = "/never*";')])
    conns, sizes = srv.conns, [1024, 8 << 20, 1024]
    r = client(d, conf, "keepalive", "api.test", str(PORT), *["/%d" % n for n in sizes])
    want = [[200, n, hashlib.sha256(body(n)).hexdigest()] for n in sizes]
    check("a rule that does not take them: 1 KiB, 8 MiB, 1 KiB arrive byte-exact (sha256)",
          r.get("results") == want, r)
    check("on one kept-alive connection to the server (%d)" % (srv.conns - conns),
          srv.conns - conns == 1)
    rc, out, err = curl(d, conf, "https://api.test:%d/1024" % PORT, "-o", os.devnull)
    check("curl through the same rule gets the server's 200: %r" % out, rc == 0 and out == "200", err)
    r = client(d, conf, "post", "api.test", str(PORT), "1024", str(8 << 20), str(8 << 20) + "c",
               "1000c")
    check("request bodies reach the server byte-exact: 1 KiB, 8 MiB, 8 MiB chunked, 1000 "
          "bytes chunked, on one connection", r.get("results") == [[200, True]] * 4, r)


def slowed_and_cut(d):
    """slow and abort act on the decrypted requests as on plain ones."""
    conf = policy(d, "slow", [rule("slow", PORT, action='action = "slow"; delay_ms = 600;')])
    t = time.monotonic()
    rc, out, err = curl(d, conf, "https://api.test:%d/64" % PORT, "-o", os.devnull)
    took = time.monotonic() - t
    check("slow delay_ms = 600: curl gets the server's 200 after %.2f s" % took,
          rc == 0 and out == "200" and took >= 0.6, err)
    conf = policy(d, "cut", [rule("cut", PORT, action='action = "abort"; mode = "close"; '
                                                     'after_bytes = 1000;')])
    p = subprocess.run(["curl", "-sS", "--max-time", "20", "https://api.test:%d/100000" % PORT],
                       env=env(d, conf), capture_output=True, timeout=60)
    check("abort after_bytes = 1000: curl gets the answer's first 1000 bytes (head and part of "
          "the body), then the end "
          "(exit %d, %d bytes)" % (p.returncode, len(p.stdout)),
          p.returncode == 18 and 0 < len(p.stdout) < 1000 and
          body(100000).startswith(p.stdout), p.stderr[-200:])


def untrusted(d, rogue):
    conf = policy(d, "rogue", [rule("r503", ROGUE)])
    rc, out, err = curl(d, conf, "https://api.test:%d/10" % ROGUE)
    check("a server from a CA the client does not trust still fails for curl under the rule "
          "(exit %d: %s)" % (rc, err.splitlines()[0][:90] if err else ""),
          rc != 0 and "injected" not in out)
    r = client(d, conf, "urllib", "https://api.test:%d/10" % ROGUE)
    check("and for urllib (%s)" % r.get("error", "")[:80],
          "error" in r and "status" not in r, r)
    r = client(d, conf, "requests", "https://api.test:%d/10" % ROGUE)
    check("and for requests", "error" in r and "status" not in r, r)


def app_trust(d, private):
    """The app's own trust decides, not the system's: an app that trusts a
    private CA alone is not made to trust a server from another CA, though
    the system (and so the relay) trusts it; one verification that trusted
    the run's CA leaves the app's store as it was."""
    conf = policy(d, "private", [rule("r503", PORT), rule("p503", PRIV)])
    rc, out, err = curl(d, conf, "https://api.test:%d/10" % PORT, "--cacert", private)
    check("curl --cacert PRIVATE to a server from the system-trusted test CA fails under the "
          "rule (exit %d: 60 or 35 wanted)" % rc, rc in (60, 35) and "injected" not in out, out)
    r = client(d, conf, "requests", "https://api.test:%d/10" % PORT, private)
    check("requests with verify=PRIVATE fails there too (%s)" % r.get("error", "")[:80],
          "SSLError" in r.get("error", "") and "status" not in r, r)
    rc, out, err = curl(d, conf, "https://api.test:%d/10" % PRIV, "--cacert", private)
    check("curl --cacert PRIVATE to a server from PRIVATE gets the rule's answer: %r" % out,
          rc == 0 and out == "injected 503", err)
    r = client(d, conf, "private", private, "api.test", str(PRIV), str(PORT), str(PRIV))
    res = r.get("results", [])
    check("one Python context trusting PRIVATE alone: its server 503, then the test CA's "
          "server fails (the first verification left the store as it was), then 503 again: %s"
          % res, len(res) == 3 and res[0] == res[2] == [503, "injected"]
          and isinstance(res[1], str) and "CERTIFICATE_VERIFY_FAILED" in res[1], r)


def own_ca(d, own):
    """A server from a CA the system does not know but the app's own cafile
    names (as a test suite's or a company's private CA) is reached and
    judged by the app: forwarded requests get its answers, the rule's path
    its answer; without that cafile the app still refuses it."""
    conf = policy(d, "own", [rule("own503", OWN, 'path = "/injected";')])
    rc, out, err = curl(d, conf, "https://api.test:%d/10" % OWN, "--cacert", own)
    check("curl --cacert OWN (a CA no system store has) reaches its server through the rule: "
          "the server's 200 (%r)" % out, rc == 0 and out.endswith(" 200"), err)
    rc, out, err = curl(d, conf, "https://api.test:%d/injected" % OWN, "--cacert", own)
    check("...and the rule's path gets the rule's answer: %r" % out,
          rc == 0 and out == "injected 503", err)
    r = client(d, conf, "requests", "https://api.test:%d/10" % OWN, own)
    check("requests with verify=OWN gets the server's 200 (%s)" % r,
          r.get("status") == 200, r)
    rc, out, err = curl(d, conf, "https://api.test:%d/10" % OWN)
    check("curl trusting the system's roots alone still refuses that server (exit %d: 60 or 35)"
          % rc, rc in (60, 35) and "injected" not in out, err)
    # Its certificate names api.test, not localhost: an app that checks no
    # host name (Python's check_hostname = False) accepts it, one that
    # does refuses it, as each would directly.
    r = client(d, conf, "hostcheck", own, "localhost", str(OWN))
    res = r.get("results", [])
    check("reached as localhost (a name its certificate lacks): Python with check_hostname = "
          "False gets the server's 200, with it True a hostname mismatch: %s" % res,
          len(res) == 2 and res[0] == 200 and "Hostname mismatch" in str(res[1]), r)


def wget(d, conf, url, *opts, extra_env=None):
    e = env(d, conf)
    e.update(extra_env or {})
    p = subprocess.run(["wget", "-O", "-", "--tries=1", "--timeout=20", url] + list(opts),
                       env=e, capture_output=True, timeout=60)
    return p.returncode, p.stdout.decode(errors="replace"), p.stderr.decode(errors="replace")


def git_ls(d, conf, url, cafile=None):
    e = env(d, conf)
    e.update(GIT_TERMINAL_PROMPT="0", HOME=d, GIT_CONFIG_NOSYSTEM="1")
    if cafile:
        e["GIT_SSL_CAINFO"] = cafile
    p = subprocess.run(["git", "ls-remote", url], env=e, capture_output=True, timeout=60)
    return p.returncode, p.stderr.decode(errors="replace").strip()


def gnutls_clients(d, private):
    """Clients of GnuTLS (wget; git through libcurl-gnutls) trust the
    relay's leaf with nothing set, under the same rule as OpenSSL's: the
    hook on gnutls_certificate_verify_peers* judges the server behind the
    leaf with the app's own trust list, and trusts the run's CA only where
    no server is behind it."""
    conf = policy(d, "gnutls", [rule("r503", PORT), rule("p503", PRIV), rule("n503", NONE),
                                 rule("x503", ROGUE)])
    rc, out, err = wget(d, conf, "https://api.test:%d/10" % PORT)
    check("wget (GnuTLS, no --no-check-certificate, no CA variable) under respond 503 gets "
          "faultnet's 503 (exit %d: 8 wanted)" % rc,
          rc == 8 and "503" in err and "certificate" not in err, err[-300:])
    rc, out, err = wget(d, conf, "https://api.test:%d/10" % NONE)
    check("wget with no server behind the rule gets the 503 too (exit %d)" % rc,
          rc == 8 and "503" in err and "certificate" not in err, err[-300:])
    rc, err = git_ls(d, conf, "https://api.test:%d/repo.git" % PORT)
    check("git ls-remote (libcurl-gnutls) under respond 503 gets faultnet's 503 (exit %d)" % rc,
          rc != 0 and "returned error: 503" in err, err[-300:])
    rc, err = git_ls(d, conf, "https://api.test:%d/repo.git" % NONE)
    check("git ls-remote with no server behind the rule gets the 503 too",
          rc != 0 and "returned error: 503" in err, err[-300:])
    rc, err = git_ls(d, conf, "https://api.test:%d/repo.git" % PRIV, private)
    check("git trusting PRIVATE alone (GIT_SSL_CAINFO) gets the 503 from PRIVATE's server",
          rc != 0 and "returned error: 503" in err, err[-300:])
    # git's process has libcrypto too (libssh2): the relay leaves the
    # judgement of the server to the app, so only the hook's check of the
    # server's chain stands between git and a server nobody trusts.
    direct = git_ls(d, None, "https://api.test:%d/repo.git" % ROGUE)
    rc, err = git_ls(d, conf, "https://api.test:%d/repo.git" % ROGUE)
    check("git refuses a server from a CA it does not trust under the rule as directly: "
          "%s" % (err.splitlines()[-1][:110] if err else ""),
          rc == direct[0] != 0 and "503" not in err and "certificate" in err.lower()
          and "certificate" in direct[1].lower(), (err[-300:], direct))
    rc, out, err = wget(d, conf, "https://api.test:%d/10" % ROGUE)
    check("wget to a server from a CA nobody trusts still fails under the rule (exit %d: the "
          "relay's handshake_failure, 4, as the system's roots judge it there)" % rc,
          rc == 4 and "503" not in err, err[-300:])
    empty = os.path.join(d, "empty-ca-dir")
    os.makedirs(empty, exist_ok=True)
    rc, out, err = wget(d, None, "https://api.test:%d/10" % PORT, "--ca-directory=" + empty,
                        "--ca-certificate=" + private)
    direct = rc
    rc, out, err = wget(d, conf, "https://api.test:%d/10" % PORT, "--ca-directory=" + empty,
                        "--ca-certificate=" + private)
    check("wget trusting PRIVATE alone refuses the test CA's server directly (exit %d) and "
          "under the rule (exit %d), though the relay trusts it" % (direct, rc),
          direct == 5 and rc == 5 and "503" not in err, err[-300:])


def ca_vars(d):
    """The CA variables (NODE_EXTRA_CA_CERTS, GRPC_DEFAULT_SSL_ROOTS_FILE_PATH)
    are set for a command whose HTTP rules come from a policy given by
    FAULTNET_CONFIG alone, and for a scenario's command whose HTTP rule a
    step adds; a policy with no HTTP rule and no step gets none."""
    conf = policy(d, "vars", [rule("r503", PORT)])
    plain = policy(d, "plain", ['{ name = "d"; action = "drop"; match = { to = "127.0.0.9/32"; }; }'])
    run = os.path.join(d, "run-vars")
    os.makedirs(run, mode=0o700, exist_ok=True)
    show = 'printf "%s|%s\\n" "$NODE_EXTRA_CA_CERTS" "$GRPC_DEFAULT_SSL_ROOTS_FILE_PATH"'

    def vars_of(cmd, conf_env, extra=()):
        e = env(d, conf_env)
        e["FAULTNET_RUNDIR"] = run
        e.pop("LD_PRELOAD", None)
        e.pop("NODE_EXTRA_CA_CERTS", None)
        e.pop("GRPC_DEFAULT_SSL_ROOTS_FILE_PATH", None)
        p = subprocess.run([os.path.join(BUILD, "faultctl")] + cmd + list(extra), env=e,
                           capture_output=True, text=True, timeout=60)
        lines = [ln for ln in p.stdout.splitlines() if "|" in ln]
        return (lines[-1].split("|") if lines else ["", ""]), p

    ca = os.path.join(run, "ca.pem")
    (node, grpc), p = vars_of(["run", "--", "sh", "-c", show], conf)
    check("a policy given by FAULTNET_CONFIG alone (no --config): NODE_EXTRA_CA_CERTS names the "
          "run's CA (%r) and gRPC's roots a combined bundle (%r)" % (node, grpc),
          node == ca and "/ca.grpc-" in grpc and os.path.exists(ca), p.stderr[-300:])
    (node, grpc), p = vars_of(["run", "--", "sh", "-c", show], plain)
    check("FAULTNET_CONFIG with no HTTP rule: none set (%r, %r)" % (node, grpc),
          node == "" and grpc == "", p.stderr[-300:])
    out = os.path.join(d, "scenario-vars")
    sc = os.path.join(d, "vars.scenario")
    with open(sc, "w") as f:
        f.write('policy = "%s";\nduration_ms = 600;\nsteps = ( { name = "a"; at_ms = 100; '
                'add = "{ name = \\"late503\\"; action = \\"respond\\"; status = 503; '
                'match = { to = \\"127.0.0.1/32\\"; port = %d; }; }"; } );\n' % (plain, PORT))
    (node, grpc), p = vars_of(["scenario", sc, "--", "sh", "-c", show + " > " + out], None)
    got = open(out).read().strip().split("|") if os.path.exists(out) else ["", ""]
    check("a scenario's command, whose policy has no HTTP rule but a step adds one, gets them: "
          "%r" % got, got[0] == ca and "/ca.grpc-" in got[1], (p.stdout[-300:], p.stderr[-300:]))


def server_refuses(d):
    """A server that refuses the handshake: the app under a rule that
    forwards meets the same refusal as without faultnet (the alert the
    server sent; the reset), never a handshake that succeeds and a request
    that fails."""
    conf = policy(d, "deny", [rule("d503", DENY, 'path = "/injected";'),
                              rule("x503", RESET, 'path = "/injected";')])
    for port, what in ((DENY, "an access_denied alert"), (RESET, "a reset")):
        direct = client(d, None, "urllib", "https://api.test:%d/10" % port)
        under = client(d, conf, "urllib", "https://api.test:%d/10" % port)
        check("a server refusing the handshake with %s: urllib meets the same error under a rule "
              "that forwards as directly (%s / %s)" % (what, under.get("error", "")[:70],
                                                       direct.get("error", "")[:70]),
              "error" in direct and under.get("error") == direct.get("error"), (direct, under))


def server_sees_refusal(d, ended):
    """An app that refuses the server's certificate: the server sees the
    handshake fail with the app's own alert, under a rule that forwards as
    directly, never a completed handshake from the relay."""
    conf = policy(d, "seen", [rule("s503", SEEN, 'path = "/injected";')])
    got = []
    for c in (None, conf):
        del ended[:]
        curl(d, c, "https://api.test:%d/10" % SEEN)
        time.sleep(0.3)
        got.append(list(ended))
    check("a server the app does not trust sees its handshake fail with the app's alert, under "
          "a rule as directly (%s / %s)" % (got[1], got[0]),
          got[0] and got[1] == got[0] and "completed" not in got[1], got)


def run_ca_server(d):
    """The relay's own verification never trusts the run's CA: a server
    whose certificate the run's CA signed (as an attacker holding ca.key
    could) fails under the rule, though the app trusts that CA."""
    run = os.path.join(d, "run")
    made = os.path.exists(os.path.join(run, "ca.pem"))
    check("the terminating processes made the run's CA in the run directory", made)
    if not made:
        return
    fake = Server(FAKE, make_leaf(d, "fake", (os.path.join(run, "ca.key"),
                                              os.path.join(run, "ca.pem"))))
    conf = policy(d, "fake", [rule("r503", FAKE)])
    rc, out, err = curl(d, conf, "https://api.test:%d/10" % FAKE)
    check("a server signed by the run's CA is not trusted by the relay: curl fails "
          "(exit %d)" % rc, rc != 0 and "injected" not in out, out)
    other = policy(d, "elsewhere", [rule("elsewhere", FAKE + 100)])
    rc, out, err = curl(d, other, "https://api.test:%d/10" % FAKE)
    check("nor by an app that terminates nothing (the hook trusts the CA only where the "
          "relay made a leaf): curl fails (exit %d)" % rc, rc == 60, out)
    fake.shutdown()


def der_of(pem):
    """The sha256 of a PEM certificate file's DER, as https_client.py
    reports the certificate it was shown."""
    with open(pem) as f:
        return hashlib.sha256(ssl.PEM_cert_to_DER_cert(f.read())).hexdigest()


def uncovered(d, srv):
    conf = policy(d, "other", [rule("elsewhere", PORT + 100)])
    r = client(d, conf, "issuer", "api.test", str(PORT))
    check("a connection no rule covers is not terminated: the server's own certificate, byte "
          "for byte (issuer %s)" % r.get("issuer"), r.get("der") == der_of(srv.cert), r)
    rc, out, err = curl(d, conf, "https://api.test:%d/10" % PORT, "-o", os.devnull)
    check("curl there gets the server's 200", rc == 0 and out == "200", err)


def node_static():
    """A Node.js that carries its own OpenSSL (no libssl in its ldd): the trust
    hook cannot reach it, so it refuses the leaf inside the handshake unless
    NODE_EXTRA_CA_CERTS (set by faultctl run) names the run's CA."""
    node = shutil.which("node")
    if not node:
        return None, "no node on PATH"
    ldd = subprocess.run(["ldd", node], capture_output=True, text=True).stdout
    return (None, "%s links the system's libssl (the hook reaches it)" % node) \
        if "libssl" in ldd else (node, "")


def counted(d):
    """faultctl run --stats: the tls record of the processes it ran."""
    node, why = node_static()
    conf = policy(d, "counted", [rule("r503", PORT), rule("rogue", ROGUE)])
    js = ("require('https').get('https://api.test:%d/10', {agent: false}, "
          "r => { r.resume(); console.log('node', r.statusCode); })"
          ".on('error', e => console.log('node', e.code))" % PORT)
    # curl's own store judges the rogue server (the hook reaches it):
    # it refuses the leaf; wget (GnuTLS, no libcrypto in the process) is
    # judged by the relay against the system's roots: server_unverified.
    # The static Node.js twice: with the NODE_EXTRA_CA_CERTS faultctl run
    # set (it trusts the leaf), and with it removed (it refuses the leaf).
    nodes = ("%s -e \"%s\"; env -u NODE_EXTRA_CA_CERTS %s -e \"%s\";" % (node, js, node, js)
             if node else "")
    script = ("curl -sS https://api.test:%d/10; %s %s issuer api.test %d h2; "
              "curl -sS https://api.test:%d/10; wget -q -O /dev/null https://api.test:%d/10; %s true"
              % (PORT, PY, os.path.join(HERE, "https_client.py"), PORT, ROGUE, ROGUE, nodes))
    e = env(d, conf)
    del e["LD_PRELOAD"], e["FAULTNET_CONFIG"]
    p = subprocess.run([os.path.join(BUILD, "faultctl"), "run", "--config", conf, "--stats",
                        "--", "sh", "-c", script], env=e, capture_output=True, text=True,
                       timeout=120)
    out = p.stdout + p.stderr
    h2only = [json.loads(ln[ln.index('{"issuer"'):]) for ln in out.splitlines()
              if '{"issuer"' in ln]
    check("an h2-only client is terminated like any other: the server's certificate mirrored "
          "(its issuer, not its bytes) and the server's choice of protocol (none): %s" % h2only,
          len(h2only) == 1 and h2only[0]["der"] != der_of(GOOD_CERT[0]) and
          "faultnet" not in h2only[0]["issuer"] and h2only[0]["alpn"] is None, out[-600:])
    line = [ln for ln in out.splitlines() if ln.strip().startswith("tls ")]
    n = dict(kv.split("=") for kv in line[0].split()[1:]) if line else {}
    want = {"terminated": "3" if node else "2", "passed_other_alpn": "0",
            "passed_unavailable": "0", "refused_by_app": "2" if node else "1",
            "server_unverified": "1", "alpn_downgraded": "0", "trusted_by_hook": "2",
            "ca_variable": "5" if node else "3"}
    check("run --stats: the tls record counts curl's termination (the server chose no h2: "
          "no downgrade of ours), the h2-only client terminated, the untrusted server refused "
          "by curl's store "
          "and by the relay for wget%s: %s"
          % (", a static Node.js trusting the leaf through NODE_EXTRA_CA_CERTS and one "
             "without it refusing the leaf" if node else "",
             line[0].strip() if line else "no tls record"), n == want, out[-800:])
    vias = sorted(ln.split()[2] for ln in out.splitlines() if ln.strip().startswith("trust "))
    check("run --stats: a trust line per process that terminated or refused a connection, "
          "saying what reached it: %s" % vias,
          # curl to the rogue server: its hook ran, and let nothing pass.
          vias == (["via=hook", "via=hook", "via=none", "via=none", "via=variable"] if node
                   else ["via=hook", "via=hook", "via=none"]),
          out[-800:])
    if node:
        check("that Node.js, with faultctl run's NODE_EXTRA_CA_CERTS, got the rule's 503",
              "node 503" in out, out[-400:])
        check("without it, the same Node.js met a certificate error, never an answer",
              "node UNABLE_TO_VERIFY_LEAF_SIGNATURE" in out or
              "node UNABLE_TO_GET_ISSUER_CERT_LOCALLY" in out, out[-400:])
    else:
        print("  skip - a client the hook cannot reach refusing the leaf: %s" % why)
        checks.skip()


def logged(d, srv):
    """The request log (FAULTNET_REQUESTS) of a terminated connection: its
    requests decrypted, said to be https, the answered one and the one the
    server answered each with its status."""
    conf = policy(d, "logged", [rule("r503", PORT, 'path = "/503*";')])
    log = os.path.join(d, "requests.jsonl")
    e = env(d, conf)
    e["FAULTNET_REQUESTS"] = log
    p = subprocess.run(["curl", "-sS", "--max-time", "20", "-o", os.devnull,
                        "https://api.test:%d/503?k=v" % PORT, "-o", os.devnull,
                        "https://api.test:%d/1024" % PORT], env=e, capture_output=True,
                       timeout=60)
    got = []
    if os.path.exists(log):
        with open(log) as f:
            got = [json.loads(x) for x in f]
    want = [("https", "api.test:%d" % PORT, "/503", "k=v", "answered", 503, False),
            ("https", "api.test:%d" % PORT, "/1024", "", "untouched", 200, True)]
    check("the request log of an HTTPS connection the relay terminates: scheme https, the "
          "answered request and the forwarded one with their statuses",
          p.returncode == 0 and [(r["scheme"], r["host"], r["path"], r["query"], r["fate"],
                                  r["status"], r["reached_server"]) for r in got] == want,
          (got, p.stderr[-300:]))


def main():
    reexec()
    d = tempfile.mkdtemp(prefix="fn-https-")
    try:
        os.mkdir(os.path.join(d, "run"), 0o700)
        ca = make_ca(d, "ca", "https test CA")
        rogue_ca = make_ca(d, "rogue", "a CA nobody trusts")
        priv_ca = make_ca(d, "private", "a CA one app trusts alone")
        good = make_leaf(d, "good", ca)
        GOOD_CERT[:] = good
        bad = make_leaf(d, "bad", rogue_ca)
        with open(BUNDLE, "rb") as f, open(os.path.join(d, "bundle"), "wb") as g:
            g.write(f.read())
            for pem in (ca[1], priv_ca[1]):
                with open(pem, "rb") as c:
                    g.write(c.read())
        with open(os.path.join(d, "hosts"), "w") as f:
            f.write("127.0.0.1 localhost api.test\n")
        subprocess.run(["mount", "--bind", os.path.join(d, "bundle"), BUNDLE], check=True)
        subprocess.run(["mount", "--bind", os.path.join(d, "hosts"), "/etc/hosts"], check=True)
        srv, rogue = Server(PORT, good), Server(ROGUE, bad)
        Server(PRIV, make_leaf(d, "priv", priv_ca))
        own_ca_pem = make_ca(d, "ownca", "a CA only one app's cafile names")
        Server(OWN, make_leaf(d, "own", own_ca_pem))
        refusing_server(DENY, good, "deny")
        refusing_server(RESET, good, "reset")
        seen = refusing_server(SEEN, bad, "note")
        for t in checks.selected([lambda: answered(d, srv), lambda: no_server(d),
                                  lambda: forwarded(d, srv), lambda: slowed_and_cut(d),
                                  lambda: untrusted(d, rogue), lambda: run_ca_server(d),
                                  lambda: app_trust(d, priv_ca[1]), lambda: own_ca(d, own_ca_pem[1]),
                                  lambda: gnutls_clients(d, priv_ca[1]), lambda: ca_vars(d),
                                  lambda: server_refuses(d), lambda: server_sees_refusal(d, seen),
                                  lambda: counted(d),
                                  lambda: uncovered(d, srv), lambda: logged(d, srv)]):
            print("--- " + checks.name_of(t))
            t()
        with open(BUNDLE) as f:
            text = f.read()
        ca_pem = os.path.join(d, "run", "ca.pem")
        run_ca = open(ca_pem).read().strip() if os.path.exists(ca_pem) else "(none made)"
        check("the run's CA is in no system store (the bundle lacks it)", run_ca not in text)
    finally:
        shutil.rmtree(d, ignore_errors=True)
    sys.exit(1 if checks.failed else 0)


if __name__ == "__main__":
    main()
