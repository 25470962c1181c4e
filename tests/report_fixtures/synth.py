"""Realistic synthetic runs: the numbers a two-namespace lab gives, with noise.

`make_records` returns measurements.jsonl lines as dicts (the schema of
harness.results); `make_run` writes them through the real RunStore so the run
directory is exactly what `overlaybench run` leaves behind.
"""

from __future__ import annotations

import pathlib
import random
from typing import Any, Iterable

from harness.modes import standard
from harness.results import Measurement, RunStore

# (TCP Gbit/s, TCP latency µs) per underlay MTU and mode, roughly what a veth lab shows.
PROFILE = {
    1500: {"native": (14.3, 18.0), "fastdp": (6.9, 24.0), "auto": (6.8, 24.5),
           "sleeve": (2.9, 41.0), "sleeve-l3": (2.4, 39.0), "sleeve-crypto": (1.1, 58.0),
           "sleeve-basic": (0.62, 71.0)},
    9000: {"native": (38.0, 19.0), "fastdp": (21.5, 25.0), "auto": (21.0, 25.5),
           "sleeve": (7.6, 43.0), "sleeve-l3": (6.1, 41.0), "sleeve-crypto": (2.7, 61.0),
           "sleeve-basic": (1.9, 74.0)},
}
ALL_MODES = ["native", "fastdp", "auto", "sleeve", "sleeve-l3", "sleeve-crypto", "sleeve-basic"]
ALL_TESTS = ["iperf3.tcp", "iperf3.udp", "qperf.tcp_bw", "qperf.tcp_lat", "ping.flood"]
EVERY_TEST = ALL_TESTS + ["qperf.udp_bw", "qperf.udp_lat", "sockperf.pingpong", "sockperf.pingpong_tcp",
                           "iperf3.pps64",
                           "iperf3.pps256", "iperf3.pps1400",
                           "load.bounceback", "iperf.crr", "iperf3.udp_sweep64",
                           "iperf3.udp_sweep1400", "irtt.udp"]     # every column the table has
# blast's tests draw no noise, so the rest of a run keeps the numbers it had before them
BLAST_TESTS = ["udp.pps64", "udp.pps1400", "packet.pps64", "packet.pps1400", "udp.ndr64", "udp.pdr64"]
EVERY_TEST += BLAST_TESTS
# load.irtt draws no noise either (the same reason): its round trips follow the mode's latency
EVERY_TEST += ["load.irtt"]
# Packets per second at 64 B, roughly: per-packet cost, not bytes, limits the userspace sleeve.
PPS = {"native": 1.1e6, "fastdp": 0.75e6, "auto": 0.74e6, "sleeve": 0.3e6, "sleeve-l3": 0.32e6,
       "sleeve-crypto": 0.22e6, "sleeve-basic": 0.12e6}

META = {
    "git": {"commit": "33ba442bd7905c32f2883e3dd8a55f751c3ba659", "dirty": False},
    "hostname": "bench-01",
    "machine": {"hostname": "bench-01", "kernel": "6.18.44-fc-v657", "cpu": "AMD EPYC 7B13", "cpus": 2},
    "kernel": "6.18.44-fc-v657",
    "cpu": {"model": "AMD EPYC 7B13", "cores": 2},
    "tools": {"iperf3": "3.12", "qperf": "0.4.11", "ping": "iputils 20221126"},
    "offloads": {"ob-u0": {"tso": "on", "gso": "on", "gro": "on", "tx-checksumming": "on"}},
    "scenario": {"name": "regression", "file": "scenarios/regression.toml", "repeats": 5,
                 "duration": 10},
    "underlay": {"mtus": [1500, 9000], "rate": None},
    "cpu_accounting": "whole-machine",
    "sleeve": {"version": "0.1.0", "flags": ["--batch", "--gso", "--recvmmsg"]},
}


def overlay_mtu(mode: str, underlay: int) -> int:
    if mode == "native":
        return underlay
    if mode == "sleeve-l3":
        return underlay - 28
    return underlay - 50


def datapath(mode: str, underlay: int) -> str:
    if mode == "native":
        return "native"
    if mode in ("fastdp",):
        return "fastdp"
    if mode == "auto":
        return "fastdp"
    return "sleeve"


def _profile(mode: str, underlay: int) -> tuple[float, float]:
    table = PROFILE.get(underlay) or PROFILE[1500]
    return table.get(mode, (1.0, 100.0))


