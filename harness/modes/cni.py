"""cni: a Kubernetes cluster's own pod network, as found. Deploys nothing.

The testbed tells what carries its pods' traffic (Testbed.pod_network: the CNI's
DaemonSets and images in the system namespaces, the pod interface's MTU, the tunnel
devices on each node, and the datapath's fingerprint: the CNI's routing, encapsulation,
encryption and dataplane and kube-proxy's mode, read from their own configuration); that
goes into the Datapath's info, so run.json records which network was measured, and the
fingerprint's summary into the rows' datapath: `cni (cilium v1.16.1, vxlan, kube-proxy
replacement)`. Only a testbed that is a cluster has one (the kubernetes backend);
elsewhere the mode is refused.

Its placements all have a pod end: host-container (a hostNetwork pod to a pod),
container-container (pod to pod across nodes), container-service (pod to a ClusterIP
Service in front of the far pod: kube-proxy or its replacement on the path) and same-node
(pod to a second pod on the client's own node: the CNI's node-local path, veth to veth
through the node, no tunnel; beside the cross-node figures of the same run, what the
tunnel and the wire between nodes add). Host to host on a cluster is the nodes' own
network: `native`.
"""

from __future__ import annotations

from harness.core.errors import UnsupportedError
from harness.modes.base import Datapath, Mode


class Cni(Mode):
    name = "cni"
    kind = "cni"
    order = 97
    colour = "#7a5c00"
    overhead = 0              # the cluster's encapsulation is found, not chosen: pod_mtu in the info
    placements = ("host-container", "container-container", "container-service", "same-node")
    multi_host = True
    description = "a Kubernetes cluster's pod network as found (its CNI), deployed by nobody here"

    def check(self, testbed) -> None:
        if testbed.pod_network() is None:
            raise UnsupportedError(f"mode cni measures a Kubernetes cluster's own pod network; the "
                                   f"{testbed.backend} backend has none (--backend kubernetes)")

    def deploy(self, testbed, overlay_mtu):
        info = dict(testbed.pod_network() or {})
        return Datapath(self.name, self.datapath(info), info.get("pod_mtu") or overlay_mtu,
                        devices={s.index: ["ctr:eth0"] for s in testbed.sides}, info=info)

    def datapath(self, info: dict) -> str:
        """The rows' datapath: `cni (cilium v1.16.1, vxlan, kube-proxy replacement)` where the
        testbed named it (its fingerprint's summary), else `cni`."""
        summary = (info.get("fingerprint") or {}).get("summary", "")
        return f"{self.kind} ({summary})" if summary and not summary.startswith("unknown") else self.kind

    def teardown(self, testbed, dp):
        pass
