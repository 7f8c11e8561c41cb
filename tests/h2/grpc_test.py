"""grpc_test.py - issue 40's gRPC acceptance, differential: each case runs
the same client twice, once against a real server that does the fault
itself (the reference) and once against a healthy real server under
faultnet with the rule, and compares what the client met: the status code,
the attempts made (the reference server's calls; the rule's streams under
faultnet), the elapsed class (immediate, or at the call's deadline), and
faultnet's own counts. Clients: Python grpcio (grpc_client.py) and Node.js
@grpc/grpc-js (grpc_client.js, pinned in tests/conformance/package.json),
generic calls on raw bytes. The references are grpcio servers (abort,
initial metadata then abort, sleep) and, for RST_STREAM and GOAWAY, which
grpcio's server cannot be made to send, a raw HTTP/2 server on Debian's
python3-h2 that answers gRPC unary calls itself. Also: a server-streaming
call, a client's cancel reaching the server, and a keepalive ping flood
answered by the server's own GOAWAY ENHANCE_YOUR_CALM, each through
faultnet as directly. Clear text (prior knowledge). Runs itself in a new
network namespace (loopback only).

usage: grpc_test.py BUILD_DIR"""
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from concurrent import futures

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.dirname(HERE))
import checks  # noqa: E402
from checks import check  # noqa: E402

PY = "/usr/bin/python3"
BUILD = os.path.abspath(sys.argv[1]) if len(sys.argv) > 1 else ""
CTL = os.path.join(BUILD, "faultctl")
MODULES = os.path.join(ROOT, "tests/conformance/node_modules")
SVC = "faultnet.test.Echo"
ADDR = "127.0.0.1"
TMP = tempfile.mkdtemp(prefix="fn-grpc-")
DEADLINE = 1.5  # the slow case's call deadline (s); the rule holds 3 s
CA_VARS = ("SSL_CERT_FILE", "SSL_CERT_DIR", "NODE_EXTRA_CA_CERTS", "GRPC_DEFAULT_SSL_ROOTS_FILE_PATH")


def reexec():
    """Into a private network namespace (loopback only), once."""
    if os.environ.get("FN_H2_NS") == "1":
        return
    env = dict(os.environ, FN_H2_NS="1")
    cmd = ["unshare", "-n", "sh", "-c", 'ip link set lo up && exec "$@"', "-", PY, "-u"] + sys.argv
    sys.exit(subprocess.run(cmd, env=env).returncode)


# ---- the servers -----------------------------------------------------------
class GrpcServer:
    """A grpcio server of the service faultnet.test.Echo (Unary echoes its
    bytes, Stream sends N messages "m0".."mN-1", Sleep answers after the
    seconds its message says),
    doing one behaviour: "ok", "unavail_first" (aborts UNAVAILABLE, with a
    pushback of 50 ms, on its first two calls), "headers_then_unavail"
    (sends its initial metadata, then aborts: a committed call),
    "exhausted" (RESOURCE_EXHAUSTED) or "sleep" (answers after 3 s). Counts
    the calls its handlers saw, those that completed, and those the client
    cancelled."""

    def __init__(self, port, behaviour="ok"):
        import grpc
        self.grpc, self.behaviour, self.port = grpc, behaviour, port
        self.lock = threading.Lock()
        self.reset()
        h = grpc.method_handlers_generic_handler(SVC, {
            "Unary": grpc.unary_unary_rpc_method_handler(self.unary),
            "Sleep": grpc.unary_unary_rpc_method_handler(self.sleep),
            "Stream": grpc.unary_stream_rpc_method_handler(self.stream)})
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=16))
        self.server.add_generic_rpc_handlers((h,))
        self.server.add_insecure_port("%s:%d" % (ADDR, port))
        self.server.start()

    def reset(self):
        self.calls = self.completed = self.cancelled = 0

    def fault(self, context):
        """The behaviour's fault for this call, if any (aborts raise)."""
        with self.lock:
            self.calls += 1
            n = self.calls
        code = self.grpc.StatusCode
        if self.behaviour == "unavail_first" and n <= 2:
            context.set_trailing_metadata((("grpc-retry-pushback-ms", "50"),))
            context.abort(code.UNAVAILABLE, "try later")
        if self.behaviour == "headers_then_unavail":
            context.send_initial_metadata(())
            context.abort(code.UNAVAILABLE, "try later")
        if self.behaviour == "exhausted":
            context.abort(code.RESOURCE_EXHAUSTED, "quota")
        if self.behaviour == "sleep":
            time.sleep(3)

    def note_end(self, context):
        """Counts the call cancelled when it ends before its handler did."""
        state = {"done": False}

        def ended():
            if not state["done"]:
                with self.lock:
                    self.cancelled += 1
        context.add_callback(ended)
        return state

    def unary(self, req, context):
        self.fault(context)
        with self.lock:
            self.completed += 1
        return req

    def sleep(self, req, context):
        self.fault(context)
        time.sleep(float(req))
        with self.lock:
            self.completed += 1
        return req

    def stream(self, req, context):
        state = self.note_end(context)
        self.fault(context)
        n = int(req or b"5")
        for i in range(n):
            if n > 20:
                time.sleep(0.02)  # a long stream, for the cancel
            yield b"m%d" % i
        state["done"] = True
        with self.lock:
            self.completed += 1

    def stop(self):
        self.server.stop(0)