def make_records(*, modes: Iterable[str] = ALL_MODES, underlay_mtus: Iterable[int] = (1500, 9000),
                 placements: Iterable[str] = ("container-container",), tests: Iterable[str] = ALL_TESTS,
                 repeats: int = 3, seed: int = 1, noise: float = 0.02, streams: Iterable[int] = (1,),
                 scale: dict[str, float] | None = None, lat_scale: dict[str, float] | None = None,
                 fail: dict[tuple, str] | None = None, rate: str | None = None,
                 run_id: str = "synthetic") -> list[dict[str, Any]]:
    """Measurement lines for a mode × MTU × placement × test × repeat matrix.

    scale / lat_scale: multiply a mode's throughput / latency (a regression or a win).
    fail: {(mode, underlay_mtu, test): reason} (or (mode, underlay_mtu, test, repeat)) makes
    those cases failed rows. Native runs host-host only, as the real runner does. streams:
    the stream counts of iperf3.tcp (more streams: more throughput, less per stream).
    """
    rng = random.Random(seed)
    stream_counts = tuple(streams)
    scale = scale or {}
    lat_scale = lat_scale or {}
    fail = fail or {}
    out: list[dict[str, Any]] = []

    def noisy(x: float) -> float:
        return x * (1 + rng.gauss(0, noise))

    for rep in range(repeats):
        for u in underlay_mtus:
            for mode in modes:
                places = ["host-host"] if mode == "native" else list(placements)
                for place in places:
                    for test, streams in ((t_, s) for t_ in tests
                                          for s in (stream_counts if t_ == "iperf3.tcp" else (1,))):
                        ctx = dict(case=f"{mode}/u{u}/{place}/{test}/s{streams}", mode=mode,
                                   datapath=datapath(mode, u), underlay_mtu=u,
                                   overlay_mtu=overlay_mtu(mode, u), placement=place, test=test,
                                   streams=streams, repeat=rep, rate=rate, run_id=run_id,
                                   ts=f"2026-11-22T03:{rep:02d}:00+00:00")
                        reason = fail.get((mode, u, test, rep)) or fail.get((mode, u, test))
                        if reason:
                            out.append(dict(ctx, metric="failed", value=None, unit="", ok=False,
                                            error=reason))
                            continue
                        if test in BLAST_TESTS:
                            out += _blast_rows(ctx)
                            continue
                        gbps, lat = _profile(mode, u)
                        gbps *= scale.get(mode, 1.0)
                        lat *= lat_scale.get(mode, 1.0)
                        if test == "load.irtt":              # no noise: the rng's draws stay as they were
                            out += _irtt_load_rows(ctx, gbps, lat)
                            continue
                        if streams > 1:
                            gbps *= streams ** 0.5
                        out += _test_rows(ctx, test, noisy(gbps), noisy(lat), rng)
    return out


def _blast_rows(ctx: dict) -> list[dict]:
    """blast's figures without noise: native's sender is the limit (nothing lost at a whole CPU),
    every other mode's path loses; its searches end validated after 7 trials."""
    mode, test = ctx["mode"].split("@")[0], ctx["test"]
    sent = PPS["native"] * 1.3 * (1 + 0.02 * ctx["repeat"])
    got = min(sent, PPS.get(mode, 0.3e6) * 1.3 * (1 + 0.02 * ctx["repeat"]))
    bound = float(mode == "native")
    if test.startswith(("udp.pps", "packet.pps")):
        return [_row(ctx, "pps", got, "pps"), _row(ctx, "sent_pps", sent, "pps"),
                _row(ctx, "loss_pct", 100 * (sent - got) / sent, "pct"), _row(ctx, "socket_drops", 0.0, "count"),
                _row(ctx, "sender_cpu_pct", 99.0, "pct"), _row(ctx, "sender_bound", bound, "bool")]
    kind, rate = test[4:7], got * (0.9 if test.startswith("udp.ndr") else 0.95)
    return [_row(ctx, f"{kind}_pps", rate, "pps"), _row(ctx, f"{kind}_bps", rate * 64 * 8, "bps"),
            _row(ctx, "trials", 7.0, "count"), _row(ctx, "validated", 1.0, "bool"),
            _row(ctx, "sender_bound", bound, "bool"), _row(ctx, "trial01_offered_pps", 0.0, "pps"),
            _row(ctx, "trial01_sent_pps", sent, "pps"), _row(ctx, "trial01_loss_pct", 100 * (sent - got) / sent, "pct")]


def _row(ctx: dict, metric: str, value: float, unit: str, **extra: Any) -> dict[str, Any]:
    return dict(ctx, metric=metric, value=value, unit=unit, ok=True, error=None, **extra)


