"""wireguard and wireguard-go: deploy and teardown, command by command, on ScriptedHosts
(the steps and names in scripted_modes.py); no root, no waits."""

from __future__ import annotations

import pytest
from scripted_modes import Names, overlay_path, routed, sides, tb, unrouted  # noqa: F401 - tb is the fixture

from harness import modes
from harness.core.errors import HarnessError, UnsupportedError
from harness.hosts.scripted import ScriptedProcess
from harness.modes import wireguard

PUBLIC = ("xTIBA5rboUvnH4htodjb6e697QjLERt1NAB4mZqp8Dg=", "TrMvSoP4jYQlY6RIzBgbssQqY3vxI2Pi+y71lOWWXX0=")
GENKEY = 'rm -f "$1" && umask 077 && set -C && wg genkey > "$1" && wg pubkey < "$1"'
WG_VERSION = "wireguard-tools v1.0.20210914 - https://git.zx2c4.com/wireguard-tools/\n"


@pytest.fixture
def wireguard_go_binary(tmp_path, monkeypatch):
    """A stand-in for `make wireguard-go`'s build: what is shipped, and its version line."""
    path = tmp_path / "wireguard-go"
    path.write_text("#!/bin/sh\necho 'wireguard-go v0.0.20250522'\n")
    path.chmod(0o755)
    monkeypatch.setenv(wireguard.ENV_BINARY, str(path))
    return path


def wg_dev(name: str, n: Names) -> str:
    return n.wg if name == "wireguard" else n.wggo


def wg_up(name: str, tb, mtu: int, publics=PUBLIC) -> dict[int, ScriptedProcess]:
    daemons = {}
    for s, n in sides(tb):
        s.host.expect(f"mkdir -p -m 0700 {n.dir}")
        s.host.expect(["sh", "-c", GENKEY, "sh", f"{n.dir}/wireguard-private.key"], stdout=publics[s.index] + "\n")
    for s, n in sides(tb):
        dev = wg_dev(name, n)
        if name == "wireguard":
            s.host.expect(f"ip link del {dev}", returncode=1, stderr=f'Cannot find device "{dev}"\n')
            s.host.expect(f"ip link add {dev} type wireguard")
        else:
            daemons[s.index] = ScriptedProcess.runs()
            s.host.expect_start(f"env WG_PROCESS_FOREGROUND=1 LOG_LEVEL=error {n.dir}/wireguard-go -f {dev}",
                                daemons[s.index])
            s.host.expect(f"test -S /var/run/wireguard/{dev}.sock")
    for s, n in sides(tb):
        dev = wg_dev(name, n)
        s.host.expect(f"wg set {dev} listen-port 51820 private-key {n.dir}/wireguard-private.key "
                      f"peer {PUBLIC[1 - s.index]} endpoint {n.peer}:51820 allowed-ips {n.ov_peer}/32,{n.ct_peer}/32")
        overlay_path(s, n, mtu, dev)
        s.host.expect(f"ip link set {dev} up")
        routed(s, n, dev)
    h0, n0 = tb.sides[0].host, tb.names[0]
    h0.expect("wg --version", stdout=WG_VERSION)
    if name == "wireguard":
        h0.expect("cat /sys/module/wireguard/version", stdout="1.0.0\n")
        h0.expect("uname -r", stdout="6.1.0-18-amd64\n")
    h0.expect(f"ping -c 1 -W 1 {n0.ov_peer}")
    h0.expect(f"wg show {wg_dev(name, n0)} transfer", stdout=f"{PUBLIC[1]}\t1232\t1520\n")
    h0.expect(f"wg show {wg_dev(name, n0)} latest-handshakes", stdout=f"{PUBLIC[1]}\t1732500000\n")
    return daemons


def wg_down(name: str, tb) -> None:
    for s, n in sides(tb):
        dev = wg_dev(name, n)
        unrouted(s, n, dev)
        s.host.expect(f"ip link del {dev}")
        sock = f" /var/run/wireguard/{dev}.sock" if name == "wireguard-go" else ""
        s.host.expect(f"rm -f {n.dir}/wireguard-private.key{sock}")
        overlay_path(s, n, 1500)


