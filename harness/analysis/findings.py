"""What a run says, in sentences: each mode's cost against native, what the underlay MTU
changes, and which differences the run cannot tell from its own noise.

The rule (`separated`): a difference between two configurations is *distinguishable in
this run* when their repeats do not overlap — every repeat of one lies beyond every repeat
of the other — and each has at least two repeats. Otherwise the difference is inside the
spread of the repeats, and the findings say "not distinguishable in this run" instead of
quoting a ratio. With n and m repeats of two configurations that do not differ (their
values exchangeable), the ranges still separate with probability 2 / C(n + m, n)
(`chance_separation`): 1/3 at two repeats each, 1/10 at three, 1/126 at five. So
separated ranges at a run's few repeats are what the run measured, not a significance
test; the findings state that probability for the run at hand.

Each judged cell of the summary table (a % of native, and CPU per gigabit) is a `Judgement`
of the row's repeats against its native reference's repeats (the same underlay MTU, test,
streams and pair; the same placement, else native host-host). Each sentence is a list of
`Part`s; a part that quotes a number names its table cell: (row id, column key), where the
row id is the summary row's ROW_ID values.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Iterable, Sequence

import numpy as np
import pandas as pd

from harness.analysis import native as native_verdict, stats
from harness.analysis.summary import BY_KEY, COLUMNS, ROW_KEY, TCP_BW_TESTS, Column
from harness.core.looks import Looks
from harness.core.metrics import CPU_PER_GBIT
from harness.core.placements import rank as placement_rank

ROW_ID = ROW_KEY + ["streams"]
CPU_METRIC = CPU_PER_GBIT
# The value columns a % of native is computed for, and CPU per gigabit: the cells judged.
JUDGED = [c for c in COLUMNS if c.key in {p.of for p in COLUMNS if p.kind == "pct"}] + [BY_KEY["cpu"]]
PCT_OF = {p.of: p.key for p in COLUMNS if p.kind == "pct"}     # value column → its % of native column
NOT_DISTINGUISHABLE = "not distinguishable from native in this run"


separated, chance_separation = native_verdict.separated, native_verdict.chance_separation


@dataclasses.dataclass(frozen=True)
class Judgement:
    """A configuration's repeats against its reference's."""

    values: tuple[float, ...]
    ref: tuple[float, ...]

    @property
    def median(self) -> float:
        return float(np.median(self.values))

    @property
    def ref_median(self) -> float:
        return float(np.median(self.ref))

    @property
    def ratio(self) -> float:
        return self.median / self.ref_median if self.ref_median else math.nan

    @property
    def distinguishable(self) -> bool:
        return separated(self.values, self.ref)

    @property
    def n(self) -> int:
        return min(len(self.values), len(self.ref))


@dataclasses.dataclass(frozen=True)
class Part:
    """A piece of a sentence; `cell` = (row id, column key) when it quotes a table cell."""

    text: str
    cell: tuple | None = None
    strong: bool = False


@dataclasses.dataclass(frozen=True)
class Finding:
    kind: str                   # "cost", "mtu", "noise" or "mtu_check"
    parts: tuple[Part, ...]

    @property
    def text(self) -> str:
        return "".join(p.text for p in self.parts)


# --------------------------------------------------------------------------- judging cells

def _metric(col: Column) -> str:
    return CPU_METRIC if col.kind == "cpu" else str(col.metric)


def _tests(col: Column) -> tuple[str, ...]:
    return TCP_BW_TESTS if col.kind == "cpu" else col.tests


def cell_judgements(summary: pd.DataFrame, df: pd.DataFrame) -> dict[tuple, Judgement]:
    """(row id, value column key) → the Judgement behind that row's % of native (or CPU) cell.

    The repeats are picked as the summary picks its medians: the row's own test and stream
    count for TCP throughput, CPU and the per-stream columns; otherwise the first of the
    column's tests present and the lowest stream count.
    """
    values = native_verdict.repeat_values(df)
    native = native_verdict.native_repeats(values)
    index = {c: i for i, c in enumerate(stats.CONFIG_KEY)}
    by_row: dict[tuple, list[tuple]] = {}
    for k in values:
        d = dict(zip(stats.CONFIG_KEY + ["metric"], k))
        by_row.setdefault(tuple(d[c] for c in ROW_KEY) + (d["metric"],), []).append(k)

    out: dict[tuple, Judgement] = {}
    for r in summary.to_dict("records"):
        if r["mode"] == stats.NATIVE:
            continue
        rid = tuple(stats.key_value(r[c]) for c in ROW_ID)
        for col in JUDGED:
            tests = _tests(col)
            cands = [k for k in by_row.get(tuple(rid[:len(ROW_KEY)]) + (_metric(col),), [])
                     if k[index["test"]] in tests]
            if col is BY_KEY["tcp"] or col.kind == "cpu" or col.by_streams:
                cands = [k for k in cands if k[index["streams"]] == rid[-1]
                         and (not r.get("tcp_test") or k[index["test"]] == r["tcp_test"])]
            if not cands:
                continue
            k = min(cands, key=lambda k: (tests.index(k[index["test"]]), k[index["streams"]] or 0))
            reference = native_verdict.native_reference(native, k)
            if reference:
                out[(rid, col.key)] = Judgement(tuple(values[k].values()), tuple(reference))
    return out


# --------------------------------------------------------------------------- sentences

def _fmt_pct(x: float) -> str:
    return f"{x:.0f} %" if abs(x) >= 10 else f"{x:.1f} %"


def _fmt_times(x: float) -> str:
    return f"{x:.0f}×" if x >= 10 else f"{x:.1f}×"


def _label(r: dict[str, Any], variants: bool) -> str:
    parts = [str(r["placement"])]
    if variants:
        parts.append(f"overlay MTU {stats.key_value(r['overlay_mtu'])}")
    if r.get("pair") is not None:
        parts.append(str(r["pair"]))
    return ", ".join(parts)


def _quote(col: Column, j: Judgement, rid: tuple) -> Part:
    """One judged number as a part quoting its table cell."""
    cell = (rid, PCT_OF.get(col.key, col.key))
    if not j.distinguishable:
        return Part("not distinguishable", cell)
    if stats.higher_is_better(_metric(col)):
        return Part(_fmt_pct(100 * j.ratio), cell)
    return Part(_fmt_times(j.ratio), cell)


def _aspects(cols_present: set[str]) -> list[Column]:
    """The columns a cost sentence speaks of, in order: throughput, latency, tail, packet rate, CPU."""
    keys = ["tcp"] + (["udp_bw"] if "tcp" not in cols_present else []) + ["lat"]
    keys += (["udp_lat"] if "lat" not in cols_present else [])
    keys += (["ping"] if not {"lat", "udp_lat"} & cols_present else []) + ["p99"]
    pps = [c.key for c in JUDGED if c.key.startswith("pps") and c.key in cols_present]
    keys += pps[:1] + ["cpu"]
    return [BY_KEY[k] for k in keys if k in cols_present]


_WHAT = {"cpu": "CPU per gigabit", "ping": "ping round-trip time"}


def _what(col: Column) -> str:
    return _WHAT.get(col.key, col.what)


def _clause(col: Column, cells: list[tuple[dict, Judgement]], variants: bool) -> list[Part]:
    """One aspect of a cost sentence: its figure per placement, or that none can be told from native."""
    named = len(cells) > 1 or variants or cells[0][0].get("pair") is not None

    def cell(r: dict) -> tuple:
        return (_rid(r), PCT_OF.get(col.key, col.key))

    if not any(j.distinguishable for _, j in cells):
        if not named:
            return [Part(f"{_what(col)} "), Part(NOT_DISTINGUISHABLE, cell(cells[0][0]))]
        parts = [Part(f"{_what(col)} {NOT_DISTINGUISHABLE} (")]
        for i, (r, _) in enumerate(cells):
            parts += [Part(", " if i else ""), Part(_label(r, variants), cell(r))]
        return parts + [Part(")")]
    higher = stats.higher_is_better(_metric(col))
    suffix = " of native" if higher else " native's"
    mixed = not all(j.distinguishable for _, j in cells)
    parts = [Part(f"{_what(col)} " + ("at " if higher and not mixed else ""))]
    for i, (r, j) in enumerate(cells):
        parts.append(Part("" if i == 0 else (" and " if i == len(cells) - 1 else ", ")))
        parts.append(_quote(col, j, _rid(r)) if j.distinguishable else Part(NOT_DISTINGUISHABLE, cell(r)))
        if mixed and j.distinguishable:
            parts.append(Part(suffix))
        if named:
            parts.append(Part(f" ({_label(r, variants)})"))
    return parts + ([] if mixed else [Part(suffix)])


def _cost_sentence(mode: str, mtu: Any, rows: list[dict], judged: dict[tuple, Judgement]) -> Finding | None:
    """"MODE at underlay MTU U: throughput …; latency …; CPU per gigabit …." from the rows' judged cells."""
    variants = len({(r["overlay_mtu"], r["placement"], r.get("pair")) for r in rows}) > len(
        {(r["placement"], r.get("pair")) for r in rows})
    rids = {_rid(r) for r in rows}
    present = {col for (rid, col) in judged if rid in rids}
    clauses = []
    for col in _aspects(present):
        cells = [(r, judged[(_rid(r), col.key)]) for r in rows if (_rid(r), col.key) in judged]
        if cells:
            clauses.append(_clause(col, cells, variants))
    if not clauses:
        return None
    parts: list[Part] = [Part(mode, strong=True), Part(f" at underlay MTU {mtu}: ")]
    for i, clause in enumerate(clauses):
        parts += ([Part("; ")] if i else []) + clause
    parts.append(Part("."))
    return Finding("cost", tuple(p for p in parts if p.text))


