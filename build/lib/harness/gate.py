"""The regression gate: a baseline of ratios to native, and verdicts against it.

What is compared
    Every gated case — a non-native config key (mode, underlay MTU, overlay MTU,
    placement, test, streams) and a gated metric — is reduced to its per-repeat ratio
    to native *in the same run*: repeat r of the mode over repeat r of native at the same
    underlay MTU, test and streams (stats.repeat_ratios). A faster or slower machine moves
    native and the mode alike, so the ratio is what a code change can move.

When a case fails (STYLE.md, point 7: significance before threshold)
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
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import json
import logging
import math
import os
import pathlib
import xml.etree.ElementTree as ET
from typing import Any, Iterable

import numpy as np
import pandas as pd

from harness import stats
from harness.errors import HarnessError
from harness.results import load, read_meta

log = logging.getLogger(__name__)

BASELINE_SCHEMA_VERSION = 1
BASELINE_KIND = "overlaybench-baseline"
DEFAULT_TOLERANCES = {"throughput_bps": 0.10, "latency_us": 0.15}
DEFAULT_ALPHA = 0.05
CASE_FIELDS = stats.CONFIG_KEY + ["metric"]

# Verdict statuses. FAIL and ERROR fail the gate; the rest do not.
PASS, FAIL, ERROR, IMPROVED = "pass", "fail", "error", "improved"
NOT_ENOUGH, MISSING, SKIPPED, NEW = "not enough repeats", "missing", "skipped", "new"
FAILING = (FAIL, ERROR)


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
    return tuple(stats._key(d.get(f)) for f in CASE_FIELDS)


def case_name(d: dict[str, Any]) -> str:
    """"fastdp underlay 1500 overlay 1450 container-container iperf3.tcp x1 throughput_bps"."""
    k = {f: stats._key(d.get(f)) for f in CASE_FIELDS}
    return (f"{k['mode']} underlay {k['underlay_mtu']} overlay {k['overlay_mtu']} {k['placement']} "
            f"{k['test']} x{k['streams']} {k['metric']}")


def baseline_from_frame(df: pd.DataFrame, meta: dict[str, Any],
                        tolerances: dict[str, float] | None = None,
                        alpha: float = DEFAULT_ALPHA) -> dict[str, Any]:
    """A baseline (see make_baseline) from a measurements frame and its run.json."""
    tol = dict(DEFAULT_TOLERANCES if tolerances is None else tolerances)
    rr = stats.repeat_ratios(df, metrics=list(tol))
    cases = []
    for key, g in rr.groupby(CASE_FIELDS, dropna=False, sort=False):
        d = dict(zip(CASE_FIELDS, (stats._key(x) for x in key)))
        g = g.sort_values("repeat")
        cases.append({
            **d,
            "datapath": stats._join_unique(g["datapath"]),
            "repeats": [stats._key(r) for r in g["repeat"]],
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
        missing = [f for f in CASE_FIELDS + ["ratios"] if not isinstance(c, dict) or f not in c]
        if missing:
            raise HarnessError(f"{p}: cases[{i}] lacks {', '.join(missing)}")
        r = c["ratios"]
        if not isinstance(r, list) or not r or not all(isinstance(x, (int, float)) for x in r):
            raise HarnessError(f"{p}: cases[{i}].ratios must be a non-empty list of numbers")
    alpha = b.get("alpha", DEFAULT_ALPHA)
    if not isinstance(alpha, (int, float)) or not 0 < alpha < 1:
        raise HarnessError(f"{p}: \"alpha\" must be a number between 0 and 1")
    b.setdefault("machine", {})
    return b


# --------------------------------------------------------------------------- verdicts

@dataclasses.dataclass
class CaseVerdict:
    case: dict[str, Any]                 # CASE_FIELDS
    status: str
    message: str = ""
    baseline_median: float | None = None
    current_median: float | None = None
    change: float | None = None          # current / baseline - 1
    p: float | None = None
    n_baseline: int = 0
    n_current: int = 0
    tolerance: float | None = None

    @property
    def failed(self) -> bool:
        return self.status in FAILING

    @property
    def name(self) -> str:
        return case_name(self.case)

    def headline(self) -> str:
        c = self.case
        return (f"{c['mode']} at underlay MTU {c['underlay_mtu']} (overlay {c['overlay_mtu']}), "
                f"{c['placement']}, {c['test']} x{c['streams']}, {c['metric']}: {self.message}")


@dataclasses.dataclass
class Verdict:
    cases: list[CaseVerdict]
    warnings: list[str]
    run_id: str | None = None
    baseline_run_id: str | None = None
    alpha: float = DEFAULT_ALPHA

    @property
    def failures(self) -> list[CaseVerdict]:
        return [c for c in self.cases if c.failed]

    @property
    def ok(self) -> bool:
        return not self.failures

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for c in self.cases:
            out[c.status] = out.get(c.status, 0) + 1
        return out

    def headline(self) -> str:
        gated = [c for c in self.cases if c.status != NEW]
        counts = self.counts()
        extra = ", ".join(f"{n} {s}" for s, n in counts.items() if s not in (PASS, FAIL, ERROR, NEW))
        extra = f" ({extra})" if extra else ""
        if self.ok:
            return f"gate passed: no significant regression in {len(gated)} cases{extra}"
        return f"gate FAILED: {len(self.failures)} of {len(gated)} cases regressed{extra}"

    def to_text(self) -> str:
        lines = [self.headline()]
        lines += [f"  FAIL {c.headline()}" for c in self.failures]
        lines += [f"  note {c.headline()}" for c in self.cases if c.status == NOT_ENOUGH]
        lines += [f"  warning: {w}" for w in self.warnings]
        return "\n".join(lines)

    def to_markdown(self) -> str:
        icon = {PASS: "✅", FAIL: "❌", ERROR: "❌", IMPROVED: "🚀", NOT_ENOUGH: "⚠️", MISSING: "⚠️",
                SKIPPED: "⚠️", NEW: "🆕"}
        out = [f"## overlaybench gate: {'✅ passed' if self.ok else '❌ failed'}", "",
               f"Run `{self.run_id}` against baseline from run `{self.baseline_run_id}`. "
               f"Ratios to native within each run; a case fails when the change is significant "
               f"(one-sided Mann–Whitney U, α = {self.alpha}) and beyond its tolerance.", "",
               f"**{self.headline()}**", ""]
        for w in self.warnings:
            out.append(f"> ⚠️ {w}")
        if self.warnings:
            out.append("")
        head = ["", "Mode", "Underlay MTU", "Overlay MTU", "Placement", "Test", "Streams", "Metric",
                "Baseline % of native", "Now % of native", "Change", "Tolerance", "p", "Verdict"]

        def table(rows: list[CaseVerdict]) -> list[str]:
            t = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
            for c in rows:
                k = c.case
                t.append("| " + " | ".join([
                    icon.get(c.status, ""), str(k["mode"]), str(k["underlay_mtu"]), str(k["overlay_mtu"]),
                    str(k["placement"]), str(k["test"]), str(k["streams"]), str(k["metric"]),
                    _pct(c.baseline_median), _pct(c.current_median), _signed(c.change),
                    _tol(c.tolerance), _p(c.p), c.status + (f": {c.message}" if c.failed else ""),
                ]).replace("\n", " ") + " |")
            return t

        if self.failures:
            out += ["### Regressions", ""] + table(self.failures) + [""]
        rest = [c for c in self.cases if not c.failed]
        if rest:
            out += ["<details><summary>All other cases</summary>", ""] + table(rest) + ["", "</details>", ""]
        return "\n".join(out)

    def to_junit_xml(self) -> str:
        suite = ET.Element("testsuite", name="overlaybench.gate", tests=str(len(self.cases)),
                           failures=str(len(self.failures)), errors="0",
                           skipped=str(sum(c.status in (NOT_ENOUGH, MISSING, SKIPPED) for c in self.cases)))
        if self.warnings:
            props = ET.SubElement(suite, "properties")
            for w in self.warnings:
                ET.SubElement(props, "property", name="warning", value=w)
        for c in self.cases:
            k = c.case
            tc = ET.SubElement(suite, "testcase", classname=f"overlaybench.gate.{k['mode']}", name=c.name)
            if c.failed:
                msg = (f"{k['mode']} at underlay MTU {k['underlay_mtu']} (overlay MTU {k['overlay_mtu']}), "
                       f"{k['metric']} ({k['test']}, {k['placement']}): {c.message}")
                f = ET.SubElement(tc, "failure", message=msg, type="regression" if c.status == FAIL else "case-failed")
                f.text = c.headline()
            elif c.status in (NOT_ENOUGH, MISSING, SKIPPED):
                ET.SubElement(tc, "skipped", message=f"{c.status}: {c.message}")
            else:
                ET.SubElement(tc, "system-out").text = f"{c.status}: {c.message}"
        ET.indent(suite)
        return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(suite, encoding="unicode") + "\n"


def _pct(x: float | None) -> str:
    return "—" if x is None or not math.isfinite(x) else f"{x * 100:.1f} %"


def _signed(x: float | None) -> str:
    return "—" if x is None or not math.isfinite(x) else f"{x * 100:+.1f} %"


def _tol(x: float | None) -> str:
    return "—" if x is None else f"±{x * 100:.0f} %"


def _p(x: float | None) -> str:
    return "—" if x is None else f"{x:.3g}"


def _judge(case: dict[str, Any], base: list[float], cur: list[float], tol: float, alpha: float) -> CaseVerdict:
    hib = stats.higher_is_better(case["metric"])
    bmed, cmed = float(np.median(base)), float(np.median(cur))
    change = cmed / bmed - 1 if bmed else math.nan
    worse = stats.mann_whitney(cur, base, "less" if hib else "greater", alpha)
    better = stats.mann_whitney(cur, base, "greater" if hib else "less", alpha)
    bad = -change if hib else change            # > 0: moved the bad way
    v = CaseVerdict(dict(case), PASS, baseline_median=bmed, current_median=cmed, change=change,
                    p=worse.p, n_baseline=len(base), n_current=len(cur), tolerance=tol)
    what = f"{cmed * 100:.1f} % of native, baseline {bmed * 100:.1f} % ({change * 100:+.1f} %"
    if bad > tol:
        if not worse.enough:
            v.status = NOT_ENOUGH
            v.message = (f"{what}, beyond ±{tol * 100:.0f} %) but {len(cur)} vs {len(base)} repeats cannot "
                         f"reach significance (smallest p {worse.min_p:.3g} > α {alpha})")
        elif worse.significant(alpha):
            v.status = FAIL
            v.message = f"{what}, beyond ±{tol * 100:.0f} %, p = {worse.p:.3g})"
        else:
            v.message = f"{what}) beyond tolerance but not significant (p = {worse.p:.3g})"
    elif -bad > tol and better.significant(alpha):
        v.status, v.p = IMPROVED, better.p
        v.message = f"{what}, p = {better.p:.3g}); consider re-recording the baseline"
    else:
        v.message = f"{what})"
    return v


def evaluate_frame(df: pd.DataFrame, meta: dict[str, Any], baseline: dict[str, Any]) -> Verdict:
    """Compare a run's ratios to native with a baseline. Pure; see the module doc for the rule."""
    tol = {m: float(t) for m, t in baseline["tolerances"].items()}
    alpha = float(baseline.get("alpha", DEFAULT_ALPHA))
    warnings = machine_warnings(baseline.get("machine") or {}, machine_facts(meta))

    rr = stats.repeat_ratios(df, metrics=list(tol))
    current = {_case_key(dict(zip(CASE_FIELDS, k))): g["ratio"].tolist()
               for k, g in rr.groupby(CASE_FIELDS, dropna=False, sort=False)}
    fails = stats.failures(df)
    fail_by_config: dict[tuple, list[str]] = {}
    for r in fails.to_dict("records"):
        fail_by_config.setdefault(tuple(stats._key(r[c]) for c in stats.CONFIG_KEY), []).append(r["error"])
    ok = stats.ok_rows(df)
    present = {tuple(stats._key(x) for x in k) for k, _ in ok.groupby(CASE_FIELDS, dropna=False)}
    native_fail = {(k[1], k[3], k[4], k[5]): v for k, v in fail_by_config.items() if k[0] == stats.NATIVE}

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
        u, p, test, s = case["underlay_mtu"], case["placement"], case["test"], case["streams"]
        nfail = native_fail.get((u, p, test, s)) or native_fail.get((u, stats.REFERENCE_PLACEMENT, test, s))
        if cfg in fail_by_config and key not in present:
            verdicts.append(CaseVerdict(case, ERROR, f"case failed in this run: {_reasons(fail_by_config[cfg])}",
                                        baseline_median=c.get("median"), n_baseline=len(c["ratios"]), tolerance=t))
        elif nfail:
            verdicts.append(CaseVerdict(case, ERROR, f"native reference failed in this run: {_reasons(nfail)}",
                                        baseline_median=c.get("median"), n_baseline=len(c["ratios"]), tolerance=t))
        elif key in present:
            verdicts.append(CaseVerdict(case, SKIPPED, "no native reference in this run (native not measured "
                                        "at this underlay MTU, test and streams)",
                                        baseline_median=c.get("median"), n_baseline=len(c["ratios"]), tolerance=t))
        else:
            verdicts.append(CaseVerdict(case, MISSING, "in the baseline but not measured in this run",
                                        baseline_median=c.get("median"), n_baseline=len(c["ratios"]), tolerance=t))
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


