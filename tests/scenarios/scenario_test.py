"""scenario_test.py - `faultctl scenario` end to end: the three scenarios of
this folder against real servers on loopback (reports under
build/scenarios/), the report's parts (report.json's numbers, junit.xml's
cases, report.svg rendered to PNG by rsvg-convert and looked at pixel by
pixel, its text boxes as headless Chromium lays them out), a failing
expectation, bad scenario files, and SIGINT at random
moments always leaving the group as its policy file set it.

usage: scenario_test.py BUILD_DIR"""
import html
import json
import os
import shutil
import random
import signal
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "http"))
import checks  # noqa: E402
from checks import check  # noqa: E402
import origin  # noqa: E402

BUILD = os.path.abspath(sys.argv[1])
CTL = os.path.join(BUILD, "faultctl")
PY = "/usr/bin/python3"
OUT = os.path.join(ROOT, "build", "scenarios")
TMP = tempfile.mkdtemp(prefix="fn-scenario-")
SVG = "{http://www.w3.org/2000/svg}"


def env(**extra):
    e = {k: v for k, v in os.environ.items() if not k.startswith("FAULTNET_") or k == "FAULTNET_RUNDIR"}
    e.pop("LD_PRELOAD", None)
    e.update(extra)
    return e


def scenario(name, cmd=(), report=None, **extra):
    report = report or os.path.join(OUT, name)
    p = subprocess.run([CTL, "scenario", os.path.join(HERE, name + ".scenario"), "--report", report] +
                       (["--"] + list(cmd) if cmd else []), env=env(**extra), capture_output=True,
                       text=True, timeout=120)
    try:
        rep = json.load(open(os.path.join(report, "report.json")))
    except (OSError, ValueError):
        rep = {}
    return p, rep, report


def expectation(rep, i):
    e = rep.get("expectations", [])
    return e[i] if i < len(e) else {}


# ---- the picture -------------------------------------------------------------------

def pixel(img, x, y):
    return img.getpixel((int(x), int(y)))[:3]


def greenish(c):
    return c[1] > 120 and c[0] < 100 and c[2] < 120


def reddish(c):
    return c[0] > 170 and c[1] < 90 and c[2] < 90


def check_svg(report, title):
    """Renders report.svg to PNG and finds its parts where the SVG says."""
    from PIL import Image
    svg, png = os.path.join(report, "report.svg"), os.path.join(report, "report.png")
    r = subprocess.run(["rsvg-convert", svg, "-o", png], capture_output=True, text=True)
    check("%s: report.svg renders with rsvg-convert" % title, r.returncode == 0, r.stderr)
    if r.returncode:
        return
    tree = ET.parse(svg).getroot()
    img = Image.open(png).convert("RGB")
    check("%s: the PNG has the SVG's size (%sx%s)" % (title, tree.get("width"), tree.get("height")),
          img.size == (int(tree.get("width")), int(tree.get("height"))), img.size)
    rects = tree.findall(SVG + "rect")
    bands = [x for x in rects if x.get("class") == "step"]
    samples = [x for x in rects if (x.get("class") or "").startswith("sample")]
    ok = [x for x in samples if "healthy" == x.get("class").split()[1]]
    bad = [x for x in samples if "unhealthy" == x.get("class").split()[1]]
    # A band's colour shows in the space above the first probe row.
    b = bands[0] if bands else None
    band_px = pixel(img, float(b.get("x")) + float(b.get("width")) / 2, float(b.get("y")) + 30) if b is not None else None
    check("%s: the step is a shaded band where its time is" % title,
          b is not None and band_px != (255, 255, 255) and band_px[2] > band_px[0], band_px)

    def centre(x):
        return float(x.get("x")) + float(x.get("width")) / 2, float(x.get("y")) + 10
    check("%s: healthy samples are green in the picture" % title,
          ok and all(greenish(pixel(img, *centre(x))) for x in ok[:5]),
          [pixel(img, *centre(x)) for x in ok[:3]])
    check("%s: unhealthy samples are red in the picture" % title,
          bad and all(reddish(pixel(img, *centre(x))) for x in bad[:5]),
          [pixel(img, *centre(x)) for x in bad[:3]])
    lines = [x for x in tree.findall(SVG + "line") if "marker" in (x.get("class") or "")]
    labels = [x.text for x in tree.findall(SVG + "text") if x.get("class") == "marker-label"]
    dark = lines and all(sum(pixel(img, float(x.get("x1")), (float(x.get("y1")) + float(x.get("y2"))) / 2)) < 150
                         for x in lines)
    check("%s: the measured times are marked and labelled (%s)" % (title, "; ".join(labels)),
          bool(lines) and dark and any("noticed" in t for t in labels) and
          any("recovered" in t for t in labels), labels)
    plots = [x for x in tree.findall(SVG + "polyline") if x.get("class") == "attempts"]
    check("%s: attempts per second are plotted" % title,
          plots and len(plots[0].get("points").split()) >= 3, [x.attrib for x in plots[:1]])


