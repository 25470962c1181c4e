"""harness.gates.baseline: baselines of ratios to native, significance before threshold, reports.

The significance rule these tests pin down (see harness/gates/baseline.py): a case fails only when
the one-sided Mann–Whitney U of the run's per-repeat ratios against the baseline's gives
p ≤ 0.05 AND the median ratio moved beyond the tolerance the bad way. 2 repeats against 2
can never reach p ≤ 0.05 (smallest p = 1/6): "not enough repeats", no failure. 2 against
a 5-repeat baseline can (smallest p = 1/21).
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pandas as pd
import pytest
from report_fixtures.synth import make_records, make_run

from harness.core.errors import HarnessError
from harness.core.paths import PROJECT
from harness.gates import baseline as gate, render

META = {"run_id": "base", "hostname": "bench-01", "kernel": "6.18.44", "cpu": {"model": "AMD EPYC 7B13"}}
RUN_META = {**META, "run_id": "now"}
SMALL = dict(modes=["native", "fastdp", "sleeve"], underlay_mtus=[1500, 9000],
             tests=["iperf3.tcp", "qperf.tcp_lat"], placements=("container-container",))


def frame(**kw):
    return pd.DataFrame(make_records(**{**SMALL, **kw}))


def baseline(**kw):
    return gate.baseline_from_frame(frame(**kw), META)


def by_name(verdict):
    return {c.name: c for c in verdict.cases}


FASTDP_1500_TCP = "fastdp underlay 1500 overlay 1450 container-container iperf3.tcp x1 throughput_bps"


def test_baseline_holds_ratios_per_repeat_medians_machine_and_tolerances():
    b = baseline(repeats=5)
    assert b["schema_version"] == gate.BASELINE_SCHEMA_VERSION
    assert b["tolerances"] == {"throughput_bps": 0.10, "latency_us": 0.15, "pps": 0.10, "latency_p99_us": 0.25,
                               "lat_loaded_p99_us": 1.00, "conn_per_s": 0.40, "knee_bps": 0.50,
                               "rtt_p50_us": 0.60, "ndr_pps": 0.25, "pdr_pps": 0.50, "rtt_loaded_p50_us": 0.75,
                               "rtt_loaded_p90_us": 0.15}
    assert b["machine"] == {"hostname": "bench-01", "kernel": "6.18.44", "cpu": "AMD EPYC 7B13"}
    assert {c["mode"] for c in b["cases"]} == {"fastdp", "sleeve"}      # native is never gated
    c = next(c for c in b["cases"] if gate.case_name(c) == FASTDP_1500_TCP)
    assert c["repeats"] == [0, 1, 2, 3, 4] and len(c["ratios"]) == 5
    assert 0.4 < c["median"] < 0.6                                      # fastdp ≈ half of native
    assert len(b["cases"]) == 2 * 2 * 2                                  # modes × MTUs × metrics


def test_aa_same_numbers_pass():
    v = gate.evaluate_frame(frame(repeats=5), RUN_META, baseline(repeats=5))
    assert v.ok, render.text(v)
    assert all(c.status == gate.PASS for c in v.cases)
    assert v.warnings == []


def test_aa_fresh_draw_of_the_same_machine_passes():
    v = gate.evaluate_frame(frame(repeats=5, seed=99), RUN_META, baseline(repeats=5, seed=1))
    assert v.ok, render.text(v)


def test_thirty_percent_drop_with_five_repeats_fails_and_names_the_case():
    v = gate.evaluate_frame(frame(repeats=5, seed=2, scale={"fastdp": 0.7}), RUN_META, baseline(repeats=5))
    assert not v.ok
    names = {c.name for c in v.failures}
    assert names == {FASTDP_1500_TCP, FASTDP_1500_TCP.replace("1500 overlay 1450", "9000 overlay 8950")}
    f = by_name(v)[FASTDP_1500_TCP]
    assert f.status == gate.FAIL and f.change == pytest.approx(-0.30, abs=0.04) and f.p < 0.05
    text = render.text(v)
    assert text.startswith("gate FAILED: 2 of 8 cases regressed")
    assert "fastdp at underlay MTU 1500" in text and "throughput_bps" in text


def test_thirty_percent_drop_with_two_repeats_is_not_enough_to_fail():
    v = gate.evaluate_frame(frame(repeats=2, seed=2, scale={"fastdp": 0.7}), RUN_META, baseline(repeats=2))
    assert v.ok
    c = by_name(v)[FASTDP_1500_TCP]
    assert c.status == gate.NOT_ENOUGH and "cannot reach significance" in c.message
    assert any("too few repeats" in w for w in v.warnings)


def test_two_repeats_against_a_five_repeat_baseline_can_fail():
    v = gate.evaluate_frame(frame(repeats=2, seed=2, scale={"fastdp": 0.7}), RUN_META, baseline(repeats=5))
    assert by_name(v)[FASTDP_1500_TCP].status == gate.FAIL


def test_significant_but_within_tolerance_passes():
    v = gate.evaluate_frame(frame(repeats=5, seed=2, noise=0.002, scale={"fastdp": 0.95}), RUN_META,
                            baseline(repeats=5, noise=0.002))
    c = by_name(v)[FASTDP_1500_TCP]
    assert c.status == gate.PASS and c.p < 0.05 and c.change == pytest.approx(-0.05, abs=0.01)


def test_beyond_tolerance_but_not_significant_passes():
    # Two repeats out of five are fine: the drop is noise, not a shift of the whole sample.
    base = baseline(repeats=5)
    run = frame(repeats=5, seed=1)
    mask = (run["mode"] == "fastdp") & (run["metric"] == "throughput_bps") & run["repeat"].isin([0, 1, 2])
    run.loc[mask, "value"] *= 0.75
    run.loc[(run["mode"] == "fastdp") & (run["metric"] == "throughput_bps") & run["repeat"].isin([3, 4]),
            "value"] *= 1.02
    c = by_name(gate.evaluate_frame(run, RUN_META, base))[FASTDP_1500_TCP]
    assert c.change < -0.10 and c.status == gate.PASS and "not significant" in c.message


def test_latency_is_lower_is_better():
    name = "sleeve underlay 1500 overlay 1450 container-container qperf.tcp_lat x1 latency_us"
    worse = gate.evaluate_frame(frame(repeats=5, seed=3, lat_scale={"sleeve": 1.3}), RUN_META, baseline(repeats=5))
    assert by_name(worse)[name].status == gate.FAIL
    better = gate.evaluate_frame(frame(repeats=5, seed=3, lat_scale={"sleeve": 0.7}), RUN_META, baseline(repeats=5))
    assert better.ok and by_name(better)[name].status == gate.IMPROVED


def test_throughput_gain_is_an_improvement_not_a_failure():
    v = gate.evaluate_frame(frame(repeats=5, seed=2, scale={"fastdp": 1.3}), RUN_META, baseline(repeats=5))
    assert v.ok and by_name(v)[FASTDP_1500_TCP].status == gate.IMPROVED


def test_machine_speed_cancels_out():
    # Everything 40 % slower, native included: ratios to native are unchanged.
    slow = {m: 0.6 for m in SMALL["modes"]}
    v = gate.evaluate_frame(frame(repeats=5, seed=4, scale=slow), RUN_META, baseline(repeats=5))
    assert v.ok, render.text(v)


def test_different_machine_or_kernel_warns():
    v = gate.evaluate_frame(frame(repeats=5), {**RUN_META, "kernel": "6.1.0-28-amd64", "hostname": "ci-runner"},
                            baseline(repeats=5))
    assert v.ok
    assert any("different kernel" in w and "6.1.0-28-amd64" in w for w in v.warnings)
    assert any("different host" in w for w in v.warnings)
    assert "different kernel" in render.markdown(v)
    v = gate.evaluate_frame(frame(repeats=5), RUN_META, baseline(repeats=5))
    assert not any("different" in w for w in v.warnings)


def test_machine_facts_accepts_several_run_json_shapes():
    assert gate.machine_facts({"kernel": {"release": "6.1"}, "cpu": "Xeon", "host": {"hostname": "h"}}) == \
        {"hostname": "h", "kernel": "6.1", "cpu": "Xeon"}
    assert gate.machine_facts({}) == {"hostname": None, "kernel": None, "cpu": None}


def test_a_case_that_failed_outright_fails_the_gate():
    run = frame(repeats=5, fail={("sleeve", 9000, "iperf3.tcp"): "sleeve: TAP device busy"})
    v = gate.evaluate_frame(run, RUN_META, baseline(repeats=5))
    assert [c.status for c in v.failures] == [gate.ERROR]
    assert "TAP device busy" in v.failures[0].message


def test_a_failed_native_reference_fails_the_gate():
    run = frame(repeats=5, fail={("native", 1500, "qperf.tcp_lat"): "qperf: timed out"})
    v = gate.evaluate_frame(run, RUN_META, baseline(repeats=5))
    assert {c.name.split()[0] for c in v.failures} == {"fastdp", "sleeve"}
    assert all("native reference failed" in c.message for c in v.failures)


def test_all_failures_are_collected_in_one_verdict():
    run = frame(repeats=5, seed=2, scale={"fastdp": 0.7}, lat_scale={"sleeve": 1.5})
    v = gate.evaluate_frame(run, RUN_META, baseline(repeats=5))
    assert len(v.failures) == 4
    assert render.text(v).count("FAIL ") == 4


def test_missing_cases_warn_and_new_cases_are_listed():
    run = pd.DataFrame(make_records(**{**SMALL, "underlay_mtus": [1500], "modes": ["native", "fastdp", "auto"]},
                                    repeats=5))
    v = gate.evaluate_frame(run, RUN_META, baseline(repeats=5))
    st = v.counts()
    assert v.ok and st[gate.MISSING] == 6 and st[gate.NEW] == 2 and st[gate.PASS] == 2
    assert any("not measured in this run" in w for w in v.warnings)


def test_nothing_in_common_is_bad_input():
    run = pd.DataFrame(make_records(**{**SMALL, "modes": ["native", "auto"]}, repeats=3))
    with pytest.raises(HarnessError, match="nothing to gate"):
        gate.evaluate_frame(run, RUN_META, baseline(repeats=3))


def test_baseline_of_a_native_only_run_is_bad_input():
    with pytest.raises(HarnessError, match="no gated case"):
        gate.baseline_from_frame(frame(modes=["native"]), META)


def test_junit_and_markdown_name_mode_mtu_and_metric():
    v = gate.evaluate_frame(frame(repeats=5, seed=2, scale={"fastdp": 0.7}), RUN_META, baseline(repeats=5))
    suite = ET.fromstring(render.junit_xml(v).split("\n", 1)[1])
    assert suite.get("tests") == "8" and suite.get("failures") == "2"
    fails = [tc for tc in suite.iter("testcase") if tc.find("failure") is not None]
    assert len(fails) == 2
    msg = fails[0].find("failure").get("message")
    assert "fastdp" in msg and "underlay MTU 1500" in msg and "throughput_bps" in msg
    md = render.markdown(v)
    assert "## overlaybench gate: ❌ failed" in md and "### Regressions" in md
    assert md.count("| ❌ | fastdp |") == 2


def test_save_and_load_round_trip(tmp_path):
    b = baseline(repeats=3)
    p = gate.save_baseline(b, tmp_path / "sub" / "baseline.json")
    assert gate.load_baseline(p) == json.loads(json.dumps(b))


def test_a_baseline_from_before_the_pair_dimension_loads_and_judges(tmp_path):
    """Baselines stored before host pairs have no `pair` in their cases (the committed
    results/baseline.json among them): they load, as cases of runs of one pair, and judge."""
    b = json.loads(json.dumps(baseline(repeats=5)))
    for c in b["cases"]:
        del c["pair"]
    p = tmp_path / "old.json"
    p.write_text(json.dumps(b))
    old = gate.load_baseline(p)
    assert all(c["pair"] is None for c in old["cases"])
    assert gate.evaluate_frame(frame(repeats=5), RUN_META, old).ok
    assert all(c.get("pair", "absent") is None for c in gate.load_baseline(PROJECT / "results" / "baseline.json")["cases"])


@pytest.mark.parametrize("content,match", [
    (None, "baseline file not found"),
    ("{not json", "not valid JSON"),
    ('{"cases": []}', "not an overlaybench baseline"),
    ('{"kind": "overlaybench-baseline", "schema_version": 99}', "schema_version 99"),
    ('{"kind": "overlaybench-baseline", "schema_version": 1, "tolerances": {}, "cases": [{"mode": "x"}]}',
     "cases\\[0\\] lacks"),
])
def test_bad_baseline_files_are_one_clear_line(tmp_path, content, match):
    p = tmp_path / "baseline.json"
    if content is not None:
        p.write_text(content)
    with pytest.raises(HarnessError, match=match) as e:
        gate.load_baseline(p)
    assert "\n" not in str(e.value)


def test_gate_main_and_baseline_main_on_run_directories(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    kw = {**SMALL, "repeats": 5}
    base_run = make_run(tmp_path / "results", **kw)
    good_run = make_run(tmp_path / "results", seed=8, **kw)
    bad_run = make_run(tmp_path / "results", seed=9, scale={"sleeve": 0.6}, **kw)
    out = tmp_path / "baseline.json"
    gate.baseline_main(base_run, out)
    assert "8 gated cases" in capsys.readouterr().out

    assert gate.gate_main(good_run, out) == 0
    assert capsys.readouterr().out.startswith("gate passed")

    junit, summary = tmp_path / "junit.xml", tmp_path / "summary.md"
    assert gate.gate_main(bad_run, out, junit=junit, summary=summary) == 1
    printed = capsys.readouterr().out
    assert printed.startswith("gate FAILED: 2 of 8 cases regressed")
    assert "sleeve at underlay MTU 9000" in printed
    assert ET.parse(junit).getroot().get("failures") == "2"
    assert "### Regressions" in summary.read_text()

    step = tmp_path / "step_summary.md"
    step.write_text("earlier step\n")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(step))
    gate.gate_main(bad_run, out)
    assert step.read_text().startswith("earlier step\n## overlaybench gate")

    with pytest.raises(HarnessError, match="baseline file not found"):
        gate.gate_main(good_run, tmp_path / "nope.json")
