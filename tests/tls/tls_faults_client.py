"""tls_faults_client.py - the app side of tls_faults.py: one TLS handshake
with Python's ssl (a default context trusting CAFILE alone), then a GET
when asked, printing one JSON line of what happened and how long it took.

usage: tls_faults_client.py SNI PORT CAFILE TIMEOUT [get] [byname] [twice]
  byname: connect to SNI's address (resolved), not 127.0.0.1; twice: two
  handshakes in this one process, a list of both results"""
import hashlib
import json
import re
import socket
import ssl
import sys
import time


def once(sni, port, cafile, timeout, opts):
    ctx = ssl.create_default_context(cafile=cafile)
    t = time.monotonic()
    res = {}
    try:
        raw = socket.create_connection((sni if "byname" in opts else "127.0.0.1", port),
                                       timeout=timeout)
        with ctx.wrap_socket(raw, server_hostname=sni) as s:
            res["issuer"] = dict(x[0] for x in s.getpeercert()["issuer"]).get("commonName")
            res["der"] = hashlib.sha256(s.getpeercert(True)).hexdigest()
            if "get" in opts:
                s.sendall(b"GET / HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n"
                          % sni.encode())
                res["status"] = int(s.recv(4096).split(b" ")[1])
    except Exception as e:  # noqa: BLE001 - the error is the result
        # The source line of CPython's _ssl.c is no part of the error.
        res["error"] = "%s: %s" % (type(e).__name__, re.sub(r" ?\(?_ssl\.c:\d+\)?:?", "", str(e)))
        res["verify"] = getattr(e, "verify_message", None)
    res["took"] = round(time.monotonic() - t, 2)
    return res


def main():
    sni, port, cafile, timeout = sys.argv[1], int(sys.argv[2]), sys.argv[3], float(sys.argv[4])
    opts = sys.argv[5:]
    if "twice" in opts:
        print(json.dumps({"results": [once(sni, port, cafile, timeout, opts) for _ in "12"]}))
    else:
        print(json.dumps(once(sni, port, cafile, timeout, opts)), flush=True)


if __name__ == "__main__":
    main()
