"""Numbers from a run's measurements: medians over repeats, ratios to native, A/B pairs, CPU cost.

Everything here is a pure function of the DataFrame that `harness.results.load` returns
(one row per metric). Nothing reads files, nothing prints. The significance tests are in
`significance`, the seed-style table in `summary`, its text in `tablefmt`.

Vocabulary
----------
config key
    (mode, underlay_mtu, overlay_mtu, placement, test, streams): one measurement
    configuration. The repeats of a config are its samples.
native reference
    For a row of mode M at underlay MTU U, placement P, test T, streams S: mode
    "native" at the same U, T, S and placement P; native only runs host-host, so
    when there is no native row for P, native host-host is the reference. The
    overlay MTU plays no part (native's is the underlay's).
% of native
    value / native value × 100, for every metric. Throughput below 100 % and latency
    above 100 % are both costs of the overlay (the seed's "BW %" and "Lat %").
arm
    One build of a mode in an A/B run: mode names `MODE@LABEL` (sleeve@base, sleeve@head).
    Repeat r of one arm is paired with repeat r of the other: both were deployed one after
    the other within that repeat.
"""

from __future__ import annotations

import logging
import math
from typing import Any, Iterable, Sequence

import numpy as np
import pandas as pd

from harness.analysis.significance import mann_whitney
from harness.core import metrics
from harness.core.arms import ARM_SEP
from harness.core.looks import EMPTY, Look, Looks
from harness.core.placements import REFERENCE, rank as placement_rank
from harness.results import MODE_COLOUR, MODE_ORDER

log = logging.getLogger(__name__)

# `pair` ("SRC→DST") is None in runs of one pair (harness/core/pairs.py)
CONFIG_KEY = ["mode", "underlay_mtu", "overlay_mtu", "placement", "test", "streams", "pair"]
NATIVE = "native"

# Which way is better, per metric: the metric table's word (unknown metrics are costs).
higher_is_better = metrics.higher_is_better


# --------------------------------------------------------------------------- selection

def truthy(v: Any) -> bool:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return False
    if isinstance(v, str):
        return v.strip().lower() in ("true", "1", "yes")
    return bool(v)


def has_pairs(df: pd.DataFrame) -> bool:
    """Whether these rows carry a pair dimension (a run of several host pairs)."""
    return "pair" in df and bool(df["pair"].notna().any())


def ensure_columns(df: pd.DataFrame, cols: Iterable[str]) -> pd.DataFrame:
    missing = [c for c in cols if c not in df.columns]
    if missing:
        df = df.copy()
        for c in missing:
            df[c] = None
    return df


def ok_rows(df: pd.DataFrame) -> pd.DataFrame:
    """Rows that carry a usable measurement: ok, not the "failed" marker, a finite value."""
    df = ensure_columns(df, CONFIG_KEY + ["metric", "value", "ok", "repeat", "datapath", "unit"])
    values = pd.to_numeric(df["value"], errors="coerce")
    keep = (df["ok"].map(truthy) & (df["metric"] != "failed")
            & values.notna() & np.isfinite(values.astype(float)))
    out = df.loc[keep].copy()
    out["value"] = values[keep].astype(float)
    return out


def failures(df: pd.DataFrame) -> pd.DataFrame:
    """Failed cases, one row per (config, repeat), with the reason(s) in `error`."""
    cols = CONFIG_KEY + ["repeat", "datapath", "error"]
    df = ensure_columns(df, cols + ["metric", "ok"])
    bad = df[(df["metric"] == "failed") | ~df["ok"].map(truthy)]
    if bad.empty:
        return pd.DataFrame(columns=cols)
    bad = bad.assign(error=bad["error"].map(lambda e: "" if e is None or e != e else str(e)))
    g = bad.groupby(CONFIG_KEY + ["repeat"], dropna=False, sort=False)
    out = g.agg(datapath=("datapath", join_unique),
                error=("error", lambda s: "; ".join(dict.fromkeys(e for e in s if e)) or "no reason recorded"))
    out = out.reset_index()
    return sort_configs(out, looks_of(df))[cols].reset_index(drop=True)


