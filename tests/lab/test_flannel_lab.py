"""The real Flannel (flanneld, the pinned build; Debian's etcd) measured by the harness on the
lab and over SSH, beside native: every placement carries iperf3, run.json says what ran,
nothing is left, a SIGKILLed run's leftovers go with `down --inventory`, and bad input is
one line.

What could make these fail by chance: only the ordering of flannel-udp below half of
flannel-vxlan host to host. Beside two CPU hogs, 20 repeats in one run put UDP at 0.031-0.067
of VXLAN (tests/README.md): for it to fail, the worst repeat seen would have to move 7.5-fold
for a whole 1 s test; we put its false-failure rate below 1e-9.
The rest assert what was measured and made, never its size.
"""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import subprocess

import pytest

from conftest import needs_root
from harness.modes import flannel_config as flannel
from harness.results import read_records
from test_testbed_ssh import ob, ssh_lab  # noqa: F401  (ssh_lab: the fixture, a lab whose hosts run sshd)

pytestmark = [needs_root(), pytest.mark.lab]

MODES = "native,flannel-vxlan,flannel-udp,flannel-host-gw"
MATRIX = ["--modes", MODES, "--tests", "iperf3.tcp", "--repeats", "1", "--duration", "1", "-q"]
EVERY = ["--placements", "host-host,host-container,container-container"]


def _check_run(run: pathlib.Path) -> dict:
    """Every case measured; run.json names flannel's version, backend, subnets and etcd;
    flanneld's CPU is recorded; the UDP backend is far below VXLAN. The records by key."""
    recs = read_records(run)
    assert recs and all(r["ok"] for r in recs), [r for r in recs if not r["ok"]][:3]
    by = {(r["mode"], r["placement"], r["metric"]): r["value"] for r in recs}
    meta = json.loads((run / "run.json").read_text())
    seen = set()
    for d in meta["datapaths"]:
        if not d["mode"].startswith("flannel-"):
            continue
        seen.add(d["mode"])
        info = d["info"]
        assert info["version"] == "v0.26.7" and info["backend"] == d["mode"].removeprefix("flannel-")
        assert info["etcd"]["endpoints"].endswith(":42379") and info["etcd"]["started_by_overlaybench"]
        assert set(info["subnets"]) == {"0", "1"} and info["subnets"]["0"] != info["subnets"]["1"]
        assert info["flannel_mtu"] == d["overlay_mtu"] == 1500 - {"vxlan": 50, "udp": 28, "host-gw": 0}[info["backend"]]
    assert seen == {"flannel-vxlan", "flannel-udp", "flannel-host-gw"}
    placements = {p for (_, p, _) in by}
    for mode in ("flannel-vxlan", "flannel-udp", "flannel-host-gw"):
        for p in placements:
            assert by[(mode, p, "throughput_bps")] > 0, (mode, p)
            assert (mode, p, "cpu_sleeve_pct") in by, (mode, p)     # flanneld's own CPU
    # The ordering, at least 7.5 times below the bar under load (module docstring).
    assert by[("flannel-udp", "host-host", "throughput_bps")] < 0.5 * by[("flannel-vxlan", "host-host", "throughput_bps")]
    return by


def flannel_leftovers(hosts) -> list[str]:
    """What flannel or its etcd could leave on hosts (namespaces of this machine): a flannel
    device, a route into the flannel network, a flanneld or etcd process."""
    out = []
    for h in hosts:
        links = h.run(["ip", "-o", "link", "show"]).stdout
        out += [f"{h.name}: link {ln.split(': ')[1]}" for ln in links.splitlines() if ": flannel" in ln]
        routes = h.run(["ip", "route", "show", "root", flannel.NETWORK]).stdout.strip()
        out += [f"{h.name}: route {r}" for r in routes.splitlines()]
    for comm in ("flanneld", "etcd"):
        done = subprocess.run(["pgrep", "-x", comm], capture_output=True, text=True)
        out += [f"process {comm} {p}" for p in done.stdout.split()]
    return out


def test_the_real_flannel_carries_iperf3_in_every_placement_on_the_lab(tmp_path):
    p = ob("run", *MATRIX, *EVERY, "--results", str(tmp_path / "results"))
    assert p.returncode == 0, p.stderr[-3000:]
    by = _check_run(pathlib.Path(p.stdout.splitlines()[0]))
    assert {pl for (_, pl, _) in by} == {"host-host", "host-container", "container-container"}
    assert flannel_leftovers([]) == []


