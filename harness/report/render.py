"""One self-contained HTML report from one or more run directories.

`render(run_dirs, out_path)` loads each run (run.json + measurements.jsonl), builds the
findings (harness.analysis.findings), the seed-style tables (harness.analysis.summary) and
the figures (plots.py, PNG as data: URIs), and fills templates/report.html.j2. The file
needs nothing else: no external CSS, JS, fonts or images, so it opens offline and can be
attached to a CI run as is.

A run's page is SECTIONS in order, each a partial templates/sections/NAME.html.j2 under
the heading id `run<N>-NAME`. A section that needs data of its own names a builder:
`build(view)` runs once per run and its result is `run.sections[NAME]` in the partial.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import logging
import math
import pathlib
import re
from typing import Any, Callable, Sequence

import jinja2
import pandas as pd

from harness import __version__
from harness.analysis import findings as fnd, stats, summary as summ, tablefmt
from harness.analysis.fleet import lines as fleet_lines
from harness.core import metrics
from harness.core.errors import HarnessError
from harness.core.looks import Looks
from harness.report import breadth, facts, fleet, mtu, plots, style, under_load
from harness.results import load, read_meta, resolve_run, run_looks

log = logging.getLogger(__name__)

TEMPLATES = pathlib.Path(__file__).with_name("templates")

@dataclasses.dataclass
class RunView:
    """Everything the template shows about one run."""

    path: pathlib.Path
    run_id: str
    meta: dict[str, Any]
    df: pd.DataFrame
    summary: pd.DataFrame
    facts: list[tuple[str, Any]]
    derived: list[tuple[str, str]]
    tables: list[dict[str, Any]]
    notes: list[str]
    failures: list[dict[str, Any]]
    plots: list[style.Plot]
    plot_notes: list[str]
    n_rows: int
    n_ok: int
    pairs: list[str] = dataclasses.field(default_factory=list)   # what its host pairs say (analysis/fleet.py)
    index: int = 1                                                # its place in the report: ids run<index>-…
    command: str | None = None                                    # as the user typed it
    planned: list[list[Any]] = dataclasses.field(default_factory=list)   # configs_planned rows
    planned_columns: list[str] = dataclasses.field(default_factory=list)
    findings: list[list[dict[str, Any]]] = dataclasses.field(default_factory=list)   # sentences as parts
    heatmap: style.Plot | None = None
    sections: dict[str, Any] = dataclasses.field(default_factory=dict)   # builders' results by section
    looks: Looks = dataclasses.field(default_factory=Looks)      # how its modes look: its run.json's


@dataclasses.dataclass(frozen=True)
class Section:
    """One block of a run's page: templates/sections/NAME.html.j2, headed `title`."""

    name: str
    title: str
    build: Callable[[RunView], Any] | None = None


# A run's page, in reading order: the answer first, the facts last.
SECTIONS = [
    Section("findings", "Findings"),
    Section("mtu", "MTU", build=lambda view: mtu.section(view, cell_id, style.mode_color)),   # with --mtu-check
    Section("plots", "Plots"),
    Section("tables", "Tables"),
    Section("failed", "Failed cases"),
    Section("facts", "Run facts"),
]
ND_TITLE = "not distinguishable from native in this run: the repeats' ranges overlap"


# Cells that show a median with its min–max below: summary column, digits, number format.
_RANGE_CELLS = {c.key: (c.field, c.digits, tablefmt.number_format(c)) for c in summ.COLUMNS if c.ranged}
_CELL_CLASS = {"mode": "mode", "datapath": "nw", "placement": "nw"}


# A judged cell (findings.JUDGED) is marked in its % of native column, or in itself (CPU per gigabit);
# its mark is the summary's verdict field (analysis/native.py), the one the text table and CSV carry.
_MARKED = {fnd.PCT_OF.get(c.key, c.key): c.key for c in fnd.JUDGED}
_VERDICT_FIELD = {c.key: c.distinct_field for c in summ.COLUMNS if c.judged}


