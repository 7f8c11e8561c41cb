"""client.py - the app side of the HTTP fault tests, run under the shim:
one scenario per call, its result as one JSON line on stdout.

usage: client.py SCENARIO HOST PORT [ARG...]
Raw-socket scenarios speak HTTP/1.1 byte by byte, so that keep-alive,
pipelining, chunked bodies, HEAD and 100-continue are exactly what is sent;
the others use http.client and requests, real clients."""
import errno
import hashlib
import http.client
import json
import select
import socket
import sys
import time


class Conn:
    """One keep-alive connection, read response by response."""

    def __init__(self, host, port, timeout=10):
        self.s = socket.create_connection((host, port), timeout=timeout)
        self.f = self.s.makefile("rb")

    def send(self, data):
        self.s.sendall(data)

    def response(self, head=False):
        """(status, headers, body, raw bytes) of the next response."""
        raw = self.f.readline()
        if not raw:
            return None
        status = int(raw.split()[1])
        hdrs = {}
        while True:
            line = self.f.readline()
            raw += line
            if line in (b"\r\n", b""):
                break
            k, v = line.decode().split(":", 1)
            hdrs[k.strip().lower()] = v.strip()
        body = b""
        if status // 100 == 1 or head:
            pass
        elif hdrs.get("transfer-encoding", "").lower() == "chunked":
            while True:
                line = self.f.readline()
                raw += line
                n = int(line.split(b";")[0], 16)
                chunk = self.f.read(n + 2)
                raw += chunk
                if n == 0:
                    break
                body += chunk[:-2]
        else:
            body = self.f.read(int(hdrs.get("content-length", "0")))
            raw += body
        return status, hdrs, body, raw


def get(path, host="origin", extra=b""):
    return b"GET %s HTTP/1.1\r\nHost: %s\r\n%s\r\n" % (path.encode(), host.encode(), extra)


def digest(b):
    return hashlib.sha256(b).hexdigest()


def keepalive(host, port, n):
    """n GETs one after the other on one connection."""
    c = Conn(host, port)
    out = []
    for i in range(int(n)):
        path = "/k/%d%s" % (i, "/chunked" if i % 5 == 4 else "")
        c.send(get(path))
        st, h, body, _ = c.response()
        out.append([path, st, digest(body), h.get("x-faultnet", "")])
    return out


def pipelined(host, port, n):
    """n requests written at once (GETs and chunked POSTs), then read."""
    c = Conn(host, port)
    reqs, paths = b"", []
    for i in range(int(n)):
        path = "/p/%d" % i
        paths.append(path)
        if i % 4 == 1:
            data = b"x" * (1000 + i)
            reqs += (b"POST %s HTTP/1.1\r\nHost: origin\r\nTransfer-Encoding: chunked\r\n\r\n"
                     b"%x\r\n%s\r\n0\r\n\r\n" % (path.encode(), len(data), data))
        else:
            reqs += get(path)
    c.send(reqs)
    out = []
    for path in paths:
        st, h, body, _ = c.response()
        out.append([path, st, digest(body), h.get("x-request-sha256", "")])
    return out


def head_then_get(host, port, path):
    c = Conn(host, port)
    c.send(b"HEAD %s HTTP/1.1\r\nHost: origin\r\n\r\n" % path.encode())
    st, h, body, _ = c.response(head=True)
    c.send(get("/after-head"))
    st2, _, body2, _ = c.response()
    return [st, h.get("content-length"), st2, digest(body2)]


def expect_continue(host, port, path):
    """A POST that waits for 100 Continue before its body, then a GET."""
    c = Conn(host, port)
    data = b"y" * 5000
    c.send(b"POST %s HTTP/1.1\r\nHost: origin\r\nContent-Length: %d\r\nExpect: 100-continue\r\n\r\n"
           % (path.encode(), len(data)))
    first = c.response()
    c.send(data)
    final = c.response()
    c.send(get("/after-expect"))
    after = c.response()
    return [first[0], final[0], final[1].get("x-request-sha256", ""), after[0], digest(after[2])]


def close_answer(host, port, path):
    """The answer says Connection: close; then the connection ends."""
    c = Conn(host, port)
    c.send(get(path))
    st, h, _, _ = c.response()
    rest = c.f.read()
    return [st, h.get("connection", ""), len(rest)]


def server_closes(host, port):
    """The client asks the server to close after its answer."""
    c = Conn(host, port)
    c.send(get("/closing", extra=b"Connection: close\r\n"))
    st, _, body, _ = c.response()
    return [st, digest(body), len(c.f.read())]


def many(host, port, n):
    """n GETs on one connection: statuses only (no server needed)."""
    c = Conn(host, port)
    out = []
    for i in range(int(n)):
        c.send(get("/svc/%d" % i))
        out.append(c.response()[0])
    return out


def named(host, port, n):
    """n GETs on one connection to host, a name the app resolves, with
    Host: that name: statuses only (no server needed)."""
    c = Conn(host, port)
    out = []
    for i in range(int(n)):
        c.send(get("/n/%d" % i, host))
        out.append(c.response()[0])
    return out


def raw_error(host, port, path):
    """What the app meets on its read after a request: an answer, EOF or an
    error."""
    c = Conn(host, port)
    c.send(get(path))
    try:
        data = c.s.recv(65536)
        return ["data", len(data)] if data else ["eof"]
    except OSError as e:
        return ["error", e.__class__.__name__]


