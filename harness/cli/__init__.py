"""overlaybench's command line: parse, call the library, map HarnessError to exit 2."""

from __future__ import annotations

import argparse
import json
import logging
import os
import pathlib
import signal
import sys

from harness import __version__
from harness.core.errors import HarnessError

log = logging.getLogger("overlaybench")

EXIT_USAGE = 2
EXIT_FAILED_CASES = 3   # the run finished, but some cases failed (1 stays the gate's regression)


def _csv(kind):
    def parse(text: str):
        items = [x.strip() for x in text.split(",") if x.strip()]
        if not items:
            raise argparse.ArgumentTypeError("empty list")
        if kind is int:
            try:
                return [int(x) for x in items]
            except ValueError:
                raise argparse.ArgumentTypeError(f"{text!r}: expected whole numbers separated by commas") from None
        if kind == "mtu":
            try:
                return [x if x == "auto" else int(x) for x in items]
            except ValueError:
                raise argparse.ArgumentTypeError(f"{text!r}: expected auto or whole numbers separated by commas") from None
        return items
    return parse


def _overrides(a: argparse.Namespace) -> dict:
    m = {}
    for flag, key in (("modes", "modes"), ("underlay_mtu", "underlay_mtu"), ("overlay_mtu", "overlay_mtu"),
                      ("placements", "placements"), ("tests", "tests"), ("streams", "streams"),
                      ("repeats", "repeats"), ("duration", "duration")):
        v = getattr(a, flag)
        if v is not None:
            m[key] = v
    raw = {"matrix": m} if m else {}
    if a.rate is not None:
        raw["underlay"] = {"rate": a.rate}
    backend = a.backend or ("ssh" if a.inventory else None)
    tb = {k: v for k, v in (("backend", backend), ("pair", a.pair), ("containers", a.containers),
                            ("inventory", a.inventory and os.path.abspath(a.inventory))) if v is not None}
    if tb:
        raw["testbed"] = tb
    return raw


def _options(a: argparse.Namespace):
    from harness.testbeds.base import Options
    vdir = getattr(a, "vagrant_dir", None)
    return Options(accept_new_host_keys=getattr(a, "accept_new_host_keys", False),
                   concurrent=getattr(a, "concurrent", False),
                   vagrant_dir=os.path.abspath(vdir) if vdir else None,
                   vagrant_destroy=getattr(a, "vagrant_destroy", False),
                   vagrant_provider=getattr(a, "vagrant_provider", None))


def _inventory_hosts(a: argparse.Namespace) -> list:
    """(name, SshHost) for every host of --inventory."""
    from harness.testbeds import registry as backends
    return backends.inventory_ssh_hosts(a.inventory, _options(a))


# ---------------------------------------------------------------- commands

def cmd_doctor(a) -> int:
    from harness.cli import doctor
    checks = doctor.all_checks()
    if a.inventory:
        checks += doctor.remote_checks(_inventory_hosts(a))
    ok = all(c.ok for c in checks if c.required)
    if a.format == "json":
        import dataclasses
        print(json.dumps({"ok": ok, "checks": [dataclasses.asdict(c) for c in checks]}, indent=2))
        return 0 if ok else 1
    print(doctor.render(checks))
    if not a.inventory:
        print("backends: netns (this machine, checked above); ssh: real hosts, checked with "
              "`overlaybench doctor --inventory FILE`")
    return 0 if ok else 1


def cmd_up(a) -> int:
    from harness.testbeds.lab import Lab
    lab = Lab.create(a.underlay_mtu, a.rate, persistent=True)
    f = lab.facts()
    print(f"lab {lab.prefix} up: namespaces {', '.join(s.host.netns + ', ' + s.container.netns for s in lab.sides)}")
    for h, addrs in f["addresses"].items():
        print(f"  {h}: " + ", ".join(f"{k} {v}" for k, v in addrs.items()))
    print("remove it with: overlaybench down")
    return 0


def cmd_down(a) -> int:
    from harness.testbeds import registry as backends
    removed, kept = backends.down(a.backend, _options(a), inventory=a.inventory, force=a.force)
    for r in removed:
        print(f"removed {r}")
    for k in kept:
        print(f"left {k}; --force removes it too")
    if not removed and not kept:
        print("nothing to remove")
    return 0


