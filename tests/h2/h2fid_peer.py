"""h2fid_peer.py - the two ends of h2_fidelity.py's HTTP/2 conversations,
built on Debian's python3-h2 over plain sockets (prior knowledge), so that
every SETTINGS value, PING, WINDOW_UPDATE and header list is ours to choose
and to see. The server runs in h2_fidelity.py (never under the shim); the
client is this file run as a program (under the shim, or not):

usage: h2fid_peer.py HOST PORT CONVERSATION   (prints what the client saw, JSON)

Conversations: basics (odd header lists, trailers, small bodies, a server's
RST_STREAM after HEADERS and DATA, PINGs both ways, the server's SETTINGS), bulk (downloads and echoed uploads of 1 KiB,
1 MiB, 16 MiB and 64 MiB, all eight streams at once) and window (each side
holds back its WINDOW_UPDATEs for a second with a small initial window).
Only bytes and decoded frames are recorded: HPACK's encoding, DATA frame
boundaries and stream ids are a relay's own and are left out (streams are
known by their path)."""
import hashlib
import json
import random
import select
import socket
import sys
import time

import h2.config
import h2.connection
import h2.events
import h2.exceptions
from h2.settings import SettingCodes, Settings

SIZES = [1024, 1 << 20, 16 << 20, 64 << 20]
CLIENT_PING = b"h2fidCli"
SERVER_PING = b"h2fidSrv"
HOLD = 1.0  # how long a window is held shut, seconds

# The server's SETTINGS: values no library picks by itself, so that a relay
# sending its own would show. The window server's small INITIAL_WINDOW_SIZE
# makes the client wait for its WINDOW_UPDATEs.
SERVER_SETTINGS = {
    SettingCodes.HEADER_TABLE_SIZE: 1234,
    SettingCodes.MAX_CONCURRENT_STREAMS: 77,
    SettingCodes.INITIAL_WINDOW_SIZE: 1000003,
    SettingCodes.MAX_FRAME_SIZE: 20000,
    SettingCodes.MAX_HEADER_LIST_SIZE: 12345,
}
WINDOW_SERVER_SETTINGS = {**SERVER_SETTINGS, SettingCodes.INITIAL_WINDOW_SIZE: 3000}
SERVER_CONN_WINDOW = 7000001  # the server's WINDOW_UPDATE on stream 0
CLIENT_SETTINGS = {
    SettingCodes.HEADER_TABLE_SIZE: 3000,
    SettingCodes.ENABLE_PUSH: 0,
    SettingCodes.MAX_CONCURRENT_STREAMS: 33,
    SettingCodes.INITIAL_WINDOW_SIZE: 8000009,
    SettingCodes.MAX_FRAME_SIZE: 65000,
    SettingCodes.MAX_HEADER_LIST_SIZE: 54321,
}
WINDOW_CLIENT_SETTINGS = {**CLIENT_SETTINGS, SettingCodes.INITIAL_WINDOW_SIZE: 5000}
CLIENT_CONN_WINDOW = 16000013

# The odd response header list of /headers: names repeated apart, an empty
# value, a long one, cookies; kept in this order by a faithful relay.
ODD_HEADERS = [(":status", "203"), ("content-type", "text/plain"), ("x-b", "2"), ("x-a", "1"),
               ("x-b", "3"), ("set-cookie", "a=1"), ("set-cookie", "b=2"), ("x-empty", ""),
               ("x-long", "v" * 4000), ("cache-control", "no-store"), ("content-length", "2")]
TRAILERS = [("x-trailer-sum", "4f1c"), ("grpc-status", "0"), ("x-trailer-2", "b")]
TRAILER_BODY = b"a body before trailers\n" * 50


def body(n, salt=0):
    """n deterministic bytes (the same in every process)."""
    return random.Random(n * 7 + salt).randbytes(n)


def text(hdrs):
    return [[k.decode("latin-1"), v.decode("latin-1")] for k, v in hdrs]


def named(settings):
    out = {}
    for k, v in settings.items():
        try:
            out[SettingCodes(k).name] = v
        except ValueError:
            out[str(k)] = v
    return out


def effective(s):
    """The values of a h2 Settings object now in force, by name."""
    return {c.name: s[c] for c in SettingCodes if c in s}


