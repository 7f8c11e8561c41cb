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
Writes BUILD_DIR/h2-conformance.md, the table of each client's outcomes
(reference and faultnet) that conformance.py puts into CONFORMANCE.md.

usage: grpc_test.py BUILD_DIR"""
import json
import os
import signal
import socket
import ssl
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
CA_VARS = ("SSL_CERT_FILE", "SSL_CERT_DIR", "NODE_EXTRA_CA_CERTS",
           "GRPC_DEFAULT_SSL_ROOTS_FILE_PATH")


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
    pushback of PUSHBACK ms, on its first two calls), "headers_then_unavail"
    (sends its initial metadata, then aborts: a committed call),
    "exhausted" (RESOURCE_EXHAUSTED) or "sleep" (answers after 3 s). Counts
    the calls its handlers saw, those that completed, and those the client
    cancelled."""

    def __init__(self, port, behaviour="ok", tls=None):
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
        if tls:  # (certificate file, key file): ALPN h2, as grpcio always offers
            cert, key = (open(f, "rb").read() for f in tls)
            self.server.add_secure_port("%s:%d" % (ADDR, port),
                                        grpc.ssl_server_credentials([(key, cert)]))
        else:
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
            context.set_trailing_metadata((("grpc-retry-pushback-ms", str(PUSHBACK)),))
            context.abort(code.UNAVAILABLE, "try later")
        if self.behaviour == "headers_then_unavail":
            # The headers alone first: gRPC's C core takes headers and
            # trailers that arrive in one read for Trailers-Only, and
            # retries (seen once in a few runs without the pause).
            context.send_initial_metadata(())
            time.sleep(0.2)
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
        time.sleep(float(req))  # not counted completed: it may end in a later test
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

    def __init__(self, port, mode, tls=None):
        self.mode, self.streams, self.answered = mode, 0, 0
        self.lock = threading.Lock()
        self.ctx = None
        if tls:
            self.ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            self.ctx.load_cert_chain(*tls)
            self.ctx.set_alpn_protocols(["h2"])
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
        if self.ctx:
            try:
                c = self.ctx.wrap_socket(c, server_side=True)
            except (OSError, ssl.SSLError):
                c.close()
                return
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


# ---- the clients, one thread each ------------------------------------------
# Python's and Node.js's clients run at once, each against servers of its own
# (ports LANG_SHIFT apart) and in a run directory of its own, so the section
# stays well under two minutes; each thread's checks are kept and printed in
# order once both are done.
LANG_SHIFT = 50
MINE = threading.local()


def ck(name, cond, detail=""):
    """check(), or, in a client's thread, kept for per_lang to print."""
    kept = getattr(MINE, "kept", None)
    if kept is None:
        check(name, cond, detail)
    else:
        kept.append((name, cond, detail))


