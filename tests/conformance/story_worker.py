"""story_worker.py - docs/STORIES.md stories 1 and 2: a worker that serialises its
model calls behind a lock, as agent runtimes do, against a peer that
accepts and never answers. Runs under the shim in its own faultctl group;
prints one JSON line with what happened.

usage: story_worker.py FAULTCTL GROUP no-timeout|timeouts
"""
import json
import subprocess
import sys
import threading
import time

import requests

FAULTCTL, GROUP, MODE = sys.argv[1], sys.argv[2], sys.argv[3]
URL = "http://127.68.0.1:8080/"
lock = threading.Lock()


def call(timeout):
    if not lock.acquire(blocking=False):
        raise RuntimeError("already processing a request")
    try:
        return requests.get(URL, timeout=timeout).status_code
    finally:
        lock.release()


def ctl(verb):
    subprocess.run([FAULTCTL, "-g", GROUP, verb, "story-stall"], check=True,
                   capture_output=True)


def outcome(fn):
    t0 = time.monotonic()
    try:
        r = str(fn())
    except Exception as e:
        r = type(e).__name__ + (": " + str(e) if isinstance(e, RuntimeError) else "")
    return r, int((time.monotonic() - t0) * 1000)


out = {}
ctl("enable")
if MODE == "no-timeout":
    # The SDK default of a long read timeout, here none: the first call hangs
    # and every later call fails at once, even after the network is back.
    hung = threading.Thread(target=lambda: outcome(lambda: call(None)), daemon=True)
    hung.start()
    time.sleep(0.5)
    out["while_hung"] = [outcome(lambda: call((2, 2))) for _ in range(3)]
    ctl("disable")
    time.sleep(0.5)
    out["after_restore"] = outcome(lambda: call((2, 2)))
    out["first_still_hung"] = hung.is_alive()
else:
    # connect 2 s / read 2 s, one attempt: a clean failure, then recovery
    # as soon as the route returns.
    out["under_stall"] = outcome(lambda: call((2, 2)))
    ctl("disable")
    out["after_restore"] = outcome(lambda: call((2, 2)))
print(json.dumps(out))