def _rid(r: dict[str, Any]) -> tuple:
    return tuple(stats.key_value(r[c]) for c in ROW_ID)


def _lowest_streams(rows: Iterable[dict]) -> list[dict]:
    """One row per (overlay MTU, placement, pair): the lowest stream count's, in table order."""
    seen: dict[tuple, dict] = {}
    for r in sorted(rows, key=lambda r: (r["streams"] if r["streams"] == r["streams"] and r["streams"] is not None
                                         else math.inf)):
        seen.setdefault((stats.key_value(r["overlay_mtu"]), r["placement"], r.get("pair")), r)
    return sorted(seen.values(), key=lambda r: (placement_rank(r["placement"]), str(r.get("pair")),
                                                stats.key_value(r["overlay_mtu"]) or 0))


def _mtu_sentences(rows_by: dict[tuple, list[dict]], judged: dict[tuple, Judgement],
                   ratios: dict[tuple, list[float]], looks: Looks) -> list[Finding]:
    """Per mode measured at two or more underlay MTUs (in `looks`' order): its TCP throughput
    share at the lowest against the highest, per placement, judged on the per-repeat ratios to native."""
    out = []
    modes = sorted({m for m, _ in rows_by}, key=looks.rank)
    for mode in modes:
        mtus = sorted(u for m, u in rows_by if m == mode)
        if len(mtus) < 2:
            continue
        lo, hi = mtus[0], mtus[-1]
        lo_rows = {(r["placement"], r.get("pair")): r for r in _lowest_streams(rows_by[(mode, lo)])}
        parts: list[Part] = []
        for r_hi in _lowest_streams(rows_by[(mode, hi)]):
            r_lo = lo_rows.get((r_hi["placement"], r_hi.get("pair")))
            if r_lo is None:
                continue
            j_lo, j_hi = judged.get((_rid(r_lo), "tcp")), judged.get((_rid(r_hi), "tcp"))
            a, b = ratios.get(_rid(r_lo)), ratios.get(_rid(r_hi))
            if j_lo is None or j_hi is None or not a or not b:
                continue
            where = f" ({_label(r_hi, False)})"
            cells = ((_rid(r_lo), "bw_pct"), (_rid(r_hi), "bw_pct"))
            if parts:
                parts.append(Part("; "))
            if separated(a, b):
                parts += [Part("from "), Part(_fmt_pct(100 * j_lo.ratio), cells[0]), Part(" to "),
                          Part(_fmt_pct(100 * j_hi.ratio), cells[1]), Part(where)]
            else:
                parts += [Part("not distinguishably ("), Part(_fmt_pct(100 * j_lo.ratio), cells[0]), Part(" → "),
                          Part(_fmt_pct(100 * j_hi.ratio), cells[1]), Part(")" + where)]
        if parts:
            out.append(Finding("mtu", (Part(mode, strong=True),
                                       Part(f": raising the underlay MTU from {lo} to {hi} changes TCP throughput "
                                            "as a share of native "), *parts, Part("."))))
    return out


