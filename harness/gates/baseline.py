"""The stored-baseline gate: a baseline of ratios to native, and a run judged against it.

What is compared
    Every gated case — a non-native config key (mode, underlay MTU, overlay MTU,
    placement, test, streams) and a gated metric — is reduced to its per-repeat ratio
    to native *in the same run*: repeat r of the mode over repeat r of native at the same
    underlay MTU, test and streams (stats.repeat_ratios). A faster or slower machine moves
    native and the mode alike, so the ratio is what a code change can move.

When a case fails (significance before threshold: harness/gates/verdict.py's rule)
    Both must hold:
    1. the change is significant: one-sided Mann–Whitney U of the run's ratios against
       the baseline's ("less" for throughput, higher-is-better; "greater" for latency),
       p ≤ alpha (0.05 by default);
    2. the median ratio moved beyond the metric's tolerance in the bad direction
       (default throughput 10 %, latency 15 %, relative to the baseline's median ratio).

    With too few repeats the exact test cannot reach alpha at all: the smallest one-sided
    p is 1 / C(n_run + n_base, n_run). 2 repeats against 2 give 1/6, so a case with 2+2
    repeats is reported "not enough repeats" and never fails; 3+3 give exactly 0.05 and
    can; 2 against a 5-repeat baseline give 1/21 ≈ 0.048 and can. Use ≥ 5 repeats for
    baselines.

    A case that failed outright in the run (its tool died), or whose native reference
    failed, fails the gate. A baseline case absent from the run is a warning. All failures
    are collected and reported together; `gate_main` returns 1 once.

The verdict's classes and the shared rule are in `verdict`, its text, markdown and JUnit
in `gates/render.py`. Head against base measured side by side in one run is `compare`.
"""

from __future__ import annotations

import datetime as _dt
import json
import logging
import math
import os
import pathlib
from typing import Any, Iterable

import numpy as np
import pandas as pd

from harness.analysis import stats
from harness.analysis.significance import mann_whitney
from harness.core.errors import HarnessError
from harness.core.placements import REFERENCE
from harness.gates import render as verdict_render
from harness.gates.verdict import (
    CASE_FIELDS,
    DEFAULT_TOLERANCES,
    ERROR,
    FAIL,
    FAILING,
    IMPROVED,
    MISSING,
    NEW,
    NOT_ENOUGH,
    PASS,
    SKIPPED,
    CaseVerdict,
    Verdict,
    case_name,
    decide,
    headline_rows,
)
from harness.results import load, read_meta

log = logging.getLogger(__name__)

BASELINE_SCHEMA_VERSION = 1
BASELINE_KIND = "overlaybench-baseline"
DEFAULT_ALPHA = 0.05
__all__ = ["CASE_FIELDS", "ERROR", "FAIL", "FAILING", "IMPROVED", "MISSING", "NEW", "NOT_ENOUGH", "PASS",
           "SKIPPED", "CaseVerdict", "Verdict", "case_name", "baseline_from_frame", "make_baseline",
           "save_baseline", "load_baseline", "evaluate_frame", "evaluate", "gate_main", "baseline_main"]


# --------------------------------------------------------------------------- machine facts

def _first(d: dict, *keys: str) -> Any:
    for k in keys:
        v = d.get(k)
        if v not in (None, "", {}):
            return v
    return None


def machine_facts(meta: dict[str, Any]) -> dict[str, str | None]:
    """hostname, kernel and CPU model from run.json, whatever shape those keys take."""
    def flat(v: Any, *subkeys: str) -> str | None:
        if isinstance(v, dict):
            v = _first(v, *subkeys)
        return None if v is None else str(v)

    host = meta.get("host") if isinstance(meta.get("host"), dict) else {}
    machine = meta.get("machine") if isinstance(meta.get("machine"), dict) else {}
    pool = {**host, **machine, **meta}
    return {
        "hostname": flat(_first(pool, "hostname", "node", "host"), "hostname", "name"),
        "kernel": flat(_first(pool, "kernel", "kernel_release", "uname"), "release", "version", "uname"),
        "cpu": flat(_first(pool, "cpu", "cpu_model"), "model", "model_name", "name", "brand"),
    }


def machine_warnings(base: dict[str, Any], now: dict[str, Any]) -> list[str]:
    """One line per machine fact that differs between baseline and run (pytest-benchmark's habit)."""
    out = []
    for key, label in (("hostname", "host"), ("kernel", "kernel"), ("cpu", "CPU")):
        a, b = base.get(key), now.get(key)
        if a and b and a != b:
            out.append(f"baseline came from a different {label}: {a!r}, this run: {b!r}")
    if out:
        out.append("ratios to native cancel most of a machine's speed, not all of it; "
                   "re-record the baseline on this machine if verdicts look off")
    return out