def cell_id(index: int, rid: tuple, key: str) -> str:
    """The HTML id of one table cell: run index, row id (findings.ROW_ID) and column key."""
    raw = "-".join("x" if v is None else str(v) for v in rid)
    return f"run{index}-" + re.sub(r"[^A-Za-z0-9_.-]+", "_", f"{raw}-{key}")


def _row_cells(r: dict[str, Any], c: dict[str, str], columns: list[tuple[str, str]],
               judged: dict[tuple, fnd.Judgement], index: int) -> list[dict[str, Any]]:
    """One summary row as the template's cells, in the order of `columns`."""
    cells = []
    rid = tuple(stats.key_value(r[k]) for k in fnd.ROW_ID)
    for key, title in columns:
        cell: dict[str, Any] = {"key": key, "cls": _CELL_CLASS.get(key, "num"), "text": c[key], "range": "",
                                "meter": None, "meter_title": "", "pill": key == "failed", "id": "", "nd": False,
                                "sb": key in summ.BY_KEY and bool(tablefmt.sender_mark(r, summ.BY_KEY[key]))}
        if key in _MARKED:
            cell["id"] = cell_id(index, rid, key)
        if key in _VERDICT_FIELD:
            cell["nd"] = r.get(_VERDICT_FIELD[key]) is False
        if key in _RANGE_CELLS:
            col, digits, fmt = _RANGE_CELLS[key]
            v = _cell(r, col, digits, fmt)
            cell.update(text=v["med"] + ("*" if key == "tcp" and c["tcp"].endswith("*") else ""), range=v["range"])
        elif key in tablefmt.PCT_CELLS:
            pct = r.get(key)
            if tablefmt.PCT_CELLS[key]:
                cell.update(meter=_clip(pct, 0, 100), meter_title="share of native throughput")
            else:
                cell.update(meter=_clip(100 * 100 / pct if pct else None, 0, 100),
                            meter_title="native latency / this latency")
        cells.append(cell)
    return cells


def _tables(summary: pd.DataFrame, judged: dict[tuple, fnd.Judgement], index: int,
            looks: Looks) -> list[dict[str, Any]]:
    if summary.empty:
        return []
    show_streams = tablefmt.streams_vary(summary)
    tables = []
    for mtu, part in summary.groupby("underlay_mtu", dropna=False, sort=False):
        columns = tablefmt.table_columns(part, show_streams)
        keys = [k for k, _ in columns]
        rows = []
        for r, c in zip(part.to_dict("records"), tablefmt.table_cells(part, marks=False)):
            color = style.mode_color(r["mode"], looks)
            rows.append({"r": r, "c": c, "color": color, "tint": style.tint(color),
                         "cells": _row_cells(r, c, columns, judged, index)})
        rate = stats.join_unique(part["rate"])
        pcts = [t for k, t in columns if k in tablefmt.PCT_CELLS]
        tables.append({"mtu": stats.key_value(mtu), "rate": rate or "uncapped", "rows": rows,
                       "columns": [{"key": k, "title": t, "cls": "" if k in _CELL_CLASS else "num"}
                                   for k, t in columns],
                       "pct_titles": " and ".join([", ".join(pcts[:-1]), pcts[-1]] if len(pcts) > 1 else pcts),
                       "ping_rtt": "ping_rtt" in keys,
                       "qperf_marked": "tcp" in keys and any(row["c"]["tcp"].endswith("*") for row in rows),
                       "nd_marked": any(cell["nd"] for row in rows for cell in row["cells"]),
                       "sb_marked": any(cell["sb"] for row in rows for cell in row["cells"])})
    return tables


def _clip(v: Any, lo: float, hi: float) -> float | None:
    try:
        x = float(v)
    except (TypeError, ValueError):
        return None
    return None if not math.isfinite(x) else max(lo, min(hi, x))


