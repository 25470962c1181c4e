"""A sequential A/B verdict: pairs are added until the evidence decides, with the chance of a
false alarm held over the whole procedure, however often it looks.

The data are per-repeat log-ratios d_r = log(head_r / base_r) of one case, the two arms
deployed in turn within every repeat, their order alternating from repeat to repeat. The
rule, a mixture sequential probability ratio test (Robbins' mixture SPRT) on signs:

1. Blocks. Repeats 2j and 2j+1 form block j (each arm first once), and the block's value
   is the mean of its two log-ratios, turned so that positive is worse: e_j = −d̄_j for
   throughput, +d̄_j for latency. Whatever going first or second does to an arm cancels
   in a block, so with no change e_j is symmetric about 0. A block missing a pair is left
   out.
2. Two sign tests, watched after every block. "Slower": the signs of e_j against 0.
   "Not slower": the signs of δ − e_j, where δ is the tolerance on the log scale
   (−log(1 − tol) for throughput, log(1 + tol) for latency). Each keeps the mixture
   likelihood ratio of its k positive signs out of n, against fair coins, under a
   uniform prior on the chance p ∈ [½, 1] of a positive sign:

       M(k, n) = 2^n · 2 ∫_{½}^{1} p^k (1 − p)^(n−k) dp

   With no change (the signs fair coins, or leaning the other way) M is a nonnegative
   supermartingale starting at 1, so by Ville's inequality it ever reaches 1/α with
   chance at most α: at every look, not per look.
3. The first to cross decides: "slower" at M ≥ 2/α, "not slower" at M ≥ 1/β (a slowdown
   of δ or more is then wrongly passed with chance at most β). Both at once: "not slower"
   (a slowdown shown, and shown to be within the tolerance). Either tie-break keeps both
   bounds.
4. The closing test, once, when the budget is spent and neither has crossed: the exact
   one-sided Wilcoxon signed-rank test of the blocks e_j against 0, "slower" at
   p ≤ α/2, else "undecided". It is a fixed-sample test (its sample is the budget's
   blocks, fixed before the run), so its false alarm is at most α/2; with the sequential
   half's α/2 (Bonferroni) an unchanged build is called slower with chance at most α.
   The sequential half stops early where the evidence is plain (an unchanged build, a
   large slowdown); a slowdown near the tolerance rarely gets there, and the closing test,
   which uses the blocks' sizes and not only their signs, catches most of those (simulated:
   BENCHMARKS.md, "The sequential A/B gate"). Without a budget (`budget` None) there is no
   closing test.

Why this design and not the others. A normal SPRT needs the log-ratios' spread and a bell
shape; on a shared machine a pair swings by ±15 % quiet and ±50 % loaded, heavy-tailed,
and a misjudged spread breaks its error bounds. A group-sequential Wilcoxon with α
spending fixes the looks and the budget in advance and needs boundaries computed for a
rank statistic. Signs need only the symmetry above: the guarantee holds for any noise,
at any stopping time, and the budget can change between runs. The price: with all-or-none
evidence the first decision comes after the fewest blocks for which (2^(n+1) − 1)/(n + 1)
reaches the threshold (`min_blocks`: 7 blocks for 1/20, 8 for 1/40), and signs alone waste
the sizes of the blocks, which is what the closing test takes back. The signed-rank test
needs the same symmetry and nothing more; its null distribution is counted exactly
(`signed_rank_tail`), whatever the number of blocks. Between no change and δ either
outcome may come; the tolerance is the slowdown the gate is built to catch.

Pure functions; scipy does the incomplete beta function.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Iterable

import numpy as np

SLOWER, NOT_SLOWER, UNDECIDED = "slower", "not slower", "undecided"


def blocks(pairs: Iterable[tuple[int, float]]) -> list[tuple[int, float]]:
    """(repeat 2j+1, mean of d_2j and d_2j+1) for every block whose two pairs are both
    there, in repeat order. `pairs`: (repeat, log-ratio)."""
    by = {int(r): float(d) for r, d in pairs if d is not None and math.isfinite(d)}
    return [(j + 1, (by[j] + by[j + 1]) / 2) for j in sorted(r for r in by if r % 2 == 0) if j + 1 in by]


def log_mixture(k: int, n: int) -> float:
    """log M(k, n): the one-sided sign mixture after k positive signs out of n (module doc).
    M(0, 0) = 1; M(n, n) = (2^(n+1) − 1) / (n + 1)."""
    if not 0 <= k <= n:
        raise ValueError(f"k={k} positive signs out of n={n}")
    from scipy.special import betainc, betaln   # scipy loads in ~0.8 s: only the gates pay for it
    tail = float(betainc(n - k + 1, k + 1, 0.5))     # ∫_{½}^{1} p^k (1 − p)^(n−k) dp / B(k+1, n−k+1)
    return (n + 1) * math.log(2) + float(betaln(k + 1, n - k + 1)) + (math.log(tail) if tail > 0 else -math.inf)


def min_blocks(threshold: float) -> int:
    """The fewest blocks after which a sign mixture can reach `threshold` (all signs one way)."""
    n = 0
    while (2 ** (n + 1) - 1) / (n + 1) < threshold:
        n += 1
    return n


def signed_rank_tail(values: Iterable[float]) -> float:
    """The exact one-sided p-value of the Wilcoxon signed-rank test that `values` lean
    positive: P(W+ ≥ w) for W+ the sum of the ranks of |x| whose x is positive, each sign a
    fair coin. Zeros are left out; tied magnitudes share their ranks' mean, and the count
    then runs over doubled ranks (still exact, the ranks fixed as observed)."""
    xs = [float(x) for x in values if x != 0 and math.isfinite(x)]
    n = len(xs)
    if n == 0:
        return 1.0
    order = sorted(range(n), key=lambda i: abs(xs[i]))
    ranks2 = [0] * n                        # twice the (mid)rank: whole numbers, ties included
    i = 0
    while i < n:
        j = i
        while j + 1 < n and abs(xs[order[j + 1]]) == abs(xs[order[i]]):
            j += 1
        for t in range(i, j + 1):
            ranks2[order[t]] = i + j + 2      # 2 × mean of ranks i+1 … j+1
        i = j + 1
    w = sum(r for r, x in zip(ranks2, xs) if x > 0)
    dist = np.zeros(sum(ranks2) + 1)           # dist[s]: P(the positive ranks so far sum to s)
    dist[0] = 1.0
    for r in ranks2:
        dist[r:] = dist[r:] / 2 + dist[:-r] / 2     # r ≥ 2: the right side is read first
        dist[:r] /= 2
    return float(min(1.0, dist[w:].sum()))


def min_closing_blocks(alpha: float) -> int:
    """The fewest blocks with which the closing test (at α/2) can show "slower": its smallest
    p-value, every block positive, is 2^−n."""
    return max(0, math.ceil(math.log2(2 / alpha) - 1e-12))


def fewest_blocks(alpha: float, closing: bool = True) -> int:
    """The fewest blocks with which the rule at `alpha` can ever show "slower": early (the
    sign mixture at 2/α) or, `closing`, by the closing test at a budget of that many blocks."""
    early = min_blocks(2 / alpha)
    return min(early, min_closing_blocks(alpha)) if closing else early


def log_tolerance(tolerance: float, higher_better: bool) -> float:
    """δ: the tolerance as a worse-is-positive log-ratio (10 % slower throughput: 0.105)."""
    return -math.log1p(-tolerance) if higher_better else math.log1p(tolerance)


@dataclasses.dataclass(frozen=True)
class Sequential:
    outcome: str                  # SLOWER, NOT_SLOWER or UNDECIDED
    blocks: int                   # blocks looked at: up to the decision, or all of them
    last_repeat: int | None       # the last repeat those blocks hold
    evidence_slower: float        # M of the "slower" test when it stopped
    evidence_not_slower: float    # M of the "not slower" test when it stopped
    evidence_faster: float        # M of the signs of −e_j (an improvement) over every block there
    alpha: float
    beta: float
    change: float | None          # exp(median block mean) − 1 over the blocks looked at
    closing_p: float | None = None  # the closing test's p-value, where it ran (the budget spent)

    @property
    def pairs(self) -> int:
        return 2 * self.blocks

    @property
    def p(self) -> float:
        """A p-value for "slower" under the whole rule (at most 1): "slower" iff p ≤ α."""
        p = 2.0 / self.evidence_slower
        if self.closing_p is not None:
            p = min(p, 2.0 * self.closing_p)
        return min(1.0, p)

    @property
    def min_blocks(self) -> int:
        """The fewest blocks that can decide "slower" at this alpha, early or at the close."""
        return fewest_blocks(self.alpha)


def sequential(pairs: Iterable[tuple[int, float]], *, higher_better: bool, tolerance: float,
               alpha: float, beta: float, budget: int | None = None) -> Sequential:
    """The sequential verdict on one case's (repeat, log(head / base)) pairs (module doc).
    `budget`: the repeats the run planned; the closing test runs once the blocks reach the
    budget's last block (the one ending at repeat budget − 1, or budget − 2 for an odd
    budget) undecided."""
    if not (0 < alpha < 1 and 0 < beta < 1 and 0 < tolerance < 1):
        raise ValueError(f"alpha {alpha}, beta {beta} and tolerance {tolerance} must lie in (0, 1)")
    delta = log_tolerance(tolerance, higher_better)
    sign = -1.0 if higher_better else 1.0
    done = blocks(pairs)
    k1 = n1 = k2 = n2 = 0
    m1 = m2 = 0.0                        # log M of "slower" and "not slower"
    outcome, used = UNDECIDED, len(done)
    for i, (_, mean) in enumerate(done):
        e = sign * mean
        if e != 0:
            k1, n1 = k1 + (e > 0), n1 + 1
        if e != delta:
            k2, n2 = k2 + (e < delta), n2 + 1
        m1, m2 = log_mixture(k1, n1), log_mixture(k2, n2)
        if m2 >= -math.log(beta) - 1e-12:
            outcome, used = NOT_SLOWER, i + 1
            break
        if m1 >= math.log(2 / alpha) - 1e-12:
            outcome, used = SLOWER, i + 1
            break
    closing_p = None
    if outcome == UNDECIDED and budget is not None and budget >= 2 and done and done[-1][0] >= budget - 1 - budget % 2:
        closing_p = signed_rank_tail(sign * m for _, m in done)
        if closing_p <= alpha / 2 + 1e-15:
            outcome = SLOWER
    looked = sorted(m for _, m in done[:used])
    # An improvement is judged on every block there: the run's end is a stopping time too,
    # and the decision above comes too early for it (each block at most doubles M).
    signed = [sign * m for _, m in done if m != 0]
    faster = log_mixture(sum(e < 0 for e in signed), len(signed))
    change = None
    if looked:
        mid = len(looked) // 2
        median = looked[mid] if len(looked) % 2 else (looked[mid - 1] + looked[mid]) / 2
        change = math.expm1(median)
    return Sequential(outcome, used, done[used - 1][0] if used else None, math.exp(m1), math.exp(m2),
                      math.exp(faster), alpha, beta, change, closing_p)
