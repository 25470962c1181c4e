"""One `overlaybench run`: check everything, bring the testbed up, run, keep what was measured.

Order matters (ARCHITECTURE.md, "Check everything before starting anything"): the scenario, the matrix's MTUs, the testbed's hosts
(reachable, root, tools, kernel features, the underlay) are all checked before anything
is made on them and before the first measurement, so a typo fails in a second rather
than after ten minutes. The testbed comes from the backend registry; nothing here asks
which backend it is.
"""

from __future__ import annotations

import dataclasses
import logging
import pathlib
import sys
from typing import Callable

from harness import results
from harness.bed import Options
from harness.core import pairs
from harness.core.errors import HarnessError
from harness.hosts import LocalHost
from harness.run import cpuidle, runlock, scenario as scen
from harness.run.runner import Progress, Runner
from harness.sleeve import build as sleeve_build
from harness.testbeds import facts, registry as backends
from harness.testbeds.preflight import needed_binaries
from harness.tools import packages

log = logging.getLogger(__name__)


def _expand_early(sc: scen.Scenario) -> list[scen.Case] | None:
    """The cases, when they can be known before the testbed is reached (no "auto" underlay)."""
    return None if "auto" in sc.underlay_mtus else scen.expand(sc)


@dataclasses.dataclass(frozen=True)
class RunSettings:
    """How the run itself behaves on this machine (from command-line flags); what the
    backend needs is the testbed's Options."""

    concurrent: bool = False        # measure even while another run measures on this machine
    # How this machine's idle CPUs wait (run/cpuidle.py), where the run measures here: by
    # default they poll while a latency test runs and halt otherwise; poll_idle: they poll
    # for the whole run; halt_idle: they always halt.
    poll_idle: bool = False
    halt_idle: bool = False

    def idle_model(self, measures_here: bool) -> str:
        """run.json's cpu_idle: "poll", "poll-latency" or "default" (halting)."""
        if self.poll_idle:
            return "poll"
        return "poll-latency" if measures_here and not self.halt_idle else "default"


def run(scenario_path: str | None = None, overrides: dict | None = None, resume: str | None = None,
        results_dir: str = "results", quiet: bool = False, options: Options | None = None,
        settings: RunSettings | None = None, until: Callable[[pathlib.Path, int], bool] | None = None,
        meta: dict | None = None, extra_modes: tuple = ()) -> results.RunStore:
    """One run of a scenario (or `resume` one). `options`: the backend's, `settings`: the
    run's. `until(run_dir, underlay_mtu)`, asked after every repeat, ends that underlay's
    repeats early when it returns True; run.json then records the repeats measured under
    `stopped_early`. `meta`: more for run.json, written when the run directory is made (so
    a run cut short has it too). `extra_modes`: modes this run defines beside the standard
    ones and the scenario's (an A/B run's arms); the scenario's registry holds them for
    this run alone."""
    opts = options or Options()
    settings = settings or RunSettings()
    if resume:
        if scenario_path or overrides:
            raise HarnessError("--resume takes the scenario from the run; give no scenario file or matrix flags")
        store = results.RunStore.open(pathlib.Path(resume))
        store.lock()                 # one writer per run: refused while its owner lives
        store.repair()
        stored = store.read_meta()
        sc = scen.Scenario.from_dict(stored["scenario"], extra=tuple(extra_modes))
        skip = {(r["case"], r["repeat"]) for r in store.records()}
        opts = dataclasses.replace(opts, run_id=store.run_id)
    else:
        sc = scen.from_command_line(scenario_path, overrides, extra=tuple(extra_modes))
        store, skip = None, set()
        opts = dataclasses.replace(opts, run_id=results.new_run_id())
    cases = _expand_early(sc)            # resolves and checks every overlay MTU
    for name in sc.modes:
        sc.mode(name).local_check()    # binaries this machine ships, before any host is reached
    tb = backends.open_testbed(sc, opts)
    machine = idle = None
    try:
        if settings.poll_idle and not tb.measures_here:
            raise HarnessError(f"--poll-idle holds this machine's CPUs out of halting: the {tb.backend} backend "
                               f"measures elsewhere")
        pair_list = host_pairs(sc, tb)
        tb.preflight(sc)
        if tb.measures_here and not settings.concurrent:
            machine = runlock.hold_machine(opts.run_id, quiet=quiet)
        idle_model = settings.idle_model(tb.measures_here)
        if idle_model == "poll":
            idle = cpuidle.hold()
        elif idle_model == "poll-latency" and not cpuidle.available():
            log.warning("idle CPUs cannot be made to poll here (%s): latency tests run with them halting",
                        cpuidle.DEVICE)
            idle_model = "default"
        sc = scen.resolve_underlay(sc, tb.native_mtu()) if cases is None else sc
        fixed = tb.fixed_underlay_mtu()
        if fixed is not None:
            sc = scen.keep_underlay(sc, fixed, tb.backend)
        cases = scen.expand(sc, pair_list)
        if store is None:
            store = _create_store(results_dir, opts.run_id, sc, tb, cases)
        store.update_meta(cpu_idle=idle_model, **(meta or {}))
        status = "interrupted"
        todo = len([c for c in cases if (c.key, c.repeat) not in skip])
        if not quiet:
            print(f"{store.path}: {todo} cases ({sc.name}: {', '.join(sc.modes)}; "
                  f"{sc.repeats} repeats of {sc.duration:g} s; {tb.backend} backend)", file=sys.stderr)
        progress = None if quiet else Progress(todo)
        try:
            tb.build(sc.underlay_mtus[0], sc.rate)
            for name in sc.modes:
                sc.mode(name).check(tb)
            store.update_meta(testbed=tb.facts(), hosts=tb.host_facts())
            runner = Runner(sc, tb, store, progress,
                            poll_latency=cpuidle.hold if idle_model == "poll-latency" else None)
            runner.run(cases, skip, enough=None if until is None else (lambda u: until(store.path, u)))
            if runner.stopped:
                store.update_meta(stopped_early={str(u): n for u, n in runner.stopped.items()})
            status = "complete"
        except HarnessError:
            status = "failed"
            raise
        finally:
            if progress:
                progress.finish()
            try:
                store.update_meta(end=results.now_iso(), status=status)
            except results.ResultsError as e:     # a full disk: the first error says it all
                log.info("%s", e)
    finally:
        tb.teardown()
        if idle is not None:
            idle.release()
        if machine is not None:
            machine.release()
    return store