def _cell(r: dict[str, Any], col: str, digits: int = 3, fmt: Any = None) -> dict[str, str]:
    fmt = fmt or tablefmt.fmt_num
    med = fmt(r.get(col), digits)
    lo, hi = fmt(r.get(f"{col}_min"), digits), fmt(r.get(f"{col}_max"), digits)
    rng = "" if med == "—" or lo == "—" or lo == hi else f"{lo}–{hi}"
    return {"med": med, "range": rng}


def _failures(df: pd.DataFrame, looks: Looks) -> list[dict[str, Any]]:
    f = stats.failures(df)
    if f.empty:
        return []
    out: dict[tuple, dict[str, Any]] = {}
    for r in f.to_dict("records"):
        k = tuple(stats.key_value(r[c]) for c in stats.CONFIG_KEY) + (r["error"],)
        e = out.setdefault(k, {**{c: stats.key_value(r[c]) for c in stats.CONFIG_KEY}, "datapath": r["datapath"],
                               "error": r["error"], "repeats": [], "color": style.mode_color(str(r["mode"]), looks)})
        e["repeats"].append(stats.key_value(r["repeat"]))
    for e in out.values():
        e["repeats"] = ", ".join(str(x) for x in sorted(e["repeats"], key=lambda x: (x is None, x or 0)))
    return list(out.values())


def _sentences(found: list[fnd.Finding], index: int) -> list[list[dict[str, Any]]]:
    """Findings as the template's parts: text, and the id of the cell a number quotes."""
    return [[{"text": p.text, "strong": p.strong, "href": cell_id(index, *p.cell) if p.cell else ""}
             for p in f.parts] for f in found]


def load_run(run_dir: pathlib.Path | str, index: int = 1) -> RunView:
    path = resolve_run(run_dir)
    meta = read_meta(path)
    looks = run_looks(meta)             # this run's, whatever other runs the process read
    df = load(path)
    summary = summ.summary_table(df)
    ok = stats.ok_rows(df)
    notes: list[str] = []
    if df.empty:
        notes.append("No measurements recorded: measurements.jsonl is missing or empty.")
    elif ok.empty:
        notes.append(f"No successful measurements: every case failed ({len(stats.failures(df))} failed "
                     "case repeats are listed below).")
    else:
        if not (ok["mode"] == stats.NATIVE).any():
            notes.append("No native measurements: % of native cannot be computed.")
        if set(ok["mode"]) == {stats.NATIVE}:
            notes.append("Only native was measured: there is no overlay mode to compare with it.")
        notes += [f"Column without data — {n}." for n in summ.missing_columns(summary)]
    heatmap = None
    if ok.empty:
        figs, plot_notes = [], (["No plots: nothing was measured successfully."] if not df.empty else [])
    else:
        figs, plot_notes = plots.all_plots(summary, df, looks)
        heatmap = next((p for p in figs if p.title == plots.HEATMAP_TITLE), None)
        figs = [p for p in figs if p is not heatmap] + breadth.figures(summary, df, looks) \
            + fleet.figures(summary, df, looks, meta) + under_load.figures(summary, df, looks)
    planned_columns, planned = facts.planned(meta)
    value_cols = [f for c in summ.COLUMNS for f in c.fields]
    has_numbers = not summary.empty and summary[value_cols].notna().any().any()
    judged = fnd.cell_judgements(summary, df) if has_numbers else {}
    view = RunView(path=path, run_id=str(meta.get("run_id") or path.name), meta=meta, df=df, summary=summary,
                   facts=facts.facts(meta), derived=facts.derived(df, meta),
                   tables=_tables(summary, judged, index, looks) if has_numbers else [], notes=notes,
                   failures=_failures(df, looks), plots=figs, plot_notes=plot_notes, n_rows=len(df), n_ok=len(ok),
                   pairs=fleet_lines(df, meta) if not ok.empty else [], index=index,
                   command=facts.command_line(meta.get("command")), planned=planned,
                   planned_columns=planned_columns,
                   findings=_sentences(fnd.mtu_findings(mtu.stored_paths(meta) or [])
                                       + (fnd.findings(summary, df, judged, looks) if has_numbers else []), index),
                   heatmap=heatmap, looks=looks)
    for s in SECTIONS:
        if s.build is not None:
            view.sections[s.name] = s.build(view)
    return view


