"""reqlog_test.py - the request log (FAULTNET_REQUESTS) and `faultctl
requests`: the pinned S3 SDK's sends per call read from the log alone, each
call's sends under one invocation id with attempts 1..3 in order, the log's
answered requests against the rule's counter (and, for 6 workers' retry
storm, the workers' own count); three processes sharing one log; credentials (every header and
query parameter of the built-in list, a presigned S3 URL, a name the user
adds) never in the log or the HAR; HAR 1.2 validated (npm's har-validator,
or a schema check saying why) with timings that agree with the log; the
filters, --follow, bad input, the size cap and the file's mode; requests
never answered (a server that stays silent, HTTP/1.1 and HTTP/2, or closes)
still in the log when the app exits, said to be unanswered.

usage: reqlog_test.py BUILD_DIR [PRELOAD_FIRST]"""
import json
import os
import re
import stat
import subprocess
import socket
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)
import checks  # noqa: E402
from checks import check  # noqa: E402
import origin  # noqa: E402

BUILD = os.path.abspath(sys.argv[1])
FIRST = sys.argv[2] if len(sys.argv) > 2 else ""
LIB = (FIRST + ":" if FIRST else "") + os.path.join(BUILD, "libfaultnet.so")
CTL = os.path.join(BUILD, "faultctl")
MODS = os.path.join(ROOT, "tests", "conformance", "node_modules")
TMP = tempfile.mkdtemp(prefix="fn-reqlog-")
HOST = "127.85.0.2"

CONF = """rules = (
  { name = "cred-503"; action = "respond"; status = 503; retry_after = 9;
    headers = [ "Set-Cookie: session=COOKIESECRETFROMSERVER" ];
    match = { to = "%(h)s/32"; port = 9000; path = "/secret/*"; }; },
  { name = "slow-200"; action = "slow"; delay_ms = 200;
    match = { to = "%(h)s/32"; port = 9000; path = "/slow/*"; }; }
);
""" % {"h": HOST}


def env(**extra):
    e = {k: v for k, v in os.environ.items() if not k.startswith("FAULTNET_")}
    e.update(FAULTNET_CONFIG=conf_file(), LD_PRELOAD=LIB, ASAN_OPTIONS="detect_leaks=0")
    e.update(extra)
    return e


def conf_file():
    path = os.path.join(TMP, "reqlog.conf")
    if not os.path.exists(path):
        with open(path, "w") as f:
            f.write(CONF)
    return path


# The app: http.client on one keep-alive connection (curl hangs with a
# sanitizer runtime preloaded: see http_faults.py), each answer's status a line.
CLIENT = r"""
import http.client, json, sys, urllib.parse
hdrs, urls = json.loads(sys.argv[1])
conn = None
for u in urls:
    p = urllib.parse.urlsplit(u)
    conn = conn or http.client.HTTPConnection(p.hostname, p.port, timeout=10)
    conn.request("GET", p.path + ("?" + p.query if p.query else ""), headers=hdrs)
    r = conn.getresponse()
    r.read()
    print(r.status, flush=True)
"""


def fetch(args, **extra):
    """The client under the shim: args are "Name: value" headers after -H,
    and URLs (one host and port)."""
    hdrs = {}
    for i, a in enumerate(args):
        if i and args[i - 1] == "-H":
            k, v = a.split(": ", 1)
            hdrs[k] = v
    urls = [a for a in args if a.startswith("http")]
    return subprocess.run(["/usr/bin/python3", "-c", CLIENT, json.dumps([hdrs, urls])],
                          env=env(**extra), capture_output=True, text=True, timeout=60)


def lines(path):
    with open(path) as f:
        return [json.loads(x) for x in f if x.strip()]


def ctl(*args):
    return subprocess.run([CTL, "requests"] + list(args), capture_output=True, text=True,
                          timeout=60)


# ---- the S3 SDK's calls ---------------------------------------------------------

def attempts_of(rec):
    h = dict(rec["req_headers"])
    m = re.match(r"attempt=(\d+); max=(\d+)", h.get("amz-sdk-request", ""))
    return (int(m.group(1)), int(m.group(2))) if m else None