def connect_outcome(host, port):
    """How a blocking and a non-blocking connect end: "connected", or the
    exception's name and the errno's."""
    port, out = int(port), []
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(10)
    try:
        s.connect((host, port))
        out.append("connected")
    except OSError as e:
        out.append(e.__class__.__name__)
    s.close()
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setblocking(False)
    err = s.connect_ex((host, port))
    if err == errno.EINPROGRESS:
        select.select([], [s], [], 10)
        err = s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
    out.append(errno.errorcode.get(err, str(err)) if err else "connected")
    s.close()
    return out


def truncated(host, port, path):
    conn = http.client.HTTPConnection(host, int(port), timeout=10)
    conn.request("GET", path)
    r = conn.getresponse()
    try:
        r.read()
        return ["whole"]
    except http.client.IncompleteRead as e:
        return ["incomplete", len(e.partial), e.expected]


def timed(host, port, path, timeout):
    """requests with a read timeout: the status and seconds, or the error."""
    import requests
    t = time.monotonic()
    try:
        r = requests.get("http://%s:%s%s" % (host, port, path), timeout=float(timeout))
        return ["ok", r.status_code, time.monotonic() - t]
    except requests.exceptions.ReadTimeout:
        return ["ReadTimeout", 0, time.monotonic() - t]


def not_http(host, port):
    """TLS-looking bytes: relayed untouched to an echo server."""
    s = socket.create_connection((host, int(port)), timeout=5)
    data = b"\x16\x03\x01\x02\x00" + bytes(range(256)) * 4
    s.sendall(data)
    got = b""
    while len(got) < len(data):
        part = s.recv(65536)
        if not part:
            break
        got += part
    return [got == data, len(got)]


def speaks_first(host, port):
    """A server that speaks first (an SMTP-like greeting): the greeting,
    then the answer to a command, as without the shim."""
    s = socket.create_connection((host, int(port)), timeout=5)
    f = s.makefile("rb")
    try:
        greeting = f.readline()
        s.sendall(b"NOOP\r\n")
        return [greeting.decode(), f.readline().decode()]
    except OSError as e:
        return ["error", type(e).__name__]


def urgent_line(host, port):
    """After the greeting, a line whose last byte is urgent (MSG_OOB), as
    ftplib sends ABOR: a server reading urgent data in line answers it."""
    s = socket.create_connection((host, int(port)), timeout=5)
    f = s.makefile("rb")
    try:
        f.readline()
        s.sendall(b"ABOR\r\n", socket.MSG_OOB)
        return [f.readline().decode()]
    except OSError as e:
        return ["error", type(e).__name__]


def cut_head(host, port):
    """One byte that could start a request ("G"), then the app's FIN: an
    echo server reads it and ends too."""
    s = socket.create_connection((host, int(port)), timeout=5)
    s.sendall(b"G")
    s.shutdown(socket.SHUT_WR)
    got = b""
    try:
        while True:
            part = s.recv(100)
            if not part:
                return [got.decode(), "eof"]
            got += part
    except OSError as e:
        return [got.decode(), type(e).__name__]


def write_after_close(host, port, what=b"foo\n"):
    """A server that accepts and closes: the app's first write goes, the
    server's reset comes back, the next write fails (EPIPE)."""
    import select
    s = socket.create_connection((host, int(port)), timeout=5)
    time.sleep(0.2)
    out = []
    for _ in range(2):
        try:
            s.send(what)
            out.append("sent")
        except OSError as e:
            out.append(type(e).__name__)
        time.sleep(0.2)
        p = select.poll()
        p.register(s, select.POLLIN | select.POLLOUT)
        out.append(bool(p.poll(0)[0][1] & select.POLLERR))
    return out


def request_after_close(host, port):
    """The same with requests a rule would answer: they are the server's
    after its FIN, as directly, never answered or dropped."""
    return write_after_close(host, port, b"GET /x HTTP/1.1\r\nHost: a\r\n\r\n")


def bad_request(host, port):
    """A request line the parser rejects, then more bytes: all relayed."""
    s = socket.create_connection((host, int(port)), timeout=5)
    data = b"GET / HTTP/1.1\r\nHost: x\r\nBad Header\r\n\r\nmore bytes"
    s.sendall(data)
    got = b""
    while len(got) < len(data):
        part = s.recv(65536)
        if not part:
            break
        got += part
    return [got == data]


def window(host, port, seconds):
    """GETs on fresh connections for a while: (time, status) pairs, the
    time counted from the process's start, where the shim's rule windows
    start too (counted from the first GET, a slow start in the ASan build
    moved the window's end 0.2 s early)."""
    import requests
    from procstart import since_start
    out, t0 = [], time.monotonic() - since_start()
    while time.monotonic() - t0 < float(seconds):
        r = requests.get("http://%s:%s/w" % (host, port), timeout=5)
        out.append([round(time.monotonic() - t0, 3), r.status_code])
        time.sleep(0.05)
    return out


def live(host, port):
    """One keep-alive connection: a request, then (once the test has
    changed the rules and says so on stdin) another on the same one."""
    c = Conn(host, port)
    c.send(get("/live/1"))
    first = c.response()[0]
    print("first", flush=True)
    sys.stdin.readline()
    c.send(get("/live/2"))
    return [first, c.response()[0]]


if __name__ == "__main__":
    fn = globals()[sys.argv[1]]
    print(json.dumps(fn(*sys.argv[2:])), flush=True)
