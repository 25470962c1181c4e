"""What a run makes on a cluster, as manifests (plain dicts): its namespace, its pods, the
Services in front of the pod-network pods. Pure: nothing here reaches the API.

Every object carries the run and its owner as labels (what `overlaybench down --kubeconfig`
reads). By default they live in the run's own namespace `overlaybench-<P>`, whose Pod
Security label is the least level its pods need (psa.py); with --namespace, in a namespace
made beforehand, which the run leaves as it is. Per node i:

    h<i>   hostNetwork pod pinned to the node (nodeName): the node's own network; made only
           where a placement has a host end (the native reference, host-host, host-container)
    c<i>   pod-network pod pinned to the node: the cluster's pod network (its CNI)
    l<i>   a second pod-network pod pinned to the node, beside c<i>: the same-node placement's
           server (the CNI's node-local path); never runs ping, so always non-root
    s<i>   ClusterIP Service selecting c<i> on the tools' ports, blast's every flow's among them
           (the container-service placement)
"""

from __future__ import annotations

import dataclasses
import re

from harness.core.errors import HarnessError
from harness.testbeds.kubernetes import psa
from harness.tools.blast import FLOWS as BLAST_FLOWS

MANAGED = "app.kubernetes.io/managed-by"
RUN, OWNER_PID, OWNER_HOST, PREFIX, SIDE = ("overlaybench/run", "overlaybench/owner-pid", "overlaybench/owner-host",
                                            "overlaybench/prefix", "overlaybench/side")
OWNER_PIDNS = "overlaybench/owner-pidns"        # the owner pid's pid namespace (its inode)
SELECTOR = f"{MANAGED}=overlaybench"
ENFORCE = "pod-security.kubernetes.io/enforce"
DEFAULT_IMAGE = "localhost/overlaybench/tools:bookworm"       # make tools-image (images/tools.sh)
# the tools' binaries the tools image holds (images/rootfs.packages): a test of another is
# refused before anything is made
IMAGE_TOOLS = frozenset({"iperf3", "qperf", "sockperf", "ping", "iperf", "irtt"})
# the tools the harness builds that the image holds too (its own stage compiles overlay/blast):
# the pods run them from PATH (Testbed.tool_paths)
IMAGE_BUILT = frozenset({"blast"})
DEFAULT_CPU, DEFAULT_MEMORY = "500m:2", "256Mi:1Gi"    # request:limit of every pod
TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
_QUANTITY = re.compile(r"^\d+(\.\d+)?(m|k|Ki|M|Mi|G|Gi|T|Ti)?$")


@dataclasses.dataclass(frozen=True)
class PodSettings:
    """What every pod of a run shares: the image, resources, tolerations, pull secrets."""

    image: str = DEFAULT_IMAGE
    cpu: tuple[str, str] = ("500m", "2")               # request, limit
    memory: tuple[str, str] = ("256Mi", "1Gi")
    tolerations: tuple[dict, ...] = ()
    pull_secrets: tuple[str, ...] = ()


def resources(flag: str, text: str) -> tuple[str, str]:
    """`REQUEST[:LIMIT]` (a Kubernetes quantity each; no limit: the request) → (request,
    limit); HarnessError, one line, on anything else."""
    req, _, lim = text.partition(":")
    lim = lim or req
    for q in (req, lim):
        if not _QUANTITY.match(q):
            raise HarnessError(f"{flag} {text}: not REQUEST[:LIMIT] of Kubernetes quantities (e.g. 500m:2, 256Mi:1Gi)")
    return req, lim


def toleration(text: str) -> dict:
    """`KEY[=VALUE][:EFFECT]` → a toleration (no value: any; no effect: every effect)."""
    rest, _, effect = text.partition(":")
    key, eq, value = rest.partition("=")
    if not key or (effect and effect not in TAINT_EFFECTS) or (eq and not value):
        raise HarnessError(f"--tolerate {text}: not KEY[=VALUE][:EFFECT] (EFFECT: {', '.join(TAINT_EFFECTS)})")
    t = {"key": key, "operator": "Equal" if value else "Exists"}
    if value:
        t["value"] = value
    if effect:
        t["effect"] = effect
    return t


