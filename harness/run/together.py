"""Which cases are measured at the same time: the `sequential`, `rounds` and `mesh` schedules.

A deployment's cases are cut into sets; run/case.py measures each set at once (a
sequential case is a set of one) and the runner stores a set's lines as one batch (a kill
keeps all of them or none, so `--resume` measures a set again whole).
"""

from __future__ import annotations

from harness.run.scenario import Case


def sets(cases: list[Case], schedule: str, rounds: list[list[tuple[str, str]]] | None = None) -> list[list[Case]]:
    """A deployment's cases in the sets measured together, in run order: one case a set for
    `sequential`; for `rounds`, the cases of one configuration whose pairs share a round;
    for `mesh`, every pair of one configuration."""
    if schedule == "sequential":
        return [[c] for c in cases]
    round_of = {p: i for i, r in enumerate(rounds or []) for p in r}
    configs: dict[tuple, int] = {}
    out: dict[tuple, list[Case]] = {}
    for c in cases:
        config = configs.setdefault((c.placement, c.test, c.streams), len(configs))
        out.setdefault((config, round_of.get((c.src, c.dst), 0) if schedule == "rounds" else 0), []).append(c)
    # within a set, the pairs in their round's order
    order = {p: j for r in rounds or [] for j, p in enumerate(r)}
    return [sorted(out[k], key=lambda c: order.get((c.src, c.dst), 0)) for k in sorted(out)]
