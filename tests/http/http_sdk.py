"""http_sdk.py - real SDKs against real servers on loopback, through the
HTTP policies of policies/: the S3 retry-quota story with the pinned
@aws-sdk/client-s3, boto3's standard retry mode, Retry-After, a worker
pool's retry storm with and without a circuit breaker, and each HTTP
policy file as its header says. Sends are counted by the SDK and by
`faultctl run --stats`, and must agree.

usage: http_sdk.py BUILD_DIR"""
import json
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)
import checks  # noqa: E402
from checks import check  # noqa: E402
import origin  # noqa: E402

BUILD = os.path.abspath(sys.argv[1])
CTL = os.path.join(BUILD, "faultctl")
PY = "/usr/bin/python3"
POL = os.path.join(ROOT, "policies")
MODS = os.path.join(ROOT, "tests", "conformance", "node_modules")
RETRY_SRC = os.path.join(MODS, "@smithy", "core", "dist-es", "submodules", "retry", "util-retry")
TMP = tempfile.mkdtemp(prefix="fn-sdk-")


def node_bin():
    return checks.node_bin(ROOT)


# The variables that name roots to trust: a test of HTTPS sets none of them
# (what it shows is that faultnet needs none), so any the machine has are
# dropped.
CA_VARS = ("NODE_EXTRA_CA_CERTS", "JAVA_TOOL_OPTIONS", "SSL_CERT_FILE", "SSL_CERT_DIR",
           "REQUESTS_CA_BUNDLE", "AWS_CA_BUNDLE", "CURL_CA_BUNDLE")


