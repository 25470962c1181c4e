"""One self-contained HTML report from one or more run directories.

`render(run_dirs, out_path)` loads each run (run.json + measurements.jsonl), builds the
seed-style tables (harness.analysis.stats) and the figures (plots.py, PNG as data: URIs), and
fills templates/report.html.j2. The file needs nothing else: no external CSS, JS, fonts
or images, so it opens offline and can be attached to a CI run as is.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import logging
import math
import pathlib
from typing import Any, Sequence

import jinja2
import pandas as pd

from harness import __version__
from harness.analysis import stats, summary as summ, tablefmt
from harness.analysis.fleet import lines as fleet_lines
from harness.core.errors import HarnessError
from harness.core.placements import rank as placement_rank
from harness.report import breadth, fleet, plots, style
from harness.results import load, read_meta, resolve_run

log = logging.getLogger(__name__)

TEMPLATES = pathlib.Path(__file__).with_name("templates")

# run.json keys shown first, with their labels; everything else follows under its own name.
KNOWN_FACTS = [
    ("run_id", "Run"), ("start", "Started"), ("end", "Finished"), ("git", "Commit"),
    ("git_commit", "Commit"), ("commit", "Commit"), ("hostname", "Host"), ("host", "Host"),
    ("kernel", "Kernel"), ("cpu", "CPU"), ("tools", "Tool versions"),
    ("tool_versions", "Tool versions"), ("offloads", "Offloads"), ("underlay", "Underlay"),
    ("rate", "Underlay rate"), ("scenario", "Scenario"), ("cpu_accounting", "CPU accounting"),
    ("sleeve", "Sleeve"), ("backend", "Backend"), ("schema_version", "Schema version"),
]


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


# ethtool -k names → short labels for the offload summary.
_OFFLOAD_SHORT = {"tcp-segmentation-offload": "tso", "generic-segmentation-offload": "gso",
                  "generic-receive-offload": "gro", "tx-checksumming": "tx-csum", "rx-checksumming": "rx-csum",
                  "scatter-gather": "sg", "large-receive-offload": "lro", "tx-udp_tnl-segmentation": "udp-tnl",
                  "tx-udp-segmentation": "uso", "rx-udp-gro-forwarding": "udp-gro-fwd"}


def _datapath_facts(datapaths: list[dict[str, Any]]) -> tuple[dict[str, str], dict[str, str]]:
    """run.json's per-deployment list → one line per deployment and one per device's offloads."""
    deployments: dict[str, str] = {}
    offloads: dict[str, str] = {}
    for d in datapaths:
        label = f"{d.get('mode')} · u{d.get('underlay_mtu')} o{d.get('overlay_mtu')}"
        info = d.get("info") or {}
        parts = [f"via {d.get('datapath')}"]
        for k, v in info.items():
            if v not in (None, "", [], {}):
                parts.append(f"{k} {' '.join(map(str, v)) if isinstance(v, list) else v}")
        deployments.setdefault(label, " · ".join(parts))
        for host, devs in (d.get("offloads") or {}).items():
            for dev, feats in (devs or {}).items():
                if not isinstance(feats, dict):
                    continue
                on = [_OFFLOAD_SHORT.get(k, k) for k, v in feats.items() if str(v).startswith("on")]
                key = f"{d.get('mode')} u{d.get('underlay_mtu')} {host} {dev}"
                offloads.setdefault(key, feats.get("error") or ("on: " + ", ".join(on) if on else "all off"))
    return deployments, offloads


def _facts(meta: dict[str, Any]) -> list[tuple[str, Any]]:
    meta = dict(meta)
    if isinstance(meta.get("datapaths"), list):
        deployments, offloads = _datapath_facts(meta.pop("datapaths"))
        meta["deployments"], meta["offloads"] = deployments, offloads
    out, used = [], set()
    for key, label in KNOWN_FACTS:
        if key in meta and key not in used and meta[key] not in (None, "", {}, []):
            v = meta[key]
            if key == "git" and isinstance(v, dict):
                c = str(v.get("commit") or "")
                v = (c[:12] + (" (dirty)" if v.get("dirty") else "")) if c else v
            out.append((label, v))
        used.add(key)
    for key, v in meta.items():
        if key not in used and v not in (None, "", {}, []):
            out.append((key.replace("_", " ").capitalize(), v))
    return out


def _duration(meta: dict[str, Any]) -> str | None:
    try:
        a = _dt.datetime.fromisoformat(str(meta["start"]))
        b = _dt.datetime.fromisoformat(str(meta["end"]))
    except (KeyError, ValueError, TypeError):
        return None
    secs = int((b - a).total_seconds())
    if secs < 0:
        return None
    h, rem = divmod(secs, 3600)
    return f"{h}h {rem // 60:02d}m" if h else f"{rem // 60}m {rem % 60:02d}s"


def _derived(df: pd.DataFrame, meta: dict[str, Any]) -> list[tuple[str, str]]:
    """Facts read off the measurements themselves."""
    out = []
    d = _duration(meta)
    if d:
        out.append(("Duration", d))
    if df.empty:
        return out

    def uniq(col: str) -> list:
        if col not in df.columns:
            return []
        vals = {stats.key_value(v) for v in df[col] if stats.key_value(v) is not None}
        return sorted(vals, key=lambda v: (stats.mode_rank(v) if col == "mode"
                                           else placement_rank(v) if col == "placement" else (0, v)))

    mtus = uniq("underlay_mtu")
    if mtus:
        out.append(("Underlay MTU", ", ".join(map(str, mtus))))
    rates = uniq("rate")
    out.append(("Underlay rate", ", ".join(map(str, rates)) if rates else "uncapped"))
    for col, label in (("mode", "Modes"), ("datapath", "Datapaths"), ("placement", "Placements"),
                       ("test", "Tests")):
        v = uniq(col)
        if v:
            out.append((label, ", ".join(map(str, v))))
    reps = uniq("repeat")
    if reps:
        out.append(("Repeats", str(len(reps))))
    return out


# Cells that show a median with its min–max below: summary column, digits, number format.
_RANGE_CELLS = {c.key: (c.field, c.digits, tablefmt.number_format(c)) for c in summ.COLUMNS if c.ranged}
_CELL_CLASS = {"mode": "mode", "datapath": "nw", "placement": "nw"}


def _row_cells(r: dict[str, Any], c: dict[str, str], columns: list[tuple[str, str]]) -> list[dict[str, Any]]:
    """One summary row as the template's cells, in the order of `columns`."""
    cells = []
    for key, title in columns:
        cell: dict[str, Any] = {"key": key, "cls": _CELL_CLASS.get(key, "num"), "text": c[key], "range": "",
                                "meter": None, "meter_title": "", "pill": key == "failed"}
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


