"""The lab for real: namespaces, veth, bridge, addresses, teardown and `down`."""

import ipaddress
import os
import subprocess
import sys

import pytest

from conftest import needs_root
from harness.core.errors import HarnessError
from harness.testbeds import lab as labmod
from harness.testbeds import lab_state

pytestmark = [needs_root(), pytest.mark.lab]
LAB_RANGE = ipaddress.ip_network("198.18.0.0/15")


def _addrs(host):
    out = host.run(["ip", "-o", "-4", "addr", "show"]).stdout
    return [ln.split()[3] for ln in out.splitlines() if " lo " not in ln]


def test_every_address_is_in_the_benchmark_range_and_no_default_route(lab):
    hosts = [s.host for s in lab.sides] + [s.container for s in lab.sides]
    for h in hosts:
        for a in _addrs(h):
            assert ipaddress.ip_interface(a).network.subnet_of(LAB_RANGE), (h, a)
        routes = h.run(["ip", "route", "show", "default"]).stdout.strip()
        assert routes == "", (h, routes)
    root = subprocess.run(["ip", "-o", "-4", "addr", "show"], capture_output=True, text=True).stdout
    mine = [ln.split()[3] for ln in root.splitlines() if f"{lab.prefix}-m" in ln]
    assert len(mine) == 2 and all(ipaddress.ip_interface(a).network.subnet_of(LAB_RANGE) for a in mine)


def test_underlay_mgmt_and_rate_cap(lab):
    a, b = lab.sides
    a.host.run(["ping", "-c", "1", "-W", "10", b.underlay_ip])
    lab.root.run(["ping", "-c", "1", "-W", "10", lab.mgmt_addrs(1)[1]])
    lab.set_underlay(9000, "1gbit")
    assert "mtu 9000" in a.host.run(["ip", "link", "show", "ul0"]).stdout
    a.host.run(["ping", "-c", "1", "-W", "10", "-M", "do", "-s", str(9000 - 28), b.underlay_ip])
    qd = a.host.run(["tc", "qdisc", "show", "dev", "ul0"]).stdout
    assert "tbf" in qd and "rate 1Gbit" in qd
    lab.set_underlay(1500, None)
    assert "tbf" not in a.host.run(["tc", "qdisc", "show", "dev", "ul0"]).stdout
    with pytest.raises(HarnessError, match="rate 'fast'"):
        lab.set_underlay(1500, "fast")


def test_teardown_on_error_removes_everything_and_kills_processes():
    with pytest.raises(RuntimeError):
        with labmod.Lab.create() as lab:
            prefix = lab.prefix
            proc = lab.sides[1].host.start(["sleep", "60"])
            raise RuntimeError("boom")
    assert prefix not in lab_state.leftovers()
    assert proc.poll() is not None
    assert not (lab_state.STATE_ROOT / prefix).exists()


def test_start_returns_with_the_process_inside_its_namespace(lab):
    """`ip netns exec` enters the namespace only after it runs; were start to return before,
    a teardown right after it would not find the process among the namespace's and leave it
    running. Twenty starts, each checked the moment start returns."""
    host = lab.sides[1].host
    want = os.stat(f"/run/netns/{host.netns}")
    for _ in range(20):
        proc = host.start(["sleep", "60"])
        try:
            now = os.stat(f"/proc/{proc.pid}/ns/net")
            assert (now.st_dev, now.st_ino) == (want.st_dev, want.st_ino)
        finally:
            proc.stop()


# A lab's owner that blocks on its stdin until the test kills it: no deadline of its own.
CHILD = """
import sys
from harness.testbeds.lab import Lab
lab = Lab.create()
print(lab.prefix, flush=True)
sys.stdin.read()
"""


def test_down_removes_a_killed_runs_lab_and_leaves_a_live_one():
    live, killed = (subprocess.Popen([sys.executable, "-c", CHILD], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     text=True) for _ in range(2))
    try:
        live_prefix = live.stdout.readline().strip()
        dead_prefix = killed.stdout.readline().strip()
        killed.kill()
        killed.wait()
        info = lab_state.leftovers()
        assert info[dead_prefix]["namespaces"] and not info[dead_prefix]["alive"]
        assert info[live_prefix]["alive"]
        removed, kept = lab_state.down()
        assert any(dead_prefix in r for r in removed)
        assert any(live_prefix in k for k in kept)
        info = lab_state.leftovers()
        assert dead_prefix not in info and live_prefix in info
    finally:
        live.kill()
        live.wait()
        lab_state.remove_lab(live_prefix)
    assert live_prefix not in lab_state.leftovers()


def test_remove_lab_refuses_foreign_names():
    with pytest.raises(HarnessError, match="not a lab prefix"):
        lab_state.remove_lab("docker0")
