"""conv_h2.py - http_engine.py's h2 mode: generated HTTP/2 conversations
(tests/h2/h2fid_peer.py's generate: 1 to 8 streams at once, each with its
status, extra headers, body from 0 to 1 MiB, request body, trailers, a
RST_STREAM from the server after half its body) played over clear text
(prior knowledge) directly and through the engine, and what the client and
the server each saw compared per stream (by path). Streams whose path starts
with /inj are the rule's (503, "injected"): the direct server answers them
that way itself, so for them the client's status and body must agree and
the server, through the engine, must not see them (there it answers them
421 "reached the server"). Not compared (a relay's
own): HPACK's encoding, frame boundaries, stream ids, the header list of
the rule's own answer."""
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
H2 = os.path.join(os.path.dirname(HERE), "h2")
sys.path.insert(0, H2)
import h2fid_peer as peer  # noqa: E402
import checks  # noqa: E402
from checks import check  # noqa: E402

# Generated seeds on which the engine differs, each with what differs: left
# out of the run, and said, until the engine is fixed.
KNOWN = {}


class Server(threading.Thread):
    def __init__(self, host, port, rule):
        super().__init__(daemon=True)
        self.rule = rule
        self.ls = socket.socket()
        self.ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.ls.bind((host, port))
        self.ls.listen(16)
        self.views = []

    def run(self):
        while True:
            c, _ = self.ls.accept()
            threading.Thread(target=self.one, args=(c,), daemon=True).start()

    def one(self, c):
        try:
            v = peer.serve(c, peer.SERVER_SETTINGS, rule=self.rule)
        except Exception as e:  # said, never a hang
            v = {"error": "%s: %s" % (type(e).__name__, e), "streams": {}}
        c.close()
        self.views.append(v)

    def take(self, seconds=30):
        end = time.monotonic() + seconds
        while not self.views and time.monotonic() < end:
            time.sleep(0.02)
        return self.views.pop(0) if self.views else {"error": "no connection", "streams": {}}


def play(host, port, server, seed, lib, conf):
    e = {k: v for k, v in os.environ.items() if not k.startswith("FAULTNET_")}
    if lib:
        e.update(FAULTNET_CONFIG=conf, LD_PRELOAD=lib, ASAN_OPTIONS="detect_leaks=0")
    p = subprocess.run(["/usr/bin/python3", os.path.join(H2, "h2fid_peer.py"), host, str(port),
                        "gen:%d" % seed], env=e, capture_output=True, text=True, timeout=120)
    try:
        c = json.loads(p.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        c = {"error": "client exit %d: %s" % (p.returncode, p.stderr[-500:]), "streams": {}}
    return c, server.take()


def view(v, side):
    """What is compared: per stream; an /inj stream by its status and body
    on the client's side; on the server's, not at all directly (its server
    answered them as the rule does), and through the engine as any other
    (its server answers them 421: they should never reach it)."""
    out = {"error": v.get("error")}
    for path, s in sorted(v.get("streams", {}).items()):
        if not path.startswith("/inj") or (side == "server" and not v.get("rule")):
            out[path] = {k: v for k, v in s.items() if k != "window"}  # pace: timing's
        elif side == "client":
            out[path] = {"status": dict(s["headers"] or []).get(":status"), "body": s["body"]}
    return out


def run(host, direct_port, engine_port, lib, seeds):
    names = checks.chosen(["h2-seed-%d" % s for s in seeds])
    seeds = [s for s in seeds if "h2-seed-%d" % s in names]
    tmp = tempfile.mkdtemp(prefix="fn-convh2-")
    conf = os.path.join(tmp, "h2.conf")
    with open(conf, "w") as f:
        f.write('rules = ( { name = "inj"; action = "respond"; status = 503; body = "injected"; '
                'match = { to = "%s/32"; port = %d; path = "/inj*"; }; } );\n'
                % (host, engine_port))
    direct, engine = Server(host, direct_port, True), Server(host, engine_port, False)
    direct.start()
    engine.start()
    for s in [s for s in seeds if s in KNOWN]:
        print("  skip - h2-seed-%d: a known difference of the engine: %s" % (s, KNOWN[s]))
    t0, streams, inj = time.monotonic(), 0, 0
    for s in [s for s in seeds if s not in KNOWN]:
        dc, ds = play(host, direct_port, direct, s, None, None)
        ec, es = play(host, engine_port, engine, s, lib, conf)
        paths = [p for p, _, _ in peer.generate(s)]
        streams += len(paths)
        inj += sum(p.startswith("/inj") for p in paths)
        check("h2-seed-%d (%d streams): the client saw every stream end directly (the test's own)"
              % (s, len(paths)), not dc.get("error") and
              all(x["ended"] or x["reset"] is not None for x in dc["streams"].values())
              and len(dc["streams"]) == len(paths), dc.get("error") or dc["streams"].keys())
        for side, d, e in (("client", dc, ec), ("server", ds, es)):
            d, e = view(d, side), view(e, side)
            differ = {k: [d.get(k), e.get(k)] for k in sorted(set(d) | set(e))
                      if d.get(k) != e.get(k)}
            check("h2-seed-%d: the %s sees what it sees directly" % (s, side), not differ,
                  json.dumps(differ)[:1500])
    subprocess.run(["rm", "-rf", tmp])
    print("  h2: %d seeds, %d streams (%d the rule's), in %.0f s" %
          (len(seeds), streams, inj, time.monotonic() - t0))
