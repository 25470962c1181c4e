"""`overlaybench gate`, `baseline`, `compare` and `trend`: the regression gates on the command line."""

from __future__ import annotations

import json
import re

from harness.cli.args import add_poll_idle, csv, matrix_overrides
from harness.core.errors import HarnessError
from harness.core.paths import PROJECT


def add(sub) -> None:
    g = sub.add_parser("gate", help="exit 1 if RUN regressed significantly against a baseline")
    g.add_argument("run")
    g.add_argument("--baseline", required=True, metavar="FILE")
    add_outputs(g, "every case's verdict")
    g.set_defaults(func=cmd_gate)
    add_compare(sub)

    b = sub.add_parser("baseline", help="write a gate baseline from a run")
    b.add_argument("run")
    b.add_argument("-o", "--output", required=True, metavar="FILE")
    b.set_defaults(func=cmd_baseline)

    t = sub.add_parser(
        "trend", help="steps in each case's ratio to native across the stored runs of a scenario; exit 1 on one "
                      "for the worse",
        description="Group the complete runs of RESULTS_DIR by scenario and machine; in every case measured by "
                    "at least 10 of them, look for steps in the run's median ratio to native (Pettitt's "
                    "statistic, a permutation p-value, binary segmentation; α shared by the cases). A step "
                    "counts when it is also beyond the gate's tolerance (10 % throughput, 15 % latency).")
    t.add_argument("results_dir", metavar="RESULTS_DIR", help="a directory of run directories (e.g. results)")
    t.add_argument("--scenario", metavar="NAME", help="only the runs of this scenario (its name in run.json)")
    t.add_argument("--alpha", type=float, default=0.05, metavar="A",
                   help="chance of reporting a step in a history without one, per scenario and machine "
                        "(default 0.05)")
    t.add_argument("--format", choices=["text", "json"], default="text", help="json: every case's series and steps")
    t.set_defaults(func=cmd_trend)


def add_outputs(p, json_help: str) -> None:
    p.add_argument("--junit", metavar="FILE", help="write JUnit XML")
    p.add_argument("--summary", metavar="FILE", help="write a markdown summary (e.g. $GITHUB_STEP_SUMMARY)")
    p.add_argument("--format", choices=["text", "json"], default="text", help=f"json: {json_help}")


def add_compare(sub) -> None:
    c = sub.add_parser(
        "compare", help="the sleeve at a base ref and at the working tree, interleaved in one run; "
                        "exit 1 if head is slower, 4 if undecided",
        description="Build overlay/sleeve at --base REF and from the working tree (or --head REF), deploy "
                    "both in turn within every repeat of one run, and judge head against base pair by pair "
                    "until each case is decided: slower, or not slower than its tolerance (a sequential "
                    "test whose false alarms stay within --alpha however many pairs it takes); the run "
                    "stops once every case is decided, and --repeats is the budget of pairs. Exit 0 not "
                    "slower, 1 slower, 4 undecided when the budget ran out. Matrix flags override the "
                    "scenario (default scenarios/ab.toml).")
    c.add_argument("scenario", nargs="?", help="scenario TOML whose modes are compared (sleeve modes only)")
    c.add_argument("--base", metavar="REF", help="git ref of the base build, e.g. a merge base or HEAD~1")
    c.add_argument("--head", metavar="REF", help="git ref of the head build (default: the working tree)")
    c.add_argument("--repo", metavar="DIR", help="the git repository to build from (default: this project)")
    c.add_argument("--run", metavar="RUN", help="judge a finished A/B run instead of measuring")
    c.add_argument("--measure-unchanged", action="store_true",
                   help="measure even when base and head have the same sleeve source (an A/A run)")
    c.add_argument("--inject-ns", type=int, metavar="N",
                   help="add --calibrate-ns N to the head arm: a known slowdown, to measure the gate's power")
    c.add_argument("--alpha", type=float, metavar="A",
                   help="the chance an unchanged build fails, all cases and pairs together (default 0.05; "
                        "with --run: the run's own)")
    c.add_argument("--tolerance", action="append", metavar="METRIC=FRACTION",
                   help="the slowdown a case is built to catch (smaller ones may pass), e.g. "
                        "throughput_bps=0.05 (defaults: throughput_bps 0.08, latency_us 0.15, pps 0.10, "
                        "latency_p99_us 0.25; with --run: over the run's own); repeatable")
    c.add_argument("--modes", type=csv(str), metavar="A,B", help="sleeve modes to compare (each gets two arms)")
    c.add_argument("--underlay-mtu", type=csv(int), metavar="N,..")
    c.add_argument("--overlay-mtu", type=csv("mtu"), metavar="auto|N,..")
    c.add_argument("--placements", type=csv(str), metavar="P,..")
    c.add_argument("--tests", type=csv(str), metavar="T,..")
    c.add_argument("--streams", type=csv(int), metavar="N,..")
    c.add_argument("--repeats", type=int, metavar="N",
                   help="the budget: at most N pairs per case (at least 14 for α = 0.05 over two cases)")
    c.add_argument("--duration", type=float, metavar="S", help="seconds per test")
    c.add_argument("--rate", metavar="RATE", help="underlay rate cap, e.g. 1gbit")
    add_poll_idle(c)
    c.add_argument("--results", default="results", metavar="DIR", help="where runs go (default: results)")
    add_outputs(c, "the run directory and every case's verdict")
    c.add_argument("-q", "--quiet", action="store_true", help="no progress line")
    c.set_defaults(func=cmd_compare)


