"""The WireGuard modes through the real lab: wireguard-go (the pinned build) carries
full-size DF pings and TCP at a standard and a jumbo MTU in every placement, keys that do
not match do not talk, teardown leaves nothing; the kernel mode refuses where the kernel
has no WireGuard (and is deployed for real where it has); no go means "unsupported here"."""

import base64
import json
import os
import re
import secrets
import shutil
import subprocess

import pytest

from conftest import full_size_pings, needs_root
from harness import modes
from harness.bed import Side, Testbed
from harness.core.errors import HarnessError, UnsupportedError
from harness.modes import wireguard as wg
from harness.run.endpoints import endpoints
from harness.run.procs import wait_listening

PLACEMENTS = ("container-container", "host-container", "host-host")
UNSUPPORTED_GO = ("mode wireguard-go: unsupported here: wireguard-go is not built and there is no go to build it "
                  "(apt-get install -y golang-go, then make wireguard-go)")


def kernel_has_wireguard(lab) -> bool:
    h = lab.sides[0].host
    probe = h.run(["ip", "link", "add", "obwgprobe", "type", "wireguard"], check=False)
    h.run(["ip", "link", "del", "obwgprobe"], check=False)
    return probe.ok


def daemons(lab) -> list[int]:
    """wireguard-go processes inside the lab's host namespaces."""
    out = []
    for s in lab.sides:
        pids = subprocess.run(["ip", "netns", "pids", s.host.netns], capture_output=True, text=True).stdout.split()
        for pid in pids:
            try:
                if open(f"/proc/{pid}/comm").read().strip() == "wireguard-go":
                    out.append(int(pid))
            except OSError:
                pass
    return out


def assert_nothing_left(lab, mode):
    assert daemons(lab) == []
    for s in lab.sides:
        dev = mode.dev(s)
        assert not s.host.run(["ip", "link", "show", dev], check=False).ok, dev
        routes = s.host.run(["ip", "route", "show"]).stdout
        assert dev not in routes, routes
        for ip in (lab.peer(s).overlay_ip, lab.peer(s).container_ip):
            assert s.host.run(["ip", "route", "show", "exact", f"{ip}/32"]).stdout.strip() == "", ip
        assert s.host.run(["sysctl", "-n", f"net.ipv4.conf.{s.bridge}.proxy_arp"]).stdout.strip() == "0"
        assert not os.path.exists(mode.key_path(s))
        for f in mode.files(s):
            assert not os.path.exists(f), f


def iperf_bits(lab, dp, placement, seconds=1):
    c, s = endpoints(lab, dp, placement)
    srv = s.host.start(["iperf3", "-s", "-1", "-p", "5201"])
    try:
        why = wait_listening(s.host, 5201, srv)
        assert why is None, why
        out = c.host.run(["iperf3", "-c", s.addr, "-p", "5201", "-t", str(seconds), "-J"], timeout=seconds + 20,
                         check=False)
    finally:
        srv.stop()
    end = json.loads(out.stdout)["end"]["sum_received"]
    return end["bits_per_second"], end["bytes"]


def deploy_and_carry(lab, mode, underlay, requested):
    lab.set_underlay(underlay, None)
    mtu = mode.overlay_mtu(underlay, requested)
    dp = mode.deploy(lab, mtu)
    try:
        assert dp.kind == "wireguard" and dp.overlay_mtu == mtu
        assert dp.info["listen_port"] == 51820 and dp.info["first_handshake"] is True
        for s in lab.sides:
            assert s.host.run(["ip", "-o", "link", "show", mode.dev(s)]).stdout.count(f"mtu {mtu} ") == 1
            assert oct(os.stat(mode.key_path(s)).st_mode & 0o777) == "0o600"
            port = s.host.run(["wg", "show", mode.dev(s), "listen-port"]).stdout.strip()
            assert port == "51820"
        full_size_pings(lab, dp, PLACEMENTS, mtu)
        # One byte more than the overlay MTU does not pass with DF set.
        c, s = endpoints(lab, dp, "container-container")
        too_big = c.host.run(["ping", "-c", "1", "-W", "1", "-M", "do", "-s", str(mtu - 27), s.addr], check=False)
        assert not too_big.ok
        bps, nbytes = iperf_bits(lab, dp, "container-container")
        assert bps > 50e6, f"{mode.name} at {mtu}: only {bps / 1e6:.0f} Mbit/s"
        counters = mode.counters(lab, dp)
        assert counters["h1"]["rx_bytes"] >= nbytes and counters["h0"]["tx_bytes"] >= nbytes
        if mode.name == "wireguard-go":
            assert set(dp.processes) == {0, 1} and len(daemons(lab)) == 2
            assert re.fullmatch(r"wireguard-go v[\d.]+ \(golang\.zx2c4\.com/wireguard v\S+\)", dp.info["version"])
    finally:
        mode.teardown(lab, dp)
    assert_nothing_left(lab, mode)


@pytest.mark.parametrize("underlay, requested, expected", [(1500, 1420, 1420), (9000, 8920, 8920),
                                                           (1500, "auto", 1440), (9000, "auto", 8940)])
