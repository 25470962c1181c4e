"""The gate on real runs: a sleeve made overwhelmingly slower is caught, by name."""

import dataclasses
import subprocess
import sys

import pytest

from conftest import needs_root
from harness import modes
from harness.gates import baseline as gate, render
from harness.modes.sleeve import Sleeve
from harness import results
from harness.run import scenario as S
from harness.run.runner import Runner
from harness.testbeds.lab import Lab

pytestmark = [needs_root(), pytest.mark.lab, pytest.mark.slow]


class SlowedSleeve(Sleeve):
    """The regression: `sleeve` as if a change made it spend 5 ms on every frame it reads
    from or writes to its device. That caps it at 200 frames a second each way (100 Mbit/s
    of the largest frames, less with TCP's acks paying it too), whatever the machine does,
    against several Gbit/s for the sleeve as built even beside two CPU hogs: a ratio to
    native under 0.02 where native runs at 5 Gbit/s or more, against 0.28 and above. (The
    earlier regression, the sleeve without its offloads at 0.04–0.08, passed the gate in a
    soak under two hogs: two of its repeats came out of order.)"""
    name = "sleeve"
    flags = ("--calibrate-ns", "5000000")


def _slowed(sc):
    """`sc` with its `sleeve` the slowed one, for this scenario alone."""
    known = modes.Registry([m for m in modes.standard().values() if m.name != "sleeve"] + [SlowedSleeve()])
    return dataclasses.replace(sc, registry=known)


def _run(tmp, sc):
    store = results.RunStore.create(tmp, {"scenario": sc.to_dict(), "machine": {"hostname": "lab"}})
    with Lab.create() as lab:
        Runner(sc, lab, store).run(S.expand(sc))
    return store.path


def test_gate_fails_naming_the_case_that_really_got_slower(tmp_path):
    sc = S.build({"matrix": {"modes": ["native", "sleeve"], "tests": ["iperf3.tcp"],
                             "placements": ["container-container"], "repeats": 4, "duration": 1}})
    good = _run(tmp_path, sc)
    bad = _run(tmp_path, _slowed(sc))

    base_file = tmp_path / "baseline.json"
    gate.save_baseline(gate.make_baseline(good), base_file)
    verdict = gate.evaluate(bad, gate.load_baseline(base_file))
    assert not verdict.ok
    names = [(c.case["mode"], c.case["underlay_mtu"], c.case["metric"]) for c in verdict.failures]
    assert names == [("sleeve", 1500, "throughput_bps")], render.text(verdict)
    assert verdict.failures[0].p is not None and verdict.failures[0].p <= 0.05

    p = subprocess.run([sys.executable, "-m", "harness.cli", "gate", str(bad), "--baseline", str(base_file),
                        "--junit", str(tmp_path / "j.xml"), "--summary", str(tmp_path / "s.md")],
                       capture_output=True, text=True)
    assert p.returncode == 1, p.stdout + p.stderr
    assert "FAIL sleeve at underlay MTU 1500" in p.stdout
    assert "failure" in (tmp_path / "j.xml").read_text() and "Regressions" in (tmp_path / "s.md").read_text()
    # The good run against its own baseline passes.
    assert gate.evaluate(good, gate.load_baseline(base_file)).ok
