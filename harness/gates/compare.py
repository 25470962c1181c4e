"""The A/B gate's judgement: head judged against base, pair by pair, in one run of both arms.

The arms are measured by harness/run/ab.py: each scenario mode M becomes M@base and
M@head, deployed one after the other in every repeat of one run. Its workflow asks this
module through `Gate` (its `Judge`): the rule, the budget of pairs, when to stop, the
verdict and where it goes.

The judgement (per case: mode, MTUs, placement, test, streams and the test's headline metric)
    Repeat r of head is paired with repeat r of base: d_r = log(head_r / base_r). The
    pairs are judged in repeat order by the sequential rule of
    harness/analysis/sequential.py: blocks of two pairs (each arm first once), a sign
    mixture SPRT for "slower" against one for "not slower" (a slowdown below the
    metric's tolerance); the first to cross decides. Neither by the end of the budget
    (the scenario's repeats): the closing signed-rank test of the budget's blocks, at
    half the case's α (the mixture has the other half), says "slower" or "undecided".
    Every case of a run is judged at α / (the number of gated cases the run
    planned, run.json's configs_planned), so an unchanged build fails the whole
    comparison with chance at most α however many pairs are looked at; a slowdown of the
    tolerance or more passes with chance at most β. A case's outcome is a function of
    its pairs in repeat order, so a run that stopped as soon as every case was decided
    (`decided`, what `compare` measures with) and the same run measured to the end judge
    alike; only "improved" (judged on every block there) may need the blocks a stop
    leaves out. A planned case with no measurement is undecided. A case whose head arm
    failed outright in some repeat fails too; failures of the base arm alone are warnings.
"""

from __future__ import annotations

import logging
import pathlib
from typing import Any, Callable, Sequence

import numpy as np
import pandas as pd

from harness.analysis import sequential as seq, stats
from harness.core import metrics
from harness.core.arms import BASE, HEAD
from harness.core.errors import HarnessError
from harness.core.placements import rank as placement_rank
from harness.gates import render as verdict_render
from harness.gates.verdict import (AB, ERROR, FAIL, HEADLINE, IMPROVED, PASS,
                                   UNDECIDED, CaseVerdict, Verdict)
from harness.results import load, read_meta

log = logging.getLogger(__name__)

DEFAULT_ALPHA = 0.05      # the chance an unchanged build fails the comparison, all cases and looks together
DEFAULT_BETA = 0.05       # the chance a slowdown of the tolerance or more passes a case
# The slowdown each metric's case is built to catch: smaller ones may pass (the metric table's
# A/B bands). Throughput's 8 % with a budget of 48 pairs catches a 10 % slowdown 98 times in
# 100 and a 5 % one about half the time at the lab's σ 0.15 a pair (simulated; BENCHMARKS.md,
# tests/unit/test_sequential.py).
AB_TOLERANCES = metrics.ab_bands()
NO_PAIR = "no pair"
NEVER = "could never show it slower"   # an undecided case whose pairs were too few to fail


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


