"""The metric table: every metric a run records, with its unit, scale, direction, title, the
tests that emit it and its gate band. Stats, gates, the summary table, the report, `show` and
every export read it; none keeps its own copy.

A metric's value is stored in its base unit (measurements.jsonl's `unit`: bps, us, ms, pct,
count, pps, 1/s, ratio). `unit` and `scale` say how people read it (value × scale, in
`unit`); `base_unit` and `base_scale` how machines do (value × base_scale, in SI base units:
seconds, bytes, ratios), as Prometheus naming asks. `trip` says, for a latency, whether it is
one way (half a round trip, as qperf and sockperf report it) or a whole round trip (ping,
irtt, iperf 2's bounceback); `latency_us` is one-way from qperf and sockperf and a round trip
from ping, so its trip is the test's (`trip`).

Families with a phase, step or trial prefix (`lat_idle_p99_us`, `step03_loss_pct`,
`trial02_sent_pps`) are entries of their own where a surface shows them, and otherwise
resolve to their base metric (`get`).
"""

from __future__ import annotations

import dataclasses
import math
import re

ONE_WAY, ROUND_TRIP = "one-way", "round-trip"
CPU_PER_GBIT = "cpu_s_per_gbit"     # derived (analysis/stats.cpu_per_gbit), not emitted by a tool

# Tests whose latency figures are round trips; every other latency is one way.
ROUND_TRIP_TESTS = frozenset({"ping.flood", "irtt.udp", "load.bounceback", "load.irtt", "load.sockperf", "iperf.crr"})
_FINE = ("load.irtt", "load.sockperf")   # the fine probes under load (tools/underload.py)

_PPS = ("iperf3.pps64", "iperf3.pps256", "iperf3.pps1400")
_SWEEPS = ("iperf3.udp_sweep64", "iperf3.udp_sweep1400")
EVERY_TEST = "*"                     # a metric the runner records around any test (its CPU meter)
_SOCKPERF = ("sockperf.pingpong", "sockperf.pingpong_tcp")
_ANY = (EVERY_TEST,)
_BLAST = ("udp.pps64", "udp.pps1400", "packet.pps64", "packet.pps1400")   # blast's packet rates (tools/blast.py)
_NDR, _PDR = ("udp.ndr64",), ("udp.pdr64",)      # blast's rate searches (tools/ndr.py)


@dataclasses.dataclass(frozen=True)
class Metric:
    name: str                     # as measurements.jsonl names it
    title: str
    unit: str                     # what people read: value × scale
    scale: float
    higher_is_better: bool
    tests: tuple[str, ...]        # the tests that emit it (EVERY_TEST: the runner, around any test)
    base_unit: str = ""           # what machines read (OpenMetrics UNIT): value × base_scale
    base_scale: float = 1.0
    # The gate's tolerance: how far it may move the bad way before a significant change fails.
    # Tail latency moves more than the mean between runs of an unchanged build, hence its wider
    # band. Under load (load.bounceback, iperf.crr, the UDP sweeps, irtt) each band sits at about
    # twice (on a log scale) the largest move of an A/A pair of runs; a knee moves a whole sweep
    # step at a time (×3.16 between the default steps); irtt is judged on its median, as its P99
    # moved 86 % between A/A runs (BENCHMARKS.md, "Under load"). The rate searches, from five
    # A/A runs of native, fastdp and the sleeve, 1 s trials, each load decided by a vote of 3
    # (BENCHMARKS.md, "The rate searches' bands"): the sleeve's NDR ratio moved at most 10 %
    # between two runs, so its band is 25 %; its PDR ratio 22 %, so 50 % (fastdp's 7 and 15 %).
    # With one trial a load, the sleeve's NDR had moved 209 % (2 s trials on another VM): one
    # unlucky trial settled a search wherever it fell. load.irtt is judged on its loaded median:
    # in 21 runs of an unchanged build its sleeve-to-native ratio moved at most 42 % from the
    # first run's (70 % in one run beside a concurrent process), a sleeve slowed by 50 µs a
    # frame moved it 100 % or more, and 0.75 kept 20 of 20 A/A rounds and caught 20 of 20
    # (BENCHMARKS.md, "Latency under load, to the microsecond"); its P99 moved 167 % between runs.
    # load.sockperf is judged on its loaded P90 (rtt_loaded_p90_us; load.irtt's is shown, not
    # gated): in 21 runs its sleeve-to-native ratio moved at most 7 % between two runs (its
    # median 71 %, its P99 243 %), so the band is 15 %; a sleeve slowed by 50 µs a frame
    # moved it 160 % or more, and 0.15 kept 20 of 20 A/A rounds and caught 20 of 20
    # (BENCHMARKS.md, "Latency under load, a probe every 100 µs").
    band: float | None = None
    ab_band: float | None = None  # the A/B gate's (compare's) band where it differs from `band`
    trip: str | None = None       # latencies: ONE_WAY, ROUND_TRIP, or None when the test decides
    digits: int = 3               # significant digits people see

    @property
    def slug(self) -> str:
        """Bencher's measure and github-action-benchmark's name suffix: throughput-bps → throughput."""
        return _SLUG.get(self.name) or re.sub(r"_(bps|us|ms|pct)$", "", self.name).replace("_", "-")

    @property
    def family(self) -> str:
        """The OpenMetrics family (without the overlaybench_ prefix), named in its base unit."""
        if self.name in _FAMILY:
            return _FAMILY[self.name]
        stem = re.sub(r"_(bps|us|ms|pct)$", "", self.name)
        return f"{stem}_{_BASE_SUFFIX[self.base_unit]}" if _BASE_SUFFIX.get(self.base_unit) else stem

    def display(self, value: float | None) -> str:
        """The value as people read it, with its unit: 8.41 Gbit/s, 52.3 µs; "—" for none."""
        text = fmt_num(None if value is None else value * self.scale, self.digits)
        return text if text == "—" or not self.unit else f"{text} {self.unit}"


