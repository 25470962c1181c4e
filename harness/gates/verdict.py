"""Verdicts of the regression gates, and the one rule both gates judge a case by.

Two gates produce these: `gate` (a run's ratios to native against a stored baseline,
harness/gates/baseline.py) and `compare` (a head build against a base build measured side by side
in one run, harness/gates/compare.py). Both decide a case the same way, significance
before threshold (ARCHITECTURE.md, "A gate tests significance before the threshold"):

1. the change is significant: a one-sided test in the bad direction gives p ≤ alpha;
2. the estimated change is beyond the metric's tolerance in the bad direction.

`gate` applies this rule (`decide`) to a fixed number of repeats: with too few the test
cannot reach alpha at all, and such a case is "not enough repeats" and never fails.
`compare` applies a sequential rule instead (harness/analysis/sequential.py, judged in
gates/compare.py), which ends "undecided" when its pairs run out or are too few to ever
decide. A case that failed outright fails either gate. Rendering (text,
markdown, JUnit, JSON) is in `gates/render.py`; nothing here prints.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Protocol

from harness.analysis.stats import CONFIG_KEY, key_value
from harness.core import metrics
from harness.tools import TOOLS
from harness.tools.blast import BlastPps
from harness.tools.iperf3 import Iperf3Pps
from harness.tools.ndr import BlastSearch
from harness.tools.sweep import Iperf3Sweep

CASE_FIELDS = CONFIG_KEY + ["metric"]

# Verdict statuses. FAIL and ERROR fail the gate; the rest do not.
PASS, FAIL, ERROR, IMPROVED = "pass", "fail", "error", "improved"
NOT_ENOUGH, MISSING, SKIPPED, NEW = "not enough repeats", "missing", "skipped", "new"
UNDECIDED = "undecided"              # compare: the budget of pairs spent before either outcome
FAILING = (FAIL, ERROR)

BASELINE, AB = "baseline", "ab"      # Verdict.kind: against a stored baseline / head against base

# The fraction each metric may move the bad way before a significant change fails: each
# metric's gate band in the metric table (harness/core/metrics.py says how each was set).
DEFAULT_TOLERANCES = metrics.bands()
# The one metric each test is judged on (a packet-rate test's throughput is its rate times
# its size, sockperf's mean is not its tail: judging both would count one change twice).
HEADLINE = {"iperf3.tcp": "throughput_bps", "qperf.tcp_bw": "throughput_bps", "iperf3.udp": "throughput_bps",
            "qperf.udp_bw": "throughput_bps", "qperf.tcp_lat": "latency_us", "qperf.udp_lat": "latency_us",
            "ping.flood": "latency_us", "sockperf.pingpong": "latency_p99_us",
            "sockperf.pingpong_tcp": "latency_p99_us",
            **{t.name: "pps" for t in TOOLS.values() if isinstance(t, Iperf3Pps)},
            "load.bounceback": "lat_loaded_p99_us", "load.irtt": "rtt_loaded_p50_us",
            "load.sockperf": "rtt_loaded_p90_us", "iperf.crr": "conn_per_s", "irtt.udp": "rtt_p50_us",
            **{t.name: "knee_bps" for t in TOOLS.values() if isinstance(t, Iperf3Sweep)},
            **{t.name: "pps" for t in TOOLS.values() if isinstance(t, BlastPps)},
            **{t.name: f"{t.kind}_pps" for t in TOOLS.values() if isinstance(t, BlastSearch)}}


def headline_rows(frame: Any) -> Any:
    """The rows of a per-metric frame (with `test` and `metric`) whose metric is their test's
    headline; every row of a test this build does not know."""
    if frame.empty:
        return frame
    return frame[frame["metric"] == frame["test"].map(HEADLINE).fillna(frame["metric"])]


class Test(Protocol):
    """What `decide` needs of a significance test (significance.MannWhitney, SignedRank)."""

    p: float | None
    min_p: float
    enough: bool

    def significant(self, alpha: float = 0.05) -> bool: ...


def case_name(d: dict[str, Any]) -> str:
    """"fastdp underlay 1500 overlay 1450 container-container iperf3.tcp x1 throughput_bps",
    with " h0→h1" after it for a case of one host pair among several."""
    k = {f: key_value(d.get(f)) for f in CASE_FIELDS}
    return (f"{k['mode']} underlay {k['underlay_mtu']} overlay {k['overlay_mtu']} {k['placement']} "
            f"{k['test']} x{k['streams']} {k['metric']}" + (f" {k['pair']}" if k["pair"] else ""))


@dataclasses.dataclass
class CaseVerdict:
    case: dict[str, Any]                 # CASE_FIELDS
    status: str
    message: str = ""
    baseline_median: float | None = None  # baseline: ratio to native; A/B: the base arm's median value
    current_median: float | None = None   # this run: ratio to native; A/B: the head arm's median value
    change: float | None = None          # relative change, e.g. -0.12
    p: float | None = None
    n_baseline: int = 0
    n_current: int = 0
    tolerance: float | None = None
    pairs_used: int | None = None        # A/B: the pairs the sequential verdict looked at

    @property
    def failed(self) -> bool:
        return self.status in FAILING

    @property
    def name(self) -> str:
        return case_name(self.case)

    def headline(self) -> str:
        c = self.case
        pair = f", {c['pair']}" if c.get("pair") else ""
        return (f"{c['mode']} at underlay MTU {c['underlay_mtu']} (overlay {c['overlay_mtu']}), "
                f"{c['placement']}{pair}, {c['test']} x{c['streams']}, {c['metric']}: {self.message}")


@dataclasses.dataclass
class Verdict:
    cases: list[CaseVerdict]
    warnings: list[str]
    run_id: str | None = None
    baseline_run_id: str | None = None
    alpha: float = 0.05
    kind: str = BASELINE
    arms: dict[str, str] = dataclasses.field(default_factory=dict)  # A/B: label → where the build came from

    @property
    def title(self) -> str:
        return "compare" if self.kind == AB else "gate"

    @property
    def failures(self) -> list[CaseVerdict]:
        return [c for c in self.cases if c.failed]

    @property
    def ok(self) -> bool:
        return not self.failures

    @property
    def undecided(self) -> list[CaseVerdict]:
        return [c for c in self.cases if c.status == UNDECIDED]

    @property
    def status(self) -> str:
        """"fail", "undecided" (nothing failed, something undecided) or "pass"."""
        return FAIL if not self.ok else UNDECIDED if self.undecided else PASS

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for c in self.cases:
            out[c.status] = out.get(c.status, 0) + 1
        return out

    def headline(self) -> str:
        gated = [c for c in self.cases if c.status != NEW]
        counts = self.counts()
        shown = (PASS, FAIL, ERROR, NEW) + ((UNDECIDED,) if self.ok else ())
        extra = ", ".join(f"{n} {s}" for s, n in counts.items() if s not in shown)
        extra = f" ({extra})" if extra else ""
        if self.ok and self.undecided:
            return (f"{self.title} undecided: no case slower, {len(self.undecided)} of {len(gated)} cases "
                    f"undecided when the pairs ran out{extra}; more pairs (--repeats) can decide them")
        if self.ok:
            return f"{self.title} passed: no significant regression in {len(gated)} cases{extra}"
        return f"{self.title} FAILED: {len(self.failures)} of {len(gated)} cases regressed{extra}"


def decide(case: dict[str, Any], *, higher_better: bool, base: float, current: float, change: float,
           worse: Test, better: Test, tolerance: float, alpha: float, n_base: int, n_current: int,
           what: str, improved_hint: str = "") -> CaseVerdict:
    """Judge one case. `change` is the estimated relative change (current vs base), `worse`
    the one-sided test for a move in the bad direction, `better` for the good one. `what`
    opens the message (the numbers); the rule is in the module doc."""
    bad = -change if higher_better else change        # > 0: moved the bad way
    v = CaseVerdict(dict(case), PASS, baseline_median=base, current_median=current, change=change,
                    p=worse.p, n_baseline=n_base, n_current=n_current, tolerance=tolerance)
    what = f"{what} ({change * 100:+.1f} %"
    if bad > tolerance:
        if not worse.enough:
            v.status = NOT_ENOUGH
            v.message = (f"{what}, beyond ±{tolerance * 100:.0f} %) but {n_current} vs {n_base} repeats cannot "
                         f"reach significance (smallest p {worse.min_p:.3g} > α {alpha})")
        elif worse.significant(alpha):
            v.status = FAIL
            v.message = f"{what}, beyond ±{tolerance * 100:.0f} %, p = {worse.p:.3g})"
        else:
            v.message = f"{what}) beyond tolerance but not significant (p = {worse.p:.3g})"
    elif -bad > tolerance and better.significant(alpha):
        v.status, v.p = IMPROVED, better.p
        v.message = f"{what}, p = {better.p:.3g})" + (f"; {improved_hint}" if improved_hint else "")
    else:
        v.message = f"{what})"
    return v