def run_stats(conf, argv, timeout=300, netns=False, **extra):
    """argv under `faultctl run --stats --json`: (its JSON line, the stats
    records). netns: in a network namespace with nothing but loopback, so
    that a real name a rule failed to send to loopback goes nowhere."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("FAULTNET_") and k != "LD_PRELOAD" and k not in CA_VARS}
    env.update(extra)
    cmd = [CTL, "run", "--config", conf, "--stats", "--json", "--"] + argv
    if netns:
        cmd = ["unshare", "-n" if os.geteuid() == 0 else "-rn", "sh", "-c",
               'ip link set lo up && exec "$@"', "sh"] + cmd
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    recs = [json.loads(x) for x in p.stderr.splitlines() if x.startswith("{")]
    out = None
    for line in p.stdout.splitlines():
        if line.startswith("{") or line.startswith("["):
            out = json.loads(line)
    if out is None:
        out = {"error": p.stderr[-1500:]}
    return out, recs


def rule_stat(recs, name, key):
    r = [x for x in recs if x.get("type") == "rule" and x.get("name") == name]
    return r[0].get(key) if r else None


# ---- the S3 retry quota ------------------------------------------------------

# Where the pinned SDK's costs come from: @smithy/core's util-retry
# (retries-2026-config.js: cost() after a 500 or a timeout, throttlingCost()
# after throttling such as 503 SlowDown; constants.js: INITIAL_RETRY_TOKENS).
PINNED = {"cost": 14, "throttling": 5, "tokens": 500, "attempts": 3}


def sdk_costs():
    src = open(os.path.join(RETRY_SRC, "retries-2026-config.js")).read()
    consts = open(os.path.join(RETRY_SRC, "constants.js")).read()
    conf = open(os.path.join(RETRY_SRC, "config.js")).read()
    num = lambda pat, text: int(re.search(pat, text).group(1))  # noqa: E731
    return {"cost": num(r"static cost\(\)\s*{\s*return (\d+)", src),
            "throttling": num(r"static throttlingCost\(\)\s*{\s*return (\d+)", src),
            "tokens": num(r"INITIAL_RETRY_TOKENS = (\d+)", consts),
            "attempts": num(r"DEFAULT_MAX_ATTEMPTS = (\d+)", conf)}


def quota_table(costs, calls, throttled):
    """Sends per call that the quota implies when every send fails."""
    cap, cost, out = costs["tokens"], costs["throttling" if throttled else "cost"], []
    for _ in range(calls):
        sends = 1
        while sends < costs["attempts"] and cap >= cost:
            cap -= cost
            sends += 1
        out.append(sends)
    return out


def runs(table):
    """[3,3,2,1,1] as "3 x 2, 2 x 1, 1 x 2"."""
    out = []
    for v in table:
        if out and out[-1][0] == v:
            out[-1][1] += 1
        else:
            out.append([v, 1])
    return ", ".join("%d x %d" % (v, n) for v, n in out)


def test_s3_quota(node):
    o = origin.Origin(9000, "127.85.0.1").start()
    costs = sdk_costs()
    for conf, calls, throttled, mode in (("s3-internal-error.conf", 30, False, "default"),
                                         ("s3-slowdown.conf", 60, True, "fast")):
        pinned = quota_table(PINNED, calls, throttled)
        implied = quota_table(costs, calls, throttled)
        check("%s: the SDK's retry costs are the pinned ones (%s)" % (conf, RETRY_SRC),
              implied == pinned,
              "the SDK changed: pinned sends per call %s; now %s (costs %s)"
              % (runs(pinned), runs(implied), costs))
        out, recs = run_stats(os.path.join(POL, conf),
                              [node, os.path.join(HERE, "s3_quota.js"), "127.85.0.1", "9000",
                               str(calls), mode])
        got = out.get("attempts")
        check("%s: %d GetObject calls send %s (the SDK's $metadata.attempts)"
              % (conf, calls, runs(implied)), got == implied,
              "measured %s, the quota implies %s: %s" % (runs(got or []), runs(implied), out))
        answered = rule_stat(recs, conf.split(".")[0].replace("-internal-error", "-500"), "answered")
        check("%s: faultctl run --stats counted the same sends (%d)" % (conf, sum(implied)),
              got and answered == sum(got), (answered, recs))
    check("the real server saw none of the answered requests", o.requests == [], o.requests[:3])
    o.shutdown()


def test_retry_after(node):
    conf = os.path.join(TMP, "retry-after.conf")
    with open(conf, "w") as f:
        f.write('rules = ( { name = "ra"; action = "respond"; status = 503; retry_after = 30; '
                'headers = ["Content-Type: application/xml"]; '
                'body = "<Error><Code>SlowDown</Code><Message>m</Message></Error>"; '
                'match = { to = "127.85.0.1/32"; port = 9001; }; } );\n')
    events = os.path.join(TMP, "ra.jsonl")
    out, recs = run_stats(conf, [node, os.path.join(HERE, "s3_quota.js"), "127.85.0.1", "9001",
                                 "1", "default", "2"], FAULTNET_EVENTS=events)
    with open(events) as f:
        t = [json.loads(x)["mono_us"] for x in f if '"http-503"' in x]
    gap = (t[1] - t[0]) / 1e6 if len(t) == 2 else -1
    check("Retry-After: 30 on a 503: the SDK waits about 5 s before its retry, not 30 "
          "(%.1f s between the two sends)" % gap, 4.5 <= gap <= 7.5 and out.get("attempts") == [2],
          (gap, out))


# ---- boto3 -------------------------------------------------------------------

BOTO = r'''
import json, sys, boto3, botocore.config
kind, n = sys.argv[1], int(sys.argv[2])
cfg = botocore.config.Config(retries={"mode": "standard"}, connect_timeout=2, read_timeout=5)
kw = dict(region_name="us-east-1", aws_access_key_id="k", aws_secret_access_key="s", config=cfg)
out = []
for i in range(n):
    try:
        if kind == "s3":
            c = boto3.client("s3", endpoint_url="http://127.85.0.1:9000", **kw)
            c.get_object(Bucket="bucket", Key="key-%d" % i)
        elif kind == "s3-https":  # the default endpoint: https, virtual-hosted
            c = boto3.client("s3", **kw)
            c.get_object(Bucket="bucket", Key="key-%d" % i)
        else:
            c = boto3.client("dynamodb", endpoint_url="http://127.85.0.2:8000", **kw)
            c.list_tables()
        out.append(["ok", 1])
    except c.exceptions.ClientError as e:
        out.append([e.response["Error"]["Code"], e.response["ResponseMetadata"]["RetryAttempts"] + 1])
print(json.dumps(out))
'''


def test_boto3():
    script = os.path.join(TMP, "boto.py")
    with open(script, "w") as f:
        f.write(BOTO)
    o = origin.Origin(9000, "127.85.0.1").start()
    out, recs = run_stats(os.path.join(POL, "s3-internal-error.conf"), [PY, script, "s3", "4"])
    check("boto3 (standard mode) under s3-internal-error.conf: 3 sends per GetObject "
          "(max_attempts 3), as the SDK counts them", out == [["InternalError", 3]] * 4, out)
    check("...and as faultctl run --stats counts them (12)",
          rule_stat(recs, "s3-500", "answered") == 12, recs)
    o.shutdown()
    out, recs = run_stats(os.path.join(POL, "aws-json-throttling.conf"), [PY, script, "dynamo", "2"])
    check("boto3 DynamoDB under aws-json-throttling.conf: ThrottlingException after 3 sends, "
          "no server at the endpoint", out == [["ThrottlingException", 3]] * 2, out)
    check("...and faultctl run --stats counts 6", rule_stat(recs, "json-throttle", "answered") == 6,
          recs)


# ---- the same stories over HTTPS, with the SDKs' default endpoints -----------

def system_roots():
    """The text of every file of the system's trust stores."""
    text = []
    for top in ("/etc/ssl/certs", "/usr/local/share/ca-certificates", "/usr/share/ca-certificates",
                "/etc/ca-certificates"):
        for d, _, files in os.walk(top):
            for f in files:
                try:
                    with open(os.path.join(d, f), errors="replace") as fh:
                        text.append(fh.read())
                except OSError:
                    pass
    return "\n".join(text)


