"""Statistics on a run's measurements: medians over repeats, ratio to native, significance.

Everything here is a pure function of the DataFrame that `harness.results.load` returns
(one row per metric). Nothing reads files, nothing prints.

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
summary table
    The seed's table, one row per (underlay MTU, mode, overlay MTU, placement[,
    streams]): TCP throughput (iperf3.tcp, else qperf.tcp_bw), TCP latency
    (qperf.tcp_lat), BW % and Lat % of native, UDP throughput, loss and jitter
    (iperf3.udp, else qperf.udp_bw), UDP latency (qperf.udp_lat), ping RTT (ping.flood:
    avg, and the min/max/mdev of each run's rtt line), CPU per Gbit/s, each a median over
    repeats with its min–max, and a % of native for every throughput and latency.
    Whichever of these a run did not measure stays empty; the text table and the
    report leave such columns out.
"""

from __future__ import annotations

import dataclasses
import io
import json
import logging
import math
from typing import Any, Callable, Iterable, Sequence

import numpy as np
import pandas as pd

from harness.errors import HarnessError

log = logging.getLogger(__name__)

CONFIG_KEY = ["mode", "underlay_mtu", "overlay_mtu", "placement", "test", "streams"]
NATIVE = "native"
REFERENCE_PLACEMENT = "host-host"

MODE_ORDER = ["native", "fastdp", "auto", "sleeve", "sleeve-seg", "sleeve-l3", "sleeve-crypto", "sleeve-basic"]
PLACEMENT_ORDER = ["host-host", "host-container", "container-container"]

TCP_BW_TESTS = ["iperf3.tcp", "qperf.tcp_bw"]      # first present wins
TCP_LAT_TESTS = ["qperf.tcp_lat"]
UDP_TESTS = ["iperf3.udp", "qperf.udp_bw"]
UDP_LAT_TESTS = ["qperf.udp_lat"]
PING_TESTS = ["ping.flood"]

# Which way is better, per metric. Unknown metrics are treated as lower-is-better costs.
HIGHER_IS_BETTER = {"throughput_bps": True}

SUMMARY_COLUMNS = [
    "underlay_mtu", "rate", "mode", "overlay_mtu", "datapath", "placement", "streams",
    "repeats", "failed", "tcp_test", "udp_test",
    "tcp_gbps", "tcp_gbps_min", "tcp_gbps_max",
    "tcp_lat_us", "tcp_lat_us_min", "tcp_lat_us_max",
    "bw_pct", "lat_pct",
    "udp_gbps", "udp_gbps_min", "udp_gbps_max", "udp_bw_pct",
    "udp_loss_pct", "udp_loss_pct_min", "udp_loss_pct_max",
    "udp_jitter_ms", "udp_jitter_ms_min", "udp_jitter_ms_max",
    "udp_lat_us", "udp_lat_us_min", "udp_lat_us_max", "udp_lat_pct",
    "ping_avg_us", "ping_avg_us_min", "ping_avg_us_max", "ping_pct",
    "ping_min_us", "ping_max_us", "ping_mdev_us", "ping_loss_pct",
    "cpu_per_gbps", "cpu_per_gbps_min", "cpu_per_gbps_max",
]
_NOT_FLOAT = {"underlay_mtu", "rate", "mode", "overlay_mtu", "datapath", "placement", "streams", "repeats",
                 "failed", "tcp_test", "udp_test"}


def higher_is_better(metric: str) -> bool:
    return HIGHER_IS_BETTER.get(metric, False)


# --------------------------------------------------------------------------- selection

def _truthy(v: Any) -> bool:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return False
    if isinstance(v, str):
        return v.strip().lower() in ("true", "1", "yes")
    return bool(v)


def _ensure_columns(df: pd.DataFrame, cols: Iterable[str]) -> pd.DataFrame:
    missing = [c for c in cols if c not in df.columns]
    if missing:
        df = df.copy()
        for c in missing:
            df[c] = None
    return df


def ok_rows(df: pd.DataFrame) -> pd.DataFrame:
    """Rows that carry a usable measurement: ok, not the "failed" marker, a finite value."""
    df = _ensure_columns(df, CONFIG_KEY + ["metric", "value", "ok", "repeat", "datapath", "unit"])
    values = pd.to_numeric(df["value"], errors="coerce")
    keep = (df["ok"].map(_truthy) & (df["metric"] != "failed")
            & values.notna() & np.isfinite(values.astype(float)))
    out = df.loc[keep].copy()
    out["value"] = values[keep].astype(float)
    return out