def _test_rows(ctx: dict, test: str, gbps: float, lat: float, rng: random.Random) -> list[dict]:
    cpu_total = 18 + 9 * gbps ** 0.8 + (25 if ctx["datapath"] == "sleeve" else 0)
    cpu = [_row(ctx, "cpu_client_pct", cpu_total * 0.45, "pct"),
           _row(ctx, "cpu_server_pct", cpu_total * 0.4, "pct"),
           _row(ctx, "cpu_total_pct", cpu_total, "pct")]
    if ctx["datapath"] == "sleeve":
        cpu.append(_row(ctx, "cpu_sleeve_pct", 24.0 + rng.random(), "pct"))
    if test == "iperf3.tcp":
        iv = [[float(t), gbps * 1e9 * (1 + rng.gauss(0, 0.04)) * (0.85 if t == 1 else 1)]
              for t in range(1, 11)]
        n = ctx["streams"]
        shares = [1 + 0.2 * (i - (n - 1) / 2) / max(1, n - 1) for i in range(n)] if n > 1 else []
        per = [_row(ctx, "stream_throughput_bps", gbps * 1e9 * s / n, "bps") for s in shares]
        if shares:
            per.append(_row(ctx, "fairness_jain", sum(shares) ** 2 / (n * sum(s * s for s in shares)), "ratio"))
        return [_row(ctx, "throughput_bps", gbps * 1e9, "bps", intervals=iv),
                _row(ctx, "retransmits", float(rng.randint(0, 40)), "count")] + per + cpu
    if test.startswith("iperf3.pps"):
        size = int(test[len("iperf3.pps"):])
        pps = PPS.get(ctx["mode"].split("@")[0], 0.3e6) * (1 + rng.gauss(0, 0.03)) * (64 / size) ** 0.1
        return [_row(ctx, "pps", pps, "pps"), _row(ctx, "throughput_bps", pps * size * 8, "bps"),
                _row(ctx, "loss_pct", 0.5 * (1 + rng.gauss(0, 0.2)), "pct")] + cpu
    if test.startswith("sockperf.pingpong"):
        p = {"latency_us": 1.0, "latency_min_us": 0.7, "latency_p50_us": 0.95, "latency_p90_us": 1.2,
             "latency_p99_us": 2.0, "latency_p999_us": 4.5, "latency_max_us": 40.0}
        return [_row(ctx, m, lat * 0.9 * k, "us") for m, k in p.items()]
    if test == "iperf3.udp":
        udp = gbps * 0.55
        iv = [[float(t), udp * 1e9 * (1 + rng.gauss(0, 0.06))] for t in range(1, 11)]
        loss = max(0.0, (3.0 if ctx["datapath"] == "sleeve" else 0.4) * (1 + rng.gauss(0, 0.2)))
        return [_row(ctx, "throughput_bps", udp * 1e9, "bps", intervals=iv),
                _row(ctx, "jitter_ms", 0.004 * lat / 18 * (1 + rng.gauss(0, 0.1)), "ms"),
                _row(ctx, "loss_pct", loss, "pct")] + cpu
    if test == "qperf.tcp_bw":
        return [_row(ctx, "throughput_bps", gbps * 0.97e9, "bps")] + cpu
    if test == "qperf.tcp_lat":
        return [_row(ctx, "latency_us", lat, "us")]
    if test == "qperf.udp_bw":
        return [_row(ctx, "throughput_bps", gbps * 0.5e9, "bps"),
                _row(ctx, "loss_pct", (1.5 if ctx["datapath"] == "sleeve" else 0.2) * (1 + rng.gauss(0, 0.2)),
                     "pct")] + cpu
    if test == "qperf.udp_lat":
        return [_row(ctx, "latency_us", lat * 0.9, "us")]
    if test == "ping.flood":
        return [_row(ctx, "latency_us", lat * 1.6, "us"),
                _row(ctx, "latency_min_us", lat * 1.1, "us"),
                _row(ctx, "latency_max_us", lat * 4.0, "us"),
                _row(ctx, "latency_mdev_us", lat * 0.3, "us"),
                _row(ctx, "loss_pct", 0.0, "pct")]
    if test == "irtt.udp":
        rtt = {"rtt_us": 2.0, "rtt_min_us": 1.4, "rtt_p50_us": 1.9, "rtt_p90_us": 2.4, "rtt_p99_us": 4.0,
               "rtt_p999_us": 9.0, "rtt_max_us": 80.0, "ipdv_us": 0.3}
        return [_row(ctx, m, lat * k, "us") for m, k in rtt.items()] + [
            _row(ctx, "probe_loss_pct", float(rng.random() < 0.3) * 0.1, "pct")]
    if test in ("load.bounceback", "iperf.crr") or test.startswith("iperf3.udp_sweep"):
        return _load_rows(ctx, test, gbps, lat, rng)
    raise ValueError(test)


