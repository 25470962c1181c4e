"""harness/modes/base.py's wait_ready, the sleeve's and wireguard-go's wait for a daemon
just started: ready, dead first, or never ready. No real time passes: the daemon is
ready or dead on the first look, and the deadline is already past."""

from __future__ import annotations

import types

import pytest

from harness.core.errors import HarnessError
from harness.hosts.base import Completed
from harness.modes.base import wait_ready

SIDE = types.SimpleNamespace(host=types.SimpleNamespace(name="h1"))


class Daemon:
    def __init__(self, returncode=None, stderr=""):
        self.returncode, self.stderr = returncode, stderr

    def poll(self):
        return self.returncode

    def wait(self, timeout=None):
        return Completed(["d"], self.returncode, "", self.stderr)


def test_ready_returns_at_once():
    looks = []
    wait_ready(SIDE, Daemon(), lambda: looks.append(1) or True, "sleeve", 30.0)
    assert looks == [1]


def test_a_daemon_that_exits_first_is_its_last_line():
    with pytest.raises(HarnessError, match=r"^h1: wireguard-go exited before its device was up: second$"):
        wait_ready(SIDE, Daemon(1, "first\nsecond\n"), lambda: False, "wireguard-go", 30.0,
                   exited="exited before its device was up")
    with pytest.raises(HarnessError, match=r"^h1: sleeve exited before ready: exit 3$"):
        wait_ready(SIDE, Daemon(3), lambda: False, "sleeve", 30.0)


def test_past_the_deadline_it_says_so():
    with pytest.raises(HarnessError, match=r"^h1: sleeve not ready after 0s$"):
        wait_ready(SIDE, Daemon(), lambda: True, "sleeve", 0.0)
