"""Every under-load probe's server shell (harness/tools/underload.py), run for real on
loopback: iperf 2's server first, then the probe's, one signal stopping both."""

from __future__ import annotations

import os
import shlex
import signal
import socket
import subprocess
import time

import pytest

from harness.tools.base import TestSpec
from harness.tools.load_irtt import LoadIrtt
from harness.tools.load_sockperf import LoadSockperf

PROBES = [LoadIrtt(), LoadSockperf()]


def spec(**kw) -> TestSpec:
    return TestSpec(**{"server_addr": "127.0.0.1", "duration": 1, "streams": 2, **kw})


def _free_port_pair() -> int:
    """An even port P with P and P + 1 free on loopback (TCP and UDP) just now."""
    for _ in range(50):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            p = s.getsockname()[1] & ~1
        try:
            for port in (p, p + 1):
                for kind in (socket.SOCK_STREAM, socket.SOCK_DGRAM):
                    with socket.socket(socket.AF_INET, kind) as t:
                        t.bind(("127.0.0.1", port))
            return p
        except OSError:
            continue
    raise RuntimeError("no free port pair")


def _listening(proto: str, port: int) -> bool:
    flag = "-Hlun" if proto == "udp" else "-Hltn"
    return bool(subprocess.run(["ss", flag, f"sport = :{port}"], capture_output=True, text=True).stdout.strip())


@pytest.mark.parametrize("tool", PROBES, ids=lambda t: t.name)
def test_the_server_shell_starts_iperf_first_and_one_signal_stops_both(tool):
    """The probe's UDP port bound means iperf's TCP one listens (no race for the loaded phase), and
    the shell the runner waits for leaves only after both servers (iperf 2 lingers over a
    second on SIGTERM, holding its port, unless killed outright)."""
    port = _free_port_pair()
    proc = subprocess.Popen(tool.server_argv(spec(port=port)), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            process_group=0)
    try:
        deadline = time.monotonic() + 30
        while not _listening("udp", port):
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, f"{tool.binary}'s server never bound its port"
            time.sleep(0.05)
        assert _listening("tcp", port + 1)
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(10)
    # the leader is gone only once both servers are: the next case may bind the ports at once
    assert not _listening("tcp", port + 1) and not _listening("udp", port), "a server outlived the shell"
    with socket.socket() as again:
        again.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        again.bind(("0.0.0.0", port + 1))


@pytest.mark.parametrize("tool", PROBES, ids=lambda t: t.name)
def test_the_server_shell_fails_at_once_when_iperf_cannot_listen(tool):
    port = _free_port_pair()
    with socket.socket() as busy:
        busy.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        busy.bind(("127.0.0.1", port + 1))
        busy.listen()
        argv = tool.server_argv(spec(port=port))
        done = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    assert done.returncode == 1 and done.stderr.strip().endswith("iperf -s exited before listening"), \
        (done.returncode, done.stderr, shlex.join(argv))