def per_lang(fn, *args):
    """fn(lang, shift, *args) for every client at once; their checks, in order."""
    kept = {lang: [] for lang in LANGS}

    def run(lang, shift):
        MINE.kept, MINE.rundir = kept[lang], os.path.join(TMP, "run-" + lang)
        try:
            fn(lang, shift, *args)
        except Exception as e:  # one failure, never a lost thread
            kept[lang].append(("%s: %s ended" % (lang, fn.__name__), False, repr(e)))
    threads = [threading.Thread(target=run, args=(lang, i * LANG_SHIFT))
               for i, lang in enumerate(LANGS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for lang in LANGS:
        for name, cond, detail in kept[lang]:
            check(name, cond, detail)

def clean_env(**extra):
    e = {k: v for k, v in os.environ.items()
         if not k.startswith("FAULTNET_") and k not in CA_VARS and k != "LD_PRELOAD"}
    e.update(FAULTNET_RUNDIR=getattr(MINE, "rundir", os.path.join(TMP, "run")),
             ASAN_OPTIONS="detect_leaks=0",
             GRPC_VERBOSITY="NONE")
    e.update(extra)
    return e


def client_cmd(lang, spec):
    if lang == "python":
        return [PY, os.path.join(HERE, "grpc_client.py"), json.dumps(spec)]
    return [NODE, os.path.join(HERE, "grpc_client.js"), MODULES, json.dumps(spec)]


def run_client(lang, spec, conf=None, env=None):
    """The client's outcome, and under faultnet (conf) the records of
    faultctl run --stats --json: (outcome or {"error": ...}, records)."""
    cmd = client_cmd(lang, spec)
    if conf:
        cmd = [CTL, "run", "--config", conf, "--stats", "--json", "--"] + cmd
    try:
        p = subprocess.run(cmd, env=clean_env(**(env or {})), capture_output=True, text=True,
                           timeout=60)
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
        died = ""
        if p.returncode < 0 or p.returncode > 128:  # faultctl run passes on 128 + signal
            sig = -p.returncode if p.returncode < 0 else p.returncode - 128
            died = " (the client died of %s)" % signal.Signals(sig).name
        return {"error": "exit %d%s: %s" % (p.returncode, died, p.stderr.strip()[-400:])}, recs


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
    """immediate (before half the deadline: a loaded machine still passes),
    at-deadline or other, from the client's own elapsed time."""
    e = out.get("elapsed")
    if e is None:
        return None
    if e < deadline / 2:  # the calls without a slow rule have 10 s
        return "immediate"
    if deadline - 0.1 <= e <= deadline + 1.2:
        return "at-deadline"
    return "other (%.2f s)" % e


def policy(name, action, match_path="/%s/*" % SVC, port=None):
    path = os.path.join(TMP, "%s-%d.conf" % (name, port))
    path_key = 'path = "%s"; ' % match_path if match_path else ""
    with open(path, "w") as f:
        f.write('rules = (\n { name = "%s"; %s match = { to = "%s/32"; port = %d; %s}; }\n);\n'
                % (name, action, ADDR, port, path_key))
    return path


# ---- the differential cases -------------------------------------------------
# The pushback the servers ask for: two retries then take at least 0.6 s,
# where the retry policy's own backoff (0.05 s, then 0.1 s, jittered) takes
# under 0.15 s: the client honoured it.
PUSHBACK = 300
HEALTHY = 18601  # the healthy server every faultnet half calls; the references follow
TLS_SHIFT = 100  # the same servers over TLS, 100 ports higher
CASES = [
    # name, the rule's action keys, reference (kind, behaviour), spec, expected
    ("unavail_retried",
     'action = "respond"; grpc_status = 14; grpc_message = "try later"; '
     'grpc_pushback_ms = %d; first = 2;' % PUSHBACK,
     ("grpc", "unavail_first", 0), {"call": "unary", "retry": True},
     {"code": "OK", "attempts": 3, "class": "immediate", "server": 1, "faulted": 2,
      "h2": ("grpc", "UNAVAILABLE", 2), "pushback": True}),
    ("unavail_retried_stream",
     'action = "respond"; grpc_status = 14; grpc_message = "try later"; '
     'grpc_pushback_ms = %d; first = 2;' % PUSHBACK,
     ("grpc", "unavail_first", 0), {"call": "stream", "n": 5, "retry": True},
     {"code": "OK", "attempts": 3, "class": "immediate", "server": 1, "faulted": 2, "got": 5}),
    ("after_headers_committed",
     'action = "respond"; grpc_status = 14; grpc_message = "try later"; '
     'grpc_after_headers = true;',
     ("grpc", "headers_then_unavail", 0), {"call": "unary", "retry": True},
     {"code": "UNAVAILABLE", "attempts": 1, "class": "immediate", "server": 1, "faulted": 1}),
    ("resource_exhausted",
     'action = "respond"; grpc_status = 8; grpc_message = "quota";',
     ("grpc", "exhausted", 0), {"call": "unary", "retry": True},
     {"code": "RESOURCE_EXHAUSTED", "attempts": 1, "class": "immediate", "server": 0,
      "faulted": 1, "h2": ("grpc", "RESOURCE_EXHAUSTED", 1)}),
    ("refused_stream",
     'action = "abort"; rst_stream = "REFUSED_STREAM"; first = 1;',
     ("h2", "refuse_first", 0), {"call": "unary", "retry": True},
     {"code": "OK", "attempts": 2, "class": "immediate", "server": 1, "faulted": 1,
      "h2": ("rst", "REFUSED_STREAM", 1)}),
    ("goaway",
     'action = "abort"; goaway = "NO_ERROR"; first = 1;',
     ("h2", "goaway_first", 0), {"call": "unary", "retry": True},
     {"code": "OK", "attempts": 2, "class": "immediate", "server": 1, "faulted": 1,
      "h2": ("goaway", "NO_ERROR", 1)}),
    ("slow_past_deadline",
     'action = "slow"; delay_ms = 3000;',
     ("grpc", "sleep", 0), {"call": "unary", "deadline": DEADLINE},
     {"code": "DEADLINE_EXCEEDED", "attempts": 1, "class": "at-deadline", "faulted": 1}),
]


def differential(lang, case, healthy, refs, tls=None):
    """One case by one client: the reference, then faultnet; over TLS when
    tls is the environment naming the test CA (the client trusts it as it
    trusts its default roots; the relay, through SSL_CERT_FILE)."""
    name, action, (kind, _, rport), spec, want = case
    ref = refs[name]
    ref.reset()
    deadline = spec.get("deadline", 10)
    if tls:
        spec = dict(spec, tls={"roots": None, "name": "api.test"})
    out, _ = run_client(lang, dict(spec, target="%s:%d" % (ADDR, rport)), env=tls)
    time.sleep(0.2)  # the server's last callbacks
    attempts = ref.calls if kind == "grpc" else ref.streams
    got_ref = (out.get("code"), attempts, klass(out, deadline))
    exp = (want["code"], want["attempts"], want["class"])
    label = "%s %s%s" % (lang, "tls " if tls else "", name)
    ref_out = out
    ck("%s: the reference server doing the fault: %s, %d attempt(s), %s"
       % (label, *exp), got_ref == exp and out.get("got", 0) >= 0, (got_ref, out))
    if "got" in want:
        ck("%s: the reference stream's %d messages in order" % (label, want["got"]),
           out.get("got") == want["got"], out)
    conf = policy(name.replace("_", "-"), action, port=healthy.port)
    healthy.reset()
    out, recs = run_client(lang, dict(spec, target="%s:%d" % (ADDR, healthy.port)), conf, tls)
    time.sleep(0.2)
    got, faulted = streams_of(rule_stats(recs, name.replace("_", "-")))
    got_fn = (out.get("code"), got, klass(out, deadline))
    ck("%s: under faultnet the same as the reference: %s, %s attempt(s) (the rule's "
       "streams), %s" % (label, *got_ref), got_fn == got_ref, (got_fn, out))
    if "pushback" in want:
        ck("%s: grpc-retry-pushback-ms honoured, directly and under faultnet (two "
           "retries took at least 2 x %d ms: %s s, %s s)"
           % (label, PUSHBACK, ref_out.get("elapsed"), out.get("elapsed")),
           ref_out.get("elapsed", 0) >= 2 * PUSHBACK / 1000
           and out.get("elapsed", 0) >= 2 * PUSHBACK / 1000, (ref_out, out))
    if "server" in want:
        ck("%s: under faultnet the real server saw %d call(s), the rule faulted %d"
           % (label, want["server"], want["faulted"]),
           (healthy.calls, faulted) == (want["server"], want["faulted"]),
           (healthy.calls, faulted, recs))
    if "got" in want:
        ck("%s: under faultnet the stream's %d messages in order" % (label, want["got"]),
           out.get("got") == want["got"], out)
    return recs, (ref_out, attempts, out, got)


def h2_record(recs):
    h = [x for x in recs if x.get("type") == "h2"]
    return h[0] if h else None


def h2_count(rec, field, code):
    """A count of the h2 record's field ("grpc", "rst", "goaway": a comma
    list of NAME:COUNT), 0 when absent."""
    for item in str(rec.get(field, "")).split(","):
        name, _, n = item.partition(":")
        if name == code and n.isdigit():
            return int(n)
    return 0


# ---- the table for CONFORMANCE.md -------------------------------------------
# Each (client, transport)'s cells, by case: what the client met under
# faultnet, then against the reference, and whether every check of that
# cell passed. grpc_test.py writes them to BUILD/h2-conformance.md (removed
# first: a run that ended early never leaves an older table behind), and
# conformance.py puts that file into CONFORMANCE.md.
RESULTS = {}
RESULTS_LOCK = threading.Lock()
PASSTHROUGH = ("stream", "cancel", "ping_flood")


def cell_ok(start, word=""):
    """**pass** when every check this thread made since start (those
    naming word, if given) passed."""
    mine = [c for name, c, _ in MINE.kept[start:] if word in name]
    return "**pass**" if mine and all(mine) else "**FAIL**"


def said(out, attempts=None, extra=""):
    """One outcome in a cell: code (or the error), attempts, time, extra."""
    if "error" in out:
        return "error: %s" % str(out["error"]).replace("|", "/").replace("\n", " ")[:80]
    parts = [str(out.get("code"))]
    if attempts is not None:
        parts.append("%s att." % attempts)
    if out.get("elapsed") is not None:
        parts.append("%d ms" % round(out["elapsed"] * 1000))
    return ", ".join(parts) + extra


def record(lang, tls, name, outcomes, start):
    """A differential case's cell: faultnet's outcome, the reference's."""
    ref_out, ref_att, out, got = outcomes
    deadline = dict((c[0], c[3]) for c in CASES)[name].get("deadline", 10)
    text = "%s; real: %s %s" % (said(out, got, ", " + str(klass(out, deadline))),
                                said(ref_out, ref_att, ", " + str(klass(ref_out, deadline))),
                                cell_ok(start))
    with RESULTS_LOCK:
        RESULTS.setdefault((lang, bool(tls)), {})[name] = text


def record_passthrough(lang, tls, seen, start):
    """The stream, cancel and ping flood cells: through faultnet, then the
    same call directly."""
    who = lang + (" tls" if tls else "")
    words = {"stream": who + " stream ", "cancel": who + " cancel ",
             "ping_flood": who + " keepalive ping flood"}
    for case, modes in seen.items():
        show = {}
        for mode, (out, cancelled) in modes.items():
            extra = ""
            if case in ("stream", "cancel"):
                extra = ", %s msg." % out.get("got")
            if case == "cancel":
                extra += ", server saw %s cancelled" % cancelled
            if case == "ping_flood" and out.get("details"):
                extra = " (%s)" % out["details"].replace("|", "/")[:60]
            show[mode] = said(out, extra=extra)
        text = "%s; direct: %s %s" % (show.get("through faultnet"), show.get("directly"),
                                      cell_ok(start, words[case]))
        with RESULTS_LOCK:
            RESULTS.setdefault((lang, bool(tls)), {})[case] = text


def client_label(lang, tls):
    """The client, its version and its transport, as a row of the table."""
    how = "TLS, ALPN h2" if tls else "clear text, prior knowledge"
    if lang == "python":
        import grpc
        return "python grpcio %s (%s)" % (grpc.__version__, how)
    try:
        with open(os.path.join(MODULES, "@grpc/grpc-js/package.json")) as f:
            version = json.load(f)["version"]
    except (OSError, ValueError, KeyError):
        version = "?"
    node = subprocess.run([NODE, "--version"], capture_output=True, text=True).stdout.strip()
    return "node %s @grpc/grpc-js %s (%s)" % (node, version, how)


def table_path():
    return os.path.join(BUILD, "h2-conformance.md") if BUILD else None


def write_table():
    """BUILD/h2-conformance.md: the section conformance.py includes."""
    cols = [c[0] for c in CASES] + list(PASSTHROUGH)
    with open(table_path(), "w") as f:
        f.write("## HTTP/2 and gRPC\n\n")
        f.write("Written by tests/h2/grpc_test.py (section `h2` of tests/run.sh) from its own run. "
                "Each cell: the client's own outcome under faultnet, against a healthy server with "
                "the case's rule (status code, attempts: the rule's streams, time, and the time "
                "class: immediate or at the call's deadline), then, after `real:`, the same client "
                "against a reference server that does the fault itself (a grpcio server aborting, "
                "sleeping or sending its headers first; a raw HTTP/2 server on python3-h2 for "
                "RST_STREAM REFUSED_STREAM and GOAWAY; attempts: the calls or streams it saw). The "
                "last three columns are calls no rule faults (a 50-message stream, a cancel after "
                "one message, a keepalive ping flood the server ends with GOAWAY "
                "ENHANCE_YOUR_CALM): through faultnet, then `direct:` without it. A cell passes "
                "when the code, attempts and time class are the same and every other check of the "
                "case holds (pushback honoured, the server's calls, the rule's faults, the h2 line "
                "of `faultctl run --stats`); `-`: the case did not run. HTTP/3 (QUIC) is out of "
                "scope: faultnet does not parse it, and its UDP datagrams meet only the address "
                "rules (UDP drop, blackhole, delay), never the HTTP or gRPC ones "
                "(docs/http.md).\n\n")
        f.write("| client | " + " | ".join(cols) + " |\n")
        f.write("|---|" + "---|" * len(cols) + "\n")
        for lang in LANGS:
            for tls in (False, True):
                cells = RESULTS.get((lang, tls))
                if cells is None:
                    continue
                f.write("| %s | %s |\n" % (client_label(lang, tls),
                                            " | ".join(cells.get(c, "-") for c in cols)))


def differential_all(lang, shift, tls=None):
    """Every case by one client, in clear text (prior knowledge) or, tls
    given, over TLS with ALPN h2 through the relay's HTTPS termination."""
    base = HEALTHY + shift + (TLS_SHIFT if tls else 0)
    certs = TLS_CERT if tls else None
    healthy = GrpcServer(base, tls=certs)
    refs, cases = {}, [list(c) for c in CASES]
    for i, case in enumerate(cases):
        kind, behaviour, _ = case[2]
        port = base + 10 + i
        case[2] = (kind, behaviour, port)
        refs[case[0]] = (GrpcServer(port, behaviour, certs) if kind == "grpc"
                         else RawH2Server(port, behaviour, certs))
    for case in cases:
        start = len(MINE.kept)
        recs, outcomes = differential(lang, case, healthy, refs, tls)
        want = case[4].get("h2")
        if not want:
            record(lang, tls, case[0], outcomes, start)
            continue
        h = h2_record(recs) or {}
        field, code, n = want
        got = (h2_count(h, field, code), h.get("connections", 0) >= 1,
               h.get("tls", 0) >= 1 if tls else True)
        ck("%s %s%s: the h2 line of run --stats: %s=%s:%d, the connection%s counted"
           % (lang, "tls " if tls else "", case[0], field, code, n,
           " and its TLS" if tls else ""), got == (n, True, True), (got, h or recs))
        record(lang, tls, case[0], outcomes, start)
    for s in [healthy] + list(refs.values()):
        s.stop()


def test_differential():
    per_lang(differential_all)


def test_tls_differential():
    """The same cases over TLS: grpcio trusts the test CA as its default
    roots (GRPC_DEFAULT_SSL_ROOTS_FILE_PATH, which faultctl run combines with
    the run's CA), grpc-js through NODE_EXTRA_CA_CERTS (likewise), the relay
    through SSL_CERT_FILE."""
    per_lang(differential_all, TLS_ENV)


def passthrough(lang, shift, tls=None):
    """Calls no rule faults, through faultnet as directly: a stream's
    messages, a client's cancel reaching the server, and a keepalive ping
    flood answered by the server's own GOAWAY ENHANCE_YOUR_CALM. The rule
    covers the connection (its port) but a path no call uses, so the engine
    parses the connection and forwards every stream."""
    port = 18621 + shift + (TLS_SHIFT if tls else 0)
    srv = GrpcServer(port, tls=TLS_CERT if tls else None)
    conf = policy("unused", 'action = "respond"; status = 503;', port=port,
                  match_path="/faultnet.test.Other/*")
    base = {"target": "%s:%d" % (ADDR, port)}
    if tls:
        base["tls"] = {"roots": None, "name": "api.test"}
    who = lang + (" tls" if tls else "")
    seen = {}  # case: {mode: (outcome, server's figure)}, for the table
    start = len(MINE.kept)  # the checks of this call: each cell's pass
    for mode, c in (("directly", None), ("through faultnet", conf)):
        srv.reset()
        out, recs = run_client(lang, dict(base, call="stream", n=50), c, tls)
        seen.setdefault("stream", {})[mode] = (out, None)
        ck("%s stream %s: 50 messages in order, OK" % (who, mode),
           (out.get("code"), out.get("got")) == ("OK", 50), out)
        if c:
            # The rule covers the connection but not the path: the engine
            # carried it (the h2 line), the rule faulted nothing.
            h = h2_record(recs) or {}
            got = (h.get("connections", 0), h.get("tls", 0) if tls else 0,
                   streams_of(rule_stats(recs, "unused"))[1])
            ck("%s stream through faultnet: the HTTP/2 engine carried the connection (the h2 "
               "line: connections=1%s), the rule faulted nothing" % (who, " tls=1" if tls else ""),
               got == (1, 1 if tls else 0, 0), recs)
        srv.reset()
        out, _ = run_client(lang, dict(base, call="cancel"), c, tls)
        end = time.monotonic() + 5  # the server's callback, late on a loaded machine
        while srv.cancelled == 0 and time.monotonic() < end:
            time.sleep(0.05)
        seen.setdefault("cancel", {})[mode] = (out, srv.cancelled)
        ck("%s cancel %s: the client cancelled after one message; the server saw its call "
           "cancelled" % (who, mode),
           out.get("code") == "CANCELLED" and out.get("got") == 1 and srv.cancelled == 1
           and srv.completed == 0, (out, srv.cancelled, srv.completed))
    flood = []
    for mode, c in (("directly", None), ("through faultnet", conf)):
        spec = dict(base, call="flood", method="Sleep", payload="5")
        flood.append(run_client(lang, spec, c, tls)[0])
    d, f = flood
    # How each client words a GOAWAY ENHANCE_YOUR_CALM: grpcio as UNAVAILABLE
    # naming the pings, grpc-js as RESOURCE_EXHAUSTED.
    calm = lambda o: (o.get("code"), o.get("details", "").lower()) in (  # noqa: E731
        ("UNAVAILABLE", "too many pings"),
        ("RESOURCE_EXHAUSTED", "bandwidth exhausted or memory limit exceeded"))
    ck("%s keepalive ping flood directly: the server's GOAWAY ENHANCE_YOUR_CALM ends the call "
       "(%s: %s)" % (who, d.get("code"), d.get("details")), calm(d), d)
    ck("%s keepalive ping flood through faultnet: the same (%s)" % (who, d.get("code")),
       (f.get("code"), f.get("details"), calm(f)) == (d.get("code"), d.get("details"), calm(d)),
       (f, d))
    seen["ping_flood"] = {"directly": (d, None), "through faultnet": (f, None)}
    record_passthrough(lang, tls, seen, start)
    srv.stop()


def test_passthrough():
    per_lang(passthrough)


def test_tls_passthrough():
    per_lang(passthrough, TLS_ENV)


def openssl(*args):
    subprocess.run(["openssl"] + list(args), check=True, capture_output=True)


def make_ca(name):
    key, pem = os.path.join(TMP, name + ".key"), os.path.join(TMP, name + ".pem")
    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
            "-keyout", key, "-out", pem, "-days", "2", "-subj", "/CN=faultnet h2 " + name,
            "-addext", "basicConstraints=critical,CA:TRUE",
            "-addext", "keyUsage=critical,keyCertSign")
    return key, pem


def make_leaf(name, ca_key, ca_pem):
    """A server certificate for api.test and 127.0.0.1 signed by the CA."""
    key, csr, pem, ext = (os.path.join(TMP, name + s) for s in (".key", ".csr", ".pem", ".ext"))
    with open(ext, "w") as f:
        f.write("subjectAltName=DNS:api.test,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n")
    openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
            "-keyout", key, "-out", csr, "-subj", "/CN=api.test")
    openssl("x509", "-req", "-in", csr, "-CA", ca_pem, "-CAkey", ca_key, "-CAcreateserial",
            "-out", pem, "-days", "2", "-extfile", ext)
    return pem, key


