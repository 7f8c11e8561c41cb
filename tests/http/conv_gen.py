"""conv_gen.py - generated HTTP/1.x conversations for conv.py, one per seed:
sequential or pipelined requests whose bodies are framed by Content-Length,
chunked (with extensions and trailers) or not at all; answers framed by
Content-Length, chunked, the server's close, or with no body (HEAD, 204,
304); sizes from 0 to 64 MiB (big ones rare); early answers before a
request's body is all in; 100 Continue and 103; the client's half-close
inside a request; the server's FIN or reset (SO_LINGER 0) before, inside
or after an answer; malformed framing on either side; and a random subset
of requests for /inj, which the engine's rule answers.

A seed gives the same conversation every time (random.Random(seed)), so a
conversation that differs is replayed by naming its seed. cases() gives
conv.py the seeds listed in $CONV_GEN_SEEDS (comma-separated)."""
import fcntl
import os
import random
import socket
import struct
import termios
import time

PATTERN = bytes(range(251)) * 4  # a prime period: a lost or moved byte shows
MiB = 1 << 20
END_KINDS = ("no-answer", "mid-head", "mid-body", "after-answer")


def body(n, seed):
    k = seed % 251
    reps = (n + k) // len(PATTERN) + 1
    return (PATTERN * reps)[k:k + n]


def size(rng, big_ok=True):
    """0, small, middling or big, the big ones rare."""
    r = rng.random()
    if r < 0.15:
        return 0
    if r < 0.6:
        return rng.randint(1, 2000)
    if r < 0.86 or not big_ok:
        return rng.randint(2001, 300000)
    if r < 0.965:
        return rng.randint(300001, 4 * MiB)
    if r < 0.99:
        return rng.randint(4 * MiB, 16 * MiB)
    return rng.randint(16 * MiB, 64 * MiB)


def size_shape(n):
    if n == 0:
        return "size 0"
    if n <= 64 * 1024:
        return "size 1 B-64 KiB"
    if n <= 4 * MiB:
        return "size 64 KiB-4 MiB"
    return "size 4-64 MiB"


