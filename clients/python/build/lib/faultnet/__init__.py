"""faultnet - the faultnet control protocol from Python, standard library
only: change the faults of live processes (a group, or given pids), read
their rules, counters and events, and start programs under the shim.

    fn = Faultnet(group="api")
    with fn.fault("blackhole", to="127.66.0.0/16", port=443):
        ...                       # every member of group api meets it
    fn.assert_attempts(rule="nat-lost", equals=3)

A change to a group is written to the group's journal first (so that a
process joining meanwhile still applies it), then sent to every live
member, exactly as `faultctl -g GROUP VERB` does; a change to pids goes to
those processes only. Errors raise FaultnetError with the reason the
process or faultctl gave."""
import fcntl
import os
import shutil
import socket
import subprocess

__all__ = ["Faultnet", "FaultnetError", "Record", "rundir", "rule_text"]


class FaultnetError(Exception):
    """A change was refused, a process could not be reached, or bad input."""


class Record(dict):
    """One record of a reply ("rule", "dest", "http", "name", "event",
    "process"): its fields, numbers as int; .kind is the record type."""

    def __init__(self, kind, fields):
        super().__init__(fields)
        self.kind = kind

    def __getattr__(self, key):
        try:
            return self[key]
        except KeyError:
            raise AttributeError(key) from None


def rundir():
    """Where control sockets and group journals live, as the shim finds it."""
    v = os.environ.get("FAULTNET_RUNDIR")
    if v:
        return v
    xdg = os.environ.get("XDG_RUNTIME_DIR")
    if xdg:
        return os.path.join(xdg, "faultnet")
    tmp = "/tmp/faultnet-%d" % os.geteuid()
    try:
        st = os.lstat(tmp)
        if st.st_uid == os.geteuid() and not st.st_mode & 0o077:
            return tmp
    except FileNotFoundError:
        return tmp
    return os.path.join(os.path.expanduser("~"), ".faultnet-run")


def _split_fields(text):
    """'a=1 b="x y"' -> [("a", "1"), ("b", "x y")], with C escapes."""
    out, i, n = [], 0, len(text)
    escapes = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", '"': '"'}
    while i < n:
        while i < n and text[i] == " ":
            i += 1
        eq = text.find("=", i)
        if eq < 0:
            break
        key, i = text[i:eq], eq + 1
        if i < n and text[i] == '"':
            i += 1
            val = []
            while i < n and text[i] != '"':
                if text[i] == "\\" and i + 1 < n:
                    c = text[i + 1]
                    if c == "x" and i + 3 < n:
                        val.append(chr(int(text[i + 2:i + 4], 16)))
                        i += 4
                        continue
                    val.append(escapes.get(c, c))
                    i += 2
                    continue
                val.append(text[i])
                i += 1
            i += 1
            out.append((key, "".join(val)))
        else:
            end = text.find(" ", i)
            end = n if end < 0 else end
            out.append((key, text[i:end]))
            i = end
    return out


def _record(line):
    kind, _, rest = line.partition(" ")
    fields = {}
    for k, v in _split_fields(rest):
        fields[k] = int(v) if v.isdigit() and (v == "0" or not v.startswith("0")) else v
    return Record(kind, fields)


def rule_text(action, name=None, **keys):
    """A rule in the policy file's syntax from keywords: match keys (to,
    port, proto, from_zone, to_zone, host, method, path) go in match."""
    match_keys = ("to", "port", "proto", "from_zone", "to_zone", "host", "method", "path")

    def value(v):
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, (int, float)):
            return str(v)
        if isinstance(v, (list, tuple)):
            return "[ " + ", ".join(value(x) for x in v) + " ]"
        return '"' + str(v).replace("\\", "\\\\").replace('"', '\\"') + '"'

    name = name or "py-%s-%d" % (action, id(keys) & 0xFFFFFF)
    parts = ['name = %s;' % value(name), 'action = %s;' % value(action)]
    match = []
    for k, v in keys.items():
        if k in match_keys:
            match.append("%s = %s;" % (k, value(v)))
        else:
            parts.append("%s = %s;" % (k, value(v)))
    if match:
        parts.append("match = { %s };" % " ".join(match))
    return "{ " + " ".join(parts) + " }", name


class _Target:
    def __init__(self, pid, group, path):
        self.pid, self.group, self.path = pid, group, path


