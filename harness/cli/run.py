"""`overlaybench run`: a scenario's matrix measured; prints the run directory and its table."""

from __future__ import annotations

import argparse
import json
import sys

from harness.cli.args import (EXIT_FAILED_CASES, add_backend, add_host_keys, add_kube, add_poll_idle, csv, options,
                              overrides, settings)
from harness.core.pairs import SCHEDULES
from harness.core.placements import PLACEMENTS

# harness/tools' TOOLS names, as --tests lists them (importing the tools is not for `--help`;
# tests/unit/test_cli.py holds the two lists equal)
TEST_NAMES = ("iperf3.tcp", "iperf3.udp", "iperf3.pps64", "iperf3.pps256", "iperf3.pps1400", "qperf.tcp_bw",
              "qperf.tcp_lat", "qperf.udp_bw", "qperf.udp_lat", "sockperf.pingpong", "sockperf.pingpong_tcp",
              "ping.flood", "load.bounceback", "iperf.crr", "iperf3.udp_sweep64", "iperf3.udp_sweep1400",
              "irtt.udp", "udp.pps64", "udp.pps1400", "udp.ndr64", "udp.pdr64")


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
    add_backend(r, help="netns: a local lab of namespaces; ssh: hosts of --inventory (--pair); "
                        "vagrant: the machines of a Vagrantfile (brought up if needed; --pair); "
                        "kubernetes: an existing cluster's nodes (--kubeconfig, --nodes) (default: the "
                        "scenario's [testbed] backend, else netns; --inventory implies ssh, --kubeconfig kubernetes)")
    r.add_argument("--vagrant-destroy", action="store_true",
                   help="vagrant destroy -f the machines after the run (default: leave them up for the next)")
    r.add_argument("--vagrant-provider", metavar="NAME",
                   help="docker (default, or $VAGRANT_DEFAULT_PROVIDER), libvirt, virtualbox")
    r.add_argument("--inventory", metavar="FILE",
                   help="hosts for the ssh backend (TOML; implies --backend ssh; default: the scenario's "
                        "[testbed] inventory or hosts)")
    r.add_argument("--pair", type=csv(str), metavar="A,B[,..]",
                   help="which inventory hosts, two or more, or all (default: the first two)")
    r.add_argument("--hosts", type=int, metavar="N", help="the lab's hosts, 2 (default) to 8: more than two share "
                                                          "a switch, and --pairs picks the pairs measured; on "
                                                          "kubernetes, how many nodes (default 2)")
    add_kube(r)
    r.add_argument("--lab-cpus", choices=["own", "scheduler"],
                   help="the lab's hosts each on CPUs of their own (default), or where the scheduler puts them")
    r.add_argument("--host-cpus", metavar="LIST",
                   help="ssh, vagrant: run the tools and daemons on these CPUs of every host whose inventory "
                        "names no cpus (taskset -c LIST, e.g. 2-3; default: unpinned)")
    r.add_argument("--containers", choices=["netns", "docker"],
                   help="container endpoints: network namespaces (default) or real Docker containers")
    add_host_keys(r, "trust hosts whose SSH key is not yet in known_hosts (a changed key is always refused)")
    r.add_argument("--resume", metavar="RUN",
                   help="finish an interrupted run, its directory or id (skips what it has; default: a new run)")
    r.add_argument("--concurrent", action="store_true",
                   help="measure even while another run measures on this machine (both runs' ratios suffer; "
                        "default: wait for it)")
    add_poll_idle(r, halt=True)
    r.add_argument("--results", default="results", metavar="DIR", help="where runs go (default: %(default)s)")
    r.add_argument("-q", "--quiet", action="store_true", help="no progress line (default: one on stderr)")
    r.add_argument("--format", choices=["table", "json"], default="table",
                   help="table: the run directory, then the table; json: the run directory, its status and "
                        "the summary rows as one JSON object (default: %(default)s)")
    r.set_defaults(func=cmd_run)


def add_matrix(p: argparse.ArgumentParser) -> None:
    """The matrix flags of `run` (compare has its own: its modes are sleeve modes only)."""
    scen = "default: the scenario's"
    p.add_argument("--modes", type=csv(str), metavar="A,B",
                   help=f"native,fastdp,sleeve,... (overlaybench modes lists them; {scen}, built in: native,fastdp)")
    p.add_argument("--underlay-mtu", type=csv("mtu"), metavar="auto|N,..",
                   help=f"auto = the underlay's own MTU (a remote NIC's) ({scen}, built in: 1500)")
    p.add_argument("--overlay-mtu", type=csv("mtu"), metavar="auto|N,..",
                   help=f"auto = underlay minus the mode's encapsulation ({scen}, built in: auto)")
    p.add_argument("--placements", type=csv(str), metavar="P,..",
                   help=f"{','.join(PLACEMENTS)} (kubernetes: container-service is a pod to a ClusterIP "
                        f"Service in front of the far pod; {scen}, built in: host-host,container-container)")
    p.add_argument("--tests", type=csv(str), metavar="T,..",
                   help=f"{','.join(TEST_NAMES)} ({scen}, built in: iperf3.tcp,qperf.tcp_lat)")
    p.add_argument("--streams", type=csv(int), metavar="N,..",
                   help="parallel streams of iperf3.tcp and iperf3.udp (iperf3 -P), 1..128; "
                        f"load.bounceback's working-load streams each way, 1..16 ({scen}, built in: 1)")
    p.add_argument("--repeats", type=int, metavar="N",
                   help=f"how many times every case is measured ({scen}, built in: 3)")
    p.add_argument("--duration", type=float, metavar="S", help=f"seconds per test ({scen}, built in: 5)")
    p.add_argument("--rate", metavar="RATE",
                   help="underlay rate cap, e.g. 1gbit (default: the scenario's [underlay] rate, else none)")
    p.add_argument("--pairs", type=csv(str), metavar="SPEC",
                   help="host pairs measured (as --schedule says): all, ring, star:HOST, or "
                        "CLIENT-SERVER,... by host name (lab hosts are h0, h1, ...) (default: the scenario's, "
                        "else all)")
    p.add_argument("--schedule", choices=SCHEDULES,
                   help="how pairs share the wire: one at a time, disjoint pairs at once "
                        "(round-robin rounds), or every pair at once (aggregate and fairness) (default: the "
                        f"scenario's, else {SCHEDULES[0]})")


def cmd_run(a) -> int:
    from harness.run import session  # the whole harness: not for `--help`
    store = session.run(scenario_path=a.scenario, overrides=overrides(a), resume=a.resume,
                        results_dir=a.results, quiet=a.quiet, options=options(a), settings=settings(a))
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
                          "summary": json.loads(tablefmt.frame_as(table, "json"))}, indent=2))
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
