"""The real Flannel's five modes (harness/modes/flannel.py, etcd.py): deploy and teardown,
command by command, on ScriptedHosts (the steps and names in scripted_modes.py); no
root, no waits: every poll the mode makes is answered at its first try.

The subnet files are the captures in tests/data/flannel/ (flanneld v0.26.7); side 1's
takes another subnet, as a second host's lease does (ipip and wireguard, without
captures of their own, take the vxlan one with their MTU)."""

from __future__ import annotations

import base64
import json
import pathlib
import platform
import shlex

import pytest
from scripted_modes import LAB, overlay_path, sides, tb  # noqa: F401 - tb is the fixture

from harness import modes
from harness.core.errors import HarnessError, UnsupportedError
from harness.hosts.base import Completed
from harness.hosts.scripted import ScriptedProcess
from harness.modes import flannel, flannel_config

DATA = pathlib.Path(__file__).parents[1] / "data" / "flannel"
NETWORK = "198.19.64.0/18"
ETCD = "http://{me}:42379"
ETCD_PEER = "http://127.0.0.1:42380"
FLANNELD_BYTES = b"\x7fELF\x02\x01\x01\0go1.23.8\0path\tgithub.com/flannel-io/flannel\tv0.26.7\th1:abc=\n\0"
# backend: (flannel's MTU on an underlay of 1500, its capture, the two sides' subnets as a.b.c of a.b.c.0/24)
BACKENDS = {"vxlan": (1450, "vxlan", ("198.19.122", "198.19.84")),
            "udp": (1472, "udp", ("198.19.99", "198.19.100")),
            "host-gw": (1500, "host-gw", ("198.19.83", "198.19.71")),
            "ipip": (1480, "vxlan", ("198.19.122", "198.19.84")),
            "wireguard": (1420, "vxlan", ("198.19.122", "198.19.84"))}


@pytest.fixture
def fb(tb, tmp_path, monkeypatch):
    """tb with the prefix a real testbed has (Lab and RemoteTestbed alike), and a stand-in
    for `make flanneld`'s build carrying the module line version_of reads."""
    path = tmp_path / "flanneld"
    path.write_bytes(FLANNELD_BYTES)
    path.chmod(0o755)
    monkeypatch.setenv(flannel_config.ENV_BINARY, str(path))
    tb.prefix = "ob12ab"
    return tb


def dev(tb, backend: str, i: int) -> str:
    """The device side i routes the peer's subnet through: the VXLAN device's VNI names the
    prefix on a real host; the TUN is the kernel's next free name (h1 of the remote has one)."""
    lab = tb.names is LAB
    return {"host-gw": tb.names[i].ul, "vxlan": "flannel.1" if lab else "flannel.1053355",
            "udp": "flannel1" if i and not lab else "flannel0", "ipip": "flannel.ipip",
            "wireguard": "flannel-wg"}[backend]


def lease(backend: str, i: int) -> tuple[str, str, str, str]:
    """(subnet as flanneld writes it, its network, the bridge's address, the container's)."""
    abc = BACKENDS[backend][2][i]
    return f"{abc}.1/24", f"{abc}.0/24", f"{abc}.1", f"{abc}.2"


def subnet_env(backend: str, i: int, mtu: int | None = None) -> str:
    mtu_now, capture, _ = BACKENDS[backend]
    text = (DATA / f"subnet-{capture}.env").read_text()
    assert f"FLANNEL_SUBNET={lease(backend, 0)[0]}\n" in text and "FLANNEL_MTU=" in text
    text = text.replace(lease(backend, 0)[0], lease(backend, i)[0])
    return "".join(f"FLANNEL_MTU={mtu or mtu_now}\n" if ln.startswith("FLANNEL_MTU=") else ln
                   for ln in text.splitlines(keepends=True))


def arch(tb, machines=(platform.machine(),) * 2) -> None:
    """check(): each host's architecture, against the flanneld this machine ships."""
    for s, m in zip(tb.sides, machines):
        s.host.expect("uname -m", stdout=m + "\n")


def etcd_request(url: str, path: str, body: dict):
    """A curl POST to etcd's JSON gateway, matched on its body decoded (keys, values in base64)."""
    head = ["curl", "-sS", "--fail-with-body", "--max-time", "10", "-X", "POST",
            "-H", "Content-Type: application/json", "-d"]

    def decoded(raw: str) -> dict:
        out = {k: base64.b64decode(v).decode() for k, v in json.loads(raw).items()}
        return {**out, "value": json.loads(out["value"])} if "value" in out else out

    def match(argv: list[str]) -> bool:
        return argv[:-2] == head and argv[-1] == url + path and decoded(argv[-2]) == body
    match.__name__ = f"curl -d {body} {url}{path}"
    return match


