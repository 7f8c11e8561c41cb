"""https_client.py - the app side of https.py, run under the shim with no
CA variable: Python's own clients with their default trust (the system
store), printing one JSON line of what they got.

usage: https_client.py urllib|requests URL [CAFILE]  (requests: verify=CAFILE)
       https_client.py private CAFILE HOST PORT...   (one context trusting CAFILE
                                                     alone, a request to each port)
       https_client.py keepalive HOST PORT PATH...   (one connection)
       https_client.py post HOST PORT SIZE...        (bodies posted, one connection;
                                                     a size with a c: chunked)
       https_client.py fork HOST PORT               (a request before, in and
                                                     after a fork child)
       https_client.py ctypes                        (the hook called through ctypes)
       https_client.py issuer HOST PORT [ALPN,...]   (the peer's certificate)"""
import hashlib
import http.client
import json
import socket
import ssl
import sys
import urllib.error
import urllib.request


def out(v):
    print(json.dumps(v), flush=True)


def fetch_urllib(url):
    try:
        with urllib.request.urlopen(url, timeout=20) as r:
            out({"status": r.status, "body": r.read().decode(errors="replace")})
    except urllib.error.HTTPError as e:
        out({"status": e.code, "body": e.read().decode(errors="replace")})
    except Exception as e:  # noqa: BLE001 - the error is the result
        out({"error": "%s: %s" % (type(e).__name__, e)})


def fetch_requests(url, cafile=None):
    import requests
    try:
        r = requests.get(url, timeout=20, verify=cafile or True)
        out({"status": r.status_code, "body": r.text})
    except Exception as e:  # noqa: BLE001
        out({"error": "%s: %s" % (type(e).__name__, e)})


def keepalive(host, port, paths):
    c = http.client.HTTPSConnection(host, int(port), timeout=60,
                                    context=ssl.create_default_context())
    res = []
    try:
        for p in paths:
            c.request("GET", p)
            r = c.getresponse()
            body = r.read()
            res.append([r.status, len(body), hashlib.sha256(body).hexdigest()])
        out({"results": res})
    except Exception as e:  # noqa: BLE001
        out({"results": res, "error": "%s: %s" % (type(e).__name__, e)})