# The gates bring pandas and scipy, and compare the whole harness: imported by the commands,
# not by `--help`.

def cmd_gate(a) -> int:
    from harness.gates import baseline
    return baseline.gate_main(a.run, a.baseline, junit=a.junit, summary=a.summary, fmt=a.format)


def cmd_baseline(a) -> int:
    from harness.gates import baseline
    baseline.baseline_main(a.run, a.output)
    print(a.output)
    return 0


def cmd_trend(a) -> int:
    from harness.gates import trend
    return trend.trend_main(a.results_dir, scenario=a.scenario, alpha=a.alpha, fmt=a.format)


def cmd_compare(a) -> int:
    from harness.gates import compare
    return compare_main(a.base, run=a.run, repo=a.repo, head=a.head, scenario_path=a.scenario,
                        overrides=matrix_overrides(a), inject_ns=a.inject_ns, alpha=a.alpha,
                        tolerances=compare.parse_tolerances(a.tolerance, base={}) if a.tolerance else None,
                        results_dir=a.results,
                        junit=a.junit, summary=a.summary, fmt=a.format, quiet=a.quiet,
                        measure_unchanged=a.measure_unchanged, poll_idle=a.poll_idle)


def check_budget(sc, alpha: float, tolerances: dict[str, float]) -> None:
    """Refuse, before anything is built, a budget of pairs (the scenario's repeats) too small
    for any case to be shown slower at α shared by its cases: such a comparison could only
    pass or be undecided. `sc`: the scenario (harness.run.scenario), its modes plain."""
    from harness.analysis.sequential import fewest_blocks
    from harness.gates.verdict import HEADLINE
    from harness.run import scenario as scen
    if "auto" in sc.underlay_mtus:
        return                          # the cases are known once the testbed is reached
    n = len({c.config for c in scen.expand(sc)
             if HEADLINE.get(c.test) in tolerances})
    need = 2 * fewest_blocks(alpha / n) if n else 0
    if sc.repeats < need:
        raise HarnessError(f"--repeats {sc.repeats}: too few pairs to ever show a case slower at α {alpha:g} over "
                           f"{n} cases; at least {need}")


LABEL_FREE = re.compile(r"^[A-Za-z0-9_.][A-Za-z0-9_./~^@{}-]*$")