class Out:
    """A body still to send on a stream: its bytes (grown by an echo), and
    whether the stream ends after them (with trailers or not)."""

    def __init__(self, data=b"", end=True, trailers=None):
        self.data = bytearray(data)
        self.end, self.trailers = end, trailers
        self.sent = 0
        self.reset = None  # (bytes sent first, RST_STREAM code)
        self.blocked_at = None  # (time, bytes sent) the window first stopped it
        self.first_update = None  # (time, bytes sent) of the first WINDOW_UPDATE after


class Loop:
    """One connection's non-blocking loop: DATA sent as the peer's windows
    allow, frames read and handed back as h2 events."""

    def __init__(self, sock, conn):
        sock.setblocking(False)
        self.sock, self.conn = sock, conn
        self.out = bytearray()
        self.sends = {}
        self.closed = False

    def flush(self):
        self.out += self.conn.data_to_send()

    def queue(self, sid, o):
        self.sends[sid] = o

    def pump(self):
        for sid, o in list(self.sends.items()):
            while o.data and len(self.out) < (1 << 20):
                try:
                    w = min(self.conn.local_flow_control_window(sid),
                            self.conn.max_outbound_frame_size, len(o.data))
                except (h2.exceptions.StreamClosedError, h2.exceptions.NoSuchStreamError):
                    del self.sends[sid]
                    break
                if o.reset:
                    w = min(w, o.reset[0] - o.sent)
                if o.reset and w <= 0:
                    break
                if w <= 0:
                    if o.blocked_at is None:
                        o.blocked_at = (time.monotonic(), o.sent)
                    break
                self.conn.send_data(sid, bytes(o.data[:w]))
                del o.data[:w]
                o.sent += w
                self.flush()
            if o.reset and o.sent >= o.reset[0] and sid in self.sends:
                self.conn.reset_stream(sid, o.reset[1])
                del self.sends[sid]
                continue
            if not o.data and o.end and sid in self.sends:
                if o.trailers:
                    self.conn.send_headers(sid, o.trailers, end_stream=True)
                else:
                    self.conn.end_stream(sid)
                del self.sends[sid]
        self.flush()

    def window_updated(self, ev):
        o = self.sends.get(ev.stream_id)
        if o is not None and o.first_update is None:
            o.first_update = (time.monotonic(), o.sent)

    def step(self, timeout=0.05):
        """Sends what it can, then reads: the events of what was read."""
        self.pump()
        r, w, _ = select.select([self.sock], [self.sock] if self.out else [], [], timeout)
        if w:
            try:
                n = self.sock.send(self.out[:1 << 20])
                del self.out[:n]
            except BlockingIOError:
                pass
            except OSError:
                self.closed = True
        if not r:
            return []
        try:
            d = self.sock.recv(1 << 20)
        except BlockingIOError:
            return []
        except OSError:
            d = b""
        if not d:
            self.closed = True
            return []
        evs = self.conn.receive_data(d)
        self.flush()
        return evs

    def drain(self, seconds=2.0):
        end = time.monotonic() + seconds
        while self.out and time.monotonic() < end and not self.closed:
            self.step(0.05)


def local(conn, values):
    """Makes values the connection's own SETTINGS, sent in its first SETTINGS
    frame (not a second one), and in force for what it reads."""
    conn.local_settings = Settings(client=conn.config.client_side, initial_values=values)
    mfs = values.get(SettingCodes.MAX_FRAME_SIZE)
    if mfs:
        conn.max_inbound_frame_size = mfs
        conn.incoming_buffer.max_frame_size = mfs
    if SettingCodes.MAX_HEADER_LIST_SIZE in values:
        conn.decoder.max_header_list_size = values[SettingCodes.MAX_HEADER_LIST_SIZE]


class Stream:
    """What one end saw of a stream."""

    def __init__(self):
        self.headers = None
        self.info = []  # 1xx heads
        self.trailers = None
        self.sha = hashlib.sha256()
        self.n = 0
        self.ended = False
        self.reset = None
        self.held = 0  # bytes received while the window is held
        self.hold_until = None

    def view(self):
        return {"headers": self.headers, "trailers": self.trailers,
                "body": [self.n, self.sha.hexdigest()], "ended": self.ended, "reset": self.reset}


