"""pytest_plugin.py - the `faultnet` fixture: each test gets a Faultnet
client of its own group (fresh), reset at teardown so that nothing a test
changed outlives it. When pytest itself runs under the shim (`faultctl run
-- python3 -m pytest`), the fixture targets pytest's own process instead,
so that a test can flip faults for code it runs in-process."""
import itertools
import os

import pytest

from faultnet import Faultnet

_serial = itertools.count()


def _under_shim():
    return "libfaultnet" in os.environ.get("LD_PRELOAD", "") and (
        os.environ.get("FAULTNET_CONFIG") or os.environ.get("FAULTNET_GROUP"))


@pytest.fixture
def faultnet():
    if _under_shim():
        fn = Faultnet(pids=[os.getpid()])
    else:
        # The group is fresh and its name made here, never misspelt: a
        # change may come before the test's process has joined (ahead).
        fn = Faultnet(group="pytest-%d-%d" % (os.getpid(), next(_serial)), ahead=True)
    try:
        yield fn
    finally:
        try:
            fn.reset()
        except Exception:
            pass
