"""tls_faults.py - the tls action and match.host on the SNI name, end to
end. Differential: each TLS fault under faultnet, with no server at all,
beside a real local server with that defect (a certificate made here with
it, a server that never answers the handshake, one whose OpenSSL sends the
alert from its SNI callback, one that resets after the ClientHello), met by
the same clients (Python's ssl and curl, trusting the same test CA): the
same error, in about the same time. Also: a condition (first = 1), a rule
whose match.host does not match the SNI name leaving the connection
untouched (the server's own certificate), one that does match it, and bad
keys refused with file and line. Runs itself in a new network namespace
(loopback only). Root.

usage: tls_faults.py BUILD_DIR"""
import datetime
import hashlib
import json
import os
import re
import shutil
import socket
import ssl
import struct
import subprocess
import sys
import tempfile
import threading
import time

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
import checks  # noqa: E402
from checks import check  # noqa: E402

BUILD = os.path.abspath(sys.argv[1])
LIB = os.path.join(BUILD, "libfaultnet.so")
PY = "/usr/bin/python3"
CLIENT = os.path.join(HERE, "tls_faults_client.py")
REAL, FAULTED = 19100, 19200  # + the case's index: real servers, rules (no server)
GOOD, NONE = 19300, 19301
TIMEOUT = 1.5  # the clients' own handshake timeout, for the stalls
CA_VARS = ("SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE")
NOW = datetime.datetime.utcnow()
DAY = datetime.timedelta(days=1)


def reexec():
    """Into a private network namespace (loopback only), once."""
    if os.environ.get("FN_TLSF_NS") == "1":
        return
    env = dict(os.environ, FN_TLSF_NS="1")
    cmd = ["unshare", "-n", "sh", "-c", 'ip link set lo up && exec "$@"', "-", PY, "-u"] + sys.argv
    sys.exit(subprocess.run(cmd, env=env).returncode)


# ---- certificates ------------------------------------------------------------

def name(cn):
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def make(cn, key, issuer_cn, signer, ca=False, names=("api.test",), days=(-1, 30)):
    b = (x509.CertificateBuilder().subject_name(name(cn)).issuer_name(name(issuer_cn))
         .public_key(key.public_key()).serial_number(x509.random_serial_number())
         .not_valid_before(NOW + days[0] * DAY).not_valid_after(NOW + days[1] * DAY)
         .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
    if ca:
        b = b.add_extension(x509.KeyUsage(False, False, False, False, False, True, True, False,
                                          False), critical=True)
    else:
        b = (b.add_extension(x509.SubjectAlternativeName([x509.DNSName(n) for n in names]),
                             critical=False)
             .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]),
                            critical=False))
    return b.sign(signer, hashes.SHA256())


def write(d, stem, cert, key):
    crt, kf = os.path.join(d, stem + ".pem"), os.path.join(d, stem + ".key")
    with open(crt, "wb") as f:
        f.write(cert.public_bytes(serialization.Encoding.PEM))
    with open(kf, "wb") as f:
        f.write(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                  serialization.NoEncryption()))
    return crt, kf


def certificates(d):
    """The test CA (the clients' only trust), and a leaf per defect."""
    k = {n: ec.generate_private_key(ec.SECP256R1()) for n in
         ("ca", "rogue", "inter", "leaf")}
    ca = make("tls faults test CA", k["ca"], "tls faults test CA", k["ca"], ca=True)
    rogue = "a CA nobody trusts"
    inter = "tls faults intermediate"
    leaf = k["leaf"]
    ca_cn = "tls faults test CA"
    out = {"ca": write(d, "ca", ca, k["ca"])[0]}
    leaves = {
        "good": make("api.test", leaf, ca_cn, k["ca"]),
        "expired": make("api.test", leaf, ca_cn, k["ca"], days=(-31, -1)),
        "not_yet_valid": make("api.test", leaf, ca_cn, k["ca"], days=(1, 31)),
        "wrong_host": make("other.test", leaf, ca_cn, k["ca"], names=("other.test",)),
        "unknown_issuer": make("api.test", leaf, rogue, k["rogue"]),
        "self_signed": make("api.test", leaf, "api.test", leaf),
        # Signed by an intermediate of the test CA the server never sends.
        "incomplete_chain": make("api.test", leaf, inter, k["inter"]),
    }
    for n, c in leaves.items():
        out[n] = write(d, n, c, leaf)
    return out


