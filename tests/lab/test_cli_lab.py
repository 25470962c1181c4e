"""`overlaybench` as a user runs it on the lab: a real run, a missing tool, Ctrl-C and --resume,
a tool dying mid-test, `--format json` (tests/unit/test_cli.py: the rest, without root)."""

import json
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import time

import pytest

from conftest import needs_root
from harness.testbeds import lab_state

ROOT = pathlib.Path(__file__).resolve().parents[2]
FIELDS = ["case", "mode", "datapath", "underlay_mtu", "overlay_mtu", "placement", "test", "streams",
          "repeat", "metric", "value", "unit", "ok", "error"]


def ob(*args, env=None, timeout=300, **kw):
    return subprocess.run([sys.executable, "-m", "harness.cli", *args], cwd=ROOT, capture_output=True,
                          text=True, env=env, timeout=timeout, **kw)


def _one_line_exit_2(p):
    assert p.returncode == 2, (p.returncode, p.stdout, p.stderr)
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, p.stderr
    assert "Traceback" not in p.stderr
    return lines[0]


@needs_root()
@pytest.mark.lab
def test_run_writes_every_field_and_prints_the_table(tmp_path):
    p = ob("run", "--modes", "native,fastdp", "--tests", "iperf3.tcp,qperf.tcp_lat,ping.flood", "--repeats", "1",
           "--duration", "2", "--results", str(tmp_path), "--underlay-mtu", "9000")
    assert p.returncode == 0, p.stderr
    run_dir = pathlib.Path(p.stdout.splitlines()[0])
    assert run_dir.parent == tmp_path
    assert "fastdp" in p.stdout and "8950" in p.stdout and "BW %" in p.stdout
    lines = [json.loads(ln) for ln in (run_dir / "measurements.jsonl").read_text().splitlines()]
    for ln in lines:
        for f in FIELDS:
            assert f in ln, (f, ln)
    ok = [ln for ln in lines if ln["ok"]]
    assert len(ok) == len(lines), [ln for ln in lines if not ln["ok"]]
    by = {(ln["mode"], ln["placement"], ln["test"], ln["metric"]): ln for ln in lines}
    assert by[("fastdp", "container-container", "iperf3.tcp", "throughput_bps")]["value"] > 1e8
    assert by[("fastdp", "container-container", "iperf3.tcp", "throughput_bps")]["datapath"] == "fastdp"
    assert by[("native", "host-host", "qperf.tcp_lat", "latency_us")]["value"] > 0
    assert by[("fastdp", "host-host", "iperf3.tcp", "cpu_total_pct")]["value"] > 0
    assert ("native", "container-container", "iperf3.tcp", "throughput_bps") not in by
    assert {ln["overlay_mtu"] for ln in lines if ln["mode"] == "fastdp"} == {8950}
    meta = json.loads((run_dir / "run.json").read_text())
    assert meta["status"] == "complete" and meta["end"]
    for key in ("git_commit", "machine", "tools", "cpu_accounting", "datapaths", "scenario"):
        assert meta[key], key
    assert meta["tools"]["iperf3"].startswith("3.")
    assert "vx0" in meta["datapaths"][-1]["offloads"]["h0"] or "vx0" in meta["datapaths"][0]["offloads"]["h0"]
    raw = {p.name for p in (run_dir / "raw").iterdir()}
    assert any(n.endswith("iperf3.tcp_p1_r0.client.out") for n in raw)
    show = ob("show", str(run_dir), "--format", "json")
    assert show.returncode == 0 and json.loads(show.stdout)

@needs_root()
def test_missing_iperf3_is_named_with_its_package(tmp_path):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    for tool in ["ip", "tc", "ss", "bridge", "nft", "qperf", "git"]:
        os.symlink(shutil.which(tool), bindir / tool)
    env = dict(os.environ, PATH=str(bindir))
    res = tmp_path / "res"
    line = _one_line_exit_2(ob("run", "--tests", "iperf3.tcp", "--results", str(res), env=env))
    assert line == "overlaybench: iperf3 not found on this machine: apt-get install -y iperf3"
    assert not res.exists()