def _judge_pairs(case: dict, g: pd.DataFrame, tol: float, alpha: float, beta: float,
                 budget: int | None) -> CaseVerdict:
    hib = stats.higher_is_better(case["metric"])
    pairs = list(zip(g["repeat"].astype(int), g["log_ratio"].astype(float)))
    s = seq.sequential(pairs, higher_better=hib, tolerance=tol, alpha=alpha, beta=beta, budget=budget)
    upto = g[g["repeat"].astype(int) <= (s.last_repeat if s.last_repeat is not None else -1)]
    b = float(np.median(upto["base"])) if len(upto) else None
    h = float(np.median(upto["head"])) if len(upto) else None
    show = verdict_render.unit_value
    change = f"{s.change * 100:+.1f} %" if s.change is not None else "no block"
    what = (f"head {show(case['metric'], h)}, base {show(case['metric'], b)}, paired change {change} "
            f"over {s.pairs} pairs")
    v = CaseVerdict(dict(case), PASS, baseline_median=b, current_median=h, change=s.change, p=s.p,
                    n_baseline=len(g), n_current=len(g), tolerance=tol, pairs_used=s.pairs)
    blocks, need = len(seq.blocks(pairs)), seq.fewest_blocks(alpha, closing=budget is not None)
    if s.outcome == seq.SLOWER and s.closing_p is not None:
        v.status = FAIL
        v.message = (f"{what}: slower by the closing test at the end of the budget (signed-rank "
                     f"p {s.closing_p:.3g} ≤ α/2 = {alpha / 2:.3g})")
    elif s.outcome == seq.SLOWER:
        v.status = FAIL
        v.message = f"{what}: slower (evidence {s.evidence_slower:.3g} ≥ 2/α = {2 / alpha:.3g})"
    elif s.outcome == seq.NOT_SLOWER:
        v.message = f"{what}: not slower than {tol * 100:.0f} % (evidence {s.evidence_not_slower:.3g})"
        if s.evidence_faster >= 1 / alpha - 1e-9:
            v.status, v.p = IMPROVED, min(1.0, 1 / s.evidence_faster)
            v.message += f", faster (evidence {s.evidence_faster:.3g})"
    elif blocks < need:
        v.status = UNDECIDED
        v.message = (f"{what}: undecided, and {len(g)} pairs ({blocks} blocks of two) {NEVER} at "
                     f"α = {alpha:.3g}: {2 * need} pairs can")
    elif s.closing_p is not None:
        v.status = UNDECIDED
        v.message = (f"{what}: undecided when the budget was spent (evidence slower {s.evidence_slower:.3g}, "
                     f"not slower {s.evidence_not_slower:.3g}, deciding at 2/α = {2 / alpha:.3g} and "
                     f"1/β = {1 / beta:.3g}; closing signed-rank p {s.closing_p:.3g} > α/2 = {alpha / 2:.3g})")
    else:
        v.status = UNDECIDED
        v.message = (f"{what}: undecided, the budget not spent (evidence slower {s.evidence_slower:.3g}, "
                     f"not slower {s.evidence_not_slower:.3g}; each decides at 2/α = {2 / alpha:.3g} and "
                     f"1/β = {1 / beta:.3g})")
    return v


def _planned(meta: dict[str, Any], tol: dict[str, float]) -> list[tuple]:
    """The gated configs (plain mode, headline metric last) the run planned (run.json's
    configs_planned; none in runs older than it), in run order."""
    width = len(stats.CONFIG_KEY)        # runs older than the pair dimension planned one field less
    configs = [(*c, *[None] * (width - len(c))) for c in meta.get("configs_planned") or ()]
    out = [(stats.split_arm(c[0])[0], *c[1:], HEADLINE.get(c[4])) for c in configs
           if stats.split_arm(c[0])[1] in (BASE, HEAD) and HEADLINE.get(c[4]) in tol]
    return list(dict.fromkeys(out))


def _gated(df: pd.DataFrame, tol: dict[str, float]) -> list[tuple]:
    """The configs (plain mode) judged, in table order (the run's looks, results.load's), with
    their headline metric last."""
    configs = _arm_configs(df, HEAD) | _arm_configs(df, BASE)
    looks = stats.plain_looks(stats.looks_of(df))
    order = (lambda c: (c[1], looks.rank(c[0]), c[2], placement_rank(c[3]), c[4], c[5], str(c[6] or "")))
    return [(*cfg, HEADLINE.get(cfg[4])) for cfg in sorted(configs, key=order) if HEADLINE.get(cfg[4]) in tol]