def test_roots_variable():
    """faultctl run sets GRPC_DEFAULT_SSL_ROOTS_FILE_PATH when the policy has
    HTTP rules: a bundle of the roots gRPC would have read and the run's CA
    (for grpcio's PyPI wheels, whose BoringSSL the trust hook does not
    reach; Debian's uses the system's OpenSSL). Then grpcio trusts a server
    whose certificate the run's CA signed on a connection no rule covers
    (nothing terminated: the variable alone), and still trusts what it
    trusted before."""
    rundir = os.path.join(TMP, "roots-run")
    os.makedirs(rundir, mode=0o700)
    conf = policy("roots", 'action = "respond"; status = 503;', port=1)
    show = [PY, "-c", "import os; print(os.environ.get('GRPC_DEFAULT_SSL_ROOTS_FILE_PATH'))"]

    def value(env, c=conf, cmd=show):
        p = subprocess.run([CTL, "run", "--config", c, "--"] + cmd,
                           env=clean_env(FAULTNET_RUNDIR=rundir, **env),
                           capture_output=True, text=True, timeout=60)
        return p.stdout.strip(), p.stderr

    system = "/etc/ssl/certs/ca-certificates.crt"
    got, err = value({})
    ca = open(os.path.join(rundir, "ca.pem"), "rb").read() if os.path.exists(
        os.path.join(rundir, "ca.pem")) else b"(no ca.pem)"
    ok = got.startswith(rundir + "/ca.grpc-") and os.path.exists(got)
    check("roots: unset, it names RUNDIR/ca.grpc-HASH.pem, mode 0600",
          ok and (os.stat(got).st_mode & 0o777) == 0o600, (got, err))
    check("roots: that file is the system's bundle, then the run's CA",
          ok and open(got, "rb").read() == open(system, "rb").read() + b"\n" + ca, got)
    mine = os.path.join(TMP, "mine.pem")
    with open(mine, "wb") as f:
        f.write(open(TLS_CA, "rb").read())
    got2, err = value({"GRPC_DEFAULT_SSL_ROOTS_FILE_PATH": mine})
    check("roots: the user's own file is kept: their certificates, then the run's CA; "
          "their file untouched",
          got2.startswith(rundir + "/ca.grpc-") and open(got2, "rb").read() ==
          open(TLS_CA, "rb").read() + b"\n" + ca and open(mine, "rb").read() ==
          open(TLS_CA, "rb").read(), (got2, err))
    got3, err = value({"GRPC_DEFAULT_SSL_ROOTS_FILE_PATH": "/nonexistent/roots.pem"})
    check("roots: a file that cannot be read is left as it is, with a warning naming it",
          got3 == "/nonexistent/roots.pem" and "GRPC_DEFAULT_SSL_ROOTS_FILE_PATH=/nonexistent"
          in err, (got3, err))
    # (through sh: faultctl run refuses faultctl itself as a Go program)
    got4, _ = value({}, cmd=["sh", "-c", '"$@"', "-", CTL, "run", "--config", conf, "--"] + show)
    check("roots: a faultctl run inside another keeps the outer run's bundle", got4 == got, got4)
    plain = policy("plain", 'action = "blackhole";', port=1, match_path=None)
    got5, _ = value({}, c=plain)
    check("roots: a policy without HTTP rules sets nothing", got5 == "None", got5)
    # grpcio itself, with its default roots, against a server signed by the
    # run's CA (no rule covers it: nothing is terminated, only trusted).
    port = 18690
    leaf = make_leaf("runsigned", os.path.join(rundir, "ca.key"), os.path.join(rundir, "ca.pem"))
    srv = GrpcServer(port, tls=leaf)
    spec = json.dumps({"target": "%s:%d" % (ADDR, port), "call": "unary", "deadline": 5,
                       "tls": {"roots": None, "name": "api.test"}})
    direct = subprocess.run([PY, os.path.join(HERE, "grpc_client.py"), spec],
                            env=clean_env(FAULTNET_RUNDIR=rundir), capture_output=True,
                            text=True, timeout=60).stdout
    under, _ = value({}, cmd=[PY, os.path.join(HERE, "grpc_client.py"), spec])
    check("roots: grpcio with its default roots refuses a server the run's CA signed "
          "without faultctl run, and trusts it under it",
          '"UNAVAILABLE"' in direct and '"OK"' in under, (direct, under))
    srv.stop()


