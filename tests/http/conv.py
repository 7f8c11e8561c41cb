"""conv.py - plays HTTP/1.x conversations twice in one process run under
the shim: directly (a port no rule covers) and through the HTTP engine (a
port an HTTP rule covers), with a scripted server of its own on both ports,
and prints what the client and the server each saw, as one JSON line per
conversation, for http_engine.py to compare.

The rule answers requests whose path starts with /inj (503, "injected");
on the direct port the scripted server gives those requests that very
answer itself and leaves them out of what it saw, so that the two plays
must agree byte for byte.

usage: conv.py HOST DIRECT_PORT ENGINE_PORT CASES_MODULE [NAME...]
CASES_MODULE (a file of tests/http) defines cases(): a list of
(name, client_steps, server_function)."""
import errno
import hashlib
import importlib
import json
import os
import socket
import sys
import threading
import time

INJ = b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 8\r\n\r\ninjected"
INJ_HEAD = INJ[:-len(b"injected")]  # the rule's answer to a HEAD
CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n"
END_WAIT = 3.0  # how long a side waits for the other's close


def no_hook(*_):
    """An on_head that does nothing (see Srv.request)."""


def shown(b):
    """Small byte strings as text, large ones by size and digest (up to
    $CONV_SHOW bytes as text, to look into a conversation that differs)."""
    if len(b) <= int(os.environ.get("CONV_SHOW", 600)):
        return b.decode("latin-1")
    return "%d bytes sha256 %s" % (len(b), hashlib.sha256(b).hexdigest()[:16])


class Srv:
    """The server's end of one connection, with a log of every byte it read
    (injected requests left out, see request())."""

    def __init__(self, sock):
        self.s = sock
        self.buf = bytearray()
        self.got = bytearray()
        self.end = None

    def fill(self, timeout=END_WAIT):
        self.s.settimeout(timeout)
        try:
            d = self.s.recv(1 << 20)
        except socket.timeout:
            self.end = "timeout"
            return False
        except OSError as e:
            self.end = "reset" if e.errno == errno.ECONNRESET else "error"
            return False
        if not d:
            self.end = "eof"
            return False
        self.buf += d
        self.got += d
        return True

    def take(self, n):
        while len(self.buf) < n:
            if not self.fill():
                return None
        out = bytes(self.buf[:n])
        del self.buf[:n]
        return out

    def line(self, sep=b"\r\n"):
        while sep not in self.buf:
            if not self.fill():
                return None
        i = self.buf.index(sep) + len(sep)
        out = bytes(self.buf[:i])
        del self.buf[:i]
        return out

    def request(self, answer_injected=True, on_head=None):
        """(method, path, raw bytes) of the next request, None at the end.
        Requests for /inj are answered here as the rule answers them;
        on_head(method, path, headers) is called for the others once their
        head is read, before their body (for 1xx and early answers)."""
        while True:
            start = len(self.got) - len(self.buf)
            if answer_injected and not on_head:
                on_head = no_hook  # /inj requests still get their 100 Continue
            try:
                got = self.one_request(on_head)
            except ValueError:
                # A body that cannot be read: a server ends the connection
                # there, and one for /inj never reached the server.
                if self.request_path(start).startswith("/inj") and answer_injected:
                    del self.got[start:]
                self.buf = bytearray()
                self.s.shutdown(socket.SHUT_WR)
                return None
            if got is None or got[2] is None:
                if got is not None and got[1].startswith("/inj") and answer_injected:
                    # The client ended inside a rule's request: none of it
                    # was the server's. A head it never finished reaches
                    # the server, as directly: no rule could decide on it.
                    del self.got[start:]
                return None
            if not got[1].startswith("/inj") or not answer_injected:
                return got
            del self.got[start:len(self.got) - len(self.buf)]
            self.s.sendall(INJ_HEAD if got[0] == "HEAD" else INJ)

    def request_path(self, start):
        line = bytes(self.got[start:start + 300]).split(b"\r\n")[0].split(b" ")
        return line[1].decode("latin-1") if len(line) > 1 else ""

    def one_request(self, on_head=None):
        """(method, path, raw) of the next request; raw None when the
        client ended inside it, None when it ended before one."""
        head = self.line(b"\r\n\r\n")
        if head is None:
            return None
        lines = head.decode("latin-1").split("\r\n")
        method, path = lines[0].split(" ")[:2]
        hdrs = {}
        for h in lines[1:]:
            if ":" in h:
                k, v = h.split(":", 1)
                hdrs[k.strip().lower()] = v.strip()
        if on_head and not path.startswith("/inj"):
            on_head(method, path, hdrs)
        elif on_head and hdrs.get("expect", "").lower() == "100-continue":
            self.s.sendall(CONTINUE)  # as the rule does for an /inj request
        raw = bytearray(head)  # grows by many chunks: not copied each time
        if hdrs.get("transfer-encoding", "").lower() == "chunked":
            while True:
                sz = self.line()
                if sz is None:
                    return method, path, None
                raw += sz
                n = int(sz.split(b";")[0], 16)
                part = self.take(n + 2) if n else self.trailers()
                if part is None:
                    return method, path, None
                raw += part
                if n == 0:
                    break
        elif hdrs.get("content-length"):
            body = self.take(int(hdrs["content-length"]))
            if body is None:
                return method, path, None
            raw += body
        return method, path, raw

    def trailers(self):
        """The trailer lines after a last chunk, up to the empty line."""
        out = b""
        while True:
            ln = self.line()
            if ln is None:
                return None
            out += ln
            if ln == b"\r\n":
                return out

    def send(self, b):
        self.s.sendall(b)

    def drain(self):
        """Reads to the client's close. Requests for /inj read here are
        left out of the log, though not answered: through the engine they
        never reach the server."""
        while self.end is None:
            start = len(self.got) - len(self.buf)
            try:
                got = self.one_request()
            except (ValueError, IndexError):
                got = False  # not a request: kept as it came
            if got and got[1].startswith("/inj"):
                del self.got[start:len(self.got) - len(self.buf) if got[2] is not None else None]
        while self.end is None:
            self.fill()

    def view(self):
        if not self.got and self.end == "eof":
            return None  # nothing reached the server: as no connection at all
        return {"got": shown(bytes(self.got)), "end": self.end}