def test_s3_calls(node):
    log = os.path.join(TMP, "s3.jsonl")
    o = origin.Origin(9000, "127.85.0.1").start()
    e = {k: v for k, v in os.environ.items() if not k.startswith("FAULTNET_") and k != "LD_PRELOAD"}
    p = subprocess.run([CTL, "run", "--config", os.path.join(ROOT, "policies", "s3-internal-error.conf"),
                        "--stats", "--json", "--requests", log, "--", node,
                        os.path.join(HERE, "s3_quota.js"), "127.85.0.1", "9000", "30"],
                       env=e, capture_output=True, text=True, timeout=300)
    o.shutdown()
    recs = [json.loads(x) for x in p.stderr.splitlines() if x.startswith("{")]
    rule = [r for r in recs if r.get("type") == "rule" and r.get("name") == "s3-500"]
    check("the S3 SDK ran 30 calls under the policy with --requests", p.returncode == 0
          and os.path.exists(log), p.stderr[-800:])
    if not os.path.exists(log):
        return
    per = ctl("--per-call", log)
    check("faultctl requests --per-call prints 3 x17, 2, 1 x12 from the log alone",
          per.stdout.strip() == "3 x17, 2, 1 x12", per.stdout + per.stderr)
    got = lines(log)
    calls = {}
    for r in got:
        calls.setdefault(dict(r["req_headers"]).get("amz-sdk-invocation-id"), []).append(r)
    ordered = all(attempts_of(r) == (i + 1, 3) for sends in calls.values()
                  for i, r in enumerate(sends))
    check("30 invocation ids; every send of one call carries its id, attempts 1..3 in order",
          len(calls) == 30 and None not in calls and ordered,
          [(k, [attempts_of(r) for r in v]) for k, v in list(calls.items())[:4]])
    answered = [r for r in got if r["fate"] == "answered" and r["rule"] == "s3-500"]
    check("the log's answered requests (%d) are the rule's answered counter" % len(answered),
          rule and rule[0].get("answered") == len(answered) == len(got)
          and all(r["status"] == 500 and r["rule_status"] == 500 for r in got),
          (len(answered), rule))
    mono = [r["req_mono_us"] for r in got]
    check("each line has request, first-byte and end times, in order",
          mono == sorted(mono) and all(r["req_mono_us"] <= r["first_mono_us"] <= r["end_mono_us"]
                                       for r in got), got[:1])
    check("the SDK's signature is not in the log (Authorization is not kept by default)",
          "AWS4-HMAC-SHA256" not in open(log).read())


def test_storm():
    """6 workers' retry storm (tests/http/storm.py) against a 5xx outage of
    3 s: the log's answered requests, the rule's counter and the workers'
    own count of 5xx answers are one number."""
    log = os.path.join(TMP, "storm.jsonl")
    o = origin.Origin(8080, "127.85.0.4").start()
    conf = os.path.join(TMP, "storm.conf")
    text = open(os.path.join(ROOT, "policies", "http-5xx-then-healthy.conf")).read()
    with open(conf, "w") as f:
        f.write(text.replace("for_ms = 60000", "for_ms = 3000"))
    e = {k: v for k, v in os.environ.items() if not k.startswith("FAULTNET_") and k != "LD_PRELOAD"}
    p = subprocess.run([CTL, "run", "--config", conf, "--stats", "--json", "--requests", log, "--",
                        "/usr/bin/python3", os.path.join(HERE, "storm.py"), "127.85.0.4", "8080",
                        "6", "1.5", "none"], env=e, capture_output=True, text=True, timeout=120)
    o.shutdown()
    recs = [json.loads(x) for x in p.stderr.splitlines() if x.startswith("{")]
    rule = [r for r in recs if r.get("type") == "rule" and r.get("name") == "degraded-60s"]
    out = json.loads(p.stdout.strip().splitlines()[-1]) if p.stdout.strip() else {}
    got = lines(log) if os.path.exists(log) else []
    answered = len([r for r in got if r["fate"] == "answered" and r["rule"] == "degraded-60s"])
    check("storm of 6 workers: the log's answered requests (%d) = the rule's counter = the "
          "workers' 5xx count, and the rest reached the server" % answered,
          rule and answered > 0 and answered == rule[0].get("answered") == out.get("errors_5xx")
          and len(got) == out.get("requests")
          and all(r["reached_server"] for r in got if r["fate"] == "untouched"),
          (answered, rule, out, len(got)))