# --------------------------------------------------------------------------- baseline

def _case_key(d: dict[str, Any]) -> tuple:
    return tuple(stats.key_value(d.get(f)) for f in CASE_FIELDS)


def case_ratios(df: pd.DataFrame, tolerances: dict[str, float]) -> dict[tuple, list[float]]:
    """Per gated case (its key, CASE_FIELDS): the run's per-repeat ratios to native of the
    test's headline metric, for the metrics `tolerances` names."""
    rr = headline_rows(stats.repeat_ratios(df, metrics=list(tolerances)))
    return {_case_key(dict(zip(CASE_FIELDS, k))): g["ratio"].tolist()
            for k, g in rr.groupby(CASE_FIELDS, dropna=False, sort=False)}


def baseline_from_frame(df: pd.DataFrame, meta: dict[str, Any],
                        tolerances: dict[str, float] | None = None,
                        alpha: float = DEFAULT_ALPHA) -> dict[str, Any]:
    """A baseline (see make_baseline) from a measurements frame and its run.json."""
    tol = dict(DEFAULT_TOLERANCES if tolerances is None else tolerances)
    rr = headline_rows(stats.repeat_ratios(df, metrics=list(tol)))
    cases = []
    for key, g in rr.groupby(CASE_FIELDS, dropna=False, sort=False):
        d = dict(zip(CASE_FIELDS, (stats.key_value(x) for x in key)))
        g = g.sort_values("repeat")
        cases.append({
            **d,
            "datapath": stats.join_unique(g["datapath"]),
            "repeats": [stats.key_value(r) for r in g["repeat"]],
            "ratios": [round(float(x), 6) for x in g["ratio"]],
            "median": round(float(g["ratio"].median()), 6),
            "value_median": float(g["value"].median()),
            "native_median": float(g["native"].median()),
        })
    if not cases:
        raise HarnessError(f"run {meta.get('run_id', '?')}: no gated case has a ratio to native "
                           f"(needs native and at least one other mode measuring {', '.join(tol)})")
    return {
        "schema_version": BASELINE_SCHEMA_VERSION,
        "kind": BASELINE_KIND,
        "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "run_id": meta.get("run_id"),
        "git_commit": _git_commit(meta),
        "machine": machine_facts(meta),
        "alpha": alpha,
        "tolerances": tol,
        "cases": cases,
    }


def _git_commit(meta: dict[str, Any]) -> str | None:
    g = meta.get("git")
    if isinstance(g, dict):
        return g.get("commit")
    return _first(meta, "git_commit", "commit") or (g if isinstance(g, str) else None)


def make_baseline(run_dir: pathlib.Path | str, tolerances: dict[str, float] | None = None,
                  alpha: float = DEFAULT_ALPHA) -> dict[str, Any]:
    """Per gated case: mode, MTUs, placement, test, streams, metric, the ratio-to-native per
    repeat and its median; plus the machine's facts, alpha and tolerances per metric."""
    return baseline_from_frame(load(run_dir), read_meta(run_dir), tolerances, alpha)


def save_baseline(baseline: dict[str, Any], path: pathlib.Path | str) -> pathlib.Path:
    p = pathlib.Path(path)
    try:
        p.parent.mkdir(parents=True, exist_ok=True)
        tmp = p.with_name(p.name + ".tmp")
        tmp.write_text(json.dumps(baseline, indent=2) + "\n")
        os.replace(tmp, p)
    except OSError as e:
        raise HarnessError(f"{p}: cannot write baseline ({e.strerror})") from e
    return p


