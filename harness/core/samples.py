"""Sample: one metric measured, by a tool's parser or by a testbed's CPU meter; the runner
adds the case's context when it records it."""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class Sample:
    """One metric from one tool run; the runner adds the case's context."""

    metric: str          # throughput_bps, latency_us, jitter_ms, loss_pct, retransmits, cpu_*_pct, ...
    value: float
    unit: str            # bps, us, ms, pct, count