def join_unique(values: Iterable[Any]) -> str:
    seen = dict.fromkeys(str(v) for v in values if v is not None and v == v and str(v) != "")
    return "/".join(seen)


def key_value(v: Any) -> Any:
    """A hashable, NaN-free, int-where-possible version of one key value."""
    if v is None:
        return None
    if isinstance(v, (float, np.floating)):
        if math.isnan(v):
            return None
        if float(v).is_integer():
            return int(v)
        return float(v)
    if isinstance(v, np.integer):
        return int(v)
    return v


def looks_of(df: pd.DataFrame) -> Looks:
    """How the modes of these rows look: what results.load put in each row from its run's
    run.json (MODE_ORDER, MODE_COLOUR); no looks at all for rows without those columns."""
    if MODE_ORDER not in df.columns or "mode" not in df.columns or df.empty:
        return EMPTY
    cols = [c for c in ("mode", MODE_ORDER, MODE_COLOUR) if c in df.columns]
    d = df[cols].drop_duplicates()
    out: dict[str, Look] = {}
    for r in d.itertuples(index=False):
        name, order = r[0], r[1]
        if isinstance(name, str) and name not in out and not pd.isna(order):
            colour = r[2] if len(r) > 2 and isinstance(r[2], str) else ""
            out[name] = Look(int(order), colour)
    return Looks(out)


def plain_looks(looks: Looks) -> Looks:
    """`looks` and, for each arm (MODE@LABEL) they describe, its plain mode's look (the
    first arm's): what rows of plain modes made from arms (arm_pairs) sort by."""
    return looks.merged(Looks({split_arm(n)[0]: k for n, k in looks.items() if split_arm(n)[1] is not None}))


def sort_configs(df: pd.DataFrame, looks: Looks | None = None) -> pd.DataFrame:
    """Rows in reading order: underlay MTU, mode (by `looks`, default the rows' own:
    looks_of), overlay MTU, placement, test, streams, pair."""
    if df.empty:
        return df
    looks = looks_of(df) if looks is None else looks

    def keyfunc(col: pd.Series) -> pd.Series:
        if col.name == "mode":
            return col.map(looks.rank)
        if col.name == "placement":
            return col.map(placement_rank)
        if col.name in ("underlay_mtu", "overlay_mtu", "streams", "repeat"):
            return pd.to_numeric(col, errors="coerce")
        return col.astype(str)

    by = [c for c in ["underlay_mtu", "mode", "overlay_mtu", "placement", "test", "streams", "pair", "metric",
                      "repeat"] if c in df.columns]
    return df.sort_values(by=by, key=keyfunc, kind="stable", na_position="last")


# --------------------------------------------------------------------------- medians

def summarize(df: pd.DataFrame, metrics: Sequence[str] | None = None) -> pd.DataFrame:
    """Median, min, max and count over repeats, per config key and metric.

    Columns: CONFIG_KEY + metric, n, median, min, max, unit, datapath.
    """
    cols = CONFIG_KEY + ["metric", "n", "median", "min", "max", "unit", "datapath"]
    d = ok_rows(df)
    if metrics is not None:
        d = d[d["metric"].isin(list(metrics))]
    if d.empty:
        return pd.DataFrame(columns=cols)
    g = d.groupby(CONFIG_KEY + ["metric"], dropna=False, sort=False)
    out = g.agg(n=("value", "count"), median=("value", "median"), min=("value", "min"),
                max=("value", "max"), unit=("unit", "first"), datapath=("datapath", join_unique))
    out = out.reset_index()
    return sort_configs(out, looks_of(df))[cols].reset_index(drop=True)


def _native_lookup(table: dict, u: Any, p: Any, t: Any, s: Any, metric: Any, *rest: Any) -> Any:
    """The native entry for (U, P, T, S, metric, …), falling back to native host-host."""
    k = (key_value(u), key_value(p), key_value(t), key_value(s), metric, *rest)
    if k in table:
        return table[k]
    k = (key_value(u), REFERENCE, key_value(t), key_value(s), metric, *rest)
    return table.get(k)


