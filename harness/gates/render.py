"""A gate's verdict as text (the terminal), markdown (a CI step summary), JUnit XML and JSON.

Pure functions of a `verdict.Verdict`; judging happens elsewhere (baseline.py, compare.py).
"""

from __future__ import annotations

import json
import math
import os
import pathlib
import xml.etree.ElementTree as ET
from typing import Any

from harness.analysis.tablefmt import json_value
from harness.core import metrics
from harness.core.errors import HarnessError
from harness.gates.verdict import (
    AB,
    ERROR,
    FAIL,
    IMPROVED,
    MISSING,
    NEW,
    NOT_ENOUGH,
    PASS,
    SKIPPED,
    UNDECIDED,
    CaseVerdict,
    Verdict,
)

ICON = {PASS: "✅", FAIL: "❌", ERROR: "❌", IMPROVED: "🚀", NOT_ENOUGH: "⚠️", MISSING: "⚠️", SKIPPED: "⚠️", NEW: "🆕",
        UNDECIDED: "❔"}
NOT_JUDGED = (NOT_ENOUGH, MISSING, SKIPPED, UNDECIDED)
EXIT_UNDECIDED = 4           # compare: nothing slower, something undecided when the pairs ran out


def text(v: Verdict) -> str:
    lines = [v.headline()]
    lines += [f"  FAIL {c.headline()}" for c in v.failures]
    lines += [f"  note {c.headline()}" for c in v.cases if c.status in (NOT_ENOUGH, UNDECIDED)]
    lines += [f"  warning: {w}" for w in v.warnings]
    return "\n".join(lines)


def _pct(x: float | None) -> str:
    return "—" if x is None or not math.isfinite(x) else f"{x * 100:.1f} %"


def _signed(x: float | None) -> str:
    return "—" if x is None or not math.isfinite(x) else f"{x * 100:+.1f} %"


def _tol(x: float | None) -> str:
    return "—" if x is None else f"±{x * 100:.0f} %"


def _p(x: float | None) -> str:
    return "—" if x is None else f"{x:.3g}"


def unit_value(metric: str, x: float | None) -> str:
    """A measured value with its unit, as the metric table shows it: 8.41 Gbit/s, 52.3 µs."""
    return metrics.display(metric, x)


def _intro(v: Verdict) -> str:
    if v.kind == AB:
        arms = "; ".join(f"{label}: {origin}" for label, origin in v.arms.items())
        return (f"Run `{v.run_id}`: head against base, both builds deployed in turn within every repeat"
                f"{f' ({arms})' if arms else ''}. Pairs are judged in repeat order until each case is "
                f"decided: \"slower\" or \"not slower\" than its tolerance (a sign mixture SPRT on blocks "
                f"of two pairs; α = {v.alpha} for the whole comparison), else undecided.")
    return (f"Run `{v.run_id}` against baseline from run `{v.baseline_run_id}`. "
            f"Ratios to native within each run; a case fails when the change is significant "
            f"(one-sided Mann–Whitney U, α = {v.alpha}) and beyond its tolerance.")


def markdown(v: Verdict) -> str:
    ab = v.kind == AB
    title = {FAIL: "❌ failed", UNDECIDED: "❔ undecided"}.get(v.status, "✅ passed")
    out = [f"## overlaybench {v.title}: {title}", "", _intro(v), "",
           f"**{v.headline()}**", ""]
    for w in v.warnings:
        out.append(f"> ⚠️ {w}")
    if v.warnings:
        out.append("")
    then, now = ("Base", "Head") if ab else ("Baseline % of native", "Now % of native")
    hosts = any(c.case.get("pair") for c in v.cases)       # a run of several host pairs
    head = ["", "Mode", "Underlay MTU", "Overlay MTU", "Placement", *(["Hosts"] if hosts else []), "Test",
            "Streams", "Metric", then, now, "Change", "Tolerance", "p", *(["Pairs"] if ab else []), "Verdict"]

    def cell(c: CaseVerdict, x: float | None) -> str:
        return unit_value(str(c.case["metric"]), x) if ab else _pct(x)

    def table(rows: list[CaseVerdict]) -> list[str]:
        t = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        for c in rows:
            k = c.case
            t.append("| " + " | ".join([
                ICON.get(c.status, ""), str(k["mode"]), str(k["underlay_mtu"]), str(k["overlay_mtu"]),
                str(k["placement"]), *([str(k.get("pair") or "—")] if hosts else []), str(k["test"]),
                str(k["streams"]), str(k["metric"]),
                cell(c, c.baseline_median), cell(c, c.current_median), _signed(c.change),
                _tol(c.tolerance), _p(c.p), *([str(c.pairs_used or "—")] if ab else []),
                c.status + (f": {c.message}" if c.failed else ""),
            ]).replace("\n", " ") + " |")
        return t

    if v.failures:
        out += ["### Regressions", ""] + table(v.failures) + [""]
    rest = [c for c in v.cases if not c.failed]
    if rest:
        out += ["<details><summary>All other cases</summary>", ""] + table(rest) + ["", "</details>", ""]
    return "\n".join(out)