@pytest.mark.lab
@needs_root()
def test_wireguard_go_carries_full_size_packets_and_tcp(lab, underlay, requested, expected):
    mode = modes.get("wireguard-go")
    assert mode.overlay_mtu(underlay, requested) == expected
    deploy_and_carry(lab, mode, underlay, requested)


class WrongPeerKey(wg.WireGuardGo):
    """Side 1 is told a public key for side 0 that nobody holds the private half of."""

    name = "wireguard-go-wrong-key"

    def peer_public(self, s, publics, peer):
        real = super().peer_public(s, publics, peer)
        return base64.b64encode(secrets.token_bytes(32)).decode() if s.index == 1 else real


@pytest.mark.lab
@needs_root()
def test_wireguard_go_with_a_wrong_peer_key_does_not_talk(lab, monkeypatch):
    # No handshake can complete with a key nobody holds, however long deploy tries (20 s in
    # a run): 2 s ends the tries sooner and changes no outcome.
    monkeypatch.setattr(wg, "HANDSHAKE_TIMEOUT", 2.0)
    mode = WrongPeerKey()
    dp = mode.deploy(lab, 1420)
    try:
        assert dp.info["first_handshake"] is False
        c, s = endpoints(lab, dp, "container-container")
        out = c.host.run(["ping", "-c", "3", "-i", "0.2", "-W", "1", s.addr], check=False)
        assert out.returncode != 0 and "100% packet loss" in out.stdout
        counters = mode.counters(lab, dp)
        assert counters["h0"]["latest_handshake"] == 0 and counters["h1"]["latest_handshake"] == 0
        assert counters["h1"]["rx_bytes"] == 0  # nothing reached side 1 as its peer's
    finally:
        mode.teardown(lab, dp)
    assert_nothing_left(lab, mode)


@pytest.mark.lab
@needs_root()
def test_kernel_wireguard_is_unsupported_here(lab):
    if kernel_has_wireguard(lab):
        pytest.skip("this kernel has WireGuard: test_kernel_wireguard_deploys runs instead")
    mode = modes.get("wireguard")
    with pytest.raises(UnsupportedError) as e:
        mode.check(lab)
    assert re.fullmatch(r"mode wireguard: kernel WireGuard unsupported here on h0 \([^\n]+\)", str(e.value)), e.value
    # deploy refuses the same way and leaves nothing (the keys it made first are gone)
    with pytest.raises(UnsupportedError, match=r"^mode wireguard: kernel WireGuard unsupported here on h0 "):
        mode.deploy(lab, 1420)
    assert_nothing_left(lab, mode)


@pytest.mark.lab
@needs_root()
def test_kernel_wireguard_deploys(lab):
    if not kernel_has_wireguard(lab):
        pytest.skip("no WireGuard in this kernel: test_kernel_wireguard_is_unsupported_here runs instead")
    mode = modes.get("wireguard")
    mode.check(lab)
    deploy_and_carry(lab, mode, 1500, 1420)


@pytest.mark.lab
@needs_root()
def test_wireguard_go_runs_through_the_runner(lab, tmp_path):
    from harness import results
    from harness.run import scenario as S
    from harness.run.runner import Runner
    sc = S.build({"matrix": {"modes": ["wireguard-go"], "tests": ["qperf.tcp_lat"],
                             "placements": ["host-host", "container-container"], "repeats": 1, "duration": 1}})
    store = results.RunStore.create(tmp_path, {"scenario": sc.to_dict()})
    modes.get("wireguard-go").check(lab)
    Runner(sc, lab, store).run(S.expand(sc))
    recs = store.records()
    assert {r["placement"] for r in recs} == {"host-host", "container-container"}
    assert all(r["datapath"] == "wireguard" and r["mode"] == "wireguard-go" and r["ok"] for r in recs), recs
    assert any(r["metric"] == "cpu_sleeve_pct" and r["value"] > 0 for r in recs)
    assert any(r["metric"] == "latency_us" and r["value"] > 0 for r in recs)
    info = store.read_meta()["datapaths"][0]["info"]
    assert info["listen_port"] == 51820 and info["version"].startswith("wireguard-go v")
    snaps = [json.loads(p.read_text()) for p in (store.path / "raw").glob("*.counters.json")]
    assert snaps and all(s["h1"]["rx_bytes"] > 0 for s in snaps)
    assert_nothing_left(lab, modes.get("wireguard-go"))


# --------------------------------------------------------------------- no lab

def path_without_go() -> str:
    keep = [d for d in os.environ.get("PATH", "").split(os.pathsep) if d and not os.path.exists(os.path.join(d, "go"))]
    return os.pathsep.join(keep)


def test_no_go_makes_wireguard_go_unsupported_in_one_line(monkeypatch, tmp_path):
    from harness.cli import checks as doctor
    monkeypatch.delenv(wg.ENV_BINARY, raising=False)
    monkeypatch.setenv("PATH", path_without_go())
    assert shutil.which("go") is None
    missing = tmp_path / "wireguard-go"
    with pytest.raises(UnsupportedError) as e:
        wg.WireGuardGo(built=missing).check(None)  # refuses before it touches a host
    assert str(e.value) == UNSUPPORTED_GO
    monkeypatch.setattr(wg, "BINARY", missing)
    (line,) = doctor.wireguard_go_checks()
    assert not line.ok and not line.required and line.detail == UNSUPPORTED_GO.split(": ", 1)[1]


