"""compiled_test.py - the policy compiled once (core/compiled.c,
core/compiled_file.c): the first start under the shim parses the file and
writes its compiled copy to the run directory; later starts rebuild the
policy from it without loading libconfig, and once the file has settled
find it by the file's identity without reading the file. A changed file
(same size, same mtime) is parsed again; a copy
that another account owns, that others can write, that is a symbolic link
or that is corrupt is never used; a bad policy still exits 78 with its
message; @include and body_file policies are parsed at every start and
never kept. Whether a start loaded libconfig is read from the dynamic
loader's own trace (LD_DEBUG=files). Run by tests/run.sh; prints
"ok"/"FAIL" lines and adds them to $FN_COUNTS.

usage: compiled_test.py BUILD_DIR [PRELOAD_FIRST]
"""
import glob
import os
import shlex
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
import time
import traceback

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import checks  # noqa: E402
from checks import check  # noqa: E402

BUILD = os.path.abspath(sys.argv[1])
FIRST = sys.argv[2] if len(sys.argv) > 2 and sys.argv[2] else None
LIB = os.path.join(BUILD, "libfaultnet.so")
PY = "/usr/bin/python3"
WORK = tempfile.mkdtemp(prefix="fn-compiled-")

# Connects to 127.0.0.1:PORT once: "connected", "refused" or the error.
PROBE = checks.CONNECT_PROBE


def fresh_rundir():
    d = tempfile.mkdtemp(prefix="run-", dir=WORK)
    os.chmod(d, 0o700)
    return d


# A command whose first covered call (a UDP socket's connect, which sends
# nothing) comes at once: a process builds its policy there, at its join,
# not at its start.
JOINS = ("bash", "-c", "exec 3<>/dev/udp/127.0.0.1/9")


def start(conf, rundir, argv=JOINS, extra=None):
    """One start under the shim that joins: (completed process, whether it
    loaded libconfig)."""
    e = {k: v for k, v in os.environ.items() if not k.startswith("FAULTNET_")}
    e.update(LD_PRELOAD=(FIRST + ":" if FIRST else "") + LIB, FAULTNET_CONFIG=conf,
             FAULTNET_RUNDIR=rundir, LD_DEBUG="files")
    e.update(extra or {})
    p = subprocess.run(list(argv), env=e, capture_output=True, text=True, timeout=120)
    return p, "file=libconfig.so" in p.stderr


def copies(rundir):
    """The copies named by their text (not their second names)."""
    return sorted(set(glob.glob(os.path.join(rundir, "policy-*.compiled"))) - set(stamps(rundir)))


def stamps(rundir):
    """The copies' second names, by the policy file's identity."""
    return sorted(glob.glob(os.path.join(rundir, "policy-s-*.compiled")))


def probe(conf, rundir, port):
    p, parsed = start(conf, rundir, (PY, "-c", PROBE, str(port)))
    return p.stdout.strip(), parsed


def write(path, text, mtime=None):
    with open(path, "w") as f:
        f.write(text)
    if mtime is not None:
        os.utime(path, ns=(mtime, mtime))


def listener():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(16)
    return s


def refuse(port):
    return ('rules = ( { name = "cut"; action = "refuse"; '
            'match = { to = "127.0.0.1/32"; port = %d; }; } );\n' % port)


def test_second_start_without_libconfig():
    """The first start parses and writes the copy (mode 0600, no temporary
    file left); the second loads no libconfig and still applies the rule."""
    rundir, conf = fresh_rundir(), os.path.join(WORK, "one.conf")
    a = listener()
    try:
        port = a.getsockname()[1]
        write(conf, refuse(port))
        got1, parsed1 = probe(conf, rundir, port)
        kept = copies(rundir)
        check("the first start parses (libconfig loaded) and refuses (%s)" % got1,
              parsed1 and got1 == "refused")
        check("and writes one compiled copy, mode 0600, no temporary file left",
              len(kept) == 1 and stat.S_IMODE(os.stat(kept[0]).st_mode) == 0o600
              and not glob.glob(os.path.join(rundir, ".policy-*")), os.listdir(rundir))
        got2, parsed2 = probe(conf, rundir, port)
        check("the second start loads no libconfig and refuses as the first (%s)" % got2,
              not parsed2 and got2 == "refused")
        p, parsed3 = start(conf, rundir)
        check("a start of true with the copy: exit 0, no libconfig",
              p.returncode == 0 and not parsed3, p.stderr[-300:])
    finally:
        a.close()