class RawH2Server:
    """A gRPC server written on hyper-h2 (python3-h2), for the faults grpcio's
    server cannot send: "refuse_first" answers the first stream it ever
    sees with RST_STREAM REFUSED_STREAM, "goaway_first" answers it with
    GOAWAY NO_ERROR whose last-stream-id is below it, then closes the
    connection. Every other stream is a unary call answered with its own
    message (5-byte length prefix, bytes) and grpc-status 0. Counts the
    streams seen and the calls answered."""

    def __init__(self, port, mode):
        self.mode, self.streams, self.answered = mode, 0, 0
        self.lock = threading.Lock()
        self.ls = socket.create_server((ADDR, port))
        threading.Thread(target=self.accept, daemon=True).start()

    def reset(self):
        self.streams = self.answered = 0

    def accept(self):
        while True:
            try:
                c, _ = self.ls.accept()
            except OSError:
                return
            threading.Thread(target=self.serve, args=(c,), daemon=True).start()

    def serve(self, c):
        import h2.config
        import h2.connection
        import h2.errors
        import h2.events
        conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=False))
        conn.initiate_connection()
        c.sendall(conn.data_to_send())
        bodies = {}
        try:
            while True:
                data = c.recv(65536)
                if not data:
                    break
                for ev in conn.receive_data(data):
                    if isinstance(ev, h2.events.RequestReceived):
                        with self.lock:
                            self.streams += 1
                            first = self.streams == 1
                        if first and self.mode == "refuse_first":
                            conn.reset_stream(ev.stream_id, h2.errors.ErrorCodes.REFUSED_STREAM)
                        elif first and self.mode == "goaway_first":
                            conn.close_connection(h2.errors.ErrorCodes.NO_ERROR,
                                                  last_stream_id=max(ev.stream_id - 2, 0))
                            c.sendall(conn.data_to_send())
                            time.sleep(0.1)
                            return
                        else:
                            bodies[ev.stream_id] = b""
                    elif isinstance(ev, h2.events.DataReceived):
                        conn.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
                        if ev.stream_id in bodies:
                            bodies[ev.stream_id] += ev.data
                    elif isinstance(ev, h2.events.StreamEnded) and ev.stream_id in bodies:
                        msg = bodies.pop(ev.stream_id)[5:]
                        conn.send_headers(ev.stream_id, [(":status", "200"),
                                                         ("content-type", "application/grpc")])
                        conn.send_data(ev.stream_id, b"\0" + len(msg).to_bytes(4, "big") + msg)
                        conn.send_headers(ev.stream_id, [("grpc-status", "0")], end_stream=True)
                        with self.lock:
                            self.answered += 1
                    c.sendall(conn.data_to_send())
        except (OSError, h2.exceptions.ProtocolError):
            pass
        finally:
            c.close()

    def stop(self):
        self.ls.close()


