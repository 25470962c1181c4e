"""The loss knee of a UDP sweep: the highest offered load a path carries with loss under a
threshold. Pure; the sweep tool gives it per run (tools/sweep.py), the report marks it."""

from __future__ import annotations

import dataclasses
import math
from typing import Sequence

DEFAULT_LOSS_PCT = 0.1


@dataclasses.dataclass(frozen=True)
class Knee:
    bps: float           # the knee's offered load (0.0: even the lowest step lost too much)
    step: int | None     # its index in the steps as given (None: no step was clean)
    bounded: bool        # True: a step beyond it lost too much; False: none did (a lower bound)


def knee(points: Sequence[tuple[float, float]], threshold_pct: float = DEFAULT_LOSS_PCT) -> Knee:
    """`points`: (offered bits/s, loss %) per step, in any order. The knee is the offered
    load of the last step before the first one (by offered load) whose loss reaches
    `threshold_pct`: a clean step above a lossy one does not count, since loss past the
    knee comes and goes with scheduling. ValueError for no points or a non-finite value."""
    if not points:
        raise ValueError("a knee of no steps")
    if any(not (math.isfinite(o) and math.isfinite(l)) for o, l in points):
        raise ValueError(f"non-finite step in {list(points)}")
    order = sorted(range(len(points)), key=lambda i: points[i][0])
    best: int | None = None
    for i in order:
        if points[i][1] >= threshold_pct:
            return Knee(points[best][0] if best is not None else 0.0, best, True)
        best = i
    return Knee(points[best][0], best, False)
