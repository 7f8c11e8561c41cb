"""storm.py - a small worker pool calling a degraded API, run under the shim:
6 workers, each call up to 4 attempts with exponential backoff (50, 100,
200 ms), optionally behind one shared circuit breaker (opens after 5
failed attempts in a row, fails calls fast for COOLDOWN seconds, then lets
one trial through). Prints one JSON line: requests sent, 5xx answers met,
calls that succeeded and failed, and the first success's time in seconds
since the process started (the shim's rule windows start there, before
Python's imports, which take a noticeable part of a second on a busy
machine).

usage: storm.py HOST PORT SECONDS COOLDOWN breaker|none [STATUS_FILE]
With STATUS_FILE, each finished call writes "ok" or "fail" there (for a
scenario's probe)."""
import json
import os
import sys
import threading
import time

import requests

from procstart import since_start

HOST, PORT, SECONDS, COOLDOWN, MODE = sys.argv[1], sys.argv[2], float(sys.argv[3]), \
    float(sys.argv[4]), sys.argv[5]
STATUS = sys.argv[6] if len(sys.argv) > 6 else None
URL = "http://%s:%s/api/work" % (HOST, PORT)
lock = threading.Lock()
stats = {"requests": 0, "errors_5xx": 0, "conn_errors": [], "ok_calls": 0, "failed_calls": 0, "fast_fails": 0,
         "first_ok": None}
breaker = {"failures": 0, "open_until": 0.0, "trial": False}
t0 = time.monotonic()


T_START = time.monotonic() - since_start()  # the process's start on the monotonic clock


def allow():
    """The breaker's say: True to send, False to fail the call fast."""
    if MODE != "breaker":
        return True
    with lock:
        now = time.monotonic()
        if breaker["open_until"] > now:
            return False
        if breaker["open_until"] and breaker["trial"]:
            return False  # one trial at a time while half-open
        if breaker["open_until"]:
            breaker["trial"] = True
        return True


def record(ok):
    with lock:
        if ok:
            breaker.update(failures=0, open_until=0.0, trial=False)
            return
        breaker["failures"] += 1
        if breaker["trial"] or breaker["failures"] >= 5:
            breaker.update(open_until=time.monotonic() + COOLDOWN, trial=False, failures=0)


def call(session):
    for attempt in range(4):
        if not allow():
            with lock:
                stats["fast_fails"] += 1
            return False
        try:
            r = session.get(URL, timeout=5)
        except requests.exceptions.RequestException as e:
            with lock:  # never expected: the relay must not break a connection
                stats["conn_errors"].append([round(time.monotonic() - t0, 3), str(e)[:200]])
            record(False)
            return False
        with lock:
            stats["requests"] += 1
            stats["errors_5xx"] += r.status_code >= 500
        record(r.status_code < 500)
        if r.status_code < 500:
            return True
        time.sleep(0.05 * 2 ** attempt)
    return False


def worker():
    s = requests.Session()
    while time.monotonic() - t0 < SECONDS:
        ok = call(s)
        with lock:
            stats["ok_calls" if ok else "failed_calls"] += 1
            if STATUS:
                with open(STATUS + ".tmp", "w") as f:
                    f.write("ok\n" if ok else "fail\n")
                os.replace(STATUS + ".tmp", STATUS)
            if ok and stats["first_ok"] is None:
                stats["first_ok"] = round(time.monotonic() - T_START, 3)
        time.sleep(0.05)


threads = [threading.Thread(target=worker) for _ in range(6)]
for t in threads:
    t.start()
for t in threads:
    t.join()
print(json.dumps(stats), flush=True)
