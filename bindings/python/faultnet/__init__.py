"""faultnet - faultnet from Python, standard library only: change the
faults of live processes (a group, or given pids), read their rules,
counters and events, and start programs under the shim.

    fn = Faultnet(group="api")
    with fn.fault("blackhole", to="127.66.0.0/16", port=443):
        ...                       # every member of group api meets it
    fn.assert_attempts(rule="nat-lost", equals=3)

Everything goes through faultctl (found on PATH, or given), with --json:
processes publish their state in files that faultctl reads, and take
their changes from their group's journal, which faultctl writes and
checks; one implementation of that protocol, not two. Errors raise
FaultnetError with the reason faultctl gave."""
import json
import os
import re
import shutil
import subprocess
import tempfile

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
    """Where members' state files and group journals live, as the shim finds it."""
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


def _json_record(line):
    fields = json.loads(line)
    return Record(fields.pop("type", ""), fields)


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
    def __init__(self, pid, group):
        self.pid, self.group = pid, group


class Faultnet:
    """The processes of one group (default: FAULTNET_GROUP or "default"),
    or the given pids."""

    def __init__(self, group=None, pids=None, rundir=None, timeout=5.0, faultctl=None,
                 ahead=False):
        # ahead: changes are meant for processes that will join the group
        # later; without it a change to a group nobody has joined is refused
        # (a misspelt group name).
        self.ahead = ahead
        self.group = group or os.environ.get("FAULTNET_GROUP") or "default"
        self.pids = list(pids or [])
        self.dir = rundir or globals()["rundir"]()
        self.timeout = timeout
        self.faultctl = faultctl or shutil.which("faultctl")

    # ---- faultctl ------------------------------------------------------------

    def _argv(self, *args):
        if not self.faultctl:
            raise FaultnetError("faultctl not found: put it on PATH or pass faultctl=")
        sel = []
        for p in self.pids:
            sel += ["-p", str(p)]
        grp = ["-g", self.group] + (["--ahead"] if self.ahead else [])
        return [self.faultctl] + (sel or grp) + list(args)

    def _env(self):
        return dict(os.environ, FAULTNET_RUNDIR=self.dir)

    def _run(self, *args):
        r = subprocess.run(self._argv(*args), env=self._env(), capture_output=True, text=True,
                           timeout=self.timeout + 30)
        if r.returncode != 0:
            raise FaultnetError((r.stderr or r.stdout).strip() or "faultctl exited %d" % r.returncode)
        return r.stdout

    def _query(self, verb):
        return [_json_record(line) for line in self._run("--json", verb).splitlines()
                if line.startswith("{")]

    def targets(self):
        try:
            return sorted((_Target(r["pid"], r["group"]) for r in self._query("ps")),
                          key=lambda t: t.pid)
        except FaultnetError:
            return []

    # ---- changes -------------------------------------------------------------

    def change(self, line):
        """Carries out one change line ("enable NAME", "add RULE", ...) as
        faultctl does: journaled, checked, in force for every target's next
        call when it returns."""
        if any(c in line for c in "\r\n\0"):
            raise FaultnetError("a change is one line: no line breaks")
        verb, _, arg = line.partition(" ")
        if verb == "enable":
            arg = arg.split(" since=", 1)[0]  # faultctl says when itself
        if verb == "add" and arg.startswith("first "):
            self._run("add", "--first", arg[6:])
        elif verb == "load":
            with tempfile.NamedTemporaryFile("w", suffix=".conf") as f:
                f.write(arg)
                f.flush()
                self._run("load", f.name)
        else:
            self._run(*([verb] + ([arg] if arg else [])))

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
        self._run("load", os.path.abspath(path))

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
        if not self.targets():
            raise FaultnetError("no process of group '%s' is running" % self.group)
        p = subprocess.Popen(self._argv("--json", "events", "--follow"), env=self._env(),
                             stdout=subprocess.PIPE, text=True)
        try:
            for line in p.stdout:
                if line.startswith("{"):
                    r = _json_record(line)
                    if r.kind == "event":
                        yield r
        finally:
            p.terminate()
            p.wait()

    def _count(self, rule, word):
        """A rule's counter summed over the group's processes. A request
        rule (respond, slow, abort) counts requests, never attempts
        (connects): asking it for attempts is an error, not a silent 0."""
        recs = [r for r in self.stats() if r.kind == "rule" and r.get("name") == rule]
        other = "requests" if word == "attempts" else "attempts"
        if any(other in r and word not in r for r in recs):
            raise FaultnetError("rule %s counts %s, not %s: use %s()" % (rule, other, word, other))
        return sum(r.get(word, 0) for r in recs)

    @staticmethod
    def _bound(rule, n, word, equals, at_least, at_most):
        if equals is not None and n != equals:
            raise AssertionError("rule %s: %d %s, expected %d" % (rule, n, word, equals))
        if at_least is not None and n < at_least:
            raise AssertionError("rule %s: %d %s, expected at least %d" % (rule, n, word, at_least))
        if at_most is not None and n > at_most:
            raise AssertionError("rule %s: %d %s, expected at most %d" % (rule, n, word, at_most))
        return n

    def attempts(self, rule):
        """Connects (and datagrams) a rule that acts on connections saw."""
        return self._count(rule, "attempts")

    def requests(self, rule):
        """HTTP requests a request rule (respond, slow, abort) saw."""
        return self._count(rule, "requests")

    def assert_attempts(self, rule, equals=None, at_least=None, at_most=None):
        return self._bound(rule, self.attempts(rule), "attempts", equals, at_least, at_most)

    def assert_requests(self, rule, equals=None, at_least=None, at_most=None):
        return self._bound(rule, self.requests(rule), "requests", equals, at_least, at_most)

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
        env["LD_PRELOAD"] = preload_with(library or find_library(), env.get("LD_PRELOAD"))
        env["FAULTNET_GROUP"] = self.group
        env["FAULTNET_RUNDIR"] = self.dir
        if config:
            env["FAULTNET_CONFIG"] = os.path.abspath(config)
        if zone:
            env["FAULTNET_ZONE"] = zone
        return subprocess.Popen(argv, env=env, **popen)


def preload_with(lib, old):
    """LD_PRELOAD with the shim first and what was there kept after it (an
    app's jemalloc, another preload); a sanitizer runtime already first
    stays first, as it must."""
    parts = [p for p in (old or "").replace(" ", ":").split(":") if p and p != lib]
    first = parts[:1] if parts and re.match(r"lib(a|t|ub|l|hwa)san[.]so", os.path.basename(parts[0])) else []
    return ":".join(first + [lib] + parts[len(first):])


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
