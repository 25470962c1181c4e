"""What every export says: a run's cases, each metric's median and spread over repeats, its
ratio to native and the verdict against native, named by the one metric table
(harness/core/metrics.py) that every format reads.

A *case* here is one configuration (harness.analysis.stats.CONFIG_KEY: mode, underlay MTU,
overlay MTU, placement, test, streams, pair) with its datapath; for each metric it
measured, the median, min and max over its repeats, their count, the median's ratio to
native where the run has a native reference, and whether its repeats are distinct from
native's (the ≈ verdict of the table and the report). CPU-seconds per gigabit of the TCP
throughput tests (`stats.cpu_per_gbit`) is a metric of its own. A latency is named for its
trip (`metrics.for_test`): one-way figures and round trips never share a name.
"""

from __future__ import annotations

import dataclasses
import math
import pathlib
from typing import Any

from harness import results
from harness.analysis import native, stats
from harness.core import metrics as table
from harness.core.errors import HarnessError
from harness.core.metrics import CPU_PER_GBIT, Metric

__all__ = ["CPU_PER_GBIT", "Case", "Export", "Metric", "Value", "labels", "load"]


@dataclasses.dataclass(frozen=True)
class Value:
    """One metric of one case, in the measurement's own unit."""

    metric: Metric
    median: float
    lo: float
    hi: float
    n: int
    pct_of_native: float | None
    unit: str = ""               # as measurements.jsonl records it
    distinct: bool | None = None  # repeats separated from native's; None: native itself, or no reference

    @property
    def ratio(self) -> float | None:
        """The median over native's, rounded; None without a native reference."""
        return None if self.pct_of_native is None else table.significant(self.pct_of_native / 100, 4)

    @property
    def verdict(self) -> str | None:
        """"distinct" or "not distinct" (≈) from native; None where there is no verdict."""
        return None if self.distinct is None else ("distinct" if self.distinct else "not distinct")


@dataclasses.dataclass(frozen=True)
class Case:
    name: str                    # mode/u…/o…/placement/test/p…[/pair], as measurements.jsonl names it
    config: dict[str, Any]       # CONFIG_KEY → value, plus datapath
    values: tuple[Value, ...]


@dataclasses.dataclass(frozen=True)
class Export:
    run_id: str
    meta: dict[str, Any]
    cases: tuple[Case, ...]


def _case_name(c: dict[str, Any]) -> str:
    name = f"{c['mode']}/u{c['underlay_mtu']}/o{c['overlay_mtu']}/{c['placement']}/{c['test']}/p{c['streams']}"
    return name + (f"/{c['pair']}" if c.get("pair") is not None else "")


def _num(v: Any) -> float | None:
    try:
        x = float(v)
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) else None


def load(run: pathlib.Path | str) -> Export:
    """The run's cases with their metrics, in table order; HarnessError when it has none."""
    path = results.resolve_run(run)
    meta = results.read_meta(path)
    df = results.load(path)
    summary = native.with_verdict(stats.with_native(stats.summarize(df)), df)
    rows = summary.to_dict("records")
    cpu = stats.cpu_per_gbit(df, stats.TCP_BW_TESTS)
    if not cpu.empty:
        values = native.repeat_values(df)
        refs = native.native_repeats(values)
        g = cpu.groupby(stats.CONFIG_KEY, dropna=False, sort=False)[CPU_PER_GBIT]
        for k, series in g:
            k = tuple(stats.key_value(x) for x in k)
            key = k + (CPU_PER_GBIT,)
            ref = native.native_reference(refs, key)
            med = float(series.median())
            rows.append({**dict(zip(stats.CONFIG_KEY, k)), "metric": CPU_PER_GBIT, "unit": "", "n": len(series),
                         "median": med, "min": float(series.min()), "max": float(series.max()),
                         "pct_of_native": 100 * med / float(_median(ref)) if ref and _median(ref) else None,
                         "distinct": native.distinct_from_native(refs, values, key)})
    datapaths = {}
    names = {}
    for r in stats.ok_rows(df).to_dict("records"):
        k = tuple(stats.key_value(r[c]) for c in stats.CONFIG_KEY)
        datapaths.setdefault(k, r.get("datapath"))
        names.setdefault(k, r.get("case"))
    by_case: dict[tuple, list[Value]] = {}
    for r in rows:
        k = tuple(stats.key_value(r[c]) for c in stats.CONFIG_KEY)
        med, lo, hi = _num(r["median"]), _num(r["min"]), _num(r["max"])
        if med is None or lo is None or hi is None:
            continue
        unit = r.get("unit") if isinstance(r.get("unit"), str) else ""
        distinct = r.get("distinct")
        by_case.setdefault(k, []).append(Value(
            table.for_test(r["metric"], r.get("test"), unit), med, lo, hi, int(r["n"]),
            _num(r.get("pct_of_native")), unit, distinct if isinstance(distinct, bool) else None))
    if not by_case:
        raise HarnessError(f"{path}: no successful measurements to export")
    cases = []
    for k, values_ in by_case.items():
        config = dict(zip(stats.CONFIG_KEY, k))
        config["datapath"] = datapaths.get(k) or config["mode"]
        name = names.get(k) if isinstance(names.get(k), str) else None
        cases.append(Case(name or _case_name(config), config, tuple(values_)))
    return Export(str(meta.get("run_id") or path.name), meta, tuple(cases))


def _median(values: list[float]) -> float:
    xs = sorted(values)
    n = len(xs)
    return xs[n // 2] if n % 2 else (xs[n // 2 - 1] + xs[n // 2]) / 2


LABELS = ["mode", "datapath", "underlay_mtu", "overlay_mtu", "placement", "test", "streams", "pair"]


def labels(case: Case) -> dict[str, str]:
    """The case's labels, as strings; an absent pair is left out."""
    return {k: str(case.config[k]) for k in LABELS if case.config.get(k) is not None}