def host_pairs(sc: scen.Scenario, tb) -> list[tuple[str, str]] | None:
    """The pairs the run measures, by host name (harness/core/pairs.py), or None for a run of
    one pair between the testbed's first two hosts (no pair dimension). A mode that runs
    between two hosts only is refused on a testbed of more."""
    names = [s.name for s in tb.sides]
    if len(names) > 2:
        two = [m for m in sc.modes if not sc.mode(m).multi_host]
        if two:
            many = ", ".join(m.name for m in sc.known.values() if m.multi_host)
            raise HarnessError(f"mode {two[0]} runs between two hosts only; this testbed has {len(names)} "
                               f"(modes across more: {many})")
    where = "--pairs" if sc.source == "command line" else f"{sc.source}: [matrix] pairs"
    chosen = pairs.select(list(sc.pairs), names, where=where)
    return None if chosen == [(names[0], names[1])] else chosen


def _recorded_looks(sc: scen.Scenario) -> dict:
    """run.json's `modes`: how the run's modes look, from the scenario's registry."""
    for m in sc.modes:
        sc.mode(m)                      # an unknown mode is the registry's error, named
    recorded = sc.known.looks().recordable()
    return {n: recorded[n] for n in sc.modes}


def _create_store(results_dir: str, run_id: str, sc: scen.Scenario, tb, cases: list[scen.Case]) -> results.RunStore:
    local = LocalHost()
    try:
        sleeve_hash = sleeve_build.Source.shipped().hash
    except HarnessError:
        sleeve_hash = None
    return results.RunStore.create(results_dir, {
        "scenario": sc.to_dict(),
        "command": sys.argv,
        "git_commit": facts.git_commit(),
        "machine": facts.machine(),
        "tools": {b: packages.version_of(local, b) for b in needed_binaries(sc) if packages.has_version(b)},
        "sysctls": facts.sysctls(local),
        "backend": tb.backend,
        "cpu_accounting": tb.meter.description,
        "sleeve_source": sleeve_hash,
        "cases_planned": len(cases),
        # how each mode looks in tables and plots, so readers need none of the modes' code
        # (the scenario's registry's looks, harness/core/looks.py)
        "modes": _recorded_looks(sc),
        # every configuration the run will measure (mode, underlay and overlay MTU, placement,
        # test, streams, pair), in run order: what a judgement of a run stopped early counts
        "configs_planned": list(dict.fromkeys(c.config for c in cases)),
    }, run_id=run_id)
