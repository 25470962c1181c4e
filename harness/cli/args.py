"""What several commands share: exit codes, list arguments, the matrix and testbed flags
and how they become scenario overrides, testbed options and the run's settings."""

from __future__ import annotations

import argparse
import os
import re

from harness.core.errors import HarnessError
from harness.core.placements import PLACEMENTS
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
    p.add_argument("--namespace", metavar="NAME",
                   help="run in this existing namespace, creating and deleting only the run's labelled pods and "
                        "Services in it (down: remove those of dead runs there) (default: a fresh namespace per run)")
    if not run:
        p.add_argument("--older-than", type=duration, metavar="AGE",
                       help="also remove what runs of other machines left, when older than AGE (30m, 2h, 1d): "
                            "their owner cannot be checked from here (default: keep them)")
    if run:
        p.add_argument("--pod-cpu", metavar="REQ[:LIMIT]",
                       help="every pod's CPU request and limit (default: 500m:2)")
        p.add_argument("--pod-memory", metavar="REQ[:LIMIT]",
                       help="every pod's memory request and limit (default: 256Mi:1Gi)")
        p.add_argument("--tolerate", action="append", metavar="KEY[=VALUE][:EFFECT]",
                       help="let the pods onto nodes with this taint; repeatable (default: none: tainted nodes "
                            "are not picked)")
        p.add_argument("--image-pull-secret", action="append", metavar="NAME",
                       help="an image pull secret the pods carry, copied into the run's namespace from the "
                            "kubeconfig context's namespace or default (with --namespace: used there); "
                            "repeatable (default: none)")
        p.add_argument("--pod-ready-timeout", type=float, metavar="SECONDS",
                       help="how long every pod has to run, image pulls included, before the run stops "
                            "(default: 300)")
        p.add_argument("--nodes", type=csv(str), metavar="A,B[,..]",
                       help="the nodes to measure between, or all (default: the first Ready, schedulable ones by "
                            "name; --hosts N of them)")
        p.add_argument("--node-selector", action="append", metavar="KEY=VALUE",
                       help="only nodes with this label are candidates; repeatable, all must match; not with "
                            "nodes named (--nodes all takes every match) (default: every node)")
        p.add_argument("--across-zones", action="store_true",
                       help="one node per zone (label topology.kubernetes.io/zone), so every pair crosses zones; "
                            "refused where the candidates span fewer than two (default: off, zones not looked at)")
        p.add_argument("--same-node", action="store_true",
                       help="both pods of the pair on one node (the first candidate, or --nodes NAME): the pod "
                            "network's node-local path; host ends refused, so --modes cni (default: off, the pair "
                            "on two nodes)")
        p.add_argument("--port-base", type=port_base, metavar="N",
                       help="the tools' server ports, in the pods and their Services, from N up: 14 per pair "
                            "measured at once (default: the tools' own, 5201 iperf3, 19765-19766 qperf, 11111-11112 "
                            "sockperf, 5001 iperf, 2112-2113 irtt, 9000-9003 blast)")
        p.add_argument("--image", metavar="REF",
                       help="the tools image the pods run (default: localhost/overlaybench/tools:bookworm; "
                            "make tools-image builds it, make tools-archive writes it as an archive to load)")


def port_base(text: str) -> int:
    """--port-base: a whole number (its range is checked with the pairs measured at once)."""
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: not a port number") from None


def duration(text: str) -> float:
    """`90s`, `30m`, `2h`, `1d` (a bare number: seconds) → seconds."""
    m = re.fullmatch(r"(\d+(?:\.\d+)?)([smhd]?)", text.strip())
    if not m:
        raise argparse.ArgumentTypeError(f"{text!r}: not an age such as 30m, 2h or 1d")
    return float(m.group(1)) * {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}[m.group(2)]


def backend_of(a: argparse.Namespace) -> str | None:
    """--backend, or the one an --inventory or a --kubeconfig implies (registry.implied)."""
    b = a.backend or registry.implied(getattr(a, "inventory", None), getattr(a, "kubeconfig", None))
    for other in BACKENDS.values():             # a backend's own flags, given with another backend
        given = [f for f in other.flags if _given(a, f)]
        if given and b not in (None, other.name):
            raise HarnessError(f"--{given[0].replace('_', '-')} is the {other.name} backend's; this is --backend {b}")
    return b


def _given(a: argparse.Namespace, flag: str) -> bool:
    """Whether a flag was given (a number 0 is given; an unset switch is False)."""
    v = getattr(a, flag, None)
    return v is not None and v is not False and v != []


def _foreign_flags(a: argparse.Namespace) -> None:
    """No backend named or implied: a backend's own flag is refused unless the scenario file
    names that backend (so `--pod-cpu 1` never runs quietly on the lab)."""
    given = [(other.name, f) for other in BACKENDS.values() for f in other.flags if _given(a, f)]
    if not given:
        return
    from harness.run.scenario import Scenario, load      # not for `--help`
    path = getattr(a, "scenario", None)
    named = (load(path) if path else Scenario()).backend
    for name, flag in given:
        if name != named:
            raise HarnessError(f"--{flag.replace('_', '-')} is the {name} backend's; name it with --backend {name}"
                               + (" or --kubeconfig" if name == "kubernetes" else ""))


