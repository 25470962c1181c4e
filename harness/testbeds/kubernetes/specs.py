"""What a run makes on a cluster, as manifests (plain dicts): its namespace, its pods, the
Services in front of the pod-network pods. Pure: nothing here reaches the API.

Every object lives in the run's namespace `overlaybench-<P>`, which carries the run and its
owner as labels (what `overlaybench down --kubeconfig` reads) and the Pod Security label that
lets hostNetwork pods in. Per node i:

    h<i>   hostNetwork pod pinned to the node (nodeName): the node's own network
    c<i>   pod-network pod pinned to the node: the cluster's pod network (its CNI)
    s<i>   ClusterIP Service selecting c<i> on the tools' ports (the container-service placement)
"""

from __future__ import annotations

import re

MANAGED = "app.kubernetes.io/managed-by"
RUN, OWNER_PID, OWNER_HOST, PREFIX, SIDE = ("overlaybench/run", "overlaybench/owner-pid", "overlaybench/owner-host",
                                            "overlaybench/prefix", "overlaybench/side")
OWNER_PIDNS = "overlaybench/owner-pidns"        # the owner pid's pid namespace (its inode)
SELECTOR = f"{MANAGED}=overlaybench"
PSA = {"pod-security.kubernetes.io/enforce": "privileged"}
DEFAULT_IMAGE = "overlaybench/tools:bookworm"       # images/build.sh tools
# the tools' servers' ports (harness/run/procs.py: iperf3, qperf and its data, sockperf),
# each for the pairs of a set measured at once (their port + 2 × place)
SERVER_PORTS = (5201, 19765, 19766, 11111)


def namespace_name(prefix: str) -> str:
    return f"overlaybench-{prefix}"


def label_value(text: str) -> str:
    """A label value (≤ 63 of [A-Za-z0-9._-], alphanumeric at both ends) made from `text`."""
    v = re.sub(r"[^A-Za-z0-9._-]", "_", text)[:63]
    return re.sub(r"^[^A-Za-z0-9]+|[^A-Za-z0-9]+$", "", v)


def namespace(prefix: str, run_id: str, pid: int, host: str, pidns: int | None = None) -> dict:
    owner = {OWNER_PID: str(pid), OWNER_HOST: label_value(host), **({OWNER_PIDNS: str(pidns)} if pidns else {})}
    return {"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": namespace_name(prefix),
                         "labels": {MANAGED: "overlaybench", PREFIX: prefix, RUN: label_value(run_id), **owner, **PSA}}}


def pull_policy(image: str) -> str:
    """IfNotPresent for a tag or digest (a loaded archive is used as it is), Always for :latest."""
    tail = image.rsplit("/", 1)[-1]
    return "Always" if "@" not in tail and (":" not in tail or tail.endswith(":latest")) else "IfNotPresent"


def pod(name: str, node: str, image: str, host_network: bool, pull: str | None = None) -> dict:
    """A pod pinned to `node` that sleeps until the run execs its tools in it."""
    spec = {"nodeName": node, "hostNetwork": host_network, "restartPolicy": "Never",
            "terminationGracePeriodSeconds": 0, "automountServiceAccountToken": False,
            "enableServiceLinks": False,
            "tolerations": [{"operator": "Exists"}],          # nodeName skips the scheduler, not NoExecute
            "containers": [{"name": "tools", "image": image, "imagePullPolicy": pull or pull_policy(image),
                            "command": ["sleep", "infinity"],
                            "securityContext": {"capabilities": {"add": ["NET_ADMIN", "NET_RAW"]}}}]}
    if host_network:
        spec["dnsPolicy"] = "ClusterFirstWithHostNet"
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "labels": {MANAGED: "overlaybench", SIDE: name}}, "spec": spec}


def service(name: str, pod_name: str, sets: int) -> dict:
    """A ClusterIP Service in front of pod `pod_name`: every server port, TCP and UDP, for
    `sets` pairs measured at once."""
    ports = [{"name": f"{proto.lower()}-{p + 2 * k}", "protocol": proto, "port": p + 2 * k, "targetPort": p + 2 * k}
             for p in SERVER_PORTS for k in range(sets) for proto in ("TCP", "UDP")]
    return {"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": name, "labels": {MANAGED: "overlaybench"}},
            "spec": {"type": "ClusterIP", "selector": {SIDE: pod_name}, "ports": ports}}