def _tables(summary: pd.DataFrame) -> list[dict[str, Any]]:
    if summary.empty:
        return []
    show_streams = tablefmt.streams_vary(summary)
    tables = []
    for mtu, part in summary.groupby("underlay_mtu", dropna=False, sort=False):
        columns = tablefmt.table_columns(part, show_streams)
        keys = [k for k, _ in columns]
        rows = []
        for r, c in zip(part.to_dict("records"), tablefmt.table_cells(part)):
            color = style.mode_color(r["mode"])
            rows.append({"r": r, "c": c, "color": color, "tint": style.tint(color),
                         "cells": _row_cells(r, c, columns)})
        rate = stats.join_unique(part["rate"])
        pcts = [t for k, t in columns if k in tablefmt.PCT_CELLS]
        tables.append({"mtu": stats.key_value(mtu), "rate": rate or "uncapped", "rows": rows,
                       "columns": [{"key": k, "title": t, "cls": "" if k in _CELL_CLASS else "num"}
                                   for k, t in columns],
                       "pct_titles": " and ".join([", ".join(pcts[:-1]), pcts[-1]] if len(pcts) > 1 else pcts),
                       "ping_rtt": "ping_rtt" in keys,
                       "qperf_marked": "tcp" in keys and any(row["c"]["tcp"].endswith("*") for row in rows)})
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


