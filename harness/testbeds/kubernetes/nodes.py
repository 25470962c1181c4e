"""Which nodes a run measures between: the ones named (--nodes, or a scenario's [testbed]
pair), every Ready, schedulable one ("all"), or the first ones of those by name (--hosts N,
two by default). The candidates are the nodes every --node-selector label matches;
--across-zones takes one node per zone (label topology.kubernetes.io/zone), so that every
pair the run measures crosses zones; --same-node takes one node, both ends of every pair
on it. Pure: the nodes come from the API.
"""

from __future__ import annotations

import re

from harness.core.errors import HarnessError
from harness.hosts.kube.api import Node
from harness.testbeds.kubernetes.specs import tolerates

ZONE = "topology.kubernetes.io/zone"
INSTANCE_TYPE = "node.kubernetes.io/instance-type"
# a label's key (an optional DNS-subdomain prefix and a name) and value, as the API admits them
_NAME = r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?"
_KEY = re.compile(rf"^([a-z0-9]([-a-z0-9.]{{0,251}}[a-z0-9])?/)?{_NAME}$")
_VALUE = re.compile(rf"^({_NAME})?$")


def selector(texts) -> tuple[tuple[str, str], ...]:
    """--node-selector KEY=VALUE, each (repeatable: all must match) → ((key, value), …);
    HarnessError, one line, on anything else or two values for one key."""
    out: dict[str, str] = {}
    for text in texts:
        key, eq, value = text.partition("=")
        if not eq or not _KEY.match(key) or not _VALUE.match(value):
            raise HarnessError(f"--node-selector {text}: not KEY=VALUE of a node label (e.g. "
                               f"node.kubernetes.io/instance-type=m6i.large)")
        if key in out and out[key] != value:
            raise HarnessError(f"--node-selector {key}={out[key]} and {key}={value}: no node has both")
        out[key] = value
    return tuple(out.items())


def matches(n: Node, sel) -> bool:
    return all(n.label(k) == v for k, v in sel)


def zone(n: Node) -> str | None:
    return n.label(ZONE)


def schedulable(n: Node, tolerations=()) -> bool:
    """Not cordoned, and every NoSchedule/NoExecute taint tolerated (--tolerate)."""
    if n.schedulable:
        return True
    return bool(n.taints) and not n.cordoned and all(tolerates(tolerations, *t) for t in n.taints)


def pick(nodes: list[Node], wanted: tuple[str, ...] = (), count: int = 2, tolerations=(), sel=(),
         across_zones: bool = False, same_node: bool = False) -> list[Node]:
    """The nodes to measure between, in the order named (or by name; across zones, by zone);
    HarnessError, one line, where the cluster cannot give them."""
    by = {n.name: n for n in nodes}
    usable = sorted((n for n in nodes if n.ready and schedulable(n, tolerations) and matches(n, sel)),
                    key=lambda n: n.name)
    if tuple(wanted) == ("all",):
        wanted, count = (), (0 if across_zones else max(len(usable), 2))
    if wanted:
        return _named(by, tuple(wanted), tolerations, across_zones, same_node)
    if same_node:
        if not usable:
            raise HarnessError(f"--same-node: no Ready, schedulable node{_of(sel)} to put both pods on")
        return usable[:1]
    if across_zones:
        return _across(usable, count, sel)
    if count < 2:
        raise HarnessError(f"--hosts {count}: a run measures between two nodes or more")
    if len(usable) < count:
        have = ", ".join(n.name for n in usable) or "none"
        raise HarnessError(f"the cluster has {len(usable)} Ready, schedulable node{'s' * (len(usable) != 1)}"
                           f"{_of(sel)} ({have}); the run needs {count}")
    return usable[:count]


def _of(sel) -> str:
    """" matching --node-selector a=b,c=d" where a selector is given."""
    return f" matching --node-selector {','.join(f'{k}={v}' for k, v in sel)}" if sel else ""


def _named(by: dict[str, Node], wanted: tuple[str, ...], tolerations, across_zones: bool,
           same_node: bool) -> list[Node]:
    if same_node and len(wanted) != 1:
        raise HarnessError(f"--nodes {','.join(wanted)}: --same-node puts both pods on one node: name one")
    if not same_node and (len(wanted) < 2 or len(set(wanted)) != len(wanted)):
        raise HarnessError(f"--nodes {','.join(wanted)}: name two or more different nodes")
    missing = [w for w in wanted if w not in by]
    if missing:
        known = ", ".join(sorted(by)) or "none"
        raise HarnessError(f"no node named {missing[0]!r} in the cluster (nodes: {known})")
    for w in wanted:
        n = by[w]
        if not n.ready:
            raise HarnessError(f"node {w} is not Ready")
        if not schedulable(n, tolerations):
            taint = next((f"{k}{'=' + v if v else ''}:{e}" for k, v, e in n.taints), "")
            raise HarnessError(f"node {w} is not schedulable (" + (f"tainted {taint}: --tolerate {taint} "
                               "runs there" if taint and not n.cordoned else "cordoned") + ")")
    if across_zones:
        seen: dict[str, str] = {}
        for w in wanted:
            z = zone(by[w])
            if z is None:
                raise HarnessError(f"--across-zones: node {w} has no {ZONE} label")
            if z in seen:
                raise HarnessError(f"--across-zones: nodes {seen[z]} and {w} are both in zone {z}; name nodes of "
                                   f"different zones")
            seen[z] = w
    return [by[w] for w in wanted]


def _across(usable: list[Node], count: int, sel) -> list[Node]:
    """One node per zone (the first by name in each, zones by name), `count` of them (0:
    every zone): every pair among them crosses zones."""
    zones: dict[str, list[Node]] = {}
    for n in usable:
        z = zone(n)
        if z is not None:
            zones.setdefault(z, []).append(n)
    names = sorted(zones)
    unlabelled = sum(zone(n) is None for n in usable)
    seen = (f"{len(names)} zone{'s' * (len(names) != 1)} ({', '.join(names) or 'none'})"
            + (f" and {unlabelled} node{'s' * (unlabelled != 1)} without a {ZONE} label" if unlabelled else ""))
    if len(names) < 2:
        raise HarnessError(f"--across-zones: the Ready, schedulable nodes{_of(sel)} span {seen}; "
                           f"a pair across zones needs two")
    count = count or len(names)
    if count < 2:
        raise HarnessError(f"--hosts {count}: a run measures between two nodes or more")
    if count > len(names):
        raise HarnessError(f"--across-zones --hosts {count}: one node per zone, and the Ready, schedulable "
                           f"nodes{_of(sel)} span {seen}; --hosts {len(names)} at most")
    return [zones[z][0] for z in names[:count]]
