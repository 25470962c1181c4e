"""What several commands share: exit codes, list arguments, the matrix and testbed flags
and how they become scenario overrides, testbed options and the run's settings."""

from __future__ import annotations

import argparse
import os

from harness.core.errors import HarnessError
from harness.testbeds import registry
from harness.testbeds.registry import BACKENDS

EXIT_REGRESSION = 1     # a gate's verdict (gate, compare, trend), and doctor's missing part
EXIT_USAGE = 2
EXIT_FAILED_CASES = 3   # the run finished, but some cases failed (1 stays the gate's regression)
EXIT_UNDECIDED = 4      # compare: harness/gates/render.py's, named here for `--help` (not imported: pandas)
EXIT_INTERRUPTED = 130
MATRIX_FLAGS = ("modes", "underlay_mtu", "overlay_mtu", "placements", "tests", "streams", "repeats", "duration",
                "pairs", "schedule")


def csv(kind):
    """An argparse type: a comma-separated list of str, int or MTUs ("auto" or a number)."""
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


def add_run_arg(p: argparse.ArgumentParser, dest: str = "run", nargs=None) -> None:
    """RUN (a run directory or id) and --results, where an id is looked for."""
    p.add_argument(dest, nargs=nargs, metavar="RUN",
                   help="a run directory, or a run id looked up in --results DIR")
    p.add_argument("--results", metavar="DIR",
                   help="where a run id is looked up (default: ./results, then the checkout's results/; "
                        "a directory path is used as it is)")


def run_dir(a: argparse.Namespace, run: str):
    """The run directory RUN names: its path, or its id under --results (else the default
    results directories); a HarnessError naming every directory tried when there is none."""
    from harness.results import resolve_run   # the results' schema: not for `--help`
    return resolve_run(run, a.results)


def add_backend(p: argparse.ArgumentParser, help: str) -> None:
    p.add_argument("--backend", choices=list(BACKENDS), help=help)
    p.add_argument("--vagrant-dir", metavar="DIR", help="where the Vagrantfile is (default: the repository)")


def add_poll_idle(p: argparse.ArgumentParser, halt: bool = False) -> None:
    idle = p.add_mutually_exclusive_group() if halt else p
    idle.add_argument("--poll-idle", action="store_true",
                      help="the lab: keep this machine's idle CPUs polling instead of halting for the whole "
                           "run (a PM QoS request, gone when the run ends)" + ("" if halt else ", for steadier latency"))
    if halt:
        idle.add_argument("--halt-idle", action="store_true",
                          help="the lab: let idle CPUs halt during latency tests too (by default they poll while "
                               "a latency test runs, so no mode's latency includes waking a halted CPU)")


def add_host_keys(p: argparse.ArgumentParser, help: str | None = None) -> None:
    p.add_argument("--accept-new-host-keys", action="store_true", help=help or argparse.SUPPRESS)


def matrix_overrides(a: argparse.Namespace) -> dict:
    """The matrix flags given, and --rate, as a scenario document's tables."""
    m = {k: getattr(a, k) for k in MATRIX_FLAGS if getattr(a, k, None) is not None}
    raw = {"matrix": m} if m else {}
    if a.rate is not None:
        raw["underlay"] = {"rate": a.rate}
    return raw


def add_kube(p: argparse.ArgumentParser, run: bool = True) -> None:
    """The kubernetes backend's flags (`run`, and `down` without the node and image ones)."""
    p.add_argument("--kubeconfig", metavar="FILE",
                   help="the cluster for the kubernetes backend (implies --backend kubernetes; default: "
                        "$KUBECONFIG or ~/.kube/config)")
    p.add_argument("--context", metavar="NAME", help="the kubeconfig's context (default: its current one)")
    if run:
        p.add_argument("--nodes", type=csv(str), metavar="A,B[,..]",
                       help="the nodes to measure between (default: the first Ready, schedulable ones by name; "
                            "--hosts N of them)")
        p.add_argument("--image", metavar="REF",
                       help="the tools image the pods run (default: overlaybench/tools:bookworm; "
                            "images/build.sh tools-archive writes it as an archive to push or load)")


def backend_of(a: argparse.Namespace) -> str | None:
    """--backend, or the one an --inventory or a --kubeconfig implies (registry.implied)."""
    b = a.backend or registry.implied(getattr(a, "inventory", None), getattr(a, "kubeconfig", None))
    for other in BACKENDS.values():             # a backend's own flags, given with another backend
        given = [f for f in other.flags if getattr(a, f, None)]
        if given and b not in (None, other.name):
            raise HarnessError(f"--{given[0]} is the {other.name} backend's; this is --backend {b}")
    return b


def overrides(a: argparse.Namespace) -> dict:
    """`run`'s flags as a scenario document: the matrix, the underlay and the testbed
    (--hosts is the lab's host count, or for a backend that picks its hosts, such as a
    cluster's nodes, a testbed option: how many; registry.picks_hosts)."""
    raw = matrix_overrides(a)
    backend = backend_of(a)
    resuming = getattr(a, "resume", None)      # the run's scenario, its backend among it, is stored
    if a.modes is None and not resuming and registry.has_modes_hook(backend):
        # the backend may measure other modes than the scenario's (registry.modes_for)
        from harness.run.scenario import Scenario, load      # not for `--help`
        path = getattr(a, "scenario", None)
        modes = registry.modes_for(backend, load(path) if path else Scenario(), path)
        if modes:
            raw.setdefault("matrix", {})["modes"] = modes
    tb = {k: v for k, v in (("backend", None if resuming else backend), ("pair", a.pair), ("containers", a.containers),
                            ("lab_hosts", None if registry.picks_hosts(backend) else a.hosts),
                            ("lab_cpus", getattr(a, "lab_cpus", None)),
                            ("host_cpus", getattr(a, "host_cpus", None)),
                            ("inventory", a.inventory and os.path.abspath(a.inventory))) if v is not None}
    if tb:
        raw["testbed"] = tb
    return raw


def options(a: argparse.Namespace):
    """The testbed's Options (harness.bed) from the flags given."""
    from harness.bed import Options  # the testbeds' contract: not for `--help`
    vdir = getattr(a, "vagrant_dir", None)
    return Options(accept_new_host_keys=getattr(a, "accept_new_host_keys", False),
                   vagrant_dir=os.path.abspath(vdir) if vdir else None,
                   vagrant_destroy=getattr(a, "vagrant_destroy", False),
                   vagrant_provider=getattr(a, "vagrant_provider", None),
                   kubeconfig=os.path.abspath(a.kubeconfig) if getattr(a, "kubeconfig", None) else None,
                   kube_context=getattr(a, "context", None), nodes=tuple(getattr(a, "nodes", None) or ()),
                   node_count=getattr(a, "hosts", None) or 2, image=getattr(a, "image", None))


def settings(a: argparse.Namespace):
    """The run's own settings (harness.run.session's RunSettings) from the flags given."""
    from harness.run.session import RunSettings  # the whole harness: not for `--help`
    return RunSettings(concurrent=getattr(a, "concurrent", False), poll_idle=getattr(a, "poll_idle", False),
                       halt_idle=getattr(a, "halt_idle", False))
