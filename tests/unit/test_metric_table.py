"""The metric table (harness/core/metrics.py) holds every metric the harness records.

Every metric each tool's parser gives on the real outputs under tests/data (captures.tsv),
the runner's own (its CPU meters around a case), a synthetic run of every test
(tests/report_fixtures/synth.py, EVERY_TEST) and the recorded runs under tests/data must be
in the table, and the test that emitted it among the entry's `tests`: a tool that starts
emitting a metric the table does not know fails here, before a surface shows it without a
unit or files it the wrong way round. Then the table's word on gate bands, directions and
latency trips, and that no other module of harness/ keeps a table of its own.

Nothing here depends on timing: parsers on stored text, meters on stored /proc/stat
snapshots and fixed process CPU seconds, the source code read as text.
"""

from __future__ import annotations

import ast
import json
import pathlib
import types

import pytest
from captures import DATA, capture

from harness.analysis import stats
from harness.core import metrics
from harness.core.metrics import ONE_WAY, ROUND_TRIP
from harness.gates.verdict import DEFAULT_TOLERANCES
from harness.testbeds.cpu import MachineMeter, PerHostMeter
from harness.tools import TOOLS
from harness.tools.base import PhaseOutput, TestSpec

HARNESS = pathlib.Path(__file__).resolve().parents[2] / "harness"
RUNS = [DATA / "runs" / "quick", DATA / "compare" / "aa", DATA / "compare" / "slowed"]
SPEC = TestSpec(server_addr="198.18.0.2", duration=2)

# Each capture of captures.tsv → the tests whose parser reads it. Phased tests (the load's
# idle and loaded probe, a sweep's steps) take several captures at once: PHASED below.
SINGLE = {
    "iperf3_tcp_1": ["iperf3.tcp"], "iperf3_tcp_4": ["iperf3.tcp"], "iperf3_tcp_reverse": ["iperf3.tcp"],
    "iperf3_tcp_sigterm": ["iperf3.tcp"], "iperf3_tcp_killed": ["iperf3.tcp"], "iperf3_refused": ["iperf3.tcp"],
    "iperf3_udp": ["iperf3.udp"], "iperf3_udp_2": ["iperf3.udp"],
    "iperf3_pps_64": ["iperf3.pps64", "iperf3.pps256"], "iperf3_pps_1400": ["iperf3.pps1400"],
    "qperf_tcp_bw": ["qperf.tcp_bw"], "qperf_tcp_bw_killed": ["qperf.tcp_bw"], "qperf_refused": ["qperf.tcp_bw"],
    "qperf_tcp_lat": ["qperf.tcp_lat"], "qperf_udp_bw": ["qperf.udp_bw"], "qperf_udp_bw_vv": ["qperf.udp_bw"],
    "qperf_udp_lat": ["qperf.udp_lat"],
    "ping_flood": ["ping.flood"], "ping_loss": ["ping.flood"], "ping_unreachable": ["ping.flood"],
    "ping_partial_loss": ["ping.flood"],
    "sockperf_udp": ["sockperf.pingpong"], "sockperf_udp_noserver": ["sockperf.pingpong"],
    "sockperf_udp_killed": ["sockperf.pingpong"], "sockperf_tcp": ["sockperf.pingpong_tcp"],
    "sockperf_refused": ["sockperf.pingpong_tcp"],
    "iperf2_crr": ["iperf.crr"], "iperf2_crr_refused": ["iperf.crr"],
    "irtt_ok": ["irtt.udp"], "irtt_noserver": ["irtt.udp"], "irtt_killed": ["irtt.udp"],
    "blast_pps64": ["udp.pps64"], "blast_paced": ["udp.pps64"], "blast_pps1400": ["udp.pps1400"],
    "blast_pps64_starved": ["udp.pps64"],
    "blast_killed": ["udp.pps64"], "blast_norecv": ["udp.pps64"], "blast_badsize": ["udp.pps64"],
    "blast_toobig": ["udp.pps1400"],
    "blast_packet64": ["packet.pps64"], "blast_packet1400": ["packet.pps1400"],
    "blast_packet_noraw": ["packet.pps64"], "blast_packet_v6": ["packet.pps64"],
}
PHASED = [
    ("load.bounceback", [("idle", "iperf2_bb_idle"), ("loaded", "iperf2_bb_congest")]),
    ("load.bounceback", [("idle", "iperf2_bbp_idle"), ("loaded", "iperf2_bbp_congest1")]),
    ("load.bounceback", [("idle", "iperf2_lab_idle"), ("loaded", "iperf2_lab_loaded_16k")]),
    ("load.bounceback", [("idle", "iperf2_bb_refused"), ("loaded", "iperf2_bb_killed")]),
    ("load.irtt", [("idle", "load_irtt_idle"), ("loaded", "load_irtt_loaded")]),
    ("load.irtt", [("idle", "load_irtt_idle"), ("loaded", "load_irtt_noload")]),
    ("load.irtt", [("idle", "load_irtt_killed"), ("loaded", "load_irtt_killed")]),
    ("load.sockperf", [("idle", "load_sockperf_idle"), ("loaded", "load_sockperf_loaded")]),
    ("load.sockperf", [("idle", "load_sockperf_idle"), ("loaded", "load_sockperf_noload")]),
    ("load.sockperf", [("idle", "load_sockperf_lost"), ("loaded", "load_sockperf_killed")]),
    ("load.sockperf", [("idle", "load_sockperf_stalled"), ("loaded", "load_sockperf_killed")]),
    *((t, [("step01", "iperf3_sweep64_100M"), ("step02", "iperf3_sweep1400_5G")])
      for t in ("iperf3.udp_sweep64", "iperf3.udp_sweep1400")),
    ("iperf3.udp_sweep64", [("step01", "iperf3_sweep64_100M"), ("step02", "iperf3_sweep_refused")]),
    # a search whose unpaced trial lost nothing, then its validation (tests/data/capture_blast.sh)
    *((t, [("trial01", "blast_pps64"), ("trial02", "blast_paced"), ("trial03", "blast_paced")])
      for t in ("udp.ndr64", "udp.pdr64")),
]
# The tool's captures that are not a whole result of one test: iperf3 3.1.3's UDP output (a
# version check of its own, test_tools_iperf3.py), blast's receiver lines (test_tools_blast.py).
# blast's receivers: no test parses them
NOT_A_RESULT = {"iperf3_udp_3.1.3", "blast_recv", "blast_recv_idle", "blast_recv_packet", "blast_recv_starved"}
# The MTU doctor's probes (tests/data/capture_mtu.sh): no run's metrics, read by tests/unit/test_tools_mtu.py
MTU_PROBES = {"ping_df_ok", "ping_df_fragneeded", "ping_df_local", "ping_df_local_dev", "ping_df_blackhole", "nstat_frag",
              "udp_df_ok", "udp_df_fragneeded", "udp_df_local", "udp_df_local_dev", "udp_df_blackhole",
              "udp_df_noreceiver"}