def test_processes():
    """Three processes append to one log at once: every line whole, each
    process's requests all there, numbered 1..N on its connection."""
    log = os.path.join(TMP, "procs.jsonl")
    urls = ["http://%s:9000/secret/%d" % (HOST, i) for i in range(60)]
    ps = [subprocess.Popen(["/usr/bin/python3", "-c", CLIENT, json.dumps([{}, urls])],
                           env=env(FAULTNET_REQUESTS=log), stdout=subprocess.PIPE, text=True)
          for _ in range(3)]
    outs = [p.communicate(timeout=60)[0].split() for p in ps]
    got = lines(log) if os.path.exists(log) else []
    pids = {}
    for r in got:
        pids.setdefault(r["pid"], []).append(r["n"])
    check("3 processes x 60 requests into one log: 180 whole lines, 1..60 in order per process",
          all(o == ["503"] * 60 for o in outs) and len(got) == 180 and len(pids) == 3
          and all(v == list(range(1, 61)) for v in pids.values()), (len(got), list(pids)))


# ---- credentials ----------------------------------------------------------------

SECRET_HEADERS = {
    "Authorization": "AWS4-HMAC-SHA256 Credential=AKIAHDRSECRET/x, Signature=HDRSIGSECRET0001",
    "Proxy-Authorization": "Basic UFJPWFlTRUNSRVQ=",
    "X-Amz-Security-Token": "HDRSESSIONTOKENSECRET0002",
    "x-api-key": "APIKEYSECRET0003",
    "api-key": "APIKEYSECRET0004",
    "x-goog-api-key": "GOOGKEYSECRET0005",
    "Cookie": "sid=COOKIESECRET0006",
    "X-Custom-Secret": "CUSTOMSECRET0007",
}
SECRET_QUERY = {"sig": "QSIGSECRET0008", "access_token": "QTOKENSECRET0009",
                "x-custom-secret": "QCUSTOMSECRET0010"}
KEEP = "+" + ",".join(h.lower() for h in SECRET_HEADERS) + ",set-cookie"


def presigned():
    """A presigned S3 GetObject URL with a session token (botocore), or a
    hand-made one of the same shape when boto3 is missing."""
    try:
        import boto3
        from botocore.config import Config
        s3 = boto3.client("s3", endpoint_url="http://%s:9000" % HOST, region_name="us-east-1",
                          config=Config(signature_version="s3v4"),
                          aws_access_key_id="AKIAPRESIGNSECRET11",
                          aws_secret_access_key="presignsecretkey",
                          aws_session_token="PRESIGNSESSIONTOKEN12")
        return s3.generate_presigned_url("get_object", Params={"Bucket": "bucket", "Key": "key"},
                                         ExpiresIn=3600), "botocore"
    except ImportError:
        return ("http://%s:9000/bucket/key?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential="
                "AKIAPRESIGNSECRET11%%2F20260101%%2Fus-east-1%%2Fs3%%2Faws4_request&X-Amz-Date="
                "20260101T000000Z&X-Amz-Expires=3600&X-Amz-SignedHeaders=host&X-Amz-Security-Token="
                "PRESIGNSESSIONTOKEN12&X-Amz-Signature=%s" % (HOST, "ab" * 32)), "by hand"


