"""ns_bundle_test.py - the self-contained bundle (make bundle) with no
container engine: processes in a pid and mount namespace of their own,
chrooted into a Debian 12 root built by debootstrap (scripts/test-root.sh,
cached) that has none of the libraries the shim loads. The bundle mounted
read-only there loads, reads its policy and is flipped live from the host;
the shim alone (no bundle) cannot; faultctl bundle check reads a root's C
library and refuses musl and an old glibc with the reason. Run by
tests/run.sh (section containers) as root; prints "ok"/"FAIL" lines.

usage: ns_bundle_test.py BUILD_DIR
"""
import glob
import json
import os
import re
import select
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import traceback

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import checks  # noqa: E402
from checks import check  # noqa: E402

SRC = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD = os.path.abspath(sys.argv[1])
BUNDLE = os.path.join(BUILD, "bundle")
CTL = os.path.join(BUILD, "faultctl")
WORK = tempfile.mkdtemp(prefix="fn-ctr-")
RUNDIR = os.path.join(WORK, "run")
CONF = os.path.join(WORK, "ctr.conf")
FIFO = os.path.join(WORK, "tick")
ROOT = None

# Connects to PORT every 50 ms with bash's /dev/tcp (no program of its
# own: nothing forks), printing each change of outcome.
PROBE = r"""
exec 9<>"$1"; last=
while :; do
    if { exec 3<>/dev/tcp/127.0.0.1/$2; } 2>/dev/null; then now=connected; exec 3>&-; else now=refused; fi
    [ "$now" != "$last" ] && echo "$now" && last=$now
    read -t 0.05 -u 9
done
"""


class Lines:
    """A process's stdout line by line, each wait bounded."""

    def __init__(self, proc):
        self.fd, self.buf = proc.stdout.fileno(), b""

    def next(self, timeout=5.0):
        end = time.time() + timeout
        while b"\n" not in self.buf:
            left = end - time.time()
            if left <= 0 or not select.select([self.fd], [], [], left)[0]:
                return "(nothing within %.0f s)" % timeout
            got = os.read(self.fd, 4096)
            if not got:
                return "(ended)"
            self.buf += got
        line, self.buf = self.buf.split(b"\n", 1)
        return line.decode()


def ctl(*args, **kw):
    e = dict(os.environ, FAULTNET_RUNDIR=RUNDIR)
    e.pop("LD_PRELOAD", None)
    e.update(kw.pop("env", {}))
    return subprocess.run([CTL] + list(args), env=e, capture_output=True, text=True, timeout=30)


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


def in_chroot(group, argv, lib="/opt/faultnet/libfaultnet.so", **kw):
    """argv as pid 1 of a pid and mount namespace, chrooted into ROOT, with
    the bundle mounted read-only at /opt/faultnet and this test's folder
    (policy, run directory) at its own path, as faultctl docker run mounts
    them; only the variables given, as a container's environment."""
    inner = ["LD_PRELOAD=" + lib, "FAULTNET_RUNDIR=" + RUNDIR, "FAULTNET_GROUP=" + group,
             "FAULTNET_CONFIG=" + CONF, "PATH=/usr/sbin:/usr/bin:/sbin:/bin"]
    script = ("mount --make-rprivate / && mount --bind \"$1\" \"$2/opt/faultnet\" && "
              "mount -o remount,bind,ro \"$2/opt/faultnet\" && mount --bind \"$3\" \"$2$3\" && "
              "mount -t proc proc \"$2/proc\" && shift 3 && exec chroot \"$R\" \"$@\"")
    e = dict(os.environ, R=ROOT)
    e.pop("LD_PRELOAD", None)
    return subprocess.Popen(["unshare", "--mount", "--pid", "--fork", "--kill-child",
                             "sh", "-c", script, "sh", BUNDLE, ROOT, WORK,
                             "/usr/bin/env", "-i"] + inner + argv, env=e, **kw)


def sonames_in_sources():
    """Every "libNAME.so.N" the shim's sources name (what it dlopens), but
    one only looked up in the process (a line with RTLD_NOLOAD: the app's
    own GnuTLS), which the shim never loads."""
    found = set()
    for d in ("core", "preload"):
        for path in glob.glob(os.path.join(SRC, d, "**", "*.c"), recursive=True):
            for line in open(path):
                if "RTLD_NOLOAD" not in line:
                    found |= set(re.findall(r'"(lib[A-Za-z0-9_+-]+\.so\.[0-9.]+)"', line))
    return found


