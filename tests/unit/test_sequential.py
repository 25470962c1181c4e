"""harness.analysis.sequential: the sign mixture SPRT and closing signed-rank test `compare`
judges by, on data with known answers.

Exact values first (the mixture in closed form, the signed-rank tail against scipy and
against counting every sign pattern, blocks, thresholds), then the rule's
operating characteristics on seeded simulations: fixed seeds, so every number here is
fixed and no test can fail by chance. The simulated noise is the lab's: A/A pairs of the
sleeve's 1 s iperf3 runs measured σ 0.12–0.16 on the log scale on the quiet machine
(BENCHMARKS.md, "The sequential A/B gate"), ±50 % and heavier-tailed beside other work;
0.07 stands for a quieter machine.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from benchmarks.sequential_sim import simulate as _simulate
from harness.analysis import sequential as seq


def _pairs(ds):
    return list(enumerate(ds))


# ------------------------------------------------------------------ exact values

@pytest.mark.parametrize("k, n", [(0, 0), (1, 1), (3, 5), (7, 7), (0, 6), (12, 20), (40, 60)])
def test_the_mixture_matches_its_integral(k, n):
    """M(k, n) = 2^n · 2 ∫_{½}^{1} p^k (1 − p)^(n−k) dp, by the trapezoid rule on 200,001 points."""
    p = np.linspace(0.5, 1.0, 200_001)
    f = p ** k * (1 - p) ** (n - k)
    integral = float(np.sum((f[1:] + f[:-1]) / 2) * (p[1] - p[0]))
    assert math.exp(seq.log_mixture(k, n)) == pytest.approx(2 ** n * 2 * integral, rel=1e-6)


def test_all_signs_one_way_give_the_closed_form():
    for n in range(0, 30):
        assert math.exp(seq.log_mixture(n, n)) == pytest.approx((2 ** (n + 1) - 1) / (n + 1), rel=1e-9)
    assert math.exp(seq.log_mixture(0, 0)) == 1.0
    with pytest.raises(ValueError):
        seq.log_mixture(3, 2)


def test_fewest_blocks_to_decide():
    # (2^(n+1) − 1)/(n + 1): 7 → 31.9, 8 → 56.8, 9 → 102.3, 14 → 2184.5
    assert [seq.min_blocks(t) for t in (1, 20, 40, 80, 2000)] == [0, 7, 8, 9, 14]
    # the closing test at α/2 needs 2^−n ≤ α/2: α 0.025 → 2^−7 = 0.0078 ≤ 0.0125 < 2^−6
    assert [seq.min_closing_blocks(a) for a in (0.05, 0.025, 0.0001)] == [6, 7, 15]
    # the mixture alone decides at 2/α: 80 → 9 blocks; with a budget the closing test's fewer count
    assert seq.fewest_blocks(0.025, closing=False) == 9 and seq.fewest_blocks(0.025) == 7


@pytest.mark.parametrize("seed, n", [(1, 1), (2, 5), (3, 12), (4, 30), (5, 49)])
def test_the_signed_rank_tail_is_scipys_exact_one(seed, n):
    from scipy.stats import wilcoxon
    x = np.random.default_rng(seed).normal(0.3, 1.0, n)
    assert seq.signed_rank_tail(x) == pytest.approx(wilcoxon(x, alternative="greater", method="exact").pvalue,
                                                    rel=1e-9)


def test_the_signed_rank_tail_counts_every_sign_pattern_ties_and_zeros_included():
    """Ties share their mean rank and zeros drop out; the tail is still the share of the 2^n
    equally likely sign patterns whose positive ranks sum to at least the observed."""
    xs = [0.5, -0.5, 1.0, 2.0, -2.0, 2.0, 3.0, 0.0]
    mags = sorted(abs(x) for x in xs if x)
    rank = {m: (mags.index(m) + 1 + len(mags) - mags[::-1].index(m)) / 2 for m in mags}
    ranks = [rank[abs(x)] for x in xs if x]
    w = sum(r for r, x in zip(ranks, [x for x in xs if x]) if x > 0)
    pats = list(itertools.product((0, 1), repeat=len(ranks)))
    expected = sum(sum(r for r, s in zip(ranks, pat) if s) >= w for pat in pats) / len(pats)
    assert seq.signed_rank_tail(xs) == pytest.approx(expected, rel=1e-12)
    assert seq.signed_rank_tail([1, 2, 3]) == 1 / 8 and seq.signed_rank_tail([-1, -2, -3]) == 1.0
    assert seq.signed_rank_tail([]) == 1.0 and seq.signed_rank_tail([0.0, float("nan")]) == 1.0


def test_blocks_pair_repeats_two_by_two_and_skip_a_broken_block():
    ds = [(0, 0.1), (1, 0.3), (2, -0.2), (3, 0.0), (5, 1.0), (6, 0.4), (7, 0.2), (8, float("nan")), (9, 1.0)]
    assert seq.blocks(ds) == [(1, pytest.approx(0.2)), (3, pytest.approx(-0.1)), (7, pytest.approx(0.3))]
    assert seq.blocks([(1, 0.1), (2, 0.2)]) == []          # 0–1 and 2–3 each miss a pair


def test_the_tolerance_on_the_log_scale_turns_with_the_metric():
    assert seq.log_tolerance(0.10, higher_better=True) == pytest.approx(-math.log(0.9))
    assert seq.log_tolerance(0.15, higher_better=False) == pytest.approx(math.log(1.15))


# ------------------------------------------------------------------ decisions on exact data

def test_every_block_slower_decides_slower_after_the_fewest_blocks():
    """The mixture has half of α: 2/α = 80, reached by 9 blocks all one way (1023/10)."""
    r = seq.sequential(_pairs([math.log(0.5)] * 40), higher_better=True, tolerance=0.08, alpha=0.025, beta=0.05,
                       budget=40)
    assert (r.outcome, r.blocks, r.pairs, r.last_repeat) == (seq.SLOWER, 9, 18, 17)
    assert r.evidence_slower == pytest.approx(1023 / 10) and r.p == pytest.approx(20 / 1023)
    assert r.change == pytest.approx(-0.5) and r.closing_p is None      # decided early: no closing test


def test_an_unchanged_build_is_not_slower_after_seven_blocks():
    ds = [0.01, -0.01] * 20                                # every block's mean 0: signs against δ all positive
    r = seq.sequential(_pairs(ds), higher_better=True, tolerance=0.08, alpha=0.025, beta=0.05)
    assert (r.outcome, r.pairs) == (seq.NOT_SLOWER, 14)
    assert r.evidence_not_slower == pytest.approx(255 / 8) and r.evidence_slower == 1.0   # zeros are no sign


def test_a_slowdown_inside_the_tolerance_passes():
    """3 % slower in every block, tolerance 8 %: both sign tests see only positive signs,
    and "not slower" (1/β = 20) crosses a block before "slower" (1/α = 40) could; where
    both cross at once (α = β, one case) it is "not slower" too."""
    r = seq.sequential(_pairs([math.log(0.97)] * 40), higher_better=True, tolerance=0.08, alpha=0.025, beta=0.05)
    assert (r.outcome, r.pairs) == (seq.NOT_SLOWER, 14)
    tie = seq.sequential(_pairs([math.log(0.97)] * 40), higher_better=True, tolerance=0.08, alpha=0.05, beta=0.05)
    assert (tie.outcome, tie.pairs) == (seq.NOT_SLOWER, 14) and tie.evidence_slower == pytest.approx(255 / 8)


def test_latency_is_worse_upwards():
    up = seq.sequential(_pairs([math.log(1.5)] * 18), higher_better=False, tolerance=0.15, alpha=0.025, beta=0.05)
    down = seq.sequential(_pairs([math.log(0.5)] * 18), higher_better=True, tolerance=0.15, alpha=0.025, beta=0.05)
    assert up.outcome == seq.SLOWER and down.outcome == seq.SLOWER
    faster = seq.sequential(_pairs([math.log(0.7)] * 24), higher_better=False, tolerance=0.15,
                            alpha=0.025, beta=0.05)
    assert faster.outcome == seq.NOT_SLOWER and faster.pairs == 14
    assert faster.evidence_faster == pytest.approx(8191 / 13)   # every block there counts: 12 of 12


def test_too_few_pairs_are_undecided_and_the_order_of_pairs_is_the_repeats():
    r = seq.sequential(_pairs([math.log(0.5)] * 12), higher_better=True, tolerance=0.08, alpha=0.025, beta=0.05,
                       budget=12)
    assert (r.outcome, r.pairs) == (seq.UNDECIDED, 12) and r.evidence_slower == pytest.approx(127 / 7)
    assert r.closing_p == 1 / 64 and r.p == 1 / 32       # 6 blocks: 2^−6 > α/2, 2^−7 would do
    shuffled = list(reversed(_pairs([math.log(0.5)] * 16)))
    assert seq.sequential(shuffled, higher_better=True, tolerance=0.08, alpha=0.025, beta=0.05).pairs == 16


def test_the_closing_test_decides_only_at_the_end_of_the_budget():
    """Blocks slower by a little, with signs mixed: the mixture never crosses 2/α, the
    closing signed-rank test of all 24 blocks does (the sizes lean one way), and only once
    the budget's last block is there; an odd budget's last block ends a repeat earlier."""
    rng = np.random.default_rng(1)
    ds = list(math.log(0.95) + rng.normal(0, 0.15, 48))
    kw = dict(higher_better=True, tolerance=0.08, alpha=0.025, beta=0.05)
    assert seq.sequential(_pairs(ds), **kw).outcome == seq.UNDECIDED           # no budget: no closing test
    full = seq.sequential(_pairs(ds), budget=48, **kw)
    assert full.outcome == seq.SLOWER and full.closing_p <= 0.0125 and full.pairs == 48
    assert full.evidence_slower < 80 and full.p == pytest.approx(2 * full.closing_p)
    short = seq.sequential(_pairs(ds[:46]), budget=48, **kw)       # the last block is missing
    assert short.outcome == seq.UNDECIDED and short.closing_p is None
    assert seq.sequential(_pairs(ds[:47]), budget=47, **kw).closing_p is not None
    unchanged = seq.sequential(_pairs(list(rng.normal(0, 0.10, 48))), budget=48, **kw)
    assert unchanged.outcome != seq.SLOWER


def test_the_verdict_is_the_same_on_a_run_stopped_at_its_decision():
    """What lets `compare` stop measuring: more pairs after the decision change nothing."""
    rng = np.random.default_rng(7)
    ds = list(math.log(0.9) + rng.normal(0, 0.07, 48))
    full = seq.sequential(_pairs(ds), higher_better=True, tolerance=0.08, alpha=0.025, beta=0.05)
    cut = seq.sequential(_pairs(ds[:full.pairs]), higher_better=True, tolerance=0.08, alpha=0.025, beta=0.05)
    assert full.outcome != seq.UNDECIDED and (cut.outcome, cut.pairs, cut.change) == (full.outcome, full.pairs,
                                                                                     full.change)


def test_arguments_outside_their_range_are_refused():
    for bad in (dict(alpha=0), dict(beta=1), dict(tolerance=0)):
        with pytest.raises(ValueError):
            seq.sequential([], higher_better=True, **{**dict(tolerance=0.1, alpha=0.05, beta=0.05), **bad})


# ------------------------------------------------------------------ operating characteristics (seeded)
# benchmarks/sequential_sim.py simulates; BENCHMARKS.md has its table.

@pytest.mark.parametrize("sigma, df, order", [(0.07, None, 0.0), (0.25, None, 0.0), (0.07, 2, 0.0),
                                              (0.07, None, 0.15), (0.02, None, 0.0)])
def test_an_unchanged_build_alarms_within_alpha_whatever_the_noise(sigma, df, order):
    """Ville's bound, seen: 2,000 A/A sequences of up to 48 pairs, quiet, loaded, heavy-
    tailed (t with 2 degrees of freedom), with a 15 % order effect, and almost noiseless;
    α 0.025 (one of two cases at the default 0.05). The bound is a ceiling the rule stays
    well under: the counts are fixed by the seed."""
    rates, _ = _simulate(0.0, sigma, df=df, order=order)
    assert rates[seq.SLOWER] <= 0.025


def test_at_the_labs_noise_it_catches_ten_percent_and_half_of_five_within_the_budget():
    """At σ 0.15 per pair (the lab's A/A spread): 10 % slower caught ≥ 98 % of the time, 5 %
    about half the time, an unchanged build ≤ 1.5 % (of a bound of 2.5 %); a 20 % slowdown
    decided in 20 pairs on average, everything in at most 43 of a budget of 48. At σ 0.07:
    10 % always, 5 % two times in three, alarms 1 in 1,000 at most."""
    aa, aa_pairs = _simulate(0.0, 0.15)
    p5, p5_pairs = _simulate(0.05, 0.15)
    p10, p10_pairs = _simulate(0.10, 0.15)
    p20, p20_pairs = _simulate(0.20, 0.15)
    assert aa[seq.SLOWER] <= 0.015 and p10[seq.SLOWER] >= 0.98 and p20[seq.SLOWER] == 1.0
    assert 0.45 <= p5[seq.SLOWER] <= 0.6
    assert p20_pairs <= 20 and max(aa_pairs, p5_pairs, p10_pairs) <= 43
    quiet_aa, _ = _simulate(0.0, 0.07)
    quiet5, _ = _simulate(0.05, 0.07)
    quiet10, _ = _simulate(0.10, 0.07)
    assert quiet_aa[seq.SLOWER] <= 0.001 and quiet10[seq.SLOWER] == 1.0 and 0.6 <= quiet5[seq.SLOWER] <= 0.75


def test_a_slowdown_of_the_tolerance_or_more_passes_within_beta():
    rates, _ = _simulate(0.08, 0.07)
    assert rates[seq.NOT_SLOWER] <= 0.05
    loaded, _ = _simulate(0.08, 0.25)
    assert loaded[seq.NOT_SLOWER] <= 0.05