def _failures(df: pd.DataFrame) -> list[dict[str, Any]]:
    f = stats.failures(df)
    if f.empty:
        return []
    out: dict[tuple, dict[str, Any]] = {}
    for r in f.to_dict("records"):
        k = tuple(stats.key_value(r[c]) for c in stats.CONFIG_KEY) + (r["error"],)
        e = out.setdefault(k, {**{c: stats.key_value(r[c]) for c in stats.CONFIG_KEY}, "datapath": r["datapath"],
                               "error": r["error"], "repeats": [], "color": style.mode_color(str(r["mode"]))})
        e["repeats"].append(stats.key_value(r["repeat"]))
    for e in out.values():
        e["repeats"] = ", ".join(str(x) for x in sorted(e["repeats"], key=lambda x: (x is None, x or 0)))
    return list(out.values())


def load_run(run_dir: pathlib.Path | str) -> RunView:
    path = resolve_run(run_dir)
    meta = read_meta(path)
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
    if ok.empty:
        figs, plot_notes = [], (["No plots: nothing was measured successfully."] if not df.empty else [])
    else:
        figs, plot_notes = plots.all_plots(summary, df)
        figs += breadth.figures(summary, df) + fleet.figures(summary, df)
    value_cols = [f for c in summ.COLUMNS for f in c.fields]
    has_numbers = not summary.empty and summary[value_cols].notna().any().any()
    return RunView(path=path, run_id=str(meta.get("run_id") or path.name), meta=meta, df=df, summary=summary,
                   facts=_facts(meta), derived=_derived(df, meta),
                   tables=_tables(summary) if has_numbers else [], notes=notes,
                   failures=_failures(df), plots=figs, plot_notes=plot_notes, n_rows=len(df), n_ok=len(ok),
                   pairs=fleet_lines(df, meta) if not ok.empty else [])


def _unit_value(metric: str, v: Any) -> str:
    try:
        x = float(v)
    except (TypeError, ValueError):
        return "—"
    if metric == "throughput_bps":
        return f"{tablefmt.fmt_num(x / 1e9)} Gbit/s"
    if metric == "latency_us":
        return f"{tablefmt.fmt_num(x)} µs"
    return tablefmt.fmt_num(x)


def _comparisons(runs: list[RunView]) -> list[dict[str, Any]]:
    out = []
    base = runs[0]
    for other in runs[1:]:
        cmp = stats.compare_runs(base.df, other.df)
        rows = []
        for r in cmp.to_dict("records"):
            mark = ""
            if r["significant"]:
                mark = "better" if r["better"] else "worse"
            rows.append({**{c: stats.key_value(r[c]) for c in stats.CONFIG_KEY}, "metric": r["metric"],
                         "a": _unit_value(r["metric"], r["median_a"]), "b": _unit_value(r["metric"], r["median_b"]),
                         "delta": "—" if not math.isfinite(r["delta_pct"]) else f"{r['delta_pct']:+.1f} %",
                         "p": "—" if r["p"] is None or not math.isfinite(r["p"]) else f"{r['p']:.3g}",
                         "n": f"{r['n_a']}/{r['n_b']}", "mark": mark,
                         "color": style.mode_color(str(r["mode"]))})
        fig = plots.comparison_bars(cmp, base.run_id, other.run_id) if rows else None
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
    runs = [load_run(d) for d in run_dirs]
    title = (f"overlaybench — {runs[0].run_id}" if len(runs) == 1
             else f"overlaybench — {len(runs)} runs compared")
    return _env().get_template("report.html.j2").render(
        title=title, runs=runs, comparisons=_comparisons(runs) if len(runs) > 1 else [],
        mode_colors={m: style.mode_color(m) for m in _modes_shown(runs)},
        generated=_dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        version=_version())


def _modes_shown(runs: Sequence[RunView]) -> list[str]:
    """The modes the runs measured, in table order: the legend's entries."""
    shown = {str(m) for r in runs if "mode" in r.df for m in r.df["mode"].dropna().unique()}
    return sorted(shown, key=stats.mode_rank)


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