def _tsv() -> dict[str, int]:
    out = {}
    for line in (DATA / "captures.tsv").read_text().splitlines():
        name, rc, _ = line.split("\t")
        out[name] = int(rc)
    return out


def from_captures() -> set[tuple[str, str]]:
    """(metric, test) for every sample a parser gives on the stored captures, failed or not."""
    rcs = _tsv()
    pairs = set()
    for name, tests in SINGLE.items():
        out, err = capture(name)
        for test in tests:
            res = TOOLS[test].parse(out, err, rcs[name] if rcs[name] >= 0 else None)
            pairs |= {(s.metric, test) for s in res.samples}
    for test, phases in PHASED:
        outs = [PhaseOutput(ph, *capture(name), rcs[name] if rcs[name] >= 0 else None) for ph, name in phases]
        res = TOOLS[test].parse_phases(outs)
        pairs |= {(s.metric, test) for s in res.samples}
    return pairs


class _Host:
    """Answers `cat /proc/stat` with the stored snapshots, one after the other."""

    def __init__(self) -> None:
        self.stats = [(DATA / "proc_stat_a.txt").read_text(), (DATA / "proc_stat_b.txt").read_text()]

    def run(self, argv, check=False, timeout=None):
        if argv == ["cat", "/proc/stat"] and self.stats:
            return types.SimpleNamespace(ok=True, stdout=self.stats.pop(0), stderr="", returncode=0)
        return types.SimpleNamespace(ok=False, stdout="", stderr="", returncode=1)


def _literal_samples(path: pathlib.Path) -> set[str]:
    """The metric names a module writes as Sample("name", …) literals."""
    return {n.args[0].value for n in ast.walk(ast.parse(path.read_text()))
            if isinstance(n, ast.Call) and getattr(n.func, "id", None) == "Sample" and n.args
            and isinstance(n.args[0], ast.Constant) and isinstance(n.args[0].value, str)}


