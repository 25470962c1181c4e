"""Modes defined by commands, for real: on the lab and over SSH they carry iperf3, a routed
one's daemon is the data path's process (its CPU recorded), and after a SIGKILL of the
orchestrator `overlaybench down` removes what their commands made: the device under the
testbed's names and the daemon `up` started. A testbed fact that spells shell syntax
reaches the program as those bytes through the real SSH transport, with and without sudo.

Two definitions, written as a user would: `byo-vx` is a second kernel VXLAN (VNI 77, UDP
4790, bridged: l2), `byo-l3` the bundled sleeve in --l3 mode started by `up` in the
background with a pid file (routed: l3), as Flannel's UDP backend is built.

What depends on chance: throughput floors of 20 Mbit/s against at least 2.6 Gbit/s
measured for the kernel VXLAN and the sleeve on this machine (50x margin, as
test_fastdp_lab.py); `up` waits up to 20 s for the sleeve's device, which appears within
milliseconds; a ping may take 10 s. Designed false-failure probability < 1e-6 per run.
"""

from __future__ import annotations

import os
import pathlib
import shutil
import signal
import subprocess
import sys
import tempfile

import pytest
from sshd import ssh_world  # noqa: F401 - the fixture
from test_testbed_ssh import SshLab

from conftest import needs_root
from harness.hosts.ssh.host import SshHost
from harness.modes import commands
from harness import results
from harness.run import scenario as S
from harness.sleeve import build as sleeve_build
from harness.testbeds import cpu
from harness.testbeds import lab as labmod
from harness.testbeds import lab_state

pytestmark = [needs_root(), pytest.mark.lab]
ROOT = pathlib.Path(__file__).resolve().parents[2]
FLOOR_BPS = 20e6

DEFINITIONS = """
[modes.byo-vx]
description = "kernel VXLAN, VNI 77 on UDP 4790, by commands"
layer = "l2"
overhead = 50
device = "vx77"
up = [["ip", "link", "add", "${dev}", "type", "vxlan", "id", "77", "dstport", "4790", "local", "${underlay_ip}",
       "remote", "${peer_underlay_ip}", "dev", "${underlay_dev}", "nolearning"]]
down = ["ip link del ${dev}"]

[modes.byo-l3]
description = "the sleeve in --l3 mode, started by up"
layer = "l3"
overhead = 36
device = "bl3"
pid_file = "${workdir}/byo-sleeve.pid"
up = [["sh", "-c", '''
"$1" --dev "$2" --l3 --local "$3:6790" --peer "$4:6790" --mtu "$5" </dev/null >/dev/null 2>&1 &
echo $! > "$6"
i=0; until ip link show "$2" >/dev/null 2>&1; do i=$((i + 1)); [ $i -lt 400 ] || exit 1; sleep 0.05; done
''', "sh", "SLEEVE", "${dev}", "${underlay_ip}", "${peer_underlay_ip}", "${mtu}", "${workdir}/byo-sleeve.pid"]]
down = ['''sh -c '[ -f "$1" ] && kill "$(cat "$1")"; rm -f "$1"' sh ${workdir}/byo-sleeve.pid''']
"""
ARGS = ["--tests", "iperf3.tcp", "--placements", "host-host,container-container", "--repeats", "1",
        "--duration", "1", "-q"]


@pytest.fixture(scope="module")
def scenario_file(tmp_path_factory) -> pathlib.Path:
    """The definitions in a mode file, named by a scenario beside it."""
    d = tmp_path_factory.mktemp("byo")
    os.chmod(d, 0o755)
    (d / "byo-modes.toml").write_text(DEFINITIONS.replace("SLEEVE", str(sleeve_build.build_local())))
    (d / "byo.toml").write_text('[scenario]\nname = "byo"\nmode_files = ["byo-modes.toml"]\n'
                                '[matrix]\nmodes = ["byo-vx", "byo-l3"]\nunderlay_mtu = [1500]\n')
    return d / "byo.toml"


def ob(*args, env=None, timeout=600):
    return subprocess.run([sys.executable, "-m", "harness.cli", *args], cwd=ROOT, capture_output=True, text=True,
                          env=env, timeout=timeout)


