"""The one verdict against native: whether a configuration's repeats are distinct from its native
reference's, decided here once and carried by every surface (the text table's ≈, the CSV and
JSON `<field>_distinct` columns, the report's marks, the exports' label or field, the findings).

The rule (`separated`): a difference is *distinguishable in this run* when the two sets of
repeats do not overlap — every repeat of one lies beyond every repeat of the other — and each
has at least two repeats. The native reference of a (config, metric) is native at the same
underlay MTU, test, streams and pair, at the same placement, else host-host (`native_reference`).
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import pandas as pd

from harness.analysis.stats import CONFIG_KEY, NATIVE, TCP_BW_TESTS, cpu_per_gbit, key_value, ok_rows
from harness.core import metrics
from harness.core.placements import REFERENCE


def with_verdict(summary: pd.DataFrame, df: pd.DataFrame) -> pd.DataFrame:
    """`stats.with_native` output plus `distinct`: True when the row's repeats (in `df`, the
    measurements it came from) are separated from its native reference's, False when they
    overlap (shown as ≈), None for native itself or where either side is missing."""
    s = summary.copy()
    values = repeat_values(df)
    refs = native_repeats(values)
    s["distinct"] = pd.Series([distinct_from_native(refs, values, k) for k in (
        tuple(key_value(r[c]) for c in CONFIG_KEY + ["metric"]) for r in s.to_dict("records"))],
        dtype=object, index=s.index)
    return s


def separated(a: Sequence[float], b: Sequence[float]) -> bool:
    """Whether two sets of repeats do not overlap, with at least two repeats in each: a difference
    *distinguishable in this run*. With n and m repeats of configurations that do not differ, the
    ranges still separate with probability 2 / C(n + m, n) (`chance_separation`)."""
    if len(a) < 2 or len(b) < 2:
        return False
    return min(a) > max(b) or max(a) < min(b)


def chance_separation(n: int, m: int) -> float:
    """P(the ranges of n and m exchangeable repeats separate): either set wholly above the other."""
    if n < 2 or m < 2:
        return 0.0
    return 2 / math.comb(n + m, n)


def repeat_values(df: pd.DataFrame) -> dict[tuple, dict[Any, float]]:
    """(CONFIG_KEY values…, metric) → {repeat: value}; CPU per gigabit of the TCP throughput
    tests under metrics.CPU_PER_GBIT."""
    out: dict[tuple, dict[Any, float]] = {}
    ok = ok_rows(df)
    if not ok.empty:
        per = ok.groupby(CONFIG_KEY + ["metric", "repeat"], dropna=False, sort=False)["value"].median()
        for k, v in per.items():
            k = tuple(key_value(x) for x in k)
            out.setdefault(k[:-1], {})[k[-1]] = float(v)
    for r in cpu_per_gbit(df, TCP_BW_TESTS).to_dict("records"):
        k = tuple(key_value(r[c]) for c in CONFIG_KEY) + (metrics.CPU_PER_GBIT,)
        out.setdefault(k, {})[key_value(r["repeat"])] = float(r[metrics.CPU_PER_GBIT])
    return out


def native_repeats(values: dict[tuple, dict[Any, float]]) -> dict[tuple, list[float]]:
    """(underlay MTU, placement, test, streams, pair, metric) → native's repeats there."""
    index = {c: i for i, c in enumerate(CONFIG_KEY + ["metric"])}
    out: dict[tuple, list[float]] = {}
    for k, reps in values.items():
        if k[index["mode"]] == NATIVE:
            nk = tuple(k[index[c]] for c in ("underlay_mtu", "placement", "test", "streams", "pair", "metric"))
            out.setdefault(nk, []).extend(reps.values())
    return out


def native_reference(refs: dict[tuple, list[float]], key: tuple) -> list[float] | None:
    """The native repeats a (CONFIG_KEY…, metric) key is judged against: the same underlay MTU,
    test, streams, pair and placement, else native host-host."""
    d = dict(zip(CONFIG_KEY + ["metric"], key))
    for placement in (d["placement"], REFERENCE):
        got = refs.get((d["underlay_mtu"], placement, d["test"], d["streams"], d["pair"], d["metric"]))
        if got:
            return got
    return None


def distinct_from_native(refs: dict[tuple, list[float]], values: dict[tuple, dict[Any, float]],
                         key: tuple) -> bool | None:
    """The verdict for one (CONFIG_KEY…, metric): True when its repeats and native's are separated,
    False when they overlap, None for native itself or where either side is missing."""
    if key[0] == NATIVE or key not in values:
        return None
    ref = native_reference(refs, key)
    if not ref:
        return None
    return separated(list(values[key].values()), ref)
