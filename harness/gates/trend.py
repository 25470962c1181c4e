"""`overlaybench trend RESULTS_DIR`: steps in each case's ratio to native across stored runs.

The complete runs of RESULTS_DIR (A/B runs of `compare` left out) are grouped by what makes
their figures comparable: the scenario's name, the machine (hostname and CPU model from
run.json), the backend, the test duration and the rate cap. Within a group, each gated case
(mode, MTUs, placement, test, streams, pair and the test's headline metric, as the baseline
gate has them) gets one point per run: the median of that run's per-repeat ratios to
native, in the order the runs started.

A case with fewer than MIN_RUNS points says nothing. α is shared by the group's other
cases (Bonferroni), so a history with no step anywhere reports one with probability at
most α; a case too short for any step to reach its share (analysis/changepoint.py
`fewest_points`) is said to be so, not passed as flat. The rest are searched for steps
(Pettitt, binary segmentation). A step counts when it is also at least the metric's
tolerance (the gate's: 10 % throughput, 15 % latency); the command fails (exit 1) when a
step made a case worse.
"""

from __future__ import annotations

import dataclasses
import json
import pathlib
from typing import Any

import numpy as np

from harness.analysis import changepoint, stats
from harness.analysis.tablefmt import json_value
from harness.core.errors import HarnessError
from harness.gates.baseline import case_ratios, machine_facts
from harness.gates.verdict import CASE_FIELDS, DEFAULT_TOLERANCES, case_name
from harness import results

MIN_RUNS = 10
DEFAULT_ALPHA = 0.05


@dataclasses.dataclass
class CaseTrend:
    case: dict[str, Any]
    runs: list[str]                     # run ids, in start order
    values: list[float]                 # the run's median ratio to native
    steps: list[changepoint.Step]
    tolerance: float
    judged: bool                        # enough points for a step to reach the case's α

    @property
    def name(self) -> str:
        return case_name(self.case)

    def counted(self) -> list[changepoint.Step]:
        """The steps at least the tolerance in size."""
        return [s for s in self.steps if abs(s.change) >= self.tolerance]

    def worse(self) -> list[changepoint.Step]:
        hib = stats.higher_is_better(self.case["metric"])
        return [s for s in self.counted() if (s.change < 0) == hib]


@dataclasses.dataclass
class Group:
    scenario: str
    setup: dict[str, Any]               # machine, backend, duration, rate
    runs: list[str]
    alpha: float = DEFAULT_ALPHA
    cases: list[CaseTrend] = dataclasses.field(default_factory=list)
    short: int = 0                      # cases with fewer than MIN_RUNS points
    needs: int | None = None            # the points a case needs before any step can show

    @property
    def title(self) -> str:
        s = self.setup
        return (f"{self.scenario} on {s['machine']}, {s['backend']} backend, {s['duration']:g} s tests"
                + (f", rate {s['rate']}" if s["rate"] else ""))


def _setup(meta: dict[str, Any]) -> dict[str, Any]:
    m = machine_facts(meta)
    sc = meta.get("scenario") or {}
    duration = sc.get("duration")
    return {"machine": " ".join(x for x in (m["hostname"], m["cpu"] and f"({m['cpu']})") if x) or "?",
            "backend": str(meta.get("backend") or "?"),
            "duration": float(duration) if isinstance(duration, (int, float)) else 0.0,
            "rate": sc.get("rate") or None}


def _runs(results_dir: pathlib.Path) -> tuple[dict[tuple, list[tuple[str, pathlib.Path]]], list[str]]:
    """Complete, non-A/B runs by (scenario, setup), each list in start order; and warnings."""
    if not results_dir.is_dir():
        raise HarnessError(f"{results_dir}: not a directory of runs")
    groups: dict[tuple, list[tuple[str, str, pathlib.Path]]] = {}
    warnings = []
    for d in sorted(results_dir.iterdir()):
        if not (d / "run.json").is_file():
            continue
        try:
            meta = results.read_meta(d)
        except HarnessError as e:
            warnings.append(f"left out: {e}")
            continue
        if meta.get("compare") or meta.get("status") != "complete":
            continue
        name = str((meta.get("scenario") or {}).get("name") or "?")
        key = (name, tuple(sorted(_setup(meta).items())))
        groups.setdefault(key, []).append((str(meta.get("start") or d.name), d.name, d))
    return {k: [(rid, d) for _, rid, d in sorted(v)] for k, v in groups.items()}, warnings


def _points(run_dir: pathlib.Path, tolerances: dict[str, float]) -> dict[tuple, float]:
    """Per gated case: the run's median ratio to native (the stored-baseline gate's ratios)."""
    return {k: float(np.median(v)) for k, v in case_ratios(results.load(run_dir), tolerances).items()}