def judge_frame(df: pd.DataFrame, meta: dict[str, Any], alpha: float = DEFAULT_ALPHA,
                tolerances: dict[str, float] | None = None, beta: float = DEFAULT_BETA,
                unmeasured: bool = False) -> Verdict:
    """Head against base in one A/B run's measurements. Pure; the rule is in the module doc.
    `unmeasured`: a planned case with no measurement at all is a case too (undecided)."""
    tol = dict(AB_TOLERANCES if tolerances is None else tolerances)
    df = stats.ensure_columns(df, stats.CONFIG_KEY)
    pairs = stats.arm_pairs(df, BASE, HEAD, metrics=list(tol))
    fields = stats.CONFIG_KEY + ["metric"]
    by_case = {tuple(stats.key_value(x) for x in k): g for k, g in pairs.groupby(fields, dropna=False, sort=False)}
    head_fail, base_fail = _failed_repeats(df, HEAD), _failed_repeats(df, BASE)
    if not (_arm_configs(df, HEAD) | _arm_configs(df, BASE)):
        raise HarnessError(f"run {meta.get('run_id', '?')}: no {BASE} and {HEAD} arms (modes named MODE@{BASE} "
                           f"and MODE@{HEAD}): not an A/B run")
    gated = _gated(df, tol)
    if not gated:
        raise HarnessError(f"run {meta.get('run_id', '?')}: no test with a gated metric ({', '.join(tol)})")
    planned = _planned(meta, tol)
    each = alpha / max(len(planned), len(gated))     # the comparison's α shared by its cases
    budget = (meta.get("scenario") or {}).get("repeats")   # the closing test's sample: the planned pairs
    verdicts, warnings = [], []
    for key in gated:
        cfg, metric = key[:-1], key[-1]
        case = dict(zip(fields, key))
        g = by_case.get(key)
        if cfg in head_fail:
            verdicts.append(CaseVerdict(case, ERROR, f"{HEAD} failed: {'; '.join(head_fail[cfg])}",
                                        n_baseline=0 if g is None else len(g), tolerance=tol[metric]))
            continue
        if cfg in base_fail:
            where = " ".join(str(x) for x in cfg[1:] if x is not None)      # no pair in a run of one pair
            warnings.append(f"{BASE} arm of {stats.split_arm(cfg[0])[0]} {where} failed "
                            f"({'; '.join(base_fail[cfg])}); judged on the remaining pairs")
        if g is None or g.empty:
            verdicts.append(CaseVerdict(case, ERROR, f"{NO_PAIR} of {BASE} and {HEAD} measurements",
                                        tolerance=tol[metric]))
            continue
        verdicts.append(_judge_pairs(case, g, tol[metric], each, beta, budget))
    for key in planned if unmeasured else ():
        if key not in gated:
            verdicts.append(CaseVerdict(dict(zip(fields, key)), UNDECIDED, f"not measured (the run is "
                                        f"{meta.get('status', 'unfinished')})", tolerance=tol[key[-1]]))
    n_few = sum(v.status == UNDECIDED and NEVER in v.message for v in verdicts)
    if n_few:
        warnings.append(f"{n_few} case(s) had too few pairs to show a slowdown at α = {each:.3g} per case; "
                        f"run at least {2 * seq.fewest_blocks(each)} repeats")
    info = meta.get("compare") or {}
    arms = {label: (info.get(label) or {}).get("origin") or "?" for label in (BASE, HEAD)}
    for label in (BASE, HEAD):
        flags = (info.get(label) or {}).get("flags")
        if flags:
            arms[label] += f" with {' '.join(flags)}"
    return Verdict(verdicts, warnings, run_id=meta.get("run_id"), alpha=alpha, kind=AB, arms=arms)


def decided(df: pd.DataFrame, alpha: float = DEFAULT_ALPHA, tolerances: dict[str, float] | None = None,
            beta: float = DEFAULT_BETA, meta: dict[str, Any] | None = None) -> bool:
    """Whether every gated case of a run's measurements so far has its verdict, so that
    more pairs would change nothing (what `compare` stops measuring on). A case whose head
    arm failed is decided; one with no pair yet is not."""
    if df.empty:
        return False
    try:
        v = judge_frame(df, meta or {}, alpha, tolerances, beta)
    except HarnessError:
        return False
    return all(c.status in (FAIL, PASS, IMPROVED) or (c.status == ERROR and not c.message.startswith(NO_PAIR))
               for c in v.cases)