def failures(df: pd.DataFrame) -> pd.DataFrame:
    """Failed cases, one row per (config, repeat), with the reason(s) in `error`."""
    cols = CONFIG_KEY + ["repeat", "datapath", "error"]
    df = _ensure_columns(df, cols + ["metric", "ok"])
    bad = df[(df["metric"] == "failed") | ~df["ok"].map(_truthy)]
    if bad.empty:
        return pd.DataFrame(columns=cols)
    bad = bad.assign(error=bad["error"].map(lambda e: "" if e is None or e != e else str(e)))
    g = bad.groupby(CONFIG_KEY + ["repeat"], dropna=False, sort=False)
    out = g.agg(datapath=("datapath", _join_unique),
                error=("error", lambda s: "; ".join(dict.fromkeys(e for e in s if e)) or "no reason recorded"))
    out = out.reset_index()
    return sort_configs(out)[cols].reset_index(drop=True)


def _join_unique(values: Iterable[Any]) -> str:
    seen = dict.fromkeys(str(v) for v in values if v is not None and v == v and str(v) != "")
    return "/".join(seen)


def _key(v: Any) -> Any:
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


def _mode_rank(mode: Any) -> tuple:
    m = str(mode)
    return (MODE_ORDER.index(m), m) if m in MODE_ORDER else (len(MODE_ORDER), m)


def _placement_rank(p: Any) -> tuple:
    s = str(p)
    return (PLACEMENT_ORDER.index(s), s) if s in PLACEMENT_ORDER else (len(PLACEMENT_ORDER), s)


