"""http_engine.py - the HTTP engine against a real network: each
conversation of conv_cases.py, then the generated ones of conv_gen.py
(named regression seeds, then a run of seeds under a count and a byte
budget), is played directly and through the engine (conv.py, under the
shim), and what the client and the server each saw must be the same,
injected answers included, in request order.

usage: http_engine.py BUILD_DIR [PRELOAD_FIRST] [NAME...]
       [--seed S] [--count N] [--mib M] [--seconds T] [--generated-only]
       --h2 [--seed S] [--count N]
NAMEs pick named cases and seeds (seed-N) alone. --h2 plays generated
HTTP/2 conversations instead (conv_h2.py: seeds S to S+N-1, 40 unless
said; FN_CHECK=h2-seed-N picks some)."""
import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
import checks  # noqa: E402
from checks import check  # noqa: E402
import conv_gen  # noqa: E402

HOST = "127.84.0.2"  # loopback only
DIRECT, ENGINE = 18131, 18132
H2_DIRECT, H2_ENGINE = 18133, 18134

# Generated seeds that once found a defect (each failed on the engine before
# its fix, and passes since), played every time before the budgeted run:
# issue 38's items 1 to 7 (they fail on the engine of commit 45b860b), then
# the defects the generator itself found.
NAMED_SEEDS = {
    "item 1: an answer over 8 MiB completes": 73,
    "item 2: an early 401, then the next request": 91,
    "item 3: the server's FIN inside an answer's body": 121,
    "item 4: the client's half-close inside an injected request's body": 209,
    "item 5: an unframeable answer, then injected answers in order": 909,
    "item 6: the server's FIN after a request, without an answer": 4,
    "item 7: a malformed body of an injected request": 182,
    "a 304 with a Content-Length has no body": 11,
    "nothing injected after an answer that runs to the server's close": 16,
    "nothing injected after an answer with Connection: close": 18,
    "the server's reset inside an answer's head: its bytes first": 28,
    "the client's half-close inside a request head": 3,
    "the client's half-close inside an early-answered body": 141,
    "requests held behind a gate after the server's last answer": 125,
    "the server's reset after an answer with Connection: close": 215,
    "what the client sends after the server's FIN still reaches it": 492,
}

# Generated seeds on which the engine still differs, each with what differs:
# left out of the budgeted run, and said, until the engine is fixed.
KNOWN = {}


