"""`overlaybench compare`: two builds of the sleeve measured side by side in one run, head judged against base.

The arms
    base: overlay/sleeve at a git ref (e.g. a pull request's merge base), exported with
    `git archive`; head: the working tree (or another ref). Both are built the same way
    and cached by source hash (harness/sleeve/refs.py). Each scenario mode M becomes two modes,
    M@base and M@head, which the runner deploys one after the other in every repeat, their
    order alternating between repeats, so whatever the machine does to one arm it does to
    the other within seconds.

The judgement (per case: mode, MTUs, placement, test, streams and the test's headline metric)
    Repeat r of head is paired with repeat r of base: d_r = log(head_r / base_r). The
    change is exp(median d) − 1 and its test the one-sided Wilcoxon signed-rank test of the
    d_r in the bad direction (below 0 for throughput, above for latency). A case fails when
    that p ≤ alpha and the change is beyond the metric's tolerance (the rule in
    harness/gates/verdict.py). n pairs cannot give p below 1/2^n: at least 5 repeats are needed
    for α = 0.05. A case whose head arm failed outright in some repeat fails too; failures
    of the base arm alone are warnings. The defaults come from the false-alarm and power
    measurements in BENCHMARKS.md.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import pathlib
import re
from typing import Any, Sequence

import numpy as np
import pandas as pd

from harness.sleeve import refs as builds
from harness.config import scenario as scen
from harness.analysis import stats
from harness.gates import render as verdict_render
from harness.core.errors import HarnessError
from harness.core.paths import PROJECT
from harness.run.results import load, read_meta, resolve_run
from harness.analysis.significance import signed_rank
from harness.gates.verdict import AB, ERROR, NOT_ENOUGH, CaseVerdict, Verdict, decide

log = logging.getLogger(__name__)

DEFAULT_SCENARIO = PROJECT / "scenarios" / "ab.toml"
DEFAULT_ALPHA = 0.05
DEFAULT_TOLERANCES = {"throughput_bps": 0.10, "latency_us": 0.15}
BASE, HEAD = "base", "head"
# The metric each test is judged on.
HEADLINE = {"iperf3.tcp": "throughput_bps", "qperf.tcp_bw": "throughput_bps", "iperf3.udp": "throughput_bps",
            "qperf.udp_bw": "throughput_bps", "qperf.tcp_lat": "latency_us", "qperf.udp_lat": "latency_us",
            "ping.flood": "latency_us"}


@dataclasses.dataclass
class Arms:
    """The two arms of a comparison and the snapshots of their sources (removed by `close`)."""

    base: builds.Build
    head: builds.Build
    snapshots: builds.Snapshots

    def __enter__(self) -> "Arms":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        self.snapshots.close()


def prepare(repo: pathlib.Path | str, base_ref: str | None, head_ref: str | None = None,
            base_flags: Sequence[str] = (), head_flags: Sequence[str] = ()) -> Arms:
    """Both arms, built once here: `base_ref` (None: the working tree, as for an A/A run),
    and `head_ref` or the working tree. Use as a context manager."""
    snaps = builds.Snapshots()
    try:
        return Arms(snaps.add(repo, base_ref, BASE, base_flags), snaps.add(repo, head_ref, HEAD, head_flags), snaps)
    except BaseException:
        snaps.close()
        raise


def _scenario(scenario_path: str | None, overrides: dict) -> scen.Scenario:
    sc = scen.load(scenario_path) if scenario_path else scen.Scenario()
    return scen.build(overrides, source="command line", base=sc) if overrides else sc


def measure(arms: Arms, scenario_path: str | None = None, overrides: dict | None = None,
            results_dir: str = "results", quiet: bool = False, options=None) -> pathlib.Path:
    """One run of the scenario with every mode as two arms; returns the run directory.
    `options`: the testbed's (harness.testbeds.base.Options), as for `session.run`."""
    from harness.run import session

    overrides = dict(overrides or {})
    sc = _scenario(scenario_path, overrides)
    variants = []
    for m in sc.modes:
        variants += [builds.variant(m, arms.base), builds.variant(m, arms.head)]
    matrix = {**overrides.get("matrix", {}), "modes": [v.name for v in variants]}
    with builds.registered(variants):
        store = session.run(scenario_path=scenario_path, overrides={**overrides, "matrix": matrix},
                            results_dir=results_dir, quiet=quiet, options=options)
    store.update_meta(compare={BASE: arms.base.describe(), HEAD: arms.head.describe()})
    return store.path