_SLUG = {"throughput_bps": "throughput", "pps": "packet-rate", "latency_us": "latency",
         "stream_throughput_bps": "stream-throughput", "fairness_jain": "fairness-jain"}
_FAMILY = {"pps": "packets_per_second", "conn_per_s": "connections_per_second",
           CPU_PER_GBIT: "cpu_seconds_per_gigabit"}
_BASE_SUFFIX = {"seconds": "seconds", "bytes_per_second": "bytes_per_second", "ratio": "ratio",
                "packets_per_second": "packets_per_second"}

_US = dict(unit="µs", scale=1.0, base_unit="seconds", base_scale=1e-6)
_BPS_G = dict(unit="Gbit/s", scale=1e-9, base_unit="bytes_per_second", base_scale=0.125)
_BPS_M = dict(unit="Mbit/s", scale=1e-6, base_unit="bytes_per_second", base_scale=0.125)
_PCT = dict(unit="%", scale=1.0, base_unit="ratio", base_scale=0.01)
_PERCENTILES = {"p50": "P50", "p90": "P90", "p99": "P99", "p999": "P99.9"}


def _m(name: str, title: str, tests: tuple[str, ...], higher: bool = False, **kw) -> Metric:
    return Metric(name=name, title=title, tests=tests, higher_is_better=higher, **kw)