def check_ca_private(rundir, what):
    """The run's CA: in the run directory, owner only, in no system store and
    in no variable the test set."""
    path = os.path.join(rundir, "ca.pem")
    try:
        st = os.stat(path)
        body = "".join(open(path).read().split("-----")[2].split())
    except (OSError, IndexError):
        check("%s: the run's CA is in the run directory" % what, False, path)
        return
    keymode = os.stat(os.path.join(rundir, "ca.key")).st_mode & 0o777
    roots = "".join(system_roots().split())
    check("%s: the run's CA is owner-only (ca.pem %o, ca.key %o) and in no system store"
          % (what, st.st_mode & 0o777, keymode),
          st.st_mode & 0o777 == 0o600 and keymode == 0o600 and body[:200] not in roots)
    named = [k for k in CA_VARS if k in os.environ and rundir in os.environ[k]]
    check("%s: the test set no CA variable naming it" % what, named == [], named)


def https_rundir(name):
    d = os.path.join(TMP, name)
    os.mkdir(d, 0o700)
    return d


def test_https_s3(node):
    """@aws-sdk/client-s3 with no endpoint option: https to the bucket's
    virtual-hosted name, sent to loopback by the policy's dns rule, no
    server; the npm-style node binary carries its own OpenSSL, so it trusts
    the run's CA through NODE_EXTRA_CA_CERTS, set by faultctl run."""
    conf = os.path.join(POL, "s3-internal-error-https.conf")
    implied = quota_table(sdk_costs(), 20, False)
    rundir = https_rundir("s3-https")
    out, recs = run_stats(conf, [node, os.path.join(HERE, "s3_quota.js"), "https", "0", "20",
                                 "fast"], netns=True, FAULTNET_RUNDIR=rundir)
    got = out.get("attempts")
    check("https: the S3 SDK's default endpoint under s3-internal-error-https.conf: 20 calls "
          "send %s ($metadata.attempts), each an InternalError" % runs(implied),
          got == implied and out.get("outcomes") == ["InternalError"] * 20,
          "measured %s: %s" % (runs(got or []), out))
    tls = [r for r in recs if r.get("type") == "tls"]
    check("https: faultctl run --stats counted the same sends (%d), decrypted by the relay"
          % sum(implied), got and rule_stat(recs, "s3-500", "answered") == sum(got)
          and tls and tls[0].get("terminated", 0) >= 1, recs)
    vias = [r.get("via") for r in recs if r.get("type") == "trust"]
    check("https: run --stats says the variable reached the S3 SDK's Node.js (%s)" % vias,
          vias == ["variable"], recs)
    check_ca_private(rundir, "https S3 SDK")
    # A user's own NODE_EXTRA_CA_CERTS is kept: the file Node.js reads holds
    # the user's certificates and the run's CA.
    mine = os.path.join(TMP, "mine.pem")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:P-256", "-nodes", "-subj", "/CN=user root", "-days", "2",
                    "-keyout", os.path.join(TMP, "mine.key"), "-out", mine],
                   capture_output=True, check=True)
    out, _ = run_stats(conf, [node, os.path.join(HERE, "s3_quota.js"), "https", "0", "1", "fast"],
                       netns=True, FAULTNET_RUNDIR=rundir, NODE_EXTRA_CA_CERTS=mine)
    seen = open(out["extra_ca"]).read() if out.get("extra_ca", "").startswith(rundir) else ""
    check("https: with the user's own NODE_EXTRA_CA_CERTS, Node.js reads the user's "
          "certificate and the run's CA (%s) and meets the rule" % out.get("extra_ca"),
          open(mine).read().strip() in seen
          and open(os.path.join(rundir, "ca.pem")).read().strip() in seen
          and out.get("outcomes") == ["InternalError"], out)