def load_baseline(path: pathlib.Path | str) -> dict[str, Any]:
    """Read and check a baseline file; HarnessError with one clear line when it is not one."""
    p = pathlib.Path(path)
    try:
        text = p.read_text()
    except FileNotFoundError as e:
        raise HarnessError(f"{p}: baseline file not found (make one with `overlaybench baseline RUN -o {p}`)") from e
    except OSError as e:
        raise HarnessError(f"{p}: cannot read baseline ({e.strerror})") from e
    try:
        b = json.loads(text)
    except json.JSONDecodeError as e:
        raise HarnessError(f"{p}: not valid JSON ({e.msg} at line {e.lineno})") from e
    if not isinstance(b, dict) or b.get("kind") != BASELINE_KIND:
        raise HarnessError(f"{p}: not an overlaybench baseline (no \"kind\": \"{BASELINE_KIND}\")")
    v = b.get("schema_version")
    if v != BASELINE_SCHEMA_VERSION:
        raise HarnessError(f"{p}: baseline schema_version {v!r}, this overlaybench reads {BASELINE_SCHEMA_VERSION}")
    tol = b.get("tolerances")
    if not isinstance(tol, dict) or not all(isinstance(x, (int, float)) and x >= 0 for x in tol.values()):
        raise HarnessError(f"{p}: \"tolerances\" must map metric names to non-negative fractions")
    cases = b.get("cases")
    if not isinstance(cases, list) or not cases:
        raise HarnessError(f"{p}: \"cases\" must be a non-empty list")
    for i, c in enumerate(cases):
        # `pair` came later (runs of one pair have none): a baseline without it is one of those
        missing = [f for f in CASE_FIELDS + ["ratios"] if f != "pair" and (not isinstance(c, dict) or f not in c)]
        if missing:
            raise HarnessError(f"{p}: cases[{i}] lacks {', '.join(missing)}")
        c.setdefault("pair", None)
        r = c["ratios"]
        if not isinstance(r, list) or not r or not all(isinstance(x, (int, float)) for x in r):
            raise HarnessError(f"{p}: cases[{i}].ratios must be a non-empty list of numbers")
    alpha = b.get("alpha", DEFAULT_ALPHA)
    if not isinstance(alpha, (int, float)) or not 0 < alpha < 1:
        raise HarnessError(f"{p}: \"alpha\" must be a number between 0 and 1")
    b.setdefault("machine", {})
    return b


# --------------------------------------------------------------------------- verdicts

def _judge(case: dict[str, Any], base: list[float], cur: list[float], tol: float, alpha: float) -> CaseVerdict:
    hib = stats.higher_is_better(case["metric"])
    bmed, cmed = float(np.median(base)), float(np.median(cur))
    return decide(case, higher_better=hib, base=bmed, current=cmed, change=cmed / bmed - 1 if bmed else math.nan,
                  worse=mann_whitney(cur, base, "less" if hib else "greater", alpha),
                  better=mann_whitney(cur, base, "greater" if hib else "less", alpha),
                  tolerance=tol, alpha=alpha, n_base=len(base), n_current=len(cur),
                  what=f"{cmed * 100:.1f} % of native, baseline {bmed * 100:.1f} %",
                  improved_hint="consider re-recording the baseline")


def evaluate_frame(df: pd.DataFrame, meta: dict[str, Any], baseline: dict[str, Any]) -> Verdict:
    """Compare a run's ratios to native with a baseline. Pure; see the module doc for the rule."""
    tol = {m: float(t) for m, t in baseline["tolerances"].items()}
    alpha = float(baseline.get("alpha", DEFAULT_ALPHA))
    warnings = machine_warnings(baseline.get("machine") or {}, machine_facts(meta))

    current = case_ratios(df, tol)
    fails = stats.failures(df)
    fail_by_config: dict[tuple, list[str]] = {}
    for r in fails.to_dict("records"):
        fail_by_config.setdefault(tuple(stats.key_value(r[c]) for c in stats.CONFIG_KEY), []).append(r["error"])
    ok = stats.ok_rows(df)
    present = {tuple(stats.key_value(x) for x in k) for k, _ in ok.groupby(CASE_FIELDS, dropna=False)}
    native_fail = {(k[1], k[3], k[4], k[5], k[6]): v for k, v in fail_by_config.items() if k[0] == stats.NATIVE}
    native_zero = _zero_natives(ok)

    verdicts: list[CaseVerdict] = []
    seen = set()
    for c in baseline["cases"]:
        key = _case_key(c)
        seen.add(key)
        case = dict(zip(CASE_FIELDS, key))
        t = tol.get(case["metric"])
        if t is None:
            continue
        cur = current.get(key)
        if cur:
            verdicts.append(_judge(case, [float(x) for x in c["ratios"]], cur, t, alpha))
            continue
        cfg = key[:-1]
        u, p, test, s, pair = (case[f] for f in ("underlay_mtu", "placement", "test", "streams", "pair"))
        nfail = native_fail.get((u, p, test, s, pair)) or native_fail.get((u, REFERENCE, test, s, pair))
        failed = fail_by_config.get(cfg) if key not in present else None
        zero = (u, p, test, s, case["metric"], pair) in native_zero
        verdicts.append(_unjudged(case, c, t, failed, nfail, key in present, zero))
    for key, cur in current.items():
        if key not in seen:
            verdicts.append(CaseVerdict(dict(zip(CASE_FIELDS, key)), NEW, "not in the baseline",
                                        current_median=float(np.median(cur)), n_current=len(cur),
                                        tolerance=tol.get(key[-1])))
    judged = [v for v in verdicts if v.status not in (MISSING, SKIPPED, NEW)]
    if not judged:
        raise HarnessError(f"run {meta.get('run_id', '?')} and baseline from run {baseline.get('run_id', '?')} "
                           f"share no gated case with a ratio to native: nothing to gate")
    n_missing = sum(v.status == MISSING for v in verdicts)
    if n_missing:
        warnings.append(f"{n_missing} baseline case(s) not measured in this run (narrower scenario?)")
    n_few = sum(v.status == NOT_ENOUGH for v in verdicts)
    if n_few:
        warnings.append(f"{n_few} case(s) moved beyond tolerance with too few repeats to tell; "
                        "run more repeats (≥ 5) for a verdict")
    return Verdict(verdicts, warnings, run_id=meta.get("run_id"), baseline_run_id=baseline.get("run_id"),
                   alpha=alpha)


