"""h2fid_tls.py - HTTP/2 over TLS (ALPN h2) through the HTTPS termination:
nghttpd serving a file with a certificate from a test CA that the system
store trusts (a bundle bind-mounted over Debian's, in a private mount and
network namespace, h2fid.test in a bind-mounted /etc/hosts), and real
clients under `faultctl run`: curl --http2, Node's http2 module (which
trusts the test CA through its own NODE_EXTRA_CA_CERTS, as a user sets it)
and Java's HttpClient (version HTTP_2; the test CA added to a copy of
Java's store, bind-mounted over /etc/ssl/certs/java/cacerts).
Each: the same status, body sha256 and protocol (h2) directly and through
faultnet under a rule that takes no request, and under `respond
status=503` on /fault*: 503 over h2 for that path, alone and after a
forwarded request on one connection. Root.

usage: h2fid_tls.py BUILD_DIR"""
import hashlib
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)
import checks  # noqa: E402
from checks import check  # noqa: E402
import h2fid_peer as peer  # noqa: E402

BUILD = os.path.abspath(sys.argv[1])
CTL = os.path.join(BUILD, "faultctl")
BUNDLE = "/etc/ssl/certs/ca-certificates.crt"
HOST, NAME, PORT = "127.84.3.1", "h2fid.test", 18245
BLOB = peer.body(1 << 20, 5)
BLOB_SHA = hashlib.sha256(BLOB).hexdigest()
CA_VARS = ("SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE",
           "NODE_EXTRA_CA_CERTS")
D = []  # the run's folder
JAVA_CACERTS = "/etc/ssl/certs/java/cacerts"


def reexec():
    """Into a private mount and network namespace, once."""
    if os.environ.get("FN_H2FID_NS") == "1":
        return
    env = dict(os.environ, FN_H2FID_NS="1")
    cmd = ["unshare", "-m", "-n", "sh", "-c", 'ip link set lo up && exec "$@"', "-",
           "/usr/bin/python3", "-u"] + sys.argv
    sys.exit(subprocess.run(cmd, env=env).returncode)


def openssl(*args):
    subprocess.run(["openssl"] + list(args), check=True, capture_output=True)


def make_certs(d):
    ca_key, ca = os.path.join(d, "ca.key"), os.path.join(d, "ca.pem")
    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
            "-keyout", ca_key, "-out", ca, "-days", "2", "-subj", "/CN=h2fid test CA",
            "-addext", "basicConstraints=critical,CA:TRUE",
            "-addext", "keyUsage=critical,keyCertSign")
    key, csr, pem, ext = (os.path.join(d, "leaf" + s) for s in (".key", ".csr", ".pem", ".ext"))
    with open(ext, "w") as f:
        f.write("subjectAltName=DNS:%s\nextendedKeyUsage=serverAuth\n" % NAME)
    openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
            "-keyout", key, "-out", csr, "-subj", "/CN=" + NAME)
    openssl("x509", "-req", "-in", csr, "-CA", ca, "-CAkey", ca_key, "-CAcreateserial",
            "-out", pem, "-days", "2", "-extfile", ext)
    return ca, key, pem


def policy(name, path):
    f = os.path.join(D[0], name + ".conf")
    with open(f, "w") as fh:
        fh.write('rules = ( { name = "h2tls"; action = "respond"; status = 503; body = "injected"; '
                 'match = { to = "%s/32"; port = %d; path = "%s"; }; } );\n' % (HOST, PORT, path))
    return f


def run(cmd, conf, extra=None):
    e = {k: v for k, v in os.environ.items() if not k.startswith("FAULTNET_") and k not in CA_VARS}
    e.update(FAULTNET_RUNDIR=os.path.join(D[0], "run"), ASAN_OPTIONS="detect_leaks=0")
    e.update(extra or {})
    if conf:
        cmd = [CTL, "run", "--config", conf, "--"] + cmd
    return subprocess.run(cmd, env=e, capture_output=True, text=True, timeout=90)


def curl(paths, conf):
    outs = [os.path.join(D[0], "curl%d.out" % i) for i in range(len(paths))]
    args = []
    for o, p in zip(outs, paths):
        if os.path.exists(o):
            os.unlink(o)
        args += ["-o", o, "https://%s:%d%s" % (NAME, PORT, p)]
    p = run(["curl", "-s", "--http2", "--max-time", "30", "-w",
             "%{http_code} %{http_version}\\n"] + args, conf)
    res = []
    for o, ln in zip(outs, p.stdout.splitlines()):
        status, version = ln.split()
        data = open(o, "rb").read() if os.path.exists(o) else b""
        res.append({"status": int(status), "version": version,
                    "sha": hashlib.sha256(data).hexdigest()})
    return res or [{"error": "curl exit %d: %s" % (p.returncode, p.stderr[-300:])}]


def node(paths, conf):
    n = checks.node_bin(os.path.dirname(HERE))
    p = run([n, os.path.join(HERE, "h2fid_node.js"), "https://%s:%d" % (NAME, PORT)] + paths,
            conf, {"NODE_EXTRA_CA_CERTS": os.path.join(D[0], "ca.pem")})
    res = []
    for ln in p.stdout.splitlines():
        try:
            r = json.loads(ln)
        except ValueError:
            continue
        if r.get("status") is not None:
            r["status"] = int(r["status"])
        r["version"] = "2" if r.get("alpn") == "h2" else r.get("alpn")
        res.append(r)
    return res or [{"error": "node exit %d: %s" % (p.returncode, p.stderr[-300:])}]