def test_https_boto3():
    """boto3, standard mode, its default https endpoint (through the system's
    OpenSSL: the trust hook)."""
    script = os.path.join(TMP, "boto.py")
    with open(script, "w") as f:
        f.write(BOTO)
    rundir = https_rundir("boto3-https")
    out, recs = run_stats(os.path.join(POL, "s3-slowdown-https.conf"), [PY, script, "s3-https", "3"],
                          netns=True, FAULTNET_RUNDIR=rundir)
    check("https: boto3 (standard mode, default endpoint) under s3-slowdown-https.conf: 3 sends "
          "per GetObject", out == [["SlowDown", 3]] * 3, out)
    check("https: ...and faultctl run --stats counts 9, decrypted by the relay",
          rule_stat(recs, "s3-slowdown", "answered") == 9, recs)
    vias = [r.get("via") for r in recs if r.get("type") == "trust"]
    check("https: run --stats says the trust hook reached boto3 (%s)" % vias, vias == ["hook"],
          recs)
    check_ca_private(rundir, "https boto3")
    # A bundle that replaces the system's (as CI images set AWS_CA_BUNDLE):
    # boto3 builds its store from it, and the hook adds the run's CA to that
    # store's verification; nothing of the user's is dropped.
    bundle = os.path.join(TMP, "user-bundle.pem")
    with open("/etc/ssl/certs/ca-certificates.crt") as src, open(bundle, "w") as dst:
        dst.write(src.read())
    out, recs = run_stats(os.path.join(POL, "s3-slowdown-https.conf"), [PY, script, "s3-https", "1"],
                          netns=True, FAULTNET_RUNDIR=rundir, AWS_CA_BUNDLE=bundle)
    vias = [r.get("via") for r in recs if r.get("type") == "trust"]
    check("https: boto3 with the user's own AWS_CA_BUNDLE: 3 sends, reached by the hook (%s), "
          "the bundle untouched" % vias, out == [["SlowDown", 3]] and vias == ["hook"]
          and open(bundle).read() == open("/etc/ssl/certs/ca-certificates.crt").read(),
          (out, recs))