def test_go_present_but_not_built_says_how_to_build(monkeypatch, tmp_path):
    monkeypatch.delenv(wg.ENV_BINARY, raising=False)
    go = tmp_path / "bin" / "go"
    go.parent.mkdir()
    go.write_text("#!/bin/sh\nexit 0\n")
    go.chmod(0o755)
    monkeypatch.setenv("PATH", f"{go.parent}{os.pathsep}{path_without_go()}")
    with pytest.raises(HarnessError) as e:
        wg.find_binary(tmp_path / "wireguard-go")
    assert not isinstance(e.value, UnsupportedError)
    assert str(e.value).endswith("missing): run make wireguard-go")


def test_a_named_binary_that_is_not_there_is_refused(monkeypatch, tmp_path):
    monkeypatch.setenv(wg.ENV_BINARY, str(tmp_path / "nope"))
    with pytest.raises(HarnessError, match=r"OVERLAYBENCH_WIREGUARD_GO=.*/nope: not an executable file"):
        wg.find_binary()


def _side(i, underlay_ip, container=True):
    return Side(index=i, host=None, underlay_dev="ul0", underlay_ip=underlay_ip, overlay_ip=f"198.18.64.{i + 1}",
                bridge="br0", container_ip=f"198.18.64.{11 + i}" if container else "", workdir=f"/w/h{i}")


def test_wg_set_argv_names_key_port_peer_endpoint_and_allowed_ips():
    peer = _side(1, "198.18.0.2")
    assert wg.wg_set_argv("obwg0", "/w/h0/wireguard-private.key", [("PUB=", peer)]) == [
        "wg", "set", "obwg0", "listen-port", "51820", "private-key", "/w/h0/wireguard-private.key",
        "peer", "PUB=", "endpoint", "198.18.0.2:51820", "allowed-ips", "198.18.64.2/32,198.18.64.12/32"]
    third = _side(2, "198.18.0.3")
    assert wg.wg_set_argv("obwg0", "k", [("PUB=", peer), ("QUB=", third)])[7:] == [
        "peer", "PUB=", "endpoint", "198.18.0.2:51820", "allowed-ips", "198.18.64.2/32,198.18.64.12/32",
        "peer", "QUB=", "endpoint", "198.18.0.3:51820", "allowed-ips", "198.18.64.3/32,198.18.64.13/32"]
    v6 = _side(1, "2001:2::2", container=False)  # RFC 5180's benchmarking range
    argv = wg.wg_set_argv("obwg0", "k", [("PUB=", v6)])
    assert argv[argv.index("endpoint") + 1] == "[2001:2::2]:51820"
    assert argv[argv.index("allowed-ips") + 1] == "198.18.64.2/32"


def test_overhead_is_60_over_ipv4_and_80_over_ipv6():
    assert (wg.overhead_for("198.18.0.1"), wg.overhead_for("2001:2::1")) == (60, 80)
    m = modes.get("wireguard")
    assert m.overlay_mtu(1500, "auto") == 1440 and m.overlay_mtu(9000, "auto") == 8940
    with pytest.raises(HarnessError, match="does not fit mode wireguard-go on underlay MTU 1500.*at most 1440"):
        modes.get("wireguard-go").overlay_mtu(1500, 1441)


class _V6(Testbed):
    underlay_mtu, rate = 1500, None

    def __init__(self):
        self.sides = (_side(0, "2001:2::1"), _side(1, "2001:2::2"))

    def build(self, underlay_mtu, rate):
        raise AssertionError("not reached")

    def set_underlay(self, mtu, rate):
        raise AssertionError("not reached")

    def install_sleeve(self, side, source=None):
        raise AssertionError("not reached")

    @property
    def artifact_dir(self):
        raise AssertionError("not reached")

    def teardown(self):
        pass


def test_deploy_over_an_ipv6_underlay_refuses_what_only_fits_ipv4():
    # Refused before any command runs: the sides have no hosts to run one on.
    with pytest.raises(HarnessError, match=r"overlay MTU 1440 does not fit mode wireguard on underlay MTU 1500 "
                                           r"\(2001:2::1\): its encapsulation adds 80 bytes, so at most 1420"):
        modes.get("wireguard").deploy(_V6(), 1440)


def test_wg_show_parser_sums_peers_and_keeps_the_latest_handshake():
    transfer = "AAAA=\t100\t200\nBBBB=\t5\t7\n"
    handshakes = "AAAA=\t1795392186\nBBBB=\t0\n"
    assert wg.parse_wg_show(transfer, handshakes) == {"rx_bytes": 105, "tx_bytes": 207,
                                                      "latest_handshake": 1795392186, "peers_handshaken": 1}
    assert wg.parse_wg_show("", "") == {"rx_bytes": 0, "tx_bytes": 0, "latest_handshake": 0, "peers_handshaken": 0}
