"""An A/B comparison: the request, both arms built, measured in one run until decided.

The arms
    base: overlay/sleeve at a git ref (e.g. a pull request's merge base), exported with
    `git archive`; head: the working tree (or another ref). Both are built the same way
    and cached by source hash (harness/sleeve/refs.py). Each scenario mode M becomes two modes,
    M@base and M@head (harness/modes/variants.py), which the runner deploys one after the
    other in every repeat, their order alternating between repeats, so whatever the
    machine does to one arm it does to the other within seconds.

The workflow (`compare`, what `overlaybench compare` runs)
    Check the request, then the budget of pairs; build both arms; measure them until
    every case is decided; judge; publish. Or, for a finished run (`Request.run`), judge
    and publish it again by the rule it recorded. The judgement (harness/gates/compare.py,
    on harness/analysis/sequential.py) sits above run/, which imports no gate: the
    command hands it in as a `Judge`.
"""

from __future__ import annotations

import dataclasses
import json
import pathlib
import re
from typing import Any, Callable, Protocol, Sequence

from harness.core.errors import HarnessError
from harness.core.paths import PROJECT
from harness.modes import variants
from harness.modes.variants import BASE, HEAD
from harness.results import read_meta, resolve_run
from harness.run import scenario as scen, session
from harness.run.session import RunSettings
from harness.sleeve import refs

DEFAULT_SCENARIO = PROJECT / "scenarios" / "ab.toml"
LABEL_FREE = re.compile(r"^[A-Za-z0-9_.][A-Za-z0-9_./~^@{}-]*$")


@dataclasses.dataclass(frozen=True)
class Request:
    """One comparison, as the command line gave it: what to build, what to measure, the
    rule to judge by and where the verdict goes."""

    base: str | None = None             # git ref of the base build
    head: str | None = None             # git ref of the head build (None: the working tree)
    repo: str | None = None             # the git repository both are built from (None: this project)
    run: str | None = None              # judge this finished A/B run instead of measuring
    scenario: str | None = None         # the scenario file (None: scenarios/ab.toml)
    overrides: dict | None = None       # the matrix flags, as scenario tables
    inject_ns: int | None = None        # --calibrate-ns N on the head arm: a known slowdown
    alpha: float | None = None          # None: the judge's default (with `run`: the run's own)
    tolerances: dict[str, float] | None = None  # over the defaults (with `run`: over the run's own)
    measure_unchanged: bool = False     # measure even when both arms would run one binary
    poll_idle: bool = False             # the run's RunSettings.poll_idle
    results_dir: str = "results"
    quiet: bool = False                 # no progress line
    junit: str | None = None            # also write the verdict as JUnit XML here
    summary: str | None = None          # and as a markdown summary here
    fmt: str = "text"                   # stdout: text or json

    def check(self) -> None:
        """Bad input as one clear line, before anything is read or built."""
        if self.alpha is not None and not 0 < self.alpha < 1:
            raise HarnessError(f"--alpha {self.alpha}: must be between 0 and 1")
        if self.run is not None:
            if self.base or self.head or self.overrides or self.inject_ns is not None or self.poll_idle:
                raise HarnessError("--run judges a finished A/B run: give no --base, --head, --inject-ns, "
                                   "--poll-idle or matrix flags")
            return
        if not self.base:
            raise HarnessError("compare needs --base REF (the build to compare against) or --run RUN")
        for ref in (self.base, self.head):
            if ref is not None and not LABEL_FREE.match(ref):
                raise HarnessError(f"{ref!r}: not a git ref")
        if self.inject_ns is not None and not 0 < self.inject_ns <= 10_000_000:
            raise HarnessError(f"--inject-ns {self.inject_ns}: expected 1..10000000 (ns per frame)")