def test_changed_file_same_size_and_mtime():
    """The key is the file's whole text: another text of the same size and
    the same mtime is parsed, not taken for the copy of the first."""
    rundir, conf = fresh_rundir(), os.path.join(WORK, "two.conf")
    a, b = listener(), listener()
    try:
        pa, pb = a.getsockname()[1], b.getsockname()[1]
        ta, tb = refuse(pa), refuse(pb)
        if len(ta) != len(tb):
            check("two ports of as many digits (%d, %d)" % (pa, pb), False)
            return
        write(conf, ta, mtime=10**18)
        probe(conf, rundir, pa)
        first = probe(conf, rundir, pa)
        write(conf, tb, mtime=10**18)
        check("the text changed, size and mtime kept",
              os.stat(conf).st_size == len(ta) and os.stat(conf).st_mtime_ns == 10**18)
        after = probe(conf, rundir, pa), probe(conf, rundir, pb)
        check("with A's copy: A's port refused (%s); B's text is parsed and A's port "
              "connects, B's refused (%s)" % (first, after),
              first == ("refused", False) and after[0] == ("connected", True)
              and after[1] == ("refused", False))
        write(conf, ta, mtime=10**18)
        back = probe(conf, rundir, pa)
        check("back to A's text: A's copy again, no parse (%s); one copy per text (%d)"
              % (back, len(copies(rundir))),
              back == ("refused", False) and len(copies(rundir)) == 2)
    finally:
        a.close()
        b.close()


def planted(kind):
    """A run directory whose copy for the policy is replaced by kind; the
    copy was valid (the start before read it without libconfig)."""
    rundir, conf = fresh_rundir(), os.path.join(WORK, "plant-%s.conf" % kind)
    write(conf, 'rules = ( { name = "x"; action = "refuse"; '
                'match = { to = "127.0.0.1/32"; port = 9; }; } );\n')
    start(conf, rundir)
    p, parsed = start(conf, rundir)
    # A second name (made when the file is 2 s old: a slow run) is
    # another name of the valid copy: these cases are about the copy's.
    for name in stamps(rundir):
        os.unlink(name)
    [copy] = copies(rundir)
    good = open(copy, "rb").read()
    if kind == "group-writable":
        os.chmod(copy, 0o620)
    elif kind == "other-writable":
        os.chmod(copy, 0o602)
    elif kind == "symlink":
        elsewhere = os.path.join(WORK, "elsewhere-copy")
        shutil.copy(copy, elsewhere)
        os.chmod(elsewhere, 0o600)
        os.unlink(copy)
        os.symlink(elsewhere, copy)
    elif kind == "another uid":
        os.chown(copy, 65534, 65534)
    elif kind == "truncated":
        with open(copy, "r+b") as f:
            f.truncate(len(good) - 9)
    elif kind == "flipped":
        with open(copy, "r+b") as f:
            f.seek(len(good) - 40)
            f.write(bytes([good[-40] ^ 0x5a]))
    return conf, rundir, copy, not parsed


