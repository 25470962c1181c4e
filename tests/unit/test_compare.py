"""harness.gates.compare's judgement on synthetic A/B runs: pairs by repeat, judged sequentially.

Each synthetic repeat has a machine speed that drifts a lot between repeats (as this
shared machine does) and hits both arms of that repeat alike, plus a little noise per
measurement. Pairing cancels the drift; the tests pin down what is caught and what not,
and after how many pairs (the rule's own arithmetic is tests/unit/test_sequential.py's).
"""

from __future__ import annotations

import json
import math
import os
import random
import subprocess
import sys

import pandas as pd
import pytest

from harness.core.errors import HarnessError
from harness.core.paths import PROJECT
from harness.gates import baseline as gate, compare, render, verdict
from harness.results import Measurement, RunStore
from harness.run import ab


def compare_main(**request) -> int:
    """`overlaybench compare` as its command runs it: one request, judged by the A/B gate."""
    return ab.compare(ab.Request(**request), compare.Gate())

CASE_TP = "sleeve underlay 1500 overlay 1450 container-container iperf3.tcp x1 throughput_bps"
CASE_LAT = "sleeve underlay 1500 overlay 1450 container-container qperf.tcp_lat x1 latency_us"


def rows(repeats=24, head=1.0, head_lat=1.0, seed=1, drift=0.25, noise=0.01, fail=None, modes=("sleeve",)):
    """Lines of an A/B run: MODE@base and MODE@head, iperf3.tcp and qperf.tcp_lat per repeat.
    head / head_lat scale the head arm's throughput / latency; fail = {(arm, repeat): reason}."""
    rng = random.Random(seed)
    out = []
    for r in range(repeats):
        speed = math.exp(rng.gauss(0, drift))
        for mode in modes:
            for arm, (tp, lat) in (("base", (1.0, 1.0)), ("head", (head, head_lat))):
                m = f"{mode}@{arm}"
                common = dict(mode=m, datapath="sleeve", underlay_mtu=1500, overlay_mtu=1450,
                              placement="container-container", streams=1, repeat=r, run_id="ab")
                if (arm, r) in (fail or {}):
                    out.append(dict(common, case=f"{m}/iperf3", test="iperf3.tcp", metric="failed",
                                    value=None, unit="", ok=False, error=fail[(arm, r)]))
                else:
                    out.append(dict(common, case=f"{m}/iperf3", test="iperf3.tcp", metric="throughput_bps",
                                    value=4e9 * speed * tp * math.exp(rng.gauss(0, noise)), unit="bps", ok=True))
                out.append(dict(common, case=f"{m}/qperf", test="qperf.tcp_lat", metric="latency_us",
                                value=50 / speed * lat * math.exp(rng.gauss(0, noise)), unit="us", ok=True))
    return pd.DataFrame(out)


def by_name(v):
    return {c.name: c for c in v.cases}


def test_an_unchanged_pair_passes_however_much_the_machine_drifts():
    v = compare.judge_frame(rows(drift=0.4), {"run_id": "ab"})
    assert v.ok and v.status == verdict.PASS and v.kind == verdict.AB, render.text(v)
    assert set(by_name(v)) == {CASE_TP, CASE_LAT}
    assert all(abs(c.change) < 0.05 and c.pairs_used == 14 for c in v.cases)   # 7 blocks: evidence 31.9 ≥ 20
    assert all("not slower" in c.message for c in v.cases)


def test_a_fifteen_percent_slower_head_fails_after_eighteen_pairs_and_names_the_case():
    v = compare.judge_frame(rows(head=0.85), {"run_id": "ab"})
    assert not v.ok and v.status == verdict.FAIL
    (f,) = v.failures
    assert f.name == CASE_TP and f.status == gate.FAIL
    assert f.change == pytest.approx(-0.15, abs=0.02)
    assert f.pairs_used == 18 and f.n_current == 24      # 9 blocks all slower: 1023/10 ≥ 2/(0.05/2)
    assert f.p == pytest.approx(20 / 1023)
    assert "head" in f.message and "Gbit/s" in f.message and "over 18 pairs: slower (evidence" in f.message
    assert render.text(v).startswith("compare FAILED: 1 of 2 cases regressed")


