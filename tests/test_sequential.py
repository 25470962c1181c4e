"""harness.analysis.sequential: the sign mixture SPRT `compare` judges by, on data with known answers.

Exact values first (the mixture in closed form, blocks, thresholds), then the rule's
operating characteristics on seeded simulations: fixed seeds, so every number here is
fixed and no test can fail by chance. The simulated noise is the lab's: a single pair of
1 s iperf3 runs swings by about ±15 % on the quiet machine (σ ≈ 0.07 on the log scale,
BENCHMARKS.md "The two gates measured"), by ±50 % and heavier-tailed beside other work.
"""

from __future__ import annotations

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


def test_blocks_pair_repeats_two_by_two_and_skip_a_broken_block():
    ds = [(0, 0.1), (1, 0.3), (2, -0.2), (3, 0.0), (5, 1.0), (6, 0.4), (7, 0.2), (8, float("nan")), (9, 1.0)]
    assert seq.blocks(ds) == [(1, pytest.approx(0.2)), (3, pytest.approx(-0.1)), (7, pytest.approx(0.3))]
    assert seq.blocks([(1, 0.1), (2, 0.2)]) == []          # 0–1 and 2–3 each miss a pair


def test_the_tolerance_on_the_log_scale_turns_with_the_metric():
    assert seq.log_tolerance(0.10, higher_better=True) == pytest.approx(-math.log(0.9))
    assert seq.log_tolerance(0.15, higher_better=False) == pytest.approx(math.log(1.15))


# ------------------------------------------------------------------ decisions on exact data

def test_every_block_slower_decides_slower_after_the_fewest_blocks():
    r = seq.sequential(_pairs([math.log(0.5)] * 40), higher_better=True, tolerance=0.08, alpha=0.025, beta=0.05)
    assert (r.outcome, r.blocks, r.pairs, r.last_repeat) == (seq.SLOWER, 8, 16, 15)
    assert r.evidence_slower == pytest.approx(511 / 9) and r.p == pytest.approx(9 / 511)
    assert r.change == pytest.approx(-0.5)


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
    up = seq.sequential(_pairs([math.log(1.5)] * 16), higher_better=False, tolerance=0.15, alpha=0.025, beta=0.05)
    down = seq.sequential(_pairs([math.log(0.5)] * 16), higher_better=True, tolerance=0.15, alpha=0.025, beta=0.05)
    assert up.outcome == seq.SLOWER and down.outcome == seq.SLOWER
    faster = seq.sequential(_pairs([math.log(0.7)] * 24), higher_better=False, tolerance=0.15,
                            alpha=0.025, beta=0.05)
    assert faster.outcome == seq.NOT_SLOWER and faster.pairs == 14
    assert faster.evidence_faster == pytest.approx(8191 / 13)   # every block there counts: 12 of 12


def test_too_few_pairs_are_undecided_and_the_order_of_pairs_is_the_repeats():
    r = seq.sequential(_pairs([math.log(0.5)] * 14), higher_better=True, tolerance=0.08, alpha=0.025, beta=0.05)
    assert (r.outcome, r.pairs) == (seq.UNDECIDED, 14) and r.evidence_slower == pytest.approx(255 / 8)
    shuffled = list(reversed(_pairs([math.log(0.5)] * 16)))
    assert seq.sequential(shuffled, higher_better=True, tolerance=0.08, alpha=0.025, beta=0.05).pairs == 16


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


def test_on_the_quiet_lab_it_catches_ten_percent_and_mostly_five_within_the_budget():
    """At σ 0.07 per pair: 10 % slower caught ≥ 99 % of the time, 5 % about two times in
    three, an unchanged build 1 time in 2,000 at most; an unchanged build and a 20 % slowdown decided in
    at most 18 pairs on average, everything in at most 30 (of a budget of 48)."""
    aa, aa_pairs = _simulate(0.0, 0.07)
    p5, p5_pairs = _simulate(0.05, 0.07)
    p10, p10_pairs = _simulate(0.10, 0.07)
    p20, p20_pairs = _simulate(0.20, 0.07)
    assert aa[seq.SLOWER] <= 0.001 and aa[seq.NOT_SLOWER] >= 0.99
    assert p10[seq.SLOWER] >= 0.99 and p20[seq.SLOWER] == 1.0
    assert 0.55 <= p5[seq.SLOWER] <= 0.8
    assert aa_pairs <= 18 and p20_pairs == 16 and max(p5_pairs, p10_pairs) <= 30


def test_a_slowdown_of_the_tolerance_or_more_passes_within_beta():
    rates, _ = _simulate(0.08, 0.07)
    assert rates[seq.NOT_SLOWER] <= 0.05
    loaded, _ = _simulate(0.08, 0.25)
    assert loaded[seq.NOT_SLOWER] <= 0.05