def text_boxes(svg):
    """Every <text> of the SVG with its box as headless Chromium lays it out
    (getBBox, in the SVG's own units): a page on file:// with the SVG inline
    writes them into its DOM, which --dump-dom prints. None, why: no box."""
    d = tempfile.mkdtemp(dir=TMP)
    page = os.path.join(d, "boxes.html")
    with open(page, "w") as f:
        f.write("<!DOCTYPE html><html><body>%s<pre id='boxes'></pre><script>var o=[];"
                "document.querySelectorAll('svg text').forEach(function(t){var b=t.getBBox();"
                "o.push({cls:t.getAttribute('class'),text:t.textContent,x:b.x,y:b.y,w:b.width,"
                "h:b.height});});document.getElementById('boxes').textContent=JSON.stringify(o);"
                "</script></body></html>" % open(svg).read())
    r = subprocess.run(["chromium", "--headless", "--no-sandbox", "--disable-gpu",
                        "--disable-dev-shm-usage", "--user-data-dir=" + d, "--dump-dom",
                        "file://" + page], capture_output=True, text=True, timeout=120)
    start = r.stdout.find("<pre id=\"boxes\">")
    if r.returncode or start < 0:
        return None, r.stderr[-800:]
    body = r.stdout[start + len("<pre id=\"boxes\">"):r.stdout.find("</pre>", start)]
    return json.loads(html.unescape(body)), ""


def crossing(a, b):
    """Whether two boxes share more than half a pixel each way."""
    return (min(a["x"] + a["w"], b["x"] + b["w"]) - max(a["x"], b["x"]) > 0.5 and
            min(a["y"] + a["h"], b["y"] + b["h"]) - max(a["y"], b["y"]) > 0.5)


def check_no_overlap(report, title):
    boxes, why = (text_boxes(os.path.join(report, "report.svg")) if shutil.which("chromium")
                  else (None, "chromium is not installed (scripts/deps.sh test installs it)"))
    pairs = [(a["text"], b["text"]) for i, a in enumerate(boxes or []) for b in boxes[i + 1:]
             if crossing(a, b)]
    check("%s: no two text boxes of report.svg overlap in Chromium's layout (%d texts)"
          % (title, len(boxes or [])), boxes and not pairs, pairs or why)
    tree = ET.parse(os.path.join(report, "report.svg")).getroot()
    lines = [(x.get("class"), float(x.get("x1")), float(x.get("y1")), float(x.get("y2")))
             for x in tree.findall(SVG + "line") if (x.get("class") or "").startswith("mark")]
    crossed = [(c, b["text"]) for c, x, y1, y2 in lines for b in boxes or []
               if b["x"] + 0.5 < x < b["x"] + b["w"] - 0.5 and
               min(y2, b["y"] + b["h"]) - max(y1, b["y"]) > 0.5]
    check("%s: no marker or mark line crosses a text (%d lines)" % (title, len(lines)),
          boxes and not crossed, crossed or why)


def per_second(v):
    return [v[0]] + [max(v[i] - v[i - 1], 0) for i in range(1, len(v))] if v else []


def check_rates(report, rep, title):
    """The rate axis has values, and attempts show as a line over faults
    that met every one of them (a shaded area, not a line on the line)."""
    from PIL import Image
    tree = ET.parse(os.path.join(report, "report.svg")).getroot()
    ticks = [float(x.get("data-value")) for x in tree.findall(SVG + "text")
             if x.get("class") == "rate-tick"]
    top = max((max(r["attempts_per_s"] or [0]) for r in rep.get("rules", [])), default=0)
    check("%s: the rate axis has values (%s), from 0 to at least the most attempts in a "
          "second (%d)" % (title, ticks, top), ticks and min(ticks) == 0 and max(ticks) >= top and
          len(ticks) >= 3, ticks)
    img = Image.open(os.path.join(report, "report.png")).convert("RGB")
    line = [x for x in tree.findall(SVG + "polyline") if x.get("class") == "attempts"]
    rule = rep["rules"][0] if rep.get("rules") else {}
    both = [i for i, (a, f) in enumerate(zip(rule.get("attempts_per_s", []), rule.get("faults_per_s", [])))
            if f and a == f and f * 4 >= top]
    pts = [tuple(map(float, p.split(","))) for p in line[0].get("points").split()] if line else []
    # On the line, under it (the faults' area) and above it (the background).
    seen = [tuple(pixel(img, pts[i][0] + 3, pts[i][1] + dy) for dy in (0, 6, -6))
            for i in both if 0 < i < len(pts) - 1]
    check("%s: where every attempt met the fault, attempts are a dark line and faults a shaded "
          "area under it (%d such seconds)" % (title, len(seen)),
          seen and all(sum(on) < 400 and under != above for on, under, above in seen), seen)


# ---- the scenarios -------------------------------------------------------------------

# ---- the scenarios -------------------------------------------------------------------

def junit_names(out):
    return [c.get("name") for c in ET.parse(os.path.join(out, "junit.xml")).getroot().findall("testcase")]


