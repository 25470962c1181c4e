"""`overlaybench run`: a scenario's matrix measured; prints the run directory and its table."""

from __future__ import annotations

import argparse
import json
import sys

from harness.cli.args import (EXIT_FAILED_CASES, add_paths, add_poll_idle, add_testbed, csv, options, overrides,
                              settings)
from harness.cli import mtu
from harness.core.pairs import SCHEDULES

# harness/tools' TOOLS names, as --tests lists them (importing the tools is not for `--help`;
# tests/unit/test_cli.py holds the two lists equal)
TEST_NAMES = ("iperf3.tcp", "iperf3.udp", "iperf3.pps64", "iperf3.pps256", "iperf3.pps1400", "qperf.tcp_bw",
              "qperf.tcp_lat", "qperf.udp_bw", "qperf.udp_lat", "sockperf.pingpong", "sockperf.pingpong_tcp",
              "ping.flood", "load.bounceback", "load.irtt", "load.sockperf", "iperf.crr", "iperf3.udp_sweep64", "iperf3.udp_sweep1400",
              "irtt.udp", "udp.pps64", "udp.pps1400", "packet.pps64", "packet.pps1400", "udp.ndr64",
              "udp.pdr64")


def add(sub) -> None:
    r = sub.add_parser("run", help="run a scenario; prints the run directory and a table",
                       description="Run a scenario's matrix: every mode × underlay MTU × overlay MTU × placement "
                                   "× test × streams, repeated, on a testbed made for the run and removed after "
                                   "it. Prints the run directory, then its table. Flags override the file's "
                                   "[matrix] (and [underlay], [testbed]); without a file the built-in scenario "
                                   "runs: native,fastdp at underlay MTU 1500, host-host and container-container, "
                                   "iperf3.tcp and qperf.tcp_lat, 3 repeats of 5 s. Exit 3 when the run finished "
                                   "but some cases failed.")
    r.add_argument("scenario", nargs="?",
                   help="scenario TOML (default: the built-in one: native,fastdp at underlay MTU 1500)")
    add_matrix(r)
    add_testbed(r)
    r.add_argument("--resume", metavar="RUN",
                   help="finish an interrupted run, its directory or id (skips what it has; default: a new run)")
    r.add_argument("--concurrent", action="store_true",
                   help="measure even while another run measures on this machine (both runs' ratios suffer; "
                        "default: wait for it)")
    add_poll_idle(r, halt=True)
    r.add_argument("--mtu-check", action="store_true",
                   help="first run the MTU doctor (`overlaybench mtu`) on the run's modes, MTUs, placements and "
                        "pairs, print its verdicts on stderr and measure anyway (default: no check)")
    r.add_argument("--results", default="results", metavar="DIR", help="where runs go (default: %(default)s)")
    r.add_argument("-q", "--quiet", action="store_true", help="no progress line (default: one on stderr)")
    r.add_argument("--format", choices=["table", "json"], default="table",
                   help="table: the run directory, then the table; json: the run directory, its status and "
                        "the summary rows as one JSON object (default: %(default)s)")
    r.set_defaults(func=cmd_run)


def add_matrix(p: argparse.ArgumentParser) -> None:
    """The matrix flags of `run` (compare has its own: its modes are sleeve modes only)."""
    scen = "default: the scenario's"
    add_paths(p)
    p.add_argument("--tests", type=csv(str), metavar="T,..",
                   help=f"{','.join(TEST_NAMES)} ({scen}, built in: iperf3.tcp,qperf.tcp_lat)")
    p.add_argument("--streams", type=csv(int), metavar="N,..",
                   help="parallel streams of iperf3.tcp and iperf3.udp (iperf3 -P), 1..128; "
                        f"load.bounceback's, load.irtt's and load.sockperf's working-load streams each way, 1..16 ({scen}, built in: 1)")
    p.add_argument("--repeats", type=int, metavar="N",
                   help=f"how many times every case is measured ({scen}, built in: 3)")
    p.add_argument("--duration", type=float, metavar="S", help=f"seconds per test ({scen}, built in: 5)")
    p.add_argument("--schedule", choices=SCHEDULES,
                   help="how pairs share the wire: one at a time, disjoint pairs at once "
                        "(round-robin rounds), or every pair at once (aggregate and fairness) (default: the "
                        f"scenario's, else {SCHEDULES[0]})")


def cmd_run(a) -> int:
    from harness.run import session  # the whole harness: not for `--help`
    checked = mtu.check(a) if a.mtu_check else None
    store = session.run(scenario_path=a.scenario, overrides=overrides(a), resume=a.resume,
                        results_dir=a.results, quiet=a.quiet, options=options(a), settings=settings(a),
                        meta={"mtu_check": checked} if checked is not None else None)
    # pandas comes with the table, after the run: `--help` and bad input do not wait for it.
    from harness.analysis import summary, tablefmt
    from harness import results
    df = results.load(store.path)
    table = summary.summary_table(df)
    if a.format == "json":
        meta = store.read_meta()
        print(json.dumps({"run_dir": str(store.path), "run_id": meta.get("run_id"), "status": meta.get("status"),
                          "start": meta.get("start"), "end": meta.get("end"),
                          "cases_planned": meta.get("cases_planned"),
                          "summary": json.loads(tablefmt.frame_as(table, "json")),
                          **({"mtu_check": checked} if checked is not None else {})}, indent=2))
    else:
        print(store.path)
        print(tablefmt.format_table(table))
        for line in tablefmt.run_notes(store.read_meta()):
            print(line)
    failed = df[df["metric"] == "failed"][["case", "repeat"]].drop_duplicates()
    if len(failed):
        total = len(df[["case", "repeat"]].drop_duplicates())
        print(f"overlaybench: {len(failed)} of {total} cases failed (their reasons are in the table above and in "
              f"`overlaybench show {store.path} --format csv`)", file=sys.stderr)
        return EXIT_FAILED_CASES
    return 0
