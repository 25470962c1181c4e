"""What `compare`'s sequential rule does at a given noise, simulated: alarms, catches, pairs.

Each simulated comparison is a sequence of up to --budget pairs whose log-ratios are
log(1 − effect) plus noise (normal with σ per pair, or Student t with --df degrees of
freedom scaled by σ), plus an order effect that alternates with the repeat; it is judged
by harness/analysis/sequential.py exactly as `compare` judges one case, at α / 2 (a
comparison of two cases at --alpha), with the closing test at the end of the budget. The
lab's σ: A/A pairs of the sleeve's 1 s iperf3 runs measured σ 0.12–0.16 on the quiet
machine (BENCHMARKS.md, "The sequential A/B gate"), and swing by ±50 % beside other work;
0.07 is a quieter machine's.

    .venv/bin/python benchmarks/sequential_sim.py                       # the table in BENCHMARKS.md
    .venv/bin/python benchmarks/sequential_sim.py --sigma 0.15 --tolerance 0.10
"""

from __future__ import annotations

import argparse
import math
import sys

import numpy as np

from harness.analysis import sequential as seq
from harness.gates import compare


def simulate(effect: float, sigma: float, *, budget: int = 48, runs: int = 2000, tolerance: float = 0.08,
             alpha: float = 0.025, beta: float = compare.DEFAULT_BETA, seed: int = 1, order: float = 0.0,
             df: float | None = None, closing: bool = True) -> tuple[dict[str, float], float]:
    """The fractions of `runs` seeded comparisons that end slower / not slower / undecided,
    and the mean pairs used. Fixed by `seed`."""
    rng = np.random.default_rng(seed)
    out = {seq.SLOWER: 0, seq.NOT_SLOWER: 0, seq.UNDECIDED: 0}
    used = 0
    alternate = np.where(np.arange(budget) % 2, 1.0, -1.0)
    for _ in range(runs):
        noise = rng.standard_t(df, budget) * sigma if df else rng.normal(0, sigma, budget)
        d = math.log(1 - effect) + noise + order * alternate
        r = seq.sequential(list(enumerate(d)), higher_better=True, tolerance=tolerance, alpha=alpha, beta=beta,
                           budget=budget if closing else None)
        out[r.outcome] += 1
        used += r.pairs
    return {k: v / runs for k, v in out.items()}, used / runs


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sigma", type=float, action="append", help="noise per pair, log scale (default 0.07, 0.15 and 0.25)")
    ap.add_argument("--tolerance", type=float, default=compare.AB_TOLERANCES["throughput_bps"])
    ap.add_argument("--alpha", type=float, default=compare.DEFAULT_ALPHA, help="for the comparison of two cases")
    ap.add_argument("--budget", type=int, default=48)
    ap.add_argument("--runs", type=int, default=2000)
    ap.add_argument("--no-closing", action="store_true",
                    help="the sign mixture alone, no closing test (it still has half of α: double --alpha "
                         "to give it all)")
    a = ap.parse_args()
    print(f"tolerance {a.tolerance * 100:g} %, α {a.alpha} for two cases, β {compare.DEFAULT_BETA}, "
          f"budget {a.budget} pairs, {a.runs} seeded comparisons per row"
          f"{', no closing test' if a.no_closing else ''}\n")
    print("| σ per pair | true slowdown | slower | not slower | undecided | mean pairs |")
    print("|---|---|---|---|---|---|")
    for sigma in a.sigma or [0.07, 0.15, 0.25]:
        for effect in (0.0, 0.05, 0.10, 0.20):
            rates, pairs = simulate(effect, sigma, budget=a.budget, runs=a.runs, tolerance=a.tolerance,
                                    alpha=a.alpha / 2, closing=not a.no_closing)
            print(f"| {sigma:g} | {effect * 100:g} % | {rates[seq.SLOWER] * 100:.1f} % | "
                  f"{rates[seq.NOT_SLOWER] * 100:.1f} % | {rates[seq.UNDECIDED] * 100:.1f} % | {pairs:.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
