"""test_client.py - the Python client and its pytest plugin against real
processes under the shim: changes to a group (journaled, so a process that
joins later applies them), typed stats and rules, the context managers,
spawn, errors with faultctl's reasons, and the fixture's own group.
Loopback only (127.89.0.0/16 stands for remote services)."""
import json
import os
import socket
import subprocess
import sys
import time

import pytest

from faultnet import Faultnet, FaultnetError, rule_text

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
    # keeps it for the process that joins.
    with pytest.raises(FaultnetError, match="no process has joined"):
        faultnet.enable("nat-lost")
    faultnet.ahead = True
    faultnet.enable("nat-lost")
    a = Agent(faultnet, policy)
    try:
        assert a.connect("127.89.0.1") == "timeout"
    finally:
        a.close()


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
