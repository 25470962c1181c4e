"""`overlaybench gate`, `baseline`, `compare` and `trend`: the regression gates on the command line.
`compare` parses its flags into an A/B request and hands it, with the judgement
(harness/gates/compare.py's Gate), to harness/run/ab.py's workflow."""

from __future__ import annotations

from harness.cli.args import add_poll_idle, add_run_arg, csv, matrix_overrides, run_dir


def add(sub) -> None:
    g = sub.add_parser(
        "gate", help="exit 1 if RUN regressed significantly against a baseline",
        description="Judge RUN against a baseline that `overlaybench baseline` wrote: for every case of "
                    "the baseline, is the mode's ratio to native in RUN significantly worse than the "
                    "baseline's by more than the case's tolerance? Exit 0 no regression, 1 a regression "
                    "(each named), 2 bad input. Ratios to native, not absolute numbers, so a baseline "
                    "from another machine still says something.")
    add_run_arg(g)
    g.add_argument("--baseline", required=True, metavar="FILE",
                   help="the baseline JSON (`overlaybench baseline RUN -o FILE`; required)")
    add_outputs(g, "every case's verdict")
    g.set_defaults(func=cmd_gate)
    add_compare(sub)

    b = sub.add_parser(
        "baseline", help="write a gate baseline from a run",
        description="Write the baseline `overlaybench gate` judges later runs against: every case's "
                    "ratios to native in RUN (each repeat's), with the gate's tolerances. Prints the "
                    "file written.")
    add_run_arg(b)
    b.add_argument("-o", "--output", required=True, metavar="FILE", help="the baseline JSON to write (required)")
    b.set_defaults(func=cmd_baseline)

    t = sub.add_parser(
        "trend", help="steps in each case's ratio to native across the stored runs of a scenario; exit 1 on one "
                      "for the worse",
        description="Group the complete runs of RESULTS_DIR by scenario and machine; in every case measured by "
                    "at least 10 of them, look for steps in the run's median ratio to native (Pettitt's "
                    "statistic, a permutation p-value, binary segmentation; α shared by the cases). A step "
                    "counts when it is also beyond the gate's tolerance (10 % throughput, 15 % latency).")
    t.add_argument("results_dir", metavar="RESULTS_DIR", help="a directory of run directories (e.g. results)")
    t.add_argument("--scenario", metavar="NAME",
                   help="only the runs of this scenario (its name in run.json; default: every scenario)")
    t.add_argument("--alpha", type=float, default=0.05, metavar="A",
                   help="chance of reporting a step in a history without one, per scenario and machine "
                        "(default: %(default)s)")
    t.add_argument("--format", choices=["text", "json"], default="text",
                   help="text: a line per step; json: every case's series and steps (default: %(default)s)")
    t.set_defaults(func=cmd_trend)