def with_native(summary: pd.DataFrame) -> pd.DataFrame:
    """`summarize` output plus `native` (the reference median) and `pct_of_native`
    (analysis/native.py's `with_verdict` adds whether each is distinct from native)."""
    s = summary.copy()
    nat = s[s["mode"] == NATIVE]
    table: dict = {}
    for r in nat.itertuples(index=False):
        k = (key_value(r.underlay_mtu), key_value(r.placement), key_value(r.test), key_value(r.streams), r.metric,
             key_value(r.pair))
        table.setdefault(k, []).append(r.median)
    table = {k: float(np.median(v)) for k, v in table.items()}
    s["native"] = [
        _native_lookup(table, r.underlay_mtu, r.placement, r.test, r.streams, r.metric, key_value(r.pair))
        for r in s.itertuples(index=False)]
    s["native"] = pd.to_numeric(s["native"], errors="coerce")
    s["pct_of_native"] = _pct(s["median"], s["native"])
    return s


def _pct(value: pd.Series, ref: pd.Series) -> pd.Series:
    value = pd.to_numeric(value, errors="coerce").astype(float)
    ref = pd.to_numeric(ref, errors="coerce").astype(float)
    return (value / ref.where(ref != 0)) * 100.0


def repeat_ratios(df: pd.DataFrame, metrics: Sequence[str] | None = None,
                  include_native: bool = False) -> pd.DataFrame:
    """Per-repeat ratio to native: each repeat's value over the same repeat's native value.

    Columns: CONFIG_KEY + metric, repeat, datapath, value, native, ratio. A repeat whose
    native counterpart is missing (failed, or not measured) gets no ratio and is left out.
    Several values for one (config, metric, repeat) — a resumed run — are medianed first.
    """
    cols = CONFIG_KEY + ["metric", "repeat", "datapath", "value", "native", "ratio"]
    d = ok_rows(df)
    if metrics is not None:
        d = d[d["metric"].isin(list(metrics))]
    if d.empty:
        return pd.DataFrame(columns=cols)
    g = d.groupby(CONFIG_KEY + ["metric", "repeat"], dropna=False, sort=False)
    per = g.agg(value=("value", "median"), datapath=("datapath", join_unique)).reset_index()
    nat: dict = {}
    for r in per[per["mode"] == NATIVE].itertuples(index=False):
        k = (key_value(r.underlay_mtu), key_value(r.placement), key_value(r.test), key_value(r.streams), r.metric,
             key_value(r.pair), key_value(r.repeat))
        nat.setdefault(k, []).append(r.value)
    nat = {k: float(np.median(v)) for k, v in nat.items()}
    if not include_native:
        per = per[per["mode"] != NATIVE]
    per = per.copy()
    per["native"] = [
        _native_lookup(nat, r.underlay_mtu, r.placement, r.test, r.streams, r.metric, key_value(r.pair),
                       key_value(r.repeat))
        for r in per.itertuples(index=False)]
    per["native"] = pd.to_numeric(per["native"], errors="coerce")
    per["ratio"] = per["value"] / per["native"].where(per["native"] != 0)
    zero = int((per["native"] == 0).sum())
    dropped = int(per["ratio"].isna().sum()) - zero
    if dropped:
        log.info("%d repeat(s) without a native counterpart left out of the ratios", dropped)
    if zero:
        log.info("%d repeat(s) whose native value is 0 left out of the ratios", zero)
    per = per[per["ratio"].notna()]
    return sort_configs(per, looks_of(df))[cols].reset_index(drop=True)