def test_untrusted_copies_ignored():
    """A copy another account owns, that group or others can write, that is
    a symbolic link (to a valid copy), or that is cut short or has a byte
    changed: the start parses instead, and runs."""
    good_of = {}
    kinds = ["group-writable", "other-writable", "symlink", "truncated", "flipped"]
    if os.geteuid() == 0:
        kinds.append("another uid")
    else:
        print("  skip - a copy owned by another uid: chown needs root")
        checks.skip()
    for kind in kinds:
        conf, rundir, copy, was_used = planted(kind)
        good_of[kind] = open(os.path.join(WORK, "elsewhere-copy"), "rb").read() \
            if kind == "symlink" else None
        p, parsed = start(conf, rundir)
        check("a %s copy is not used: the start loads libconfig and exits 0 (the valid "
              "copy was used before: %s)" % (kind, was_used),
              was_used and parsed and p.returncode == 0, p.stderr[-300:])
        if kind == "symlink":
            target = os.path.join(WORK, "elsewhere-copy")
            check("the link's target is not written through (the link itself replaced by "
                  "a copy of this user's)", open(target, "rb").read() == good_of[kind]
                  and not os.path.islink(copy) and len(copies(rundir)) == 1)


def test_large_spoilt_copy():
    """A copy of over 4 KiB (30 rules: read into a mapping of its own, not
    the heap) with a byte changed: the start parses the file and runs with
    its rules, and writes the copy anew. It was freed as heap memory, with
    the length 0 it had been handed before its read: every start aborted
    (SIGABRT, free(): invalid pointer) until the copy was removed."""
    rundir, conf = fresh_rundir(), os.path.join(WORK, "large.conf")
    srv = listener()
    port = srv.getsockname()[1]
    try:
        rules = ['{ name = "r%d"; action = "refuse"; match = { to = "127.100.0.%d/32"; }; }'
                 % (i, i) for i in range(30)]
        rules.append('{ name = "cut"; action = "refuse"; match = { to = "127.0.0.1/32"; '
                     'port = %d; }; }' % port)
        write(conf, "rules = ( %s );\n" % ", ".join(rules))
        start(conf, rundir)
        kept = copies(rundir)
        size = os.path.getsize(kept[0]) if kept else 0
        check("the copy of 31 rules is over 4 KiB (%d bytes)" % size, size > 4096)
        if not kept:
            return
        blob = bytearray(open(kept[0], "rb").read())
        blob[len(blob) // 2] ^= 0x5A
        with open(kept[0], "wb") as f:
            f.write(blob)
        p, parsed = start(conf, rundir)
        check("a start with it spoilt runs (exit %d) and parses the file"
              % p.returncode, p.returncode == 0 and parsed, p.stderr[-300:])
        got, parsed = probe(conf, rundir, port)
        check("the rules in force, from the copy written anew (%s, libconfig %s)"
              % (got, parsed), got == "refused" and not parsed)
    finally:
        srv.close()


def test_identity_names_the_copy():
    """Once the policy file has not changed for 2 s, a start that finds its
    copy by the text gives the copy a second name from the file's identity
    (device, inode, size, times), and later starts find it with one stat of
    the file, no read of it. A change of the file, even of the same size
    and mtime, changes its ctime, so the next start reads the text again. A
    second name that is spoilt is not used."""
    rundir, conf = fresh_rundir(), os.path.join(WORK, "ident.conf")
    a, b = listener(), listener()
    pa, pb = a.getsockname()[1], b.getsockname()[1]
    try:
        if len(str(pa)) != len(str(pb)):
            check("two ports of as many digits (%d, %d)" % (pa, pb), False)
            return
        write(conf, refuse(pa), mtime=10**18)
        t0 = time.monotonic()
        start(conf, rundir)
        start(conf, rundir)
        if time.monotonic() - t0 < 1.5:
            check("a file changed less than 2 s before gets no second name",
                  not stamps(rundir), stamps(rundir))
        else:
            print("  skip - two starts took over 1.5 s: the file had settled")
            checks.skip()
        time.sleep(2.1)
        start(conf, rundir)
        kept, named = copies(rundir), stamps(rundir)
        check("a start once the file has settled names the copy by its identity (a link)",
              len(kept) == 1 and len(named) == 1
              and os.stat(kept[0]).st_ino == os.stat(named[0]).st_ino, (kept, named))
        if shutil.which("strace"):
            trace = os.path.join(WORK, "ident.strace")
            e = {k: v for k, v in os.environ.items() if not k.startswith("FAULTNET_")}
            e.update(LD_PRELOAD=(FIRST + ":" if FIRST else "") + LIB, FAULTNET_CONFIG=conf,
                     FAULTNET_RUNDIR=rundir)
            subprocess.run(["strace", "-f", "-qq", "-o", trace, "true"], env=e,
                           capture_output=True, timeout=120)
            with open(trace) as f:
                lines = f.read().splitlines()
            calls = [x for x in lines if conf in x or ".compiled" in x]
            opened = [x for x in calls if "open" in x]
            looks = [x for x in lines if '"%s"' % rundir in x and "stat" in x]
            check("and it looks at the run directory once, though three parts of the start ask"
                  " for it (the copy's names, control's)", len(looks) == 1, looks)
            check("and the next start stats the file, reads no text, opens no copy but that one,"
                  " asks no statfs (a second name is made only where the identity is kept)",
                  not any(conf in x for x in opened)
                  and [x for x in calls if conf in x and "stat" in x and "statfs" not in x]
                  and not any("statfs" in x for x in calls)
                  and len(opened) == 1 and os.path.basename(named[0]) in opened[0], calls)
        else:
            print("  skip - strace is not installed: the start's calls cannot be seen")
            checks.skip()
        got, parsed = probe(conf, rundir, pa)
        check("the rule in force from it, no libconfig (%s)" % got, got == "refused" and not parsed)
        spoilt = bytearray(open(named[0], "rb").read())
        spoilt[-40] ^= 0x5A
        tmp = named[0] + ".new"
        with open(tmp, "wb") as f:
            f.write(spoilt)
        os.chmod(tmp, 0o600)
        os.rename(tmp, named[0])
        got, parsed = probe(conf, rundir, pa)
        check("a spoilt second name is not used: the copy found by the text instead (%s, "
              "libconfig %s)" % (got, parsed), got == "refused" and not parsed)
        check("and the start that read the text named the copy again",
              os.stat(named[0]).st_ino == os.stat(kept[0]).st_ino)
        write(conf, refuse(pb), mtime=10**18)
        check("the text changed, size and mtime kept",
              os.stat(conf).st_size == len(refuse(pa)) and os.stat(conf).st_mtime_ns == 10**18)
        after = probe(conf, rundir, pa), probe(conf, rundir, pb)
        check("the changed file is read: the old port connects, the new one is refused (%s)"
              % (after,), after[0][0] == "connected" and after[1][0] == "refused")
    finally:
        a.close()
        b.close()


def test_no_second_name_off_local():
    """A file system whose times a stat may not read from the file itself
    (here ramfs, which the list of local ones does not hold, as it does
    not hold NFS or FUSE) never gets a second name: a start then always
    reads the text, and a start that finds a second name needs no statfs
    to trust it."""
    if os.geteuid() != 0 or not shutil.which("unshare"):
        print("  skip - needs root and unshare: a file system of another kind is mounted")
        checks.skip()
        return
    rundir, mnt = fresh_rundir(), os.path.join(WORK, "ramfs")
    os.mkdir(mnt)
    a = listener()
    try:
        port = a.getsockname()[1]
        conf = os.path.join(mnt, "p.conf")
        e = {k: v for k, v in os.environ.items() if not k.startswith("FAULTNET_")}
        e.update(LD_PRELOAD=(FIRST + ":" if FIRST else "") + LIB, FAULTNET_CONFIG=conf,
                 FAULTNET_RUNDIR=rundir)
        # In a mount namespace of its own: the file written, settled, then
        # two starts, each after the 2 s a second name waits for.
        shim = "LD_PRELOAD=%s FAULTNET_CONFIG=%s FAULTNET_RUNDIR=%s %s -c %s %d" % (
            e["LD_PRELOAD"], conf, rundir, PY, shlex.quote(PROBE), port)
        script = "mount -t ramfs none %s && cat > %s && sleep 2.1 && %s && sleep 0.2 && %s" % (
            mnt, conf, shim, shim)
        clean = {k: v for k, v in e.items() if k not in ("LD_PRELOAD", "FAULTNET_CONFIG")}
        p = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c", script],
                           env=clean, input=refuse(port), capture_output=True, text=True,
                           timeout=120)
        check("two starts with the policy on ramfs refuse as it says (%s)" % p.stdout.split(),
              p.stdout.split() == ["refused", "refused"], p.stderr[-2000:])
        check("and no second name was made for it (copies by the text: %d)" % len(copies(rundir)),
              not stamps(rundir) and len(copies(rundir)) == 1, stamps(rundir))
    finally:
        a.close()