def add_outputs(p, json_help: str) -> None:
    p.add_argument("--junit", metavar="FILE", help="also write JUnit XML, a test case per case (default: none)")
    p.add_argument("--summary", metavar="FILE",
                   help="also write a markdown summary (e.g. $GITHUB_STEP_SUMMARY; default: none)")
    p.add_argument("--format", choices=["text", "json"], default="text",
                   help=f"text: a line per case; json: {json_help} (default: %(default)s)")


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
    c.add_argument("scenario", nargs="?",
                   help="scenario TOML whose modes are compared (sleeve modes only; default: scenarios/ab.toml)")
    c.add_argument("--base", metavar="REF",
                   help="git ref of the base build, e.g. a merge base or HEAD~1 (required unless --run)")
    c.add_argument("--head", metavar="REF", help="git ref of the head build (default: the working tree)")
    c.add_argument("--repo", metavar="DIR", help="the git repository to build from (default: this project)")
    c.add_argument("--run", metavar="RUN",
                   help="judge a finished A/B run (its directory, or its id in --results DIR) instead of measuring "
                        "(default: measure)")
    c.add_argument("--measure-unchanged", action="store_true",
                   help="measure even when base and head have the same sleeve source (an A/A run; default: "
                        "say so and measure nothing)")
    c.add_argument("--inject-ns", type=int, metavar="N",
                   help="add --calibrate-ns N to the head arm: a known slowdown, to measure the gate's power "
                        "(default: none)")
    c.add_argument("--alpha", type=float, metavar="A",
                   help="the chance an unchanged build fails, all cases and pairs together (default 0.05; "
                        "with --run: the run's own)")
    c.add_argument("--tolerance", action="append", metavar="METRIC=FRACTION",
                   help="the slowdown a case is built to catch (smaller ones may pass), e.g. "
                        "throughput_bps=0.05 (defaults: throughput_bps 0.08, latency_us 0.15, pps 0.10, "
                        "latency_p99_us 0.25; with --run: over the run's own); repeatable")
    scen = "default: the scenario's"
    c.add_argument("--modes", type=csv(str), metavar="A,B",
                   help=f"sleeve modes to compare (each gets two arms; {scen})")
    c.add_argument("--underlay-mtu", type=csv(int), metavar="N,..", help=f"underlay MTUs ({scen})")
    c.add_argument("--overlay-mtu", type=csv("mtu"), metavar="auto|N,..",
                   help=f"overlay MTUs, auto = underlay minus the mode's encapsulation ({scen})")
    c.add_argument("--placements", type=csv(str), metavar="P,..", help=f"placements, as for run ({scen})")
    c.add_argument("--tests", type=csv(str), metavar="T,..", help=f"tests, as for run ({scen})")
    c.add_argument("--streams", type=csv(int), metavar="N,..", help=f"parallel streams ({scen})")
    c.add_argument("--repeats", type=int, metavar="N",
                   help="the budget: at most N pairs per case (at least 14 for α = 0.05 over two cases; "
                        "default: the scenario's repeats, 48 in scenarios/ab.toml)")
    c.add_argument("--duration", type=float, metavar="S", help=f"seconds per test ({scen})")
    c.add_argument("--rate", metavar="RATE", help="underlay rate cap, e.g. 1gbit (default: the scenario's, if any)")
    add_poll_idle(c)
    c.add_argument("--results", default="results", metavar="DIR",
                   help="where runs go, and where --run's id is looked up (default: %(default)s)")
    add_outputs(c, "the run directory and every case's verdict")
    c.add_argument("-q", "--quiet", action="store_true", help="no progress line (default: one on stderr)")
    c.set_defaults(func=cmd_compare)


# The gates bring pandas and scipy, and compare the whole harness: imported by the commands,
# not by `--help`.

def cmd_gate(a) -> int:
    from harness.gates import baseline
    return baseline.gate_main(run_dir(a, a.run), a.baseline, junit=a.junit, summary=a.summary, fmt=a.format)


def cmd_baseline(a) -> int:
    from harness.gates import baseline
    baseline.baseline_main(run_dir(a, a.run), a.output)
    print(a.output)
    return 0


def cmd_trend(a) -> int:
    from harness.gates import trend
    return trend.trend_main(a.results_dir, scenario=a.scenario, alpha=a.alpha, fmt=a.format)


def cmd_compare(a) -> int:
    from harness.gates import compare
    from harness.run import ab
    req = ab.Request(base=a.base, head=a.head, repo=a.repo, run=a.run, scenario=a.scenario,
                     overrides=matrix_overrides(a), inject_ns=a.inject_ns, alpha=a.alpha,
                     tolerances=compare.parse_tolerances(a.tolerance, base={}) if a.tolerance else None,
                     measure_unchanged=a.measure_unchanged, poll_idle=a.poll_idle, results_dir=a.results,
                     quiet=a.quiet, junit=a.junit, summary=a.summary, fmt=a.format)
    return ab.compare(req, compare.Gate())