def _float(v: Any) -> float | None:
    try:
        return float(v)
    except (TypeError, ValueError):
        return None


def _comparisons(runs: list[RunView]) -> list[dict[str, Any]]:
    out = []
    base = runs[0]
    for other in runs[1:]:
        looks = base.looks.merged(other.looks)
        cmp = stats.compare_runs(base.df, other.df)
        rows = []
        for r in cmp.to_dict("records"):
            mark = ""
            if r["significant"]:
                mark = "better" if r["better"] else "worse"
            rows.append({**{c: stats.key_value(r[c]) for c in stats.CONFIG_KEY}, "metric": r["metric"],
                         "a": metrics.display(r["metric"], _float(r["median_a"])), "b": metrics.display(r["metric"], _float(r["median_b"])),
                         "delta": "—" if not math.isfinite(r["delta_pct"]) else f"{r['delta_pct']:+.1f} %",
                         "p": "—" if r["p"] is None or not math.isfinite(r["p"]) else f"{r['p']:.3g}",
                         "n": f"{r['n_a']}/{r['n_b']}", "mark": mark,
                         "color": style.mode_color(str(r["mode"]), looks)})
        fig = plots.comparison_bars(cmp, base.run_id, other.run_id, looks) if rows else None
        out.append({"a": base.run_id, "b": other.run_id, "rows": rows, "plot": fig,
                    "n_sig": sum(1 for r in rows if r["mark"]),
                    "n_worse": sum(1 for r in rows if r["mark"] == "worse")})
    return out


def _env() -> jinja2.Environment:
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(TEMPLATES)),
                             autoescape=jinja2.select_autoescape(["html", "j2"]),
                             undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    env.tests["mapping"] = lambda v: isinstance(v, dict)
    env.tests["scalarlist"] = lambda v: isinstance(v, (list, tuple)) and all(
        not isinstance(x, (dict, list, tuple)) for x in v)
    env.tests["listlike"] = lambda v: isinstance(v, (list, tuple))
    return env


def render_html(run_dirs: Sequence[pathlib.Path | str]) -> str:
    if not run_dirs:
        raise HarnessError("report: no run given")
    runs = [load_run(d, i) for i, d in enumerate(run_dirs, start=1)]
    title = (f"overlaybench — {runs[0].run_id}" if len(runs) == 1
             else f"overlaybench — {len(runs)} runs compared")
    return _env().get_template("report.html.j2").render(
        title=title, runs=runs, sections=SECTIONS, nd_title=ND_TITLE,
        comparisons=_comparisons(runs) if len(runs) > 1 else [],
        mode_colors={m: style.mode_color(m, _looks(runs)) for m in _modes_shown(runs)},
        generated=_dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        version=_version())


def _looks(runs: Sequence[RunView]) -> Looks:
    """The runs' looks merged (the first run's word on a mode wins: it is the reference)."""
    return runs[0].looks.merged(*(r.looks for r in runs[1:])) if runs else Looks()


def _modes_shown(runs: Sequence[RunView]) -> list[str]:
    """The modes the runs measured, in table order: the legend's entries."""
    shown = {str(m) for r in runs if "mode" in r.df for m in r.df["mode"].dropna().unique()}
    return sorted(shown, key=_looks(runs).rank)


def _version() -> str:
    try:
        return __version__
    except ImportError:
        return "?"


def render(run_dirs: Sequence[pathlib.Path | str], out_path: pathlib.Path | str) -> pathlib.Path:
    """Write the report for `run_dirs` (the first is the reference when comparing) to `out_path`."""
    html = render_html(list(run_dirs))
    out = pathlib.Path(out_path)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(html, encoding="utf-8")
    except OSError as e:
        raise HarnessError(f"{out}: cannot write report ({e.strerror})") from e
    log.info("report written to %s (%d bytes)", out, len(html))
    return out