# ---------------------------------------------------------------- server ----
def http1_head(sock):
    """An HTTP/1.1 request head read off sock: (request line, headers by
    lowercase name, bytes after it); None if the client sent the HTTP/2
    preface (or nothing) instead."""
    sock.settimeout(10)
    buf = b""
    while b"\r\n\r\n" not in buf:
        if buf.startswith(b"PRI * HTTP/2.0") or (len(buf) >= 3 and not buf[:1].isalpha()):
            return None, buf
        d = sock.recv(65536)
        if not d:
            return None, buf
        buf += d
        if buf.startswith(b"PRI "):
            return None, buf
    head, rest = buf.split(b"\r\n\r\n", 1)
    lines = head.decode("latin-1").split("\r\n")
    hdrs = {}
    for ln in lines[1:]:
        k, _, v = ln.partition(":")
        hdrs[k.strip().lower()] = v.strip()
    return (lines[0], hdrs, rest), buf


def serve(sock, settings, h2c=False, rule=True):
    """Serves one connection to its end; returns what the server saw. With
    h2c, a connection may open with an HTTP/1.1 request asking for
    `Upgrade: h2c` (answered 101, then served as stream 1), or with the
    HTTP/2 preface; an HTTP/1.1 request without the upgrade is answered in
    HTTP/1.1 (and seen as such by its client). rule: /inj/ streams are
    answered as the engine's rule answers them (a direct server's part);
    without, 421 "reached the server" (they should never have)."""
    conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=False,
                                                                header_encoding=None))
    local(conn, settings)
    streams, paths = {}, {}
    seen = {"client_settings": [], "pings": [], "ping_acks": [], "goaway": None,
            "error": None, "upgraded": False, "rule": rule}
    first, upgrade = b"", None
    if h2c:
        upgrade, first = http1_head(sock)
    if upgrade and "h2c" not in upgrade[1].get("upgrade", "").lower():
        path = upgrade[0].split(" ")[1]
        data = body(1 << 20, 5) if path.startswith(("/blob", "/fault")) else b""
        sock.sendall(b"HTTP/1.1 %d OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n"
                     % (200 if data else 404, len(data)) + data)
        seen["http1"] = upgrade[0]
        return seen
    if upgrade:
        sock.sendall(b"HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\n"
                     b"Upgrade: h2c\r\n\r\n")
        # Debian 12's curl (7.88.1) takes a 101 whose HTTP/2 preface comes
        # in the same read for the answer (status 101, no body): the
        # preface goes a moment later, so that the test's own play is sound.
        time.sleep(0.05)
        conn.initiate_upgrade_connection(upgrade[1].get("http2-settings", "").encode())
        seen["upgraded"] = True
        first = upgrade[2]
    else:
        conn.initiate_connection()
    if settings[SettingCodes.INITIAL_WINDOW_SIZE] > 65535:
        conn.increment_flow_control_window(SERVER_CONN_WINDOW)
    conn.ping(SERVER_PING)
    lp = Loop(sock, conn)
    lp.flush()
    if upgrade:
        path = upgrade[0].split(" ")[1]
        s = streams[1] = Stream()
        s.headers = [["http1", upgrade[0]]]
        paths[1], s.ended = path, True
        answer_head(conn, lp, 1, path, s)
        answer_end(conn, lp, 1, path, s)
        lp.flush()
    if first:
        for ev in conn.receive_data(first):
            serve_event(conn, lp, ev, streams, paths, seen)
    end = time.monotonic() + 300
    try:
        while not lp.closed and time.monotonic() < end:
            for ev in lp.step():
                serve_event(conn, lp, ev, streams, paths, seen)
            release_holds(conn, lp, streams)
    except h2.exceptions.ProtocolError as e:
        seen["error"] = "%s: %s" % (type(e).__name__, e)
    seen["streams"] = {paths[sid]: s.view() for sid, s in streams.items() if sid in paths}
    for sid, s in streams.items():
        o = getattr(s, "out", None)
        if o is not None and sid in paths:
            seen["streams"][paths[sid]]["window"] = window_view(o)
    seen["client_effective"] = effective(conn.remote_settings)
    return seen


def window_view(o):
    if o.blocked_at is None:
        return {"blocked": False, "sent": o.sent}
    w = {"blocked": True, "sent_when_blocked": o.blocked_at[1], "sent": o.sent}
    if o.first_update:
        w["waited"] = round(o.first_update[0] - o.blocked_at[0], 2)
    return w


