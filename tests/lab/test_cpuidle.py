"""harness.run.cpuidle: the PM QoS request that keeps idle CPUs polling, held and let go.

The kernel reports the CPU wake-up latency in force when /dev/cpu_dma_latency is read (a
32-bit value in µs), so the tests read what the request did instead of trusting it. No
timing: the kernel drops a closed descriptor's request before close(2) returns, and a
killed holder's before wait(2) returns.
"""

from __future__ import annotations

import os
import signal
import struct
import subprocess
import sys

import pytest

from conftest import needs_root
from harness.core.errors import HarnessError
from harness.core.paths import PROJECT
from harness.run import cpuidle

pytestmark = needs_root()


def in_force() -> int:
    with open(cpuidle.DEVICE, "rb") as f:
        return struct.unpack("i", f.read(4))[0]


@pytest.fixture
def unrequested():
    if not os.path.exists(cpuidle.DEVICE):
        pytest.skip(f"no {cpuidle.DEVICE} on this kernel")
    before = in_force()
    assert before > 0, f"something on this machine already holds a wake-up latency of {before} µs"
    return before


def test_the_request_holds_zero_until_released(unrequested):
    held = cpuidle.hold()
    try:
        assert in_force() == 0
    finally:
        held.release()
    assert in_force() == unrequested
    held.release()                              # twice is harmless


def test_a_killed_holder_leaves_no_request(unrequested):
    code = ("import sys; from harness.run import cpuidle; cpuidle.hold(); print('held', flush=True); "
            "sys.stdin.read()")
    p = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                         env={**os.environ, "PYTHONPATH": str(PROJECT)})
    try:
        assert p.stdout.readline() == "held\n"
        assert in_force() == 0
    finally:
        p.send_signal(signal.SIGKILL)
        p.wait(timeout=30)
    assert in_force() == unrequested


def test_a_device_that_cannot_be_opened_is_one_line(tmp_path):
    with pytest.raises(HarnessError, match=r"^--poll-idle: cannot request a CPU wake-up latency of 0 "
                                           r"\(.*/none: No such file or directory\); it needs root"):
        cpuidle.hold(str(tmp_path / "none"))