def test_the_real_flannel_over_ssh_leaves_nothing(ssh_lab, tmp_path):
    inv = ssh_lab.inventory()
    ssh_lab.bare()
    fwd = [s.host.run(["sysctl", "-n", "net.ipv4.conf.ul0.forwarding"]).stdout.strip() for s in ssh_lab.lab.sides]
    p = ob("run", *MATRIX, *EVERY, "--inventory", inv, "--results", str(tmp_path / "results"), env=ssh_lab.env())
    assert p.returncode == 0, p.stderr[-3000:]
    _check_run(pathlib.Path(p.stdout.splitlines()[0]))
    assert ssh_lab.leftovers() == []
    assert flannel_leftovers([s.host for s in ssh_lab.lab.sides]) == []
    assert [s.host.run(["sysctl", "-n", "net.ipv4.conf.ul0.forwarding"]).stdout.strip()
            for s in ssh_lab.lab.sides] == fwd


@pytest.mark.parametrize("mode", ["flannel-vxlan", "flannel-host-gw"])
def test_a_killed_flannel_run_over_ssh_is_removed_by_down(ssh_lab, tmp_path, mode):
    """SIGKILLed mid-test (the failpoint): flanneld, etcd, the VXLAN device named by the
    prefix, host-gw's routes and the underlay's forwarding as it was all go with `down
    --inventory`; the underlay's forwarding is off beforehand, so host-gw turns it on."""
    inv = ssh_lab.inventory()
    ssh_lab.bare()
    for s in ssh_lab.lab.sides:
        s.host.run(["sysctl", "-q", "-w", "net.ipv4.conf.ul0.forwarding=0"])
    p = ob("run", "--modes", mode, "--tests", "iperf3.tcp", "--placements", "container-container",
           "--repeats", "1", "--duration", "2", "-q", "--inventory", inv, "--results", str(tmp_path / "results"),
           env=dict(ssh_lab.env(), OVERLAYBENCH_FAILPOINT="mid-test"))
    assert p.returncode == -9, (p.returncode, p.stderr[-2000:])
    hosts = [s.host for s in ssh_lab.lab.sides]
    assert flannel_leftovers(hosts) != []                 # the kill left flannel's objects …
    down = ob("down", "--inventory", inv, env=ssh_lab.env())
    assert down.returncode == 0, down.stderr
    assert flannel_leftovers(hosts) == []                 # … and down removed them
    assert ssh_lab.leftovers() == []
    assert [h.run(["sysctl", "-n", "net.ipv4.conf.ul0.forwarding"]).stdout.strip() for h in hosts] == ["0", "0"]


def _path_without(tmp: pathlib.Path, binary: str) -> str:
    """A PATH with every command of this machine's but `binary` (links in one directory)."""
    d = tmp / "bin"
    d.mkdir()
    for src in ("/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin"):
        if not os.path.isdir(src):
            continue
        for name in os.listdir(src):
            if name != binary and not (d / name).exists():
                (d / name).symlink_to(os.path.join(src, name))
    return str(d)


def test_bad_flannel_input_is_one_line_exit_2_and_leaves_nothing(tmp_path):
    res = str(tmp_path / "results")
    cases = {
        "no etcd": (["run", "--modes", "flannel-vxlan", "--results", res],
                    dict(os.environ, PATH=_path_without(tmp_path, "etcd")),
                    "etcd not found on this machine: apt-get install -y etcd-server"),
        "not built": (["run", "--modes", "flannel-udp", "--results", res],
                      dict(os.environ, OVERLAYBENCH_FLANNELD=str(tmp_path / "none")),
                      f"OVERLAYBENCH_FLANNELD={tmp_path / 'none'}: not an executable file"),
        "another MTU": (["run", "--modes", "flannel-vxlan", "--overlay-mtu", "1400", "--results", res], None,
                        "mode flannel-vxlan: flannel sets the overlay MTU itself (1450 on underlay MTU 1500)"),
    }
    for name, (args, env, want) in cases.items():
        p = ob(*args, env=env)
        assert p.returncode == 2, (name, p.stderr)
        lines = p.stderr.strip().splitlines()
        assert len(lines) == 1 and want in lines[0], (name, p.stderr)
    assert flannel_leftovers([]) == []
    inv = tmp_path / "inv.toml"
    inv.write_text('[defaults]\nflannel_network = "198.18.64.0/20"\n[[hosts]]\nname = "a"\naddress = "198.18.0.1"\n'
                   '[[hosts]]\nname = "b"\naddress = "198.18.0.2"\n')
    p = ob("run", "--modes", "flannel-vxlan", "--inventory", str(inv), "--results", res)
    assert p.returncode == 2 and p.stderr.strip() == (
        f"overlaybench: {inv}: [defaults] flannel_network: 198.18.64.0/20: overlaps 198.18.64.0/24, "
        "a range the lab or dockerd uses"), p.stderr
    assert not pathlib.Path(res).exists() or not any(pathlib.Path(res).iterdir())


def test_flanneld_is_the_pinned_build():
    binary = flannel.find_binary()
    assert flannel.version_of(binary) == "v0.26.7"
    assert shutil.which("etcd") and shutil.which("curl")
