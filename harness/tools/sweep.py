"""iperf3 UDP sweeps: datagrams of one payload size at stepped offered loads, in phases
against one server (tools/base.py Phase), to find where loss begins (tools/knee.py).

The server (`iperf3 -s`, without -1) serves one step after the other until it is stopped;
each step is an ordinary `iperf3 -c … -u -b RATE -l SIZE -J` run, read with the iperf3
parser (tools/iperf3.py). Per step `stepNN_…` (NN from 01, lowest load first):
`offered_bps` (the rate asked for, iperf3's start.test_start.target_bitrate), `sent_bps` (what the sender managed: at small sizes
one iperf3 sender cannot reach high rates, so this is what the path was offered),
`received_bps`, `loss_pct` and `jitter_ms` (the receiver's). Per run: `knee_bps`, the
sent rate at the knee (0 when even the lowest step lost ≥ the threshold), and
`knee_bounded` (1: a step past the knee lost; 0: none did, so the knee is only a lower
bound and the sweep should go higher).
"""

from __future__ import annotations

from typing import Any

from harness.core.errors import HarnessError
from harness.core.samples import Sample
from harness.core.units import parse_rate
from harness.tools.base import Phase, PhaseOutput, PhasedTool, TestSpec, ToolResult
from harness.tools.common import failed, whole_seconds
from harness.tools.iperf3 import DEFAULT_PORT, MAX_UDP_PAYLOAD, MIN_UDP_PAYLOAD, load, udp_samples
from harness.tools.knee import DEFAULT_LOSS_PCT, knee

MIN_STEPS, MAX_STEPS = 2, 32
DEFAULT_FROM, DEFAULT_TO, DEFAULT_STEPS = "10mbit", "10gbit", 7
STEP_METRICS = ("offered_bps", "sent_bps", "received_bps", "loss_pct", "jitter_ms")


def step_name(i: int) -> str:
    return f"step{i + 1:02d}"


def rates(low: str, high: str, steps: int) -> tuple[float, ...]:
    """`steps` offered loads from `low` to `high` (rates as 100mbit, 1gbit), evenly spaced
    on a log scale; HarnessError for fewer than MIN_STEPS, a rate under parse_rate's floor,
    or `high` not above `low`."""
    if not MIN_STEPS <= steps <= MAX_STEPS:
        raise HarnessError(f"a sweep needs {MIN_STEPS} to {MAX_STEPS} steps, not {steps}")
    lo, hi = parse_rate(low), parse_rate(high)
    if hi <= lo:
        raise HarnessError(f"a sweep's top rate {high} must be above its bottom rate {low}")
    ratio = (hi / lo) ** (1 / (steps - 1))
    return tuple(float(round(lo * ratio ** i)) for i in range(steps))


DEFAULT_RATES = rates(DEFAULT_FROM, DEFAULT_TO, DEFAULT_STEPS)


class Iperf3Sweep(PhasedTool):
    phased_as = "one per offered load"
    """iperf3.udp_sweepN: N-byte UDP payloads at each offered load of the sweep."""

    binary = "iperf3"
    package = "iperf3"
    version_argv = ("iperf3", "--version")
    version_re = r"iperf (\S+)"
    needs_server = True
    server_exits = False      # no -1: it serves every step, then the runner stops it

    def __init__(self, size: int, threshold_pct: float = DEFAULT_LOSS_PCT):
        if not MIN_UDP_PAYLOAD <= size <= MAX_UDP_PAYLOAD:
            raise ValueError(f"iperf3 UDP payload must be {MIN_UDP_PAYLOAD}..{MAX_UDP_PAYLOAD} bytes, not {size}")
        self.name = f"iperf3.udp_sweep{size}"
        self.payload = size
        self.threshold_pct = threshold_pct

    def server_argv(self, spec: TestSpec) -> list[str]:
        argv = ["iperf3", "-s", "-p", str(spec.port or DEFAULT_PORT)]
        return argv + (["-B", spec.bind_addr] if spec.bind_addr else [])

    def _step(self, spec: TestSpec, rate: float) -> list[str]:
        return ["iperf3", "-c", spec.server_addr, "-p", str(spec.port or DEFAULT_PORT),
                "-t", str(whole_seconds(spec.duration)), "-J", "-u", "-b", str(int(rate)),
                "-l", str(self.payload)]

    def phases(self, spec: TestSpec) -> list[Phase]:
        steps = spec.rates or DEFAULT_RATES
        if len(steps) < MIN_STEPS:
            raise HarnessError(f"{self.name}: a sweep needs at least {MIN_STEPS} steps, got {len(steps)}")
        limit = whole_seconds(spec.duration) + 15
        return [Phase(step_name(i), self._step(spec, r), limit) for i, r in enumerate(sorted(steps))]

    def parse(self, stdout: str, stderr: str, returncode: int | None) -> ToolResult:
        """One step alone: its sent, received, loss and jitter."""
        doc, reason = load(stdout, stderr, returncode)
        if doc is None:
            return failed(reason)
        try:
            offered = Sample("offered_bps", float(doc["start"]["test_start"]["target_bitrate"]), "bps")
            return ToolResult(samples=[offered] + step_samples(doc["end"]), ok=True)
        except (KeyError, TypeError, ValueError) as e:
            return failed(f"iperf3 JSON lacks the summary ({type(e).__name__}: {e})")

    def parse_phases(self, outputs: list[PhaseOutput]) -> ToolResult:
        """Every step's figures, then the knee over (sent, loss) of all steps; the first step
        that failed names the reason (a runner may stop after it)."""
        samples: list[Sample] = []
        points = []
        for out in outputs:
            res = self.parse(out.stdout, out.stderr, out.returncode)
            if not res.ok:
                return failed(f"{out.name}: {res.error}")
            got = {s.metric: s.value for s in res.samples}
            samples += [Sample(f"{out.name}_{s.metric}", s.value, s.unit) for s in res.samples]
            points.append((got["sent_bps"], got["loss_pct"]))
        if len(outputs) < MIN_STEPS:
            return failed(f"{self.name}: {len(outputs)} steps measured, a sweep needs {MIN_STEPS}")
        k = knee(points, self.threshold_pct)
        samples += [Sample("knee_bps", k.bps, "bps"), Sample("knee_bounded", float(k.bounded), "bool")]
        return ToolResult(samples=samples, ok=True)


def step_samples(end: dict[str, Any]) -> list[Sample]:
    """sent_bps (the sender's rate), then received_bps, loss_pct and jitter_ms."""
    sent = end.get("sum_sent") or end["sum"]
    received, jitter, loss = udp_samples(end)
    return [Sample("sent_bps", float(sent["bits_per_second"]), "bps"),
            Sample("received_bps", received.value, "bps"), loss, jitter]