class Server(threading.Thread):
    def __init__(self, host, port):
        super().__init__(daemon=True)
        self.ls = socket.socket()
        self.ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.ls.bind((host, port))
        self.ls.listen(16)
        self.script = None
        self.views = []

    def run(self):
        while True:
            c, _ = self.ls.accept()
            threading.Thread(target=self.serve, args=(c, self.script), daemon=True).start()

    def serve(self, c, script):
        srv = Srv(c)
        try:
            script(srv)
            srv.drain()
        except OSError as e:
            srv.end = srv.end or ("reset" if e.errno in (errno.ECONNRESET, errno.EPIPE)
                                  else "error")
        self.views.append(srv.view())
        c.close()


def client(host, port, steps):
    """Plays the client's steps while a thread reads everything the server
    sends; returns what it saw."""
    s = socket.create_connection((host, port), timeout=10)
    got = bytearray()
    seen = {"end": None, "t": None}
    t0 = time.monotonic()

    def reader():
        s.settimeout(END_WAIT + 2)
        while True:
            try:
                d = s.recv(1 << 20)
            except socket.timeout:
                seen["end"] = "timeout"
                break
            except OSError as e:
                seen["end"] = errno.errorcode.get(e.errno, str(e.errno))
                break
            if not d:
                seen["end"] = "eof"
                break
            got.extend(d)
        seen["t"] = time.monotonic() - t0

    r = threading.Thread(target=reader, daemon=True)
    r.start()
    out = {}
    for st in steps:
        try:
            if st[0] == "send":
                s.sendall(st[1])
            elif st[0] == "pause":
                time.sleep(st[1])
            elif st[0] == "shut":
                s.shutdown(socket.SHUT_WR)
                out["shut"] = "ok"
            elif st[0] == "wait_end":
                r.join(END_WAIT)
        except OSError as e:
            out[st[0]] = errno.errorcode.get(e.errno, str(e.errno))
            break
    r.join(END_WAIT + 3)
    s.close()
    out.update(got=shown(bytes(got)), end=seen["end"] or "timeout")
    # Whether the end came about at once (not at a timeout), for the
    # checks that say so; exact times differ between the two plays.
    out["prompt"] = seen["t"] is not None and seen["t"] < END_WAIT
    return out


def play(host, server, port, steps, script):
    server.script = script
    server.views = []
    view = client(host, port, steps)
    deadline = time.monotonic() + END_WAIT + 2
    while not server.views and time.monotonic() < deadline:
        time.sleep(0.02)
    time.sleep(0.05)
    return {"client": view, "server": server.views[0] if server.views else None}


def main():
    host, dport, eport, mod = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    want = set(sys.argv[5:])
    cases = importlib.import_module(mod).cases()
    direct, engine = Server(host, dport), Server(host, eport)
    direct.start()
    engine.start()
    for name, steps, script in cases:
        if want and name not in want:
            continue
        d = play(host, direct, dport, steps, script)
        e = play(host, engine, eport, steps, script)
        print(json.dumps({"name": name, "direct": d, "engine": e}), flush=True)


if __name__ == "__main__":
    main()
