"""Labs of three and four hosts for real: the switch, every pair over fastdp and native, one
after the other, in rounds and as a mesh, the pair in every line, and nothing left behind
(the session's leftover check, conftest.py).

False failures: none by design. Nothing here asserts a measured figure beyond "the test
ran and reported a number"; the pings carry full-size frames with DF set over a path the
lab built for exactly that size.
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import pytest

from conftest import needs_root
from harness import results
from harness.testbeds import lab as labmod
from harness.testbeds import lab_state

pytestmark = [needs_root(), pytest.mark.lab]
ROOT = pathlib.Path(__file__).resolve().parents[2]


def ob(*args, timeout=600, env=None):
    return subprocess.run([sys.executable, "-m", "harness.cli", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=timeout, env=env)


def run_of(tmp_path, *args) -> pathlib.Path:
    """`overlaybench run ARGS` of one repeat of 1 s into tmp_path; its run directory."""
    p = ob("run", *args, "--repeats", "1", "--duration", "1", "--results", str(tmp_path), "-q", "--format", "json")
    assert p.returncode == 0, p.stdout + p.stderr
    return pathlib.Path(json.loads(p.stdout)["run_dir"])


def test_four_hosts_share_a_switch_that_carries_full_frames_between_every_pair():
    with labmod.Lab.create(hosts=4) as lab:
        assert [s.name for s in lab.sides] == ["h0", "h1", "h2", "h3"]
        assert f"{lab.prefix}-sw" in lab_state.leftovers()[lab.prefix]["namespaces"]
        assert len({lab.mgmt_addrs(i) for i in range(4)}) == 4
        lab.set_underlay(9000, "2gbit")
        for a in lab.sides:
            assert "tbf" in a.host.run(["tc", "qdisc", "show", "dev", "ul0"]).stdout
            for b in lab.sides:
                if a is not b:
                    a.host.run(["ping", "-c", "1", "-W", "10", "-M", "do", "-s", str(9000 - 28), b.underlay_ip])
        prefix = lab.prefix
    assert prefix not in lab_state.leftovers()


def test_three_hosts_every_pair_over_fastdp_auto_and_native(tmp_path):
    run = run_of(tmp_path, "--hosts", "3", "--modes", "native,fastdp,auto", "--tests", "ping.flood",
                 "--placements", "host-host,container-container")
    meta = json.loads((run / "run.json").read_text())
    assert meta["testbed"]["hosts"] == 3 and meta["testbed"]["underlay"].startswith("switch")
    df = results.load(run)
    ok = df[df["ok"].astype(bool) & (df["metric"] == "latency_us")]
    want = {"h0→h1", "h0→h2", "h1→h2"}
    got = {(m, pl, pair) for m, pl, pair in ok[["mode", "placement", "pair"]].itertuples(index=False)}
    assert got == {("native", "host-host", x) for x in want} | {
        (m, pl, x) for m in ("fastdp", "auto") for pl in ("host-host", "container-container") for x in want}
    (auto,) = [d for d in meta["datapaths"] if d["mode"] == "auto"]
    assert auto["datapath"] == "fastdp" and auto["info"]["decisions"] == {x: "fastdp: probe passed" for x in want}
    assert set(zip(ok["src_host"], ok["dst_host"], ok["pair"])) == {(x[:2], x[3:], x) for x in want}
    shown = ob("show", str(run))
    assert shown.returncode == 0 and "Pair" in shown.stdout and "h1→h2" in shown.stdout, shown.stdout


def test_four_hosts_a_ring_and_a_star(tmp_path):
    star = results.load(run_of(tmp_path, "--hosts", "4", "--modes", "fastdp", "--tests", "ping.flood",
                               "--placements", "container-container", "--pairs", "star:h3"))
    ok = star[star["ok"].astype(bool) & (star["metric"] == "latency_us")]
    assert sorted(set(ok["pair"])) == ["h3→h0", "h3→h1", "h3→h2"]
    ring = results.load(run_of(tmp_path, "--hosts", "4", "--modes", "native", "--tests", "ping.flood",
                               "--pairs", "ring"))
    assert sorted(set(ring["pair"])) == ["h0→h1", "h1→h2", "h2→h3", "h3→h0"]


@pytest.mark.parametrize("mode", ["sleeve", "sleeve-crypto"])
def test_three_hosts_a_sleeve_sends_each_frame_to_its_peer_alone(tmp_path, mode):
    """h0 to h1 through a sleeve that has h1 and h2 as peers: once the sleeves have learned
    where each container lives, h2 gets next to nothing (without learning it would get
    every frame h1 gets). The keyed daemons agree on one AEAD with each of their peers."""
    run = run_of(tmp_path, "--hosts", "3", "--modes", mode, "--tests", "iperf3.tcp", "--placements",
                 "container-container", "--pairs", "h0-h1")
    (counters,) = list((run / "raw").glob("*iperf3.tcp*.counters.json"))
    rx = {h: c["rx"]["bytes"] for h, c in json.loads(counters.read_text()).items()}
    assert rx["h1"] > 10_000_000 and rx["h2"] < rx["h1"] / 100, rx
    (dp,) = json.loads((run / "run.json").read_text())["datapaths"]
    assert ("cipher" in dp["info"]) is (mode == "sleeve-crypto")
    assert dp["info"].get("cipher", "aes-256-gcm") in ("aes-256-gcm", "chacha20-poly1305"), dp["info"]


def test_three_hosts_wireguard_go_handshakes_with_every_peer(tmp_path):
    run = run_of(tmp_path, "--hosts", "3", "--modes", "wireguard-go", "--tests", "ping.flood", "--placements",
                 "container-container")
    (dp,) = json.loads((run / "run.json").read_text())["datapaths"]
    assert dp["info"]["first_handshake"] is True
    df = results.load(run)
    ok = df[df["ok"].astype(bool) & (df["metric"] == "latency_us")]
    assert sorted(ok["pair"]) == ["h0→h1", "h0→h2", "h1→h2"]


@pytest.mark.parametrize("schedule", ["rounds", "mesh"])
def test_four_hosts_measured_in_rounds_and_as_a_mesh(tmp_path, schedule):
    """Pairs measured at once, each on its own ports: every one of the six pairs has its
    line, and `show` says they shared the fabric (and, for the mesh, the aggregate). The mesh
    run is SIGKILLed while writing its second set's lines, removed by `down` and completed by
    `--resume`: the set cut short is measured again whole, never a part of it alone."""
    args = ["--hosts", "4", "--modes", "native,fastdp,sleeve,sleeve-crypto", "--tests", "iperf3.tcp",
            "--placements", "host-host,container-container", "--schedule", schedule]
    if schedule == "rounds":
        run = run_of(tmp_path, *args)
    else:
        p = ob("run", *args, "--repeats", "1", "--duration", "1", "--results", str(tmp_path), "-q",
               env=dict(os.environ, OVERLAYBENCH_FAILPOINT="append:2"))
        assert p.returncode == -9, p.stderr[-2000:]
        run, = tmp_path.iterdir()
        cut = [r for r in results.read_records(run) if r["mode"] == "fastdp"]
        assert cut and len(cut) < cut[0]["lines"], "the kill came inside the second set's lines"
        assert ob("down").returncode == 0
        r = ob("run", "--resume", str(run), "-q")
        assert r.returncode == 0, r.stderr[-2000:]
        recs = results.read_records(run)
        assert not [x for x in cut if x in recs], "lines of the set cut short were kept"
        again = [x for x in recs if x["mode"] == "fastdp" and x["placement"] == "host-host"]
        assert len({x["case"] for x in again}) == 6 and {x["lines"] for x in again} == {len(again)}
    df = results.load(run)
    tp = df[df["metric"] == "throughput_bps"]
    assert tp["ok"].astype(bool).all() and (tp["value"] > 0).all()
    every = ["h0→h1", "h0→h2", "h0→h3", "h1→h2", "h1→h3", "h2→h3"]
    got = {k: sorted(g["pair"]) for k, g in tp.groupby(["mode", "placement"])}
    assert got == {k: every for k in [("native", "host-host")] + [
        (m, pl) for m in ("fastdp", "sleeve", "sleeve-crypto") for pl in ("host-host", "container-container")]}
    shown = ob("show", str(run)).stdout
    assert f"note: Pairs measured at once shared the fabric (schedule {schedule})" in shown, shown
    assert ("6 pairs at once" in shown) is (schedule == "mesh"), shown


@pytest.mark.parametrize("args, needle", [
    (["--hosts", "9"], "[testbed] lab_hosts: 9"),
    (["--hosts", "3", "--pairs", "h0-h7"], "--pairs: 'h0-h7' names the unknown host 'h7'"),
    (["--hosts", "3", "--pairs", "h1-h1"], "--pairs: 'h1-h1' names host h1 twice"),
    (["--hosts", "3", "--modes", "native,flannel-vxlan"],
     "mode flannel-vxlan runs between two hosts only; this testbed has 3"),
])
def test_bad_host_input_is_one_line_exit_2_and_leaves_nothing(tmp_path, args, needle):
    before = set(lab_state.leftovers())
    p = ob("run", "--tests", "ping.flood", "--repeats", "1", "--duration", "1", "--results", str(tmp_path), *args)
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert p.returncode == 2 and len(lines) == 1 and needle in lines[0], (p.returncode, p.stderr)
    assert set(lab_state.leftovers()) <= before
    assert not any(tmp_path.iterdir())