def run(lib, module, names, env=None, seconds=600):
    """conv.py's JSON lines for the named conversations of module; stops
    at seconds, with what it played by then."""
    tmp = tempfile.mkdtemp(prefix="fn-conv-")
    conf = os.path.join(tmp, "conv.conf")
    with open(conf, "w") as f:
        f.write('rules = ( { name = "inj"; action = "respond"; status = 503; body = "injected"; '
                'match = { to = "%s/32"; port = %d; path = "/inj*"; }; } );\n' % (HOST, ENGINE))
    e = {k: v for k, v in os.environ.items() if not k.startswith("FAULTNET_")}
    e.update(FAULTNET_CONFIG=conf, LD_PRELOAD=lib, ASAN_OPTIONS="detect_leaks=0",
             PYTHONPATH=HERE, **(env or {}))
    p = subprocess.Popen(["/usr/bin/python3", os.path.join(HERE, "conv.py"), HOST, str(DIRECT),
                          str(ENGINE), module] + names, env=e, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    try:
        out_s, err = p.communicate(timeout=seconds)
    except subprocess.TimeoutExpired:
        p.kill()
        out_s, err = p.communicate()
        print("  note - conv.py stopped at its %d s budget" % seconds)
    subprocess.run(["rm", "-rf", tmp])
    out = []
    for line in out_s.splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            pass
    if not out and names != []:
        check("conv.py ran", False, err[-800:])
    return out


def compare(r):
    d, e = r["direct"], r["engine"]
    check("%s: the client sees what it sees directly" % r["name"], d["client"] == e["client"],
          "direct %s, engine %s" % (d["client"], e["client"]))
    check("%s: the server sees what it sees directly" % r["name"], d["server"] == e["server"],
          "direct %s, engine %s" % (d["server"], e["server"]))


def budgeted(first, count, mib):
    """count seeds from first whose bytes fit the budget of mib MiB; a seed
    over what is left is passed over, and said; a named seed is played as
    such."""
    left, seeds, over = mib << 20, [], []
    s = first
    while len(seeds) < count:
        if s in NAMED_SEEDS.values():
            s += 1
            continue
        size = conv_gen.generate(s)[4]
        if size > left:
            over.append((s, size))
        else:
            left -= size
            seeds.append(s)
        s += 1
    return seeds, over


def generated(a, lib):
    named = {"seed-%d" % s: why for why, s in NAMED_SEEDS.items()}
    seeds, over = budgeted(a.seed, a.count, a.mib)
    if a.names:
        seeds = [int(n[5:]) for n in a.names if n.startswith("seed-")]
        over = []
    else:
        print("  generated: the named seeds, then %d from seed %d in %d MiB of bodies" %
              (a.count, a.seed, a.mib))
        for s in [s for s in seeds if s in KNOWN]:
            print("  skip - seed-%d: a known difference of the engine: %s" % (s, KNOWN[s]))
            checks.skip()
        seeds = sorted(NAMED_SEEDS.values()) + [s for s in seeds if s not in KNOWN]
    for s, size in over:
        print("  note - seed-%d left out: %.1f MiB, over the byte budget's remainder" %
              (s, size / 1048576))
    shapes, total = collections.Counter(), 0
    for s in seeds:
        _, _, _, sh, size = conv_gen.generate(s)
        shapes.update(sh)
        total += size
    t0 = time.monotonic()
    got = run(lib, "conv_gen", [], {"CONV_GEN_SEEDS": ",".join(map(str, seeds))}, a.seconds)
    for r in got:
        if r["name"] in named:
            r["name"] += " (%s)" % named[r["name"]]
        compare(r)
    played = {r["name"].split(" ")[0] for r in got}
    check("every generated conversation was played (%d of %d)" % (len(played), len(seeds)),
          len(played) == len(seeds))
    print("  %d generated conversations, %.1f MiB of bodies, in %.0f s; shapes played:" %
          (len(got), total / 1048576, time.monotonic() - t0))
    for k in sorted(shapes):
        print("    %5d  %s" % (shapes[k], k))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("build")
    p.add_argument("first", nargs="?", default="")
    p.add_argument("names", nargs="*")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--count", type=int, default=0)
    p.add_argument("--mib", type=int, default=128)
    p.add_argument("--seconds", type=int, default=300)
    p.add_argument("--generated-only", action="store_true")
    p.add_argument("--h2", action="store_true")
    a = p.parse_args()
    if a.h2:
        import conv_h2
        lib = (a.first + ":" if a.first else "") + os.path.join(os.path.abspath(a.build),
                                                                "libfaultnet.so")
        conv_h2.run(HOST, H2_DIRECT, H2_ENGINE, lib, list(range(a.seed, a.seed + (a.count or 40))))
        sys.exit(1 if checks.failed else 0)
    if not a.names and os.environ.get("FN_CHECK"):  # the conversations' and seeds' names
        sys.path.insert(0, HERE)
        a.names = checks.chosen([c[0] for c in __import__("conv_cases").cases()] +
                                ["seed-%d" % s for s in sorted(NAMED_SEEDS.values())])
    if a.first and not os.path.exists(a.first):
        a.names.insert(0, a.first)  # a name, not a runtime to preload
        a.first = ""
    # make test's budget: a sanitizer build (a runtime preloaded first) is
    # several times slower, so it plays fewer.
    a.count = a.count or (10 if a.first else 40)
    lib = (a.first + ":" if a.first else "") + os.path.join(os.path.abspath(a.build),
                                                            "libfaultnet.so")
    cases = [n for n in a.names if not n.startswith("seed-")]
    if not a.generated_only and (cases or not a.names):
        for r in run(lib, "conv_cases", cases):
            compare(r)
    if not a.names or len(cases) < len(a.names):
        generated(a, lib)
    sys.exit(1 if checks.failed else 0)


if __name__ == "__main__":
    main()
