"""docker_test.py - faultctl docker run, docker check and compose on a real
Docker engine (Debian 12's docker.io) that this script starts itself with no
network of its own (--bridge=none, --iptables=false, its own socket, data
and exec roots, stopped and removed at the end). The image is a Debian 12
root with curl and python3-requests built by debootstrap (scripts/test-root.sh
py, cached) and
imported; containers run with --network host, so every packet stays on
loopback. Where the engine cannot start, one line says why and the checks
are skipped (the namespace part, ns_bundle_test.py, never skips).
Service names resolved by Compose's own DNS are not tested (host network).
Run by tests/run.sh (section containers) as root.

usage: docker_test.py BUILD_DIR
"""
import http.server
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import checks  # noqa: E402
from checks import check  # noqa: E402

SRC = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD = os.path.abspath(sys.argv[1])
CTL = os.path.join(BUILD, "faultctl")
WORK = tempfile.mkdtemp(prefix="fn-docker-")
RUNDIR = os.path.join(WORK, "run")
ENGINE = tempfile.mkdtemp(prefix="fn-dockerd-", dir="/var/tmp")
SOCK = "/run/fn-dockerd-%d.sock" % os.getpid()
EXEC_ROOT = "/run/fn-dockerd-%d" % os.getpid()
IMAGE = "faultnet-test/py:bookworm"
# An account of the test's own (created and removed by it), in a group the
# engine's socket is given to: a host user who is not root.
USER = "fnctr%d" % (os.getpid() % 100000)
USER_MADE = False
DOCKER = "/usr/bin/docker" if os.path.exists("/usr/bin/docker") else "docker"
ENV = dict(os.environ, DOCKER_HOST="unix://" + SOCK, FAULTNET_RUNDIR=RUNDIR,
           FAULTNET_DOCKER=DOCKER)
ENV.pop("LD_PRELOAD", None)

# curl every 300 ms against PORT, a line each: "HTTP_CODE EXIT".
CURL_LOOP = ('for i in $(seq %d); do c=$(curl -s -o /dev/null -w "%%{http_code}" '
             '--connect-timeout 1 http://127.0.0.1:%d/); echo "$c $?"; sleep 0.3; done')


def run(argv, timeout=60, **kw):
    return subprocess.run(argv, env=ENV, capture_output=True, text=True, timeout=timeout, **kw)


def ctl(*args):
    return run([CTL] + list(args))


def docker(*args, timeout=60):
    return run([DOCKER] + list(args), timeout=timeout)


def members(group):
    r = ctl("-g", group, "--json", "ps")
    return [json.loads(line) for line in r.stdout.splitlines() if line.startswith("{")]


def wait_for(cond, timeout=5.0):
    end = time.time() + timeout
    while time.time() < end:
        got = cond()
        if got:
            return got
        time.sleep(0.02)
    return cond()


class Ok(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, *a):
        pass