@needs_root()
@pytest.mark.lab
def test_ctrl_c_mid_run_removes_the_lab_and_keeps_measurements(tmp_path):
    """Timing: waits for the first measured lines with a 300 s deadline (they come after
    seconds), then interrupts the run at once, with most of its nine 1 s cases to come (it
    would take a stall of this test of about ten seconds to miss them): ~0.

    The run gets SIGINT's default action as at a terminal: a test suite started in the
    background by a non-interactive shell (`make test &`) inherits SIGINT ignored, and
    Python then never turns it into KeyboardInterrupt."""
    p = subprocess.Popen([sys.executable, "-m", "harness.cli", "run", "--modes", "native,fastdp", "--tests",
                          "iperf3.tcp", "--repeats", "3", "--duration", "1", "--results", str(tmp_path), "-q"],
                         cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + 300
    jsonl = None
    while time.monotonic() < deadline:
        runs = list(tmp_path.iterdir())
        if runs and (runs[0] / "measurements.jsonl").exists():
            jsonl = runs[0] / "measurements.jsonl"
            if jsonl.read_text().count("\n") >= 2:
                break
        time.sleep(0.2)
    assert jsonl is not None
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 130, err
    assert "interrupted" in err
    kept = jsonl.read_text().splitlines()
    assert len(kept) >= 2 and all(json.loads(ln) for ln in kept)
    meta = json.loads((jsonl.parent / "run.json").read_text())
    assert meta["status"] == "interrupted"
    mine = [pfx for pfx, i in lab_state.leftovers().items() if i["pid"] == p.pid]
    assert mine == []
    # --resume finishes what is missing and no more.
    r = ob("run", "--resume", str(jsonl.parent), "-q", timeout=600)
    assert r.returncode == 0, r.stderr
    recs = [json.loads(ln) for ln in jsonl.read_text().splitlines()]
    keys = [(x["case"], x["repeat"]) for x in recs if x["metric"] in ("throughput_bps", "failed")]
    assert len(keys) == len(set(keys)) == 3 * 3

@needs_root()
@pytest.mark.lab
def test_tool_dying_mid_test_is_a_failed_row_and_the_matrix_goes_on(lab, tmp_path, monkeypatch):
    """Timing: none decides the outcome. The iperf3 server is killed by the runner's own
    thread at its "mid-test" point (the client has just been started and is not yet waited
    for), so the death lands inside that case by construction: ~0."""
    from harness.core import failpoints
    from harness import results
    from harness.run import scenario as S
    from harness.run.runner import Runner
    sc = S.build({"matrix": {"modes": ["native"], "tests": ["iperf3.tcp", "qperf.tcp_lat"], "repeats": 1,
                             "duration": 4}})
    store = results.RunStore.create(tmp_path, {"scenario": sc.to_dict()})
    server_ns = lab.sides[1].host.netns
    killed = []
    real = failpoints.reached

    def server_pids() -> list[int]:
        pids = subprocess.run(["ip", "netns", "pids", server_ns], capture_output=True, text=True).stdout.split()
        found = []
        for pid in pids:
            try:
                if pathlib.Path(f"/proc/{pid}/comm").read_text().strip() == "iperf3":
                    found.append(int(pid))
            except OSError:     # it ended between the listing and the read
                pass
        return found

    def reached(name: str) -> None:
        if name == "mid-test" and not killed:      # the first case's client is started
            killed.extend(server_pids())           # the server listens: the runner waited for it
            for pid in killed:
                os.kill(pid, signal.SIGKILL)
        real(name)

    monkeypatch.setattr(failpoints, "reached", reached)
    Runner(sc, lab, store).run(S.expand(sc))
    assert killed, "the runner reached mid-test with the server running"
    recs = store.records()
    iperf = [r for r in recs if r["test"] == "iperf3.tcp"]
    assert len(iperf) == 1 and iperf[0]["ok"] is False and iperf[0]["metric"] == "failed"
    assert iperf[0]["error"]
    qperf = [r for r in recs if r["test"] == "qperf.tcp_lat" and r["metric"] == "latency_us"]
    assert qperf and qperf[0]["ok"] is True

@needs_root()
@pytest.mark.lab
def test_run_format_json_names_the_run_and_its_summary(tmp_path):
    p = ob("run", "--modes", "native", "--tests", "iperf3.tcp", "--placements", "host-host", "--repeats", "1",
           "--duration", "1", "--results", str(tmp_path), "-q", "--format", "json")
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert pathlib.Path(out["run_dir"]).parent == tmp_path and out["status"] == "complete"
    (row,) = out["summary"]
    assert row["mode"] == "native" and row["tcp_gbps"] > 0.1 and row["udp_gbps"] is None
