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

from harness.core.errors import HarnessError, UnsupportedError
from harness.modes.base import Datapath, Mode

# what each encapsulation (the fingerprint's word) adds to a pod's packet over an IPv4
# underlay: outer IPv4 20 + UDP 8 + the tunnel's header (VXLAN 8 and the inner Ethernet 14;
# Geneve 8 without options and the same 14; WireGuard's 16 + 16-byte tag); IP in IP, the outer
# IPv4 header alone; flannel's udp backend, IPv4 and UDP
ENCAP_BYTES = {"none": 0, "vxlan": 50, "geneve": 50, "ipip": 20, "udp": 28, "wireguard": 60}


def found_overhead(info: dict) -> int:
    """The bytes the pod network's encapsulation (and encryption) takes, from its fingerprint
    (Testbed.pod_network's info); HarnessError, one line, where it cannot be said."""
    fp = info.get("fingerprint") or {}
    encap, crypt = fp.get("encapsulation") or "", fp.get("encryption") or ""
    if not encap:
        raise HarnessError(f"mode cni: the pod network's encapsulation was not read ({fp.get('cni') or 'unknown'} "
                           f"CNI, no tunnel device seen), so its right MTU is unknown")
    if fp.get("routing") == "cross-subnet":
        raise HarnessError(f"mode cni: {fp.get('cni')} tunnels only between subnets, so which paths carry the "
                           f"{encap} header is not known here")
    if encap not in ENCAP_BYTES:
        raise HarnessError(f"mode cni: encapsulation {encap}'s size is not known here")
    extra = 0
    if crypt and crypt not in ("none", encap):
        if crypt not in ENCAP_BYTES:
            raise HarnessError(f"mode cni: {crypt} encryption's size depends on its cipher: the right MTU is "
                               f"not known here")
        extra = ENCAP_BYTES[crypt]
    return ENCAP_BYTES[encap] + extra


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

    def overhead_on(self, testbed) -> int:
        return found_overhead(testbed.pod_network() or {})

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