# ------------------------------------------------------------------ steps

def checked(tb, name: str, machines=(platform.machine(),) * 2) -> None:
    """check(): the kernel's backend probed on each host, its architecture read, no flannel
    of the host's own there (etcd and curl are preflight's, through the mode's `binaries`)."""
    probe = {"flannel-ipip": "ipip remote 198.18.0.254", "flannel-wireguard": "wireguard"}.get(name)
    for s in tb.sides:
        if probe:
            s.host.expect(f"ip link add obflchk type {probe}")
            s.host.expect("ip link del obflchk")
    arch(tb, machines)
    fixed = {"flannel-ipip": "flannel.ipip", "flannel-wireguard": "flannel-wg"}.get(name)
    for s in tb.sides if fixed else ():       # none there: not a flannel of the host's own
        s.host.expect(f"ip link show {fixed}", returncode=1, stderr=f'Device "{fixed}" does not exist.\n')


def etcd_started(tb) -> ScriptedProcess:
    """etcd on h0, on its underlay address, its data in h0's directory, answering /health."""
    h, n = tb.sides[0].host, tb.names[0]
    url = ETCD.format(me=n.me)
    h.expect(f"rm -rf {n.dir}/etcd")
    h.expect(f"mkdir -p -m 0700 {n.dir}/etcd")
    proc = ScriptedProcess.runs()
    h.expect_start(["etcd", "--name", "ob12ab", "--data-dir", f"{n.dir}/etcd", "--listen-client-urls", url,
                    "--advertise-client-urls", url, "--listen-peer-urls", ETCD_PEER,
                    "--initial-advertise-peer-urls", ETCD_PEER, "--initial-cluster", f"ob12ab={ETCD_PEER}",
                    "--initial-cluster-state", "new", "--log-level", "warn"], proc)
    h.expect(f"curl -sS --max-time 2 {url}/health", stdout='{"health":"true"}')
    return proc


def config_put(tb, name: str, backend: str, url: str) -> None:
    config = {"Network": NETWORK, "SubnetLen": 24, "Backend": {"Type": backend}}
    if backend == "vxlan":
        config["Backend"]["VNI"] = 1 if tb.names is LAB else 1053355
    tb.sides[0].host.expect(etcd_request(url, "/v3/kv/put", {"key": f"/overlaybench/ob12ab/{name}/network/config",
                                                             "value": config}))


def flanneld_started(tb, name: str, url: str, fwd: tuple[str, str]) -> dict[int, ScriptedProcess]:
    daemons = {}
    for s, n in sides(tb):
        s.host.expect(f"mkdir -p -m 0700 {n.dir}")
        s.host.expect(f"rm -f {n.dir}/flannel-subnet.env")
        s.host.expect(f"sysctl -n net/ipv4/conf/{n.ul}/forwarding", stdout=fwd[s.index] + "\n")
        s.host.expect(["sh", "-c", 'umask 077 && cat > "$1"', "sh", f"{n.dir}/flannel.json"])
        daemons[s.index] = ScriptedProcess.runs()
        s.host.expect_start(f"env WIREGUARD_KEY_FILE={n.dir}/flannel-wg.key {n.dir}/flanneld -etcd-endpoints {url} -etcd-prefix /overlaybench/ob12ab/{name}/network "
                            f"-iface {n.ul} -public-ip {n.me} -subnet-file {n.dir}/flannel-subnet.env -ip-masq=false "
                            f"-iptables-forward-rules=false -healthz-port 0", daemons[s.index])
    return daemons


def started(tb, name: str, fwd=("0", "1")):
    """etcd up, the config put, both flanneld started: (etcd, daemons)."""
    etcd, url = etcd_started(tb), ETCD.format(me=tb.names[0].me)
    config_put(tb, name, name.removeprefix("flannel-"), url)
    return etcd, flanneld_started(tb, name, url, fwd)


def subnets_written(tb, backend: str, mtu: int | None = None) -> None:
    for s, n in sides(tb):
        s.host.expect(f"cat {n.dir}/flannel-subnet.env", stdout=subnet_env(backend, s.index, mtu))


