"""harness/run/ab.py's workflow against a judge of the test's own: what it asks the judge,
with what, and in which order. The real judge's rule is tests/test_compare.py's."""

from __future__ import annotations

import pathlib

import pytest

from harness.core.errors import HarnessError
from harness.results import RunStore
from harness.run import ab, scenario as S


class FakeJudge:
    """Records every call; the rule is whatever it is given over fixed defaults."""

    beta = 0.05

    def __init__(self):
        self.calls: list[tuple] = []

    def rule(self, alpha, tolerances, recorded=None):
        self.calls.append(("rule", alpha, tolerances, recorded))
        return (0.01 if alpha is None else alpha), {"throughput_bps": 0.2, **(tolerances or {})}

    def check_budget(self, tests, repeats, alpha, tolerances):
        self.calls.append(("check_budget", sorted(tests), repeats, alpha, tolerances))

    def until(self, alpha, tolerances):
        raise AssertionError("a finished run is not measured")

    def verdict(self, run_dir, alpha, tolerances):
        self.calls.append(("verdict", pathlib.Path(run_dir), alpha, tolerances))
        return "the verdict"

    def publish(self, verdict, run_dir, junit, summary, fmt):
        self.calls.append(("publish", verdict, pathlib.Path(run_dir), junit, summary, fmt))
        return 7


def test_a_finished_run_is_judged_by_its_recorded_rule_and_published(tmp_path, capsys):
    recorded = {"alpha": 0.001, "tolerances": {"latency_us": 0.3}}
    store = RunStore.create(tmp_path, {"scenario": {}, "compare": {"rule": recorded}})
    judge = FakeJudge()
    req = ab.Request(run=str(store.path), tolerances={"pps": 0.4}, junit="j.xml", summary="s.md")
    assert ab.compare(req, judge) == 7                         # the judge's exit status, unchanged
    assert judge.calls == [
        ("rule", None, {"pps": 0.4}, recorded),
        ("verdict", store.path, 0.01, {"throughput_bps": 0.2, "pps": 0.4}),
        ("publish", "the verdict", store.path, "j.xml", "s.md", "text"),
    ]
    assert capsys.readouterr().out == f"{store.path}\n"         # text: the run directory first


def test_json_output_is_the_judges_alone(tmp_path, capsys):
    store = RunStore.create(tmp_path, {"scenario": {}})
    judge = FakeJudge()
    assert ab.compare(ab.Request(run=str(store.path), fmt="json"), judge) == 7
    assert judge.calls[0] == ("rule", None, None, {})          # no rule recorded: the defaults
    assert capsys.readouterr().out == ""


def test_bad_input_reaches_no_judge():
    judge = FakeJudge()
    with pytest.raises(HarnessError, match="--run judges a finished A/B run"):
        ab.compare(ab.Request(run="x", poll_idle=True), judge)
    with pytest.raises(HarnessError, match="needs --base REF"):
        ab.compare(ab.Request(), judge)
    assert judge.calls == []


def test_the_budget_counts_each_configuration_once_and_waits_for_an_auto_underlay():
    m = {"modes": ["sleeve"], "tests": ["iperf3.tcp", "qperf.tcp_lat"], "placements": ["container-container"],
         "underlay_mtu": [1500, 9000], "repeats": 10}
    judge = FakeJudge()
    ab.check_budget(S.build({"matrix": m}), 0.05, {"throughput_bps": 0.1}, judge)
    assert judge.calls == [("check_budget", ["iperf3.tcp", "iperf3.tcp", "qperf.tcp_lat", "qperf.tcp_lat"], 10,
                            0.05, {"throughput_bps": 0.1})]
    judge.calls.clear()
    ab.check_budget(S.build({"matrix": {**m, "underlay_mtu": ["auto"]}}), 0.05, {}, judge)
    assert judge.calls == []                     # the cases are known once the testbed is reached
