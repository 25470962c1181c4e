"""Numbers across host pairs: a hosts × hosts grid per mode, the pairs that stand out, a mesh's
aggregate and fairness.

Where a run has a pair dimension (harness/core/pairs.py), each summary row is one pair's.
`grid` lays a summary column out as hosts × hosts (client rows, server columns) for one
mode and placement. `outliers` names the pairs whose median is far from the median pair
of the same configuration, where their repeats say so: a two-sided Mann–Whitney U test of
the pair's repeats against the other pairs' pooled repeats, at α / (the number of pairs),
and at least OUTLIER_SHARE away. With few repeats no pair can be shown to stand out, and
none is named. `mesh` sums what every pair got at once, per repeat, with Jain's fairness
index over the flows and the slowest pair. Pure functions on the summary and the
measurements.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd

from harness.analysis import significance, stats
from harness.core.pairs import split
from harness.tools.common import jain

OUTLIER_SHARE = 0.25       # how far from the median pair a pair must be to be named
OUTLIER_ALPHA = 0.05       # shared by the pairs of one configuration


def hosts_of(pairs) -> list[str]:
    """The hosts the pairs name, in the order they first appear ("h0→h1" → h0, h1)."""
    out: dict[str, None] = {}
    for p in pairs:
        ends = split(p)
        if ends:
            out.update(dict.fromkeys(ends))
    return list(out)


def grid(rows: pd.DataFrame, col: str, hosts: list[str]) -> np.ndarray:
    """`col` of one mode's rows (one per pair) as a hosts × hosts array: [client, server];
    NaN where a pair was not measured."""
    g = np.full((len(hosts), len(hosts)), np.nan)
    for r in rows.to_dict("records"):
        ends, v = split(r.get("pair")), r.get(col)
        if ends is None or v is None or v != v:
            continue
        a, b = ends
        if a in hosts and b in hosts:
            g[hosts.index(a), hosts.index(b)] = float(v)
    return g


@dataclasses.dataclass(frozen=True)
class Outlier:
    mode: str
    underlay_mtu: int
    placement: str
    test: str
    metric: str
    pair: str
    value: float             # the pair's median
    median_pair: float       # the median of the configuration's pair medians
    p: float

    @property
    def share(self) -> float:
        return self.value / self.median_pair - 1

    def __str__(self) -> str:
        where = "above" if self.share > 0 else "below"
        return (f"{self.pair}: {abs(self.share) * 100:.0f} % {where} the median pair ({self.mode}, "
                f"{self.placement}, {self.test} {self.metric}, p = {self.p:.2g})")


def outliers(df: pd.DataFrame, metrics: tuple[str, ...] = ("throughput_bps", "latency_us")) -> list[Outlier]:
    """The pairs that stand out in each configuration of a run with pairs (module doc)."""
    d = stats.ok_rows(df)
    if not stats.has_pairs(d):
        return []
    d = d[d["pair"].notna() & d["metric"].isin(list(metrics))]
    keys = [c for c in stats.CONFIG_KEY if c != "pair"] + ["metric"]
    out = []
    for k, g in d.groupby(keys, dropna=False, sort=False):
        by_pair = {p: list(x["value"]) for p, x in g.groupby("pair", sort=False)}
        if len(by_pair) < 3:
            continue
        medians = {p: float(np.median(v)) for p, v in by_pair.items()}
        mid = float(np.median(list(medians.values())))
        if mid == 0:
            continue
        conf = dict(zip(keys, (stats.key_value(x) for x in k)))
        for p, v in by_pair.items():
            if abs(medians[p] / mid - 1) < OUTLIER_SHARE:
                continue
            rest = [x for q, xs in by_pair.items() if q != p for x in xs]
            t = significance.mann_whitney(v, rest, alpha=OUTLIER_ALPHA / len(by_pair))
            if t.significant(OUTLIER_ALPHA / len(by_pair)):
                out.append(Outlier(conf["mode"], conf["underlay_mtu"], conf["placement"], conf["test"],
                                   conf["metric"], p, medians[p], mid, float(t.p)))
    return out


@dataclasses.dataclass(frozen=True)
class Mesh:
    """Every pair of one configuration measured at once: medians over the repeats in which
    every pair was measured."""

    mode: str
    underlay_mtu: int
    placement: str
    test: str
    pairs: int
    repeats: int
    aggregate_bps: float
    jain: float
    slowest: str
    slowest_bps: float

    def __str__(self) -> str:
        return (f"{self.mode}, {self.placement}, {self.test}: {self.pairs} pairs at once, "
                f"{self.aggregate_bps / 1e9:.3g} Gbit/s in all, Jain's index {self.jain:.2f}, slowest "
                f"{self.slowest} at {self.slowest_bps / 1e9:.3g} Gbit/s "
                f"({self.slowest_bps / self.aggregate_bps * 100:.0f} % of the total; medians over "
                f"{self.repeats} repeat{'s' if self.repeats != 1 else ''})")


def mesh(df: pd.DataFrame) -> list[Mesh]:
    """Per configuration of a `mesh` run: the aggregate throughput, Jain's index over the
    pairs' flows and the slowest pair."""
    d = stats.ok_rows(df)
    if not stats.has_pairs(d):
        return []
    d = d[d["pair"].notna() & (d["metric"] == "throughput_bps")]
    keys = [c for c in stats.CONFIG_KEY if c != "pair"]
    out = []
    for k, g in d.groupby(keys, dropna=False, sort=False):
        pairs = sorted(set(g["pair"]))
        per = []
        for _r, rg in g.groupby("repeat", sort=True):
            v = rg.groupby("pair")["value"].median()
            if len(v) == len(pairs) and len(pairs) > 1:
                per.append(v)
        if not per:
            continue
        conf = dict(zip(keys, (stats.key_value(x) for x in k)))
        slow = pd.concat(per, axis=1).median(axis=1)
        out.append(Mesh(conf["mode"], conf["underlay_mtu"], conf["placement"], conf["test"], len(pairs), len(per),
                        float(np.median([v.sum() for v in per])), float(np.median([jain(list(v)) for v in per])),
                        str(slow.idxmin()), float(slow.min())))
    return out


def lines(df: pd.DataFrame, meta: dict) -> list[str]:
    """What `show` and the report say about a run's pairs (`meta`: its run.json): how they
    shared the wire, a mesh's aggregate and fairness, and the pairs that stand out."""
    schedule = (meta.get("scenario") or {}).get("schedule")
    out = []
    if schedule in ("rounds", "mesh"):
        out.append("Pairs measured at once shared the fabric (schedule "
                   f"{schedule}): each pair's figures are what it got beside the others, not alone.")
    if schedule == "mesh":
        out += [str(m) + "." for m in mesh(df)]
    out += [str(o) + "." for o in outliers(df)]
    return out


def zones_of(meta: dict) -> dict[str, str]:
    """Each host's zone, by the name its pairs use, from run.json's testbed (Kubernetes nodes'
    topology.kubernetes.io/zone); {} where none is recorded."""
    hosts = ((meta or {}).get("testbed") or {}).get("hosts")      # the lab's: a count
    if not isinstance(hosts, dict):
        return {}
    return {h["name"]: h["zone"] for h in hosts.values() if isinstance(h, dict) and h.get("name") and h.get("zone")}
