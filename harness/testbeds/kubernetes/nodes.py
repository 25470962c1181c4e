"""Which nodes a run measures between: the ones named (--nodes, or a scenario's [testbed]
pair), every Ready, schedulable one ("all"), or the first ones of those by name (--hosts N,
two by default). Pure: the nodes come from the API."""

from __future__ import annotations

from harness.core.errors import HarnessError
from harness.hosts.kube.api import Node
from harness.testbeds.kubernetes.specs import tolerates


def schedulable(n: Node, tolerations=()) -> bool:
    """Not cordoned, and every NoSchedule/NoExecute taint tolerated (--tolerate)."""
    if n.schedulable:
        return True
    return bool(n.taints) and not n.cordoned and all(tolerates(tolerations, *t) for t in n.taints)


def pick(nodes: list[Node], wanted: tuple[str, ...] = (), count: int = 2, tolerations=()) -> list[Node]:
    """The nodes to measure between, in the order named (or by name); HarnessError, one
    line, where the cluster cannot give them."""
    by = {n.name: n for n in nodes}
    usable = sorted((n for n in nodes if n.ready and schedulable(n, tolerations)), key=lambda n: n.name)
    if tuple(wanted) == ("all",):
        wanted, count = (), max(len(usable), 2)
    if wanted:
        if len(wanted) < 2 or len(set(wanted)) != len(wanted):
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
        return [by[w] for w in wanted]
    if count < 2:
        raise HarnessError(f"--hosts {count}: a run measures between two nodes or more")
    if len(usable) < count:
        have = ", ".join(n.name for n in usable) or "none"
        raise HarnessError(f"the cluster has {len(usable)} Ready, schedulable node{'s' * (len(usable) != 1)} "
                           f"({have}); the run needs {count}")
    return usable[:count]