def test_credentials():
    log = os.path.join(TMP, "cred.jsonl")
    url, how = presigned()
    sig = re.search(r"X-Amz-Signature=([0-9a-f]+)", url).group(1)
    secret_url = "http://%s:9000/secret/x?%s&keep=visible" % (
        HOST, "&".join("%s=%s" % kv for kv in SECRET_QUERY.items()))
    hdrs = sum((["-H", "%s: %s" % kv] for kv in SECRET_HEADERS.items()), [])
    r = fetch(hdrs + [secret_url, url], FAULTNET_REQUESTS=log, FAULTNET_REQUESTS_HEADERS=KEEP,
             FAULTNET_REQUESTS_REDACT="x-custom-secret")
    check("the client sent the credentials (503 from the rule) and a presigned URL (%s; 200 from the "
          "server)" % how, r.stdout.split() == ["503", "200"], r.stdout + r.stderr)
    har = os.path.join(TMP, "cred.har")
    h = ctl("--har", har, log)
    texts = {"log": open(log).read() if os.path.exists(log) else "",
             "HAR": open(har).read() if h.returncode == 0 else ""}
    values = list(SECRET_HEADERS.values()) + list(SECRET_QUERY.values()) + [
        "COOKIESECRETFROMSERVER", "AKIAPRESIGNSECRET11", "PRESIGNSESSIONTOKEN12", sig]
    for what, text in texts.items():
        leaked = [v for v in values if v in text or v.split()[-1] in text]
        check("no credential value in the %s (%d values looked for)" % (what, len(values)),
              text and not leaked, leaked or "empty")
    got = lines(log) if os.path.exists(log) else []
    sec = [x for x in got if x["path"] == "/secret/x"]
    kept = dict(sec[0]["req_headers"]) if sec else {}
    want = {k.lower(): "(redacted:%d)" % len(v) for k, v in SECRET_HEADERS.items()}
    check("each credential header is there as its length", all(kept.get(k) == v
                                                             for k, v in want.items()), kept)
    resp = dict(sec[0]["resp_headers"]) if sec else {}
    check("Set-Cookie of the answer as its length, Retry-After as it is",
          resp.get("set-cookie") == "(redacted:%d)" % len("session=COOKIESECRETFROMSERVER")
          and resp.get("retry-after") == "9", resp)
    q = sec[0]["query"] if sec else ""
    check("credential query parameters as their length, the others as they are",
          all("%s=(redacted:%d)" % (k, len(v)) in q for k, v in SECRET_QUERY.items())
          and "keep=visible" in q, q)
    pre = [x for x in got if x["path"] == "/bucket/key"]
    pq = pre[0]["query"] if pre else ""
    check("the presigned URL: X-Amz-Signature, X-Amz-Credential and X-Amz-Security-Token as "
          "their length, X-Amz-Expires kept; untouched, reached the server, status 200",
          pre and "X-Amz-Signature=(redacted:%d)" % len(sig) in pq
          and re.search(r"X-Amz-Credential=\(redacted:\d+\)", pq)
          and re.search(r"X-Amz-Security-Token=\(redacted:\d+\)", pq)
          and "X-Amz-Expires=3600" in pq and pre[0]["fate"] == "untouched"
          and pre[0]["reached_server"] and pre[0]["status"] == 200, pre)


# ---- HAR, filters, follow -------------------------------------------------------

def slow_log():
    log = os.path.join(TMP, "slow.jsonl")
    if not os.path.exists(log):
        fetch(["http://%s:9000/slow/a" % HOST, "http://%s:9000/secret/b" % HOST,
              "http://%s:9000/plain/c" % HOST], FAULTNET_REQUESTS=log)
    return log


