"""What a run on a cluster needs, decided from its scenario and flags before anything is made:
the modes it may measure, which nodes are candidates and how the pairs sit on them (the node
plan: --node-selector, --across-zones, --same-node), whether it has a host end (hostNetwork
pods), a service end (Services) or a local end (a second pod-network pod per node),
whether it pings (NET_RAW), how many pairs it measures at once and on which ports
(--port-base), the rights it asks the API about, the pods' shared settings and the tools
the image must hold. Pure but for the tool table: nothing here reaches the API.
"""

from __future__ import annotations

import dataclasses
import logging

from harness.bed import Options
from harness.core import pairs as pairs_mod
from harness.core.errors import HarnessError
from harness.core.placements import HOST, PLACEMENTS
from harness.testbeds.kubernetes import nodes as nodes_mod, specs

log = logging.getLogger(__name__)

MODE_KINDS = ("native", "cni")      # what a cluster's backend measures: its nodes' network and its own


def refuse_modes(sc) -> None:
    """One line for the first mode that would deploy an overlay onto the nodes (or for
    container endpoints of another kind than the cluster's pods)."""
    if sc.containers != "netns":
        raise HarnessError(f"--containers {sc.containers}: on the kubernetes backend the containers are the "
                           f"cluster's pods")
    for name in sc.modes:
        if sc.mode(name).kind not in MODE_KINDS:
            raise HarnessError(f"mode {name} deploys an overlay onto the hosts; the kubernetes backend measures "
                               f"the cluster as found: --modes native,cni")


def modes_for(sc, path: str | None) -> list[str] | None:
    """The registry's modes hook (harness/testbeds/registry.py): a scenario's modes are
    overlays the harness deploys onto hosts; on a cluster the overlay is the cluster's own,
    so a scenario with any such mode measures native and cni instead, the same file then
    measuring its nodes' network and its pods'. A scenario whose modes are all of the
    cluster's kinds keeps them (None). Said in a warning when the scenario is a file."""
    other = [m for m in sc.modes if sc.mode(m).kind not in MODE_KINDS]
    if not other:
        return None
    if path:
        log.warning("kubernetes: measuring the cluster's network (native, cni) instead of the scenario's "
                    "modes %s, which deploy overlays onto hosts (--modes native,cni says so)", ", ".join(other))
    return list(MODE_KINDS)


@dataclasses.dataclass(frozen=True)
class NodePlan:
    """Which nodes are candidates (every label of `selector`) and how a pair's ends sit on
    them: on nodes of different zones (`across_zones`), or both on one node (`same_node`)."""

    selector: tuple[tuple[str, str], ...] = ()
    across_zones: bool = False
    same_node: bool = False


def node_plan(opts: Options, wanted: tuple[str, ...] = ()) -> NodePlan:
    """The node plan from the options and the nodes named (--nodes, else the scenario's
    [testbed] pair); HarnessError, one line, on bad input or flags that contradict. A
    selector with nodes named is refused: the names already say which nodes (`all` with a
    selector is every node that matches)."""
    sel = nodes_mod.selector(opts.node_selector)
    named = tuple(wanted) not in ((), ("all",))
    if sel and named:
        raise HarnessError(f"--node-selector with the nodes named ({','.join(wanted)}): name the nodes or select "
                           f"them, not both (--nodes all --node-selector KEY=VALUE takes every node that matches)")
    if opts.same_node:
        if opts.across_zones:
            raise HarnessError("--same-node and --across-zones: both ends on one node cannot be in two zones")
        if opts.node_count != 2:
            raise HarnessError(f"--hosts {opts.node_count} with --same-node: both ends of the pair are on one node")
        if tuple(wanted) == ("all",):
            raise HarnessError("--nodes all with --same-node: both ends of the pair are on one node; name it, "
                               "or let the first Ready, schedulable one be taken")
    return NodePlan(sel, opts.across_zones, opts.same_node)


def refuse_same_node(sc) -> None:
    """--same-node: one line for the first case with a host end. Both sides on one node are
    pod-network pods only: two ends in the node's own network (host-host) would meet on its
    loopback, and the node to a pod of its own (host-container) is no path between pods."""
    for m, p in _chosen_by_mode(sc):
        if HOST in (PLACEMENTS[p].client, PLACEMENTS[p].server):
            raise HarnessError(f"--same-node: mode {m}'s placement {p} has a host end; on one node the run makes "
                               f"pod-network pods only: --modes cni --placements container-container,"
                               f"container-service")


def _chosen_by_mode(sc) -> list[tuple[str, str]]:
    """(mode, placement) of every placement a mode of `sc` measures, as the scenario's
    expand picks them: those asked for that the mode has, else all the mode's."""
    out: list[tuple[str, str]] = []
    for m in sc.modes:
        own = sc.mode(m).placements
        out += [(m, p) for p in ([p for p in sc.placements if p in own] or list(own)) if p in PLACEMENTS]
    return out