def serve_event(conn, lp, ev, streams, paths, seen):
    E = h2.events
    if isinstance(ev, E.RemoteSettingsChanged):
        seen["client_settings"].append(named({k: v.new_value for k, v in ev.changed_settings.items()}))
    elif isinstance(ev, E.PingReceived):
        seen["pings"].append(ev.ping_data.hex())
    elif isinstance(ev, E.PingAckReceived):
        seen["ping_acks"].append(ev.ping_data.hex())
    elif isinstance(ev, E.ConnectionTerminated):
        seen["goaway"] = ev.error_code
    elif isinstance(ev, E.WindowUpdated):
        lp.window_updated(ev)
    elif isinstance(ev, E.RequestReceived):
        s = streams[ev.stream_id] = Stream()
        s.rule = seen["rule"]
        s.headers = text(ev.headers)
        path = dict(ev.headers).get(b":path", b"?").decode("latin-1")
        paths[ev.stream_id] = path
        answer_head(conn, lp, ev.stream_id, path, s)  # its end: the StreamEnded after
    elif isinstance(ev, E.DataReceived):
        s = streams[ev.stream_id]
        s.sha.update(ev.data)
        s.n += len(ev.data)
        path = paths[ev.stream_id]
        if path.startswith("/echo"):
            s.out.data += ev.data
        if path.startswith("/slowack") and s.hold_until != -1:
            s.held += ev.flow_controlled_length
            if s.hold_until is None and s.held >= 3000:
                s.hold_until = time.monotonic() + HOLD
        elif ev.flow_controlled_length:
            conn.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
    elif isinstance(ev, E.TrailersReceived):
        streams[ev.stream_id].trailers = text(ev.headers)
    elif isinstance(ev, E.StreamEnded):
        s = streams.get(ev.stream_id)
        if s:
            s.ended = True
            answer_end(conn, lp, ev.stream_id, paths[ev.stream_id], s)
    elif isinstance(ev, E.StreamReset):
        if ev.stream_id in streams:
            streams[ev.stream_id].reset = ev.error_code
        lp.sends.pop(ev.stream_id, None)
    lp.flush()


def release_holds(conn, lp, streams):
    """Opens a held window once its second is over: the stream's and the
    connection's, by what was read meanwhile, then acknowledges at once."""
    for sid, s in streams.items():
        if s.hold_until not in (None, -1) and time.monotonic() >= s.hold_until:
            s.hold_until = -1
            try:
                conn.increment_flow_control_window(s.held, sid)
            except h2.exceptions.StreamClosedError:
                pass
            conn.increment_flow_control_window(s.held)
            lp.flush()


def answer_head(conn, lp, sid, path, s):
    """Answers as soon as a request's head is read (bodies are echoed as
    they come)."""
    if path == "/headers":
        conn.send_headers(sid, ODD_HEADERS)
        s.out = Out(b"ok")
    elif path == "/trailers":
        conn.send_headers(sid, [(":status", "200"), ("content-type", "text/plain")])
        s.out = Out(TRAILER_BODY, trailers=TRAILERS)
    elif path.startswith(("/blob", "/fault")):
        data = body(1 << 20, 5)  # the real clients' file
        conn.send_headers(sid, [(":status", "200"), ("content-length", str(len(data))),
                                ("content-type", "application/octet-stream")])
        s.out = Out(data)
    elif path.startswith("/data/") or path.startswith("/blockdl/"):
        n = int(path.rsplit("/", 1)[1])
        data = body(n)
        conn.send_headers(sid, [(":status", "200"), ("content-length", str(n)),
                                ("content-type", "application/octet-stream"),
                                ("x-sha256", hashlib.sha256(data).hexdigest())])
        s.out = Out(data)
    elif path.startswith("/echo"):
        conn.send_headers(sid, [(":status", "200"), ("content-type", "application/octet-stream"),
                                ("x-echo", "1")])
        s.out = Out(end=False)
    elif path.startswith(("/slowack", "/g/", "/inj/")):
        s.out = None  # answered at the end
        return
    else:
        conn.send_headers(sid, [(":status", "404"), ("content-length", "0")], end_stream=True)
        s.out = None
        return
    lp.queue(sid, s.out)