# ---- the clients -----------------------------------------------------------
def clean_env():
    e = {k: v for k, v in os.environ.items()
         if not k.startswith("FAULTNET_") and k not in CA_VARS and k != "LD_PRELOAD"}
    e.update(FAULTNET_RUNDIR=os.path.join(TMP, "run"), ASAN_OPTIONS="detect_leaks=0",
             GRPC_VERBOSITY="NONE")
    return e


def client_cmd(lang, spec):
    if lang == "python":
        return [PY, os.path.join(HERE, "grpc_client.py"), json.dumps(spec)]
    return [NODE, os.path.join(HERE, "grpc_client.js"), MODULES, json.dumps(spec)]


def run_client(lang, spec, conf=None):
    """The client's outcome, and under faultnet (conf) the records of
    faultctl run --stats --json: (outcome or {"error": ...}, records)."""
    cmd = client_cmd(lang, spec)
    if conf:
        cmd = [CTL, "run", "--config", conf, "--stats", "--json", "--"] + cmd
    try:
        p = subprocess.run(cmd, env=clean_env(), capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired as e:
        return {"error": "timed out: %s" % (e.stderr or "")[-300:]}, []
    recs = []
    for line in p.stderr.splitlines():
        if line.startswith("{"):
            try:
                recs.append(json.loads(line))
            except ValueError:
                pass
    try:
        return json.loads(p.stdout.strip().splitlines()[-1]), recs
    except (IndexError, ValueError):
        return {"error": "exit %d: %s" % (p.returncode, p.stderr.strip()[-400:])}, recs


def rule_stats(recs, name):
    r = [x for x in recs if x.get("type") == "rule" and x.get("name") == name]
    return r[0] if r else {}


def streams_of(stats):
    """The streams a rule took (its requests), and those it faulted."""
    if not stats:
        return None, None
    got = stats.get("streams", stats.get("requests"))
    return got, sum(stats.get(k, 0) for k in ("answered", "slowed", "aborted"))


def klass(out, deadline):
    """immediate, at-deadline or other, from the client's own elapsed time."""
    e = out.get("elapsed")
    if e is None:
        return None
    if e < min(1.5, deadline / 2):
        return "immediate"
    if deadline - 0.1 <= e <= deadline + 1.2:
        return "at-deadline"
    return "other (%.2f s)" % e


def policy(name, action, match_path="/%s/*" % SVC, port=None):
    path = os.path.join(TMP, name + ".conf")
    with open(path, "w") as f:
        f.write('rules = (\n { name = "%s"; %s match = { to = "%s/32"; port = %d; '
                'path = "%s"; }; }\n);\n' % (name, action, ADDR, port, match_path))
    return path


# ---- the differential cases -------------------------------------------------
HEALTHY = 18601  # the healthy server every faultnet half calls
CASES = [
    # name, the rule's action keys, reference (kind, behaviour), spec, expected
    ("unavail_retried",
     'action = "respond"; grpc_status = 14; grpc_message = "try later"; '
     'grpc_pushback_ms = 50; first = 2;',
     ("grpc", "unavail_first", 18611), {"call": "unary", "retry": True},
     {"code": "OK", "attempts": 3, "class": "immediate", "server": 1, "faulted": 2}),
    ("unavail_retried_stream",
     'action = "respond"; grpc_status = 14; grpc_message = "try later"; '
     'grpc_pushback_ms = 50; first = 2;',
     ("grpc", "unavail_first", 18612), {"call": "stream", "n": 5, "retry": True},
     {"code": "OK", "attempts": 3, "class": "immediate", "server": 1, "faulted": 2, "got": 5}),
    ("after_headers_committed",
     'action = "respond"; grpc_status = 14; grpc_message = "try later"; '
     'grpc_after_headers = true;',
     ("grpc", "headers_then_unavail", 18613), {"call": "unary", "retry": True},
     {"code": "UNAVAILABLE", "attempts": 1, "class": "immediate", "server": 1, "faulted": 1}),
    ("resource_exhausted",
     'action = "respond"; grpc_status = 8; grpc_message = "quota";',
     ("grpc", "exhausted", 18614), {"call": "unary", "retry": True},
     {"code": "RESOURCE_EXHAUSTED", "attempts": 1, "class": "immediate", "server": 0,
      "faulted": 1}),
    ("refused_stream",
     'action = "abort"; rst_stream = "REFUSED_STREAM"; first = 1;',
     ("h2", "refuse_first", 18615), {"call": "unary", "retry": True},
     {"code": "OK", "attempts": 2, "class": "immediate", "server": 1, "faulted": 1}),
    ("goaway",
     'action = "abort"; goaway = "NO_ERROR"; first = 1;',
     ("h2", "goaway_first", 18616), {"call": "unary", "retry": True},
     {"code": "OK", "attempts": 2, "class": "immediate", "server": 1, "faulted": 1}),
    ("slow_past_deadline",
     'action = "slow"; delay_ms = 3000;',
     ("grpc", "sleep", 18617), {"call": "unary", "deadline": DEADLINE},
     {"code": "DEADLINE_EXCEEDED", "attempts": 1, "class": "at-deadline", "faulted": 1}),
]


def differential(lang, case, healthy, refs):
    name, action, (kind, _, rport), spec, want = case
    ref = refs[name]
    ref.reset()
    deadline = spec.get("deadline", 10)
    out, _ = run_client(lang, dict(spec, target="%s:%d" % (ADDR, rport)))
    time.sleep(0.2)  # the server's last callbacks
    attempts = ref.calls if kind == "grpc" else ref.streams
    got_ref = (out.get("code"), attempts, klass(out, deadline))
    exp = (want["code"], want["attempts"], want["class"])
    label = "%s %s" % (lang, name)
    check("%s: the reference server doing the fault: %s, %d attempt(s), %s"
          % (label, *exp), got_ref == exp and out.get("got", 0) >= 0, (got_ref, out))
    if "got" in want:
        check("%s: the reference stream's %d messages in order" % (label, want["got"]),
              out.get("got") == want["got"], out)
    conf = policy(name.replace("_", "-"), action, port=HEALTHY)
    healthy.reset()
    out, recs = run_client(lang, dict(spec, target="%s:%d" % (ADDR, HEALTHY)), conf)
    time.sleep(0.2)
    got, faulted = streams_of(rule_stats(recs, name.replace("_", "-")))
    got_fn = (out.get("code"), got, klass(out, deadline))
    check("%s: under faultnet the same as the reference: %s, %s attempt(s) (the rule's "
          "streams), %s" % (label, *got_ref), got_fn == got_ref, (got_fn, out))
    if "server" in want:
        check("%s: under faultnet the real server saw %d call(s), the rule faulted %d"
              % (label, want["server"], want["faulted"]),
              (healthy.calls, faulted) == (want["server"], want["faulted"]),
              (healthy.calls, faulted, recs))
    if "got" in want:
        check("%s: under faultnet the stream's %d messages in order" % (label, want["got"]),
              out.get("got") == want["got"], out)
    return recs


def h2_record(recs):
    h = [x for x in recs if x.get("type") == "h2"]
    return h[0] if h else None


def test_differential():
    healthy = GrpcServer(HEALTHY)
    refs = {}
    for case in CASES:
        kind, behaviour, port = case[2]
        refs[case[0]] = GrpcServer(port, behaviour) if kind == "grpc" else RawH2Server(port, behaviour)
    for lang in LANGS:
        for case in CASES:
            recs = differential(lang, case, healthy, refs)
            if case[0] == "unavail_retried":
                h = h2_record(recs)
                text = json.dumps(h) if h else ""
                check("%s unavail_retried: the h2 stats line counts one connection and "
                      "grpc 14 twice" % lang,
                      h is not None and ('"14": 2' in text or '14:2' in text
                                         or '"UNAVAILABLE": 2' in text), recs)
            if case[0] == "goaway":
                h = h2_record(recs)
                text = json.dumps(h) if h else ""
                check("%s goaway: the h2 stats line counts the GOAWAY NO_ERROR sent" % lang,
                      h is not None and ("NO_ERROR" in text or '"0": 1' in text), recs)
    for s in [healthy] + list(refs.values()):
        s.stop()


def test_passthrough():
    """Calls no rule faults, through faultnet as directly: a stream's
    messages, a client's cancel reaching the server, and a keepalive ping
    flood answered by the server's own GOAWAY ENHANCE_YOUR_CALM. The rule
    covers the connection (its port) but a path no call uses, so the engine
    parses the connection and forwards every stream."""
    port = 18621
    srv = GrpcServer(port)
    conf = policy("unused", 'action = "respond"; status = 503;', port=port,
                  match_path="/faultnet.test.Other/*")
    for lang in LANGS:
        base = {"target": "%s:%d" % (ADDR, port)}
        for mode, c in (("directly", None), ("through faultnet", conf)):
            srv.reset()
            out, recs = run_client(lang, dict(base, call="stream", n=50), c)
            check("%s stream %s: 50 messages in order, OK" % (lang, mode),
                  (out.get("code"), out.get("got")) == ("OK", 50), out)
            if c:
                st = rule_stats(recs, "unused")
                check("%s stream through faultnet: the rule parsed the connection's stream "
                      "(1 stream, none faulted)" % lang, streams_of(st) == (1, 0), recs)
            srv.reset()
            out, _ = run_client(lang, dict(base, call="cancel"), c)
            time.sleep(0.5)
            check("%s cancel %s: the client cancelled after one message; the server saw its "
                  "call cancelled" % (lang, mode),
                  out.get("code") == "CANCELLED" and out.get("got") == 1 and srv.cancelled == 1
                  and srv.completed == 0, (out, srv.cancelled, srv.completed))
        flood = []
        for mode, c in (("directly", None), ("through faultnet", conf)):
            out, _ = run_client(lang, dict(base, call="flood", method="Sleep", payload="5"), c)
            flood.append(out)
        d, f = flood
        # How each client words a GOAWAY ENHANCE_YOUR_CALM: grpcio as
        # UNAVAILABLE naming the pings, grpc-js as RESOURCE_EXHAUSTED.
        calm = lambda o: (o.get("code"), o.get("details", "").lower()) in (  # noqa: E731
            ("UNAVAILABLE", "too_many_pings"), ("UNAVAILABLE", "too many pings"),
            ("RESOURCE_EXHAUSTED", "bandwidth exhausted or memory limit exceeded")) \
            or (o.get("code") == "UNAVAILABLE" and "ping" in o.get("details", "").lower())
        check("%s keepalive ping flood directly: the server's GOAWAY ENHANCE_YOUR_CALM ends "
              "the call (%s: %s)" % (lang, d.get("code"), d.get("details")), calm(d), d)
        check("%s keepalive ping flood through faultnet: the same (%s)" % (lang, d.get("code")),
              (f.get("code"), calm(f)) == (d.get("code"), calm(d)), (f, d))
    srv.stop()


NODE = None
LANGS = ["python"]


def main():
    global NODE
    reexec()
    NODE = checks.node_bin(ROOT)
    if NODE and os.path.isdir(os.path.join(MODULES, "@grpc/grpc-js")):
        LANGS.append("node")
    else:
        print("  skip - the Node.js client: no Node.js 20 or no @grpc/grpc-js in %s "
              "(make test installs it from tests/conformance/package.json)" % MODULES)
        checks.skip()
    try:
        import grpc  # noqa: F401
        import h2  # noqa: F401
    except ImportError as e:
        check("python3-grpcio and python3-h2 installed (scripts/deps.sh test)", False, e)
        return 1
    for t in checks.selected([test_differential, test_passthrough]):
        t()
    return 1 if checks.failed else 0


if __name__ == "__main__":
    sys.exit(main())