NODE = None
LANGS = ["python"]
TLS_CA = TLS_CERT = None
# Over TLS, both halves: grpcio trusts the test CA as its default roots, grpc-js
# as an extra root, the relay through SSL_CERT_FILE (faultctl run combines the
# first two with the run's CA).
TLS_ENV = {}


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
    # FN_H2_LANGS=python (or node): one client only, while debugging.
    if os.environ.get("FN_H2_LANGS"):
        LANGS[:] = [x for x in LANGS if x in os.environ["FN_H2_LANGS"].split(",")]
    try:
        import grpc  # noqa: F401
        import h2  # noqa: F401
    except ImportError as e:
        check("python3-grpcio and python3-h2 installed (scripts/deps.sh test)", False, e)
        return 1
    global TLS_CA, TLS_CERT
    ca = make_ca("testca")
    TLS_CA, TLS_CERT = ca[1], make_leaf("server", *ca)
    TLS_ENV.update(GRPC_DEFAULT_SSL_ROOTS_FILE_PATH=TLS_CA, NODE_EXTRA_CA_CERTS=TLS_CA,
                   SSL_CERT_FILE=TLS_CA)
    if table_path() and os.path.exists(table_path()):
        os.unlink(table_path())  # never an older run's table
    for t in checks.selected([test_roots_variable, test_differential, test_passthrough,
                              test_tls_differential, test_tls_passthrough]):
        t()
    if table_path() and RESULTS:
        write_table()
        print("  table: %s" % table_path())
    return 1 if checks.failed else 0


if __name__ == "__main__":
    sys.exit(main())