def answer_end(conn, lp, sid, path, s):
    if path.startswith("/echo"):
        s.out.end = True
    elif path.startswith("/slowack"):
        conn.send_headers(sid, [(":status", "200"), ("content-length", "2")])
        s.out = Out(b"ok")
        lp.queue(sid, s.out)
    elif path.startswith("/inj/"):
        # what the engine's rule answers (conv.py's convention): a direct
        # server gives the same itself; the engine's should never see them
        if s.rule:
            conn.send_headers(sid, [(":status", "503"), ("content-length", "8")])
            s.out = Out(b"injected")
        else:
            conn.send_headers(sid, [(":status", "421"), ("content-length", "18")])
            s.out = Out(b"reached the server")
        lp.queue(sid, s.out)
    elif path.startswith("/g/"):
        s.out = generated_answer(conn, sid, path)
        lp.queue(sid, s.out)


# ------------------------------------------------ generated conversations ----
RST_CODES = [2, 7, 8, 11]
RESET_PATH = "/g/200/3/40000/0/8/0/0"  # INTERNAL_ERROR, REFUSED_STREAM, CANCEL, ENHANCE_YOUR_CALM


def generate(seed):
    """A conversation of 1 to 8 streams opened at once: (path, method, body
    or None); the path says how the server answers (status, how many extra
    headers, body size, trailers, a reset after half the body, a
    content-length) and /inj/ paths are the engine rule's."""
    rng = random.Random(seed)
    out = []
    for i in range(rng.randint(1, 8)):
        status = rng.choice([200, 200, 201, 204, 404, 500, 503])
        size = 0 if status == 204 else rng.choice([0, 1, 1000, 16384, 65536, 200000, 1 << 20])
        rst = rng.choice(RST_CODES) if rng.random() < 0.15 else -1
        path = "/%s/%d/%d/%d/%d/%d/%d/%d" % (
            "inj" if rng.random() < 0.15 else "g", status, rng.randint(0, 12), size,
            rng.random() < 0.3, rst, rst == -1 and rng.random() < 0.5, i)
        method = rng.choice(["GET", "GET", "POST", "PUT", "DELETE"])
        req = None
        if method in ("POST", "PUT"):
            req = body(rng.choice([0, 1, 100, 16384, 20000, 70000, 300000]), seed * 31 + i)
        out.append((path, method, req))
    return out


