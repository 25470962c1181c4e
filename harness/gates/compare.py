"""The A/B gate's judgement: head judged against base, pair by pair, in one run of both arms.

The arms are measured by harness/run/ab.py: each scenario mode M becomes M@base and
M@head, deployed one after the other in every repeat of one run.

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

import logging
import math
import pathlib
from typing import Any, Sequence

import numpy as np
import pandas as pd

from harness.analysis import stats
from harness.analysis.significance import signed_rank
from harness.core.errors import HarnessError
from harness.core.placements import rank as placement_rank
from harness.gates import render as verdict_render
from harness.gates.verdict import (AB, DEFAULT_TOLERANCES, ERROR, HEADLINE, NOT_ENOUGH, CaseVerdict, Verdict,
                                   decide)
from harness.modes.variants import BASE, HEAD
from harness.run.results import load, read_meta

log = logging.getLogger(__name__)

DEFAULT_ALPHA = 0.05


def _failed_repeats(df: pd.DataFrame, label: str) -> dict[tuple, list[str]]:
    """Config (plain mode) → "repeat r: reason" for every failed repeat of one arm."""
    out: dict[tuple, list[str]] = {}
    for r in stats.failures(df).to_dict("records"):
        mode, arm = stats.split_arm(r["mode"])
        if arm == label:
            key = (mode, *(stats.key_value(r[c]) for c in stats.CONFIG_KEY[1:]))
            out.setdefault(key, []).append(f"repeat {stats.key_value(r['repeat'])}: {r['error']}")
    return out


def _arm_configs(df: pd.DataFrame, label: str) -> set[tuple]:
    out = set()
    for r in df[["mode", *stats.CONFIG_KEY[1:]]].drop_duplicates().to_dict("records"):
        mode, arm = stats.split_arm(r["mode"])
        if arm == label:
            out.add((mode, *(stats.key_value(r[c]) for c in stats.CONFIG_KEY[1:])))
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
    by_case = {tuple(stats.key_value(x) for x in k): g for k, g in pairs.groupby(fields, dropna=False, sort=False)}
    head_fail, base_fail = _failed_repeats(df, HEAD), _failed_repeats(df, BASE)
    configs = _arm_configs(df, HEAD) | _arm_configs(df, BASE)
    if not configs:
        raise HarnessError(f"run {meta.get('run_id', '?')}: no {BASE} and {HEAD} arms (modes named MODE@{BASE} "
                           f"and MODE@{HEAD}): not an A/B run")
    verdicts, warnings = [], []
    order = (lambda c: (c[1], stats.mode_rank(c[0]), c[2], placement_rank(c[3]), c[4], c[5]))
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
