"""One `overlaybench run`: check everything, bring the testbed up, run, keep what was measured.

Order matters (STYLE.md, point 3): the scenario, the matrix's MTUs, root, the tools and
the modes' kernel features are all checked before the first measurement, so a typo
fails in a second rather than after ten minutes.
"""

from __future__ import annotations

import logging
import pathlib
import shutil
import sys

from harness import facts, modes, results, scenario as scen, tools
from harness.errors import HarnessError
from harness.hosts import LocalHost
from harness.runner import Progress, Runner

log = logging.getLogger(__name__)


def _scenario_from_meta(meta: dict) -> scen.Scenario:
    d = dict(meta["scenario"])
    for k, v in d.items():
        if isinstance(v, list):
            d[k] = tuple(v)
        elif isinstance(v, dict):
            d[k] = {kk: tuple(vv) for kk, vv in v.items()}
    return scen.Scenario(**d)


def needed_binaries(sc: scen.Scenario) -> list[str]:
    need = ["ip", "tc", "ss", "bridge"]
    for t in sc.tests:
        b = tools.get(t).binary
        if b not in need:
            need.append(b)
    return need


def check_tools(sc: scen.Scenario) -> None:
    missing = [b for b in needed_binaries(sc) if not shutil.which(b)]
    if missing:
        pkgs = sorted({facts.PACKAGES.get(b, b) for b in missing})
        raise HarnessError(f"{', '.join(missing)} not found on this machine: apt-get install -y {' '.join(pkgs)}")


def run(scenario_path: str | None = None, overrides: dict | None = None, resume: str | None = None,
        results_dir: str = "results", quiet: bool = False) -> results.RunStore:
    if resume:
        if scenario_path or overrides:
            raise HarnessError("--resume takes the scenario from the run; give no scenario file or matrix flags")
        store = results.RunStore.open(pathlib.Path(resume))
        sc = _scenario_from_meta(store.read_meta())
        skip = {(r["case"], r["repeat"]) for r in store.records()}
    else:
        sc = scen.load(scenario_path) if scenario_path else scen.Scenario()
        if overrides:
            sc = scen.build(overrides, source="command line", base=sc)
        store, skip = None, set()
    cases = scen.expand(sc)          # resolves and checks every overlay MTU
    if sc.backend != "netns":
        raise HarnessError(f"backend {sc.backend}: not available in this version (only netns, the local lab)")
    from harness.lab import Lab, require_root
    require_root()
    check_tools(sc)
    local = LocalHost()
    if store is None:
        store = results.RunStore.create(results_dir, {
            "scenario": sc.to_dict(),
            "command": sys.argv,
            "git_commit": facts.git_commit(),
            "machine": facts.machine(),
            "tools": {b: facts.tool_version(local, b) for b in needed_binaries(sc) if b in facts.VERSION_ARGV},
            "sysctls": facts.sysctls(local),
            "cpu_accounting": ("machine: the whole machine's busy share of all CPUs from /proc/stat "
                               "(user+nice+system+irq+softirq+steal) as cpu_total_pct; per-process CPU of "
                               "the client and server tools and the sleeve daemons as % of one CPU"),
            "cases_planned": len(cases),
        })
    todo = len([c for c in cases if (c.key, c.repeat) not in skip])
    if not quiet:
        print(f"{store.path}: {todo} cases ({sc.name}: {', '.join(sc.modes)}; "
              f"{sc.repeats} repeats of {sc.duration:g} s)", file=sys.stderr)
    progress = None if quiet else Progress(todo)
    status = "interrupted"
    try:
        with Lab.create(sc.underlay_mtus[0], sc.rate) as lab:
            for name in sc.modes:
                modes.get(name).check(lab)
            store.update_meta(testbed=lab.facts())
            runner = Runner(sc, lab, store, progress, cpu_host=local)
            runner.run(cases, skip)
        status = "complete"
    except HarnessError:
        status = "failed"
        raise
    finally:
        if progress:
            progress.finish()
        store.update_meta(end=results.now_iso(), status=status)
    return store
