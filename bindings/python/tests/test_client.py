"""test_client.py - the Python client and its pytest plugin against real
processes under the shim: changes to a group (journaled, so a process that
joins later applies them), typed stats and rules, the context managers,
spawn, errors with faultctl's reasons, and the fixture's own group.
Loopback only (127.89.0.0/16 stands for remote services)."""
import glob
import json
import os
import re
import socket
import subprocess
import sys
import time

import pytest

from faultnet import Faultnet, FaultnetError, preload_with, rule_text

DOCS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "docs",
                    "faultctl.md")

CLIENT = r"""
import json, socket, sys, time
for line in sys.stdin:
    s = socket.socket(); s.settimeout(0.3)
    try:
        s.connect((line.strip(), 9)); r = "connected"
    except socket.timeout:
        r = "timeout"
    except OSError as e:
        r = e.__class__.__name__
    print(json.dumps(r), flush=True)
"""

POLICY = """rules = (
  { name = "nat-lost"; action = "blackhole"; enabled = false; match = { to = "127.89.0.1/32"; }; },
  { name = "refused"; action = "refuse"; match = { to = "127.89.0.2/32"; }; }
);
"""


@pytest.fixture
def policy(tmp_path):
    p = tmp_path / "p.conf"
    p.write_text(POLICY)
    return str(p)


class Agent:
    """A process under the shim that connects where it is told."""

    def __init__(self, fn, policy):
        self.p = fn.spawn([sys.executable, "-c", CLIENT], config=policy, stdin=subprocess.PIPE,
                          stdout=subprocess.PIPE, text=True)
        for _ in range(100):
            if any(t.pid == self.p.pid for t in fn.targets()):
                break
            time.sleep(0.05)

    def connect(self, ip):
        self.p.stdin.write(ip + "\n")
        self.p.stdin.flush()
        return json.loads(self.p.stdout.readline())

    def close(self):
        self.p.kill()
        self.p.wait()


def test_enable_disable_reaches_a_live_process(faultnet, policy):
    a = Agent(faultnet, policy)
    try:
        assert a.connect("127.89.0.1") == "ConnectionRefusedError"
        faultnet.enable("nat-lost")
        assert a.connect("127.89.0.1") == "timeout"
        faultnet.disable("nat-lost")
        assert a.connect("127.89.0.1") == "ConnectionRefusedError"
    finally:
        a.close()


def test_spawn_assert_attempts(faultnet, policy):
    a = Agent(faultnet, policy)
    try:
        for _ in range(3):
            assert a.connect("127.89.0.2") == "ConnectionRefusedError"
        assert faultnet.assert_attempts(rule="refused", equals=3) == 3
        with pytest.raises(AssertionError, match="3 attempts, expected 4"):
            faultnet.assert_attempts(rule="refused", equals=4)
        rules = {r.name: r for r in faultnet.rules()}
        assert rules["refused"].enabled == "yes" and rules["nat-lost"].enabled == "no"
        dests = [r for r in faultnet.stats() if r.kind == "dest"]
        assert any(d.dest == "127.89.0.2:9" and d.attempts == 3 for d in dests)
    finally:
        a.close()


def test_fault_context_manager_removes_on_error(faultnet, policy):
    a = Agent(faultnet, policy)
    try:
        with pytest.raises(RuntimeError):
            with faultnet.fault("blackhole", name="ctx", to="127.89.0.3/32"):
                assert a.connect("127.89.0.3") == "timeout"
                raise RuntimeError("the test failed inside")
        assert "ctx" not in {r.name for r in faultnet.rules()}
        assert a.connect("127.89.0.3") == "ConnectionRefusedError"
        with faultnet.enabled("nat-lost"):
            assert a.connect("127.89.0.1") == "timeout"
        assert a.connect("127.89.0.1") == "ConnectionRefusedError"
    finally:
        a.close()


def test_a_process_joining_later_applies_the_change(faultnet, policy):
    # No process has joined yet: without ahead the change is refused (a
    # misspelt group would otherwise swallow it); with ahead the journal
    # keeps it for the process that joins. (The fixture's own group is
    # fresh and says ahead: a client of another group is made here.)
    fn = Faultnet(group=faultnet.group + "-late")
    with pytest.raises(FaultnetError, match="no process has joined"):
        fn.enable("nat-lost")
    fn.ahead = True
    fn.enable("nat-lost")
    a = Agent(fn, policy)
    try:
        assert a.connect("127.89.0.1") == "timeout"
    finally:
        a.close()
        fn.reset()


def test_errors_carry_the_reason(faultnet, policy):
    a = Agent(faultnet, policy)
    try:
        with pytest.raises(FaultnetError, match="no rule"):
            faultnet.enable("no-such-rule")
        with pytest.raises(FaultnetError, match="one line"):
            faultnet.change("enable a\nrm b")
    finally:
        a.close()


def test_events_iterator(faultnet, policy):
    a = Agent(faultnet, policy)
    try:
        a.connect("127.89.0.2")
        ev = list(faultnet.events())
        assert any(e.rule == "refused" and e.outcome == "refused" for e in ev)
    finally:
        a.close()