def test_within_tolerance_passes_as_not_slower():
    v = compare.judge_frame(rows(head=0.97), {})
    assert v.ok
    tp = by_name(v)[CASE_TP]
    assert tp.status == verdict.PASS and tp.pairs_used == 14 and tp.change == pytest.approx(-0.03, abs=0.01)


def test_latency_is_lower_is_better():
    v = compare.judge_frame(rows(head_lat=1.3), {})
    assert [c.name for c in v.failures] == [CASE_LAT]
    faster = compare.judge_frame(rows(head_lat=0.7), {})
    assert faster.ok and by_name(faster)[CASE_LAT].status == verdict.IMPROVED    # 12 blocks of 12 faster
    assert "not slower" in by_name(faster)[CASE_LAT].message and "faster (evidence 630)" in by_name(faster)[CASE_LAT].message


def budget(n):
    return {"scenario": {"repeats": n}}


def test_twelve_pairs_cannot_fail_fourteen_can():
    """Too few pairs to fail is "undecided", exit 4, never a pass: a 50 % slowdown over a
    budget of 12 pairs. 14 fail by the closing test (2^−7 ≤ α/2); without a budget the
    mixture alone needs 18."""
    few = compare.judge_frame(rows(repeats=12, head=0.5), budget(12))
    assert few.ok and few.status == verdict.UNDECIDED and by_name(few)[CASE_TP].status == verdict.UNDECIDED
    assert "12 pairs (6 blocks of two) could never show it slower at α = 0.025: 14 pairs can" in \
        by_name(few)[CASE_TP].message
    assert any("run at least 14 repeats" in w for w in few.warnings)
    missing = rows(repeats=14, head=0.5)
    missing = missing[~((missing["repeat"] == 3) & (missing["mode"] == "sleeve@head"))]   # block 1 broken
    assert by_name(compare.judge_frame(missing, budget(14)))[CASE_TP].status == verdict.UNDECIDED
    enough = compare.judge_frame(rows(repeats=14, head=0.5), budget(14))
    assert [c.name for c in enough.failures] == [CASE_TP] and enough.failures[0].p == pytest.approx(2 / 2 ** 7)
    assert "slower by the closing test at the end of the budget" in enough.failures[0].message
    unbudgeted = compare.judge_frame(rows(repeats=16, head=0.5), {})
    assert "16 pairs (8 blocks of two) could never show it slower at α = 0.025: 18 pairs can" in \
        by_name(unbudgeted)[CASE_TP].message


def test_pairs_that_never_settle_are_undecided_exit_4(tmp_path, capsys, monkeypatch):
    """Head 8 % slower on throughput, the tolerance itself, with noise as large as the
    effect: the first 24 pairs decide neither way (fixed seed)."""
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    df = rows(head=0.92, noise=0.08, seed=3)
    v = compare.judge_frame(df, {})
    assert v.ok and v.status == verdict.UNDECIDED, render.text(v)
    tp = by_name(v)[CASE_TP]
    assert tp.status == verdict.UNDECIDED and tp.pairs_used == 24 and not tp.failed
    assert render.text(v).startswith("compare undecided: no case slower, 1 of 2 cases undecided")
    store = RunStore.create(tmp_path, {"scenario": {}})
    store.append(Measurement(**{k: x for k, x in r.items() if k != "run_id"}) for r in df.to_dict("records"))
    assert compare_main(run=str(store.path), fmt="json", summary=str(tmp_path / "s.md")) == 4
    out = json.loads(capsys.readouterr().out)
    assert out["ok"] is True and out["status"] == "undecided"
    assert "❔ undecided" in (tmp_path / "s.md").read_text()


def test_alpha_and_tolerances_are_the_callers():
    df = rows(head=0.85)
    assert compare.judge_frame(df, {}, tolerances={"throughput_bps": 0.2, "latency_us": 0.15}).ok
    assert not compare.judge_frame(df, {}, alpha=0.01).ok        # 0.005 a case: 2/α = 400, 12 blocks, 24 pairs
    assert compare.judge_frame(df, {}, alpha=0.001).failures == []   # 0.0005 a case: 30 pairs needed