def _table() -> list[Metric]:
    t = [
        _m("throughput_bps", "throughput (received goodput)", ("iperf3.tcp", "iperf3.udp", "qperf.tcp_bw",
           "qperf.udp_bw") + _PPS, True, band=0.10, ab_band=0.08, **_BPS_G),
        _m("stream_throughput_bps", "per-stream throughput", ("iperf3.tcp", "iperf3.udp"), True, **_BPS_G),
        _m("fairness_jain", "Jain's fairness index", ("iperf3.tcp", "iperf3.udp"), True, unit="", scale=1.0),
        _m("retransmits", "TCP retransmits", ("iperf3.tcp",), unit="", scale=1.0),
        _m("pps", "packet rate", _PPS + _BLAST, True, unit="Mpps", scale=1e-6, band=0.10),
        _m("jitter_ms", "jitter", ("iperf3.udp",) + _PPS + _SWEEPS, unit="ms", scale=1.0, base_unit="seconds",
           base_scale=1e-3),
        _m("loss_pct", "loss", ("iperf3.udp", "qperf.udp_bw", "ping.flood") + _PPS + _SWEEPS + _BLAST + _NDR
           + _PDR, **_PCT),
        _m("latency_us", "latency", ("qperf.tcp_lat", "qperf.udp_lat", "ping.flood") + _SOCKPERF,
           band=0.15, **_US),
        _m("latency_min_us", "minimum latency", ("ping.flood",) + _SOCKPERF, **_US),
        _m("latency_max_us", "maximum latency", ("ping.flood",) + _SOCKPERF, **_US),
        _m("latency_mdev_us", "latency mean deviation", ("ping.flood",), **_US),
        # The runner's CPU meter, around every test that declares a load (testbeds/cpu.py).
        _m("cpu_total_pct", "CPU busy share of all CPUs (the machine, or both hosts)", _ANY, **_PCT),
        _m("cpu_client_pct", "client CPU (its process as % of one CPU, or its host's busy share)", _ANY, **_PCT),
        _m("cpu_server_pct", "server CPU (its process as % of one CPU, or its host's busy share)", _ANY, **_PCT),
        _m("cpu_sleeve_pct", "sleeve daemons' CPU (% of one CPU)", _ANY, **_PCT),
        _m(CPU_PER_GBIT, "CPU-seconds per gigabit of TCP throughput", ("iperf3.tcp", "qperf.tcp_bw"),
           unit="CPU·s/Gbit", scale=1.0, base_unit="", digits=3),
        # iperf 2: connections, latency idle and under a working load (round trips)
        _m("conn_per_s", "connections per second", ("iperf.crr",), True, unit="conn/s", scale=1.0,
           band=0.40),
        _m("conn_failed", "failed connections", ("iperf.crr",), unit="", scale=1.0),
        _m("connect_us", "connect time", ("iperf.crr",), trip=ROUND_TRIP, **_US),
        _m("load_throughput_bps", "the working load's throughput", ("load.bounceback",) + _FINE, True, **_BPS_G),
        *(_m(f"lat_{phase}{stat}_us", f"{title} round trip {what}", ("load.bounceback",), trip=ROUND_TRIP, **_US)
          for phase, what in (("idle", "idle"), ("loaded", "under load"))
          for stat, title in (("", "mean"), ("_min", "minimum"), ("_max", "maximum"))),
        # UDP sweeps: the knee, and each step's figures
        _m("knee_bps", "loss knee (highest offered load under the loss threshold)", _SWEEPS, True,
           band=0.50, **_BPS_M),
        _m("knee_bounded", "knee at the sweep's top (1: the sweep never lost)", _SWEEPS, unit="", scale=1.0),
        _m("offered_bps", "offered load", _SWEEPS, True, **_BPS_M),
        _m("sent_bps", "sent load", _SWEEPS, True, **_BPS_M),
        _m("received_bps", "received load", _SWEEPS, True, **_BPS_M),
        # blast: the sender's side of a packet rate, and the rate searches (trials as trialNN_…)
        _m("sent_pps", "sent packet rate", _BLAST + _NDR + _PDR, True, unit="Mpps", scale=1e-6),
        _m("offered_pps", "offered packet rate (0: the sender unpaced)", _NDR + _PDR, True, unit="Mpps",
           scale=1e-6),
        _m("socket_drops", "datagrams the receiving sockets dropped (SO_RXQ_OVFL)", _BLAST, unit="",
           scale=1.0),
        _m("sender_cpu_pct", "the sender's CPU (% of one CPU)", _BLAST, **_PCT),
        _m("sender_wait_pct", "the sender's wait for a CPU while runnable (% of the window)", _BLAST, **_PCT),
        _m("sender_bound", "the sender, not the path, set the rate (1/0)", _BLAST + _NDR + _PDR, unit="",
           scale=1.0),
        _m("ndr_pps", "non-drop rate (NDR)", _NDR, True, unit="Mpps", scale=1e-6, band=0.25),
        _m("ndr_bps", "non-drop rate (NDR), UDP payload", _NDR, True, **_BPS_M),
        _m("pdr_pps", "partial-drop rate (PDR)", _PDR, True, unit="Mpps", scale=1e-6, band=0.50),
        _m("pdr_bps", "partial-drop rate (PDR), UDP payload", _PDR, True, **_BPS_M),
        _m("trials", "trials of the rate search", _NDR + _PDR, unit="", scale=1.0),
        _m("validated", "the search's validation confirmed its rate (1/0)", _NDR + _PDR, True, unit="",
           scale=1.0),
        # irtt: isochronous UDP round trips
        _m("rtt_us", "round trip", ("irtt.udp",), trip=ROUND_TRIP, **_US),
        _m("rtt_min_us", "minimum round trip", ("irtt.udp",), trip=ROUND_TRIP, **_US),
        _m("rtt_max_us", "maximum round trip", ("irtt.udp",), trip=ROUND_TRIP, **_US),
        _m("ipdv_us", "inter-packet delay variation", ("irtt.udp",), **_US),
        _m("probe_loss_pct", "probe loss", ("irtt.udp",) + _FINE, **_PCT),
        # load.irtt, load.sockperf: a fine probe idle and beside a working load (round trips)
        *(_m(f"rtt_{phase}{stat}_us", f"{title} round trip {what}", _FINE, trip=ROUND_TRIP, **_US)
          for phase, what in (("idle", "idle"), ("loaded", "under load"))
          for stat, title in (("", "mean"), ("_min", "minimum"), ("_max", "maximum"))),
    ]
    bands = {"latency_p99_us": 0.25, "lat_loaded_p99_us": 1.00, "rtt_p50_us": 0.60, "rtt_loaded_p50_us": 0.75,
             "rtt_loaded_p90_us": 0.15}
    for p, label in _PERCENTILES.items():
        t.append(_m(f"latency_{p}_us", f"{label} latency", _SOCKPERF, band=bands.get(f"latency_{p}_us"), **_US))
        if p in ("p50", "p99"):
            t.append(_m(f"connect_{p}_us", f"{label} connect time", ("iperf.crr",), trip=ROUND_TRIP, **_US))
        t.append(_m(f"rtt_{p}_us", f"{label} round trip", ("irtt.udp",), trip=ROUND_TRIP,
                    band=bands.get(f"rtt_{p}_us"), **_US))
        for phase, what in (("idle", "idle"), ("loaded", "under load"), ("added", "added by the load")):
            t.append(_m(f"lat_{phase}_{p}_us", f"{label} round trip {what}", ("load.bounceback",),
                        trip=ROUND_TRIP, band=bands.get(f"lat_{phase}_{p}_us"), **_US))
            t.append(_m(f"rtt_{phase}_{p}_us", f"{label} round trip {what}", _FINE,
                        trip=ROUND_TRIP, band=bands.get(f"rtt_{phase}_{p}_us"), **_US))
    return t


