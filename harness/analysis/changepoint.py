"""Steps in a series: where the level of a run history moved, and whether chance explains it.

The statistic is Pettitt's: for each split k of x_1 … x_n (at least MIN_SIDE points on
either side), the Mann–Whitney U of the first k points against the rest, standardized by
its null spread; the split is where that is largest in size. Its p-value comes from a
permutation test of the largest size over the series' own values: with no change, every
order of the values is equally likely, so a flat series gives p ≤ α with probability at
most α, whatever the values' distribution, ties included. The p-value is (1 + the
permutations at least as extreme) / (1 + their number); that bound is exact over the
draw of the permutations, and close for the one draw a fixed seed makes (at least 999
permutations), which gives the same series the same answer every time.

Binary segmentation looks for further steps only inside the segments on either side of a
significant one, at the same α. A flat series therefore reports any step with
probability at most α: the first test has to reject before any other is made.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Sequence

import numpy as np
from scipy.stats import rankdata

MIN_SIDE = 3            # points on each side of a split: fewer cannot show a step at all
MIN_PERMUTATIONS = 999
MAX_PERMUTATIONS = 200_000
SEED = 20261127


@dataclasses.dataclass(frozen=True)
class Step:
    index: int          # the first point after the step
    before: float       # the median of the points from the previous step (or the start)
    after: float        # the median of the points up to the next step (or the end)
    p: float

    @property
    def change(self) -> float:
        """after / before − 1 (NaN when before is 0)."""
        return self.after / self.before - 1 if self.before else math.nan


def _largest(ranks: np.ndarray, min_side: int) -> tuple[np.ndarray, np.ndarray]:
    """Per row of `ranks` (permutations × n): the split of the largest standardized U and its size."""
    n = ranks.shape[-1]
    k = np.arange(min_side, n - min_side + 1)
    u = np.cumsum(ranks, axis=-1)[..., k - 1] - k * (k + 1) / 2
    z = np.abs(u - k * (n - k) / 2) / np.sqrt(k * (n - k) * (n + 1) / 12)
    best = np.argmax(z, axis=-1)
    return k[best], np.take_along_axis(z, best[..., None], axis=-1)[..., 0]


def pettitt(x: Sequence[float], alpha: float = 0.05, min_side: int = MIN_SIDE,
            seed: int = SEED) -> tuple[int | None, float]:
    """The most likely step of `x` (the index of the first point after it) and its
    permutation p-value; (None, 1.0) when the series is too short to split."""
    x = np.asarray(x, dtype=float)
    if len(x) < 2 * min_side:
        return None, 1.0
    ranks = rankdata(x)
    k, z = _largest(ranks[None, :], min_side)
    n_perm = int(min(MAX_PERMUTATIONS, max(MIN_PERMUTATIONS, math.ceil(20 / alpha))))
    rng = np.random.default_rng(seed)
    extreme = 0
    for start in range(0, n_perm, 10_000):            # bounded memory for long histories
        perms = rng.permuted(np.broadcast_to(ranks, (min(10_000, n_perm - start), len(x))), axis=1)
        extreme += int(np.sum(_largest(perms, min_side)[1] >= z[0] - 1e-9))
    return int(k[0]), (1 + extreme) / (1 + n_perm)


def fewest_points(alpha: float, min_side: int = MIN_SIDE, most: int = 200) -> int | None:
    """The shortest series in which a step can reach p ≤ `alpha` at all: the points split
    in halves, every one of one half above every one of the other (a step nearer an end
    needs more). None beyond `most` points."""
    for n in range(2 * min_side, most + 1):
        if pettitt([0.0] * (n // 2) + [1.0] * (n - n // 2), alpha, min_side)[1] <= alpha:
            return n
    return None


def steps(x: Sequence[float], alpha: float = 0.05, min_side: int = MIN_SIDE, seed: int = SEED) -> list[Step]:
    """Every step binary segmentation finds at `alpha` (module doc), in order."""
    x = np.asarray(x, dtype=float)
    if not np.isfinite(x).all():
        raise ValueError("a series with a missing or infinite point")
    found: list[tuple[int, float]] = []

    def search(lo: int, hi: int) -> None:
        k, p = pettitt(x[lo:hi], alpha, min_side, seed)
        if k is None or p > alpha:
            return
        found.append((lo + k, p))
        search(lo, lo + k)
        search(lo + k, hi)

    search(0, len(x))
    found.sort()
    bounds = [0] + [i for i, _ in found] + [len(x)]
    return [Step(i, float(np.median(x[bounds[j]:i])), float(np.median(x[i:bounds[j + 2]])), p)
            for j, (i, p) in enumerate(found)]