def _zero_natives(ok: pd.DataFrame) -> set[tuple]:
    """(underlay MTU, placement, test, streams, metric, pair) where native measured only zeros:
    a knee of 0 (native lost too much even at the sweep's lowest step) gives no ratio."""
    nat = ok[ok["mode"] == stats.NATIVE]
    keys = ["underlay_mtu", "placement", "test", "streams", "metric", "pair"]
    return {tuple(stats.key_value(x) for x in k) for k, g in nat.groupby(keys, dropna=False)
            if (g["value"] == 0).all()}


def _unjudged(case: dict, base: dict, tol: float, failed: list[str] | None, native_failed: list[str] | None,
              present: bool, native_zero: bool = False) -> CaseVerdict:
    """A baseline case this run has no ratio for, and why: it failed, its native reference
    failed or measured only zeros, native was not measured beside it, or it was not measured
    at all."""
    if failed:
        status, why = ERROR, f"case failed in this run: {_reasons(failed)}"
    elif native_failed:
        status, why = ERROR, f"native reference failed in this run: {_reasons(native_failed)}"
    elif present and native_zero:
        status, why = SKIPPED, (f"native's {case['metric']} is 0 in every repeat of this run: no ratio to native "
                                "(for a knee: native lost too much even at the sweep's lowest step)")
    elif present:
        status, why = SKIPPED, ("no native reference in this run (native not measured at this underlay MTU, "
                                "test and streams)")
    else:
        status, why = MISSING, "in the baseline but not measured in this run"
    return CaseVerdict(case, status, why, baseline_median=base.get("median"), n_baseline=len(base["ratios"]),
                       tolerance=tol)


def _reasons(errors: Iterable[str]) -> str:
    return "; ".join(dict.fromkeys(e for e in errors if e)) or "no reason recorded"


def evaluate(run_dir: pathlib.Path | str, baseline: dict[str, Any]) -> Verdict:
    """Verdict of a run directory against a baseline dict (from load_baseline / make_baseline)."""
    return evaluate_frame(load(run_dir), read_meta(run_dir), baseline)


# --------------------------------------------------------------------------- CLI glue

def gate_main(run: pathlib.Path | str, baseline_path: pathlib.Path | str,
              junit: pathlib.Path | str | None = None, summary: pathlib.Path | str | None = None,
              fmt: str = "text") -> int:
    """`overlaybench gate RUN --baseline FILE [--junit FILE] [--summary FILE] [--format text|json]`.

    Prints the verdict, writes JUnit XML and a markdown summary when asked (the summary is
    appended to $GITHUB_STEP_SUMMARY when no --summary is given and that variable is set).
    Returns 1 on a regression, 0 otherwise; HarnessError for bad input.
    """
    verdict = evaluate(run, load_baseline(baseline_path))
    return verdict_render.publish(verdict, junit=junit, summary=summary, fmt=fmt)


def baseline_main(run: pathlib.Path | str, out: pathlib.Path | str) -> None:
    """`overlaybench baseline RUN -o FILE`: write the run's baseline and say what it holds."""
    b = make_baseline(run)
    p = save_baseline(b, out)
    few = [c for c in b["cases"] if len(c["ratios"]) < 5]
    print(f"baseline: {len(b['cases'])} gated cases from run {b['run_id']} written to {p}")
    if few:
        print(f"warning: {len(few)} case(s) have fewer than 5 repeats; "
              "the gate can hardly call a change significant against them")