def test_alpha_is_shared_by_the_cases_the_run_planned_not_those_measured_so_far():
    """A run stopped early at its first underlay and judged at the end split α alike: the
    count comes from run.json's configs_planned (here 2 underlays × 2 tests = 4 cases)."""
    planned = [[f"sleeve@{arm}", u, u - 50, "container-container", t, 1] for u in (1500, 9000)
               for t in ("iperf3.tcp", "qperf.tcp_lat") for arm in ("base", "head")]
    df = rows(repeats=18, head=0.5)
    alone = compare.judge_frame(df, {})                             # 2 cases found: α/2, 18 pairs fail
    shared = compare.judge_frame(df, {"configs_planned": planned})   # 4 planned: α/4, 20 pairs needed
    assert by_name(alone)[CASE_TP].status == verdict.FAIL
    assert by_name(shared)[CASE_TP].status == verdict.UNDECIDED and "20 pairs can" in by_name(shared)[CASE_TP].message
    assert not compare.decided(df, meta={"configs_planned": planned})
    assert compare.decided(rows(repeats=20, head=0.5, head_lat=2.0), meta={"configs_planned": planned})


def test_the_stop_rule_reads_the_run_and_its_plan(tmp_path):
    df = rows(repeats=18, head=0.5, head_lat=2.0)
    store = RunStore.create(tmp_path, {"scenario": {}, "configs_planned": [
        [f"sleeve@{arm}", 1500, 1450, "container-container", t, 1] for t in ("iperf3.tcp", "qperf.tcp_lat")
        for arm in ("base", "head")]})
    store.append(Measurement(**{k: x for k, x in r.items() if k != "run_id"}) for r in df.to_dict("records"))
    until = compare.stop_rule()
    assert until(store.path, 1500) is True and until(store.path, 9000) is False   # nothing at 9000 yet


def test_compare_run_judges_by_the_rule_the_run_recorded(tmp_path, capsys):
    """run.json's compare.rule (what `compare` measured and stopped under) is --run's default;
    flags given still win."""
    df = rows(repeats=18, head=0.5)
    store = RunStore.create(tmp_path, {"scenario": {}, "compare": {"rule": {"alpha": 0.001, "beta": 0.05,
                                                                            "tolerances": {"throughput_bps": 0.3}}}})
    store.append(Measurement(**{k: x for k, x in r.items() if k != "run_id"}) for r in df.to_dict("records"))
    assert compare_main(run=str(store.path), fmt="json") == 4           # 18 pairs cannot decide at 0.001
    out = json.loads(capsys.readouterr().out)
    assert out["alpha"] == 0.001 and [c["tolerance"] for c in out["cases"]] == [0.3]
    assert compare_main(run=str(store.path), alpha=0.05, tolerances={"throughput_bps": 0.1}) == 1
    capsys.readouterr()
    # a tolerance given goes over the recorded ones, not over the defaults
    assert compare_main(run=str(store.path), alpha=0.05, fmt="json", tolerances={"latency_us": 0.2}) == 1
    assert [c["tolerance"] for c in json.loads(capsys.readouterr().out)["cases"]] == [0.3, 0.2]


def test_a_planned_case_never_measured_is_undecided_not_missing(tmp_path):
    """An interrupted run: both underlays planned, only 1500 measured; `judge` (what
    `compare --run` calls) reports 9000's cases as undecided, never a pass."""
    planned = [[f"sleeve@{arm}", u, u - 50, "container-container", t, 1] for u in (1500, 9000)
               for t in ("iperf3.tcp", "qperf.tcp_lat") for arm in ("base", "head")]
    store = RunStore.create(tmp_path, {"scenario": {}, "configs_planned": planned, "status": "interrupted"})
    store.append(Measurement(**{k: x for k, x in r.items() if k != "run_id"})
                 for r in rows(repeats=20).to_dict("records"))
    v = compare.judge(store.path)
    assert v.status == verdict.UNDECIDED and len(v.cases) == 4
    late = [c for c in v.cases if c.case["underlay_mtu"] == 9000]
    assert [c.status for c in late] == [verdict.UNDECIDED] * 2 and "not measured (the run is interrupted)" in late[0].message