def junit_xml(v: Verdict) -> str:
    suite = ET.Element("testsuite", name=f"overlaybench.{v.title}", tests=str(len(v.cases)),
                       failures=str(len(v.failures)), errors="0",
                       skipped=str(sum(c.status in NOT_JUDGED for c in v.cases)))
    if v.warnings:
        props = ET.SubElement(suite, "properties")
        for w in v.warnings:
            ET.SubElement(props, "property", name="warning", value=w)
    for c in v.cases:
        k = c.case
        tc = ET.SubElement(suite, "testcase", classname=f"overlaybench.{v.title}.{k['mode']}", name=c.name)
        if c.failed:
            msg = (f"{k['mode']} at underlay MTU {k['underlay_mtu']} (overlay MTU {k['overlay_mtu']}), "
                   f"{k['metric']} ({k['test']}, {k['placement']}{', ' + k['pair'] if k.get('pair') else ''}): "
                   f"{c.message}")
            f = ET.SubElement(tc, "failure", message=msg, type="regression" if c.status == FAIL else "case-failed")
            f.text = c.headline()
        elif c.status in NOT_JUDGED:
            ET.SubElement(tc, "skipped", message=f"{c.status}: {c.message}")
        else:
            ET.SubElement(tc, "system-out").text = f"{c.status}: {c.message}"
    ET.indent(suite)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(suite, encoding="unicode") + "\n"


def as_dict(v: Verdict) -> dict[str, Any]:
    """Every verdict as plain data (`--format json`)."""
    ab = v.kind == AB
    then, now = ("base", "head") if ab else ("baseline_ratio", "ratio")
    n_then, n_now = ("n_base", "n_head") if ab else ("n_baseline", "n_run")
    return {
        "kind": v.title,
        "ok": v.ok,
        "status": v.status,
        "headline": v.headline(),
        "run_id": v.run_id,
        "baseline_run_id": v.baseline_run_id,
        "arms": dict(v.arms),
        "alpha": v.alpha,
        "counts": v.counts(),
        "warnings": list(v.warnings),
        "cases": [{**{k: json_value(x) for k, x in c.case.items()}, "name": c.name, "status": c.status,
                   "failed": c.failed, "message": c.message, then: json_value(c.baseline_median),
                   now: json_value(c.current_median), "change": json_value(c.change), "p": json_value(c.p),
                   n_then: c.n_baseline, n_now: c.n_current, "tolerance": json_value(c.tolerance),
                   **({"pairs_used": c.pairs_used} if ab else {})}
                  for c in v.cases],
    }


def _write(path: pathlib.Path | str, content: str, append: bool = False) -> None:
    p = pathlib.Path(path)
    try:
        p.parent.mkdir(parents=True, exist_ok=True)
        with open(p, "a" if append else "w") as f:
            f.write(content)
    except OSError as e:
        raise HarnessError(f"{p}: cannot write ({e.strerror})") from e


def publish(v: Verdict, junit: pathlib.Path | str | None = None, summary: pathlib.Path | str | None = None,
            fmt: str = "text", extra: dict[str, Any] | None = None) -> int:
    """Print the verdict (text, or JSON with every case and `extra`), write the markdown
    summary (to `summary`, else appended to $GITHUB_STEP_SUMMARY when that is set) and
    JUnit XML when asked. Returns the exit code: 1 when a case regressed, else
    EXIT_UNDECIDED when a case is undecided, else 0."""
    if fmt not in ("text", "json"):
        raise HarnessError(f"unknown format {fmt!r}: use text or json")
    md = markdown(v)
    if summary:
        _write(summary, md + "\n")
    elif os.environ.get("GITHUB_STEP_SUMMARY"):
        _write(os.environ["GITHUB_STEP_SUMMARY"], md + "\n", append=True)
    if junit:
        _write(junit, junit_xml(v))
    print(json.dumps({**(extra or {}), **as_dict(v)}, indent=2) if fmt == "json" else text(v))
    return 1 if not v.ok else EXIT_UNDECIDED if v.undecided else 0