def start_engine():
    """dockerd with no network of its own; None when it runs, else why not."""
    if not shutil.which("dockerd"):
        return "dockerd is not installed (docker.io)"
    log = open(os.path.join(ENGINE, "dockerd.log"), "w")
    start_engine.proc = subprocess.Popen(
        ["dockerd", "--bridge=none", "--iptables=false", "--ip6tables=false", "--ip-masq=false",
         "-H", "unix://" + SOCK, "--data-root", os.path.join(ENGINE, "data"),
         "--exec-root", EXEC_ROOT, "--pidfile", EXEC_ROOT + ".pid"]
        + (["--group", USER] if USER_MADE else []),
        stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    end = time.time() + 30
    while time.time() < end:
        if start_engine.proc.poll() is not None:
            break
        if docker("info", "-f", "{{.ServerVersion}}", timeout=10).returncode == 0:
            return None
        time.sleep(0.3)
    lines = open(os.path.join(ENGINE, "dockerd.log")).read().splitlines()
    errs = [x for x in lines if "level=error" in x or "level=fatal" in x or "failed" in x]
    return "dockerd did not answer within 30 s: " + ((errs or lines or ["no output"])[-1])[:300]


start_engine.proc = None


def stop_engine():
    p = start_engine.proc
    if p and p.poll() is None:
        for c in docker("ps", "-aq").stdout.split():
            docker("rm", "-f", c)
        p.send_signal(signal.SIGTERM)
        try:
            p.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
    # dockerd leaves the host's network namespace bound in its exec root.
    mounts = subprocess.run(["findmnt", "-rno", "TARGET"], capture_output=True,
                            text=True).stdout.split()
    for m in sorted((m for m in mounts if m.startswith(EXEC_ROOT + "/")), reverse=True):
        subprocess.run(["umount", m], capture_output=True)
    for m in (ENGINE, EXEC_ROOT):
        if not any(x.startswith(m + "/") for x in subprocess.run(
                ["findmnt", "-rno", "TARGET"], capture_output=True, text=True).stdout.split()):
            shutil.rmtree(m, ignore_errors=True)
    for f in (SOCK, EXEC_ROOT + ".pid"):
        if os.path.exists(f):
            os.unlink(f)


def import_tar(name, root):
    """An image of the files under root (tar | docker import)."""
    tar = subprocess.Popen(["tar", "-C", root, "-c", "."], stdout=subprocess.PIPE)
    r = subprocess.run([DOCKER, "import", "-", name], stdin=tar.stdout, env=ENV,
                       capture_output=True, text=True, timeout=120)
    tar.wait()
    return r


def networks():
    return sorted(docker("network", "ls", "--format", "{{.Name}}:{{.Driver}}").stdout.split())


def policy(text):
    path = os.path.join(WORK, "policy.conf")
    with open(path, "w") as f:
        f.write(text)
    return path


def test_curl_blackhole_flipped_from_host():
    """The issue's first acceptance: an unmodified image runs curl under a
    blackhole flipped from the host: 200, then curl's own connect timeout
    (exit 28), then 200; ps on the host lists the container's process; the
    run's counts read on the host match curl's."""
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Ok)
    port = srv.server_address[1]
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    conf = policy('rules = ( { name = "bh"; action = "blackhole"; enabled = false; '
                  'match = { to = "127.0.0.1/32"; port = %d; }; } );\n' % port)
    p = subprocess.Popen([CTL, "docker", "run", "--config", conf, "-g", "dk", "--stats",
                          "--network", "host", "--rm", "--name", "fn-dk-curl", IMAGE,
                          "bash", "-c", CURL_LOOP % (40, port)],
                         env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines = []
    reader = threading.Thread(target=lambda: lines.extend(iter(p.stdout.readline, "")),
                              daemon=True)
    reader.start()
    try:
        ok = wait_for(lambda: sum(x == "200 0\n" for x in lines) >= 2, timeout=20)
        check("curl in the container: 200 before the flip", ok, lines)
        m = members("dk")
        shell = [x for x in m if "bash" in x.get("cmd", "")]
        ns = lambda pid: os.readlink("/proc/%s/ns/pid" % pid)  # noqa: E731
        inside = shell and ns(shell[0]["pid"]) != ns("self")
        check("faultctl ps on the host lists the container's shell by a host pid, in a pid "
              "namespace not the host's (%s)" % [x.get("pid") for x in shell], inside, m)
        r = ctl("-g", "dk", "enable", "bh")
        n = len(lines)
        hit = wait_for(lambda: sum(x == "000 28\n" for x in lines[n:]) >= 2, timeout=10)
        check("enabled on the host: curl's own connect timeout (exit 28)",
              r.returncode == 0 and hit, (r.stdout, r.stderr, lines[n:]))
        r = ctl("-g", "dk", "disable", "bh")
        n = len(lines)
        back = wait_for(lambda: sum(x == "200 0\n" for x in lines[n:]) >= 2, timeout=10)
        check("disabled: 200 again", r.returncode == 0 and back, lines[n:])
        docker("kill", "fn-dk-curl")
        err = p.communicate(timeout=30)[1]
        faults = re.search(r"rule bh .*faults=(\d+)", err)
        timeouts = sum(x == "000 28\n" for x in lines)
        check("run --stats-style counts read on the host: faults=%s, curl's exit-28 lines %d"
              % (faults and faults.group(1), timeouts),
              faults and int(faults.group(1)) == timeouts and timeouts >= 2, err)
    finally:
        if p.poll() is None:
            docker("kill", "fn-dk-curl")
            p.kill()
            p.wait()
        srv.shutdown()


def test_two_containers_pid_1():
    """Two containers' pid 1: two members; one that exits is gone for ps
    within a second, though pid 1 on the host is init; starting a container
    removes no host member's file."""
    policy('rules = ( { name = "off"; action = "refuse"; match = { to = "127.0.0.9/32"; }; '
           'enabled = false; } );\n')
    host = subprocess.Popen(checks.joined_sleep(60), env=dict(ENV, FAULTNET_GROUP="pid1", LD_PRELOAD=(
        os.path.join(BUILD, "libfaultnet.so")), FAULTNET_CONFIG=os.path.join(WORK, "policy.conf")))
    try:
        # Its file, not its listing: faultctl lists a process that has not
        # joined yet (found in /proc), before its join makes the file.
        def host_files():
            return [f for f in os.listdir(RUNDIR) if f.startswith("pid1.") and f.endswith(".mem")]
        wait_for(host_files)
        before = host_files()
        for name in ("fn-dk-a", "fn-dk-b"):
            r = ctl("docker", "run", "--config", os.path.join(WORK, "policy.conf"), "-g", "pid1",
                    "-d", "--network", "none", "--name", name, IMAGE, *checks.joined_sleep(60))
            check("faultctl docker run -d %s" % name, r.returncode == 0, r.stdout + r.stderr)
        m = wait_for(lambda: len(members("pid1")) == 3 and members("pid1"), timeout=10)
        files = sorted(f for f in os.listdir(RUNDIR) if f.startswith("pid1.1."))
        check("two containers' pid 1: two members (%s), and the host's" % files,
              m and len(files) == 2, members("pid1"))
        check("their starts removed no host member's file (%s)" % before, len(before) == 1 and
              all(os.path.exists(os.path.join(RUNDIR, f)) for f in before), before)
        docker("kill", "fn-dk-a")
        t0 = time.time()
        gone = wait_for(lambda: len(members("pid1")) == 2, timeout=5)
        took = time.time() - t0
        check("a container that exits is gone for ps within a second (%.2f s)" % took,
              gone and took < 1.0, members("pid1"))
    finally:
        for name in ("fn-dk-a", "fn-dk-b"):
            docker("rm", "-f", name)
        host.kill()
        host.wait()


def fake_image(name, files):
    d = tempfile.mkdtemp(prefix="img-", dir=WORK)
    for rel, data in files.items():
        os.makedirs(os.path.join(d, os.path.dirname(rel)), exist_ok=True)
        with open(os.path.join(d, rel), "wb") as f:
            f.write(data)
    return import_tar(name, d)


def test_refused_with_the_reason():
    """Nothing is started that would run with no faults: another uid than
    the run directory's, a musl image, an old glibc, a user LD_PRELOAD."""
    r = ctl("docker", "check", IMAGE)
    check("docker check: the debootstrap image's glibc 2.36 is enough", r.returncode == 0
          and "glibc 2.36" in r.stdout, r.stdout + r.stderr)
    n = len(docker("ps", "-aq").stdout.split())
    r = ctl("docker", "run", "--network", "none", "--user", "1000", IMAGE, "true")
    check("a container of uid 1000 beside a run directory of uid 0: refused, saying so",
          r.returncode == 1 and "uid 1000" in r.stderr and "--user" in r.stderr, r.stderr)
    check("and no container was left", len(docker("ps", "-aq").stdout.split()) == n,
          docker("ps", "-a").stdout)
    r = ctl("docker", "run", "--network", "none", "-e", "LD_PRELOAD=/x.so", IMAGE, "true")
    check("a user LD_PRELOAD: refused", r.returncode == 2 and "LD_PRELOAD" in r.stderr, r.stderr)
    elf = open("/bin/true", "rb").read()
    fake_image("faultnet-test/musl", {"lib/ld-musl-x86_64.so.1": elf})
    r = ctl("docker", "run", "--network", "none", "faultnet-test/musl", "/bin/sh")
    check("a musl image: refused before it starts, saying musl",
          r.returncode == 1 and "musl" in r.stderr, r.stderr)
    fake_image("faultnet-test/oldglibc", {"usr/lib/x86_64-linux-gnu/libc.so.6":
                                          elf[:64] + b"\0GLIBC_2.2.5\0GLIBC_2.28\0"})
    r = ctl("docker", "check", "faultnet-test/oldglibc")
    check("a glibc 2.28 image: refused, saying both versions",
          r.returncode == 1 and "glibc is 2.28" in r.stderr, r.stderr)


def make_user():
    global USER_MADE
    r = subprocess.run(["useradd", "--system", "--user-group", "--no-create-home", "--shell",
                        "/usr/sbin/nologin", USER], capture_output=True, text=True)
    USER_MADE = r.returncode == 0
    return r.stderr.strip()


def remove_user():
    if USER_MADE:
        subprocess.run(["userdel", USER], capture_output=True)
        subprocess.run(["groupdel", USER], capture_output=True)


def test_root_container_beside_a_user():
    """A host user who is not root, with the engine's socket: the image's
    root container is refused (the run directory is the user's, mode
    0700); with --user the user's uid it runs, joins and is counted."""
    if not USER_MADE:
        print("  skip - a host user who is not root: useradd failed: %s" % make_user.why)
        checks.skip()
        return
    import pwd
    uid = pwd.getpwnam(USER).pw_uid
    d = tempfile.mkdtemp(prefix="user-", dir=WORK)
    os.chmod(WORK, 0o755)
    os.chmod(d, 0o755)
    shutil.copy(CTL, d)
    shutil.copytree(os.path.join(BUILD, "bundle"), os.path.join(d, "bundle"))
    for sub in ("run", "pol", "home"):
        os.mkdir(os.path.join(d, sub), 0o700)
        os.chown(os.path.join(d, sub), uid, uid)
    conf = os.path.join(d, "pol", "p.conf")
    with open(conf, "w") as f:
        f.write('rules = ( { name = "cut"; action = "refuse"; '
                'match = { to = "127.0.0.9/32"; port = 80; }; } );\n')
    os.chown(conf, uid, uid)

    def as_user(*args):
        return subprocess.run(
            ["runuser", "-u", USER, "--", "env", "-i", "PATH=/usr/bin:/bin",
             "HOME=" + os.path.join(d, "home"), "DOCKER_HOST=unix://" + SOCK,
             "FAULTNET_DOCKER=" + DOCKER, "FAULTNET_RUNDIR=" + os.path.join(d, "run"),
             os.path.join(d, "faultctl")] + list(args),
            capture_output=True, text=True, timeout=60)
    probe = ["bash", "-c", "exec 3<>/dev/tcp/127.0.0.9/80"]
    r = as_user("docker", "run", "--config", conf, "-g", "u", "--network", "none", "--rm",
                IMAGE, *probe)
    check("user %d, the image's root container: refused, saying both uids" % uid,
          r.returncode == 1 and "uid 0 (the image's USER)" in r.stderr and
          "uid %d's" % uid in r.stderr, r.stdout + r.stderr)
    r = as_user("docker", "run", "--config", conf, "-g", "u", "--stats", "--network", "none",
                "--rm", "--user", "%d:%d" % (uid, uid), IMAGE, *probe)
    faults = re.search(r"rule cut .*faults=(\d+)", r.stderr)
    check("with --user %d it runs as the user, joins and is counted (faults=%s)"
          % (uid, faults and faults.group(1)), faults and faults.group(1) == "1",
          r.stdout + r.stderr)


SERVER = (r'$s=IO::Socket::INET->new(LocalAddr=>"127.0.0.1",LocalPort=>$ARGV[0],Listen=>64,'
          r'ReuseAddr=>1) or die "listen: $!"; open(L,">>",$ARGV[1]) or die; L->autoflush(1);'
          r'while($c=$s->accept){ while(<$c>){ last if /^\r?$/ } print L "req\n";'
          r'print $c "HTTP/1.0 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok";'
          r'close $c }')


def test_compose_override():
    """faultctl compose client: an override for docker-compose 1.29 (the
    user's file unchanged) runs the client service under faultnet and not
    the server; a refuse rule flipped off from the host; counts on the
    host match the server's own."""
    port = 18000 + os.getpid() % 1000
    out = os.path.join(WORK, "out")
    os.makedirs(out)
    conf = policy('rules = ( { name = "cut"; action = "refuse"; '
                  'match = { to = "127.0.0.1/32"; port = %d; }; } );\n' % port)
    compose = os.path.join(WORK, "compose.yml")
    with open(compose, "w") as f:
        f.write('version: "3.8"\nservices:\n'
                '  server:\n    image: %s\n    network_mode: host\n'
                '    volumes: ["%s:/out"]\n'
                '    command: ["perl", "-MIO::Socket::INET", "-e", %s, "%d", "/out/server.log"]\n'
                '  client:\n    image: %s\n    network_mode: host\n    depends_on: [server]\n'
                '    volumes: ["%s:/out"]\n'
                '    command: ["bash", "-c", %s]\n'
                % (IMAGE, out, json.dumps(SERVER.replace("$", "$$")), port, IMAGE, out,
                   json.dumps(("sleep 1; (%s) >/out/client.log" % (CURL_LOOP % (30, port)))
                              .replace("$", "$$"))))
    override = os.path.join(WORK, "override.yml")
    r = ctl("compose", "--config", conf, "-g", "cmp", "-o", override, "client")
    check("faultctl compose client wrote the override", r.returncode == 0 and
          "client:" in open(override).read() and "server:" not in open(override).read(),
          r.stderr)
    nets = networks()
    up = subprocess.Popen(["docker-compose", "-p", "fn%d" % os.getpid(), "-f", compose, "-f",
                           override, "up", "--abort-on-container-exit", "--exit-code-from",
                           "client"], env=ENV, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True)
    log = os.path.join(out, "client.log")
    lines = lambda: open(log).read().splitlines() if os.path.exists(log) else []  # noqa: E731
    try:
        refused = wait_for(lambda: sum(x == "000 7" for x in lines()) >= 3, timeout=40)
        check("the client service under the policy: connects refused (curl exit 7)", refused,
              lines())
        m = members("cmp")
        check("ps on the host lists the client's processes, not the server's",
              m and not any("perl" in x.get("cmd", "") for x in m), m)
        r = ctl("-g", "cmp", "disable", "cut")
        n = len(lines())
        back = wait_for(lambda: sum(x == "200 0" for x in lines()[n:]) >= 2, timeout=10)
        check("disabled from the host: the client reaches the server container (200)",
              r.returncode == 0 and back, (r.stdout, r.stderr, lines()[n:]))
        rc = up.wait(timeout=60)
        check("docker-compose up ended with the client (exit %d)" % rc, rc == 0,
              up.stdout.read()[-600:])
        r = ctl("-g", "cmp", "--json", "stats")
        got = [json.loads(x) for x in r.stdout.splitlines() if '"cut"' in x]
        faults = sum(x.get("faults", 0) for x in got)
        refusals = sum(x == "000 7" for x in lines())
        served = len(open(os.path.join(out, "server.log")).read().splitlines())
        oks = sum(x == "200 0" for x in lines())
        check("counts on the host: faults %d = the client's refusals %d; the server's "
              "requests %d = the client's 200s %d" % (faults, refusals, served, oks),
              faults == refusals > 0 and served == oks > 0, r.stdout + r.stderr)
        check("no network was made (host network only): %s" % networks(), networks() == nets,
              networks())
    finally:
        if up.poll() is None:
            up.kill()
            up.wait()
        subprocess.run(["docker-compose", "-p", "fn%d" % os.getpid(), "-f", compose, "-f",
                        override, "down"], env=ENV, capture_output=True, timeout=60)


def compose_cmd(project, *files):
    argv = ["docker-compose", "-p", project]
    for f in files:
        argv += ["-f", f]
    return argv


def test_compose_retry_storm():
    """The issue's second acceptance: a two-service Compose file (the
    origin server and the retry-storm workers of tests/http, host network),
    the workers alone under faultnet by faultctl compose's override: 6
    workers against a 3 s outage of 503s (policies/http-5xx-then-healthy.conf
    scaled down), without and with a circuit breaker; the 503s the workers
    met are the rule's answers counted on the host, and the breaker cuts the
    waste."""
    port = 19000 + os.getpid() % 1000
    conf = policy(open(os.path.join(SRC, "policies", "http-5xx-then-healthy.conf")).read()
                  .replace("for_ms = 60000", "for_ms = 3000").replace("port = 8080", "port = %d" % port))
    http_dir = os.path.join(SRC, "tests", "http")
    compose = os.path.join(WORK, "storm.yml")
    serve = ("import sys; sys.path.insert(0, %r); import origin; "
             "origin.Origin(%d, '127.85.0.4').serve_forever()" % (http_dir, port))
    with open(compose, "w") as f:
        f.write('version: "3.8"\nservices:\n'
                '  server:\n    image: %s\n    network_mode: host\n    volumes: ["%s:%s:ro"]\n'
                '    command: ["python3", "-c", %s]\n'
                '  client:\n    image: %s\n    network_mode: host\n    volumes: ["%s:%s:ro"]\n'
                '    command: ["true"]\n'
                % (IMAGE, http_dir, http_dir, json.dumps(serve), IMAGE, http_dir, http_dir))
    project = "fnstorm%d" % os.getpid()
    try:
        up = run(compose_cmd(project, compose) + ["up", "-d", "server"], timeout=60)
        check("the server service is up (not under faultnet)", up.returncode == 0, up.stderr)
        res = {}
        for mode in ("none", "breaker"):
            override = os.path.join(WORK, "storm-%s.yml" % mode)
            r = ctl("compose", "--config", conf, "-g", "storm-" + mode, "-o", override, "client")
            w = run(compose_cmd(project, compose, override) + [
                "run", "--rm", "-T", "client", "python3", os.path.join(http_dir, "storm.py"),
                "127.85.0.4", str(port), "6", "1.5", mode], timeout=120)
            out = [json.loads(x) for x in w.stdout.splitlines() if x.startswith("{")]
            out = out[-1] if out else {"error": w.stdout[-300:] + w.stderr[-600:]}
            st = ctl("-g", "storm-" + mode, "--json", "stats")
            recs = [json.loads(y) for y in st.stdout.splitlines() if y.startswith("{")]
            ans = sum(x.get("answered", 0) for x in recs
                      if x.get("type") == "rule" and x.get("name") == "degraded-60s")
            res[mode] = (out, ans)
            check("storm (%s) in the client container: the 503s the workers met (%s) are the "
                  "rule's answers read on the host (%d)" % (mode, out.get("errors_5xx"), ans),
                  r.returncode == 0 and out.get("errors_5xx") == ans > 0, (out, st.stdout[-800:]))
            check("storm (%s): the workers recover from the real server container once the 3 s "
                  "outage ends (first success at %s s)" % (mode, out.get("first_ok")),
                  out.get("first_ok") and 2.9 < out["first_ok"] < 6.5, out)
        a, b = res["none"][1], res["breaker"][1]
        check("storm: 6 workers waste %d requests without a circuit breaker, %d with one"
              % (a, b), b > 0 and a >= 3 * b, res)
    finally:
        run(compose_cmd(project, compose) + ["down"], timeout=60)


def main():
    print("faultctl docker and compose on a Docker engine of its own (%s)" % BUILD)
    os.mkdir(RUNDIR, 0o700)
    make_user.why = make_user()
    why = start_engine()
    if why:
        print("  skip - the Docker part: the engine cannot start here: %s" % why)
        checks.skip()
        stop_engine()
        remove_user()
        shutil.rmtree(WORK, ignore_errors=True)
        sys.exit(0)
    try:
        print("  (engine %s, no bridge, no iptables; networks: %s)"
              % (docker("info", "-f", "{{.ServerVersion}}").stdout.strip(), " ".join(networks())))
        r = subprocess.run([os.path.join(SRC, "scripts", "test-root.sh"), "py"],
                           capture_output=True, text=True)
        root = r.stdout.strip()
        check("a debootstrap root with curl and python3-requests (scripts/test-root.sh py)", r.returncode == 0 and
              root, r.stderr)
        r = import_tar(IMAGE, root)
        check("imported as the image %s" % IMAGE, r.returncode == 0, r.stderr)
        tests = [test_curl_blackhole_flipped_from_host, test_two_containers_pid_1,
                 test_refused_with_the_reason, test_root_container_beside_a_user]
        if shutil.which("docker-compose"):
            tests += [test_compose_override, test_compose_retry_storm]
        else:
            print("  skip - compose: docker-compose is not installed")
            checks.skip()
        for t in checks.selected(tests):
            try:
                t()
            except Exception:
                check("%s ran to its end" % checks.name_of(t), False, traceback.format_exc())
    finally:
        stop_engine()
        remove_user()
        shutil.rmtree(WORK, ignore_errors=True)
    sys.exit(1 if checks.failed else 0)


main()