def analyse(results_dir: pathlib.Path | str, scenario: str | None = None, alpha: float = DEFAULT_ALPHA,
            tolerances: dict[str, float] | None = None) -> tuple[list[Group], list[str]]:
    tol = dict(DEFAULT_TOLERANCES if tolerances is None else tolerances)
    found, warnings = _runs(pathlib.Path(results_dir))
    if scenario is not None:
        found = {k: v for k, v in found.items() if k[0] == scenario}
        if not found:
            raise HarnessError(f"{results_dir}: no complete run of scenario {scenario!r}")
    out = []
    order = (lambda kv: (kv[0][0], [(k, "" if v is None else str(v)) for k, v in kv[0][1]]))
    for (name, setup), runs in sorted(found.items(), key=order):
        series: dict[tuple, list[tuple[str, float]]] = {}
        kept = []
        for rid, d in runs:
            try:
                points = _points(d, tol)
            except HarnessError as e:           # a damaged measurements.jsonl: that run alone
                warnings.append(f"left out: {e}")
                continue
            kept.append(rid)
            for key, v in points.items():
                series.setdefault(key, []).append((rid, v))
        if not kept:
            continue
        g = Group(name, dict(setup), kept, alpha)
        long = {k: s for k, s in series.items() if len(s) >= MIN_RUNS}
        g.short = len(series) - len(long)
        each = alpha / max(1, len(long))
        g.needs = changepoint.fewest_points(each)
        for key, s in long.items():
            case = dict(zip(CASE_FIELDS, key))
            values = [v for _, v in s]
            judged = g.needs is not None and len(values) >= g.needs
            g.cases.append(CaseTrend(case, [rid for rid, _ in s], values,
                                     changepoint.steps(values, each) if judged else [], tol[case["metric"]], judged))
        out.append(g)
    return out, warnings


def _step_line(c: CaseTrend, s: changepoint.Step) -> str:
    return (f"  {'WORSE' if s in c.worse() else 'better'} {c.name}: from run {c.runs[s.index]}, "
            f"{s.before * 100:.1f} % → {s.after * 100:.1f} % of native ({s.change * 100:+.1f} %, p = {s.p:.2g})")


def text(groups: list[Group], warnings: list[str]) -> str:
    lines = []
    for g in groups:
        lines.append(f"{g.title}: {len(g.runs)} runs ({g.runs[0]} … {g.runs[-1]})")
        judged = [c for c in g.cases if c.judged]
        unjudged = len(g.cases) - len(judged)
        if not g.cases:
            lines.append(f"  nothing to say: no case has {MIN_RUNS} runs yet")
            continue
        if unjudged:
            lines.append(f"  {unjudged} of {len(g.cases)} cases cannot show a step yet: at α = {g.alpha:g} shared by "
                         f"{len(g.cases)}, a case needs {g.needs or 'over 200'} runs (a step in its last few more)")
        if judged:
            left_out = f"; {g.short} with fewer than {MIN_RUNS} left out" if g.short else ""
            lines.append(f"  {len(judged)} case{'s' * (len(judged) != 1)} with {max(MIN_RUNS, g.needs or 0)} runs "
                         f"or more, α = {g.alpha:g} shared by {len(g.cases)}{left_out}")
            lines += [_step_line(c, s) for c in judged for s in c.counted()]
            if not any(c.counted() for c in judged):
                lines.append("  no step beyond its tolerance")
    lines += [f"warning: {w}" for w in warnings]
    return "\n".join(lines) if lines else "no complete run here"


def as_dict(groups: list[Group], warnings: list[str]) -> dict[str, Any]:
    return {"ok": not any(c.worse() for g in groups for c in g.cases), "min_runs": MIN_RUNS, "warnings": warnings,
            "groups": [{"scenario": g.scenario, **g.setup, "runs": g.runs, "alpha": g.alpha,
                        "runs_needed": g.needs, "cases_with_too_few_runs": g.short,
                        "cases": [{**{k: stats.key_value(v) for k, v in c.case.items()}, "name": c.name,
                                   "judged": c.judged, "runs": c.runs, "ratios": c.values,
                                   "tolerance": c.tolerance,
                                   "steps": [{"run_id": c.runs[s.index], "index": s.index, "before": s.before,
                                              "after": s.after, "change": json_value(s.change), "p": s.p,
                                              "beyond_tolerance": s in c.counted(), "worse": s in c.worse()}
                                             for s in c.steps]}
                                  for c in g.cases]} for g in groups]}


def trend_main(results_dir: str, scenario: str | None = None, alpha: float = DEFAULT_ALPHA,
               fmt: str = "text") -> int:
    """Exit 0 without a step for the worse, 1 with one."""
    if not 0 < alpha < 1:
        raise HarnessError(f"--alpha {alpha}: must be between 0 and 1")
    groups, warnings = analyse(results_dir, scenario, alpha)
    d = as_dict(groups, warnings)
    print(json.dumps(d, indent=2) if fmt == "json" else text(groups, warnings))
    return 0 if d["ok"] else 1