def from_runner() -> set[tuple[str, str]]:
    """The runner's own metrics: both CPU meters (run/case.py meters every case it runs alone
    in one phase, and replaces the tool's cpu_* samples with the meter's) and the sleeve
    daemons' CPU it adds (run/case.py). Its `failed` line marks a failed case, not a metric."""
    proc = types.SimpleNamespace(cpu_seconds=0.25)
    machine = MachineMeter(_Host())
    names = {s.metric for s in machine.end(machine.begin(None, None), proc, proc, 1.0)}
    per_host = PerHostMeter()
    names |= {s.metric for s in per_host.end(per_host.begin(_Host(), _Host()), proc, proc, 1.0)}
    names |= _literal_samples(HARNESS / "run" / "case.py") - {"failed"}
    assert {"cpu_total_pct", "cpu_client_pct", "cpu_server_pct", "cpu_sleeve_pct"} <= names
    metered = [t for t, tool in TOOLS.items() if tool.phases(SPEC) is None]      # one client command
    return {(m, t) for m in names for t in metered}


def from_synth(tmp_path: pathlib.Path) -> set[tuple[str, str]]:
    from report_fixtures.synth import EVERY_TEST, make_run
    run = make_run(tmp_path, underlay_mtus=[1500], tests=EVERY_TEST, repeats=1,
                   modes=["native", "fastdp", "sleeve"], placements=("container-container",))
    return from_run(run)


def from_run(run: pathlib.Path) -> set[tuple[str, str]]:
    """(metric, test) of every successful line of a run's measurements.jsonl."""
    lines = [json.loads(x) for x in (run / "measurements.jsonl").read_text().splitlines() if x.strip()]
    return {(r["metric"], r["test"]) for r in lines if r.get("ok")}


def problems(pairs: set[tuple[str, str]]) -> list[str]:
    """What the table does not say about these (metric, test) pairs."""
    out = []
    for metric, test in sorted(pairs):
        m = metrics.get(metric)
        if m is None:
            out.append(f"{metric} (from {test}): not in the metric table")
        elif test not in m.tests and "*" not in m.tests:
            out.append(f"{metric}: emitted by {test}, which its entry's tests {m.tests} do not list")
    return out


@pytest.mark.parametrize("source", ["captures", "runner", "synth"] + [f"recorded:{r.parent.name}/{r.name}"
                                                                      for r in RUNS])
def test_every_metric_recorded_is_in_the_table_with_its_test(source, tmp_path):
    if source == "captures":
        pairs = from_captures()
    elif source == "runner":
        pairs = from_runner()
    elif source == "synth":
        pairs = from_synth(tmp_path)
    else:
        pairs = from_run(DATA / source.split(":", 1)[1])
    assert pairs
    assert problems(pairs) == []


def test_the_captures_cover_every_test_and_every_capture_is_read():
    named = set(SINGLE) | {c for _, phases in PHASED for _, c in phases} | NOT_A_RESULT | MTU_PROBES
    assert set(_tsv()) | NOT_A_RESULT == named          # a new capture must be given its test here
    covered = {t for ts in SINGLE.values() for t in ts} | {t for t, _ in PHASED}
    assert covered == set(TOOLS)
    # every test emits something on its successful capture
    assert {t for _, t in from_captures()} == set(TOOLS)


def test_the_check_fails_on_a_metric_the_table_does_not_know():
    assert problems({("throughput_bps", "iperf3.tcp"), ("step07_offered_bps", "iperf3.udp_sweep64")}) == []
    assert problems({("throughput_gbps", "iperf3.tcp")}) == [
        "throughput_gbps (from iperf3.tcp): not in the metric table"]
    assert problems({("knee_bps", "qperf.tcp_lat")}) == [
        f"knee_bps: emitted by qperf.tcp_lat, which its entry's tests {metrics.get('knee_bps').tests} do not list"]
    assert problems({("step01_nonsense_bps", "iperf3.udp_sweep64")})          # a step of an unknown metric


def test_every_entry_names_real_tests_and_its_own_name():
    for name, m in metrics.METRICS.items():
        assert m.name == name and m.title and m.tests, name
        assert set(m.tests) <= set(TOOLS) | {"*"}, (name, m.tests)
        assert m.scale > 0 and m.base_scale > 0, name