def check_run(run_dir: pathlib.Path, devices: dict[str, str]) -> None:
    """Every case measured above the floor, the routed mode's daemon CPU recorded, and the
    devices each deployment read offloads of named as the testbed names them."""
    recs = results.read_records(run_dir)
    assert recs and all(r["ok"] for r in recs), [r for r in recs if not r["ok"]][:3]
    tput = {(r["mode"], r["placement"]): r["value"] for r in recs if r["metric"] == "throughput_bps"}
    assert set(tput) == {(m, p) for m in ("byo-vx", "byo-l3") for p in ("host-host", "container-container")}
    assert all(v > FLOOR_BPS for v in tput.values()), tput
    daemon = [r["value"] for r in recs if r["metric"] == "cpu_sleeve_pct"]
    assert [r["mode"] for r in recs if r["metric"] == "cpu_sleeve_pct"] == ["byo-l3", "byo-l3"] and \
        all(v >= 0 for v in daemon), daemon
    meta = results.read_meta(run_dir)
    assert meta["scenario"]["mode_defs"][0]["name"] == "byo-vx"
    for dp in meta["datapaths"]:
        assert dp["info"]["defined_in"].endswith("byo-modes.toml")
        assert devices[dp["mode"]] in dp["offloads"]["h0"], dp["offloads"]["h0"]


def running(pid: int) -> bool:
    """Alive and not a zombie (a killed daemon stays one until init reaps it)."""
    try:
        return pathlib.Path(f"/proc/{pid}/stat").read_text().rpartition(") ")[2][:1] not in ("Z", "X", "")
    except OSError:
        return False


def daemon_pids(prefix: str) -> list[int]:
    """The pids the routed mode's `up` wrote on both sides (the sides share this file system)."""
    return [int(p.read_text()) for p in sorted(pathlib.Path("/run/overlaybench", prefix).glob("h*/byo-sleeve.pid"))]


# ------------------------------------------------------------------ the lab

def test_the_lab_deploys_what_the_commands_say_and_teardown_removes_it(scenario_file):
    """The shipped example's VXLAN (scenarios/bring-your-own.toml) and the routed sleeve."""
    vx = S.load(ROOT / "scenarios" / "bring-your-own.toml").mode("vxlan77")
    l3 = S.load(scenario_file).mode("byo-l3")
    with labmod.Lab.create() as lab:
        h0, c0 = lab.sides[0].host, lab.sides[0].container
        dp = vx.deploy(lab, 1450)
        try:
            link = h0.run(["ip", "-d", "link", "show", "vx77"]).stdout
            assert "vxlan id 77 " in link and "dstport 4790 " in link and "master br0" in link and "mtu 1450" in link
            assert c0.run(["ping", "-c", "1", "-W", "10", "198.18.64.12"], check=False).ok
        finally:
            vx.teardown(lab, dp)
        assert not h0.run(["ip", "link", "show", "vx77"], check=False).ok
        assert "mtu 1500" in h0.run(["ip", "link", "show", "br0"]).stdout

        dp = l3.deploy(lab, 1464)
        try:
            pids = {i: p.pid for i, p in dp.processes.items()}
            assert sorted(pids) == [0, 1] and all(running(p) for p in pids.values())
            assert all(cpu.process_seconds(lab.sides[i].host, p) is not None for i, p in pids.items())
            assert "198.18.64.12 dev bl3" in h0.run(["ip", "route", "show", "198.18.64.12"]).stdout
            assert c0.run(["ping", "-c", "1", "-W", "10", "198.18.64.12"], check=False).ok
        finally:
            l3.teardown(lab, dp)
        assert not any(running(p) for p in pids.values())
        assert not h0.run(["ip", "link", "show", "bl3"], check=False).ok


def test_command_modes_carry_iperf3_on_the_lab(scenario_file, tmp_path):
    p = ob("run", str(scenario_file), *ARGS, "--results", str(tmp_path))
    assert p.returncode == 0, p.stderr[-3000:]
    check_run(pathlib.Path(p.stdout.splitlines()[0]), {"byo-vx": "vx77", "byo-l3": "bl3"})


def test_after_a_sigkill_down_removes_the_lab_with_the_daemon_and_resume_defines_the_modes_again(
        scenario_file, tmp_path):
    p = ob("run", str(scenario_file), "--modes", "byo-l3", *ARGS, "--results", str(tmp_path),
           env=dict(os.environ, OVERLAYBENCH_FAILPOINT="mid-test"))
    assert p.returncode == -signal.SIGKILL, p.stderr[-2000:]
    run_dir, = tmp_path.iterdir()
    prefix = results.read_meta(run_dir)["testbed"]["prefix"]
    pids = daemon_pids(prefix)
    assert len(pids) == 2 and all(running(x) for x in pids), pids
    d = ob("down")
    assert d.returncode == 0, d.stderr
    assert prefix not in lab_state.leftovers() and not any(running(x) for x in pids)
    r = ob("run", "--resume", str(run_dir), "-q")
    assert r.returncode == 0, r.stderr[-2000:]
    assert {(x["placement"], x["ok"]) for x in results.read_records(run_dir) if x["metric"] == "throughput_bps"} == \
        {("host-host", True), ("container-container", True)}