def compare_main(base: str | None, run: str | None = None, repo: str | None = None, head: str | None = None,
                 scenario_path: str | None = None, overrides: dict | None = None, inject_ns: int | None = None,
                 alpha: float | None = None, tolerances: dict[str, float] | None = None,
                 results_dir: str = "results", junit: str | None = None, summary: str | None = None,
                 fmt: str = "text", quiet: bool = False, measure_unchanged: bool = False,
                 poll_idle: bool = False) -> int:
    """`overlaybench compare --base REF [...]`, or `--run RUN` to judge a finished A/B run again.
    When both arms have the same source and flags nothing is measured (unless
    `measure_unchanged`): the verdict could only be a false alarm."""
    from harness.gates import compare, render
    from harness.modes import variants
    from harness.run import ab, scenario as scen
    from harness.results import read_meta, resolve_run
    from harness.testbeds.base import Options
    if alpha is not None and not 0 < alpha < 1:
        raise HarnessError(f"--alpha {alpha}: must be between 0 and 1")
    if run is not None:
        if base or head or overrides or inject_ns is not None or poll_idle:
            raise HarnessError("--run judges a finished A/B run: give no --base, --head, --inject-ns, --poll-idle "
                               "or matrix flags")
        run_dir = resolve_run(run, results_dir)
        # by default, the rule the run was measured (and maybe stopped) under
        rule = (read_meta(run_dir).get("compare") or {}).get("rule") or {}
        alpha = rule.get("alpha", compare.DEFAULT_ALPHA) if alpha is None else alpha
        tolerances = {**(rule.get("tolerances") or compare.AB_TOLERANCES), **(tolerances or {})}
    else:
        alpha = compare.DEFAULT_ALPHA if alpha is None else alpha
        tolerances = {**compare.AB_TOLERANCES, **(tolerances or {})}
        if not base:
            raise HarnessError("compare needs --base REF (the build to compare against) or --run RUN")
        for ref in (base, head):
            if ref is not None and not LABEL_FREE.match(ref):
                raise HarnessError(f"{ref!r}: not a git ref")
        if inject_ns is not None and not 0 < inject_ns <= 10_000_000:
            raise HarnessError(f"--inject-ns {inject_ns}: expected 1..10000000 (ns per frame)")
        if scenario_path is None and ab.DEFAULT_SCENARIO.exists():
            scenario_path = str(ab.DEFAULT_SCENARIO)
        sc = scen.from_command_line(scenario_path, overrides)
        for m in sc.modes:                                   # bad input fails before any build
            variants.require_sleeve(m)
        check_budget(sc, alpha, tolerances)
        with ab.prepare(repo or PROJECT, base, head,
                        head_flags=("--calibrate-ns", str(inject_ns)) if inject_ns else ()) as arms:
            same = arms.base.source_hash == arms.head.source_hash and arms.base.flags == arms.head.flags
            if same and not measure_unchanged:
                # Both arms would run one binary: a measurement could only raise a false alarm.
                msg = (f"compare passed: nothing to compare, overlay/sleeve is the same at {arms.base.origin} "
                       f"and {arms.head.origin} (source {arms.base.source_hash}); --measure-unchanged measures "
                       f"anyway")
                print(json.dumps({"ok": True, "status": "pass", "kind": "compare", "headline": msg, "cases": []},
                                 indent=2) if fmt == "json" else msg)
                return 0
            run_dir = ab.measure(arms, scenario_path, overrides, results_dir=results_dir, quiet=quiet,
                                 options=Options(poll_idle=poll_idle), until=compare.stop_rule(alpha, tolerances),
                                 rule={"alpha": alpha, "beta": compare.DEFAULT_BETA, "tolerances": tolerances})
    v = compare.judge(run_dir, alpha, tolerances)
    if fmt != "json":
        print(run_dir)
    return render.publish(v, junit=junit, summary=summary, fmt=fmt, extra={"run_dir": str(run_dir)})