def chunked(rng, data, shapes, side):
    """data in chunks of random sizes, some with extensions, and maybe
    trailers after the last one."""
    out, i = [], 0
    most = max(1, len(data) // rng.randint(1, 8)) if len(data) < MiB else rng.randint(4096, MiB)
    while i < len(data):
        n = min(len(data) - i, rng.randint(1, most))
        ext = b""
        if rng.random() < 0.2:
            ext = b";ext=%d" % n
            shapes.add(side + " chunk extension")
        out.append(b"%x%s\r\n%s\r\n" % (n, ext, data[i:i + n]))
        i += n
    out.append(b"0\r\n")
    if rng.random() < 0.25:
        out.append(b"X-Trailer: t\r\nX-Sum: %d\r\n" % len(data))
        shapes.add(side + " trailers")
    out.append(b"\r\n")
    return b"".join(out)


def request(rng, i, seed, shapes, last):
    """One request as a dict: its bytes, where its head ends, and what
    the server's plan needs to know of it."""
    inj = rng.random() < 0.3
    path = "/inj%d" % i if inj else "/r%d" % i
    method = rng.choice(["GET", "GET", "HEAD", "POST", "POST", "PUT"])
    framing = "none"
    if method in ("POST", "PUT"):
        framing = rng.choice(["length", "length", "chunked", "none"])
    elif method == "GET" and rng.random() < 0.05:
        framing = "length"
    hdrs = b"Host: origin\r\n"
    bad = None
    r = rng.random()
    if r < 0.03:
        bad = "both lengths"
        framing = "chunked"
    elif r < 0.05 and last:
        bad = "bad chunk size"
        framing = "chunked"
    elif r < 0.07:
        bad = "oversized header"
        hdrs += b"X-Big: " + b"h" * rng.randint(70000, 200000) + b"\r\n"
    n = size(rng) if framing != "none" else 0
    data = body(n, seed + i)
    expect = framing != "none" and rng.random() < 0.15
    if expect:
        hdrs += b"Expect: 100-continue\r\n"
    if framing == "length":
        hdrs += b"Content-Length: %d\r\n" % n
        payload = data
    elif framing == "chunked":
        hdrs += b"Transfer-Encoding: chunked\r\n"
        if bad == "both lengths":
            hdrs += b"Content-Length: %d\r\n" % n
        payload = chunked(rng, data, shapes, "request")
        if bad == "bad chunk size":
            payload = b"5\r\nhello\r\nzz\r\n" + payload
    else:
        payload = b""
    head = b"%s %s HTTP/1.1\r\n%s\r\n" % (method.encode(), path.encode(), hdrs)
    shapes.add("request body " + framing)
    if framing != "none":
        shapes.add(size_shape(n))
    if bad:
        shapes.add("malformed request: " + bad)
    if inj:
        shapes.add("injected request")
    return {"path": path, "method": method, "inj": inj, "head": head, "payload": payload,
            "expect": expect, "bad": bad, "has_body": framing != "none" and n > 0}


def answer(rng, req, seed, shapes, may_close, small):
    """The server's answer to one forwarded request: its bytes, whether the
    server closes after it, and the 1xx and early answer before it."""
    a = {"early": None, "hints": rng.random() < 0.1, "close": False, "bad": None}
    n = size(rng, big_ok=not small) if not small else rng.randint(0, 32768)
    data = body(n, seed * 7 + len(req["path"]))
    if req["method"] == "HEAD":
        kind = "HEAD"
        extra = b""
        if rng.random() < 0.04:
            a["bad"] = "HEAD answer with a body"
            extra = data
        a["bytes"] = b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (n, extra)
    else:
        kinds = ["length", "length", "chunked", "chunked", "204", "304"]
        if may_close:
            kinds += ["close"]
        kind = rng.choice(kinds)
        if kind == "length":
            a["bytes"] = b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (n, data)
        elif kind == "chunked":
            a["bytes"] = (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" +
                          chunked(rng, data, shapes, "answer"))
        elif kind == "close":
            a["bytes"] = b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n" + data
            a["close"] = True
        elif kind == "204":
            a["bytes"] = b"HTTP/1.1 204 No Content\r\n\r\n"
        else:
            a["bytes"] = b"HTTP/1.1 304 Not Modified\r\nContent-Length: %d\r\n\r\n" % n
        r = rng.random()
        if r < 0.03:
            a["bad"] = "both lengths"
            a["bytes"] = (b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n"
                          b"Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n")
        elif r < 0.05:
            a["bad"] = "bad chunk size"
            a["bytes"] = (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                          b"zz\r\nhello\r\n0\r\n\r\n")
        elif r < 0.07:
            a["bad"] = "oversized header"
            a["bytes"] = (b"HTTP/1.1 200 OK\r\nX-Big: " + b"a" * 200000 +
                          b"\r\nContent-Length: 2\r\n\r\nok")
        if not a["bad"] and kind in ("length", "chunked", "close"):
            shapes.add("answer " + size_shape(n))
    if a["bad"]:
        kind = "malformed"
        shapes.add("malformed answer: " + a["bad"])
        a["close"] = False
    a["kind"] = kind
    a["head_len"] = a["bytes"].index(b"\r\n\r\n") + 4
    shapes.add("answer body " + kind)
    if req["has_body"] and rng.random() < 0.12:
        a["early"] = rng.choice([b"HTTP/1.1 401 Unauthorized\r\nContent-Length: 0\r\n\r\n",
                                 b"HTTP/1.1 413 Content Too Large\r\nContent-Length: 4\r\n\r\nbig!"])
        shapes.add("early answer")
    if a["hints"]:
        shapes.add("103 Early Hints")
    if req["expect"] and not a["early"]:
        shapes.add("100 Continue")
    return a


def ending(rng, reqs, shapes):
    """How the conversation ends: the client's half-close after its last
    request or inside it, or the server's FIN or reset at its last
    forwarded request (before, inside or after its answer)."""
    fwd = [i for i, q in enumerate(reqs) if not q["inj"]]
    if reqs and reqs[-1]["bad"] == "bad chunk size":
        shapes.add("the server ends at a malformed request body")
        return {"who": "server-parser"}
    r = rng.random()
    if fwd and r < 0.4:
        kind = "reset" if rng.random() < 0.3 else "FIN"
        where = rng.choice(END_KINDS)
        if kind == "reset":
            del reqs[fwd[-1] + 1:]  # nothing the client sends after a reset
        shapes.add("server %s, %s" % (kind, where))
        return {"who": "server", "kind": kind, "where": where, "at": reqs[fwd[-1]]["path"]}
    if reqs and r < 0.6:
        q = reqs[-1]
        whole = len(q["head"]) + len(q["payload"])
        # Not inside the request line: whether a path is one the rule
        # takes is known once it is whole.
        cut = rng.randint(q["head"].index(b"\r\n") + 2, whole - 1)
        shapes.add("client half-close inside a request's " +
                   ("head" if cut < len(q["head"]) else "body"))
        return {"who": "client-cut", "cut": cut}
    shapes.add("client half-close after its requests")
    return {"who": "client"}


def client_steps(rng, reqs, plans, end, shapes):
    """The client's sends, pipelined (all at once, in a few pieces) or
    sequential (one request, a pause for its answer, the next)."""
    wires = [q["head"] + q["payload"] for q in reqs]
    if end["who"] == "client-cut":
        wires[-1] = wires[-1][:end["cut"]]
    steps = []
    if rng.random() < 0.5 or len(reqs) < 2:
        shapes.add("pipelined" if len(reqs) > 1 else "one request")
        data = b"".join(wires)
        cuts = sorted(rng.sample(range(1, len(data)), min(2, len(data) - 1))) if len(data) > 2 else []
        at = 0
        for c in cuts + [len(data)]:
            steps += [("send", data[at:c]), ("pause", rng.choice([0, 0.02, 0.05]))]
            at = c
    else:
        shapes.add("sequential")
        for q, w in zip(reqs, wires):
            plan = plans.get(q["path"])
            slow = q["expect"] or (plan and plan["early"])
            if slow and len(w) > len(q["head"]):
                # The body only after a pause: a 100 or an early answer
                # comes first, as it would to a client that waits.
                steps += [("send", w[:len(q["head"])]), ("pause", 0.1), ("send", w[len(q["head"]):])]
            else:
                steps.append(("send", w))
            steps.append(("pause", 0.05))
    if end["who"] in ("server", "server-parser"):
        steps.append(("wait_end",))
    elif end["who"] == "client-cut":
        steps.append(("pause", 0.1))
    steps.append(("shut",))
    return steps


def generate(seed):
    """(name, client steps, server script, shapes, bytes) of one seed."""
    rng = random.Random(seed)
    shapes = set()
    n = rng.choice([1, 1, 2, 2, 3, 3, 4, 5]) if rng.random() < 0.97 else 0
    reqs = []
    for i in range(n):
        reqs.append(request(rng, i, seed, shapes, i == n - 1))
        if reqs[-1]["bad"] == "bad chunk size":
            break
    end = ending(rng, reqs, shapes)
    fwd = [q for q in reqs if not q["inj"]]
    plans = {}
    for q in fwd:
        last = q is fwd[-1]
        small = end["who"] == "server" and end["kind"] == "reset" and last
        plans[q["path"]] = answer(rng, q, seed, shapes, last and end["who"] != "server", small)
    if end["who"] == "server":
        p = plans[end["at"]]
        p["early"] = None
        if end["where"] == "mid-body" and len(p["bytes"]) == p["head_len"]:
            # No body to end inside: a close after it would race with the
            # next requests (see server_end), so inside the head instead.
            shapes.discard("server %s, mid-body" % end["kind"])
            end["where"] = "mid-head"
            shapes.add("server %s, mid-head" % end["kind"])
    if not reqs:
        shapes.add("no request")
    steps = client_steps(rng, reqs, plans, end, shapes)
    defect_shapes(reqs, plans, end, shapes)
    total = sum(len(q["payload"]) for q in reqs) + sum(len(p["bytes"]) for p in plans.values())
    return "seed-%d" % seed, steps, server_script(plans, end), shapes, total


def defect_shapes(reqs, plans, end, shapes):
    """The shapes of issue 38's defects of the engine, counted apart (they
    draw nothing from the seed's generator, so seeds keep their meaning)."""
    paths = [q["path"] for q in reqs]
    for q in reqs:
        p = plans.get(q["path"])
        later = reqs[paths.index(q["path"]) + 1:]
        if p and p["kind"] in ("length", "chunked", "close") and len(p["bytes"]) > 8 * MiB:
            shapes.add("answer over 8 MiB")
        if p and p["early"] and any(not r["inj"] for r in later):
            shapes.add("early answer, then another request")
        if p and p["bad"] and any(r["inj"] for r in later):
            shapes.add("malformed answer, then an injected request")
            inj = [i for i, r in enumerate(later) if r["inj"]][0]
            if any(not r["inj"] for r in later[inj:]):
                shapes.add("malformed answer, then an injected and a forwarded request")
        if q["inj"] and q["bad"] == "bad chunk size":
            shapes.add("malformed body of an injected request")
    if end["who"] == "client-cut" and reqs[-1]["inj"]:
        shapes.add("client half-close inside an injected request")
        if end["cut"] > len(reqs[-1]["head"]):
            shapes.add("client half-close inside an injected request's body")


def server_script(plans, end):
    """The scripted server: each forwarded request is answered by its plan
    (1xx and early answers once its head is in), and the server ends as
    the conversation's ending says."""
    def on_head(srv, method, path, hdrs):
        p = plans[path]
        if p["early"]:
            srv.send(p["early"])
        elif "expect" in hdrs:
            srv.send(b"HTTP/1.1 100 Continue\r\n\r\n")

    def script(srv):
        while True:
            r = srv.request(on_head=lambda m, p, h: on_head(srv, m, p, h))
            if not r:
                return
            p = plans[r[1]]
            if end["who"] == "server" and r[1] == end["at"]:
                return server_end(srv, p, end)
            if p["early"]:
                continue
            if p["hints"]:
                srv.send(b"HTTP/1.1 103 Early Hints\r\nLink: </s.css>; rel=preload\r\n\r\n")
            srv.send(p["bytes"])
            if p["close"]:
                srv.s.shutdown(socket.SHUT_WR)
                return
    return script


def server_end(srv, plan, end):
    """The server's FIN or reset before, inside or after its last answer."""
    a = plan["bytes"]
    if end["where"] == "after-answer":
        # Said in the answer, as a server that closes after it does: a
        # bare close after a whole answer races with the next requests,
        # which the engine may answer first.
        i = a.index(b"\r\n") + 2
        a = a[:i] + b"Connection: close\r\n" + a[i:]
    cut = {"no-answer": 0, "mid-head": plan["head_len"] // 2,
           "mid-body": plan["head_len"] + (len(a) - plan["head_len"]) // 2,
           "after-answer": len(a)}[end["where"]]
    if cut:
        srv.send(a[:cut])
    if end["kind"] == "FIN":
        srv.s.shutdown(socket.SHUT_WR)
        return
    # What the server read past this request is lost with the reset: its
    # log keeps only what it took, as what came after is timing. What it
    # sent is let arrive first (acknowledged), or the reset would discard
    # part of it at random.
    del srv.got[len(srv.got) - len(srv.buf):]
    deadline = time.monotonic() + 2
    while unsent(srv.s) and time.monotonic() < deadline:
        time.sleep(0.005)
    srv.buf = bytearray()
    srv.s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    srv.s.close()
    srv.end = "reset sent"


def unsent(s):
    """Bytes in a socket's send queue not yet acknowledged (SIOCOUTQ)."""
    return struct.unpack("i", fcntl.ioctl(s.fileno(), termios.TIOCOUTQ, b"\0" * 4))[0]


def cases():
    seeds = [int(s) for s in os.environ.get("CONV_GEN_SEEDS", "").split(",") if s]
    return [generate(s)[:3] for s in seeds]