def sort_configs(df: pd.DataFrame) -> pd.DataFrame:
    """Rows in reading order: underlay MTU, mode (native first), overlay MTU, placement, test, streams."""
    if df.empty:
        return df

    def keyfunc(col: pd.Series) -> pd.Series:
        if col.name == "mode":
            return col.map(_mode_rank)
        if col.name == "placement":
            return col.map(_placement_rank)
        if col.name in ("underlay_mtu", "overlay_mtu", "streams", "repeat"):
            return pd.to_numeric(col, errors="coerce")
        return col.astype(str)

    by = [c for c in ["underlay_mtu", "mode", "overlay_mtu", "placement", "test", "streams", "metric",
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
                max=("value", "max"), unit=("unit", "first"), datapath=("datapath", _join_unique))
    out = out.reset_index()
    return sort_configs(out)[cols].reset_index(drop=True)


def _native_lookup(table: dict, u: Any, p: Any, t: Any, s: Any, metric: Any, *rest: Any) -> Any:
    """The native entry for (U, P, T, S, metric, …), falling back to native host-host."""
    k = (_key(u), _key(p), _key(t), _key(s), metric, *rest)
    if k in table:
        return table[k]
    k = (_key(u), REFERENCE_PLACEMENT, _key(t), _key(s), metric, *rest)
    return table.get(k)


def with_native(summary: pd.DataFrame) -> pd.DataFrame:
    """`summarize` output plus `native` (the reference median) and `pct_of_native`."""
    s = summary.copy()
    nat = s[s["mode"] == NATIVE]
    table: dict = {}
    for r in nat.itertuples(index=False):
        k = (_key(r.underlay_mtu), _key(r.placement), _key(r.test), _key(r.streams), r.metric)
        table.setdefault(k, []).append(r.median)
    table = {k: float(np.median(v)) for k, v in table.items()}
    s["native"] = [
        _native_lookup(table, r.underlay_mtu, r.placement, r.test, r.streams, r.metric)
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
    per = g.agg(value=("value", "median"), datapath=("datapath", _join_unique)).reset_index()
    nat: dict = {}
    for r in per[per["mode"] == NATIVE].itertuples(index=False):
        k = (_key(r.underlay_mtu), _key(r.placement), _key(r.test), _key(r.streams), r.metric, _key(r.repeat))
        nat.setdefault(k, []).append(r.value)
    nat = {k: float(np.median(v)) for k, v in nat.items()}
    if not include_native:
        per = per[per["mode"] != NATIVE]
    per = per.copy()
    per["native"] = [
        _native_lookup(nat, r.underlay_mtu, r.placement, r.test, r.streams, r.metric, _key(r.repeat))
        for r in per.itertuples(index=False)]
    per["native"] = pd.to_numeric(per["native"], errors="coerce")
    per["ratio"] = per["value"] / per["native"].where(per["native"] != 0)
    dropped = per["ratio"].isna().sum()
    if dropped:
        log.info("%d repeat(s) without a native counterpart left out of the ratios", dropped)
    per = per[per["ratio"].notna()]
    return sort_configs(per)[cols].reset_index(drop=True)


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
    return sort_configs(out)[cols].reset_index(drop=True)


# --------------------------------------------------------------------------- CPU cost

def cpu_per_gbps(df: pd.DataFrame, tests: Sequence[str] | None = None) -> pd.DataFrame:
    """CPU percent per Gbit/s of throughput, per config and repeat.

    CPU is cpu_total_pct where the run recorded it (the whole machine in the lab), else
    cpu_client_pct + cpu_server_pct. Columns: CONFIG_KEY + repeat, cpu_pct, gbps, cpu_per_gbps.
    """
    cols = CONFIG_KEY + ["repeat", "cpu_pct", "gbps", "cpu_per_gbps"]
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
    cpu = wide["cpu_total_pct"].where(wide["cpu_total_pct"].notna(),
                                      wide["cpu_client_pct"] + wide["cpu_server_pct"])
    wide["cpu_pct"] = cpu
    wide["gbps"] = wide["throughput_bps"] / 1e9
    wide["cpu_per_gbps"] = wide["cpu_pct"] / wide["gbps"].where(wide["gbps"] > 0)
    wide = wide[wide["cpu_per_gbps"].notna()]
    return sort_configs(wide)[cols].reset_index(drop=True)


# --------------------------------------------------------------------------- significance

@dataclasses.dataclass(frozen=True)
class MannWhitney:
    """One Mann–Whitney U test. `p` is None when the samples are too small to ever
    reach `alpha` (see `min_p_value`); `enough` says whether they could."""

    u: float | None
    p: float | None
    n1: int
    n2: int
    alternative: str
    min_p: float
    enough: bool

    def significant(self, alpha: float = 0.05) -> bool:
        return self.enough and self.p is not None and self.p <= alpha + 1e-12


def min_p_value(n1: int, n2: int, alternative: str = "two-sided") -> float:
    """The smallest p the exact Mann–Whitney test can give for these sample sizes (no ties):
    1 / C(n1+n2, n1) one-sided, twice that two-sided. 2 vs 2 repeats: 1/6, never below
    0.05; 3 vs 3: exactly 0.05 one-sided; 4 vs 4: 0.014."""
    if n1 < 1 or n2 < 1:
        return 1.0
    p = 1.0 / math.comb(n1 + n2, n1)
    return min(1.0, 2 * p) if alternative == "two-sided" else p


def mann_whitney(a: Sequence[float], b: Sequence[float], alternative: str = "two-sided",
                 alpha: float = 0.05) -> MannWhitney:
    """Mann–Whitney U of sample `a` against `b`. alternative "less" asks whether `a` tends
    to be smaller than `b`, "greater" whether larger (scipy's convention)."""
    from scipy.stats import mannwhitneyu

    a = [float(x) for x in a if x is not None and np.isfinite(x)]
    b = [float(x) for x in b if x is not None and np.isfinite(x)]
    mp = min_p_value(len(a), len(b), alternative)
    enough = mp <= alpha + 1e-12
    if not a or not b:
        return MannWhitney(None, None, len(a), len(b), alternative, mp, False)
    if len(set(a) | set(b)) == 1:          # all equal: nothing to rank
        return MannWhitney(len(a) * len(b) / 2, 1.0, len(a), len(b), alternative, mp, enough)
    res = mannwhitneyu(a, b, alternative=alternative, method="auto")
    return MannWhitney(float(res.statistic), float(res.pvalue), len(a), len(b), alternative, mp, enough)


def bootstrap_ci(values: Sequence[float], stat: Callable[[np.ndarray], float] = np.median,
                 level: float = 0.95, n_resamples: int = 2000, seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap confidence interval of `stat`; (nan, nan) for fewer than 2 values."""
    x = np.asarray([v for v in values if v is not None and np.isfinite(v)], dtype=float)
    if len(x) < 2:
        return (math.nan, math.nan)
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(x), size=(n_resamples, len(x)))
    stats = np.apply_along_axis(stat, 1, x[idx])
    lo, hi = np.percentile(stats, [(1 - level) / 2 * 100, (1 + level) / 2 * 100])
    return (float(lo), float(hi))


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
    ga = {tuple(_key(x) for x in k): g["value"].tolist()
          for k, g in va.groupby(CONFIG_KEY + ["metric"], dropna=False)}
    gb = {tuple(_key(x) for x in k): g["value"].tolist()
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
    out = sort_configs(pd.DataFrame(rows))[cols].reset_index(drop=True)
    out["better"] = pd.Series([None if v is None else bool(v) for v in out["better"]], dtype=object,
                              index=out.index)
    return out


# --------------------------------------------------------------------------- seed-style table

def _pick(s: pd.DataFrame, tests: Sequence[str], metric: str) -> pd.DataFrame:
    """Summary rows of `metric` from the first of `tests` present per config, others dropped."""
    sub = s[(s["metric"] == metric) & s["test"].isin(list(tests))]
    if sub.empty:
        return sub
    rank = sub["test"].map({t: i for i, t in enumerate(tests)})
    sub = sub.assign(_rank=rank)
    keys = ["underlay_mtu", "mode", "overlay_mtu", "placement", "streams"]
    best = sub.groupby(keys, dropna=False)["_rank"].transform("min")
    return sub[sub["_rank"] == best].drop(columns="_rank")


def summary_table(df: pd.DataFrame) -> pd.DataFrame:
    """The seed's table as a DataFrame, one row per (underlay MTU, mode, overlay MTU,
    placement, streams of the TCP throughput test). See SUMMARY_COLUMNS and the module doc.

    Latency, UDP, ping and CPU columns come from their own tests; they are matched on
    (underlay MTU, mode, overlay MTU, placement) and, where several stream counts exist,
    the lowest. Ping: `ping_avg_us` is the median (min–max) over repeats of each run's
    avg RTT, ping_min/max/mdev_us the medians of each run's min, max and mdev.
    Configs whose every case failed still get a row (empty values, `failed` counts them).
    """
    df = _ensure_columns(df, CONFIG_KEY + ["metric", "value", "ok", "repeat", "datapath", "rate", "error"])
    s = with_native(summarize(df))
    row_key = ["underlay_mtu", "mode", "overlay_mtu", "placement"]

    def by_row(frame: pd.DataFrame, lowest_streams: bool) -> dict:
        out: dict = {}
        if frame.empty:
            return out
        frame = frame.assign(_s=pd.to_numeric(frame["streams"], errors="coerce"))
        frame = frame.sort_values("_s", na_position="last", kind="stable")
        for r in frame.to_dict("records"):
            k = tuple(_key(r[c]) for c in row_key)
            if lowest_streams:
                out.setdefault(k, r)
            else:
                out.setdefault(k, {})[_key(r["streams"])] = r
        return out

    tcp = by_row(_pick(s, TCP_BW_TESTS, "throughput_bps"), lowest_streams=False)
    lat = by_row(_pick(s, TCP_LAT_TESTS, "latency_us"), lowest_streams=True)
    loss = by_row(_pick(s, UDP_TESTS, "loss_pct"), lowest_streams=True)
    jit = by_row(_pick(s, UDP_TESTS, "jitter_ms"), lowest_streams=True)
    udp_bw = by_row(_pick(s, UDP_TESTS, "throughput_bps"), lowest_streams=True)
    udp_lat = by_row(_pick(s, UDP_LAT_TESTS, "latency_us"), lowest_streams=True)
    ping = {m: by_row(_pick(s, PING_TESTS, m), lowest_streams=True)
            for m in ("latency_us", "latency_min_us", "latency_max_us", "latency_mdev_us", "loss_pct")}

    cpu = cpu_per_gbps(df, TCP_BW_TESTS)
    cpu_by: dict = {}
    for (k, g) in cpu.groupby(CONFIG_KEY, dropna=False):
        k = dict(zip(CONFIG_KEY, (_key(x) for x in k)))
        cpu_by[(k["underlay_mtu"], k["mode"], k["overlay_mtu"], k["placement"], k["test"], k["streams"])] = g

    # Every row key seen in the run, ok or failed, with its datapaths, rate, failures.
    info: dict = {}
    fails = failures(df)
    for r in df.to_dict("records"):
        if r.get("mode") is None:
            continue
        k = tuple(_key(r.get(c)) for c in row_key)
        e = info.setdefault(k, {"datapath": [], "rate": [], "repeats": set()})
        e["datapath"].append(r.get("datapath"))
        e["rate"].append(r.get("rate"))
        if _truthy(r.get("ok")) and r.get("metric") != "failed":
            e["repeats"].add(_key(r.get("repeat")))
    nfail: dict = {}
    for r in fails.to_dict("records"):
        k = tuple(_key(r[c]) for c in row_key)
        nfail[k] = nfail.get(k, 0) + 1

    rows = []
    for k, e in info.items():
        streams_rows = tcp.get(k) or {None: None}
        for streams, t in streams_rows.items():
            row: dict = dict(zip(row_key, k))
            row.update(datapath=_join_unique(e["datapath"]), rate=_join_unique(e["rate"]) or None,
                       streams=streams, repeats=len(e["repeats"]), failed=nfail.get(k, 0))
            if t is not None:
                row.update(tcp_test=t["test"], tcp_gbps=t["median"] / 1e9, tcp_gbps_min=t["min"] / 1e9,
                           tcp_gbps_max=t["max"] / 1e9, bw_pct=t["pct_of_native"])
                c = cpu_by.get((*k[:4], t["test"], _key(t["streams"])))
                if c is not None and len(c):
                    row.update(cpu_per_gbps=float(c["cpu_per_gbps"].median()),
                               cpu_per_gbps_min=float(c["cpu_per_gbps"].min()),
                               cpu_per_gbps_max=float(c["cpu_per_gbps"].max()))
            lt = lat.get(k)
            if lt is not None:
                row.update(tcp_lat_us=lt["median"], tcp_lat_us_min=lt["min"], tcp_lat_us_max=lt["max"],
                           lat_pct=lt["pct_of_native"])
            for name, src in (("udp_loss_pct", loss.get(k)), ("udp_jitter_ms", jit.get(k))):
                if src is not None:
                    row.update({name: src["median"], f"{name}_min": src["min"], f"{name}_max": src["max"]})
            ub = udp_bw.get(k)
            if ub is not None:
                row.update(udp_test=ub["test"], udp_gbps=ub["median"] / 1e9, udp_gbps_min=ub["min"] / 1e9,
                           udp_gbps_max=ub["max"] / 1e9, udp_bw_pct=ub["pct_of_native"])
            ul = udp_lat.get(k)
            if ul is not None:
                row.update(udp_lat_us=ul["median"], udp_lat_us_min=ul["min"], udp_lat_us_max=ul["max"],
                           udp_lat_pct=ul["pct_of_native"])
            pa = ping["latency_us"].get(k)
            if pa is not None:
                row.update(ping_avg_us=pa["median"], ping_avg_us_min=pa["min"], ping_avg_us_max=pa["max"],
                           ping_pct=pa["pct_of_native"])
            for name, metric in (("ping_min_us", "latency_min_us"), ("ping_max_us", "latency_max_us"),
                                 ("ping_mdev_us", "latency_mdev_us"), ("ping_loss_pct", "loss_pct")):
                src = ping[metric].get(k)
                if src is not None:
                    row[name] = src["median"]
            rows.append(row)
    out = pd.DataFrame(rows, columns=SUMMARY_COLUMNS)
    for c in SUMMARY_COLUMNS:
        if c not in _NOT_FLOAT:
            out[c] = pd.to_numeric(out[c], errors="coerce").astype(float)
    return sort_configs(out).reset_index(drop=True)


def _has(summary: pd.DataFrame, col: str) -> bool:
    return col in summary.columns and bool(pd.to_numeric(summary[col], errors="coerce").notna().any())


def missing_columns(summary: pd.DataFrame) -> list[str]:
    """Human notes on the core columns that have no data at all (and why that may be).

    Only what a reader of the seed's table would look for: TCP throughput; TCP latency
    when the run measured no latency of any kind (qperf.tcp_lat, qperf.udp_lat,
    ping.flood); a % of native whose values exist but have no native reference; CPU per
    Gbit/s when there is TCP throughput but no CPU sample. Optional measurements nobody
    ran (UDP, ping) get no note: their columns are simply left out.
    """
    if summary.empty:
        return ["no measurements at all"]
    notes = []
    if not _has(summary, "tcp_gbps"):
        notes.append("TCP throughput (no iperf3.tcp or qperf.tcp_bw measurements)")
    if not any(_has(summary, c) for c in ("tcp_lat_us", "udp_lat_us", "ping_avg_us")):
        notes.append("TCP latency (no qperf.tcp_lat measurements)")
    for value, pct, text in (
            ("tcp_gbps", "bw_pct", "BW % of native (no native TCP throughput to compare with)"),
            ("tcp_lat_us", "lat_pct", "Lat % of native (no native TCP latency to compare with)"),
            ("udp_gbps", "udp_bw_pct", "UDP BW % of native (no native UDP throughput to compare with)"),
            ("udp_lat_us", "udp_lat_pct", "UDP Lat % of native (no native UDP latency to compare with)"),
            ("ping_avg_us", "ping_pct", "Ping % of native (no native ping to compare with)")):
        if _has(summary, value) and not _has(summary, pct):
            notes.append(text)
    if _has(summary, "tcp_gbps") and not _has(summary, "cpu_per_gbps"):
        notes.append("CPU per Gbit/s (no CPU samples alongside TCP throughput)")
    return notes


# --------------------------------------------------------------------------- formatting

def fmt_num(v: Any, digits: int = 3) -> str:
    """About `digits` significant digits without exponents; "—" for missing."""
    try:
        x = float(v)
    except (TypeError, ValueError):
        return "—"
    if not math.isfinite(x):
        return "—"
    a = abs(x)
    if a == 0:
        return "0"
    if a >= 10 ** (digits - 1):
        return f"{x:.0f}"
    decimals = digits - 1 - int(math.floor(math.log10(a)))
    return f"{x:.{max(0, min(decimals, 6))}f}"


def fmt_range(med: Any, lo: Any, hi: Any, digits: int = 3, fmt: Callable[..., str] | None = None) -> str:
    """"9.41 (9.38–9.45)"; just the median when min == max or they are missing.
    `fmt` formats each number (default fmt_num)."""
    fmt = fmt or fmt_num
    m = fmt(med, digits)
    if m == "—":
        return m
    lo_s, hi_s = fmt(lo, digits), fmt(hi, digits)
    if lo_s == "—" or hi_s == "—" or lo_s == hi_s:
        return m
    return f"{m} ({lo_s}–{hi_s})"


def fmt_pct(v: Any) -> str:
    try:
        x = float(v)
    except (TypeError, ValueError):
        return "—"
    return "—" if not math.isfinite(x) else f"{x:.1f}"


def _fmt_int(v: Any) -> str:
    k = _key(v)
    return "—" if k is None else str(k)


TABLE_HEADERS = [
    ("mode", "Mode"), ("overlay_mtu", "Overlay MTU"), ("datapath", "Datapath"),
    ("placement", "Placement"), ("streams", "Streams"),
    ("tcp", "TCP BW (Gbit/s)"), ("lat", "TCP Lat (µs)"), ("bw_pct", "BW %"), ("lat_pct", "Lat %"),
    ("udp_bw", "UDP BW (Gbit/s)"), ("udp_bw_pct", "UDP BW %"),
    ("loss", "UDP loss %"), ("jitter", "UDP jitter (ms)"),
    ("udp_lat", "UDP Lat (µs)"), ("udp_lat_pct", "UDP Lat %"),
    ("ping", "Ping avg (µs)"), ("ping_pct", "Ping %"), ("ping_rtt", "Ping min/avg/max/mdev (µs)"),
    ("ping_loss", "Ping loss %"),
    ("cpu", "CPU %/Gbit/s"), ("failed", "Failed"),
]

# The summary columns behind each measurement column of TABLE_HEADERS: the column is
# shown when at least one row has data in one of them (ping loss: when one is above 0).
TABLE_SOURCES = {
    "tcp": ["tcp_gbps"], "lat": ["tcp_lat_us"], "bw_pct": ["bw_pct"], "lat_pct": ["lat_pct"],
    "udp_bw": ["udp_gbps"], "udp_bw_pct": ["udp_bw_pct"], "loss": ["udp_loss_pct"], "jitter": ["udp_jitter_ms"],
    "udp_lat": ["udp_lat_us"], "udp_lat_pct": ["udp_lat_pct"],
    "ping": ["ping_avg_us"], "ping_pct": ["ping_pct"],
    "ping_rtt": ["ping_min_us", "ping_avg_us", "ping_max_us", "ping_mdev_us"], "ping_loss": ["ping_loss_pct"],
    "cpu": ["cpu_per_gbps"],
}
# % of native columns; the latencies' are lower-is-better.
PCT_CELLS = {"bw_pct": True, "lat_pct": False, "udp_bw_pct": True, "udp_lat_pct": False, "ping_pct": False}
TEXT_CELLS = {"mode", "datapath", "placement"}


def _has_cell_data(summary: pd.DataFrame, key: str) -> bool:
    cols = TABLE_SOURCES[key]
    if key == "ping_loss":
        v = pd.to_numeric(summary.get("ping_loss_pct", pd.Series(dtype=float)), errors="coerce")
        return bool((v > 0).any())
    return any(_has(summary, c) for c in cols)


def table_columns(summary: pd.DataFrame, show_streams: bool | None = None) -> list[tuple[str, str]]:
    """The TABLE_HEADERS entries worth showing for these summary rows: the config columns,
    Streams when stream counts vary (`show_streams` overrides), Failed when a case failed,
    and each measurement column that has data in at least one row."""
    if show_streams is None:
        show_streams = _streams_vary(summary)
    out = []
    for key, title in TABLE_HEADERS:
        if key == "streams":
            keep = show_streams
        elif key == "failed":
            keep = bool(pd.to_numeric(summary["failed"], errors="coerce").fillna(0).astype(int).any())
        elif key in TABLE_SOURCES:
            keep = _has_cell_data(summary, key)
        else:
            keep = True
        if keep:
            out.append((key, title))
    return out


def fmt_compact(v: Any, digits: int = 3) -> str:
    """fmt_num without trailing zeros: 5 → "5", 52.30 → "52.3"; "—" for missing."""
    s = fmt_num(v, digits)
    if "." in s:
        s = s.rstrip("0").rstrip(".")
    return s


def fmt_ping_rtt(r: dict[str, Any]) -> str:
    """"52/61/90/7": medians of ping's min/avg/max/mdev, like its rtt line; "—" if none."""
    parts = [fmt_compact(r.get(c)) for c in ("ping_min_us", "ping_avg_us", "ping_max_us", "ping_mdev_us")]
    return "—" if all(p == "—" for p in parts) else "/".join(parts)


def table_cells(summary: pd.DataFrame, all_ranges: bool = True) -> list[dict[str, str]]:
    """Each summary row as display strings keyed like TABLE_HEADERS (shared with the report).

    Throughputs, latencies and ping avg always carry their min–max; the UDP loss and
    jitter, ping loss and CPU columns only when `all_ranges`. A TCP throughput taken from
    qperf.tcp_bw where the run has iperf3.tcp elsewhere is marked with "*".
    """
    main_test = summary["tcp_test"].dropna().mode()
    main_test = main_test.iloc[0] if len(main_test) else None
    rng = fmt_range if all_ranges else (lambda m, lo, hi, digits=3: fmt_num(m, digits))
    cells = []
    for r in summary.to_dict("records"):
        r = {**{c: None for c in SUMMARY_COLUMNS}, **r}
        tcp = fmt_range(r["tcp_gbps"], r["tcp_gbps_min"], r["tcp_gbps_max"])
        if r["tcp_test"] and main_test and r["tcp_test"] != main_test:
            tcp += "*"
        cells.append({
            "mode": str(r["mode"]), "overlay_mtu": _fmt_int(r["overlay_mtu"]),
            "datapath": r["datapath"] or "—", "placement": str(r["placement"]),
            "streams": _fmt_int(r["streams"]),
            "tcp": tcp, "tcp_test": r["tcp_test"] or "",
            "lat": fmt_range(r["tcp_lat_us"], r["tcp_lat_us_min"], r["tcp_lat_us_max"]),
            "bw_pct": fmt_pct(r["bw_pct"]), "lat_pct": fmt_pct(r["lat_pct"]),
            "udp_bw": fmt_range(r["udp_gbps"], r["udp_gbps_min"], r["udp_gbps_max"]),
            "udp_test": r["udp_test"] if isinstance(r["udp_test"], str) else "",
            "udp_bw_pct": fmt_pct(r["udp_bw_pct"]),
            "loss": rng(r["udp_loss_pct"], r["udp_loss_pct_min"], r["udp_loss_pct_max"], 2),
            "jitter": rng(r["udp_jitter_ms"], r["udp_jitter_ms_min"], r["udp_jitter_ms_max"], 2),
            "udp_lat": fmt_range(r["udp_lat_us"], r["udp_lat_us_min"], r["udp_lat_us_max"]),
            "udp_lat_pct": fmt_pct(r["udp_lat_pct"]),
            "ping": fmt_range(r["ping_avg_us"], r["ping_avg_us_min"], r["ping_avg_us_max"], fmt=fmt_compact),
            "ping_pct": fmt_pct(r["ping_pct"]),
            "ping_rtt": fmt_ping_rtt(r),
            "ping_loss": fmt_num(r["ping_loss_pct"], 2),
            "cpu": rng(r["cpu_per_gbps"], r["cpu_per_gbps_min"], r["cpu_per_gbps_max"]),
            "failed": str(int(r["failed"])) if r["failed"] else "",
        })
    return cells


def _streams_vary(summary: pd.DataFrame) -> bool:
    s = pd.to_numeric(summary["streams"], errors="coerce").dropna()
    return s.nunique() > 1 or bool((s > 1).any())


def table_notes(keys: Iterable[str]) -> list[str]:
    """What the shown columns mean (shared by the text table's footer and the report)."""
    keys = set(keys)
    notes = []
    ranged = [name for k, name in (("tcp", "TCP BW"), ("lat", "TCP Lat"), ("udp_bw", "UDP BW"),
                                   ("udp_lat", "UDP Lat"), ("ping", "Ping avg")) if k in keys]
    if ranged:
        notes.append(f"{', '.join(ranged)}: median (min–max) over repeats; other columns: medians.")
    pcts = [t for k, t in TABLE_HEADERS if k in PCT_CELLS and k in keys]
    if pcts:
        lower = [t for k, t in TABLE_HEADERS if k in keys and PCT_CELLS.get(k) is False]
        notes.append(f"{', '.join(pcts)}: % of native at the same underlay MTU, test and streams"
                     + (f" ({', '.join(lower)}: above 100 is slower)." if lower else "."))
    if "ping_rtt" in keys:
        notes.append("Ping min/avg/max/mdev: medians over repeats of each ping.flood rtt summary.")
    return notes


def format_table(df: pd.DataFrame) -> str:
    """The summary as plain-text, pipe-aligned tables (valid markdown), one per underlay MTU.

    Accepts `summary_table` output, or a measurements frame (it is summarized first).
    Each table has the measurement columns that have data at that underlay MTU (see
    `table_columns`); values are "median (min–max)" over repeats, % columns are % of native.
    """
    summary = summary_table(df) if "metric" in df.columns else df
    if summary.empty:
        return "No measurements."
    show_streams = _streams_vary(summary)
    numeric = {k for k, _ in TABLE_HEADERS} - TEXT_CELLS
    blocks, shown = [], set()
    for mtu, part in summary.groupby("underlay_mtu", dropna=False, sort=False):
        headers = table_columns(part, show_streams)
        shown |= {k for k, _ in headers}
        rate = _join_unique(part["rate"])
        title = f"Underlay MTU {_fmt_int(mtu)}" + (f", rate {rate}" if rate else "")
        cells = table_cells(part, all_ranges=False)
        width = {k: max(len(t), *(len(c[k]) for c in cells)) for k, t in headers}

        def line(values: dict[str, str]) -> str:
            return " | ".join(values[k].rjust(width[k]) if k in numeric else values[k].ljust(width[k])
                              for k, _ in headers).rstrip()

        lines = [title, "", line({k: t for k, t in headers}),
                 " | ".join("-" * width[k] for k, _ in headers)]
        lines += [line(c) for c in cells]
        blocks.append("\n".join(lines))
    notes = missing_columns(summary)
    text = "\n\n".join(blocks)
    footer = table_notes(shown)
    if "tcp" in shown and any(c["tcp"].endswith("*") for c in table_cells(summary)):
        footer.append("* TCP BW from qperf.tcp_bw: this config has no iperf3.tcp result.")
    if notes:
        footer.append("No data: " + "; ".join(notes) + ".")
    if footer:
        text += "\n\n" + "\n".join(footer)
    return text


def format_summary(df: pd.DataFrame, fmt: str = "table") -> str:
    """What `overlaybench show RUN --format table|csv|json` prints, from a measurements frame."""
    summary = summary_table(df)
    if fmt == "table":
        return format_table(summary)
    if fmt == "csv":
        buf = io.StringIO()
        summary.to_csv(buf, index=False, float_format="%.6g")
        return buf.getvalue().rstrip("\n")
    if fmt == "json":
        records = [{k: _json_value(v) for k, v in r.items()} for r in summary.to_dict("records")]
        return json.dumps(records, indent=2)
    raise HarnessError(f"unknown format {fmt!r}: use table, csv or json")


def _json_value(v: Any) -> Any:
    if isinstance(v, (float, np.floating)):
        return None if not math.isfinite(float(v)) else float(v)
    if isinstance(v, np.integer):
        return int(v)
    if v is not None and not isinstance(v, (str, int, bool, list, dict)) and pd.isna(v):
        return None
    return v
