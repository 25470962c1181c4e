"""The regression run: `pytest scenarios/`.

Runs the regression scenario (default scenarios/quick.toml) once per session on the
chosen backend, then gates every case against the baseline (default
results/baseline.json): one test per gated case, so a failure names the mode, the
MTUs, the placement and the metric. --update-baseline writes the baseline from this
run instead. The HTML report of the run is written to reports/ at the end.

--advisory turns a significant regression against the baseline into a warning: a baseline
recorded on another machine says little about this one (ratios to native move ±15 %
between runs and machines), so CI on a fresh runner must not refuse a landing on it. A
case whose tool failed outright still fails.
"""

from __future__ import annotations

import os
import pathlib
import warnings

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
# What each test's headline number is; the gate compares these as ratios to native.
GATED = {"iperf3.tcp": "throughput_bps", "qperf.tcp_bw": "throughput_bps", "iperf3.udp": "throughput_bps",
         "qperf.tcp_lat": "latency_us", "qperf.udp_lat": "latency_us", "ping.flood": "latency_us"}


def _cases(config) -> list[dict]:
    from harness.run import scenario as S
    sc = S.load(ROOT / config.getoption("--scenario"))
    seen, out = set(), []
    for c in S.expand(sc):
        if c.mode == "native" or c.test not in GATED:
            continue
        key = (c.mode, c.underlay_mtu, c.overlay_mtu, c.placement, c.test, c.streams, GATED[c.test])
        if key not in seen:
            seen.add(key)
            out.append(dict(zip(("mode", "underlay_mtu", "overlay_mtu", "placement", "test", "streams", "metric"), key)))
    return out


def _id(c: dict) -> str:
    return f"{c['mode']}-u{c['underlay_mtu']}-o{c['overlay_mtu']}-{c['placement']}-{c['test']}-p{c['streams']}-{c['metric']}"


def pytest_generate_tests(metafunc):
    if "gated_case" in metafunc.fixturenames:
        cases = _cases(metafunc.config)
        metafunc.parametrize("gated_case", cases, ids=[_id(c) for c in cases])


@pytest.fixture(scope="session")
def regression_run(request):
    if os.geteuid() != 0:
        pytest.fail("the regression run needs root (it builds a lab of network namespaces)")
    from harness.run import session
    cfg = request.config
    matrix = {k: cfg.getoption(f"--{k}") for k in ("repeats", "duration") if cfg.getoption(f"--{k}") is not None}
    store = session.run(scenario_path=str(ROOT / cfg.getoption("--scenario")),
                        overrides={"testbed": {"backend": cfg.getoption("--backend")},
                                   **({"matrix": matrix} if matrix else {})},
                        results_dir=str(ROOT / "results"))
    yield store.path
    from harness.report import render
    out = ROOT / "reports" / f"regression-{store.path.name}.html"
    render.render([store.path], out)
    print(f"\nregression run {store.path}, report {out}")


@pytest.fixture(scope="session")
def verdict(request, regression_run):
    from harness.gates import baseline as gate, render as verdict_render
    cfg = request.config
    path = ROOT / cfg.getoption("--baseline")
    if cfg.getoption("--update-baseline"):
        gate.save_baseline(gate.make_baseline(regression_run), path)
        return None
    if not path.exists():
        pytest.fail(f"no baseline at {path}: run `pytest scenarios/ --update-baseline` on a known-good commit")
    v = gate.evaluate(regression_run, gate.load_baseline(path))
    summary = os.environ.get("GITHUB_STEP_SUMMARY")
    if summary:
        with open(summary, "a") as f:
            f.write(verdict_render.markdown(v) + "\n")
    (ROOT / "reports").mkdir(exist_ok=True)
    (ROOT / "reports" / "gate-junit.xml").write_text(verdict_render.junit_xml(v))
    return v


def test_case_against_baseline(gated_case, regression_run, verdict, request):
    from harness import results
    df = results.load(regression_run)
    mine = df[(df["mode"] == gated_case["mode"]) & (df["underlay_mtu"] == gated_case["underlay_mtu"])
              & (df["overlay_mtu"] == gated_case["overlay_mtu"]) & (df["placement"] == gated_case["placement"])
              & (df["test"] == gated_case["test"]) & (df["streams"] == gated_case["streams"])]
    failed = mine[mine["metric"] == "failed"]
    assert failed.empty, f"{_id(gated_case)}: failed in this run: {'; '.join(map(str, failed['error']))}"
    assert not mine[mine["metric"] == gated_case["metric"]].empty, f"{_id(gated_case)}: no {gated_case['metric']} measured"
    if verdict is None:
        return  # --update-baseline: this run is the new reference
    found = [c for c in verdict.cases if all(c.case[k] == gated_case[k] for k in gated_case)]
    assert found, f"{_id(gated_case)}: not in the gate's verdict (baseline lacks it: update the baseline)"
    v = found[0]
    if v.failed and request.config.getoption("--advisory") and v.status == "fail":
        warnings.warn(f"advisory gate (baseline from another machine): {v.headline()}")
        return
    assert not v.failed, v.headline()