def test_identity_settled_before_the_read():
    """Whether the file had settled is judged by the clock read before its
    text: a start that read it less than 2 s after its change and then was
    held up (here 2.5 s in a system call after the read, injected by
    strace) gives the copy no second name, since the file may have changed
    again in the same clock tick, unseen, while the start went on."""
    if not shutil.which("strace"):
        print("  skip - strace is not installed: a start cannot be held up")
        checks.skip()
        return
    rundir, conf = fresh_rundir(), os.path.join(WORK, "held.conf")
    write(conf, refuse(9))
    start(conf, rundir)  # the copy made
    e = {k: v for k, v in os.environ.items() if not k.startswith("FAULTNET_")}
    e.update(LD_PRELOAD=(FIRST + ":" if FIRST else "") + LIB, FAULTNET_CONFIG=conf,
             FAULTNET_RUNDIR=rundir)
    # geteuid: called a second time by the start after the text's read
    # (the run directory's owner checked, to find the copy by the text;
    # the first was to find it by the file's identity, before the read).
    t0 = time.monotonic()
    subprocess.run(["strace", "-f", "-qq", "-o", "/dev/null", "-e", "trace=geteuid", "-e",
                    "inject=geteuid:delay_exit=2500000:when=2", "true"], env=e,
                   capture_output=True, timeout=120)
    took = time.monotonic() - t0
    check("a start held up 2.5 s after reading a file changed just before gives no second name "
          "(took %.1f s)" % took, took >= 2.4 and not stamps(rundir), stamps(rundir))