# --------------------------------------------------------------------------- judging

def _failed_repeats(df: pd.DataFrame, label: str) -> dict[tuple, list[str]]:
    """Config (plain mode) → "repeat r: reason" for every failed repeat of one arm."""
    out: dict[tuple, list[str]] = {}
    for r in stats.failures(df).to_dict("records"):
        mode, arm = stats.split_arm(r["mode"])
        if arm == label:
            key = (mode, *(stats._key(r[c]) for c in stats.CONFIG_KEY[1:]))
            out.setdefault(key, []).append(f"repeat {stats._key(r['repeat'])}: {r['error']}")
    return out


def _arm_configs(df: pd.DataFrame, label: str) -> set[tuple]:
    out = set()
    for r in df[["mode", *stats.CONFIG_KEY[1:]]].drop_duplicates().to_dict("records"):
        mode, arm = stats.split_arm(r["mode"])
        if arm == label:
            out.add((mode, *(stats._key(r[c]) for c in stats.CONFIG_KEY[1:])))
    return out


def _judge_pairs(case: dict, g: pd.DataFrame, tol: float, alpha: float) -> CaseVerdict:
    hib = stats.higher_is_better(case["metric"])
    d = g["log_ratio"].astype(float).tolist()
    b, h = float(np.median(g["base"])), float(np.median(g["head"]))
    show = verdict_render.unit_value
    return decide(case, higher_better=hib, base=b, current=h, change=math.exp(float(np.median(d))) - 1,
                  worse=signed_rank(d, "less" if hib else "greater", alpha),
                  better=signed_rank(d, "greater" if hib else "less", alpha),
                  tolerance=tol, alpha=alpha, n_base=len(d), n_current=len(d),
                  what=f"head {show(case['metric'], h)}, base {show(case['metric'], b)}, paired change")


def judge_frame(df: pd.DataFrame, meta: dict[str, Any], alpha: float = DEFAULT_ALPHA,
                tolerances: dict[str, float] | None = None) -> Verdict:
    """Head against base in one A/B run's measurements. Pure; the rule is in the module doc."""
    tol = dict(DEFAULT_TOLERANCES if tolerances is None else tolerances)
    pairs = stats.arm_pairs(df, BASE, HEAD, metrics=list(tol))
    fields = stats.CONFIG_KEY + ["metric"]
    by_case = {tuple(stats._key(x) for x in k): g for k, g in pairs.groupby(fields, dropna=False, sort=False)}
    head_fail, base_fail = _failed_repeats(df, HEAD), _failed_repeats(df, BASE)
    configs = _arm_configs(df, HEAD) | _arm_configs(df, BASE)
    if not configs:
        raise HarnessError(f"run {meta.get('run_id', '?')}: no {BASE} and {HEAD} arms (modes named MODE@{BASE} "
                           f"and MODE@{HEAD}): not an A/B run")
    verdicts, warnings = [], []
    order = (lambda c: (c[1], stats._mode_rank(c[0]), c[2], stats._placement_rank(c[3]), c[4], c[5]))
    for cfg in sorted(configs, key=order):
        metric = HEADLINE.get(cfg[4])
        if metric not in tol:
            continue
        case = dict(zip(fields, (*cfg, metric)))
        g = by_case.get((*cfg, metric))
        if cfg in head_fail:
            verdicts.append(CaseVerdict(case, ERROR, f"{HEAD} failed: {'; '.join(head_fail[cfg])}",
                                        n_baseline=0 if g is None else len(g), tolerance=tol[metric]))
            continue
        if cfg in base_fail:
            warnings.append(f"{BASE} arm of {stats.split_arm(cfg[0])[0]} {' '.join(map(str, cfg[1:]))} failed "
                            f"({'; '.join(base_fail[cfg])}); judged on the remaining pairs")
        if g is None or g.empty:
            verdicts.append(CaseVerdict(case, ERROR, f"no pair of {BASE} and {HEAD} measurements",
                                        tolerance=tol[metric]))
            continue
        verdicts.append(_judge_pairs(case, g, tol[metric], alpha))
    if not verdicts:
        raise HarnessError(f"run {meta.get('run_id', '?')}: no test with a gated metric ({', '.join(tol)})")
    n_few = sum(v.status == NOT_ENOUGH for v in verdicts)
    if n_few:
        warnings.append(f"{n_few} case(s) moved beyond tolerance with too few repeats to tell; "
                        "run more repeats (≥ 5) for a verdict")
    info = meta.get("compare") or {}
    arms = {label: (info.get(label) or {}).get("origin") or "?" for label in (BASE, HEAD)}
    for label in (BASE, HEAD):
        flags = (info.get(label) or {}).get("flags")
        if flags:
            arms[label] += f" with {' '.join(flags)}"
    return Verdict(verdicts, warnings, run_id=meta.get("run_id"), alpha=alpha, kind=AB, arms=arms)