class Faultnet:
    """The processes of one group (default: FAULTNET_GROUP or "default"),
    or the given pids."""

    def __init__(self, group=None, pids=None, rundir=None, timeout=5.0):
        self.group = group or os.environ.get("FAULTNET_GROUP") or "default"
        self.pids = list(pids or [])
        self.dir = rundir or globals()["rundir"]()
        self.timeout = timeout

    # ---- discovery and requests --------------------------------------------

    def targets(self):
        try:
            names = os.listdir(self.dir)
        except FileNotFoundError:
            return []
        out = []
        for n in names:
            if not n.endswith(".sock"):
                continue
            group, _, pid = n[:-5].rpartition(".")
            if not pid.isdigit() or not group:
                continue
            pid = int(pid)
            if (self.pids and pid not in self.pids) or (not self.pids and group != self.group):
                continue
            t = _Target(pid, group, os.path.join(self.dir, n))
            if self._alive(t):
                out.append(t)
        return sorted(out, key=lambda t: t.pid)

    def _alive(self, t):
        try:
            self._connect(t).close()
            return True
        except OSError:
            return False

    def _connect(self, t):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(self.timeout)
        try:
            s.connect(t.path)
        except OSError:
            s.close()
            raise
        return s

    def _request(self, t, line):
        with self._connect(t) as s:
            s.sendall(line.encode() + b"\n")
            buf = b""
            while True:
                part = s.recv(65536)
                if not part:
                    break
                buf += part
                text = buf.decode(errors="replace")
                if text.endswith("\n") and (text.startswith(("ok", "error")) or
                                             text == "end\n" or text.endswith("\nend\n")):
                    break
        text = buf.decode(errors="replace")
        if not text:
            raise FaultnetError("no reply from process %d" % t.pid)
        return text

    def _query(self, verb):
        out = []
        for t in self.targets():
            for line in self._request(t, verb).splitlines():
                if line.startswith("error"):
                    raise FaultnetError("process %d: %s" % (t.pid, line[6:]))
                if line and line != "end" and not line.startswith("ok"):
                    out.append(_record(line))
        return out

    # ---- changes -------------------------------------------------------------

    def _journal(self, line):
        """Appends "SEQ line" to the group's journal under its lock, as
        faultctl does; returns (lock fd, seq)."""
        os.makedirs(self.dir, mode=0o700, exist_ok=True)
        lock = os.open(os.path.join(self.dir, self.group + ".lock"),
                       os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
        fcntl.flock(lock, fcntl.LOCK_EX)
        journal = os.path.join(self.dir, self.group + ".journal")
        last = 0
        try:
            with open(journal) as f:
                for entry in f:
                    head = entry.split(" ", 1)[0]
                    if head.isdigit():
                        last = max(last, int(head))
        except FileNotFoundError:
            pass
        seq = 1 if line == "reset" and last >= 1 << 53 else last + 1
        if last >= 1 << 53 and line != "reset":
            os.close(lock)
            raise FaultnetError("%s: sequence number %d was not written by faultctl" % (journal, last))
        entry = "%d %s\n" % (seq, line)
        if line == "reset":  # a reset starts the journal over
            tmp = journal + ".new"
            with open(tmp, "w") as f:
                f.write(entry)
                f.flush()
                os.fsync(f.fileno())
            os.chmod(tmp, 0o600)
            os.rename(tmp, journal)
        else:
            fd = os.open(journal, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600)
            os.write(fd, entry.encode())
            os.fsync(fd)
            os.close(fd)
        return lock, seq

    def _drop(self, seq):
        journal = os.path.join(self.dir, self.group + ".journal")
        with open(journal) as f:
            keep = [x for x in f if x.split(" ", 1)[0] != str(seq)]
        with open(journal + ".new", "w") as f:
            f.writelines(keep)
        os.rename(journal + ".new", journal)

    def change(self, line):
        """Sends one change line ("enable NAME", "add RULE", ...)."""
        if any(c in line for c in "\r\n\0"):
            raise FaultnetError("a change is one line: no line breaks")
        if self.pids:
            bad = [(t.pid, r) for t in self.targets() for r in [self._request(t, line)]
                   if not r.startswith("ok")]
            if bad:
                raise FaultnetError("; ".join("process %d: %s" % (p, r.strip()) for p, r in bad))
            return
        lock, seq = self._journal(line)
        try:
            targets = self.targets()
            bad = []
            for t in targets:
                r = self._request(t, "@%d %s" % (seq, line))
                if not r.startswith("ok"):
                    bad.append("process %d: %s" % (t.pid, r.strip()))
            if targets and len(bad) == len(targets):
                self._drop(seq)
            if bad:
                raise FaultnetError("; ".join(bad))
        finally:
            os.close(lock)

    def enable(self, name):
        import time
        self.change("enable %s since=%d" % (name, int(time.time() * 1000)))

    def disable(self, name):
        self.change("disable " + name)

    def add(self, rule, first=False, **keys):
        """rule: a rule's text, or an action name with keywords (rule_text)."""
        text = rule if rule.lstrip().startswith("{") else rule_text(rule, **keys)[0]
        self.change("add %s%s" % ("first " if first else "", " ".join(text.split())))

    def rm(self, name):
        self.change("rm " + name)

    def load(self, path):
        with open(path) as f:
            self.change("load " + " ".join(f.read().replace("\t", " ").splitlines()))

    def zone(self, zone):
        self.change("zone " + zone)

    def reset(self):
        self.change("reset")

    # ---- reading ---------------------------------------------------------------

    def rules(self):
        return [r for r in self._query("rules") if r.kind == "rule"]

    def stats(self):
        return self._query("stats")

    def events(self, follow=False):
        """Events as Records; with follow, an endless iterator of new ones."""
        if not follow:
            yield from (r for r in self._query("events") if r.kind == "event")
            return
        targets = self.targets()
        if not targets:
            raise FaultnetError("no process of group '%s' is running" % self.group)
        s = self._connect(targets[0])
        s.settimeout(None)
        s.sendall(b"events follow\n")
        buf = b""
        with s:
            while True:
                part = s.recv(65536)
                if not part:
                    return
                buf += part
                while b"\n" in buf:
                    line, buf = buf.split(b"\n", 1)
                    if line.startswith(b"event "):
                        yield _record(line.decode(errors="replace"))

    def attempts(self, rule):
        return sum(r.get("attempts", 0) for r in self.stats() if r.kind == "rule" and r.get("name") == rule)

    def assert_attempts(self, rule, equals=None, at_least=None, at_most=None):
        n = self.attempts(rule)
        if equals is not None and n != equals:
            raise AssertionError("rule %s: %d attempts, expected %d" % (rule, n, equals))
        if at_least is not None and n < at_least:
            raise AssertionError("rule %s: %d attempts, expected at least %d" % (rule, n, at_least))
        if at_most is not None and n > at_most:
            raise AssertionError("rule %s: %d attempts, expected at most %d" % (rule, n, at_most))
        return n

    # ---- context managers and programs ------------------------------------------

    def fault(self, action, name=None, **keys):
        """Adds a rule on enter and removes it on exit (even on errors)."""
        text, name = rule_text(action, name, **keys)
        outer = self

        class _Fault:
            def __enter__(self):
                outer.add(text)
                return name

            def __exit__(self, *exc):
                outer.rm(name)
                return False
        return _Fault()

    def enabled(self, name):
        outer = self

        class _Enabled:
            def __enter__(self):
                outer.enable(name)
                return name

            def __exit__(self, *exc):
                outer.disable(name)
                return False
        return _Enabled()

    def spawn(self, argv, config=None, zone=None, library=None, **popen):
        """A subprocess.Popen of argv under the shim, in this client's group."""
        env = dict(popen.pop("env", None) or os.environ)
        env["LD_PRELOAD"] = library or find_library()
        env["FAULTNET_GROUP"] = self.group
        env["FAULTNET_RUNDIR"] = self.dir
        if config:
            env["FAULTNET_CONFIG"] = os.path.abspath(config)
        if zone:
            env["FAULTNET_ZONE"] = zone
        return subprocess.Popen(argv, env=env, **popen)


def find_library():
    """libfaultnet.so: FAULTNET_LIBRARY, else next to faultctl (../lib too)."""
    v = os.environ.get("FAULTNET_LIBRARY")
    if v:
        return v
    ctl = shutil.which("faultctl")
    if ctl:
        ctl = os.path.realpath(ctl)
        for d in (os.path.dirname(ctl), os.path.join(os.path.dirname(ctl), "..", "lib")):
            p = os.path.join(d, "libfaultnet.so")
            if os.path.exists(p):
                return os.path.abspath(p)
    raise FaultnetError("libfaultnet.so not found: set FAULTNET_LIBRARY or put faultctl on PATH")