def check_marker_times(out, rep, title):
    """Short times in ms: each label says its expectation's measured value."""
    tree = ET.parse(os.path.join(out, "report.svg")).getroot()
    labels = [x.text for x in tree.findall(SVG + "text") if x.get("class") == "marker-label"]
    want = ["%s after %d ms" % ("noticed" if e["kind"] == "unhealthy_within_ms" else "recovered",
                                e["measured"]) for e in rep.get("expectations", [])
            if e["kind"] in ("unhealthy_within_ms", "healthy_within_ms") and 0 <= e["measured"] < 10000]
    check("%s: times under 10 s are labelled in ms, as measured (%s)" % (title, "; ".join(labels)),
          want and sorted(labels) == sorted(want), (labels, want))


def test_drill():
    p, rep, out = scenario("region-drill", [PY, os.path.join(HERE, "failover.py"), "2"])
    notice, recover = expectation(rep, 1).get("measured"), expectation(rep, 2).get("measured")
    check("region drill: passes (exit 0): time to notice %s ms, to recover %s ms (target 5000)"
          % (notice, recover), p.returncode == 0 and rep.get("passed") is True, p.stdout + p.stderr)
    check("region drill: recovery takes at least the 2 s both monitors must fail",
          recover is not None and 2000 <= recover <= 5000, recover)
    steps = rep.get("steps", [{}])
    late = steps[0].get("late_ms")
    check("region drill: the step ran on time (%s ms late; under 10 ms)" % late,
          late is not None and 0 <= late < 10, steps)
    cases = ET.parse(os.path.join(out, "junit.xml")).getroot()
    names = junit_names(out)
    check("region drill: junit.xml has one case per step (named by the step) and per "
          "expectation, none failed",
          cases.get("tests") == "5" and cases.get("failures") == "0" and len(names) == 5 and
          names[0] == "step deny-a", ET.tostring(cases)[:300])
    first = [p["samples"][0]["ok"] if p["samples"] else None for p in rep.get("probes", [])]
    check("region drill: the clock started once the api answered (ready, %s ms): every probe's "
          "first sample is healthy (%s)" % (rep.get("ready_wait_ms"), first),
          first and all(first) and rep.get("ready_wait_ms", 0) > 0, first)
    marks = rep.get("marks", [])
    at, recovered = steps[0].get("actual_ms", 0), steps[0].get("actual_ms", 0) + (recover or 0)
    tree = ET.parse(os.path.join(out, "report.svg")).getroot()
    drawn = [x.get("data-mark") for x in tree.findall(SVG + "line") if x.get("class") == "mark"]
    labels = [x.text for x in tree.findall(SVG + "text") if x.get("class") == "mark-label"]
    check("region drill: the app's failover is a mark (%s) in report.json, between the 2 s both "
          "monitors fail and the recovery, and drawn on the timeline" % marks,
          [m.get("name") for m in marks] == ["failover"] and
          at + 2000 <= marks[0]["t_ms"] <= recovered + 200 and drawn == ["failover"] and
          labels == ["failover"], (marks, at, recovered, drawn, labels))
    check_svg(out, "region drill")
    check_no_overlap(out, "region drill")
    check_marker_times(out, rep, "region drill")
    check_rates(out, rep, "region drill")
    # Again with a quick failover: the times to notice and to recover close
    # together, their labels side by side; other measured values, same names.
    p2, rep2, out2 = scenario("region-drill", [PY, os.path.join(HERE, "failover.py"), "0.5"],
                              report=os.path.join(OUT, "region-drill-quick"))
    names2 = junit_names(out2)
    measured = [(expectation(rep, i).get("measured"), expectation(rep2, i).get("measured"))
                for i in range(4)]
    check("region drill twice: the JUnit test names are identical from run to run, the measured "
          "values (%s) in the message and properties only" % measured,
          names == names2 and len(names) == 5 and not any(str(m) in n for m, _ in measured[:3]
                                                          for n in names), (names, names2))
    check_no_overlap(out2, "region drill, quick failover")
    check_marker_times(out2, rep2, "region drill, quick failover")