# ---- real servers ---------------------------------------------------------------

def listener(port):
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", port))
    s.listen(16)
    return s


def serve(port, handle):
    s = listener(port)

    def loop():
        while True:
            c, _ = s.accept()
            threading.Thread(target=handle, args=(c,), daemon=True).start()
    threading.Thread(target=loop, daemon=True).start()


def tls_server(port, pair, alert=None):
    """A TLS server presenting pair (leaf only); alert: its OpenSSL refuses
    every handshake with that alert, sent from its SNI callback."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(*pair)
    if alert is not None:
        ctx.sni_callback = lambda s, n, c: alert

    def handle(c):
        try:
            with ctx.wrap_socket(c, server_side=True) as t:
                t.recv(4096)
                t.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
        except (OSError, ssl.SSLError):
            c.close()
    serve(port, handle)


HELD = []


def stall_server(port):
    serve(port, HELD.append)  # accepted, never read nor answered


def reset_server(port):
    def handle(c):
        c.recv(65536)  # the ClientHello
        c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        c.close()
    serve(port, handle)


# ---- clients ------------------------------------------------------------------------

def env(d, conf):
    e = {k: v for k, v in os.environ.items()
         if not k.startswith("FAULTNET_") and k not in CA_VARS and k != "LD_PRELOAD"}
    if conf:
        e.update(FAULTNET_CONFIG=conf, FAULTNET_RUNDIR=os.path.join(d, "run"), LD_PRELOAD=LIB,
                 ASAN_OPTIONS="detect_leaks=0")
    return e


def py(d, conf, port, ca, sni="api.test", *opts):
    p = subprocess.run([PY, CLIENT, sni, str(port), ca, str(TIMEOUT)] + list(opts),
                       env=env(d, conf), capture_output=True, text=True, timeout=60)
    try:
        return json.loads(p.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        return {"error": "no result: " + p.stderr[-600:]}


def curl(d, conf, port, ca):
    t = time.monotonic()
    p = subprocess.run(["curl", "-sS", "--cacert", ca, "--resolve", "api.test:%d:127.0.0.1" % port,
                        "--connect-timeout", str(TIMEOUT), "-o", os.devnull,
                        "https://api.test:%d/" % port], env=env(d, conf), capture_output=True,
                       text=True, timeout=60)
    # Numbers (milliseconds, a library's version) are no part of the error.
    first = re.sub(r"[0-9]+", "N", (p.stderr.strip().splitlines() or [""])[0])
    return p.returncode, first, round(time.monotonic() - t, 2)


def policy(d, stem, rules):
    path = os.path.join(d, stem + ".conf")
    with open(path, "w") as f:
        f.write("rules = (\n%s\n);\n" % ",\n".join(rules))
    return path


def rule(nm, port, action, keys="", host=None):
    return ('{ name = "%s"; action = "%s"; %s match = { to = "127.0.0.1/32"; port = %d; %s }; }'
            % (nm, action, keys, port, 'host = "%s";' % host if host else ""))


# ---- the checks -------------------------------------------------------------------------

CASES = [  # name, the rule's keys, how the real server does it
    ("stall", 'fault = "stall";', lambda p, c: stall_server(p)),
    ("reset", 'fault = "reset";', lambda p, c: reset_server(p)),
    ("handshake_failure", 'fault = "alert";',
     lambda p, c: tls_server(p, c["good"], ssl.ALERT_DESCRIPTION_HANDSHAKE_FAILURE)),
    ("internal_error", 'fault = "alert"; alert = "internal_error";',
     lambda p, c: tls_server(p, c["good"], ssl.ALERT_DESCRIPTION_INTERNAL_ERROR)),
    ("protocol_version", 'fault = "alert"; alert = "protocol_version";',
     lambda p, c: tls_server(p, c["good"], ssl.ALERT_DESCRIPTION_PROTOCOL_VERSION)),
] + [(f, 'fault = "%s";' % f, lambda p, c, f=f: tls_server(p, c[f]))
     for f in ("expired", "not_yet_valid", "wrong_host", "unknown_issuer", "self_signed",
               "incomplete_chain")]


def same_time(a, b, stall):
    """Generous: a stall takes the client's own timeout both ways; the
    others fail at once both ways."""
    if stall:
        return TIMEOUT - 0.2 <= a <= TIMEOUT + 1.5 and TIMEOUT - 0.2 <= b <= TIMEOUT + 1.5
    return a < 3 and b < 3


def differential(d, certs):
    """Each fault under faultnet (no server) against the real thing."""
    conf = policy(d, "faults", [rule("f-" + n, FAULTED + i, "tls", keys)
                                for i, (n, keys, _) in enumerate(CASES)])
    ca = certs["ca"]
    for i, (n, keys, real) in enumerate(CASES):
        real(REAL + i, certs)
        want, got = py(d, None, REAL + i, ca), py(d, conf, FAULTED + i, ca)
        check("%s, Python ssl: %r (real server) == %r (faultnet), %.2f s / %.2f s"
              % (n, want.get("error"), got.get("error"), want["took"], got.get("took", -1)),
              "error" in want and want.get("error") == got.get("error") and
              want.get("verify") == got.get("verify") and
              same_time(want["took"], got.get("took", -1), n == "stall"), (want, got))
        want, got = curl(d, None, REAL + i, ca), curl(d, conf, FAULTED + i, ca)
        check("%s, curl: exit %d %r (real) == exit %d %r (faultnet), %.2f s / %.2f s"
              % ((n,) + want[:2] + got[:2] + (want[2], got[2])),
              want[0] != 0 and want[:2] == got[:2] and same_time(want[2], got[2], n == "stall"),
              (want, got))


def conditions(d, certs):
    """A tls rule's conditions count handshakes: first = 1 faults the
    first one; the second meets the rule after it (no server needed)."""
    conf = policy(d, "first", [rule("once", NONE, "tls", 'fault = "expired"; first = 1;'),
                               rule("r503", NONE, "respond", 'status = 503;')])
    r = py(d, conf, NONE, certs["ca"], "api.test", "get", "twice")
    a, b = (r.get("results") or [{}, {}])[:2]
    check("first = 1: the process's first handshake meets the expired leaf (%s), its second "
          "the respond rule after it (%s)" % (a.get("verify"), b.get("status")),
          a.get("verify") == "certificate has expired" and b.get("status") == 503, r)


def sni_host(d, certs):
    """match.host meets the ClientHello's SNI name."""
    tls_server(GOOD, certs["good"])
    ca = certs["ca"]
    conf = policy(d, "other", [rule("r503", GOOD, "respond", 'status = 503;', "*.other.test"),
                               rule("tls", GOOD, "tls", 'fault = "reset";', "*.other.test")])
    r = py(d, conf, GOOD, ca, "api.test", "get")
    with open(certs["good"][0]) as f:
        der = hashlib.sha256(ssl.PEM_cert_to_DER_cert(f.read())).hexdigest()
    check("rules whose match.host does not match the SNI name (api.test) leave the connection "
          "untouched: the server's own certificate, byte for byte (issuer %s), and answer (%s)"
          % (r.get("issuer"), r.get("status")),
          r.get("der") == der and r.get("status") == 200, r)
    conf = policy(d, "s3", [rule("tls", NONE, "tls", 'fault = "expired";', "*.s3.example.test"),
                            rule("r503", NONE, "respond", 'status = 503;')])
    r = py(d, conf, NONE, ca, "bucket.s3.example.test", "get")
    check("host = \"*.s3.example.test\" on a tls rule faults SNI bucket.s3.example.test (%s)"
          % r.get("verify"), r.get("verify") == "certificate has expired", r)
    r = py(d, conf, NONE, ca, "api.test", "get")
    check("...and not SNI api.test: the rule after it answers (%s)" % r.get("status"),
          r.get("status") == 503, r)
    # The name resolved (a dns rule): a host-scoped respond rule then stands
    # for the server, as for plain HTTP (docs/http.md).
    conf = policy(d, "s3r", [rule("r503", NONE, "respond", 'status = 503;', "*.S3.example.test"),
                             '{ name = "names"; action = "dns"; answer = [ "127.0.0.1" ]; '
                             'match = { host = "*.example.test"; }; }'])
    r = py(d, conf, NONE, ca, "bucket.s3.example.test", "get", "byname")
    check("a respond rule's host pattern matches the SNI name, case aside: terminated, "
          "answered (%s)" % r.get("status"), r.get("status") == 503, r)