def test_a_budget_too_small_to_show_a_slowdown_is_refused_before_anything_is_built():
    from harness.run import scenario as S

    def check_budget(sc, alpha, tolerances):
        ab.check_budget(sc, alpha, tolerances, compare.Gate())

    m = {"modes": ["sleeve"], "tests": ["iperf3.tcp", "qperf.tcp_lat"], "placements": ["container-container"]}
    with pytest.raises(HarnessError, match=r"^--repeats 13: too few pairs to ever show a case slower at α 0.05 "
                                           r"over 2 cases; at least 14$"):
        check_budget(S.build({"matrix": {**m, "repeats": 13}}), 0.05, compare.AB_TOLERANCES)
    check_budget(S.build({"matrix": {**m, "repeats": 14}}), 0.05, compare.AB_TOLERANCES)
    check_budget(S.build({"matrix": {**m, "repeats": 36}}), 0.0002, compare.AB_TOLERANCES)    # .ci/run's
    with pytest.raises(HarnessError, match=r"--repeats 30: .* over 6 cases; at least 32"):
        check_budget(S.build({"matrix": {**m, "repeats": 30, "underlay_mtu": [1500, 9000, 4000]}}), 0.0002,
                     compare.AB_TOLERANCES)


def test_decided_says_when_more_pairs_would_change_nothing():
    """What `compare` stops measuring on: every case settled, not before."""
    aa = rows()
    assert not compare.decided(aa[aa["repeat"] < 12], 0.05) and compare.decided(aa[aa["repeat"] < 14], 0.05)
    slow = rows(head=0.5, head_lat=2.0)
    assert not compare.decided(slow[slow["repeat"] < 17], 0.05) and compare.decided(slow[slow["repeat"] < 18])
    broken = rows(fail={("head", 0): "sleeve exited"})
    assert compare.decided(broken[broken["repeat"] < 14])        # the failed case is decided as it is
    assert not compare.decided(aa.iloc[0:0])


def test_a_head_that_failed_fails_the_gate_a_base_failure_warns():
    v = compare.judge_frame(rows(fail={("head", 3): "sleeve exited before ready"}), {})
    (f,) = v.failures
    assert f.status == verdict.ERROR and f.name == CASE_TP and "repeat 3: sleeve exited" in f.message
    w = compare.judge_frame(rows(fail={("base", 2): "iperf3: timeout"}), {})
    assert w.ok and any("base arm" in x and "iperf3: timeout" in x and "None" not in x for x in w.warnings)
    assert by_name(w)[CASE_TP].n_current == 23


def test_every_mode_is_judged_on_its_own_pairs():
    v = compare.judge_frame(rows(modes=("sleeve", "sleeve-crypto")), {})
    assert len(v.cases) == 4 and v.ok
    assert {c.case["mode"] for c in v.cases} == {"sleeve", "sleeve-crypto"}


def test_each_host_pair_is_judged_on_its_own_pairs_and_named():
    """An A/B run over two host pairs where head is slower on one of them only: that host
    pair's case fails, named with its hosts; the other passes."""
    two = []
    for hosts, head, seed in (("h0→h1", 1.0, 1), ("h0→h2", 0.8, 2)):
        a, b = hosts.split("→")
        two.append(rows(head=head, seed=seed).assign(pair=hosts, src_host=a, dst_host=b,
                                                     case=lambda d, s=f"/{a}-{b}": d["case"] + s))
    v = compare.judge_frame(pd.concat(two, ignore_index=True), {})
    assert [(c.case["pair"], c.case["metric"]) for c in v.failures] == [("h0→h2", "throughput_bps")]
    assert {c.name for c in v.cases} >= {CASE_TP + " h0→h1", CASE_TP + " h0→h2"} and len(v.cases) == 4


def test_a_run_without_arms_is_bad_input():
    plain = rows().assign(mode="sleeve")
    with pytest.raises(HarnessError, match="not an A/B run"):
        compare.judge_frame(plain, {"run_id": "x"})