def ratio_to_native(df: pd.DataFrame, metrics: Sequence[str] | None = None) -> pd.DataFrame:
    """Per config and metric: the median of per-repeat ratios and their min–max.

    Columns: CONFIG_KEY + metric, n, ratio, ratio_min, ratio_max.
    """
    cols = CONFIG_KEY + ["metric", "n", "ratio", "ratio_min", "ratio_max"]
    r = repeat_ratios(df, metrics)
    if r.empty:
        return pd.DataFrame(columns=cols)
    g = r.groupby(CONFIG_KEY + ["metric"], dropna=False, sort=False)
    out = g.agg(n=("ratio", "count"), ratio=("ratio", "median"), ratio_min=("ratio", "min"),
                ratio_max=("ratio", "max")).reset_index()
    return sort_configs(out, looks_of(df))[cols].reset_index(drop=True)


# --------------------------------------------------------------------------- A/B arms

ZERO_CHANGE = 1000.0      # arm_pairs: how large a change a value of 0 against a non-zero one counts as


def split_arm(mode: Any) -> tuple[str, str | None]:
    """"sleeve@head" → ("sleeve", "head"); a plain mode → (mode, None)."""
    name, sep, label = str(mode).partition(ARM_SEP)
    return (name, label) if sep else (str(mode), None)


def arm_pairs(df: pd.DataFrame, base: str, head: str, metrics: Sequence[str] | None = None) -> pd.DataFrame:
    """Per config, metric and repeat: the base arm's value, the head arm's and log(head / base).

    Columns: CONFIG_KEY (the mode without its arm label) + metric, repeat, base, head,
    log_ratio. A repeat missing from either arm (failed or not measured) makes no pair.
    Several values for one (config, metric, repeat, arm), as a resumed run may hold, are
    medianed first. A value of 0 (a loss knee below the sweep's lowest step) has no
    log-ratio: against a non-zero value it counts as a ZERO_CHANGE-fold change (so it weighs
    as the largest move, the way it should), and 0 against 0 as none.
    """
    cols = CONFIG_KEY + ["metric", "repeat", "base", "head", "log_ratio"]
    d = ok_rows(df)
    if metrics is not None:
        d = d[d["metric"].isin(list(metrics))]
    arms = d["mode"].map(split_arm)
    d = d.assign(mode=[a[0] for a in arms], arm=[a[1] for a in arms])
    d = d[d["arm"].isin([base, head]) & (d["value"] >= 0)]
    if d.empty:
        return pd.DataFrame(columns=cols)
    keys = CONFIG_KEY + ["metric", "repeat"]
    per = {a: g.groupby(keys, dropna=False, sort=False)["value"].median().rename(a)
           for a, g in d.groupby("arm")}
    if base not in per or head not in per:
        return pd.DataFrame(columns=cols)
    wide = pd.concat([per[base].rename("base"), per[head].rename("head")], axis=1).dropna().reset_index()
    if wide.empty:
        return pd.DataFrame(columns=cols)
    h, b = wide["head"].to_numpy(float), wide["base"].to_numpy(float)
    with np.errstate(divide="ignore", invalid="ignore"):
        lr = np.log(h / b)
    big = math.log(ZERO_CHANGE)
    wide["log_ratio"] = np.where((h == 0) & (b == 0), 0.0, np.where(h == 0, -big, np.where(b == 0, big, lr)))
    return sort_configs(wide, plain_looks(looks_of(df)))[cols].reset_index(drop=True)


# --------------------------------------------------------------------------- CPU cost

TCP_BW_TESTS = ("iperf3.tcp", "qperf.tcp_bw")      # first present wins