def _chosen(sc) -> list[str]:
    """Every placement a mode of `sc` measures (_chosen_by_mode)."""
    return [p for _m, p in _chosen_by_mode(sc)]


def needs_service(sc) -> bool:
    """Whether a case of `sc` has a service end."""
    return any(PLACEMENTS[p].needs_service for p in _chosen(sc))


def needs_local(sc) -> bool:
    """Whether a case of `sc` has a local end (same-node): then a second pod-network pod per
    side, beside the side's own on its node."""
    return any(PLACEMENTS[p].needs_local for p in _chosen(sc))


def needs_host_network(sc) -> bool:
    """Whether a case of `sc` has a host end (the native reference, host-host, host-container):
    only then are hostNetwork pods made."""
    return any(HOST in (PLACEMENTS[p].client, PLACEMENTS[p].server) for p in _chosen(sc))


RAW_TESTS = ("ping", "packet")     # ping -f (root, NET_RAW); blast --packet (a packet socket: NET_RAW)


def needs_raw_sockets(sc) -> bool:
    """Whether a pod-network pod needs a raw socket (as root with NET_RAW): a ping or packet
    test and a placement whose client is a container (a hostNetwork pod has NET_RAW anyway)."""
    return any(t.split(".")[0] in RAW_TESTS for t in sc.tests) and \
        any(PLACEMENTS[p].client != HOST for p in _chosen(sc))


def at_once(sc, names: list[str]) -> int:
    """How many pairs the schedule measures at once: the Services' ports are for that many."""
    chosen = pairs_mod.select(list(sc.pairs), names)
    if sc.schedule == "mesh":
        return len(chosen)
    if sc.schedule == "rounds":
        return max(len(r) for r in pairs_mod.rounds(chosen, names))
    return 1


def tool_ports(opts: Options, sets: int) -> dict[str, tuple[int, int | None]] | None:
    """The tools' server ports for `sets` pairs at once where --port-base moves them (None:
    their fixed ones), checked like the fixed ones: one line where they meet or do not fit."""
    specs.service_ports(sets, opts.port_base)
    return None if opts.port_base is None else specs.tool_ports(sets, opts.port_base)


def permissions(sc, namespace: str, fresh: bool = True) -> list[tuple[str, str, str, str, str]]:
    """(verb, resource, namespace, group, subresource) the run needs, for SelfSubjectAccessReview:
    in a fresh namespace, namespaces' verbs cluster-wide; in an existing one (--namespace),
    namespaced rights only, and deleting what it made."""
    need = [("list", "nodes", "", "", "")]
    if fresh:
        need = [("create", "namespaces", "", "", ""), ("delete", "namespaces", "", "", ""),
                ("list", "namespaces", "", "", "")] + need
    need += [("create", "pods", namespace, "", ""), ("get", "pods", namespace, "", ""),
             ("create", "pods", namespace, "", "exec")]
    if not fresh:
        need.append(("delete", "pods", namespace, "", ""))
    if needs_service(sc):
        need.append(("create", "services", namespace, "", ""))
        if not fresh:
            need.append(("delete", "services", namespace, "", ""))
    if "cni" in [sc.mode(m).kind for m in sc.modes]:
        need.append(("list", "daemonsets", "kube-system", "apps", ""))
    return need


def secret_permissions(names, source: str, namespace: str, fresh: bool) -> list[tuple[str, str, str, str, str]]:
    """Reading image pull secrets where they are, and (a fresh namespace) making the copies."""
    if not names:
        return []
    return [("get", "secrets", source if fresh else namespace, "", "")] + \
        ([("create", "secrets", namespace, "", "")] if fresh else [])


def pod_settings(opts: Options) -> specs.PodSettings:
    """The pods' shared settings from the options; HarnessError, one line, on bad input."""
    return specs.PodSettings(image=opts.image or specs.DEFAULT_IMAGE,
                             cpu=specs.resources("--pod-cpu", opts.pod_cpu or specs.DEFAULT_CPU),
                             memory=specs.resources("--pod-memory", opts.pod_memory or specs.DEFAULT_MEMORY),
                             tolerations=tuple(specs.toleration(t) for t in opts.tolerate),
                             pull_secrets=tuple(dict.fromkeys(opts.pull_secrets)))


def refuse_tools(sc, image: str) -> None:
    """One line for the first test whose tool the tools image does not hold (blast, which the
    harness builds, the image compiles in a stage of its own: specs.IMAGE_BUILT)."""
    from harness import tools          # the tool table: on use
    for t in sc.tests:
        tool = tools.get(t)
        binary = tool.binary
        if tool.builds and binary in specs.IMAGE_BUILT:
            continue
        if binary not in specs.IMAGE_TOOLS:
            raise HarnessError(f"test {t} needs {binary}, which the image {image} does not hold "
                               f"(it holds {', '.join(sorted(specs.IMAGE_TOOLS))}: images/rootfs.packages)")
