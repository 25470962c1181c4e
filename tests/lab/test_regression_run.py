"""`pytest scenarios/`, the regression run, end to end on a small scenario: it runs the
scenario on the lab, gates every case against the committed baseline and writes the
report. (CI gates merges with `overlaybench compare`; the workflow runs the full trend.)"""

import pathlib
import subprocess
import sys

import pytest

from conftest import needs_root

pytestmark = [needs_root(), pytest.mark.lab]
ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_the_regression_run_gates_a_small_scenario_against_the_baseline(tmp_path):
    sc = tmp_path / "small.toml"
    sc.write_text('[matrix]\nmodes = ["native", "fastdp"]\nunderlay_mtu = [1500]\nplacements = ["host-host"]\n'
                  'tests = ["iperf3.tcp"]\nrepeats = 3\nduration = 3\n')
    p = subprocess.run([sys.executable, "-m", "pytest", "scenarios/", "-q", "-s", "-p", "no:cacheprovider", "--advisory",
                        "--scenario", str(sc), "--repeats", "2", "--duration", "1"],
                       cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-2000:]
    assert "1 passed" in p.stdout, p.stdout[-2000:]
    report = [ln.strip() for ln in p.stdout.splitlines() if ln.strip().startswith("regression run ")]
    assert report, p.stdout[-2000:]
    run_dir = pathlib.Path(report[0].split()[2].rstrip(","))
    html = pathlib.Path(report[0].split("report ")[1])
    try:
        import json
        meta = json.loads((run_dir / "run.json").read_text())
        assert meta["scenario"]["repeats"] == 2 and meta["scenario"]["duration"] == 1
        assert html.exists() and html.stat().st_size > 1000
    finally:
        import shutil
        shutil.rmtree(run_dir, ignore_errors=True)
        html.unlink(missing_ok=True)
