"""conv_cases.py - the named conversations of conv.py: each is a case
where the HTTP engine once differed from a real network (a defect of
issue 38), as (name, client steps, server script)."""
import socket


def get(path, extra=b""):
    return b"GET %s HTTP/1.1\r\nHost: origin\r\n%s\r\n" % (path.encode(), extra)


def post(path, n):
    return b"POST %s HTTP/1.1\r\nHost: origin\r\nContent-Length: %d\r\n\r\n" % (path.encode(), n)


def ok(body=b"ok", extra=b""):
    return b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n%s\r\n%s" % (len(body), extra, body)


def big_body(n):
    return (b"0123456789abcdef" * (n // 16 + 1))[:n]


def fin_after_request(srv):
    srv.request()
    srv.s.shutdown(socket.SHUT_WR)


def cut_length(srv):
    srv.request()
    srv.send(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nabc")
    srv.s.close()


def cut_chunked(srv):
    srv.request()
    srv.send(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n10\r\n0123")
    srv.s.close()


def answer_all(srv):
    while srv.request():
        srv.send(ok())


def answer_big(n):
    def script(srv):
        while srv.request():
            srv.send(ok(big_body(n)))
    return script


def early_401(srv):
    """Answers a POST once its head is read, then reads its body and the
    requests after it, as a server that refuses an upload does."""
    head = srv.line(b"\r\n\r\n")
    srv.send(b"HTTP/1.1 401 Unauthorized\r\nContent-Length: 0\r\n\r\n")
    n = int(head.split(b"Content-Length: ")[1].split(b"\r\n")[0])
    srv.take(n)
    answer_all(srv)


def bad_chunked(path):
    return (b"POST %s HTTP/1.1\r\nHost: origin\r\nTransfer-Encoding: chunked\r\n\r\n"
            b"5\r\nhello\r\nzz\r\n" % path.encode())


def bad_first(bad):
    """Answers the first request with an answer the engine's parser
    rejects, and the others well."""
    def script(srv):
        first = True
        while True:
            r = srv.request()
            if not r:
                return
            srv.send(bad if first else ok(r[1].encode()))
            first = False
    return script


BOTH_LENGTHS = (b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n"
                b"5\r\nhello\r\n0\r\n\r\n")
HUGE_HEADER = b"HTTP/1.1 200 OK\r\nX-Big: " + b"a" * 200000 + b"\r\nContent-Length: 2\r\n\r\nok"
HEAD_BODY = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello"


def cases():
    body = b"z" * 100000
    return [
        ("fin-after-request", [("send", get("/a")), ("wait_end",), ("shut",)], fin_after_request),
        ("fin-after-request-then-injected",
         [("send", get("/a") + get("/inj")), ("wait_end",), ("shut",)], fin_after_request),
        ("server-cuts-length-body", [("send", get("/a"))], cut_length),
        ("server-cuts-chunked-body", [("send", get("/a"))], cut_chunked),
        ("half-close-mid-injected-request",
         [("send", post("/inj", 100) + b"0123456789"), ("pause", 0.2), ("shut",)], answer_all),
        ("half-close-mid-injected-request-after-answers",
         [("send", get("/a") + get("/inj") + post("/inj", 100) + b"01234"), ("pause", 0.2),
          ("shut",)], answer_all),
        ("bad-body-of-injected-request", [("send", bad_chunked("/inj")), ("wait_end",)],
         answer_all),
        ("bad-body-of-injected-request-after-answers",
         [("send", get("/a") + get("/inj") + bad_chunked("/inj")), ("wait_end",)], answer_all),
        ("unframeable-answer-both-lengths-then-injected",
         [("send", get("/a") + get("/inj") + get("/b")), ("pause", 0.3), ("shut",)],
         bad_first(BOTH_LENGTHS)),
        ("unframeable-answer-200KB-header-then-injected",
         [("send", get("/a") + get("/inj") + get("/b")), ("pause", 0.3), ("shut",)],
         bad_first(HUGE_HEADER)),
        ("unframeable-answer-HEAD-with-body-then-injected",
         [("send", b"HEAD /a HTTP/1.1\r\nHost: origin\r\n\r\n" + get("/inj") + get("/b")),
          ("pause", 0.3), ("shut",)], bad_first(HEAD_BODY)),
        ("answer-9MB", [("send", get("/big")), ("shut",)],
         answer_big(9 * 1000 * 1000)),
        ("answer-32MB", [("send", get("/big")), ("shut",)],
         answer_big(32 * 1000 * 1000)),
        ("early-401-then-next-request",
         [("send", post("/up", len(body)) + body[:30000]), ("pause", 0.3),
          ("send", body[30000:] + get("/second")), ("pause", 0.3), ("shut",)], early_401),
    ]
