"""http_engine.py - the HTTP engine against a real network: each
conversation of conv_cases.py is played directly and through the engine
(conv.py, under the shim), and what the client and the server each saw
must be the same, injected answers included, in request order.

usage: http_engine.py BUILD_DIR [PRELOAD_FIRST] [NAME...]"""
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
import checks  # noqa: E402
from checks import check  # noqa: E402

BUILD = os.path.abspath(sys.argv[1])
FIRST = sys.argv[2] if len(sys.argv) > 2 else ""
NAMES = sys.argv[3:]
LIB = (FIRST + ":" if FIRST else "") + os.path.join(BUILD, "libfaultnet.so")
HOST = "127.84.0.2"  # loopback only
DIRECT, ENGINE = 18131, 18132


def run(module, names):
    tmp = tempfile.mkdtemp(prefix="fn-conv-")
    conf = os.path.join(tmp, "conv.conf")
    with open(conf, "w") as f:
        f.write('rules = ( { name = "inj"; action = "respond"; status = 503; body = "injected"; '
                'match = { to = "%s/32"; port = %d; path = "/inj*"; }; } );\n' % (HOST, ENGINE))
    e = {k: v for k, v in os.environ.items() if not k.startswith("FAULTNET_")}
    e.update(FAULTNET_CONFIG=conf, LD_PRELOAD=LIB, ASAN_OPTIONS="detect_leaks=0",
             PYTHONPATH=HERE)
    p = subprocess.run(["/usr/bin/python3", os.path.join(HERE, "conv.py"), HOST, str(DIRECT),
                        str(ENGINE), module] + names, env=e, capture_output=True, text=True,
                       timeout=600)
    subprocess.run(["rm", "-rf", tmp])
    out = []
    for line in p.stdout.splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            pass
    if not out:
        check("conv.py ran", False, p.stderr[-800:])
    return out


def main():
    names = NAMES
    if not names and os.environ.get("FN_CHECK"):  # the conversations' names
        sys.path.insert(0, HERE)
        names = checks.chosen([c[0] for c in __import__("conv_cases").cases()])
    for r in run("conv_cases", names):
        d, e = r["direct"], r["engine"]
        check("%s: the client sees what it sees directly" % r["name"], d["client"] == e["client"],
              "direct %s, engine %s" % (d["client"], e["client"]))
        check("%s: the server sees what it sees directly" % r["name"], d["server"] == e["server"],
              "direct %s, engine %s" % (d["server"], e["server"]))
    sys.exit(1 if checks.failed else 0)


if __name__ == "__main__":
    main()