def _irtt_load_rows(ctx: dict, gbps: float, lat: float) -> list[dict]:
    """load.irtt: round trips idle and beside the load, real values (no bins), no noise."""
    sleeve = ctx["datapath"] == "sleeve"
    rows = []
    for p, k in (("p50", 1.0), ("p90", 1.4), ("p99", 2.5), ("p999", 6.0)):
        idle, loaded = 2 * lat * k, 2 * lat * k * (30 if sleeve else 4)
        rows += [_row(ctx, f"rtt_idle_{p}_us", idle, "us"), _row(ctx, f"rtt_loaded_{p}_us", loaded, "us"),
                 _row(ctx, f"rtt_added_{p}_us", loaded - idle, "us")]
    for phase, k in (("idle", 1.0), ("loaded", 30 if sleeve else 4)):
        rows += [_row(ctx, f"rtt_{phase}_us", 2.2 * lat * k, "us"), _row(ctx, f"rtt_{phase}_min_us", 1.5 * lat, "us"),
                 _row(ctx, f"rtt_{phase}_max_us", 20 * lat * k, "us")]
    return rows + [_row(ctx, "load_throughput_bps", gbps * 0.3e9, "bps"), _row(ctx, "probe_loss_pct", 0.0, "pct")]


def _load_rows(ctx: dict, test: str, gbps: float, lat: float, rng: random.Random) -> list[dict]:
    """The under-load tests: latency idle and loaded (a sleeve queues more under load),
    connections per second, a UDP sweep whose loss starts near the mode's throughput."""
    sleeve = ctx["datapath"] == "sleeve"
    if test == "load.bounceback":
        rows = []
        for p, k in (("p50", 1.0), ("p90", 1.5), ("p99", 3.0), ("p999", 8.0)):
            idle = 100 * round(max(1.0, lat * k / 100 * (1 + rng.gauss(0, 0.1))))
            loaded = idle + 100 * round(k * (40 if sleeve else 5) * (1 + rng.gauss(0, 0.1)))
            rows += [_row(ctx, f"lat_idle_{p}_us", idle, "us"), _row(ctx, f"lat_loaded_{p}_us", loaded, "us"),
                     _row(ctx, f"lat_added_{p}_us", loaded - idle, "us")]
        return rows + [_row(ctx, "load_throughput_bps", gbps * 0.3e9 * (1 + rng.gauss(0, 0.05)), "bps")]
    if test == "iperf.crr":
        rate = 9000 / (lat / 18) * (1 + rng.gauss(0, 0.05))
        return [_row(ctx, "conn_per_s", rate, "1/s"), _row(ctx, "connect_p50_us", lat * 2, "us"),
                _row(ctx, "connect_p99_us", lat * 6, "us"),
                _row(ctx, "conn_failed", float(rng.random() < 0.2), "count")]
    size = int(test[len("iperf3.udp_sweep"):])
    capacity = gbps * 1e9 * 0.5 * (size / 1400) ** 0.7
    rows, knee, clean = [], 0.0, True
    for i, offered in enumerate(10e6 * 10 ** (k / 2) for k in range(7)):
        sent = min(offered, 3 * capacity)
        loss = 0.0 if sent <= capacity else 100 * (1 - capacity / sent)
        clean = clean and loss < 0.1
        knee = sent if clean else knee
        rows += [_row(ctx, f"step{i + 1:02d}_offered_bps", offered, "bps"),
                 _row(ctx, f"step{i + 1:02d}_sent_bps", sent, "bps"),
                 _row(ctx, f"step{i + 1:02d}_received_bps", sent * (1 - loss / 100), "bps"),
                 _row(ctx, f"step{i + 1:02d}_loss_pct", loss, "pct"),
                 _row(ctx, f"step{i + 1:02d}_jitter_ms", 0.01 * (1 + i), "ms")]
    return rows + [_row(ctx, "knee_bps", knee, "bps"), _row(ctx, "knee_bounded", 1.0, "bool")]


def make_run(root: pathlib.Path | str, meta: dict[str, Any] | None = None,
             records: list[dict[str, Any]] | None = None, **kw: Any) -> pathlib.Path:
    """A run directory under `root` written through RunStore; returns its path."""
    m = dict(META)
    if meta:
        m.update(meta)
    store = RunStore.create(root, m)
    if records is None:
        records = make_records(run_id=store.run_id, **kw)
    fields = set(Measurement.__dataclass_fields__)
    items = []
    for r in records:
        r = {k: v for k, v in r.items() if k in fields}
        r["run_id"] = store.run_id
        if r.get("value") is None:
            r["value"] = float("nan")
        items.append(Measurement(**r))
    store.append(items)
    # each mode's place and colour, as a session records them
    known = standard()
    names = dict.fromkeys(str(r.get("mode")) for r in records)
    looks = {n: {"order": known.get(n).order, "colour": known.get(n).colour} for n in names if n in known}
    store.update_meta(end="2026-11-22T03:30:00+00:00", **({"modes": looks} if "modes" not in m else {}))
    return store.path