def validate_har(path):
    """npm's har-validator when tests/conformance has it; else the HAR 1.2
    fields checked here, with the reason."""
    if os.path.isdir(os.path.join(MODS, "har-validator")) and checks.node_bin(ROOT):
        js = ("require(%r).har(JSON.parse(require('fs').readFileSync(%r,'utf8')))"
              ".then(()=>console.log('valid'),e=>{console.log(JSON.stringify(e.errors||e.message));"
              "process.exit(1)})" % (os.path.join(MODS, "har-validator"), path))
        p = subprocess.run([checks.node_bin(ROOT), "-e", js], capture_output=True, text=True)
        return p.returncode == 0 and "valid" in p.stdout, "har-validator", p.stdout + p.stderr
    why = "schema check (har-validator not in tests/conformance/node_modules: make's npm ci puts it there)"
    h = json.load(open(path))["log"]
    ok = h["version"] == "1.2" and h["creator"]["name"] and isinstance(h["entries"], list)
    for e in h["entries"]:
        rq, rs = e["request"], e["response"]
        ok = ok and all(k in rq for k in ("method", "url", "httpVersion", "cookies", "headers",
                                          "queryString", "headersSize", "bodySize"))
        ok = ok and all(k in rs for k in ("status", "statusText", "httpVersion", "cookies",
                                          "headers", "content", "redirectURL", "headersSize",
                                          "bodySize"))
        ok = ok and all(k in e["timings"] for k in ("send", "wait", "receive"))
        ok = ok and re.match(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$", e["startedDateTime"])
    return bool(ok), why, ""


def test_har():
    log = slow_log()
    har = os.path.join(TMP, "slow.har")
    h = ctl("--har", har, log)
    check("faultctl requests --har writes the file", h.returncode == 0, h.stderr)
    if h.returncode:
        return
    ok, how, detail = validate_har(har)
    check("the HAR is valid HAR 1.2 (%s)" % how, ok, detail)
    entries = json.load(open(har))["log"]["entries"]
    got = lines(log)
    agree = len(entries) == len(got) == 3
    for e, r in zip(entries, got):
        t = e["timings"]
        agree = agree and abs(e["time"] - (t["send"] + t["wait"] + t["receive"])) < 0.002
        agree = agree and abs(e["time"] - (r["end_mono_us"] - r["req_mono_us"]) / 1000) < 0.002
        agree = agree and abs(t["wait"] - (r["first_mono_us"] - r["req_mono_us"]) / 1000) < 0.002
    check("each entry's time is its timings' sum and the log's request-to-end time", agree,
          [(e["time"], e["timings"]) for e in entries])
    slow = [r for r in got if r["path"] == "/slow/a"]
    check("the slowed request: rule slow-200, slowed 200 ms, reached the server, 200, first "
          "byte 200 ms or more after it", slow and slow[0]["fate"] == "slowed"
          and slow[0]["slowed_ms"] == 200 and slow[0]["reached_server"] and slow[0]["status"] == 200
          and slow[0]["first_mono_us"] - slow[0]["req_mono_us"] >= 200000, slow)
    plain = [r for r in got if r["path"] == "/plain/c"]
    check("a request no rule took: untouched, no rule, the server's 200 and its bytes",
          plain and plain[0]["fate"] == "untouched" and plain[0]["rule"] is None
          and plain[0]["status"] == 200 and plain[0]["resp_bytes"] > 0
          and [r["n"] for r in got] == [1, 2, 3] and len({r["conn"] for r in got}) == 1, plain)


def test_filters():
    log = slow_log()
    count = lambda *a: len(ctl(*a, log).stdout.splitlines())  # noqa: E731
    check("--rule, --status and --host pick lines; --rule - the ones no rule took",
          (count("--rule", "slow-200"), count("--rule", "cred-503"), count("--status", "503"),
           count("--status", "200"), count("--host", "127.85.0.*"), count("--host", "other"),
           count("--rule", "-")) == (1, 1, 1, 2, 3, 0, 1),
          ctl(log).stdout)
    j = ctl("--json", "--status", "503", log).stdout
    check("--json passes the log's own lines on", j and json.loads(j)["rule"] == "cred-503", j)
    live = os.path.join(TMP, "live.jsonl")
    open(live, "w").close()
    p = subprocess.Popen([CTL, "requests", "--follow", live], stdout=subprocess.PIPE, text=True)
    time.sleep(0.3)
    with open(log) as src, open(live, "a") as dst:
        dst.write(src.readline())
    os.set_blocking(p.stdout.fileno(), False)
    out, deadline = "", time.time() + 5
    while "/slow/a" not in out and time.time() < deadline:
        time.sleep(0.1)
        out += p.stdout.read() or ""
    p.kill()
    p.wait()
    check("--follow prints a line appended after it started", "/slow/a" in out, out)


def test_bad_input():
    r = fetch(["http://%s:9000/secret/z" % HOST], FAULTNET_REQUESTS=os.path.join(TMP, "x.jsonl"),
             FAULTNET_REQUESTS_HEADERS="user-agent,bad header")
    check("a bad FAULTNET_REQUESTS_HEADERS stops the process (78) naming the variable and entry",
          r.returncode == 78 and "FAULTNET_REQUESTS_HEADERS: 'bad header'" in r.stderr, r.stderr)
    r = fetch(["http://%s:9000/secret/z" % HOST], FAULTNET_REQUESTS=os.path.join(TMP, "x.jsonl"),
             FAULTNET_REQUESTS_MAX="lots")
    check("a bad FAULTNET_REQUESTS_MAX: 78, named", r.returncode == 78
          and "FAULTNET_REQUESTS_MAX: 'lots'" in r.stderr, r.stderr)
    target, link = os.path.join(TMP, "target"), os.path.join(TMP, "link.jsonl")
    open(target, "w").close()
    os.symlink(target, link)
    r = fetch(["http://%s:9000/secret/z" % HOST], FAULTNET_REQUESTS=link)
    check("a symbolic link is not followed, and said so; the app runs on",
          r.stdout.strip() == "503" and "symbolic link" in r.stderr
          and os.path.getsize(target) == 0, r.stderr)
    bad = os.path.join(TMP, "bad.jsonl")
    with open(bad, "w") as f:
        f.write(open(slow_log()).readline() + "not json\n")
    r = ctl(bad)
    check("faultctl requests names the file and line of a line that is not the log's",
          r.returncode == 1 and "%s:2:" % bad in r.stderr, r.stderr)
    log = os.path.join(TMP, "mode.jsonl")
    fetch(["-H", "User-Agent: caf\u00e9\t\"q\"", "http://%s:9000/secret/z" % HOST],
          FAULTNET_REQUESTS=log)
    check("the log is made mode 0600", os.path.exists(log)
          and stat.S_IMODE(os.stat(log).st_mode) == 0o600, log)
    long = "/secret/" + "a" * 1000
    r = fetch([("http://%s:9000" % HOST) + long, "http://%s:9000/secret/after" % HOST],
              FAULTNET_REQUESTS=os.path.join(TMP, "long.jsonl"))
    got = lines(os.path.join(TMP, "long.jsonl")) if r.stdout.split() == ["503"] * 2 else []
    check("a path longer than a line keeps is cut, and the next request is logged too",
          [x["path"] for x in got][1:] == ["/secret/after"] and got[0]["path"].startswith("/secret/aaa")
          and len(got[0]["path"]) < len(long), (r.stdout, [x["path"][:20] for x in got]))
    raw = open(log, "rb").read() if os.path.exists(log) else b""
    ua = dict(json.loads(raw.decode("ascii"))["req_headers"]).get("user-agent") \
        if raw.isascii() and raw else None
    check("a header with Latin-1, tab and quote characters: an ASCII line, the value "
          "escaped and read back as sent", ua == "caf\u00e9\t\"q\"", raw)


def test_cap():
    log = os.path.join(TMP, "cap.jsonl")
    urls = ["http://%s:9000/secret/%d" % (HOST, i) for i in range(20)]
    r = fetch(urls, FAULTNET_REQUESTS=log, FAULTNET_REQUESTS_MAX="2K")
    text = open(log).read() if os.path.exists(log) else ""
    notes = [x for x in text.splitlines() if "cap reached" in x]
    check("FAULTNET_REQUESTS_MAX=2K: the file stops under 2 KiB, with one note in it and one "
          "on stderr; every request still answered", r.stdout.split() == ["503"] * 20
          and len(notes) == 1 and len(text) - len(notes[0]) - 1 <= 2048
          and r.stderr.count("FAULTNET_REQUESTS_MAX") == 1, (len(text), r.stderr))


# ---- requests never answered ------------------------------------------------------

SILENT_CONF = """rules = (
  { name = "never"; action = "respond"; status = 503;
    match = { to = "%(h)s/32"; port = 9001; path = "/never"; }; },
  { name = "h2-503"; action = "respond"; status = 503; retry_after = 7;
    match = { to = "%(h)s/32"; port = 9001; path = "/answer/*"; }; }
);
""" % {"h": HOST}

# The app: one request (HTTP/1.1, or HTTP/2 with prior knowledge), then it
# waits until the server has it (the marker file), and exits as a program
# does, the answer never read.
SILENT_CLIENT = r"""
import os, socket, sys, time
mode, host, port, marker = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
s = socket.create_connection((host, port))
if mode in ("h2", "h2answer"):
    import h2.config, h2.connection, h2.events
    c = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
    c.initiate_connection()
    c.send_headers(1, [(":method", "GET"), (":scheme", "http"), (":authority", "silent"),
                       (":path", "/hang/h2?x=1" if mode == "h2" else "/answer/h2?sig=SIGSECRET"),
                       ("user-agent", "h2test/1"), ("authorization", "Bearer AUTHSECRET")],
                   end_stream=True)
    s.sendall(c.data_to_send())
if mode == "h2answer":  # the rule's answer, read to its end
    s.settimeout(10)
    status, ended = None, False
    while not ended:
        b = s.recv(65536)
        if not b:
            break
        for e in c.receive_data(b):
            if isinstance(e, h2.events.ResponseReceived):
                status = dict(e.headers).get(b":status")
            ended = ended or isinstance(e, (h2.events.StreamEnded, h2.events.StreamReset))
        s.sendall(c.data_to_send())
    print("status", status.decode() if status else None, flush=True)
    sys.exit(0)
else:
    s.sendall(b"GET /hang/%s?x=1 HTTP/1.1\r\nHost: silent\r\n\r\n" % mode.encode())
end = time.monotonic() + 20
while not os.path.exists(marker) and time.monotonic() < end:
    time.sleep(0.02)
time.sleep(0.3 if mode == "close" else 0.05)
print("sent", os.path.exists(marker), flush=True)
s.detach()  # open until the process ends: not closed by Python's exit
"""


class Silent(threading.Thread):
    """A server on HOST:9001 that reads each request and never answers it:
    it drops a marker file once it has the request's head, then holds the
    connection open (mode "close": closes it, still unanswered). HTTP/2:
    its SETTINGS, then silence."""

    def __init__(self, marker, mode):
        super().__init__(daemon=True)
        self.marker, self.mode = marker, mode
        self.ls = socket.socket()
        self.ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.ls.bind((HOST, 9001))
        self.ls.listen(4)
        self.held = []

    def run(self):
        c, _ = self.ls.accept()
        self.held.append(c)
        got = b""
        h2c = None
        if self.mode.startswith("h2"):
            import h2.config
            import h2.connection
            h2c = h2.connection.H2Connection(h2.config.H2Configuration(client_side=False))
            h2c.initiate_connection()
            c.sendall(h2c.data_to_send())
        c.settimeout(20)
        while True:
            try:
                b = c.recv(65536)
            except OSError:
                return
            if not b:
                return
            got += b
            if h2c:
                import h2.events
                evs = h2c.receive_data(b)
                c.sendall(h2c.data_to_send())  # acknowledgements only
                done = any(isinstance(e, h2.events.RequestReceived) for e in evs)
            else:
                done = b"\r\n\r\n" in got
            if done:
                open(self.marker, "w").close()
                if self.mode == "close":
                    c.close()
                    return

    def stop(self):
        for c in self.held + [self.ls]:
            c.close()


def silent_run(mode):
    """The app's one request to the silent server; its log's lines."""
    log = os.path.join(TMP, "silent-%s.jsonl" % mode)
    marker = os.path.join(TMP, "silent-%s.got" % mode)
    conf = os.path.join(TMP, "silent.conf")
    with open(conf, "w") as f:
        f.write(SILENT_CONF)
    srv = Silent(marker, mode)
    srv.start()
    try:
        r = subprocess.run(["/usr/bin/python3", "-c", SILENT_CLIENT, mode, HOST, "9001", marker],
                           env=env(FAULTNET_CONFIG=conf, FAULTNET_REQUESTS=log),
                           capture_output=True, text=True, timeout=60)
    finally:
        srv.stop()
        srv.join(5)
    return r, (lines(log) if os.path.exists(log) else [])


def test_unanswered():
    for mode, why, what in (("1", "process exit", "HTTP/1.1, the server silent"),
                            ("h2", "process exit", "HTTP/2 (prior knowledge), the server silent"),
                            ("close", "connection closed",
                             "HTTP/1.1, the server closes without answering")):
        r, got = silent_run(mode)
        path = "/hang/" + mode
        one = got[0] if len(got) == 1 else {}
        check("%s: the request the app sent is in the log when the app exits, unanswered (%s)"
              % (what, why), r.stdout.split() == ["sent", "True"] and len(got) == 1
              and one.get("path") == path and one.get("query") == "x=1"
              and one.get("unanswered") == why and one.get("status") == 0
              and one.get("fate") == "untouched" and one.get("first_mono_us") is None
              and one.get("end_mono_us") is None, (r.stdout, r.stderr[-300:], got))
        listed = ctl(os.path.join(TMP, "silent-%s.jsonl" % mode))
        check("%s: faultctl requests lists it as unanswered (%s)" % (what, why),
              listed.returncode == 0 and listed.stdout.count("\n") == 1
              and listed.stdout.rstrip().endswith(" 0 0B unanswered (%s)" % why),
              (listed.stdout, listed.stderr))
    # HTTP/2: a stream a rule answers, its line whole.
    r, got = silent_run("h2answer")
    one = got[0] if len(got) == 1 else {}
    check("HTTP/2: the stream a rule answered: its line has the rule, 503, the kept headers "
          "(user-agent, retry-after), credentials as their length, times, unanswered null",
          r.stdout.split() == ["status", "503"] and one.get("path") == "/answer/h2"
          and one.get("rule") == "h2-503" and one.get("fate") == "answered"
          and one.get("status") == 503 and one.get("unanswered", "absent") is None
          and ["user-agent", "h2test/1"] in one.get("req_headers", [])
          and ["retry-after", "7"] in one.get("resp_headers", [])
          and one.get("query") == "sig=(redacted:9)" and "SECRET" not in json.dumps(got)
          and one.get("req_mono_us") <= one.get("first_mono_us") <= one.get("end_mono_us"),
          (r.stdout, r.stderr[-300:], got))
    # An answered request says so: unanswered is null.
    log = slow_log()
    check("answered requests' lines: unanswered is null",
          [r.get("unanswered", "absent") for r in lines(log)] == [None] * 3, lines(log))


def main():
    tests = checks.selected([test_s3_calls, test_storm, test_processes, test_credentials, test_har, test_filters,
                             test_bad_input, test_cap, test_unanswered])
    node = checks.node_bin(ROOT)
    server = origin.Origin(9000, HOST).start()  # behind the rules of CONF
    for t in tests:
        if t is test_storm and FIRST:
            print("skip - the retry storm: run with the normal build only (faultctl run sets "
                  "LD_PRELOAD itself)")
            checks.skip()
        elif t is test_storm:
            t()
        elif t is test_s3_calls:
            if FIRST or not node or not os.path.isdir(MODS):
                print("skip - the S3 SDK's calls: %s" % (
                    "run with the normal build only (faultctl run sets LD_PRELOAD itself)"
                    if FIRST else "no Node.js 20 or tests/conformance/node_modules (make's npm ci)"))
                checks.skip()
                continue
            t(node)
        else:
            t()
    server.shutdown()
    subprocess.run(["rm", "-rf", TMP])
    sys.exit(1 if checks.failed else 0)


if __name__ == "__main__":
    main()