def policy_file(d):
    """policies/tls-expired-cert.conf as its header says: curl to an S3
    name (sent to loopback by its dns rule, no server there) meets the
    expired certificate; run --stats counts the rule's fault."""
    conf = os.path.join(os.path.dirname(os.path.dirname(HERE)), "policies", "tls-expired-cert.conf")
    events = os.path.join(d, "events.jsonl")
    p = subprocess.run([os.path.join(BUILD, "faultctl"), "run", "--config", conf, "--stats", "--",
                        "curl", "-sS", "-m", "10", "https://bucket.s3.amazonaws.com/key"],
                       env=dict(env(d, None), FAULTNET_EVENTS=events), capture_output=True,
                       text=True, timeout=60)
    line = [ln for ln in p.stderr.splitlines() if "rule cert-expired" in ln]
    check("tls-expired-cert.conf: curl exit %d (60: certificate has expired), the rule's "
          "faults=1 in run --stats" % p.returncode,
          p.returncode == 60 and "certificate has expired" in p.stderr and line and
          " faults=1 " in line[0], p.stderr[-600:])
    ev = open(events).read() if os.path.exists(events) else ""
    check("...and a tls-expired event of the rule",
          any("tls-expired" in e and "cert-expired" in e for e in ev.splitlines()), ev[-600:])