def test_rule_text():
    text, name = rule_text("respond", name="r", status=503, retry_after=30,
                           headers=["A: b"], host="*.example.test", port=80)
    assert name == "r"
    assert text == ('{ name = "r"; action = "respond"; status = 503; retry_after = 30; '
                    'headers = [ "A: b" ]; match = { host = "*.example.test"; port = 80; }; }')


def test_fixture_gives_each_test_its_own_group(faultnet):
    assert faultnet.group.startswith("pytest-%d-" % os.getpid())


# ---- counts that outlive the process, LD_PRELOAD kept (issue 41) ------------------------

CONNECT3 = """import socket
for _ in range(3):
    try:
        socket.create_connection(("127.89.0.2", 9), timeout=1)
    except OSError:
        pass
"""


def test_assert_attempts_after_wait(faultnet, policy):
    # The process has exited: its counters are kept (GROUP.PID.done).
    p = faultnet.spawn([sys.executable, "-c", CONNECT3], config=policy)
    assert p.wait(timeout=30) == 0
    assert faultnet.assert_attempts(rule="refused", equals=3) == 3


def test_counts_of_a_killed_process(faultnet, policy):
    p = faultnet.spawn([sys.executable, "-c", CONNECT3 + "import time; print('done', flush=True); "
                        "time.sleep(60)"], config=policy, stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "done"
    p.kill()
    p.wait()
    assert faultnet.assert_attempts(rule="refused", equals=3) == 3


RETRY_CLIENT = """import socket, sys
n = int(sys.argv[sys.argv.index("--retries") + 1])
for _ in range(n):
    try:
        socket.create_connection(("127.89.0.1", 9), timeout=0.3)
        sys.exit(0)
    except OSError:
        pass
sys.exit(1)
"""


def test_the_docs_pytest_example_runs_as_written(faultnet, tmp_path, monkeypatch):
    text = open(DOCS).read()
    block = re.search(r"```python\n(def test_retries\(faultnet, tmp_path\):\n.*?)```", text, re.S)
    assert block, "docs/faultctl.md has no test_retries example"
    monkeypatch.chdir(tmp_path)
    (tmp_path / "policy.conf").write_text(POLICY)
    client = tmp_path / "client"
    client.write_text("#!%s\n%s" % (sys.executable, RETRY_CLIENT))
    client.chmod(0o755)
    ns = {}
    exec(compile(block.group(1), DOCS, "exec"), ns)
    ns["test_retries"](faultnet, tmp_path)


def _a_library():
    """A real shared library to preload besides the shim (libm: harmless)."""
    for pattern in ("/lib/*-linux-gnu/libm.so.6", "/usr/lib/*-linux-gnu/libm.so.6", "/lib64/libm.so.6"):
        found = glob.glob(pattern)
        if found:
            return found[0]
    pytest.fail("no libm.so.6 to preload")


def test_spawn_keeps_ld_preload(faultnet, policy):
    other = _a_library()
    env = dict(os.environ, LD_PRELOAD=other)
    p = faultnet.spawn([sys.executable, "-c", CONNECT3 + "import os\nprint(os.environ['LD_PRELOAD'])\n"
                        "print(open('/proc/self/maps').read())"], config=policy, env=env,
                       stdout=subprocess.PIPE, text=True)
    out = p.communicate(timeout=30)[0]
    listed = out.splitlines()[0].split(":")
    assert os.path.basename(listed[0]) == "libfaultnet.so" and listed[1:] == [other], listed
    assert "libfaultnet.so" in out and os.path.basename(other) in out
    assert faultnet.assert_attempts(rule="refused", equals=3) == 3


def test_preload_with():
    assert preload_with("/x/libfaultnet.so", None) == "/x/libfaultnet.so"
    assert preload_with("/x/libfaultnet.so", "/y/libjemalloc.so.2") == "/x/libfaultnet.so:/y/libjemalloc.so.2"
    # A sanitizer runtime must stay first; the shim is not listed twice.
    assert preload_with("/x/libfaultnet.so", "/z/libasan.so.8 /x/libfaultnet.so:/y/a.so") == \
        "/z/libasan.so.8:/x/libfaultnet.so:/y/a.so"


GET3 = r"""
import sys, urllib.error, urllib.request
for _ in range(3):
    try:
        urllib.request.urlopen("http://127.89.0.3:%s/fault" % sys.argv[1], timeout=10).read()
    except urllib.error.HTTPError as e:
        assert e.code == 503, e.code
"""


def test_requests_of_a_request_rule(faultnet, tmp_path):
    """Issue 41: a request rule counts requests, never attempts; attempts()
    on it is an error, not a silent 0."""
    import http.server
    import threading
    srv = http.server.ThreadingHTTPServer(("127.89.0.3", 0), http.server.BaseHTTPRequestHandler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    port = srv.server_address[1]
    conf = tmp_path / "r.conf"
    conf.write_text('rules = ({ name = "r503"; action = "respond"; status = 503; '
                    'match = { to = "127.89.0.3/32"; port = %d; path = "/fault"; }; });\n' % port)
    try:
        p = faultnet.spawn([sys.executable, "-c", GET3, str(port)], config=str(conf))
        assert p.wait(timeout=30) == 0
        assert faultnet.assert_requests(rule="r503", equals=3) == 3
        with pytest.raises(FaultnetError, match="counts requests, not attempts"):
            faultnet.attempts("r503")
    finally:
        srv.shutdown()