def stop_rule(alpha: float = DEFAULT_ALPHA, tolerances: dict[str, float] | None = None,
              beta: float = DEFAULT_BETA) -> Callable[[pathlib.Path, int], bool]:
    """For `session.run(until=…)`: whether the run's measurements at one underlay MTU so far
    decide every case (`decided`), so its remaining repeats need not be measured."""
    def until(run_dir: pathlib.Path, underlay_mtu: int) -> bool:
        df = load(run_dir)
        return decided(df[df["underlay_mtu"] == underlay_mtu], alpha, tolerances, beta, read_meta(run_dir))
    return until


def judge(run_dir: pathlib.Path | str, alpha: float = DEFAULT_ALPHA,
          tolerances: dict[str, float] | None = None) -> Verdict:
    return judge_frame(load(run_dir), read_meta(run_dir), alpha, tolerances, unmeasured=True)


def parse_tolerances(items: Sequence[str] | None, base: dict[str, float] | None = None) -> dict[str, float]:
    """["throughput_bps=0.05", …] over `base` (the defaults); one clear line for anything else."""
    tol = dict(AB_TOLERANCES if base is None else base)
    for item in items or ():
        metric, sep, value = item.partition("=")
        try:
            x = float(value)
        except ValueError:
            x = -1.0
        if not sep or metric not in AB_TOLERANCES or not 0 < x < 1:
            raise HarnessError(f"--tolerance {item!r}: expected METRIC=FRACTION with METRIC one of "
                               f"{', '.join(AB_TOLERANCES)} and 0 < FRACTION < 1 (e.g. throughput_bps=0.05)")
        tol[metric] = x
    return tol


class Gate:
    """The A/B judgement as harness/run/ab.py's `compare` asks for it (its `Judge`): run/
    sits below the gates and imports none, so the command hands this in."""

    beta = DEFAULT_BETA

    def rule(self, alpha: float | None, tolerances: dict[str, float] | None,
             recorded: dict | None = None) -> tuple[float, dict[str, float]]:
        """α and the tolerances: those given, over `recorded` (the rule a finished run was
        measured under, run.json's compare.rule) or else over the defaults."""
        recorded = recorded or {}
        alpha = recorded.get("alpha", DEFAULT_ALPHA) if alpha is None else alpha
        return alpha, {**(recorded.get("tolerances") or AB_TOLERANCES), **(tolerances or {})}

    def check_budget(self, tests: Sequence[str], repeats: int, alpha: float, tolerances: dict[str, float]) -> None:
        """HarnessError if `repeats` pairs could never show one of the cases slower at α
        shared by the gated ones (`tests`: each case's test; gated: its headline metric
        has a tolerance)."""
        n = sum(HEADLINE.get(t) in tolerances for t in tests)
        need = 2 * seq.fewest_blocks(alpha / n) if n else 0
        if repeats < need:
            raise HarnessError(f"--repeats {repeats}: too few pairs to ever show a case slower at α {alpha:g} over "
                               f"{n} cases; at least {need}")

    def until(self, alpha: float, tolerances: dict[str, float]) -> Callable[[pathlib.Path, int], bool]:
        return stop_rule(alpha, tolerances)

    def verdict(self, run_dir: pathlib.Path, alpha: float, tolerances: dict[str, float]) -> Verdict:
        return judge(run_dir, alpha, tolerances)

    def publish(self, verdict: Verdict, run_dir: pathlib.Path, junit: str | None, summary: str | None,
                fmt: str) -> int:
        return verdict_render.publish(verdict, junit=junit, summary=summary, fmt=fmt,
                                      extra={"run_dir": str(run_dir)})