@pytest.mark.parametrize("name", ["wireguard", "wireguard-go"])
def test_wireguard_deploys_keys_devices_and_routes_and_removes_them(tb, name, request):
    if name == "wireguard-go":
        binary = request.getfixturevalue("wireguard_go_binary")
    mode = modes.get(name)
    daemons = wg_up(name, tb, 1440)
    dp = mode.deploy(tb, 1440)
    tb.assert_all_used()
    assert dp.devices == {s.index: [n.ul, wg_dev(name, n), n.br, n.vc, "ctr:eth0"] for s, n in sides(tb)}
    assert dp.info["first_handshake"] is True and dp.info["wg"] == "v1.0.20210914"
    assert dp.processes == daemons
    if name == "wireguard":
        assert dp.info["version"] == "kernel 6.1.0-18-amd64 module 1.0.0"
    else:
        assert dp.info["version"] == "wireguard-go v0.0.20250522"
        for s, n in sides(tb):                 # the pinned build, executable, on each host
            assert s.host.files[f"{n.dir}/wireguard-go"] == (binary.read_bytes(), 0o755)
    wg_down(name, tb)
    mode.teardown(tb, dp)
    tb.assert_all_used()
    assert all(d.stopped for d in daemons.values())


@pytest.mark.parametrize("name", ["wireguard", "wireguard-go"])
def test_wireguard_without_a_public_key_fails_the_deploy_and_cleans_both_hosts(tb, name, request):
    if name == "wireguard-go":
        request.getfixturevalue("wireguard_go_binary")
    (s0, n0), (s1, n1) = sides(tb)
    s0.host.expect(f"mkdir -p -m 0700 {n0.dir}")
    s0.host.expect(["sh", "-c", GENKEY, "sh", f"{n0.dir}/wireguard-private.key"], stdout="wg: command not found\n")
    wg_down(name, tb)
    with pytest.raises(HarnessError, match="^h0: `wg pubkey` printed no public key$"):
        modes.get(name).deploy(tb, 1440)
    tb.assert_all_used()


def test_kernel_wireguard_that_cannot_make_its_device_is_unsupported_and_cleans_both(tb):
    (s0, n0), (s1, n1) = sides(tb)
    for s, n in sides(tb):
        s.host.expect(f"mkdir -p -m 0700 {n.dir}")
        s.host.expect(["sh", "-c", GENKEY, "sh", f"{n.dir}/wireguard-private.key"], stdout=PUBLIC[s.index])
    s0.host.expect(f"ip link del {n0.wg}", returncode=1)
    s0.host.expect(f"ip link add {n0.wg} type wireguard", returncode=2,
                   stderr="Error: Unknown device type.\n")
    wg_down("wireguard", tb)
    with pytest.raises(UnsupportedError, match=r"kernel WireGuard unsupported here on h0 \(Error: Unknown device type.\)"):
        modes.get("wireguard").deploy(tb, 1440)
    tb.assert_all_used()


def test_wireguard_go_that_exits_before_its_socket_fails_and_stops_nothing_else(tb, wireguard_go_binary):
    (s0, n0), (s1, n1) = sides(tb)
    for s, n in sides(tb):
        s.host.expect(f"mkdir -p -m 0700 {n.dir}")
        s.host.expect(["sh", "-c", GENKEY, "sh", f"{n.dir}/wireguard-private.key"], stdout=PUBLIC[s.index])
    s0.host.expect_start(f"env WG_PROCESS_FOREGROUND=1 LOG_LEVEL=error {n0.dir}/wireguard-go -f {n0.wggo}",
                         ScriptedProcess.exits(1, stderr="ERROR: Failed to create TUN device: no such device\n"))
    wg_down("wireguard-go", tb)
    with pytest.raises(HarnessError, match="^h0: wireguard-go exited before its device was up: ERROR: Failed to "
                                           "create TUN device: no such device$"):
        modes.get("wireguard-go").deploy(tb, 1440)
    tb.assert_all_used()
    assert [c for c in s1.host.calls if c.kind == "start"] == [], "h1's daemon was never started"


def test_wireguard_refuses_an_overlay_mtu_an_ipv6_underlay_cannot_carry_before_making_anything(tb):
    for s in tb.sides:
        s.underlay_ip = f"fd00::{s.index + 1}"
    with pytest.raises(HarnessError, match="overlay MTU 1440 does not fit mode wireguard .* adds 80 bytes, so at most 1420"):
        modes.get("wireguard").deploy(tb, 1440)
    assert all(h.calls == [] for h in tb.hosts)