def post(host, port, sizes):
    """Each body's sha256 as sent and as the server says it received it."""
    c = http.client.HTTPSConnection(host, int(port), timeout=60,
                                    context=ssl.create_default_context())
    res = []
    try:
        for s in sizes:
            n = int(s.rstrip("c"))
            b = bytes(range(256)) * (n // 256) + bytes(n % 256)
            if s.endswith("c"):
                c.request("POST", "/", body=iter([b[i:i + 65536] for i in range(0, n, 65536)]),
                          encode_chunked=True)
            else:
                c.request("POST", "/", body=b)
            r = c.getresponse()
            res.append([r.status, r.read().decode() == hashlib.sha256(b).hexdigest()])
        out({"results": res})
    except Exception as e:  # noqa: BLE001
        out({"results": res, "error": "%s: %s" % (type(e).__name__, e)})


def private(cafile, host, ports):
    """One SSL context (one X509_STORE) trusting cafile alone, used for a
    request to each port in turn: what each got, or its error."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.load_verify_locations(cafile)
    res = []
    for p in ports:
        c = http.client.HTTPSConnection(host, int(p), timeout=20, context=ctx)
        try:
            c.request("GET", "/10")
            r = c.getresponse()
            res.append([r.status, r.read().decode(errors="replace")])
        except Exception as e:  # noqa: BLE001
            res.append("%s: %s" % (type(e).__name__, e))
        c.close()
    out({"results": res})


def forked(host, port):
    """One connection kept across a fork; the child makes its own."""
    import os
    ctx = ssl.create_default_context()
    c = http.client.HTTPSConnection(host, int(port), timeout=20, context=ctx)

    def get(conn):
        conn.request("GET", "/10")
        r = conn.getresponse()
        return [r.status, r.read().decode(errors="replace")]
    try:
        res = [get(c)]
        pid = os.fork()
        if pid == 0:
            try:
                k = http.client.HTTPSConnection(host, int(port), timeout=20, context=ctx)
                os._exit(0 if get(k) == [503, "injected"] else 3)
            except Exception:  # noqa: BLE001
                os._exit(4)
        res.append(get(c))
        res.append(os.waitpid(pid, 0)[1] >> 8)
        out({"results": res})
    except Exception as e:  # noqa: BLE001
        out({"error": "%s: %s" % (type(e).__name__, e)})


def through_ctypes():
    """X509_verify_cert found in the global scope (the shim's hook:
    libcrypto itself was loaded locally, by _ssl) and called from libffi,
    which does not depend on libcrypto: it must still reach the real one,
    which verifies a root against a store holding it (1)."""
    import ctypes
    crypto = ctypes.CDLL("libcrypto.so.3")
    for f in (crypto.X509_STORE_CTX_new, crypto.X509_STORE_new, crypto.BIO_new_mem_buf,
              crypto.PEM_read_bio_X509):
        f.restype = ctypes.c_void_p
    crypto.BIO_new_mem_buf.argtypes = [ctypes.c_char_p, ctypes.c_int]
    crypto.PEM_read_bio_X509.argtypes = [ctypes.c_void_p] * 4
    crypto.X509_STORE_add_cert.argtypes = [ctypes.c_void_p] * 2
    crypto.X509_STORE_CTX_init.argtypes = [ctypes.c_void_p] * 4
    with open("/etc/ssl/certs/ca-certificates.crt", "rb") as f:
        pem = f.read().split(b"-----END CERTIFICATE-----")[0] + b"-----END CERTIFICATE-----\n"
    root = crypto.PEM_read_bio_X509(crypto.BIO_new_mem_buf(pem, len(pem)), None, None, None)
    ctx, store = crypto.X509_STORE_CTX_new(), crypto.X509_STORE_new()
    crypto.X509_STORE_add_cert(store, root)
    crypto.X509_STORE_CTX_init(ctx, store, root, None)
    try:
        verify = ctypes.CDLL(None).X509_verify_cert
    except AttributeError:
        out({"error": "no X509_verify_cert in the global scope"})
        return
    verify.argtypes = [ctypes.c_void_p]
    out({"returned": verify(ctx)})


def hostcheck(cafile, host, port):
    """GET /10 from host:port trusting cafile, without and with the host
    name checked: [status or error kind, status or error kind]."""
    import http.client
    res = []
    for check_hostname in (False, True):
        ctx = ssl.create_default_context(cafile=cafile)
        ctx.check_hostname = check_hostname
        c = http.client.HTTPSConnection(host, int(port), context=ctx, timeout=20)
        try:
            c.request("GET", "/10")
            res.append(c.getresponse().status)
        except Exception as e:  # noqa: BLE001
            res.append("%s: %s" % (type(e).__name__, e))
        finally:
            c.close()
    out({"results": res})


def peercert(host, port):
    """The server's certificate as the app reads it, and its DER's digest."""
    import hashlib
    ctx = ssl.create_default_context()
    try:
        with socket.create_connection((host, int(port)), timeout=20) as s:
            with ctx.wrap_socket(s, server_hostname=host) as t:
                out({"cert": t.getpeercert(),
                     "der": hashlib.sha256(t.getpeercert(True)).hexdigest()})
    except Exception as e:  # noqa: BLE001
        out({"error": "%s: %s" % (type(e).__name__, e)})


def issuer(host, port, alpn=None):
    ctx = ssl.create_default_context()
    if alpn:
        ctx.set_alpn_protocols(alpn.split(","))
    try:
        with socket.create_connection((host, int(port)), timeout=20) as s:
            with ctx.wrap_socket(s, server_hostname=host) as t:
                cert = t.getpeercert()
                names = [v for rdn in cert["issuer"] for k, v in rdn if k == "commonName"]
                out({"issuer": names[0] if names else "",
                     "der": hashlib.sha256(t.getpeercert(True)).hexdigest(),
                     "alpn": t.selected_alpn_protocol()})
    except Exception as e:  # noqa: BLE001
        out({"error": "%s: %s" % (type(e).__name__, e)})


if __name__ == "__main__":
    mode = sys.argv[1]
    if mode == "urllib":
        fetch_urllib(sys.argv[2])
    elif mode == "requests":
        fetch_requests(*sys.argv[2:4])
    elif mode == "private":
        private(sys.argv[2], sys.argv[3], sys.argv[4:])
    elif mode == "post":
        post(sys.argv[2], sys.argv[3], sys.argv[4:])
    elif mode == "fork":
        forked(sys.argv[2], sys.argv[3])
    elif mode == "ctypes":
        through_ctypes()
    elif mode == "peercert":
        peercert(*sys.argv[2:4])
    elif mode == "hostcheck":
        hostcheck(*sys.argv[2:5])
    elif mode == "keepalive":
        keepalive(sys.argv[2], sys.argv[3], sys.argv[4:])
    else:
        issuer(*sys.argv[2:5])