def _tcp_ratios(df: pd.DataFrame, summary: pd.DataFrame) -> dict[tuple, list[float]]:
    """Row id → the per-repeat TCP throughput ratios to native of that row's test."""
    rr = stats.repeat_ratios(df, ["throughput_bps"])
    out: dict[tuple, list[float]] = {}
    tests = {_rid(r): r.get("tcp_test") for r in summary.to_dict("records")}
    for r in rr.to_dict("records"):
        rid = _rid(r)
        if tests.get(rid) == r["test"]:
            out.setdefault(rid, []).append(float(r["ratio"]))
    return out


def _fraction(p: float) -> str:
    inv = 1 / p
    return f"1 in {inv:.0f}" if inv >= 2 else f"{p:.2f}"


def findings(summary: pd.DataFrame, df: pd.DataFrame,
             judged: dict[tuple, Judgement] | None = None, looks: Looks | None = None) -> list[Finding]:
    """The run's findings in reading order: each mode's cost per underlay MTU, the MTU's
    effect, and what the run cannot tell apart. Modes in the order of `looks` (default: the
    run's own, as results.load put them in `df`)."""
    if summary.empty:
        return []
    looks = stats.looks_of(df) if looks is None else looks
    judged = cell_judgements(summary, df) if judged is None else judged
    rows_by: dict[tuple, list[dict]] = {}
    for r in summary.to_dict("records"):
        if r["mode"] != stats.NATIVE:
            rows_by.setdefault((r["mode"], stats.key_value(r["underlay_mtu"])), []).append(r)
    out = []
    for mtu in sorted({u for _, u in rows_by}, key=lambda u: (u is None, u or 0)):
        for mode in sorted({m for m, u in rows_by if u == mtu}, key=looks.rank):
            f = _cost_sentence(mode, mtu, _lowest_streams(rows_by[(mode, mtu)]), judged)
            if f is not None:
                out.append(f)
    out += _mtu_sentences(rows_by, judged, _tcp_ratios(df, summary), looks)
    if judged:
        nd = sum(1 for j in judged.values() if not j.distinguishable)
        ns = [j.n for j in judged.values() if j.n >= 2]
        text = (f"{nd} of {len(judged)} comparisons with native are not distinguishable in this run: "
                "the repeats' ranges overlap (or a side has a single repeat); the tables mark them ≈. ")
        if ns:
            n = min(ns)
            text += (f"With {n} repeats a side, two configurations that do not differ still show separated "
                     f"ranges {_fraction(chance_separation(n, n))} times, so the ratios quoted are what this "
                     "run measured, not a significance test.")
        out.append(Finding("noise", (Part(text.strip()),)))
    return out