METRICS: dict[str, Metric] = {m.name: m for m in _table()}
_STEP = re.compile(r"^(step|trial)(\d+)_(.+)$")


def known(name: str) -> bool:
    """Whether the table has `name`, itself or as a step of a sweep or a trial of a search."""
    return get(name) is not None


def get(name: str) -> Metric | None:
    """The table's entry for `name` (a sweep step's or search trial's resolves to its base
    metric); None if unknown."""
    m = METRICS.get(name)
    if m is None and (step := _STEP.match(name)):
        base = METRICS.get(step[3])
        if base is not None:
            m = dataclasses.replace(base, name=name, title=f"{base.title}, {step[1]} {step[2]}", band=None)
    return m


def of(name: str, unit: str | None = None) -> Metric:
    """The table's entry, or one made for a metric it does not know (a mode's own counters):
    its recorded unit, shown as it is, lower is better, no gate band."""
    m = get(name)
    if m is not None:
        return m
    return Metric(name=name, title=name, unit=unit or "", scale=1.0, higher_is_better=False, tests=())


def higher_is_better(name: str) -> bool:
    """Which way is better; a metric the table does not know is a cost (lower is better)."""
    m = get(name)
    return bool(m and m.higher_is_better)


def band(name: str) -> float | None:
    m = get(name)
    return m.band if m else None


def bands() -> dict[str, float]:
    """Every metric's gate tolerance, where it has one."""
    return {m.name: m.band for m in METRICS.values() if m.band is not None}


def ab_bands() -> dict[str, float]:
    """The A/B gate's tolerances: a build against another in one run moves less than a run
    against a stored baseline, so throughput's band is narrower there."""
    return {**bands(), **{m.name: m.ab_band for m in METRICS.values() if m.ab_band is not None}}


def trip(name: str, test: str | None) -> str | None:
    """ONE_WAY or ROUND_TRIP for a latency metric measured by `test`; None for any other metric."""
    m = get(name)
    base = step[3] if (step := _STEP.match(name)) else name
    if m is None or m.base_unit != "seconds" or base in ("jitter_ms", "ipdv_us"):
        return None
    if m.trip:
        return m.trip
    return ROUND_TRIP if test in ROUND_TRIP_TESTS else ONE_WAY


def display(name: str, value: float | None) -> str:
    """A measured value with its unit, as people read it: 8.41 Gbit/s, 52.3 µs."""
    return of(name).display(value)


def fmt_num(v: object, digits: int = 3) -> str:
    """About `digits` significant digits without exponents; "—" for missing."""
    try:
        x = float(v)  # type: ignore[arg-type]
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


def significant(x: float, digits: int = 6) -> float:
    """x rounded to `digits` significant digits (what exports write: no float noise)."""
    if x == 0 or not math.isfinite(x):
        return x
    return round(x, digits - 1 - int(math.floor(math.log10(abs(x)))))


def for_test(name: str, test: str | None, unit: str | None = None) -> Metric:
    """The entry as measured by `test`, its trip in its name and title: a round trip reported
    under a `latency…` name (ping's) becomes `rtt…`, and a one-way latency says so, so that no
    surface files one-way figures and round trips under one name."""
    m = of(name, unit)
    way = trip(name, test)
    if way == ROUND_TRIP and name.startswith("latency"):
        new = "rtt" + name[len("latency"):]
        return METRICS.get(new) or dataclasses.replace(
            m, name=new, title=m.title.replace("latency", "round trip"), trip=ROUND_TRIP)
    if way == ONE_WAY and m.trip is None:
        return dataclasses.replace(m, title=f"{m.title} (one-way)", trip=ONE_WAY)
    return m
