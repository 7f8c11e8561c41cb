"""origin.py - the real server the HTTP fault tests put faultnet in front
of: HTTP/1.1 with keep-alive, pipelining, chunked request and response
bodies, HEAD and 100-continue, and a log of every request it saw.

As a module: Origin(port).start(); .requests is the log. As a program:
origin.py PORT runs one until killed (for the client tests in other
languages). Its answers are deterministic, so that a client can check them
byte for byte: body(path) below."""
import hashlib
import http.server
import socketserver
import sys
import threading


def body(path, size=None):
    """The body the origin sends for path: 'chunked' paths answer in chunks;
    '/big' paths with 200 KiB; others with a few hundred bytes."""
    n = size if size is not None else (200 * 1024 if path.startswith("/big") else 300)
    seed = hashlib.sha256(path.encode()).digest()
    return (seed * (n // len(seed) + 1))[:n]


def digest_of(b):
    return hashlib.sha256(b).hexdigest()


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def read_body(self):
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            data = b""
            while True:
                size = int(self.rfile.readline().split(b";")[0], 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return data
                data += self.rfile.read(size)
                self.rfile.readline()
        n = int(self.headers.get("Content-Length", "0"))
        return self.rfile.read(n) if n else b""

    def answer(self, head=False):
        got = self.read_body()
        self.server.requests.append((self.command, self.path, hashlib.sha256(got).hexdigest()))
        data = body(self.path.split("?")[0])
        self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("X-Request-Sha256", hashlib.sha256(got).hexdigest())
        if "chunked" in self.path:
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            if not head:
                for i in range(0, len(data), 97):
                    part = data[i:i + 97]
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(part), part))
                self.wfile.write(b"0\r\n\r\n")
        else:
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            if not head:
                self.wfile.write(data)

    def do_GET(self):
        self.answer()

    def do_POST(self):
        self.answer()

    def do_PUT(self):
        self.answer()

    def do_HEAD(self):
        self.answer(head=True)


class Origin(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, port, host="127.0.0.1"):
        super().__init__((host, port), Handler)
        self.requests = []

    def handle_error(self, request, client_address):
        pass  # a client that resets (abort tests) is not an error here

    def start(self):
        threading.Thread(target=self.serve_forever, daemon=True).start()
        return self


if __name__ == "__main__":
    o = Origin(int(sys.argv[1]))
    print("ready", flush=True)
    o.serve_forever()