def _reasons(errors: Iterable[str]) -> str:
    return "; ".join(dict.fromkeys(e for e in errors if e)) or "no reason recorded"


def evaluate(run_dir: pathlib.Path | str, baseline: dict[str, Any]) -> Verdict:
    """Verdict of a run directory against a baseline dict (from load_baseline / make_baseline)."""
    return evaluate_frame(load(run_dir), read_meta(run_dir), baseline)


# --------------------------------------------------------------------------- CLI glue

def _write(path: pathlib.Path | str, text: str, append: bool = False) -> None:
    p = pathlib.Path(path)
    try:
        p.parent.mkdir(parents=True, exist_ok=True)
        with open(p, "a" if append else "w") as f:
            f.write(text)
    except OSError as e:
        raise HarnessError(f"{p}: cannot write ({e.strerror})") from e


def gate_main(run: pathlib.Path | str, baseline_path: pathlib.Path | str,
              junit: pathlib.Path | str | None = None, summary: pathlib.Path | str | None = None) -> int:
    """`overlaybench gate RUN --baseline FILE [--junit FILE] [--summary FILE]`.

    Prints the verdict, writes JUnit XML and a markdown summary when asked (the summary is
    appended to $GITHUB_STEP_SUMMARY when no --summary is given and that variable is set).
    Returns 1 on a regression, 0 otherwise; HarnessError for bad input.
    """
    baseline = load_baseline(baseline_path)
    verdict = evaluate(run, baseline)
    md = verdict.to_markdown()
    if summary:
        _write(summary, md + "\n")
    elif os.environ.get("GITHUB_STEP_SUMMARY"):
        _write(os.environ["GITHUB_STEP_SUMMARY"], md + "\n", append=True)
    if junit:
        _write(junit, verdict.to_junit_xml())
    print(verdict.to_text())
    return 0 if verdict.ok else 1


def baseline_main(run: pathlib.Path | str, out: pathlib.Path | str) -> None:
    """`overlaybench baseline RUN -o FILE`: write the run's baseline and say what it holds."""
    b = make_baseline(run)
    p = save_baseline(b, out)
    few = [c for c in b["cases"] if len(c["ratios"]) < 5]
    print(f"baseline: {len(b['cases'])} gated cases from run {b['run_id']} written to {p}")
    if few:
        print(f"warning: {len(few)} case(s) have fewer than 5 repeats; "
              "the gate can hardly call a change significant against them")
