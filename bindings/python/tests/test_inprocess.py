"""test_inprocess.py - run as `faultctl run --config P -- python3 -m pytest
test_inprocess.py`: pytest's own process is under the shim, and the
fixture flips a fault for code the test runs in-process."""
import socket

import pytest


def connect(ip):
    s = socket.socket()
    s.settimeout(0.3)
    try:
        s.connect((ip, 9))
        return "connected"
    except socket.timeout:
        return "timeout"
    except OSError as e:
        return e.__class__.__name__
    finally:
        s.close()


def test_flip_inside_pytest(faultnet):
    assert faultnet.pids, "pytest should run under faultctl run"
    assert connect("127.89.0.1") == "ConnectionRefusedError"
    with faultnet.enabled("nat-lost"):
        assert connect("127.89.0.1") == "timeout"
    assert connect("127.89.0.1") == "ConnectionRefusedError"
    faultnet.add("blackhole", name="added", to="127.89.0.4/32")
    assert connect("127.89.0.4") == "timeout"
    faultnet.assert_attempts(rule="nat-lost", equals=3)
