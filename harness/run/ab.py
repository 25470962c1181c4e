"""Both arms of an A/B comparison measured in one run.

The arms
    base: overlay/sleeve at a git ref (e.g. a pull request's merge base), exported with
    `git archive`; head: the working tree (or another ref). Both are built the same way
    and cached by source hash (harness/sleeve/refs.py). Each scenario mode M becomes two modes,
    M@base and M@head (harness/modes/variants.py), which the runner deploys one after the
    other in every repeat, their order alternating between repeats, so whatever the
    machine does to one arm it does to the other within seconds. harness/gates/compare.py
    judges the run.
"""

from __future__ import annotations

import dataclasses
import pathlib
from typing import Callable, Sequence

from harness.core.paths import PROJECT
from harness.modes import variants
from harness.modes.variants import BASE, HEAD
from harness.run import scenario as scen, session
from harness.sleeve import refs

DEFAULT_SCENARIO = PROJECT / "scenarios" / "ab.toml"


@dataclasses.dataclass
class Arms:
    """The two arms of a comparison and the snapshots of their sources (removed by `close`)."""

    base: refs.Build
    head: refs.Build
    snapshots: refs.Snapshots

    def __enter__(self) -> "Arms":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        self.snapshots.close()


def prepare(repo: pathlib.Path | str, base_ref: str | None, head_ref: str | None = None,
            base_flags: Sequence[str] = (), head_flags: Sequence[str] = ()) -> Arms:
    """Both arms, built once here: `base_ref` (None: the working tree, as for an A/A run),
    and `head_ref` or the working tree. Use as a context manager."""
    snaps = refs.Snapshots()
    try:
        return Arms(snaps.add(repo, base_ref, BASE, base_flags), snaps.add(repo, head_ref, HEAD, head_flags), snaps)
    except BaseException:
        snaps.close()
        raise


def measure(arms: Arms, scenario_path: str | None = None, overrides: dict | None = None,
            results_dir: str = "results", quiet: bool = False, options=None,
            until: Callable[[pathlib.Path, int], bool] | None = None, rule: dict | None = None) -> pathlib.Path:
    """One run of the scenario with every mode as two arms; returns the run directory.
    `options`: the testbed's (harness.testbeds.base.Options), `until`: when to stop
    adding repeats (harness/gates/compare.py's `stop_rule`), both as for `session.run`; `rule`:
    the judgement's parameters, recorded in run.json so `compare --run` judges alike."""
    overrides = dict(overrides or {})
    sc = scen.from_command_line(scenario_path, overrides)
    made = []
    for m in sc.modes:
        made += [variants.variant(m, arms.base), variants.variant(m, arms.head)]
    matrix = {**overrides.get("matrix", {}), "modes": [v.name for v in made]}
    with variants.registered(made):
        info = {BASE: arms.base.describe(), HEAD: arms.head.describe()}
        store = session.run(scenario_path=scenario_path, overrides={**overrides, "matrix": matrix},
                            results_dir=results_dir, quiet=quiet, options=options, until=until,
                            meta={"compare": {**info, "rule": rule} if rule else info})
    return store.path