def tolerates(tolerations, key: str, value: str, effect: str) -> bool:
    """Whether one of `tolerations` tolerates the taint (key, value, effect)."""
    return any(t.get("key") == key and t.get("effect", effect) == effect
               and (t["operator"] == "Exists" or t.get("value") == value) for t in tolerations)


def namespace_name(prefix: str) -> str:
    return f"overlaybench-{prefix}"


def label_value(text: str) -> str:
    """A label value (≤ 63 of [A-Za-z0-9._-], alphanumeric at both ends) made from `text`."""
    v = re.sub(r"[^A-Za-z0-9._-]", "_", text)[:63]
    return re.sub(r"^[^A-Za-z0-9]+|[^A-Za-z0-9]+$", "", v)


def run_labels(prefix: str, run_id: str, pid: int, host: str, pidns: int | None = None) -> dict:
    """The labels of everything a run makes: whose it is and which run's."""
    return {MANAGED: "overlaybench", PREFIX: prefix, RUN: label_value(run_id), OWNER_PID: str(pid),
            OWNER_HOST: label_value(host), **({OWNER_PIDNS: str(pidns)} if pidns else {})}


def namespace(prefix: str, run_id: str, pid: int, host: str, pidns: int | None = None,
              level: str = "privileged") -> dict:
    """The run's own namespace, enforcing the Pod Security `level` its pods need."""
    return {"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": namespace_name(prefix),
                         "labels": {**run_labels(prefix, run_id, pid, host, pidns), ENFORCE: level}}}


def pull_policy(image: str) -> str:
    """IfNotPresent for a tag or digest (a loaded archive is used as it is), Always for :latest."""
    tail = image.rsplit("/", 1)[-1]
    return "Always" if "@" not in tail and (":" not in tail or tail.endswith(":latest")) else "IfNotPresent"


def pod(name: str, node: str, image: str | PodSettings, host_network: bool, pull: str | None = None,
        raw_sockets: bool = False, labels: dict | None = None) -> dict:
    """A pod pinned to `node` that sleeps until the run execs its tools in it; as root with
    NET_RAW only where it is a node's (hostNetwork) or runs ping (`raw_sockets`), else
    non-root under Pod Security's "restricted" rules (psa.py)."""
    ps = image if isinstance(image, PodSettings) else PodSettings(image=image)
    pod_sc, container_sc = psa.security(host_network, raw_sockets)
    spec = {"nodeName": node, "hostNetwork": host_network, "restartPolicy": "Never",
            "terminationGracePeriodSeconds": 0, "automountServiceAccountToken": False,
            "enableServiceLinks": False, "securityContext": pod_sc,
            "containers": [{"name": "tools", "image": ps.image, "imagePullPolicy": pull or pull_policy(ps.image),
                            "command": ["sleep", "infinity"], "securityContext": container_sc,
                            "resources": {"requests": {"cpu": ps.cpu[0], "memory": ps.memory[0]},
                                          "limits": {"cpu": ps.cpu[1], "memory": ps.memory[1]}}}]}
    if ps.tolerations:
        spec["tolerations"] = [dict(t) for t in ps.tolerations]
    if ps.pull_secrets:
        spec["imagePullSecrets"] = [{"name": s} for s in ps.pull_secrets]
    if host_network:
        spec["dnsPolicy"] = "ClusterFirstWithHostNet"
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "labels": {MANAGED: "overlaybench", **(labels or {}), SIDE: name}},
            "spec": spec}


def service(name: str, pod_name: str, ports: list[int], labels: dict | None = None) -> dict:
    """A ClusterIP Service in front of pod `pod_name` on `ports`, TCP and UDP each."""
    spec_ports = [{"name": f"{proto.lower()}-{p}", "protocol": proto, "port": p, "targetPort": p}
                  for p in ports for proto in ("TCP", "UDP")]
    return {"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": name, "labels": {MANAGED: "overlaybench", **(labels or {})}},
            "spec": {"type": "ClusterIP", "selector": {SIDE: pod_name}, "ports": spec_ports}}


def secret_copy(secret: dict, labels: dict) -> dict:
    """An image pull secret read elsewhere, as the run's own copy (type and data only)."""
    meta = secret.get("metadata", {})
    return {"apiVersion": "v1", "kind": "Secret", "type": secret.get("type", "kubernetes.io/dockerconfigjson"),
            "metadata": {"name": meta.get("name"), "labels": dict(labels)}, "data": dict(secret.get("data") or {})}


