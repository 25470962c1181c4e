"""Significance tests on small samples of repeats: rank tests that say when they cannot decide.

Two samples of independent repeats (a run against a stored baseline) get Mann–Whitney U;
paired repeats (the two arms of one A/B run, measured side by side in every repeat) get
the Wilcoxon signed-rank test on their per-repeat log-ratios. Both report the smallest p
their sample sizes allow, so a caller can tell "no change" from "too few repeats to tell".
Pure functions; scipy does the arithmetic.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Callable, Sequence

import numpy as np


def _finite(xs: Sequence[float]) -> list[float]:
    return [float(x) for x in xs if x is not None and np.isfinite(x)]


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

    a, b = _finite(a), _finite(b)
    mp = min_p_value(len(a), len(b), alternative)
    enough = mp <= alpha + 1e-12
    if not a or not b:
        return MannWhitney(None, None, len(a), len(b), alternative, mp, False)
    if len(set(a) | set(b)) == 1:          # all equal: nothing to rank
        return MannWhitney(len(a) * len(b) / 2, 1.0, len(a), len(b), alternative, mp, enough)
    from scipy.stats import mannwhitneyu  # scipy takes ~0.8 s: only the tests pay for it, not `show`
    res = mannwhitneyu(a, b, alternative=alternative, method="auto")
    return MannWhitney(float(res.statistic), float(res.pvalue), len(a), len(b), alternative, mp, enough)


@dataclasses.dataclass(frozen=True)
class SignedRank:
    """One Wilcoxon signed-rank test of paired differences against 0. `enough` says whether
    n pairs could reach alpha at all (see `min_p_signed_rank`)."""

    w: float | None
    p: float | None
    n: int
    alternative: str
    min_p: float
    enough: bool

    def significant(self, alpha: float = 0.05) -> bool:
        return self.enough and self.p is not None and self.p <= alpha + 1e-12


def min_p_signed_rank(n: int, alternative: str = "two-sided") -> float:
    """The smallest p the exact signed-rank test gives for n pairs: 1 / 2^n one-sided (every
    difference on one side), twice that two-sided. 4 pairs: 0.0625, never below 0.05;
    5: 0.031; 6: 0.016; 8: 0.0039."""
    if n < 1:
        return 1.0
    p = 0.5 ** n
    return min(1.0, 2 * p) if alternative == "two-sided" else p


def signed_rank(d: Sequence[float], alternative: str = "two-sided", alpha: float = 0.05) -> SignedRank:
    """Wilcoxon signed-rank test of the paired differences `d` (e.g. per-repeat log(head/base)).
    alternative "less" asks whether they tend to be below 0, "greater" above (scipy's
    convention). Exact for small samples without ties; differences of exactly 0 count as
    half on each side (zero_method "zsplit")."""

    d = _finite(d)
    mp = min_p_signed_rank(len(d), alternative)
    enough = mp <= alpha + 1e-12
    if not d:
        return SignedRank(None, None, 0, alternative, mp, False)
    if all(x == 0 for x in d):
        return SignedRank(len(d) * (len(d) + 1) / 4, 1.0, len(d), alternative, mp, enough)
    from scipy.stats import wilcoxon  # as above
    res = wilcoxon(d, alternative=alternative, zero_method="zsplit")
    return SignedRank(float(res.statistic), float(res.pvalue), len(d), alternative, mp, enough)


def bootstrap_ci(values: Sequence[float], stat: Callable[[np.ndarray], float] = np.median,
                 level: float = 0.95, n_resamples: int = 2000, seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap confidence interval of `stat`; (nan, nan) for fewer than 2 values."""
    x = np.asarray(_finite(values), dtype=float)
    if len(x) < 2:
        return (math.nan, math.nan)
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(x), size=(n_resamples, len(x)))
    draws = np.apply_along_axis(stat, 1, x[idx])
    lo, hi = np.percentile(draws, [(1 - level) / 2 * 100, (1 + level) / 2 * 100])
    return (float(lo), float(hi))