def test_large_copy_read_at_join():
    """A copy over 1 MiB is not kept from the start to the join (it would
    stay in every process that never joins): the start checks it and keeps
    its place, and the join reads it again, and the rules are in force."""
    rundir, conf = fresh_rundir(), os.path.join(WORK, "large.conf")
    srv = listener()
    port = srv.getsockname()[1]
    try:
        rules = ['{ name = "r%d"; action = "refuse"; match = { to = "127.101.%d.%d/32"; }; }'
                 % (i, i // 256, i % 256) for i in range(6000)]
        rules.append('{ name = "cut"; action = "refuse"; match = { to = "127.0.0.1/32"; '
                     'port = %d; }; }' % port)
        write(conf, "rules = (\n" + ",\n".join(rules) + "\n);\n")
        start(conf, rundir)
        [copy] = copies(rundir)
        size = os.stat(copy).st_size
        if size <= 1 << 20:
            check("the copy of 6,001 rules is over 1 MiB (%d bytes)" % size, False)
            return
        if not shutil.which("strace"):
            print("  skip - strace is not installed: the opens cannot be seen")
            checks.skip()
        else:
            trace = os.path.join(WORK, "large.strace")
            e = {k: v for k, v in os.environ.items() if not k.startswith("FAULTNET_")}
            e.update(LD_PRELOAD=(FIRST + ":" if FIRST else "") + LIB, FAULTNET_CONFIG=conf,
                     FAULTNET_RUNDIR=rundir)
            subprocess.run(["strace", "-f", "-qq", "-e", "trace=openat", "-o", trace,
                            PY, "-c", PROBE, str(port)], env=e, capture_output=True, timeout=120)
            with open(trace) as f:
                opens = [x for x in f.read().splitlines()
                         if os.path.basename(copy) in x and "= -1" not in x]
            check("a copy of %d bytes: read at start and again at the join (%d opens)"
                  % (size, len(opens)), len(opens) == 2, opens)
        got, parsed = probe(conf, rundir, port)
        check("and the rules are in force at the join, without libconfig (%s)" % got,
              got == "refused" and not parsed)
    finally:
        srv.close()


def test_bad_policy_still_exits_78():
    """A copy of the good version does not hide a bad one: exit 78 before
    main with the message a start without any copy gives."""
    rundir, conf = fresh_rundir(), os.path.join(WORK, "bad.conf")
    good = refuse(9)
    write(conf, good)
    start(conf, rundir)
    p, parsed = start(conf, rundir)
    check("the good version's copy is used", p.returncode == 0 and not parsed)
    for bad in (good.replace("refuse", "refusee"), good.replace("port = 9", "port = 0"),
                good.replace("} );", "}, );")):
        write(conf, bad)
        p, _ = start(conf, rundir, ("true",))
        clean = start(conf, fresh_rundir())[0]
        msg = [line for line in p.stderr.splitlines() if line.startswith("faultnet:")]
        ref = [line for line in clean.stderr.splitlines() if line.startswith("faultnet:")]
        check("a bad version exits 78 with the message of a start without a copy (%s)"
              % (msg[:1],), p.returncode == 78 and msg == ref and msg and "bad.conf:1:" in msg[0],
              (p.returncode, msg, ref))
        p, _ = start(conf, rundir, ("true",), {"FAULTNET_ON_ERROR": "passthrough"})
        check("and with FAULTNET_ON_ERROR=passthrough runs with no faults (exit %d)"
              % p.returncode, p.returncode == 0 and "running with no faults" in p.stderr)


def test_start_builds_at_join():
    """A start whose policy is kept compiled reads the policy file and its
    copy's bytes, and builds the policy at its first covered call: a process
    that makes none (true) makes no state file; one that does joins there
    without opening the copy again (a process out of fds by then still
    builds its policy: it_hardening's EMFILE test), and meets its rules."""
    rundir, conf = fresh_rundir(), os.path.join(WORK, "lazy.conf")
    srv = listener()
    port = srv.getsockname()[1]
    write(conf, refuse(port))
    start(conf, rundir)
    trace = os.path.join(WORK, "lazy.strace")
    e = {k: v for k, v in os.environ.items() if not k.startswith("FAULTNET_")}
    e.update(LD_PRELOAD=(FIRST + ":" if FIRST else "") + LIB, FAULTNET_CONFIG=conf,
             FAULTNET_RUNDIR=rundir)

    def opens(argv):
        subprocess.run(["strace", "-f", "-qq", "-e", "trace=openat", "-o", trace] + argv, env=e,
                       capture_output=True, timeout=120)
        with open(trace) as f:
            lines = f.read().splitlines()
        return ([x for x in lines if ".compiled" in x and "O_RDONLY" in x and "= -1" not in x],
                [x for x in lines if ".mem" in x])
    if not shutil.which("strace"):
        print("  skip - strace is not installed: the start's opens cannot be seen")
        checks.skip()
        return
    copy, mem = opens(["true"])
    check("a start that makes no covered call reads the copy once and makes no state file",
          len(copy) == 1 and not mem, copy + mem)
    copy, mem = opens([PY, "-c", PROBE, str(port)])
    check("its first covered call builds the policy from the bytes read at start, and joins",
          len(copy) == 1 and mem, copy + mem)
    got, parsed = probe(conf, rundir, port)
    check("and the rules are in force there, the listener refused (%s)" % got,
          got == "refused" and not parsed)
    srv.close()


def test_include_and_body_file_never_kept():
    """Their content lives in other files: parsed at every start, no copy,
    and a change of the other file is seen by the next start."""
    rundir = fresh_rundir()
    a, b = listener(), listener()
    try:
        pa, pb = a.getsockname()[1], b.getsockname()[1]
        inc, more = os.path.join(WORK, "inc.conf"), os.path.join(WORK, "more.conf")
        write(inc, '@include "more.conf"\n')
        write(more, refuse(pa))
        one = probe(inc, rundir, pa)
        write(more, refuse(pb))
        two = probe(inc, rundir, pa), probe(inc, rundir, pb)
        check("@include: parsed at each start, the included file's change seen (%s, %s)"
              % (one, two), one == ("refused", True) and two == (("connected", True),
                                                                  ("refused", True)))
        check("and no compiled copy written", copies(rundir) == [], os.listdir(rundir))
        body, conf = os.path.join(WORK, "body.txt"), os.path.join(WORK, "body.conf")
        write(body, "busy\n")
        write(conf, 'rules = ( { name = "r"; action = "respond"; status = 503; '
                    'body_file = "body.txt"; match = { to = "127.0.0.1/32"; port = 9; }; } );\n')
        runs = [start(conf, rundir) for _ in range(2)]
        check("body_file: parsed at each start (%s), no copy written"
              % [r[1] for r in runs],
              all(r[0].returncode == 0 and r[1] for r in runs) and copies(rundir) == [],
              [r[0].stderr[-200:] for r in runs])
        os.unlink(body)
        p, _ = start(conf, rundir)
        check("its file gone, the next start says so (exit %d)" % p.returncode,
              p.returncode == 78 and "body_file" in p.stderr, p.stderr[-300:])
    finally:
        a.close()
        b.close()


def test_zone_in_the_key():
    """FAULTNET_ZONE is part of the key: one copy per zone, each start in
    its zone."""
    rundir, conf = fresh_rundir(), os.path.join(WORK, "zones.conf")
    a = listener()
    try:
        port = a.getsockname()[1]
        write(conf, 'zones = ( { name = "za"; cidrs = "127.70.0.0/16"; }, '
                    '{ name = "zb"; cidrs = "127.71.0.0/16"; } );\n'
                    'rules = ( { name = "cut"; action = "refuse"; '
                    'match = { from_zone = "za"; to = "127.0.0.1/32"; port = %d; }; } );\n' % port)
        got = {}
        for zone in ("za", "zb", "za", "zb"):
            p, parsed = start(conf, rundir, (PY, "-c", PROBE, str(port)),
                              {"FAULTNET_ZONE": zone})
            got.setdefault(zone, []).append((p.stdout.strip(), parsed))
        check("each zone parsed once then read from its own copy (%s)" % got,
              got == {"za": [("refused", True), ("refused", False)],
                      "zb": [("connected", True), ("connected", False)]}
              and len(copies(rundir)) == 2)
    finally:
        a.close()


def main():
    print("the compiled policy copy (%s)" % BUILD)
    tests = [test_second_start_without_libconfig, test_changed_file_same_size_and_mtime,
             test_start_builds_at_join, test_identity_names_the_copy, test_no_second_name_off_local,
             test_identity_settled_before_the_read, test_large_copy_read_at_join,
             test_untrusted_copies_ignored, test_large_spoilt_copy, test_bad_policy_still_exits_78,
             test_include_and_body_file_never_kept, test_zone_in_the_key]
    try:
        for t in checks.selected(tests):
            try:
                t()
            except Exception:
                check("%s ran to its end" % checks.name_of(t), False, traceback.format_exc())
    finally:
        shutil.rmtree(WORK, ignore_errors=True)
    sys.exit(1 if checks.failed else 0)


main()
