"""failover.py - the region drill's system under test, run under the shim
by `faultctl scenario`: a gateway on 127.86.0.1:8080 that serves /api from
its current target (region a's service first), two monitors of the primary,
one per region (processes tagged with zones a and b through FAULTNET_ZONE),
and a controller that fails the gateway over to region b's service once both
monitors have failed for FAILOVER_S seconds in a row, as a DR runbook says.
The failover is marked on the scenario's timeline: a line in the file
FAULTNET_MARKS names.

usage: failover.py FAILOVER_S
       failover.py --monitor URL   (a monitor: prints ok/fail lines)"""
import http.server
import os
import subprocess
import sys
import threading
import time
import urllib.request

PRIMARY = "http://127.86.1.1:8080/"
SECONDARY = "http://127.86.2.1:8080/"


def mark(name):
    """A moment of the app on the scenario's timeline (faultctl scenario
    reads the file FAULTNET_MARKS names)."""
    path = os.environ.get("FAULTNET_MARKS")
    if path:
        with open(path, "a") as f:
            f.write(name + "\n")


def healthy(url, timeout):
    try:
        return urllib.request.urlopen(url, timeout=timeout).status == 200
    except Exception:
        return False


def monitor(url):
    while True:
        t = time.monotonic()
        print("ok" if healthy(url, 0.3) else "fail", flush=True)
        time.sleep(max(0.0, 0.1 - (time.monotonic() - t)))


class Controller:
    def __init__(self, failover_s):
        self.target = PRIMARY
        self.failing_since = {}
        self.failover_s = failover_s
        self.lock = threading.Lock()

    def watch(self, zone):
        env = dict(os.environ, FAULTNET_ZONE=zone)
        p = subprocess.Popen([sys.executable, __file__, "--monitor", PRIMARY], env=env,
                             stdout=subprocess.PIPE, text=True)
        for line in p.stdout:
            with self.lock:
                if line.strip() == "ok":
                    self.failing_since.pop(zone, None)
                else:
                    self.failing_since.setdefault(zone, time.monotonic())
                self.decide()

    def decide(self):
        since = [self.failing_since.get(z) for z in ("a", "b")]
        if self.target == PRIMARY and all(since) and \
                time.monotonic() - max(since) >= self.failover_s:
            self.target = SECONDARY
            mark("failover")
            print("failover to region b", flush=True)


def serve(ctl):
    class Gateway(http.server.BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def do_GET(self):
            with ctl.lock:
                target = ctl.target
            ok = healthy(target, 0.5)
            self.send_response(200 if ok else 503)
            self.send_header("Content-Length", "0")
            self.end_headers()

    srv = http.server.ThreadingHTTPServer(("127.86.0.1", 8080), Gateway)
    srv.daemon_threads = True
    srv.allow_reuse_address = True
    srv.serve_forever()


if __name__ == "__main__":
    if sys.argv[1] == "--monitor":
        monitor(sys.argv[2])
    else:
        ctl = Controller(float(sys.argv[1]))
        for zone in ("a", "b"):
            threading.Thread(target=ctl.watch, args=(zone,), daemon=True).start()
        serve(ctl)