def test_bundle_holds_what_the_shim_loads():
    want = sonames_in_sources()
    have = set(os.listdir(BUNDLE))
    check("the bundle holds every library the shim's sources load by name (%s)"
          % " ".join(sorted(want)), want and want <= have, sorted(want - have))
    bad = []
    for f in sorted(have):
        if ".so" in f:
            d = subprocess.run(["readelf", "-d", os.path.join(BUNDLE, f)],
                               capture_output=True, text=True).stdout
            if "Library runpath: [$ORIGIN]" not in d:
                bad.append(f)
    check("each of its %d files finds the others first (RUNPATH $ORIGIN)"
          % sum(".so" in f for f in have), not bad, bad)
    man = open(os.path.join(BUNDLE, "faultnet-bundle.txt")).read()
    check("faultnet-bundle.txt says the glibc it needs", re.search(r"^glibc 2\.\d+", man, re.M), man)


def test_root_has_none_of_them():
    libs = [f for f in os.listdir(BUNDLE) if ".so" in f]
    there = [p for f in libs for p in glob.glob(os.path.join(ROOT, "usr/lib/*/" + f + "*"))]
    check("the debootstrap root has none of the bundle's libraries", not there, there)


def test_libraries_resolve_in_the_chroot():
    """ldd in the chroot: each bundled library's own needs are met from the
    bundle (libssl's libcrypto too), never 'not found'."""
    libs = sorted(f for f in os.listdir(BUNDLE) if ".so" in f)
    p = in_chroot("ldd", ["ldd"] + ["/opt/faultnet/" + f for f in libs],
                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    out = p.communicate(timeout=30)[0]
    deps = re.findall(r"^\s+(\S+) => (\S+)", out, re.M)
    libc = ("libc.so", "libm.so", "libdl.so", "libpthread.so", "libresolv.so", "librt.so")
    outside = [d for d in deps if not d[1].startswith("/opt/faultnet/")
               and not d[0].startswith(libc)]
    check("ldd in the chroot: %d needs, none 'not found', each non-glibc one from "
          "/opt/faultnet" % len(deps), deps and "not found" not in out and not outside,
          out[-800:])


def test_shim_alone_fails_there():
    """The shim without the bundle (build/libfaultnet.so copied into the
    test's folder): the chroot has no libconfig, the policy cannot be read.
    A policy text no start has kept compiled in the run directory (a start
    that finds its copy needs no libconfig: core/compiled.h)."""
    with open(CONF, "w") as f:
        f.write('# alone %d\nrules = ( { name = "cut"; action = "refuse"; '
                'match = { to = "127.0.0.1/32"; port = 9; }; } );\n' % os.getpid())
    shutil.copy(os.path.join(BUILD, "libfaultnet.so"), os.path.join(WORK, "alone.so"))
    p = in_chroot("alone", ["bash", "-c", "true"], lib=os.path.join(WORK, "alone.so"),
                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    out = p.communicate(timeout=30)[0]
    check("the shim alone in the chroot: exit 78, libconfig.so.9 cannot be loaded (exit %d)"
          % p.returncode, p.returncode == 78 and "libconfig.so.9" in out, out)


def test_live_flip_in_chroot():
    """The bundle's shim reads its policy (libconfig from the bundle) and is
    flipped from the host: refused while the rule is on."""
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("127.0.0.1", 0))
    srv.listen(512)
    port = srv.getsockname()[1]
    with open(CONF, "w") as f:
        f.write('rules = ( { name = "cut"; action = "refuse"; '
                'match = { to = "127.0.0.1/32"; port = %d; }; enabled = false; } );\n' % port)
    p = in_chroot("flip", ["bash", "-c", PROBE, "probe", FIFO, str(port)], stdout=subprocess.PIPE)
    out = Lines(p)
    try:
        first = out.next()
        check("the chrooted probe connects with the rule off", first == "connected", first)
        m = wait_for(lambda: members("flip"))
        kid = int(open("/proc/%d/task/%d/children" % (p.pid, p.pid)).read().split()[0])
        check("ps on the host lists it by its host pid (%s; unshare's child %d)"
              % ([x.get("pid") for x in m], kid), [x.get("pid") for x in m] == [kid], m)
        r = ctl("-g", "flip", "enable", "cut")
        now = out.next()
        check("faultctl -g enable on the host: its connects are refused",
              r.returncode == 0 and now == "refused", (now, r.stdout, r.stderr))
        r = ctl("-g", "flip", "disable", "cut")
        now = out.next()
        check("and connect again once disabled", r.returncode == 0 and now == "connected",
              (now, r.stdout, r.stderr))
        r = ctl("-g", "flip", "--json", "stats")
        stat = [json.loads(x) for x in r.stdout.splitlines() if '"cut"' in x]
        check("its counts are read on the host (faults > 0, pid %d)" % kid,
              stat and stat[0].get("faults", 0) > 0 and stat[0].get("pid") == kid, r.stdout)
    finally:
        p.kill()
        p.wait()
        srv.close()


def test_http_rule_in_chroot():
    """An HTTP rule in the chroot: the shim's HTTP engine parses the request
    with the bundle's libhttp_parser (the root has none) and answers 503;
    the library is mapped from /opt/faultnet."""
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("127.0.0.1", 0))
    srv.listen(16)
    port = srv.getsockname()[1]
    with open(CONF, "w") as f:
        f.write('rules = ( { name = "r503"; action = "respond"; status = 503; '
                'match = { to = "127.0.0.1/32"; port = %d; }; } );\n' % port)
    script = ('exec 3<>/dev/tcp/127.0.0.1/$1; printf "GET /x HTTP/1.1\\r\\nHost: t\\r\\n'
              '\\r\\n" >&3; read -r line <&3; echo "$line"; '
              'grep -o "/opt/faultnet/libhttp_parser[^ ]*" /proc/$$/maps | sort -u')
    p = in_chroot("http", ["bash", "-c", script, "h", str(port)],
                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        out = p.communicate(timeout=30)[0]
    finally:
        srv.close()
    check("an HTTP rule in the chroot answers 503 (the request parsed by the bundle's "
          "libhttp_parser, mapped from /opt/faultnet)", out.startswith("HTTP/1.1 503") and
          "/opt/faultnet/libhttp_parser.so.2.9" in out, out)
    # HTTP/2 with prior knowledge: the preface and an empty SETTINGS frame
    # hand the connection to the engine's HTTP/2 side, on libnghttp2.
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("127.0.0.1", port))
    srv.listen(16)
    script = ('exec 3<>/dev/tcp/127.0.0.1/$1; printf "PRI * HTTP/2.0\\r\\n\\r\\nSM\\r\\n\\r\\n'
              '\\0\\0\\0\\4\\0\\0\\0\\0\\0" >&3; read -r -N 9 -t 3 x <&3; echo "read $?"; '
              'grep -o "/opt/faultnet/libnghttp2[^ ]*" /proc/$$/maps | sort -u')
    p = in_chroot("http", ["bash", "-c", script, "h", str(port)],
                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        out = p.communicate(timeout=30)[0]
    finally:
        srv.close()
    check("HTTP/2 with prior knowledge under the rule in the chroot: the HTTP engine "
          "loads the bundle's libnghttp2 (mapped from /opt/faultnet)",
          "/opt/faultnet/libnghttp2.so.14" in out, out)


def test_two_chroots_pid_1_gone_in_a_second():
    """Two chrooted members, each pid 1 of its namespace: two members; one
    that exits is gone for ps within a second."""
    with open(CONF, "w") as f:
        f.write('rules = ( { name = "off"; action = "refuse"; '
                'match = { to = "127.0.0.9/32"; }; enabled = false; } );\n')
    # Each joins at its first covered call (a UDP socket's connect), then waits.
    ps = [in_chroot("twins", ["bash", "-c", 'exec 3<>/dev/udp/127.0.0.1/9 && exec 9<>"$1"; read -u 9',
                              "w", FIFO])
          for _ in range(2)]
    try:
        m = wait_for(lambda: len(members("twins")) == 2 and members("twins"))
        names = sorted(os.path.basename(f) for f in glob.glob(os.path.join(RUNDIR, "twins.*.mem")))
        check("two chroots' pid 1: two members, two state files (%s)" % names,
              m and len(names) == 2 and all(n.startswith("twins.1.") for n in names), names)
        ps[0].kill()
        ps[0].wait()
        t0 = time.time()
        one = wait_for(lambda: len(members("twins")) == 1, timeout=3)
        took = time.time() - t0
        check("one that exits is gone for ps within a second (%.2f s)" % took,
              one and took < 1.0, members("twins"))
    finally:
        for p in ps:
            p.kill()
            p.wait()


def fake_root(files):
    """A root holding files {relative path: bytes}."""
    d = tempfile.mkdtemp(prefix="fake-root-", dir=WORK)
    for rel, data in files.items():
        os.makedirs(os.path.join(d, os.path.dirname(rel)), exist_ok=True)
        with open(os.path.join(d, rel), "wb") as f:
            f.write(data)
    return d


def test_bundle_check():
    r = ctl("bundle", "check", ROOT)
    check("bundle check: the debootstrap root's glibc 2.36 is enough: %s" % r.stdout.strip(),
          r.returncode == 0 and "glibc 2.36" in r.stdout, r.stdout + r.stderr)
    elf = open("/bin/true", "rb").read()
    musl = fake_root({"lib/ld-musl-x86_64.so.1": elf})
    r = ctl("bundle", "check", musl)
    check("a musl root is refused, saying musl", r.returncode == 1 and "musl" in r.stderr,
          r.stdout + r.stderr)
    old = fake_root({"usr/lib/x86_64-linux-gnu/libc.so.6":
                     elf[:64] + b"\0GLIBC_2.2.5\0GLIBC_2.17\0GLIBC_2.28\0GLIBC_PRIVATE\0"})
    r = ctl("bundle", "check", old)
    check("a glibc 2.28 root is refused, saying both versions",
          r.returncode == 1 and "glibc is 2.28" in r.stderr and "2.3" in r.stderr,
          r.stdout + r.stderr)
    r = ctl("bundle", "check", fake_root({}))
    check("a root with no C library is refused", r.returncode == 1 and
          "no C library" in r.stderr, r.stdout + r.stderr)
    # The same root against a bundle said to need a glibc newer than any.
    fake = os.path.join(WORK, "newer")
    os.makedirs(fake)
    with open(os.path.join(fake, "faultnet-bundle.txt"), "w") as f:
        f.write("arch x86_64\nglibc 2.99\n")
    r = ctl("bundle", "check", ROOT, env={"FAULTNET_BUNDLE": fake})
    check("the debootstrap root against a bundle needing glibc 2.99: refused",
          r.returncode == 1 and "older than the 2.99" in r.stderr, r.stdout + r.stderr)


def main():
    global ROOT
    print("the bundle in a chroot, in pid and mount namespaces (%s)" % BUILD)
    r = subprocess.run([os.path.join(SRC, "scripts", "test-root.sh"), "minbase"],
                       capture_output=True, text=True)
    ROOT = r.stdout.strip()
    if r.returncode != 0 or not ROOT:
        check("a debootstrap root (scripts/test-root.sh minbase)", False, r.stderr)
        sys.exit(1)
    os.mkdir(RUNDIR, 0o700)
    os.mkfifo(FIFO)
    with open(CONF, "w") as f:
        f.write('rules = ( { name = "off"; action = "refuse"; '
                'match = { to = "127.0.0.9/32"; }; enabled = false; } );\n')
    os.makedirs(ROOT + "/opt/faultnet", exist_ok=True)
    os.makedirs(ROOT + WORK)
    tests = [test_bundle_holds_what_the_shim_loads, test_root_has_none_of_them,
             test_libraries_resolve_in_the_chroot, test_shim_alone_fails_there,
             test_live_flip_in_chroot, test_http_rule_in_chroot,
             test_two_chroots_pid_1_gone_in_a_second,
             test_bundle_check]
    try:
        for t in checks.selected(tests):
            try:
                t()
            except Exception:
                check("%s ran to its end" % checks.name_of(t), False, traceback.format_exc())
    finally:
        os.rmdir(ROOT + WORK)
        shutil.rmtree(WORK, ignore_errors=True)
    sys.exit(1 if checks.failed else 0)


main()