def routes_learnt(tb, backend: str) -> None:
    """Each side's device read (the TUN from its route to the network), then the route to
    the peer's bridge through it."""
    for s, n in sides(tb):
        d = dev(tb, backend, s.index)
        if backend == "udp":
            s.host.expect(f"ip -o route show exact {NETWORK}",
                          stdout=f"{NETWORK} dev {d} proto kernel scope link src {lease(backend, s.index)[1][:-3]} \n")
    for s, n in sides(tb):
        d, peer = dev(tb, backend, s.index), lease(backend, 1 - s.index)
        via = {"vxlan": f"via {peer[1][:-3]} ", "ipip": f"via {n.peer} ", "host-gw": f"via {n.peer} "}.get(backend, "")
        s.host.expect(f"ip -o route get {peer[2]}", stdout=f"{peer[2]} {via}dev {d} src {n.me} uid 0 \\    cache \n")


def wired(tb, backend: str, mtu: int, fwd: tuple[str, str]) -> None:
    """The bridge and container into the side's subnet, confined, then forwarding on."""
    for s, n in sides(tb):
        h, c, d = s.host, s.container, dev(tb, backend, s.index)
        _, _, br_ip, ct_ip = lease(backend, s.index)
        overlay_path(s, n, mtu, None if backend == "host-gw" else d)
        h.expect(f"ip addr add {br_ip}/24 dev {n.br}")
        c.expect(f"ip addr add {ct_ip}/24 dev eth0")
        c.expect(f"ip route replace {NETWORK} via {br_ip} dev eth0 src {ct_ip}")
        if backend == "host-gw":
            c.expect(f"ip route replace {n.peer}/32 via {br_ip} dev eth0 src {ct_ip}")
            h.expect(["nft", "add", "element", "inet", n.table, "gateway_nets", f"{{ {NETWORK}, {n.peer}/32 }}"])
            h.expect(["nft", "add", "element", "inet", n.table, "gateways", f'{{ "{n.ul}" }}'])
            if fwd[s.index] != "1":
                h.expect(["nft", "add", "element", "inet", n.table, "confined_gateways", f'{{ "{n.ul}" }}'])
        else:
            h.expect(["nft", "add", "element", "inet", n.table, "tunnels", f'{{ "{d}" }}'])
        h.expect(f"sysctl -q -w net/ipv4/conf/{n.br}/forwarding=1")
        h.expect(f"sysctl -q -w net/ipv4/conf/{d}/forwarding=1")


def flannel_up(tb, name: str, fwd=("0", "1"), url: str | None = None, ping=None):
    """The whole deploy: (the etcd started, or None where the testbed names one), the daemons;
    `ping` answers the ping bridge to bridge (else it crosses)."""
    backend = name.removeprefix("flannel-")
    if url:
        config_put(tb, name, backend, url)
        proc, daemons = None, flanneld_started(tb, name, url, fwd)
    else:
        proc, daemons = started(tb, name, fwd)
    subnets_written(tb, backend)
    routes_learnt(tb, backend)
    wired(tb, backend, BACKENDS[backend][0], fwd)
    tb.sides[0].host.expect(f"ping -c 1 -W 1 -I {lease(backend, 0)[2]} {lease(backend, 1)[2]}", answer=ping)
    return proc, daemons


def flannel_down(tb, backend: str, fwd=("0", "1"), *, etcd=True, subnets=True, devices=True) -> None:
    """The etcd's data removed (once it is stopped), then _unwire on each side: what the
    harness added, flannel's device and routes, the underlay's forwarding as read, the
    files, the path's MTU back to 1500."""
    if etcd:
        tb.sides[0].host.expect(f"rm -rf {tb.names[0].dir}/etcd")
    for s, n in sides(tb):
        h, c = s.host, s.container
        _, _, br_ip, ct_ip = lease(backend, s.index)
        if subnets:
            h.expect(f"ip addr del {br_ip}/24 dev {n.br}")
            c.expect(f"ip route del {NETWORK} dev eth0")
            if backend == "host-gw":
                c.expect(f"ip route del {n.peer}/32 dev eth0")
            c.expect(f"ip addr del {ct_ip}/24 dev eth0")
        if backend in ("vxlan", "ipip", "wireguard"):   # flanneld leaves these devices (and routes) when it stops
            h.expect(f"ip link del {dev(tb, backend, s.index)}")
        if subnets:                           # host-gw's route (elsewhere: none, "No such process")
            h.expect(f"ip route del {lease(backend, 1 - s.index)[1]} via {n.peer} dev {n.ul}",
                     returncode=0 if backend == "host-gw" else 2)
        if devices and backend == "host-gw":
            absent = {"returncode": 0} if fwd[s.index] != "1" else {"returncode": 1, "stderr": "Error: No such file\n"}
            h.expect(["nft", "delete", "element", "inet", n.table, "confined_gateways", f'{{ "{n.ul}" }}'], **absent)
            h.expect(["nft", "delete", "element", "inet", n.table, "gateways", f'{{ "{n.ul}" }}'])
            h.expect(["nft", "delete", "element", "inet", n.table, "gateway_nets", f"{{ {NETWORK}, {n.peer}/32 }}"])
        elif devices:
            h.expect(["nft", "delete", "element", "inet", n.table, "tunnels", f'{{ "{dev(tb, backend, s.index)}" }}'])
        if fwd:
            h.expect(f"sysctl -q -w net/ipv4/conf/{n.ul}/forwarding={fwd[s.index]}")
        h.expect(f"rm -f {n.dir}/flanneld {n.dir}/flannel-subnet.env {n.dir}/flannel.json {n.dir}/flannel-wg.key")
        overlay_path(s, n, 1500)