JAVA_GET = r'''
import java.net.URI;
import java.net.http.*;
import java.time.Duration;

public class Get {
    public static void main(String[] a) throws Exception {
        HttpClient c = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(5)).build();
        try {
            HttpRequest q = HttpRequest.newBuilder(URI.create(a[0]))
                .timeout(Duration.ofSeconds(10)).build();
            System.out.println(c.send(q, HttpResponse.BodyHandlers.ofString()).statusCode());
        } catch (Exception e) {
            System.out.println(e.getClass().getSimpleName());
        }
        System.out.println("kept=" + System.getProperty("fn.user.option"));
    }
}
'''


def test_https_java():
    """Java's HttpClient, default https port, no server: Java reads its trust
    store once, at start, so faultctl run gives it JAVA_TOOL_OPTIONS naming a
    JKS store of Java's own roots plus the run's CA; a value the user had is
    kept."""
    src = os.path.join(TMP, "Get.java")
    with open(src, "w") as f:
        f.write(JAVA_GET)
    subprocess.run(["javac", "-d", TMP, src], check=True)
    conf = os.path.join(TMP, "java-https.conf")
    with open(conf, "w") as f:
        f.write('rules = (\n  { name = "n"; action = "dns"; answer = [ "127.85.0.9" ]; '
                'match = { host = "api.example.test"; }; },\n'
                '  { name = "r"; action = "respond"; status = 503; '
                'match = { host = "api.example.test"; port = 443; }; }\n);\n')
    rundir = https_rundir("java-https")
    cmd = ["java", "-cp", TMP, "Get", "https://api.example.test/x"]
    out, recs = run_stats(conf, cmd, netns=True, FAULTNET_RUNDIR=rundir)
    err = out.get("error", "") if isinstance(out, dict) else ""
    p = subprocess.run(["unshare", "-n" if os.geteuid() == 0 else "-rn", "sh", "-c",
                        'ip link set lo up && exec "$@"', "sh", CTL, "run", "--config", conf, "--"]
                       + cmd, env={k: v for k, v in os.environ.items() if k not in CA_VARS
                                   and not k.startswith("FAULTNET_")}
                       | {"FAULTNET_RUNDIR": rundir, "JAVA_TOOL_OPTIONS": "-Dfn.user.option=yes"},
                       capture_output=True, text=True, timeout=120)
    check("https: Java HttpClient, no CA variable set by the test, gets the rule's 503 "
          "through the trust store faultctl run names in JAVA_TOOL_OPTIONS", p.stdout.split()[:1]
          == ["503"] and "kept=yes" in p.stdout, (p.stdout, p.stderr[-500:], err))
    check("https: the JVM says so on stderr, the user's JAVA_TOOL_OPTIONS kept first",
          "Picked up JAVA_TOOL_OPTIONS: -Dfn.user.option=yes -Djavax.net.ssl.trustStore=" + rundir
          in p.stderr, p.stderr[-500:])
    vias = [r.get("via") for r in recs if r.get("type") == "trust"]
    check("https: run --stats says the variable reached Java (%s)" % vias, vias == ["variable"],
          recs)
    stores = [f for f in os.listdir(rundir) if f.startswith("ca.java-")]
    listed = subprocess.run(["keytool", "-list", "-keystore", os.path.join(rundir, stores[0]),
                             "-storepass", "changeit"] if stores else ["false"],
                            capture_output=True, text=True).stdout
    system = subprocess.run(["keytool", "-list", "-keystore", "/etc/ssl/certs/java/cacerts",
                             "-storepass", "changeit"], capture_output=True, text=True).stdout
    count = lambda t: int(re.search(r"contains (\d+) entr", t).group(1)) if "contains" in t else -1  # noqa: E731
    check("https: that store holds Java's own roots (%d) and the run's CA (%d entries, its "
          "digest valid)" % (count(system), count(listed)),
          count(listed) == count(system) + 1 and "faultnet-run-ca" in listed, listed[-300:])
    check_ca_private(rundir, "https Java")


# ---- the storm and the breaker -----------------------------------------------