# --------------------------------------------------------------------------- the MTU check

MTU_VERDICT = "verdict"        # the column of a path's verdict in the report's MTU section: what findings link to


def mtu_path_id(p: dict[str, Any]) -> tuple:
    """A judged path's row id in the report's MTU section (a finding's cell names it with
    MTU_VERDICT): the paths' own keys, one row per mode, MTUs, placement and direction."""
    return ("mtu", p.get("underlay_mtu"), p.get("mode"), p.get("overlay_mtu"), p.get("placement"), p.get("src"),
            p.get("dst"))


def mtu_findings(paths: Sequence[dict[str, Any]]) -> list[Finding]:
    """A sentence per mode with paths not ok in the run's MTU check (`run --mtu-check`,
    run.json's `mtu_check`): each verdict, its paths and its fix, as analysis/mtu.py judged
    them when the check ran; nothing here judges again. Modes in the check's order."""
    groups: dict[str, dict[tuple, list[dict[str, Any]]]] = {}
    for p in paths:
        if p.get("verdict") in (None, "ok"):
            continue
        key = (p["verdict"], p.get("fix") or "", p.get("placement"), p.get("overlay_mtu"), p.get("underlay_mtu"))
        groups.setdefault(str(p.get("mode")), {}).setdefault(key, []).append(p)
    out = []
    for mode, by in groups.items():
        parts: list[Part] = [Part(mode, strong=True), Part(": the MTU check found ")]
        for i, ((verdict, fix, placement, overlay, underlay), ps) in enumerate(by.items()):
            parts += [Part("; " if i else ""), Part(verdict, strong=True), Part(" on ")]
            for k, p in enumerate(ps):
                where = f"{p.get('src')}→{p.get('dst')}"
                parts += [Part(", " if k else ""), Part(where, (mtu_path_id(p), MTU_VERDICT))]
            parts.append(Part(f" ({placement}, overlay MTU {overlay} over underlay {underlay})"))
            if fix:
                parts.append(Part(f"; fix: {fix}"))
        parts.append(Part("."))
        out.append(Finding("mtu_check", tuple(p for p in parts if p.text)))
    return out