def cpu_per_gbit(df: pd.DataFrame, tests: Sequence[str] | None = None) -> pd.DataFrame:
    """CPU-seconds per gigabit of throughput, per config and repeat.

    CPU-seconds per second are cpu_total_pct × the CPUs it is a share of (`cpus`: the whole
    machine, in the lab) where the run recorded it, else cpu_client_pct + cpu_server_pct, each
    × its host's CPUs (`host_cpus`, per-host accounting) or × 1 (a process's % of one CPU).
    `cpus` and `host_cpus` are the columns results.load adds from run.json. Columns:
    CONFIG_KEY + repeat, cpu_pct, gbps, cpu_s_per_gbit.
    """
    out_col = metrics.CPU_PER_GBIT
    cols = CONFIG_KEY + ["repeat", "cpu_pct", "gbps", out_col]
    d = ok_rows(df)
    if tests is not None:
        d = d[d["test"].isin(list(tests))]
    wanted = ["throughput_bps", "cpu_total_pct", "cpu_client_pct", "cpu_server_pct"]
    d = d[d["metric"].isin(wanted)]
    if d.empty:
        return pd.DataFrame(columns=cols)
    wide = d.pivot_table(index=CONFIG_KEY + ["repeat"], columns="metric", values="value",
                         aggfunc="median", dropna=False, observed=True)
    wide = wide.dropna(how="all").reset_index()
    for m in wanted:
        if m not in wide.columns:
            wide[m] = np.nan
    cpus = _run_number(df, "cpus")
    host_cpus = _run_number(df, "host_cpus")
    per_host = wide["cpu_client_pct"] + wide["cpu_server_pct"]
    cpu_s = (wide["cpu_total_pct"] / 100 * (cpus or math.nan)).where(
        wide["cpu_total_pct"].notna(), per_host / 100 * (host_cpus or 1.0))
    wide["cpu_pct"] = wide["cpu_total_pct"].where(wide["cpu_total_pct"].notna(), per_host)
    wide["gbps"] = wide["throughput_bps"] / 1e9
    wide[out_col] = cpu_s / wide["gbps"].where(wide["gbps"] > 0)
    wide = wide[wide[out_col].notna()]
    return sort_configs(wide, looks_of(df))[cols].reset_index(drop=True)


def _run_number(df: pd.DataFrame, col: str) -> float | None:
    """A per-run figure results.load put in every row (the CPUs behind a CPU share); None if absent."""
    if col not in df.columns:
        return None
    v = pd.to_numeric(df[col], errors="coerce").dropna()
    return float(v.iloc[0]) if len(v) and v.iloc[0] > 0 else None


# --------------------------------------------------------------------------- comparing runs

def compare_runs(a: pd.DataFrame, b: pd.DataFrame,
                 metrics: Sequence[str] = ("throughput_bps", "latency_us"),
                 alpha: float = 0.05) -> pd.DataFrame:
    """Run b against run a, per config and metric present in both.

    Columns: CONFIG_KEY + metric, n_a, n_b, median_a, median_b, delta_pct, p, significant,
    better (True: b is better, False: worse, None: no significant change).
    The test is two-sided Mann–Whitney on the raw per-repeat values.
    """
    cols = CONFIG_KEY + ["metric", "n_a", "n_b", "median_a", "median_b", "delta_pct", "p",
                         "significant", "better"]
    va, vb = ok_rows(a), ok_rows(b)
    va = va[va["metric"].isin(list(metrics))]
    vb = vb[vb["metric"].isin(list(metrics))]
    ga = {tuple(key_value(x) for x in k): g["value"].tolist()
          for k, g in va.groupby(CONFIG_KEY + ["metric"], dropna=False)}
    gb = {tuple(key_value(x) for x in k): g["value"].tolist()
          for k, g in vb.groupby(CONFIG_KEY + ["metric"], dropna=False)}
    rows = []
    for k in ga.keys() & gb.keys():
        xa, xb = ga[k], gb[k]
        ma, mb = float(np.median(xa)), float(np.median(xb))
        mw = mann_whitney(xb, xa, "two-sided", alpha)
        sig = mw.significant(alpha)
        delta = (mb / ma - 1) * 100 if ma else math.nan
        better = None
        if sig:
            better = (mb > ma) == higher_is_better(k[-1])
        rows.append(dict(zip(CONFIG_KEY + ["metric"], k), n_a=len(xa), n_b=len(xb), median_a=ma,
                         median_b=mb, delta_pct=delta, p=mw.p, significant=sig, better=better))
    if not rows:
        return pd.DataFrame(columns=cols)
    out = sort_configs(pd.DataFrame(rows), looks_of(a).merged(looks_of(b)))[cols].reset_index(drop=True)
    out["better"] = pd.Series([None if v is None else bool(v) for v in out["better"]], dtype=object,
                              index=out.index)
    return out