def test_sweep_steps_resolve_to_their_base_metric():
    for step in ("step01_loss_pct", "step12_received_bps", "step03_offered_bps"):
        base = metrics.METRICS[step.split("_", 1)[1]]
        m = metrics.get(step)
        assert metrics.known(step) and m.name == step and "step" in m.title
        assert (m.unit, m.scale, m.higher_is_better, m.base_unit, m.tests) == \
            (base.unit, base.scale, base.higher_is_better, base.base_unit, base.tests)
        assert m.band is None                      # a step is not gated: its knee is
    assert metrics.get("step01_bogus_bps") is None and not metrics.known("stepx_loss_pct")
    assert metrics.get("nonsense") is None and metrics.of("nonsense", "widgets").unit == "widgets"


def test_gate_bands_are_the_table_s_and_unchanged():
    assert DEFAULT_TOLERANCES == metrics.bands()
    # the values the gate held before the table took them over
    assert metrics.bands() == {"throughput_bps": 0.10, "latency_us": 0.15, "pps": 0.10, "latency_p99_us": 0.25,
                               "lat_loaded_p99_us": 1.00, "conn_per_s": 0.40, "knee_bps": 0.50,
                               "rtt_p50_us": 0.60, "ndr_pps": 0.25, "pdr_pps": 0.50, "rtt_loaded_p50_us": 0.75,
                               "rtt_loaded_p90_us": 0.15}


def test_directions():
    for name in ("conn_per_s", "knee_bps", "load_throughput_bps", "throughput_bps", "pps", "fairness_jain",
                 "stream_throughput_bps", "step02_received_bps"):
        assert metrics.higher_is_better(name), name
    for name in ("latency_us", "rtt_p99_us", "lat_loaded_p99_us", "connect_p99_us", "loss_pct", "jitter_ms",
                 "retransmits", "conn_failed", metrics.CPU_PER_GBIT, "cpu_total_pct", "step01_loss_pct",
                 "a_mode_s_own_counter"):
        assert not metrics.higher_is_better(name), name
    assert stats.higher_is_better is metrics.higher_is_better


def test_trips():
    assert metrics.trip("latency_us", "qperf.tcp_lat") == ONE_WAY
    assert metrics.trip("latency_us", "qperf.udp_lat") == ONE_WAY
    assert metrics.trip("latency_p99_us", "sockperf.pingpong") == ONE_WAY
    assert metrics.trip("latency_us", "ping.flood") == ROUND_TRIP
    assert metrics.trip("latency_min_us", "ping.flood") == ROUND_TRIP
    for name, test in (("rtt_p99_us", "irtt.udp"), ("connect_p99_us", "iperf.crr"),
                       ("lat_loaded_p99_us", "load.bounceback"), ("lat_idle_p50_us", "load.bounceback")):
        assert metrics.trip(name, test) == ROUND_TRIP, name
    for name in ("jitter_ms", "ipdv_us", "throughput_bps", "loss_pct", "nonsense_us"):
        assert metrics.trip(name, "iperf3.udp") is None, name
    # a sweep step's jitter is a jitter, not a one-way latency
    assert metrics.trip("step01_jitter_ms", "iperf3.udp_sweep64") is None
    assert "one-way" not in metrics.for_test("step01_jitter_ms", "iperf3.udp_sweep64").title
    # every latency in the table has a trip, whichever of its tests measured it
    for m in metrics.METRICS.values():
        if m.base_unit == "seconds" and m.name not in ("jitter_ms", "ipdv_us"):
            for t in m.tests:
                assert metrics.trip(m.name, t) in (ONE_WAY, ROUND_TRIP), (m.name, t)


def test_for_test_names_a_round_trip_rtt_and_says_one_way():
    ping = metrics.for_test("latency_us", "ping.flood")
    assert (ping.name, ping.trip) == ("rtt_us", ROUND_TRIP)
    assert metrics.for_test("latency_min_us", "ping.flood").name == "rtt_min_us"
    mdev = metrics.for_test("latency_mdev_us", "ping.flood")
    assert (mdev.name, mdev.trip) == ("rtt_mdev_us", ROUND_TRIP) and "latency" not in mdev.title
    qperf = metrics.for_test("latency_us", "qperf.tcp_lat")
    assert (qperf.name, qperf.trip) == ("latency_us", ONE_WAY) and qperf.title.endswith("(one-way)")
    sock = metrics.for_test("latency_p99_us", "sockperf.pingpong_tcp")
    assert (sock.name, sock.trip) == ("latency_p99_us", ONE_WAY)
    assert metrics.for_test("rtt_p99_us", "irtt.udp") == metrics.METRICS["rtt_p99_us"]
    assert metrics.for_test("throughput_bps", "iperf3.tcp") == metrics.METRICS["throughput_bps"]