# ------------------------------------------------------------------ deploy and teardown

@pytest.mark.parametrize("name", ["flannel-vxlan", "flannel-udp", "flannel-host-gw",
                                  "flannel-ipip", "flannel-wireguard"])
def test_flannel_deploys_etcd_flanneld_and_the_subnets_and_removes_them(fb, name):
    tb, backend = fb, name.removeprefix("flannel-")
    mode, mtu = modes.get(name), BACKENDS[backend][0]
    checked(tb, name)
    mode.check(tb)
    etcd, daemons = flannel_up(tb, name)
    dp = mode.deploy(tb, mode.overlay_mtu(1500, "auto"))
    tb.assert_all_used()
    (s0, n0), _ = sides(tb)
    devs = (dev(tb, backend, 0), dev(tb, backend, 1))
    assert dp.addrs == {i: {"host": lease(backend, i)[2], "container": lease(backend, i)[3]} for i in (0, 1)}
    assert dp.info == {
        "backend": backend, "version": "v0.26.7", "network": NETWORK,
        "etcd_prefix": f"/overlaybench/ob12ab/{name}/network",
        "etcd": {"endpoints": f"http://{n0.me}:42379", "started_by_overlaybench": True},
        "underlay_forwarding": {"0": "0", "1": "1"}, "subnets": {"0": lease(backend, 0)[0], "1": lease(backend, 1)[0]},
        "flannel_mtu": mtu, "devices": {"0": devs[0], "1": devs[1]}}
    assert (dp.kind, dp.overlay_mtu, dp.processes) == ("flannel", mtu, daemons)
    assert dp.devices == {i: [n.ul, devs[i], n.br, n.vc, "ctr:eth0"] for i, n in enumerate(tb.names)}
    assert len(dp.services) == 1 and dp.services[0].process is etcd and dp.services[0].data_dir == f"{n0.dir}/etcd"
    for s, n in sides(tb):               # the build shipped; what `down` needs written before flanneld runs
        assert s.host.files[f"{n.dir}/flanneld"] == (FLANNELD_BYTES, 0o755)
        note = next(c.input for c in s.host.calls if c.argv[-1] == f"{n.dir}/flannel.json")
        assert json.loads(note) == {"network": NETWORK, "underlay_dev": n.ul, "underlay_ip": n.me,
                                    "underlay_forwarding": ("0", "1")[s.index],
                                    "device": {"ipip": "flannel.ipip", "wireguard": "flannel-wg"}.get(backend, ""),
                                    "peer_underlay_ip": n.peer,
                                    "backend": backend}

    flannel_down(tb, backend)
    mode.teardown(tb, dp)
    tb.assert_all_used()
    assert all(d.stopped for d in daemons.values()) and etcd.stopped
    t = s0.host.transcript()[::-1]    # flanneld goes before its etcd, the etcd before its data
    assert t.index(f"stop: {shlex.join(daemons[0].argv)} (exited -15)") > t.index(
        f"stop: {shlex.join(etcd.argv)} (exited -15)") > t.index(f"run: rm -rf {n0.dir}/etcd")