def java(paths, conf):
    p = run(["java", "-cp", os.path.join(D[0], "java"), "H2fidClient"] +
            ["https://%s:%d%s" % (NAME, PORT, x) for x in paths], conf)
    res = []
    for ln in p.stdout.splitlines():
        try:
            res.append(json.loads(ln))
        except ValueError:
            pass
    return res or [{"error": "java exit %d: %s" % (p.returncode, p.stderr[-300:])}]


def real(name, get):
    quiet, fault = policy("quiet", "/h2fid-never-used*"), policy("fault", "/fault*")
    key = lambda r: (r.get("status"), r.get("version"), r.get("sha"))  # noqa: E731
    d, f = get(["/blob.bin"], None)[0], get(["/blob.bin"], quiet)[0]
    check("%s directly: 200 over h2 (ALPN), the file whole (the test's own)" % name,
          key(d) == (200, "2", BLOB_SHA), d)
    check("%s through faultnet (TLS terminated): the same status, body (sha256) and h2" % name,
          key(f) == key(d), "direct %s, faultnet %s" % (d, f))
    f = get(["/fault.bin"], fault)[0]
    check("%s under `respond status=503` on /fault*: /fault.bin is 503 over h2" % name,
          (f.get("status"), f.get("version")) == (503, "2"), f)
    d = get(["/blob.bin", "/fault.bin"], None)
    if [key(r) for r in d] != [(200, "2", BLOB_SHA)] * 2:
        print("  skip - %s, two requests on one connection: the client fails it directly: %s"
              % (name, d))
        checks.skip()
        return
    f = get(["/blob.bin", "/fault.bin"], fault)
    got = [key(f[0])] + [key(r)[:2] for r in f[1:2]]
    check("%s under the same rule, one connection: /blob.bin forwarded whole, then /fault.bin "
          "503, both over h2" % name, got == [(200, "2", BLOB_SHA), (503, "2")], f)


def test_curl_tls():
    real("curl --http2 https:// (nghttpd)", curl)


def test_node_tls():
    if not checks.node_bin(os.path.dirname(HERE)):
        print("  skip - Node's http2 client over TLS: no Node.js 20 or later")
        checks.skip()
        return
    real("Node http2 client https:// (nghttpd)", node)


def test_java_tls():
    j = os.path.join(D[0], "java")
    os.makedirs(j, exist_ok=True)
    p = subprocess.run(["javac", "-d", j, os.path.join(HERE, "H2fidClient.java")],
                       capture_output=True, text=True, timeout=120)
    if p.returncode:
        check("javac H2fidClient.java", False, p.stderr[-400:])
        return
    store = os.path.join(D[0], "cacerts")
    shutil.copy(JAVA_CACERTS, store)
    p = subprocess.run(["keytool", "-importcert", "-noprompt", "-keystore", store, "-storepass",
                        "changeit", "-alias", "h2fid-test-ca", "-file",
                        os.path.join(D[0], "ca.pem")], capture_output=True, text=True)
    if p.returncode:
        check("keytool adds the test CA to a copy of Java's store", False, p.stderr[-400:])
        return
    subprocess.run(["mount", "--bind", store, JAVA_CACERTS], check=True)
    real("Java HttpClient HTTP_2 https:// (nghttpd)", java)


def main():
    reexec()
    d = tempfile.mkdtemp(prefix="fn-h2tls-")
    D.append(d)
    ng = None
    try:
        os.mkdir(os.path.join(d, "run"), 0o700)
        ca, key, pem = make_certs(d)
        with open(BUNDLE, "rb") as f, open(os.path.join(d, "bundle"), "wb") as g, \
                open(ca, "rb") as c:
            g.write(f.read() + c.read())
        with open(os.path.join(d, "hosts"), "w") as f:
            f.write("127.0.0.1 localhost\n%s %s\n" % (HOST, NAME))
        subprocess.run(["mount", "--bind", os.path.join(d, "bundle"), BUNDLE], check=True)
        subprocess.run(["mount", "--bind", os.path.join(d, "hosts"), "/etc/hosts"], check=True)
        www = os.path.join(d, "www")
        os.mkdir(www)
        for n in ("blob.bin", "fault.bin"):
            with open(os.path.join(www, n), "wb") as f:
                f.write(BLOB)
        ng = subprocess.Popen(["nghttpd", "--address=" + HOST, "-d", www, str(PORT), key, pem],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for _ in range(100):
            try:
                socket.create_connection((HOST, PORT), timeout=1).close()
                break
            except OSError:
                time.sleep(0.05)
        for t in checks.selected([test_curl_tls, test_node_tls, test_java_tls]):
            print("  -- %s" % t.__name__)
            t()
    finally:
        if ng:
            ng.terminate()
            ng.wait()
        shutil.rmtree(d, ignore_errors=True)
    sys.exit(1 if checks.failed else 0)


if __name__ == "__main__":
    main()