def test_storm():
    o = origin.Origin(8080, "127.85.0.4").start()
    conf = os.path.join(TMP, "storm.conf")
    text = open(os.path.join(POL, "http-5xx-then-healthy.conf")).read()
    with open(conf, "w") as f:  # the policy with its 60 s scaled down to 3 s
        f.write(text.replace("for_ms = 60000", "for_ms = 3000"))
    res = {}
    for mode in ("none", "breaker"):
        out, recs = run_stats(conf, [PY, os.path.join(HERE, "storm.py"), "127.85.0.4", "8080",
                                     "6", "1.5", mode])
        res[mode] = (out, rule_stat(recs, "degraded-60s", "answered"))
        check("storm (%s): --stats counts the 503s the workers met (%s)"
              % (mode, res[mode][1]), out.get("errors_5xx") == res[mode][1], res[mode])
        check("storm (%s): the workers recover once the 3 s outage ends (first success at %s s)"
              % (mode, out.get("first_ok")), out.get("first_ok") and 2.9 < out["first_ok"] < 5.5,
              out)
    a, b = res["none"][1] or 0, res["breaker"][1] or 0
    check("storm: 6 workers waste %d requests without a circuit breaker, %d with one "
          "(threshold 5, cooldown 1.5 s): %.0fx fewer" % (a, b, a / max(b, 1)),
          b > 0 and a >= 5 * b, res)
    o.shutdown()


# ---- the other HTTP policies, as their headers say -----------------------------

def test_policies():
    o = origin.Origin(8080, "127.85.0.5").start()
    script = ("import requests, sys\ntry:\n    r = requests.get(sys.argv[1], timeout=1)\n"
              "    print('[%d, \"%s\"]' % (r.status_code, r.headers.get('Retry-After', '')))\n"
              "except requests.exceptions.ReadTimeout:\n    print('[\"ReadTimeout\"]')\n")
    out, _ = run_stats(os.path.join(POL, "http-slow-200.conf"),
                       [PY, "-c", script, "http://127.85.0.5:8080/x"])
    check("http-slow-200.conf: a client with a 1 s read timeout times out", out == ["ReadTimeout"],
          out)
    out, _ = run_stats(os.path.join(POL, "http-429-retry-after.conf"),
                       [PY, "-c", script, "http://127.85.0.3:8080/x"])
    check("http-429-retry-after.conf: 429 with Retry-After: 30, no server needed",
          out == [429, "30"], out)
    out, _ = run_stats(os.path.join(POL, "http-5xx-then-healthy.conf"),
                       [PY, "-c", script, "http://127.85.0.4:8080/x"])
    check("http-5xx-then-healthy.conf: 503 in the first minute", out == [503, ""], out)
    o.shutdown()
    o = origin.Origin(8080, "127.85.0.6").start()
    trunc = ("import http.client, json\nc = http.client.HTTPConnection('127.85.0.6', 8080)\n"
             "c.request('GET', '/big')\nr = c.getresponse()\ntry:\n    r.read(); print('[\"whole\"]')\n"
             "except http.client.IncompleteRead as e:\n    print(json.dumps(['IncompleteRead', len(e.partial)]))\n")
    out, _ = run_stats(os.path.join(POL, "http-truncated-body.conf"), [PY, "-c", trunc])
    check("http-truncated-body.conf: the download ends early (IncompleteRead)",
          out and out[0] == "IncompleteRead" and out[1] < 1024, out)
    o.shutdown()


def main():
    tests = checks.selected([test_s3_quota, test_retry_after, test_boto3, test_https_s3,
                             test_https_boto3, test_https_java, test_storm, test_policies])
    node = node_bin()
    check("Node.js 20 or later for the S3 SDK (make test installs it)", node is not None)
    for t in tests:
        if t in (test_s3_quota, test_retry_after, test_https_s3):
            if node:
                t(node)
        else:
            t()
    subprocess.run(["rm", "-rf", TMP])
    sys.exit(1 if checks.failed else 0)


if __name__ == "__main__":
    main()