@pytest.mark.parametrize("fwd", [("1", "0"), ("0", "0"), ("1", "1")])
def test_host_gw_confines_the_underlay_where_its_forwarding_was_off_and_restores_it(fb, fwd):
    """confined_gateways only on a side whose underlay forwarded nothing before (the ordered
    script: the table's elements before forwarding goes on); each side's forwarding back
    to what was read."""
    mode = modes.get("flannel-host-gw")
    flannel_up(fb, "flannel-host-gw", fwd)
    dp = mode.deploy(fb, 1500)
    fb.assert_all_used()
    assert dp.info["underlay_forwarding"] == {"0": fwd[0], "1": fwd[1]}
    flannel_down(fb, "host-gw", fwd)
    mode.teardown(fb, dp)
    fb.assert_all_used()


def test_an_etcd_the_testbed_names_is_used_under_the_prefix_and_only_the_prefix_deleted(fb):
    """No etcd started; flanneld gets the first endpoint; teardown deletes
    the deployment's keys (range end: the prefix's last byte plus one) and nothing else."""
    fb.etcd_endpoints = "http://10.9.0.5:2379/, http://10.9.0.6:2379"
    mode, url, s0 = modes.get("flannel-udp"), "http://10.9.0.5:2379", fb.sides[0]
    checked(fb, "flannel-udp")
    mode.check(fb)
    s0.host.expect(f"curl -sS --max-time 2 {url}/health", stdout='{"health":"true"}')
    etcd, daemons = flannel_up(fb, "flannel-udp", url=url)
    dp = mode.deploy(fb, 1472)
    fb.assert_all_used()
    assert etcd is None and dp.info["etcd"] == {"endpoints": url, "started_by_overlaybench": False}
    assert [c for h in fb.hosts for c in h.commands if "etcd" in c or any(a.endswith("/etcd") for a in c)] == []
    s0.host.expect(etcd_request(url, "/v3/kv/deleterange", {"key": "/overlaybench/ob12ab/flannel-udp/network",
                                                            "range_end": "/overlaybench/ob12ab/flannel-udp/networl"}))
    flannel_down(fb, "udp", etcd=False)
    mode.teardown(fb, dp)
    fb.assert_all_used()
    assert all(d.stopped for d in daemons.values())


# ------------------------------------------------------------------ failures

def test_a_flanneld_that_exits_before_its_subnet_file_fails_and_everything_is_removed(fb):
    """h1's flanneld cannot reach etcd: its last line is the error, h0's flanneld and the
    etcd are stopped, and neither host keeps anything (no subnet yet: no address to remove)."""
    (s0, n0), _ = sides(fb)
    etcd, daemons = started(fb, "flannel-vxlan")
    s0.host.expect(f"cat {n0.dir}/flannel-subnet.env", stdout=subnet_env("vxlan", 0))
    daemons[1].exit(1, stderr="I0521 12:00:00.100000 4242 main.go:211] CLI flags config: {...}\n"
                              "E0521 12:00:01.123456 4242 main.go:527] Failed to create SubnetManager: "
                              "context deadline exceeded\n")
    flannel_down(fb, "vxlan", subnets=False, devices=False)
    with pytest.raises(HarnessError, match=r"^h1: flanneld exited \(1\) before writing its subnet file: E0521 "
                                           r"12:00:01.123456 4242 main.go:527\] Failed to create SubnetManager: "
                                           r"context deadline exceeded$"):
        modes.get("flannel-vxlan").deploy(fb, 1450)
    fb.assert_all_used()
    assert etcd.stopped and daemons[0].stopped and not daemons[1].stopped


def test_a_flanneld_that_dies_before_a_ping_crosses_fails_the_deploy(fb):
    """The UDP backend carries the ping inside flanneld: one that dies then is named, not waited for."""
    def lost(argv, input):
        daemons[1].die(11, stderr="panic: runtime error: index out of range [1] with length 1\n")
        return Completed(argv, 1, "1 packets transmitted, 0 received, 100% packet loss\n", "")
    etcd, daemons = flannel_up(fb, "flannel-udp", ping=lost)
    flannel_down(fb, "udp")
    with pytest.raises(HarnessError, match=r"^h1: flanneld exited \(-11\) before carrying a ping: panic: runtime"):
        modes.get("flannel-udp").deploy(fb, 1472)
    fb.assert_all_used()
    assert etcd.stopped and daemons[0].stopped


def test_flanneld_setting_another_mtu_than_expected_fails_and_everything_is_removed(fb):
    etcd, daemons = started(fb, "flannel-vxlan", ("1", "0"))
    subnets_written(fb, "vxlan", mtu=1400)
    flannel_down(fb, "vxlan", ("1", "0"), devices=False)
    with pytest.raises(HarnessError, match=r"^flanneld on h0 set MTU 1400, not the 1450 expected of mode flannel-vxlan "
                                           r"on underlay MTU 1500$"):
        modes.get("flannel-vxlan").deploy(fb, 1450)
    fb.assert_all_used()
    assert etcd.stopped and all(d.stopped for d in daemons.values())