def judge(run_dir: pathlib.Path | str, alpha: float = DEFAULT_ALPHA,
          tolerances: dict[str, float] | None = None) -> Verdict:
    return judge_frame(load(run_dir), read_meta(run_dir), alpha, tolerances)


# --------------------------------------------------------------------------- CLI glue

LABEL_FREE = re.compile(r"^[A-Za-z0-9_.][A-Za-z0-9_./~^@{}-]*$")


def parse_tolerances(items: Sequence[str] | None) -> dict[str, float]:
    """["throughput_bps=0.05", …] over the defaults; one clear line for anything else."""
    tol = dict(DEFAULT_TOLERANCES)
    for item in items or ():
        metric, sep, value = item.partition("=")
        try:
            x = float(value)
        except ValueError:
            x = -1.0
        if not sep or metric not in DEFAULT_TOLERANCES or not 0 <= x < 1:
            raise HarnessError(f"--tolerance {item!r}: expected METRIC=FRACTION with METRIC one of "
                               f"{', '.join(DEFAULT_TOLERANCES)} and 0 ≤ FRACTION < 1 (e.g. throughput_bps=0.05)")
        tol[metric] = x
    return tol


def compare_main(base: str | None, run: str | None = None, repo: str | None = None, head: str | None = None,
                 scenario_path: str | None = None, overrides: dict | None = None, inject_ns: int | None = None,
                 alpha: float = DEFAULT_ALPHA, tolerances: dict[str, float] | None = None,
                 results_dir: str = "results", junit: str | None = None, summary: str | None = None,
                 fmt: str = "text", quiet: bool = False, measure_unchanged: bool = False) -> int:
    """`overlaybench compare --base REF [...]`, or `--run RUN` to judge a finished A/B run again.
    When both arms have the same source and flags nothing is measured (unless
    `measure_unchanged`): the verdict could only be a false alarm."""
    if not 0 < alpha < 1:
        raise HarnessError(f"--alpha {alpha}: must be between 0 and 1")
    if run is not None:
        if base or head or overrides or inject_ns is not None:
            raise HarnessError("--run judges a finished A/B run: give no --base, --head, --inject-ns or matrix flags")
        run_dir = resolve_run(run, results_dir)
    else:
        if not base:
            raise HarnessError("compare needs --base REF (the build to compare against) or --run RUN")
        for ref in (base, head):
            if ref is not None and not LABEL_FREE.match(ref):
                raise HarnessError(f"{ref!r}: not a git ref")
        if inject_ns is not None and not 0 < inject_ns <= 10_000_000:
            raise HarnessError(f"--inject-ns {inject_ns}: expected 1..10000000 (ns per frame)")
        if scenario_path is None and DEFAULT_SCENARIO.exists():
            scenario_path = str(DEFAULT_SCENARIO)
        for m in _scenario(scenario_path, overrides or {}).modes:   # bad input fails before any build
            builds.require_sleeve(m)
        with prepare(repo or PROJECT, base, head,
                     head_flags=("--calibrate-ns", str(inject_ns)) if inject_ns else ()) as arms:
            same = arms.base.source_hash == arms.head.source_hash and arms.base.flags == arms.head.flags
            if same and not measure_unchanged:
                # Both arms would run one binary: a measurement could only raise a false alarm.
                msg = (f"compare passed: nothing to compare, overlay/sleeve is the same at {arms.base.origin} "
                       f"and {arms.head.origin} (source {arms.base.source_hash}); --measure-unchanged measures "
                       f"anyway")
                print(json.dumps({"ok": True, "kind": "compare", "headline": msg, "cases": []}, indent=2)
                      if fmt == "json" else msg)
                return 0
            run_dir = measure(arms, scenario_path, overrides, results_dir=results_dir, quiet=quiet)
    v = judge(run_dir, alpha, tolerances)
    if fmt != "json":
        print(run_dir)
    return verdict_render.publish(v, junit=junit, summary=summary, fmt=fmt, extra={"run_dir": str(run_dir)})