def test_outputs_say_head_against_base(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    store = RunStore.create(tmp_path, {"scenario": {}, "compare": {
        "base": {"origin": "main (a1b2c3d4e5f6)", "flags": []},
        "head": {"origin": "working tree of /repo", "flags": ["--calibrate-ns", "5000"]}}})
    store.append(Measurement(**{k: v for k, v in r.items() if k not in ("run_id",)})
                 for r in rows(head=0.8).to_dict("records"))
    v = compare.judge(store.path)
    md = render.markdown(v)
    assert "## overlaybench compare: ❌ failed" in md and "| Base | Head |" in md
    assert "main (a1b2c3d4e5f6)" in md and "--calibrate-ns 5000" in md and "SPRT" in md and "| Pairs |" in md
    d = render.as_dict(v)
    assert d["kind"] == "compare" and d["ok"] is False and d["status"] == "fail"
    tp = next(c for c in d["cases"] if c["metric"] == "throughput_bps")
    assert tp["failed"] and tp["n_base"] == tp["n_head"] == 24 and tp["pairs_used"] == 18 and tp["head"] < tp["base"]

    assert compare_main(run=str(store.path), fmt="json", junit=str(tmp_path / "j.xml")) == 1
    out = json.loads(capsys.readouterr().out)
    assert out["run_dir"] == str(store.path) and [c["status"] for c in out["cases"]] == ["fail", "pass"]
    assert 'name="overlaybench.compare"' in (tmp_path / "j.xml").read_text()


@pytest.mark.parametrize("args, match", [
    (dict(base=None), "needs --base REF"),
    (dict(base="main", run="x"), "--run judges a finished A/B run"),
    (dict(base="-x"), "not a git ref"),
    (dict(base="main", inject_ns=0), "--inject-ns 0"),
    (dict(base="main", alpha=1.5), "--alpha 1.5"),
])
def test_bad_arguments_are_one_clear_line(args, match):
    with pytest.raises(HarnessError, match=match):
        compare_main(**args)


def test_tolerances_parse_over_the_defaults():
    assert compare.parse_tolerances(["throughput_bps=0.05"]) == {**compare.AB_TOLERANCES, "throughput_bps": 0.05}
    assert compare.AB_TOLERANCES["throughput_bps"] == 0.08
    for bad in ("throughput_bps", "cpu=0.1", "latency_us=1.5", "latency_us=x", "pps=0"):
        with pytest.raises(HarnessError, match="METRIC=FRACTION"):
            compare.parse_tolerances([bad])


RECORDED = PROJECT / "tests" / "data" / "compare"


def test_compare_judges_recorded_runs(tmp_path):
    """`compare --run` on two committed A/B runs recorded on the lab while other test runs
    shared the machine (tests/data/compare, README there): an unchanged pair, its pairs
    swinging by ±50 %, stays undecided over its 16 pairs, exit 4; a head arm slowed by
    --inject-ns fails after 16 pairs, exit 1, naming its throughput case. The data are
    fixed, so the verdicts are too: no chance in it."""
    env = {**os.environ, "PYTHONPATH": str(PROJECT)}

    def judge(name, *args):
        return subprocess.run([sys.executable, "-m", "harness.cli", "compare", "--run", str(RECORDED / name),
                               *args], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)

    aa = judge("aa", "--format", "json")
    assert aa.returncode == 4, aa.stdout + aa.stderr
    out = json.loads(aa.stdout)
    assert out["ok"] is True and out["status"] == "undecided" and len(out["cases"]) == 2
    assert {c["metric"] for c in out["cases"]} == {"throughput_bps", "latency_us"}
    assert all(c["n_base"] == c["n_head"] == c["pairs_used"] == 16 and c["status"] == "undecided"
               for c in out["cases"])

    slow = judge("slowed", "--junit", str(tmp_path / "j.xml"))
    assert slow.returncode == 1, slow.stdout + slow.stderr
    fail = [line for line in slow.stdout.splitlines() if line.startswith("  FAIL ")]
    assert any("iperf3.tcp x1, throughput_bps" in line and "over 16 pairs: slower" in line for line in fail), \
        slow.stdout
    assert "failure" in (tmp_path / "j.xml").read_text()
