"""The orchestrator SIGKILLed at any point: nothing measured is lost, `down` removes exactly
what the run made, and `--resume` completes it into one run with no duplicate."""

import json
import os
import pathlib
import subprocess
import sys

import pytest

from conftest import needs_root, stray_processes
from harness.core import failpoints
from harness import results
from harness.testbeds import lab as labmod
from harness.testbeds import lab_state

pytestmark = [needs_root(), pytest.mark.lab]
ROOT = pathlib.Path(__file__).resolve().parents[2]
ARGS = ["run", "--modes", "native,sleeve", "--tests", "iperf3.tcp,qperf.tcp_lat", "--placements", "host-host",
        "--repeats", "1", "--duration", "1", "-q"]
PLANNED = 2 * 2 * 1     # modes × tests × repeats


def ob(*args, env=None, timeout=300):
    return subprocess.run([sys.executable, "-m", "harness.cli", *args], cwd=ROOT, capture_output=True,
                          text=True, env=env, timeout=timeout)


@pytest.fixture
def bystander():
    """A live lab owned by this process: `down` after the kill must leave it alone."""
    with labmod.Lab.create() as lab:
        yield lab


@pytest.mark.parametrize("point", ["deploy", "mid-test:3", "append:4", "run-json:2", "teardown"])
def test_killed_at_any_point_loses_nothing_and_resume_completes(point, tmp_path, bystander):
    assert point.partition(":")[0] in failpoints.POINTS
    env = dict(os.environ, OVERLAYBENCH_FAILPOINT=point)
    p = ob(*ARGS, "--results", str(tmp_path), env=env)
    assert p.returncode == -9, (p.returncode, p.stderr[-2000:])
    run_dir, = tmp_path.iterdir()
    meta = results.read_meta(run_dir)                 # run.json whole: written atomically
    before = results.read_records(run_dir)            # every finished line readable
    # Killed while measuring, no status was written; killed in teardown, all was measured.
    assert meta.get("status") == ("complete" if point == "teardown" else None)
    data = (run_dir / "measurements.jsonl").read_bytes() if before or point.startswith("append") else b""
    if point.startswith("append"):
        assert not data.endswith(b"\n"), "the kill came mid-line: a torn last line"
        assert len({(r["case"], r["repeat"]) for r in before}) == 4, "three cases whole, one cut short"
    if point.startswith("run-json"):
        assert (run_dir / "run.json.tmp").exists() and "datapaths" in meta
    prefix = meta["testbed"]["prefix"]
    if point != "teardown":
        assert prefix in lab_state.leftovers() and not lab_state.leftovers()[prefix]["alive"]

    d = ob("down")
    assert d.returncode == 0, d.stderr
    info = lab_state.leftovers()
    assert prefix not in info, info.get(prefix)
    assert bystander.prefix in info and info[bystander.prefix]["namespaces"], "down removed a live lab"
    assert not [s for s in stray_processes() if prefix in s]

    r = ob("run", "--resume", str(run_dir), "-q")
    assert r.returncode == 0, r.stderr[-2000:]
    recs = results.read_records(run_dir)
    keys = [(x["case"], x["repeat"], x["metric"]) for x in recs]
    assert len(keys) == len(set(keys)), "a (case, repeat, metric) written twice"
    done = {(x["case"], x["repeat"]) for x in recs if x["ok"]}
    assert len(done) == PLANNED, sorted(done)
    whole = [r for r in before if sum((x["case"], x["repeat"]) == (r["case"], r["repeat"]) for x in before)
             == r["lines"]]
    assert whole
    for rec in whole:            # every whole case from before the kill is still there, unchanged
        assert rec in recs
    assert results.read_meta(run_dir)["status"] == "complete"
    assert json.loads((run_dir / "run.json").read_text())["run_id"] == run_dir.name