def test_storm():
    wasted = {}
    for mode in ("none", "breaker"):
        status = os.path.join(TMP, "storm-%s.status" % mode)
        # The workers call for 5.5 s from the end of their imports, inside
        # the scenario's 6.5 s: their counts print at their end, and a
        # command still running when the scenario ends is stopped (with 6 s
        # a loaded machine's slow import of requests left no counts, in CI).
        p, rep, out = scenario("retry-storm", [PY, os.path.join(ROOT, "tests/http/storm.py"),
                                               "127.85.0.4", "8080", "5.5", "1.5", mode, status],
                               report=os.path.join(OUT, "retry-storm-" + mode), STORM_STATUS=status)
        rules = {r["rule"]: r for r in rep.get("rules", [])}
        answered = rules.get("degraded", {}).get("totals", {}).get("answered", -1)
        api_bad = sum(not s["ok"] for s in rep["probes"][0]["samples"]) if rep else 0
        wasted[mode] = answered - api_bad  # the api probe's own 503s are not the workers'
        workers = [json.loads(x) for x in p.stdout.splitlines() if x.startswith("{")]
        recover = expectation(rep, 2).get("measured")
        check("retry storm (%s): passes; %d requests wasted on 503s, workers healthy %s ms "
              "after the outage began" % (mode, wasted[mode], recover),
              p.returncode == 0 and rep.get("passed") is True, p.stdout[-1500:] + p.stderr)
        check_no_overlap(out, "retry storm (%s)" % mode)
        check("retry storm (%s): the report's count is the workers' own (%s)"
              % (mode, workers[0]["errors_5xx"] if workers else "?"),
              workers and workers[0]["errors_5xx"] == wasted[mode] and not workers[0]["conn_errors"],
              (workers, wasted))
        rq = rep.get("requests", {})
        logged = os.path.join(out, "requests.jsonl")
        check("retry storm (%s): the report folder has the run's request log, and report.json "
              "its requests by outcome: %s answered by the fault (the rule's count), %s by the "
              "server; per second, the fault's only while the outage lasts"
              % (mode, rq.get("fault"), rq.get("server")),
              os.path.exists(logged) and rq.get("fault") == answered and rq.get("server", 0) > 0
              and sum(rq["per_second"]["fault"]) == answered
              and not any(rq["per_second"]["fault"][:1] + rq["per_second"]["fault"][5:]),
              rq)
        svg = os.path.join(out, "report.svg")
        lines = {x.get("data-outcome"): x for x in ET.parse(svg).getroot().findall(SVG + "polyline")
                 if x.get("class") == "requests"} if os.path.exists(svg) else {}
        ys = [float(pt.split(",")[1]) for pt in lines["fault"].get("points").split()] \
            if "fault" in lines else []
        check("retry storm (%s): report.svg plots the requests per second by outcome, the "
              "fault's line rising in the outage only" % mode,
              set(lines) == {"fault", "server", "failed"} and rq
              and len(ys) == len(rq["per_second"]["fault"])
              and [y < ys[0] for y in ys] == [n > 0 for n in rq["per_second"]["fault"]],
              (ys, rq.get("per_second")))
    check("retry storm: the breaker wastes %dx fewer requests (%d vs %d)"
          % (wasted["none"] // max(wasted["breaker"], 1), wasted["none"], wasted["breaker"]),
          wasted["breaker"] > 0 and wasted["none"] >= 5 * wasted["breaker"], wasted)


def test_egress():
    p, rep, out = scenario("egress-blackhole")
    probes = {x["name"]: x for x in rep.get("probes", [])}
    health = probes.get("health", {}).get("samples", [])
    real = probes.get("real-call", {}).get("samples", [])
    check("egress blackhole: passes; the health check stays green (%d samples) while real "
          "calls fail (%d of %d)" % (len(health), sum(not s["ok"] for s in real), len(real)),
          p.returncode == 0 and health and all(s["ok"] for s in health) and
          any(not s["ok"] for s in real), p.stdout + p.stderr)
    check_svg(out, "egress blackhole")
    check_no_overlap(out, "egress blackhole")


def test_failing_expectation():
    text = open(os.path.join(HERE, "egress-blackhole.scenario")).read()
    bad = os.path.join(TMP, "egress-strict.scenario")
    with open(bad, "w") as f:  # time to notice bound below what a 100 ms probe can do
        f.write(text.replace("unhealthy_within_ms = 700", "unhealthy_within_ms = 1"))
    report = os.path.join(TMP, "strict")
    p = subprocess.run([CTL, "scenario", bad, "--report", report], env=env(),
                       capture_output=True, text=True, timeout=60)
    junit = ET.parse(os.path.join(report, "junit.xml")).getroot()
    check("a failed expectation: exit 1, FAIL in the summary, a <failure> in junit.xml",
          p.returncode == 1 and "FAIL expect #2" in p.stdout and junit.get("failures") == "1",
          (p.returncode, p.stdout))


def test_bad_files():
    cases = [
        ('policy = "x.conf";\nduration_ms = 100;\nsteps = ( { name = "s"; at_ms = 1; enable = "a"; '
         'disable = "b"; } );', ":3: step 's': give one action"),
        ('rules = ();\nduration_ms = 100;\nexpect = ( { probe = "nope"; max_failures = 0; } );',
         ":3: expect #1: no probe 'nope'"),
        ('rules = ();\nduration_ms = 100;\nsteps = ( { name = "s"; after = "t"; enable = "a"; } );',
         ":3: step 's': after: no step 't' before it"),
        ('rules = ();\nsteps = ();', "duration_ms is required"),
        ('rules = ();\nduration_ms = 100;\nprobes = ( { name = "p"; url = "ftp://x"; } );',
         ":3: probe 'p': url 'ftp://x' must start with http://"),
    ]
    for text, want in cases:
        path = os.path.join(TMP, "bad.scenario")
        with open(path, "w") as f:
            f.write(text + "\n")
        p = subprocess.run([CTL, "check", path], env=env(), capture_output=True, text=True)
        check("a bad scenario is refused with file and line: %s" % want,
              p.returncode == 1 and want in p.stderr, p.stderr)


# ---- nothing silent (issue 41 item 1) ---------------------------------------------

SILENT_POLICY = """rules = (
  { name = "deny-a"; action = "refuse"; enabled = false; match = { to = "127.88.0.1/32"; port = 9; }; },
  { name = "idle"; action = "blackhole"; enabled = false; match = { to = "127.88.0.2/32"; }; },
  { name = "h"; action = "respond"; status = 503; match = { to = "127.88.0.3/32"; port = 8099; }; }
);
zones = ( { name = "z1"; cidrs = [ "127.88.1.0/24" ]; } );
"""
# The command: joins the group, connects once to deny-a's address, waits.
CONNECT = [PY, "-c", "import socket,time\ntry: socket.create_connection(('127.88.0.1', 9), timeout=1)\n"
           "except OSError: pass\ntime.sleep(30)"]


def silent(name, body, cmd=(), args=()):
    """Writes a scenario over SILENT_POLICY and runs it; (process, report)."""
    with open(os.path.join(TMP, "silent.conf"), "w") as f:
        f.write(SILENT_POLICY)
    path = os.path.join(TMP, name + ".scenario")
    with open(path, "w") as f:
        f.write('policy = "silent.conf";\n' + body)
    report = os.path.join(TMP, "r-" + name)
    p = subprocess.run([CTL, "scenario", path, "--report", report] + list(args) +
                       (["--"] + list(cmd) if cmd else []), env=env(), capture_output=True,
                       text=True, timeout=120)
    try:
        rep = json.load(open(os.path.join(report, "report.json")))
    except (OSError, ValueError):
        rep = {}
    return p, rep, path


def check_refused(title, body, want):
    _, _, path = silent("refused", body)
    p = subprocess.run([CTL, "check", path], env=env(), capture_output=True, text=True)
    r = subprocess.run([CTL, "scenario", path], env=env(), capture_output=True, text=True,
                       timeout=60)
    check("faultctl check refuses %s: %s" % (title, want),
          p.returncode == 1 and want in p.stderr and r.returncode == 78 and want in r.stderr,
          (p.returncode, p.stderr, r.returncode, r.stderr))


def test_names_resolved():
    check_refused("a misspelt rule, with the closest name", 'duration_ms = 1000;\n'
                  'steps = ( { name = "on"; at_ms = 10; enable = "deny-A"; } );\n',
                  ":3: step 'on': no rule 'deny-A' in the policy")
    check_refused("a misspelt rule (suggestion)", 'duration_ms = 1000;\n'
                  'steps = ( { name = "on"; at_ms = 10; enable = "deny-A"; } );\n',
                  "(did you mean 'deny-a'?)")
    check_refused("a zone the policy lacks", 'duration_ms = 1000;\n'
                  'steps = ( { name = "z"; at_ms = 10; zone = "z2"; } );\n',
                  ":3: step 'z': no zone 'z2' in the policy")
    check_refused("an expectation on a rule the policy lacks", 'duration_ms = 1000;\n'
                  'expect = ( { rule = "denya"; faults_min = 1; } );\n',
                  ":3: expect #1: no rule 'denya' in the policy")
    check_refused("a step after duration_ms", 'duration_ms = 1000;\n'
                  'steps = ( { name = "late"; at_ms = 1500; enable = "deny-a"; } );\n',
                  ":3: step 'late': it would run at 1500 ms, after the scenario's duration_ms")
    check_refused("a step after duration_ms through after", 'duration_ms = 1000;\n'
                  'steps = ( { name = "a"; at_ms = 600; enable = "deny-a"; },\n'
                  '  { name = "b"; after = "a"; after_ms = 600; disable = "deny-a"; } );\n',
                  ":4: step 'b': it would run at 1200 ms")
    check_refused("a step whose for_ms would end after duration_ms", 'duration_ms = 1000;\n'
                  'steps = ( { name = "f"; at_ms = 500; enable = "deny-a"; for_ms = 800; } );\n',
                  ":3: step 'f': its for_ms (800) would end at 1300 ms, after the scenario's "
                  "duration_ms (1000)")
    check_refused("a counter its rule never has (the stats' words: a connection rule "
                  "counts attempts, not requests)", 'duration_ms = 1000;\n'
                  'expect = ( { rule = "deny-a"; requests_min = 1; } );\n',
                  ":3: expect #1: rule 'deny-a' (refuse) counts attempts (connects), not "
                  "requests: say attempts_min")
    check_refused("a misspelt key, with the closest", 'duration_ms = 1000;\n'
                  'steps = ( { name = "a"; at_ms = 10; enabel = "deny-a"; } );\n',
                  "unknown key 'enabel', did you mean 'enable'?")
    # Inline rules: the message names the scenario's rules, not the
    # temporary file faultctl wrote them to (gone when the user reads it).
    path = os.path.join(TMP, "inline.scenario")
    with open(path, "w") as f:
        f.write('rules = ( { name = "deny-a"; action = "refuse"; enabled = false; '
                'match = { to = "127.88.0.1/32"; }; } );\nduration_ms = 1000;\n'
                'steps = ( { name = "on"; at_ms = 10; enable = "deny-A"; } );\n')
    p = subprocess.run([CTL, "check", path], env=env(), capture_output=True, text=True)
    check("inline rules: a misspelt rule is said against the scenario's rules, not a temporary file",
          p.returncode == 1 and "no rule 'deny-A' in the scenario's rules (did you mean 'deny-a'?)"
          in p.stderr and "faultctl-policy" not in p.stderr, p.stderr)
    _, _, path = silent("added", 'duration_ms = 1000;\nsteps = ( { name = "a"; at_ms = 10; add = '
                        '"{ name = \\"new\\"; action = \\"drop\\"; match = { to = \\"127.88.0.3/32\\"; }; }"; },\n'
                        '  { name = "b"; at_ms = 20; disable = "new"; } );\n')
    p = subprocess.run([CTL, "check", path], env=env(), capture_output=True, text=True)
    check("faultctl check knows a rule an add step adds", p.returncode == 0, p.stderr)


def test_step_failures():
    # A step to a group no process has joined (a typo): refused, the run fails.
    p, rep, _ = silent("typo-group", 'duration_ms = 600;\nsteps = ( { name = "other"; at_ms = 100; '
                       'group = "no-such-group-%d"; enable = "deny-a"; } );\n' % os.getpid())
    steps = rep.get("steps", [{}])
    junit = ET.parse(os.path.join(TMP, "r-typo-group", "junit.xml")).getroot()
    check("a step whose change is refused fails the scenario: exit 1, the step named",
          p.returncode == 1 and "FAIL step other: enable deny-a failed" in p.stdout and
          "result: failed" in p.stdout and rep.get("passed") is False and
          steps[0].get("problem", "").startswith("step other") and junit.get("failures") == "1",
          (p.returncode, p.stdout, steps))
    # 300 steps due at once cannot all run within 50 ms of their time.
    many = ",\n".join('{ name = "s%d"; at_ms = 0; %s = "deny-a"; }' % (i, ("enable", "disable")[i % 2])
                      for i in range(300))
    p, rep, _ = silent("late", "duration_ms = 3000;\nlate_ms_max = 50;\nsteps = (\n%s\n);\n" % many)
    late = [s for s in rep.get("steps", []) if "ms late" in s.get("problem", "")]
    check("steps later than late_ms_max fail the scenario (%d of 300 late)" % len(late),
          p.returncode == 1 and late and "ms late (late_ms_max 50)" in p.stdout, p.stdout[-800:])


def test_min_and_unfired():
    body = ('duration_ms = 1200;\nsteps = ( { name = "on"; at_ms = 0; enable = "deny-a"; },\n'
            '  { name = "idle-on"; at_ms = 100; enable = "idle"; } );\n')
    p, rep, _ = silent("joined", body, cmd=CONNECT)
    steps = rep.get("steps", [{}])
    check("the clock starts once the command has joined: the step at 0 ms met it (%s)"
          % steps[0].get("message"), "(1 process)" in steps[0].get("message", "") and
          rep.get("joined", 0) >= 1, (p.stdout, steps[:1]))
    p, rep, _ = silent("min-held", body + 'expect = ( { rule = "deny-a"; faults_min = 1; } );\n',
                       cmd=CONNECT)
    check("faults_min held when the rule fired; the rule switched on that never fired is "
          "reported (summary and report.json) but passes without --strict",
          p.returncode == 0 and rep.get("unfired") == ["idle"] and
          "rule idle was switched on by a step and never matched anything" in p.stdout and
          expectation(rep, 0).get("kind") == "faults_min", (p.returncode, p.stdout))
    p, rep, _ = silent("strict", body, cmd=CONNECT, args=["--strict"])
    check("--strict: a rule a step switched on that never fired fails the scenario",
          p.returncode == 1 and "FAIL rule idle was switched on" in p.stdout and
          rep.get("strict_problem", "").startswith("--strict: rule idle"), p.stdout)
    p, rep, _ = silent("min-failed", body + 'expect = ( { rule = "idle"; attempts_min = 1; } );\n',
                       cmd=CONNECT)
    check("attempts_min fails when the rule never fired: exit 1",
          p.returncode == 1 and "FAIL expect #1: rule idle: attempts 0 (at least 1)" in p.stdout,
          p.stdout)
    p, rep, _ = silent("nobody", 'duration_ms = 300;\n', args=["--strict"])
    check("--strict: a scenario no process joined fails", p.returncode == 1 and
          "no process joined" in rep.get("strict_problem", ""), (p.stdout, rep.get("strict_problem")))


# ---- the readiness gate and marks (issue 41 item 7) ------------------------------------

# The command: joins the group at once, listens only after a second.
SLOW_START = [PY, "-c", "import http.server,time\ntime.sleep(1)\nhttp.server.HTTPServer(('127.88.0.9', "
              "8080), http.server.SimpleHTTPRequestHandler).serve_forever()"]


def test_ready():
    probe = ('probes = ( { name = "app"; url = "http://127.88.0.9:8080/"; interval_ms = 100; '
             'shim = false; ready = true; } );\n')
    p, rep, _ = silent("ready", 'duration_ms = 600;\n' + probe, cmd=SLOW_START, args=[])
    samples = rep.get("probes", [{}])[0].get("samples", [])
    check("a ready probe: the clock starts once it is healthy (%s ms after the command joined): "
          "its first sample is green, the run passes" % rep.get("ready_wait_ms"),
          p.returncode == 0 and samples and all(x["ok"] for x in samples) and
          rep.get("ready_wait_ms", 0) >= 800 and "the clock waited" in p.stdout,
          (p.returncode, p.stdout, p.stderr, samples[:3]))
    p, rep, _ = silent("not-ready", 'duration_ms = 300;\nready_ms_max = 400;\n' +
                       probe.replace("127.88.0.9", "127.88.0.10"), cmd=CONNECT)
    check("a ready probe never healthy within ready_ms_max fails the run, the probe named",
          p.returncode == 1 and "FAIL ready: probe app was not healthy within ready_ms_max (400 ms)"
          in p.stdout and rep.get("not_ready") == "app", (p.returncode, p.stdout, p.stderr))


def test_marks():
    # faultctl mark from inside the command (its group: FAULTNET_GROUP), then
    # a line in the file FAULTNET_MARKS names.
    cmd = ["sh", "-c", 'sleep 0.4; "%s" mark "one & <two>"; sleep 0.4; echo three >>"$FAULTNET_MARKS"; '
           'sleep 30' % CTL]
    p, rep, _ = silent("marks", 'duration_ms = 1500;\n', cmd=cmd)
    marks = rep.get("marks", [])
    names = [m.get("name") for m in marks]
    check("marks from the app: faultctl mark NAME (its own time) and a line of $FAULTNET_MARKS, "
          "in report.json and the summary (%s)" % marks,
          names == ["one & <two>", "three"] and 300 <= marks[0]["t_ms"] <= 1000 and
          marks[0]["t_ms"] + 300 <= marks[1]["t_ms"] <= 1450 and
          marks[0]["by"] == "faultctl mark" and "mark three" in p.stdout, (p.stdout, p.stderr))
    tree = ET.parse(os.path.join(TMP, "r-marks", "report.svg")).getroot()
    drawn = [x.get("data-mark") for x in tree.findall(SVG + "line") if x.get("class") == "mark"]
    check("marks are drawn on the timeline of report.svg (%s)" % drawn,
          drawn and drawn == names, drawn)
    # A file the scenario names: what it held before the run is not a mark.
    named = os.path.join(TMP, "app.marks")
    with open(named, "w") as f:
        f.write("before\n")
    p, rep, _ = silent("named", 'duration_ms = 800;\nmarks_file = "%s";\n' % named,
                       cmd=["sh", "-c", "sleep 0.3; echo failback >>%s; sleep 30" % named])
    check("marks_file: a line the app writes to the file the scenario names is a mark",
          [m.get("name") for m in rep.get("marks", [])] == ["failback"], (rep.get("marks"), p.stdout))
    r = subprocess.run([CTL, "-g", "no-scenario-%d" % os.getpid(), "mark", "x"], env=env(),
                       capture_output=True, text=True)
    check("faultctl mark to a group where no scenario runs: exit 1 with the reason",
          r.returncode == 1 and "no scenario is running in group" in r.stderr, (r.returncode, r.stderr))
    # The file a scenario killed (SIGKILL) could not remove takes no mark.
    group = "killed-%d" % os.getpid()
    rundir = os.environ.get("FAULTNET_RUNDIR") or "/tmp/faultnet-%d" % os.getuid()
    left = os.path.join(rundir, group + ".marks")
    with open(os.path.join(TMP, "killed.scenario"), "w") as f:
        f.write('policy = "silent.conf";\ngroup = "%s";\nduration_ms = 30000;\n' % group)
    k = subprocess.Popen([CTL, "scenario", os.path.join(TMP, "killed.scenario")], env=env(),
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(1000):  # the scenario creates its file before its command starts
        if os.path.exists(left) and os.path.getsize(left):
            break
        time.sleep(0.01)
    alive = subprocess.run([CTL, "-g", group, "mark", "x"], env=env(), capture_output=True, text=True)
    k.kill()
    k.wait()
    gone = subprocess.run([CTL, "-g", group, "mark", "x"], env=env(), capture_output=True, text=True)
    check("faultctl mark: taken while the scenario runs, refused once it was killed and its "
          "file left behind (%s)" % gone.stderr.strip(), alive.returncode == 0 and
          os.path.exists(left) and gone.returncode == 1 and "has gone" in gone.stderr,
          (alive.returncode, alive.stderr, gone.returncode, gone.stderr))
    if os.path.exists(left):
        os.unlink(left)


def test_strict_opaque():
    """--strict: a TLS client whose ALPN offers neither h2 nor http/1.1
    under an HTTP rule (passed through as bytes) fails the scenario,
    named, and the shim says it on the command's stderr."""
    h2 = [PY, "-c", "import socket, ssl, time\nctx = ssl.create_default_context()\n"
          "ctx.set_alpn_protocols(['spdy/3.1'])\ntry: ctx.wrap_socket(socket.create_connection("
          "('127.88.0.3', 8099), timeout=2), server_hostname='api.test')\n"
          "except OSError: pass\ntime.sleep(30)"]
    p, rep, _ = silent("h2only", "duration_ms = 1500;\n", cmd=h2, args=["--strict"])
    check("--strict: a TLS client offering only spdy/3.1 under an HTTP rule fails the scenario, the "
          "pass-through named (%s)" % rep.get("strict_problem"),
          p.returncode == 1 and "1 of them TLS passed through" in rep.get("strict_problem", ""),
          (p.returncode, p.stdout[-500:]))
    check("--strict: the shim said it on the command's stderr",
          "faultnet: --strict: HTTP rules cover a connection to 127.88.0.3:8099 they cannot "
          "read (TLS whose ALPN offers neither h2 nor http/1.1, passed through)" in p.stderr, p.stderr[-500:])


# ---- SIGINT ----------------------------------------------------------------------------

SIGINT_POLICY = """rules = (
  { name = "a"; action = "blackhole"; enabled = false; match = { to = "127.87.0.1/32"; }; },
  { name = "b"; action = "refuse"; match = { to = "127.87.0.2/32"; }; },
  { name = "d"; action = "stall"; enabled = false; match = { to = "127.87.0.4/32"; }; },
  { name = "e"; action = "drop"; enabled = false; match = { to = "127.87.0.5/32"; }; }
);
"""
SIGINT_SCENARIO = """policy = "sigint.conf";
group = "%s";
duration_ms = 3000;
steps = (
  { name = "s1"; at_ms = 50; enable = "a"; },
  { name = "s2"; at_ms = 150; disable = "b"; },
  { name = "s3"; at_ms = 250; add = "{ name = \\"c\\"; action = \\"drop\\"; match = { to = \\"127.87.0.3/32\\"; }; }"; },
  { name = "s4"; after = "s3"; after_ms = 100; enable = "d"; for_ms = 500; },
  { name = "s5"; at_ms = 100; pids = [ %d ]; enable = "e"; }
);
probes = ( { name = "p"; command = "true"; interval_ms = 50; } );
"""


def rules_of(pid):
    p = subprocess.run([CTL, "-p", str(pid), "--json", "rules"], env=env(), capture_output=True,
                       text=True, timeout=30)
    return {r["name"]: r["enabled"] for r in map(json.loads, p.stdout.splitlines())}


def test_sigint():
    group = "sigint-%d" % os.getpid()
    with open(os.path.join(TMP, "sigint.conf"), "w") as f:
        f.write(SIGINT_POLICY)
    path = os.path.join(TMP, "sigint.scenario")
    agent = subprocess.Popen([CTL, "run", "--config", os.path.join(TMP, "sigint.conf"), "-g", group,
                              "--", PY, "-c", "import time; time.sleep(600)"], env=env())
    time.sleep(1)
    with open(path, "w") as f:  # step s5 targets the agent by its pid
        f.write(SIGINT_SCENARIO % (group, agent.pid))
    want = {"a": "no", "b": "yes", "d": "no", "e": "no"}
    p = subprocess.Popen([CTL, "scenario", path], env=env(), stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    time.sleep(0.6)
    during = rules_of(agent.pid)
    p.send_signal(signal.SIGINT)
    p.wait(timeout=30)
    check("a step with pids changes those processes (e on in the agent during the run: %s)"
          % during.get("e"), during.get("e") == "yes" and during.get("a") == "yes", during)
    # A SIGINT that comes before faultctl has set its handler (its first
    # milliseconds) ends it by the default action (-SIGINT), having changed
    # nothing: the rules and the journal are checked all the same.
    rng = random.Random(int(os.environ.get("FAULTNET_SEED", "0") or 0) or None)
    bad, codes = [], set()
    journal = os.path.join(os.environ.get("FAULTNET_RUNDIR", ""), group + ".journal")
    for i in range(20):
        p = subprocess.Popen([CTL, "scenario", path], env=env(), stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
        time.sleep(rng.uniform(0.0, 1.2))
        p.send_signal(signal.SIGINT)
        codes.add(p.wait(timeout=30))
        got = rules_of(agent.pid)
        lines = open(journal).read().splitlines() if os.path.exists(journal) else []
        left = [x for x in lines if " reset" not in x and not x.endswith("reset")]
        if got != want or left:
            bad.append((i, got, left))
    agent.kill()
    agent.wait()
    check("SIGINT at 20 random moments: every rule as the policy file set it, and the group "
          "journal without the scenario's changes (exit %s)" % sorted(codes),
          not bad and codes <= {130, 0, -signal.SIGINT}, bad[:3])


def main():
    servers = [origin.Origin(8080, h).start() for h in
               ("127.86.1.1", "127.86.2.1", "127.85.0.4", "127.86.3.1", "127.66.0.1")]
    os.makedirs(OUT, exist_ok=True)
    for t in checks.selected([test_bad_files, test_names_resolved, test_step_failures,
                              test_min_and_unfired, test_ready, test_marks, test_strict_opaque, test_drill, test_storm, test_egress,
                              test_failing_expectation, test_sigint]):
        t()
    for s in servers:
        s.shutdown()
    subprocess.run(["rm", "-rf", TMP])
    sys.exit(1 if checks.failed else 0)


if __name__ == "__main__":
    main()