BAD = [  # the rule's text (its key on line 3), what the message names
    ('action = "tls";\n fault = "bogus";', 3, "fault 'bogus' must be"),
    ('action = "tls";\n alert = "nope"; fault = "alert";', 3, "alert 'nope' must be"),
    ('action = "tls";\n status = 503;', 3, "status does not apply to action tls"),
    ('action = "respond"; status = 503;\n fault = "stall";', 3,
     "fault does not apply to action respond"),
    ('action = "tls"; fault = "alert";\n match = { path = "/x"; };', 3, "match.path applies"),
    ('action = "tls";\n match = { port = 1; };', 2, "action tls needs fault"),
    ('action = "tls"; fault = "expired";\n alert = "internal_error";', 2,
     'alert applies to fault "alert" only'),
]


def bad_keys(d):
    for i, (body, line, words) in enumerate(BAD):
        path = os.path.join(d, "bad%d.conf" % i)
        with open(path, "w") as f:
            f.write('rules = (\n { name = "b"; %s }\n);\n' % body)
        p = subprocess.run([os.path.join(BUILD, "faultctl"), "check", path], capture_output=True,
                           text=True, env=env(d, None))
        out = p.stdout + p.stderr
        check("refused: %s" % out.strip()[:150],
              p.returncode != 0 and "%s:%d:" % (path, line) in out and words in out, out)


def main():
    reexec()
    d = tempfile.mkdtemp(prefix="fn-tlsf-")
    try:
        os.mkdir(os.path.join(d, "run"), 0o700)
        certs = certificates(d)
        for t in checks.selected([lambda: differential(d, certs), lambda: conditions(d, certs),
                                  lambda: sni_host(d, certs), lambda: policy_file(d),
                                  lambda: bad_keys(d)]):
            print("--- " + checks.name_of(t))
            t()
    finally:
        shutil.rmtree(d, ignore_errors=True)
    sys.exit(1 if checks.failed else 0)


if __name__ == "__main__":
    main()