def test_display_uses_the_table_s_unit_and_scale():
    assert metrics.display("throughput_bps", 8.41e9) == "8.41 Gbit/s"
    assert metrics.display("latency_us", 52.34) == "52.3 µs"
    assert metrics.display("pps", 1.25e6) == "1.25 Mpps"
    assert metrics.display("knee_bps", 316e6) == "316 Mbit/s"
    assert metrics.display("retransmits", 12.0) == "12.0"
    assert metrics.display("latency_us", None) == "—"
    assert metrics.significant(0.49920000000000003) == 0.4992 and metrics.significant(123456789.0) == 123457000.0


# --------------------------------------------------------------------------- one table only

# What a table of metric directions, units or bands looks like in source.
FORBIDDEN_NAMES = ("HIGHER_IS_BETTER", "LOWER_IS_BETTER")
UNITS = {m.unit for m in metrics.METRICS.values() if m.unit} | {"Gbit/s", "Mbit/s", "µs", "us", "ms", "%", "Mpps"}
# A/B's tighter TCP throughput band over the table's (gates/compare.py): derived from the
# table's bands, the one override kept beside the gate that uses it.
ALLOWED = {("gates/compare.py", "AB_TOLERANCES")}


def _tables_in(rel: str, source: str) -> list[str]:
    """Where a module's source (`rel`: its path under harness/) keeps a table of metric
    directions, units or bands: a HIGHER_IS_BETTER, or a dict literal mapping a metric name
    to a bool, a unit, or (in a *TOLERANCE*/*BAND* table) a fraction."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Name) and node.id in FORBIDDEN_NAMES:
            found.append(f"{rel}:{node.lineno}: {node.id}")
        if not isinstance(node, (ast.Assign, ast.AnnAssign)) or not isinstance(node.value, ast.Dict):
            continue
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        name = next((t.id for t in targets if isinstance(t, ast.Name)), "")
        if (rel, name) in ALLOWED:
            continue
        for k, v in zip(node.value.keys, node.value.values):
            if not (isinstance(k, ast.Constant) and isinstance(k.value, str) and metrics.known(k.value)):
                continue
            const = v.value if isinstance(v, ast.Constant) else None
            direction = isinstance(const, bool)
            unit = isinstance(const, str) and const in UNITS
            band = isinstance(const, float) and any(w in name.upper() for w in ("TOLERANC", "BAND", "THRESHOLD"))
            if direction or unit or band or "BETTER" in name.upper():
                found.append(f"{rel}:{node.lineno}: {name or 'a dict'} maps {k.value!r} to {ast.unparse(v)}")
    return found


def test_no_module_but_the_table_keeps_metric_directions_units_or_bands():
    found = [f for p in sorted(HARNESS.rglob("*.py")) if p != HARNESS / "core" / "metrics.py"
             for f in _tables_in(p.relative_to(HARNESS).as_posix(), p.read_text())]
    assert found == []


def test_the_source_check_finds_a_table():
    src = ('HIGHER_IS_BETTER = {"throughput_bps": True}\n'
           'DEFAULT_TOLERANCES = {"latency_us": 0.15, "knee_bps": 0.5}\n'
           'UNIT = {"latency_us": "µs"}\n'
           'PERCENTILES = {"rtt_p50_us": 50.0}\n'             # a tool's percentiles: not a table of these
           'TITLES = {"latency_us": "latency"}\n')
    assert sorted(_tables_in("m.py", src)) == [
        "m.py:1: HIGHER_IS_BETTER", "m.py:1: HIGHER_IS_BETTER maps 'throughput_bps' to True",
        "m.py:2: DEFAULT_TOLERANCES maps 'knee_bps' to 0.5", "m.py:2: DEFAULT_TOLERANCES maps 'latency_us' to 0.15",
        "m.py:3: UNIT maps 'latency_us' to 'µs'"]