def overrides(a: argparse.Namespace) -> dict:
    """`run`'s flags as a scenario document: the matrix, the underlay and the testbed
    (--hosts is the lab's host count, or for a backend that picks its hosts, such as a
    cluster's nodes, a testbed option: how many; registry.picks_hosts)."""
    raw = matrix_overrides(a)
    backend = backend_of(a)
    resuming = getattr(a, "resume", None)      # the run's scenario, its backend among it, is stored
    if backend is None and not resuming:
        _foreign_flags(a)
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
                   node_count=getattr(a, "hosts", None) or 2, image=getattr(a, "image", None),
                   kube_namespace=getattr(a, "namespace", None), pod_cpu=getattr(a, "pod_cpu", None),
                   pod_memory=getattr(a, "pod_memory", None), tolerate=tuple(getattr(a, "tolerate", None) or ()),
                   pod_ready_timeout=getattr(a, "pod_ready_timeout", None),
                   pull_secrets=tuple(getattr(a, "image_pull_secret", None) or ()),
                   older_than=getattr(a, "older_than", None),
                   node_selector=tuple(getattr(a, "node_selector", None) or ()),
                   across_zones=getattr(a, "across_zones", False), same_node=getattr(a, "same_node", False),
                   port_base=getattr(a, "port_base", None))


def settings(a: argparse.Namespace):
    """The run's own settings (harness.run.session's RunSettings) from the flags given."""
    from harness.run.session import RunSettings  # the whole harness: not for `--help`
    return RunSettings(concurrent=getattr(a, "concurrent", False), poll_idle=getattr(a, "poll_idle", False),
                       halt_idle=getattr(a, "halt_idle", False))


def add_paths(p: argparse.ArgumentParser) -> None:
    """What `run` and `mtu` measure between: the modes, the MTUs, the placements, the pairs
    and the underlay's rate cap."""
    scen = "default: the scenario's"
    p.add_argument("--modes", type=csv(str), metavar="A,B",
                   help=f"native,fastdp,sleeve,... (overlaybench modes lists them; {scen}, built in: native,fastdp)")
    p.add_argument("--underlay-mtu", type=csv("mtu"), metavar="auto|N,..",
                   help=f"auto = the underlay's own MTU (a remote NIC's) ({scen}, built in: 1500)")
    p.add_argument("--overlay-mtu", type=csv("mtu"), metavar="auto|N,..",
                   help=f"auto = underlay minus the mode's encapsulation ({scen}, built in: auto)")
    p.add_argument("--placements", type=csv(str), metavar="P,..",
                   help=f"{','.join(PLACEMENTS)} (kubernetes: container-service is a pod to a ClusterIP "
                        f"Service in front of the far pod, same-node a pod to a second pod on its own node; "
                        f"{scen}, built in: host-host,container-container)")
    p.add_argument("--rate", metavar="RATE",
                   help="underlay rate cap, e.g. 1gbit (default: the scenario's [underlay] rate, else none)")
    p.add_argument("--pairs", type=csv(str), metavar="SPEC",
                   help="host pairs measured (as --schedule says): all, ring, star:HOST, or "
                        "CLIENT-SERVER,... by host name (lab hosts are h0, h1, ...) (default: the scenario's, "
                        "else all)")


def add_testbed(p: argparse.ArgumentParser) -> None:
    """The testbed flags of `run` and `mtu`: the backend and what each backend needs."""
    add_backend(p, help="netns: a local lab of namespaces; ssh: hosts of --inventory (--pair); "
                        "vagrant: the machines of a Vagrantfile (brought up if needed; --pair); "
                        "kubernetes: an existing cluster's nodes (--kubeconfig, --nodes) (default: the "
                        "scenario's [testbed] backend, else netns; --inventory implies ssh, --kubeconfig kubernetes)")
    p.add_argument("--vagrant-destroy", action="store_true",
                   help="vagrant destroy -f the machines after the run (default: leave them up for the next)")
    p.add_argument("--vagrant-provider", metavar="NAME",
                   help="docker (default, or $VAGRANT_DEFAULT_PROVIDER), libvirt, virtualbox")
    p.add_argument("--inventory", metavar="FILE",
                   help="hosts for the ssh backend (TOML; implies --backend ssh; default: the scenario's "
                        "[testbed] inventory or hosts)")
    p.add_argument("--pair", type=csv(str), metavar="A,B[,..]",
                   help="which inventory hosts, two or more, or all (default: the first two)")
    p.add_argument("--hosts", type=int, metavar="N", help="the lab's hosts, 2 (default) to 8: more than two share "
                                                          "a switch, and --pairs picks the pairs measured; on "
                                                          "kubernetes, how many nodes (default 2)")
    add_kube(p)
    p.add_argument("--lab-cpus", choices=["own", "scheduler"],
                   help="the lab's hosts each on CPUs of their own (default), or where the scheduler puts them")
    p.add_argument("--host-cpus", metavar="LIST",
                   help="ssh, vagrant: run the tools and daemons on these CPUs of every host whose inventory "
                        "names no cpus (taskset -c LIST, e.g. 2-3; default: unpinned)")
    p.add_argument("--containers", choices=["netns", "docker"],
                   help="container endpoints: network namespaces (default) or real Docker containers")
    add_host_keys(p, "trust hosts whose SSH key is not yet in known_hosts (a changed key is always refused)")
