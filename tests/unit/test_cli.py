"""`overlaybench` as a user runs it: help, bad input of every kind, show, gate and doctor
without root (tests/lab/test_cli_lab.py: real runs on the lab)."""

import json
import os
import pathlib
import shutil
import subprocess
import sys

import pytest

from harness.testbeds import lab_state

ROOT = pathlib.Path(__file__).resolve().parents[2]


def ob(*args, env=None, timeout=300, **kw):
    return subprocess.run([sys.executable, "-m", "harness.cli", *args], cwd=ROOT, capture_output=True,
                          text=True, env=env, timeout=timeout, **kw)


def _one_line_exit_2(p):
    assert p.returncode == 2, (p.returncode, p.stdout, p.stderr)
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, p.stderr
    assert "Traceback" not in p.stderr
    return lines[0]


def test_help_for_every_command():
    for cmd in ["doctor", "up", "down", "run", "show", "report", "gate", "baseline", "compare", "modes"]:
        p = ob(cmd, "--help")
        assert p.returncode == 0 and "usage: overlaybench " + cmd in p.stdout


@pytest.mark.parametrize("args, needle", [
    (["run", "--modes", "native,vxlan"], "unknown mode 'vxlan'"),
    (["run", "--tests", "iperf3.tpc"], "unknown test 'iperf3.tpc' (did you mean 'iperf3.tcp'?)"),
    (["run", "--modes", "fastdp", "--overlay-mtu", "1480"], "overlay MTU 1480 does not fit mode fastdp on underlay MTU 1500"),
    (["run", "--underlay-mtu", "99999"], "99999 is outside 1280..65535"),
    (["run", "--rate", "lots"], "rate 'lots'"),
    (["run", "/nonexistent.toml"], "/nonexistent.toml: cannot read"),
    (["show", "/nonexistent-run"], "not a run directory"),
    (["run", "--repeats", "x"], "invalid int value"),
])
def test_bad_input_is_one_line_exit_2_and_leaves_nothing(tmp_path, args, needle):
    # Labs whose owner is gone: what a refused command would have left. Live labs belong to
    # runs going on beside the tests (other users of the machine), not to this command.
    def orphans():
        return {pfx for pfx, i in lab_state.leftovers().items() if not i["alive"]}

    before = orphans()
    p = ob(*args, "--results", str(tmp_path)) if args[0] == "run" else ob(*args)
    line = _one_line_exit_2(p) if args[-1] != "x" else p.stderr.strip().splitlines()[-1]
    if args[-1] == "x":
        assert p.returncode == 2
    assert needle in line, line
    assert list(tmp_path.iterdir()) == []
    assert orphans() <= before


def test_misspelled_key_in_scenario_file(tmp_path):
    sc = tmp_path / "s.toml"
    sc.write_text('[matrix]\nmodes = ["native"]\nrepeat = 3\n')
    line = _one_line_exit_2(ob("run", str(sc), "--results", str(tmp_path)))
    assert f"{sc}: [matrix] repeat: unknown key (did you mean 'repeats'?)" in line


def test_not_root_is_refused(tmp_path):
    setpriv = shutil.which("setpriv")
    if os.geteuid() == 0:
        if not setpriv:
            pytest.skip("setpriv (util-linux) not installed")
        os.chmod(tmp_path, 0o777)
        cmd = [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups"]
    else:
        cmd = []
    p = subprocess.run([*cmd, sys.executable, "-m", "harness.cli", "run", "--results", str(tmp_path / "r")],
                       cwd=ROOT, capture_output=True, text=True, timeout=60)
    line = _one_line_exit_2(p)
    assert "needs root" in line
    assert not (tmp_path / "r").exists()


def test_show_into_a_closed_pipe_is_quiet(tmp_path):
    from harness import results
    store = results.RunStore.create(tmp_path, {})
    store.append([results.Measurement(case=f"c{i}", mode="native", datapath="native", underlay_mtu=1500 + i,
                                      overlay_mtu=1500 + i, placement="host-host", test="iperf3.tcp", streams=1,
                                      repeat=0, metric="throughput_bps", value=1e9, unit="bps") for i in range(400)])
    p = subprocess.run(f"{sys.executable} -m harness.cli show {store.path} | head -1", shell=True, cwd=ROOT,
                       capture_output=True, text=True, timeout=60)
    assert p.stdout.startswith("Underlay MTU 1500")
    assert "Traceback" not in p.stderr and "BrokenPipe" not in p.stderr


def test_show_raw_gate_and_doctor_speak_csv_and_json(tmp_path):
    import csv
    import io

    from report_fixtures.synth import make_run
    kw = dict(modes=["native", "fastdp", "sleeve"], underlay_mtus=[1500], tests=["iperf3.tcp", "qperf.tcp_lat"],
              repeats=5)
    base = make_run(tmp_path, **kw)
    run = make_run(tmp_path, seed=3, fail={("sleeve", 1500, "qperf.tcp_lat"): "qperf: timed out"}, **kw)
    lines = (run / "measurements.jsonl").read_text().splitlines()

    p = ob("show", str(run), "--raw")
    assert p.returncode == 0, p.stderr
    rows = list(csv.DictReader(io.StringIO(p.stdout)))
    assert len(rows) == len(lines)                       # every measurement, failed ones included
    assert {"run_id", "case", "repeat", "metric", "value", "ok", "error"} <= set(rows[0])
    failed = [r for r in rows if r["metric"] == "failed"]
    assert sorted(r["repeat"] for r in failed) == ["0", "1", "2", "3", "4"]
    assert {r["error"] for r in failed} == {"qperf: timed out"} and {r["ok"] for r in failed} == {"False"}
    as_json = json.loads(ob("show", str(run), "--raw", "--format", "json").stdout)
    assert len(as_json) == len(lines) and any(r.get("intervals") for r in as_json)

    assert ob("baseline", str(base), "-o", str(tmp_path / "b.json")).returncode == 0
    g = ob("gate", str(run), "--baseline", str(tmp_path / "b.json"), "--format", "json",
           env={**os.environ, "GITHUB_STEP_SUMMARY": ""})
    verdict = json.loads(g.stdout)
    assert g.returncode == 1 and verdict["ok"] is False and verdict["kind"] == "gate"
    by = {c["name"]: c for c in verdict["cases"]}
    assert len(by) == 4 and by["sleeve underlay 1500 overlay 1450 container-container qperf.tcp_lat x1 "
                               "latency_us"]["status"] == "error"
    assert all({"status", "p", "change", "ratio", "baseline_ratio", "tolerance"} <= set(c) for c in by.values())

    d = ob("doctor", "--format", "json")
    doc = json.loads(d.stdout)
    assert d.returncode == (0 if doc["ok"] else 1)
    assert {"iperf3", "sleeve"} <= {c["name"] for c in doc["checks"]}