class Judge(Protocol):
    """What the workflow needs of the judgement (harness/gates/compare.py's `Gate`)."""

    beta: float     # the chance a slowdown of the tolerance or more passes a case (recorded)

    def rule(self, alpha: float | None, tolerances: dict[str, float] | None,
             recorded: dict | None = None) -> tuple[float, dict[str, float]]:
        """α and the tolerances to measure and judge by: those given, over `recorded` (a
        finished run's rule) or else over the defaults."""

    def check_budget(self, tests: Sequence[str], repeats: int, alpha: float,
                     tolerances: dict[str, float]) -> None:
        """HarnessError if `repeats` pairs could never show a case slower (`tests`: each
        case's test)."""

    def until(self, alpha: float, tolerances: dict[str, float]) -> Callable[[pathlib.Path, int], bool]:
        """`session.run`'s `until`: whether the run so far decides every case."""

    def verdict(self, run_dir: pathlib.Path, alpha: float, tolerances: dict[str, float]) -> Any:
        """The run judged."""

    def publish(self, verdict: Any, run_dir: pathlib.Path, junit: str | None, summary: str | None,
                fmt: str) -> int:
        """The verdict written out; the command's exit status."""


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
            results_dir: str = "results", quiet: bool = False, settings: RunSettings | None = None,
            until: Callable[[pathlib.Path, int], bool] | None = None, rule: dict | None = None) -> pathlib.Path:
    """One run of the scenario with every mode as two arms; returns the run directory.
    `settings`: the run's, `until`: when to stop adding repeats (the Judge's `until`), both
    as for `session.run`; `rule`: the judgement's parameters, recorded in run.json so
    `compare --run` judges alike."""
    overrides = dict(overrides or {})
    sc = scen.from_command_line(scenario_path, overrides)
    made = []
    for m in sc.modes:
        made += [variants.variant(m, arms.base, sc.known), variants.variant(m, arms.head, sc.known)]
    matrix = {**overrides.get("matrix", {}), "modes": [v.name for v in made]}
    info = {BASE: arms.base.describe(), HEAD: arms.head.describe()}
    store = session.run(scenario_path=scenario_path, overrides={**overrides, "matrix": matrix},
                        results_dir=results_dir, quiet=quiet, settings=settings, until=until,
                        meta={"compare": {**info, "rule": rule} if rule else info}, extra_modes=tuple(made))
    return store.path


def check_budget(sc: scen.Scenario, alpha: float, tolerances: dict[str, float], judge: Judge) -> None:
    """Refuse, before anything is built, a budget of pairs (the scenario's repeats) too small
    for any case to be shown slower at α shared by its cases: such a comparison could only
    pass or be undecided. `sc`: the scenario, its modes plain."""
    if "auto" in sc.underlay_mtus:
        return                          # the cases are known once the testbed is reached
    tests = {c.config: c.test for c in scen.expand(sc)}
    judge.check_budget(list(tests.values()), sc.repeats, alpha, tolerances)


def compare(req: Request, judge: Judge) -> int:
    """The comparison `req` asks for, judged by `judge`; the command's exit status. When
    both arms have the same source and flags nothing is measured (unless
    `measure_unchanged`): the verdict could only be a false alarm."""
    req.check()
    if req.run is not None:
        run_dir = resolve_run(req.run, req.results_dir)
        # by default, the rule the run was measured (and maybe stopped) under
        alpha, tolerances = judge.rule(req.alpha, req.tolerances,
                                       (read_meta(run_dir).get("compare") or {}).get("rule") or {})
    else:
        alpha, tolerances = judge.rule(req.alpha, req.tolerances)
        scenario_path = req.scenario
        if scenario_path is None and DEFAULT_SCENARIO.exists():
            scenario_path = str(DEFAULT_SCENARIO)
        sc = scen.from_command_line(scenario_path, req.overrides)
        for m in sc.modes:                                   # bad input fails before any build
            variants.require_sleeve(m, sc.known)
        check_budget(sc, alpha, tolerances, judge)
        with prepare(req.repo or PROJECT, req.base, req.head,
                     head_flags=("--calibrate-ns", str(req.inject_ns)) if req.inject_ns else ()) as arms:
            same = arms.base.source_hash == arms.head.source_hash and arms.base.flags == arms.head.flags
            if same and not req.measure_unchanged:
                # Both arms would run one binary: a measurement could only raise a false alarm.
                msg = (f"compare passed: nothing to compare, overlay/sleeve is the same at {arms.base.origin} "
                       f"and {arms.head.origin} (source {arms.base.source_hash}); --measure-unchanged measures "
                       f"anyway")
                print(json.dumps({"ok": True, "status": "pass", "kind": "compare", "headline": msg, "cases": []},
                                 indent=2) if req.fmt == "json" else msg)
                return 0
            run_dir = measure(arms, scenario_path, req.overrides, results_dir=req.results_dir, quiet=req.quiet,
                              # the run's idle model: CPUs poll while latency is measured
                              settings=RunSettings(poll_idle=req.poll_idle),
                              until=judge.until(alpha, tolerances),
                              rule={"alpha": alpha, "beta": judge.beta, "tolerances": tolerances})
    v = judge.verdict(run_dir, alpha, tolerances)
    if req.fmt != "json":
        print(run_dir)
    return judge.publish(v, run_dir, junit=req.junit, summary=req.summary, fmt=req.fmt)