def cmd_run(a) -> int:
    from harness.run import session
    store = session.run(scenario_path=a.scenario, overrides=_overrides(a), resume=a.resume,
                        results_dir=a.results, quiet=a.quiet, options=_options(a))
    from harness.analysis import summary, tablefmt
    df = _load(store.path)
    table = summary.summary_table(df)
    if a.format == "json":
        print(json.dumps(_run_json(store, table), indent=2))
    else:
        print(store.path)
        print(tablefmt.format_table(table))
    failed = df[df["metric"] == "failed"][["case", "repeat"]].drop_duplicates()
    if len(failed):
        total = len(df[["case", "repeat"]].drop_duplicates())
        print(f"overlaybench: {len(failed)} of {total} cases failed (their reasons are in the table above and in "
              f"`overlaybench show {store.path} --format csv`)", file=sys.stderr)
        return EXIT_FAILED_CASES
    return 0


def _load(run):
    from harness.run import results
    return results.load(run)


def _run_json(store, table) -> dict:
    """`run --format json`: where the run is, how it ended, and its summary rows."""
    from harness.analysis import tablefmt
    meta = store.read_meta()
    return {"run_dir": str(store.path), "run_id": meta.get("run_id"), "status": meta.get("status"),
            "start": meta.get("start"), "end": meta.get("end"), "cases_planned": meta.get("cases_planned"),
            "summary": json.loads(tablefmt.frame_as(table, "json"))}


def cmd_show(a) -> int:
    from harness.analysis import tablefmt
    if a.raw:
        fmt = "csv" if a.format == "table" else a.format
        print(tablefmt.format_raw(_load(a.run), fmt))
    else:
        print(tablefmt.format_summary(_load(a.run), a.format))
    return 0


def cmd_report(a) -> int:
    from harness.report import render
    out = render.render([pathlib.Path(r) for r in a.runs], a.output)
    print(out)
    return 0


def cmd_gate(a) -> int:
    from harness.gates import baseline as gate
    return gate.gate_main(a.run, a.baseline, junit=a.junit, summary=a.summary, fmt=a.format)


def cmd_compare(a) -> int:
    from harness.gates import compare
    m = {k: getattr(a, k) for k in ("modes", "underlay_mtu", "overlay_mtu", "placements", "tests", "streams",
                                     "repeats", "duration") if getattr(a, k) is not None}
    raw = ({"matrix": m} if m else {}) | ({"underlay": {"rate": a.rate}} if a.rate else {})
    return compare.compare_main(a.base, run=a.run, repo=a.repo, head=a.head, scenario_path=a.scenario,
                                overrides=raw, inject_ns=a.inject_ns, alpha=a.alpha,
                                tolerances=compare.parse_tolerances(a.tolerance), results_dir=a.results,
                                junit=a.junit, summary=a.summary, fmt=a.format, quiet=a.quiet,
                                measure_unchanged=a.measure_unchanged)


def cmd_baseline(a) -> int:
    from harness.gates import baseline as gate
    gate.baseline_main(a.run, a.output)
    print(a.output)
    return 0


# ---------------------------------------------------------------- parser

class _Parser(argparse.ArgumentParser):
    """Usage errors in one line, like every other bad input (exit 2)."""

    def error(self, message: str):
        self.exit(EXIT_USAGE, f"{self.prog}: {message} (see {self.prog} --help)\n")


def parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="overlaybench",
        description="Measure what a container overlay costs: native vs kernel VXLAN vs a userspace sleeve, "
                    "over mode × MTU × placement, on a local lab of network namespaces (default) or two "
                    "real hosts over SSH (run --backend ssh --inventory FILE).")
    p.add_argument("--version", action="version", version=f"overlaybench {__version__}")
    p.add_argument("-v", "--verbose", action="count", default=0, help="log more (-vv: every command)")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    d = sub.add_parser("doctor", help="check kernel features, tools and the sleeve build (here, or on "
                                         "remote hosts with --inventory)")
    d.add_argument("--inventory", metavar="FILE", help="also check every host of this inventory over SSH")
    d.add_argument("--accept-new-host-keys", action="store_true",
                   help="trust hosts whose SSH key is not yet in known_hosts (a changed key is always refused)")
    d.add_argument("--format", choices=["text", "json"], default="text")
    d.set_defaults(func=cmd_doctor)

    u = sub.add_parser("up", help="bring a local lab up and leave it (remove with `down`)")
    u.add_argument("--underlay-mtu", type=int, default=1500, metavar="N")
    u.add_argument("--rate", help="tbf rate cap on the underlay, e.g. 1gbit")
    u.set_defaults(func=cmd_up)

    dn = sub.add_parser("down", help="remove labs (or, with --inventory, remote testbeds) left by killed runs or `up`")
    dn.add_argument("--force", action="store_true",
                    help="also remove what a running overlaybench (or another machine's) owns")
    dn.add_argument("--inventory", metavar="FILE", help="remove leftovers on this inventory's hosts over SSH")
    dn.add_argument("--backend", choices=["netns", "ssh", "vagrant"],
                    help="vagrant: destroy the Vagrantfile's machines (vagrant destroy -f)")
    dn.add_argument("--vagrant-dir", metavar="DIR", help="where the Vagrantfile is (default: the repository)")
    dn.add_argument("--accept-new-host-keys", action="store_true", help=argparse.SUPPRESS)
    dn.set_defaults(func=cmd_down)

    r = sub.add_parser("run", help="run a scenario; prints the run directory and a table",
                       description="Run a scenario's matrix. Flags override the file's [matrix].")
    r.add_argument("scenario", nargs="?", help="scenario TOML (default: built-in: native,fastdp at 1500)")
    r.add_argument("--modes", type=_csv(str), metavar="A,B", help="native,fastdp,sleeve,...")
    r.add_argument("--underlay-mtu", type=_csv("mtu"), metavar="auto|N,..",
                   help="auto = the underlay's own MTU (a remote NIC's)")
    r.add_argument("--overlay-mtu", type=_csv("mtu"), metavar="auto|N,..",
                   help="auto = underlay minus the mode's encapsulation")
    r.add_argument("--placements", type=_csv(str), metavar="P,..",
                   help="host-host,host-container,container-container")
    r.add_argument("--tests", type=_csv(str), metavar="T,..",
                   help="iperf3.tcp,iperf3.udp,qperf.tcp_bw,qperf.tcp_lat,qperf.udp_bw,qperf.udp_lat,ping.flood")
    r.add_argument("--streams", type=_csv(int), metavar="N,..", help="parallel streams (iperf3 -P)")
    r.add_argument("--repeats", type=int, metavar="N")
    r.add_argument("--duration", type=float, metavar="S", help="seconds per test")
    r.add_argument("--rate", metavar="RATE", help="underlay rate cap, e.g. 1gbit")
    r.add_argument("--backend", choices=["netns", "ssh", "vagrant"],
                   help="netns: a local lab of namespaces (default); ssh: two hosts of --inventory; "
                        "vagrant: the two machines of a Vagrantfile (brought up if needed)")
    r.add_argument("--vagrant-dir", metavar="DIR", help="where the Vagrantfile is (default: the repository)")
    r.add_argument("--vagrant-destroy", action="store_true", help="vagrant destroy -f the machines after the run")
    r.add_argument("--vagrant-provider", metavar="NAME",
                   help="docker (default, or $VAGRANT_DEFAULT_PROVIDER), libvirt, virtualbox")
    r.add_argument("--inventory", metavar="FILE", help="hosts for the ssh backend (TOML; implies --backend ssh)")
    r.add_argument("--pair", type=_csv(str), metavar="A,B", help="which two inventory hosts (default: the first two)")
    r.add_argument("--containers", choices=["netns", "docker"],
                   help="container endpoints: network namespaces (default) or real Docker containers")
    r.add_argument("--accept-new-host-keys", action="store_true",
                   help="trust hosts whose SSH key is not yet in known_hosts (a changed key is always refused)")
    r.add_argument("--resume", metavar="RUN", help="finish an interrupted run (skips what it has)")
    r.add_argument("--concurrent", action="store_true",
                   help="measure even while another run measures on this machine (both runs' ratios suffer; "
                        "default: wait for it)")
    r.add_argument("--results", default="results", metavar="DIR", help="where runs go (default: results)")
    r.add_argument("-q", "--quiet", action="store_true", help="no progress line")
    r.add_argument("--format", choices=["table", "json"], default="table",
                   help="json: the run directory, its status and the summary rows as one JSON object")
    r.set_defaults(func=cmd_run)

    s = sub.add_parser("show", help="print a run's seed-style table")
    s.add_argument("run", help="run directory or id")
    s.add_argument("--format", choices=["table", "csv", "json"], default="table")
    s.add_argument("--raw", action="store_true",
                   help="every measurement line instead of the summary (csv unless --format json)")
    s.set_defaults(func=cmd_show)

    rp = sub.add_parser("report", help="render one self-contained HTML report of one or more runs")
    rp.add_argument("runs", nargs="+", metavar="RUN")
    rp.add_argument("-o", "--output", default=None, metavar="FILE",
                    help="default: reports/<run-id>.html")
    rp.set_defaults(func=cmd_report)

    g = sub.add_parser("gate", help="exit 1 if RUN regressed significantly against a baseline")
    g.add_argument("run")
    g.add_argument("--baseline", required=True, metavar="FILE")
    g.add_argument("--junit", metavar="FILE", help="write JUnit XML")
    g.add_argument("--summary", metavar="FILE", help="write a markdown summary (e.g. $GITHUB_STEP_SUMMARY)")
    g.add_argument("--format", choices=["text", "json"], default="text", help="json: every case's verdict")
    g.set_defaults(func=cmd_gate)

    c = sub.add_parser(
        "compare", help="the sleeve at a base ref and at the working tree, interleaved in one run; "
                        "exit 1 if head is significantly slower",
        description="Build overlay/sleeve at --base REF and from the working tree (or --head REF), deploy "
                    "both in turn within every repeat of one run, and judge head against base repeat by repeat "
                    "(one-sided Wilcoxon signed-rank on per-repeat log-ratios, then the tolerance). Matrix "
                    "flags override the scenario (default scenarios/ab.toml).")
    c.add_argument("scenario", nargs="?", help="scenario TOML whose modes are compared (sleeve modes only)")
    c.add_argument("--base", metavar="REF", help="git ref of the base build, e.g. a merge base or HEAD~1")
    c.add_argument("--head", metavar="REF", help="git ref of the head build (default: the working tree)")
    c.add_argument("--repo", metavar="DIR", help="the git repository to build from (default: this project)")
    c.add_argument("--run", metavar="RUN", help="judge a finished A/B run instead of measuring")
    c.add_argument("--measure-unchanged", action="store_true",
                   help="measure even when base and head have the same sleeve source (an A/A run)")
    c.add_argument("--inject-ns", type=int, metavar="N",
                   help="add --calibrate-ns N to the head arm: a known slowdown, to measure the gate's power")
    c.add_argument("--alpha", type=float, default=0.05, metavar="A", help="significance level (default 0.05)")
    c.add_argument("--tolerance", action="append", metavar="METRIC=FRACTION",
                   help="allowed change before a significant one fails, e.g. throughput_bps=0.05 "
                        "(defaults: throughput_bps 0.10, latency_us 0.15); repeatable")
    c.add_argument("--modes", type=_csv(str), metavar="A,B", help="sleeve modes to compare (each gets two arms)")
    c.add_argument("--underlay-mtu", type=_csv(int), metavar="N,..")
    c.add_argument("--overlay-mtu", type=_csv("mtu"), metavar="auto|N,..")
    c.add_argument("--placements", type=_csv(str), metavar="P,..")
    c.add_argument("--tests", type=_csv(str), metavar="T,..")
    c.add_argument("--streams", type=_csv(int), metavar="N,..")
    c.add_argument("--repeats", type=int, metavar="N", help="pairs per case; at least 5 for α = 0.05")
    c.add_argument("--duration", type=float, metavar="S", help="seconds per test")
    c.add_argument("--rate", metavar="RATE", help="underlay rate cap, e.g. 1gbit")
    c.add_argument("--results", default="results", metavar="DIR", help="where runs go (default: results)")
    c.add_argument("--junit", metavar="FILE", help="write JUnit XML")
    c.add_argument("--summary", metavar="FILE", help="write a markdown summary (e.g. $GITHUB_STEP_SUMMARY)")
    c.add_argument("--format", choices=["text", "json"], default="text",
                   help="json: the run directory and every case's verdict")
    c.add_argument("-q", "--quiet", action="store_true", help="no progress line")
    c.set_defaults(func=cmd_compare)

    b = sub.add_parser("baseline", help="write a gate baseline from a run")
    b.add_argument("run")
    b.add_argument("-o", "--output", required=True, metavar="FILE")
    b.set_defaults(func=cmd_baseline)
    return p


def _sigterm(signum, frame):
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    level = logging.WARNING - 10 * min(args.verbose, 2)
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s")
    signal.signal(signal.SIGTERM, _sigterm)
    try:
        return args.func(args)
    except HarnessError as e:
        print(f"overlaybench: {e}", file=sys.stderr)
        return EXIT_USAGE
    except BrokenPipeError:
        # `overlaybench show RUN | head`: the reader left; say nothing more.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except KeyboardInterrupt:
        print("overlaybench: interrupted; the lab was removed and measurements so far are kept",
              file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