# ------------------------------------------------------------------ over SSH

@pytest.fixture
def ssh_lab():
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="obsshlab-"))
    sl = SshLab(tmp)
    try:
        sl.bare()
        yield sl
    finally:
        sl.close()
        shutil.rmtree(tmp, ignore_errors=True)


def test_command_modes_carry_iperf3_over_ssh_and_leave_nothing(ssh_lab, scenario_file, tmp_path):
    p = ob("run", str(scenario_file), *ARGS, "--inventory", ssh_lab.inventory(), "--results", str(tmp_path),
           env=ssh_lab.env())
    assert p.returncode == 0, p.stderr[-3000:]
    run_dir = pathlib.Path(p.stdout.splitlines()[0])
    prefix = results.read_meta(run_dir)["testbed"]["prefix"]
    check_run(run_dir, {"byo-vx": f"{prefix}-vx77", "byo-l3": f"{prefix}-bl3"})
    assert ssh_lab.leftovers() == []


@pytest.mark.parametrize("mode, dev", [("byo-vx", "vx77"), ("byo-l3", "bl3")])
def test_after_a_sigkill_down_removes_what_the_commands_made_over_ssh(ssh_lab, scenario_file, tmp_path, mode, dev):
    """The device carries the testbed's prefix, and the daemon `up` started in the
    background its mark (the host runs every command with it): `down --inventory` finds
    both. (The sleeve's TUN device goes with the sleeve.)"""
    inv = ssh_lab.inventory()
    p = ob("run", str(scenario_file), "--modes", mode, *ARGS, "--inventory", inv, "--results", str(tmp_path),
           env=dict(ssh_lab.env(), OVERLAYBENCH_FAILPOINT="mid-test"))
    assert p.returncode == -signal.SIGKILL, p.stderr[-2000:]
    run_dir, = tmp_path.iterdir()
    prefix = results.read_meta(run_dir)["testbed"]["prefix"]
    pids = daemon_pids(prefix)
    assert len(pids) == (2 if mode == "byo-l3" else 0) and all(running(x) for x in pids), pids
    for x in pids:
        assert f"OVERLAYBENCH_PREFIX={prefix}".encode() in pathlib.Path(f"/proc/{x}/environ").read_bytes().split(b"\0")
    for s in ssh_lab.lab.sides:
        assert s.host.run(["ip", "link", "show", f"{prefix}-{dev}"], check=False).ok
    d = ob("down", "--inventory", inv, env=ssh_lab.env())
    assert d.returncode == 0, d.stderr
    if mode == "byo-vx":
        assert f"h0: link {prefix}-vx77" in d.stdout and f"h1: link {prefix}-vx77" in d.stdout, d.stdout
    assert not any(running(x) for x in pids)
    assert ssh_lab.leftovers() == []


@pytest.mark.parametrize("who", ["root", "sudo"])
def test_a_value_cannot_become_shell_syntax_over_ssh(ssh_world, tmp_path, who):  # noqa: F811 - the fixture
    target = ssh_world.root if who == "root" else ssh_world.sudo
    host = SshHost(target.settings())
    try:
        template = commands.parse_command(
            ["sh", "-c", 'printf "%s|" "$1"; printf "%s|" "$@"', "sh", "${workdir}", "pre${workdir}post"], "up #1")
        for raw in ("x; touch {d}/pwned", "$(touch {d}/pwned)", "`touch {d}/pwned`", "'; touch {d}/pwned; '",
                    "a\ntouch {d}/pwned", "* {d}/*", "$HOME $$ ${{dev}}"):
            value = raw.format(d=tmp_path)
            argv = commands.expand(template, {**dict.fromkeys(commands.VARIABLES, "?"), "workdir": value})
            assert host.run(argv).stdout == f"{value}|{value}|pre{value}post|", value
        assert not (tmp_path / "pwned").exists()
    finally:
        host.close()
