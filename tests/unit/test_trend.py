"""`overlaybench trend`: steps in stored runs' ratios to native, on seeded series and
synthetic run directories with known answers. No chance: every series is seeded, and the
permutation p-values are seeded too."""

from __future__ import annotations

import json

import numpy as np
import pytest
from report_fixtures.synth import make_records

from harness.analysis import changepoint
from harness.cli import main
from harness.gates import trend
from harness.results import Measurement, RunStore


def test_a_step_is_found_where_it_is_and_a_flat_series_has_none():
    rng = np.random.default_rng(3)
    flat = np.exp(rng.normal(0, 0.05, 20))
    stepped = flat * np.where(np.arange(20) >= 12, 0.8, 1.0)
    s, = changepoint.steps(stepped, alpha=0.01)
    assert s.index == 12 and s.p <= 0.01 and s.change == pytest.approx(-0.2, abs=0.05)
    assert changepoint.steps(flat, alpha=0.05) == []
    assert changepoint.pettitt([1.0] * 12) == (changepoint.MIN_SIDE, 1.0)   # all tied: nothing stands out
    assert changepoint.pettitt([1.0] * 5) == (None, 1.0)                    # too short to split


def test_two_steps_are_both_found():
    x = [1.0] * 8 + [0.7] * 8 + [1.1] * 8
    assert [s.index for s in changepoint.steps(x, alpha=0.01)] == [8, 16]


def test_flat_histories_report_a_step_at_most_alpha_of_the_time():
    """2,000 seeded flat series of 12 runs (heavy-tailed, with ties): the rate of any step at
    α 0.05 stays within α plus three standard errors of 2,000 Bernoulli trials."""
    rng = np.random.default_rng(11)
    hits = sum(bool(changepoint.steps(np.round(rng.standard_t(3, 12), 1), alpha=0.05)) for _ in range(2000))
    assert hits / 2000 <= 0.05 + 3 * (0.05 * 0.95 / 2000) ** 0.5


def _history(root, scales, *, machine="bench-01", scenario="quick", compare=None, status="complete", rate=None):
    """One run per entry of `scales` (fastdp's throughput factor in that run), in order."""
    tag = machine[:4] + ("ab" if compare else "") + status[0] + (rate or "")
    for i, scale in enumerate(scales):
        meta = {"scenario": {"name": scenario, "duration": 1, "rate": rate}, "backend": "netns",
                "machine": {"hostname": machine, "cpu": "AMD EPYC"},
                "status": status, **({"compare": compare} if compare else {})}
        store = RunStore.create(root, meta, run_id=f"2026112{i // 10}T{i % 10:02d}0000Z-{tag}")
        store.update_meta(start=f"2026-11-2{i // 10}T{i % 10:02d}:00:00+00:00")
        recs = make_records(modes=("native", "fastdp"), underlay_mtus=(1500,), tests=("iperf3.tcp",),
                            repeats=3, seed=i + 1, scale={"fastdp": scale})
        store.append(Measurement(**{k: v for k, v in r.items() if k != "run_id"}) for r in recs)
        store.unlock()


def test_a_step_for_the_worse_in_stored_runs_fails_and_names_the_run(tmp_path, capsys):
    _history(tmp_path, [1.0] * 7 + [0.7] * 6)
    _history(tmp_path, [0.5] * 13, compare={"rule": {}})          # A/B runs: left out
    _history(tmp_path, [0.5] * 3, status="failed", machine="bench-02")
    assert main(["trend", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert "quick on bench-01 (AMD EPYC), netns backend, 1 s tests: 13 runs" in out and "bench-02" not in out
    line, = [x for x in out.splitlines() if "WORSE" in x]
    assert "fastdp underlay 1500" in line and "from run 20261120T070000Z-bencc" in line and "% of native (-" in line

    assert main(["trend", str(tmp_path), "--format", "json"]) == 1
    d = json.loads(capsys.readouterr().out)
    case, = d["groups"][0]["cases"]
    step, = case["steps"]
    assert not d["ok"] and step["index"] == 7 and step["worse"] and len(case["ratios"]) == 13
    assert step["change"] == pytest.approx(-0.3, abs=0.05)          # the synthetic runs' 2 % noise


def test_a_step_for_the_better_passes_and_a_short_history_says_nothing(tmp_path, capsys):
    _history(tmp_path / "a", [0.7] * 6 + [1.0] * 6)
    assert main(["trend", str(tmp_path / "a")]) == 0
    assert "better fastdp" in capsys.readouterr().out
    _history(tmp_path / "b", [1.0] * 5 + [0.5] * 4)
    assert main(["trend", str(tmp_path / "b")]) == 0
    assert "nothing to say: no case has 10 runs yet" in capsys.readouterr().out


def test_a_history_too_short_for_its_alpha_says_so_rather_than_passing(tmp_path, capsys):
    """At α 0.001 a step needs more runs than 12 can give: the case is not passed as flat."""
    need = changepoint.fewest_points(0.001)
    assert need > 12 and changepoint.fewest_points(0.05) <= trend.MIN_RUNS
    _history(tmp_path, [1.0] * 6 + [0.5] * 6)
    assert main(["trend", str(tmp_path), "--alpha", "0.001"]) == 0
    out = capsys.readouterr().out
    assert f"1 of 1 cases cannot show a step yet: at α = 0.001 shared by 1, a case needs {need} runs" in out
    assert "no step" not in out


def test_machines_and_setups_are_apart_and_a_damaged_run_is_left_out(tmp_path, capsys):
    _history(tmp_path, [1.0] * 6 + [0.7] * 6, machine="alpha")
    _history(tmp_path, [0.7] * 12, machine="gamma")
    _history(tmp_path, [0.5] * 12, machine="alpha", rate="1gbit")        # capped: a history of its own
    groups, warnings = trend.analyse(tmp_path)
    assert [(g.title, [len(c.worse()) for c in g.cases]) for g in groups] == [
        ("quick on alpha (AMD EPYC), netns backend, 1 s tests", [1]),
        ("quick on alpha (AMD EPYC), netns backend, 1 s tests, rate 1gbit", [0]),
        ("quick on gamma (AMD EPYC), netns backend, 1 s tests", [0])]
    (tmp_path / "junk").mkdir()
    (tmp_path / "junk" / "run.json").write_text("{not json")
    torn = next(tmp_path.glob("*gammc")) / "measurements.jsonl"
    torn.write_text('{"case": "x"\n' + torn.read_text())
    groups, warnings = trend.analyse(tmp_path)
    assert any("junk" in w for w in warnings) and any("measurements.jsonl:1" in w for w in warnings)
    assert len(groups[2].runs) == 11
    assert main(["trend", str(tmp_path / "nope")]) == 2
    assert main(["trend", str(tmp_path), "--scenario", "other"]) == 2
    assert main(["trend", str(tmp_path), "--alpha", "2"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 3 and "not a directory of runs" in err[0] and "no complete run of scenario 'other'" in err[1]