# the tools' servers' (control port, data port) by binary, as harness/run/procs.py has them
# (iperf3, qperf and its data, sockperf and its data, iperf 2, irtt and its data: the working
# load of load.sockperf and load.irtt,
# blast's receiver: FLOWS ports from its first, one per flow), each for the pairs of a set
# measured at once (their port + stride × place: blast's FLOWS, the rest's 2, as
# Tool.port_stride has them); --port-base lays the same tools out in this order from its
# base, a block of stride × (pairs at once) ports each
TOOL_PORTS = {"iperf3": (5201, None), "qperf": (19765, 19766), "sockperf": (11111, 11112), "iperf": (5001, None),
              "irtt": (2112, 2113), "blast": (9000, None)}
LOWEST_BASE = 1024          # the pod-network pods run as non-root: no privileged port


def span(tool: str) -> int:
    """How many ports from its port one server of `tool` binds (its data port aside): blast's
    receiver one per flow (harness/tools/blast.py), the rest one."""
    return BLAST_FLOWS if tool == "blast" else 1


def stride(tool: str) -> int:
    """How many ports apart the servers of a set's pairs are for `tool` (Tool.port_stride,
    what harness/run/case.py steps by): a server's span, at least 2 (a port and its data's)."""
    return max(2, span(tool))


def per_pair() -> int:
    """The ports --port-base lays out per pair at once: every tool's stride (14)."""
    return sum(stride(t) for t in TOOL_PORTS)


def tool_ports(sets: int, base: int | None = None) -> dict[str, tuple[int, int | None]]:
    """Each tool's (port, data port) for `sets` pairs at once: the fixed ones (None), or from
    `base` (--port-base) a block of stride × `sets` ports per tool: iperf3 from base, qperf's
    control and data ports interleaved in the next, then sockperf, iperf, irtt (2 × `sets`
    each) and blast (FLOWS × `sets`: each receiver's flows); the whole range base .. base +
    14 × sets − 1. HarnessError, one line, where it does not fit."""
    if base is None:
        return dict(TOOL_PORTS)
    last = base + per_pair() * sets - 1
    if base < LOWEST_BASE or last > 65535:
        why = (f"below {LOWEST_BASE} (the pods run as non-root)" if base < LOWEST_BASE else
               f"{sets} pair{'s' * (sets != 1)} at once need{'s' * (sets == 1)} ports {base}..{last}, past 65535")
        raise HarnessError(f"--port-base {base}: {why}; give one from {LOWEST_BASE} to {65536 - per_pair() * sets}")
    out, first = {}, base
    for tool, (_port, data) in TOOL_PORTS.items():
        out[tool] = (first, None if data is None else first + 1)
        first += stride(tool) * sets
    return out


def service_ports(sets: int, base: int | None = None) -> list[int]:
    """Every server port of `sets` pairs measured at once (tool_ports; blast's receivers with
    all their flows' ports); HarnessError, one line, where two tools' ports would meet (a set
    too large for the fixed ports) or the range does not fit."""
    owner: dict[int, tuple[str, int]] = {}
    for tool, (port, data) in tool_ports(sets, base).items():
        # (first port, whose, ports a server binds from it, ports apart the pairs' servers)
        for first, what, width, step in ((port, tool, span(tool), stride(tool)), (data, f"{tool}'s data", 1, 2)):
            if first is None:
                continue
            last = first + step * (sets - 1) + width - 1
            for p in (first + step * k + j for k in range(sets) for j in range(width)):
                if p in owner or p > 65535:
                    meet = f"meet {owner[p][0]}'s from {owner[p][1]}" if p in owner else "pass 65535"
                    fixed, out = ((f"--port-base {base}", "") if base is not None else
                                  ("harness/run/procs.py's fixed ports", ", or give --port-base"))
                    raise HarnessError(f"{sets} pairs at once: {what}'s ports {first}..{last} {meet} ({fixed}); "
                                       f"measure fewer pairs at once{out}")
                owner[p] = (what, first)
    return sorted(owner)