def test_host_gw_takes_no_route_to_the_peer_but_via_its_underlay_address(fb, monkeypatch):
    """A route through the underlay via its default gateway is not flanneld's: past the
    deadline (set to have passed at the first poll) the deploy fails and all is removed."""
    monkeypatch.setattr(flannel, "ROUTE_TIMEOUT", -1.0)
    (s0, n0), _ = sides(fb)
    gw = n0.me.rsplit(".", 1)[0] + ".254"
    etcd, daemons = started(fb, "flannel-host-gw")
    subnets_written(fb, "host-gw")
    s0.host.expect("ip -o route get 198.19.71.1", stdout=f"198.19.71.1 via {gw} dev {n0.ul} src {n0.me} uid 0 \n")
    flannel_down(fb, "host-gw")
    with pytest.raises(HarnessError, match=rf"^h0: flanneld did not route 198.19.71.1/24 \(its peer's subnet\) "
                                           rf"through {n0.ul} within .*\(198.19.71.1 via {gw} dev"):
        modes.get("flannel-host-gw").deploy(fb, 1500)
    fb.assert_all_used()
    assert etcd.stopped and all(d.stopped for d in daemons.values())


def test_a_host_of_another_architecture_is_unsupported_unless_a_flanneld_is_named(fb, monkeypatch):
    other = "aarch64" if platform.machine() != "aarch64" else "x86_64"
    checked(fb, "flannel-udp", (platform.machine(), other))
    modes.get("flannel-udp").check(fb)          # OVERLAYBENCH_FLANNELD names one built for it
    monkeypatch.delenv(flannel_config.ENV_BINARY)
    arch(fb, (platform.machine(), other))
    with pytest.raises(UnsupportedError, match=rf"^mode flannel-udp: unsupported on h1 \({other}\): the flanneld "
                                               rf"shipped is this machine's .*name it in OVERLAYBENCH_FLANNELD$"):
        modes.get("flannel-udp").check(fb)
    fb.assert_all_used()


def test_an_unbuilt_flanneld_says_run_make_setup_before_any_host_is_reached(tb, tmp_path, monkeypatch):
    monkeypatch.delenv(flannel_config.ENV_BINARY, raising=False)
    monkeypatch.setattr(flannel_config, "BINARY", tmp_path / "no-flanneld")
    mode = modes.get("flannel-ipip")
    for call in (mode.local_check, lambda: mode.deploy(tb, 1480)):
        with pytest.raises(HarnessError, match=r"flanneld is not built \(.*no-flanneld missing\): run make setup"):
            call()
    assert all(h.calls == [] for h in tb.hosts)


@pytest.mark.parametrize("name,probe,why", [
    ("flannel-ipip", "ipip remote 198.18.0.254", "RTNETLINK answers: Operation not supported"),
    ("flannel-wireguard", "wireguard", "Error: Unknown device type.")])
def test_a_kernel_without_the_backend_is_unsupported_here(fb, name, probe, why):
    """h0 has it (the probe device removed again), h1 has not."""
    s0, s1 = fb.sides
    s0.host.expect(f"ip link add obflchk type {probe}")
    s0.host.expect("ip link del obflchk")
    s1.host.expect(f"ip link add obflchk type {probe}", returncode=2, stderr=f"{why}\n")
    with pytest.raises(UnsupportedError, match=rf"^mode {name}: kernel {probe.split()[0]} unsupported here on h1 "
                                               rf"\({why.replace('.', '[.]')}\)$"):
        modes.get(name).check(fb)
    fb.assert_all_used()


@pytest.mark.parametrize("name,fit", [("flannel-vxlan", 1450), ("flannel-udp", 1472), ("flannel-host-gw", 1500),
                                      ("flannel-ipip", 1480), ("flannel-wireguard", 1420)])
def test_an_overlay_mtu_other_than_flannels_is_refused(name, fit):
    mode = modes.get(name)
    assert mode.overlay_mtu(1500, "auto") == mode.overlay_mtu(1500, fit) == fit
    for other in (fit - 1, 1400):
        with pytest.raises(HarnessError, match=rf"^mode {name}: flannel sets the overlay MTU itself \({fit} on "
                                               rf"underlay MTU 1500\); ask for \"auto\", not {other}$"):
            mode.overlay_mtu(1500, other)