def generated_answer(conn, sid, path):
    _, _, status, nh, size, trl, rst, cl, _ = path.split("/")
    rng = random.Random(path)
    hdrs = [(":status", status)]
    for _ in range(int(nh)):
        hdrs.append(("x-g-%d" % rng.randint(0, 4),
                     "".join(rng.choice("abc xyz-=;,0123") for _ in range(rng.randint(0, 40)))))
    if cl == "1":
        hdrs.append(("content-length", size))
    conn.send_headers(sid, hdrs)
    o = Out(body(int(size), 9), trailers=[("x-t", "1"), ("x-t2", "two")] if trl == "1" else None)
    if rst != "-1":
        o.reset = (int(size) // 2, int(rst))
    return o


# ---------------------------------------------------------------- client ----
def requests_of(conv, port):
    """(path, method, body or None) of a conversation's streams."""
    if conv == "basics":
        # the last: HEADERS, 20000 bytes of DATA, then the server's
        # RST_STREAM (CANCEL)
        return [("/headers", "GET", None), ("/trailers", "GET", None),
                ("/data/1024", "GET", None), ("/echo/1024", "POST", body(1024, 1)),
                (RESET_PATH, "GET", None)]
    if conv == "bulk":
        return ([("/data/%d" % n, "GET", None) for n in SIZES] +
                [("/echo/%d" % n, "POST", body(n, 1)) for n in SIZES])
    if conv == "window":
        return [("/slowack", "POST", body(30000, 2)), ("/blockdl/50000", "GET", None)]
    if conv.startswith("gen:"):
        return generate(int(conv[4:]))
    raise SystemExit("no conversation %r" % conv)


def client(host, port, conv):
    sock = socket.create_connection((host, port), timeout=10)
    conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True,
                                                                header_encoding=None))
    local(conn, WINDOW_CLIENT_SETTINGS if conv == "window" else CLIENT_SETTINGS)
    conn.initiate_connection()
    conn.increment_flow_control_window(CLIENT_CONN_WINDOW)
    conn.ping(CLIENT_PING)
    lp = Loop(sock, conn)
    lp.flush()
    seen = {"settings_frames": [], "settings_at_first_response": None, "ping_acks": [],
            "pings": [], "goaway": None, "error": None, "streams": {}, "sent": {}}
    streams, paths, outs = {}, {}, {}
    t_settings = time.monotonic() + 5
    # The requests go out once the server's SETTINGS are known (as most
    # clients do after the preface), or after 5 s without them.
    reqs = requests_of(conv, port)
    started = False
    end = time.monotonic() + 240
    try:
        while not lp.closed and time.monotonic() < end:
            if not started and (seen["settings_frames"] or time.monotonic() > t_settings):
                started = True
                for path, method, b in reqs:
                    sid = conn.get_next_available_stream_id()
                    hdrs = [(":method", method), (":scheme", "http"), (":authority", "h2fid.test"),
                            (":path", path), ("user-agent", "h2fid/1"), ("x-order", "b"),
                            ("x-order", "a"), ("accept", "*/*")]
                    if b is not None:
                        hdrs.append(("content-length", str(len(b))))
                    conn.send_headers(sid, hdrs, end_stream=b is None)
                    streams[sid], paths[sid] = Stream(), path
                    if path == "/blockdl/50000":
                        streams[sid].hold_until = None
                    if b is not None:
                        outs[path] = Out(b)
                        lp.queue(sid, outs[path])
                        seen["sent"][path] = [len(b), hashlib.sha256(b).hexdigest()]
                lp.flush()
            for ev in lp.step():
                client_event(conn, lp, ev, streams, paths, seen)
            client_holds(conn, lp, streams)
            if (started and all(s.ended or s.reset is not None for s in streams.values())
                    and seen["ping_acks"] and seen["pings"]):
                break
    except h2.exceptions.ProtocolError as e:
        seen["error"] = "%s: %s" % (type(e).__name__, e)
    seen["streams"] = {paths[sid]: s.view() for sid, s in streams.items()}
    for path, o in outs.items():
        seen["streams"][path]["window"] = window_view(o)
    seen["effective"] = effective(conn.remote_settings)
    seen["conn_window"] = conn.outbound_flow_control_window
    seen["closed_by_server"] = lp.closed
    if not lp.closed:
        conn.close_connection()
        lp.flush()
        lp.drain()
    sock.close()
    return seen


def client_event(conn, lp, ev, streams, paths, seen):
    E = h2.events
    if isinstance(ev, E.RemoteSettingsChanged):
        seen["settings_frames"].append(named({k: v.new_value for k, v in ev.changed_settings.items()}))
    elif isinstance(ev, E.PingReceived):
        seen["pings"].append(ev.ping_data.hex())
    elif isinstance(ev, E.PingAckReceived):
        seen["ping_acks"].append(ev.ping_data.hex())
    elif isinstance(ev, E.ConnectionTerminated):
        seen["goaway"] = ev.error_code
        lp.closed = True
    elif isinstance(ev, E.WindowUpdated):
        lp.window_updated(ev)
    elif isinstance(ev, E.InformationalResponseReceived):
        streams[ev.stream_id].info.append(text(ev.headers))
    elif isinstance(ev, E.ResponseReceived):
        streams[ev.stream_id].headers = text(ev.headers)
        if seen["settings_at_first_response"] is None:
            seen["settings_at_first_response"] = effective(conn.remote_settings)
    elif isinstance(ev, E.DataReceived):
        s = streams[ev.stream_id]
        s.sha.update(ev.data)
        s.n += len(ev.data)
        if s.hold_until != -1 and paths[ev.stream_id].startswith("/blockdl"):
            s.held += ev.flow_controlled_length
            if s.hold_until is None and s.held >= 5000:
                s.hold_until = time.monotonic() + HOLD
        elif ev.flow_controlled_length:
            conn.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
    elif isinstance(ev, E.TrailersReceived):
        streams[ev.stream_id].trailers = text(ev.headers)
    elif isinstance(ev, E.StreamEnded):
        streams[ev.stream_id].ended = True
    elif isinstance(ev, E.StreamReset):
        streams[ev.stream_id].reset = ev.error_code
        lp.sends.pop(ev.stream_id, None)
    lp.flush()


def client_holds(conn, lp, streams):
    release_holds(conn, lp, streams)


if __name__ == "__main__":
    print(json.dumps(client(sys.argv[1], int(sys.argv[2]), sys.argv[3])), flush=True)
