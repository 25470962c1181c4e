"""The cluster's pod network as found, for the `cni` mode's Datapath.info and run.json:

    daemonsets      every DaemonSet of the system namespaces with its images (the CNI's,
                    kube-proxy or its replacement)
    cni             the CNI those names and images point to (flannel, calico, cilium …), else
                    the one the nodes' device names point to (flanneld run as a node daemon
                    has no DaemonSet, but its flannel.1), else ""; `cni_from` says which
    pod_mtu         the MTU a pod-network pod sends at: its eth0's, or its default route's
                    where that is lower (then pod_device_mtu is eth0's)
    encapsulation   per node, the tunnel devices `ip -d link` shows in a hostNetwork pod
                    (vxlan with its id and port, geneve, wireguard, ipip's tunl …)
    fingerprint     the datapath, named (fingerprint.py): the CNI's own configuration read
                    from its DaemonSet, ConfigMaps and custom resources, kube-proxy's mode,
                    and a one-line summary; the reads are optional (RBAC may forbid them).
                    Where a hostNetwork pod runs, what the node itself shows is added: the
                    CNI its devices name when no DaemonSet did (flanneld or a CNI run as a
                    node process), and the mode kube-proxy answers on its metrics address
                    (127.0.0.1:10249 /proxyMode) whether it runs as a DaemonSet, a static
                    pod or a process of the node

Nothing here fails a run: what cannot be read is recorded as an error beside the rest.
"""

from __future__ import annotations

import re

from harness.hosts.kube.api import ApiError
from harness.testbeds.kubernetes import fingerprint
from harness.tools.mtu import parse_route_mtu

SYSTEM_NAMESPACES = ("kube-system", "kube-flannel", "calico-system", "tigera-operator", "cilium", "kube-router")
KNOWN_CNIS = ("flannel", "calico", "cilium", "antrea", "weave", "kube-router", "kindnet", "ovn", "canal", "multus")
TUNNEL_KINDS = ("vxlan", "geneve", "wireguard", "ipip", "ip6tnl", "gre", "gretap", "sit", "vti")


def parse_links(text: str) -> list[dict]:
    """The tunnel devices of `ip -d -o link show`: name, kind, MTU, and a VXLAN's or
    Geneve's id and UDP port."""
    out = []
    for line in text.splitlines():
        parts = [p.strip() for p in line.split("\\")]
        m = re.match(r"\d+:\s+([^:@\s]+)(?:@\S+)?:\s.*?\bmtu (\d+)", parts[0])
        if not m:
            continue
        for detail in parts[1:]:
            words = detail.split()
            if words and words[0] in TUNNEL_KINDS:
                dev = {"name": m.group(1), "kind": words[0], "mtu": int(m.group(2))}
                for key in ("id", "dstport"):
                    if key in words[:-1] and words[words.index(key) + 1].isdigit():
                        dev[key] = int(words[words.index(key) + 1])
                out.append(dev)
                break
    return out


# device names each CNI gives the interfaces it makes on a node
DEVICE_NAMES = (("flannel", re.compile(r"^flannel[.-]")), ("cilium", re.compile(r"^cilium_")),
                ("calico", re.compile(r"^(vxlan\.calico|wireguard\.cali|cali)")), ("antrea", re.compile(r"^antrea-")),
                ("weave", re.compile(r"^(weave|vxlan-6784)")), ("kube-router", re.compile(r"^kube-(bridge|dummy-if)")))


def which_cni(daemonsets: list[dict]) -> str:
    """The CNI the system DaemonSets' names and images name first ("" where none)."""
    text = " ".join(f"{d['name']} {' '.join(d['images'])}" for d in daemonsets).lower()
    return next((c for c in KNOWN_CNIS if c in text), "")


def cni_of_devices(names: list[str]) -> str:
    """The CNI a node's device names point to first ("" where none)."""
    return next((c for c, pattern in DEVICE_NAMES for n in names if pattern.match(n)), "")


def device_names(text: str) -> list[str]:
    """Every device name of `ip -o link show` output."""
    return [m.group(1) for m in re.finditer(r"^\d+:\s+([^:@\s]+)", text, re.M)]


# what each recogniser reads, asked for where a listed DaemonSet names its CNI (or, with no
# DaemonSet, the nodes' devices do: node_configmaps): (CNI, DaemonSet name pattern,
# ConfigMaps in that DaemonSet's namespace, custom resources)
CALICO_CRDS = (("crd.projectcalico.org", "v1"), ("projectcalico.org", "v3"))
READS = (("cilium", re.compile(r"^cilium$"), ("cilium-config",), False),
         ("calico", re.compile(r"^(calico-node|canal)$"), ("calico-config", "canal-config"), True),
         ("flannel", re.compile(r"flannel"), ("kube-flannel-cfg",), False),
         ("aws-vpc-cni", re.compile(r"^aws-node$"), (), False),
         ("kube-router", re.compile(r"^kube-router"), (), False),
         ("kube-proxy", re.compile(r"^kube-proxy"), ("kube-proxy", "kube-proxy-config"), False))


def datapath_objects(api, daemonsets: list[dict]) -> dict:
    """The objects fingerprint.of reads, through the API's optional reads: the listed
    DaemonSets whole, and the ConfigMaps and Calico resources their names point to; what
    could not be read is named in "unread" (not there, or forbidden)."""
    objects: dict = {"daemonsets": [], "configmaps": [], "ippools": [], "felixconfigurations": [], "unread": []}
    calico = False
    for d in daemonsets:
        wanted = next(((cms, crds) for _cni, pattern, cms, crds in READS if pattern.search(d["name"])), None)
        if wanted is None:
            objects["daemonsets"].append(_listed(d))
            continue
        whole = api.read_daemonset(d["namespace"], d["name"])
        if whole is None:
            objects["unread"].append(f"daemonset {d['namespace']}/{d['name']}: not read (absent or forbidden)")
        objects["daemonsets"].append(whole or _listed(d))
        for name in wanted[0]:
            cm = api.read_configmap(d["namespace"], name)
            if cm is not None:
                objects["configmaps"].append(cm)
        calico = calico or wanted[1]
    if calico:
        for plural in ("ippools", "felixconfigurations"):
            items = next((i for g, v in CALICO_CRDS if (i := api.list_custom_objects(g, v, plural)) is not None),
                         None)
            if items is None:
                objects["unread"].append(f"{plural}: not listed (no such resource, or forbidden)")
            objects[plural] = items or []
    return objects


# kube-proxy's mode as it answers on its metrics server's default address, asked with bash's
# /dev/tcp (the tools image holds no HTTP client); bounded by timeout(1)
PROXY_MODE_ARGV = ["timeout", "5", "bash", "-c",
                   "exec 3<>/dev/tcp/127.0.0.1/10249 && printf 'GET /proxyMode HTTP/1.0\\r\\nHost: localhost\\r\\n\\r\\n' >&3 "
                   "&& timeout 3 cat <&3"]
PROXY_MODES = ("iptables", "ipvs", "nftables", "kernelspace")


def parse_proxy_mode(out: str, err: str, node: str) -> tuple[str, str]:
    """(mode, evidence) from PROXY_MODE_ARGV's output on `node`: the mode kube-proxy
    answered; "none" where nothing listens there; "" where the answer says nothing."""
    head, _, body = out.replace("\r\n", "\n").partition("\n\n")
    status = head.split()[1] if head.startswith("HTTP/") and len(head.split()) > 1 else ""
    if status == "200" and body.strip() in PROXY_MODES:
        return body.strip(), f"node {node}: kube-proxy answers /proxyMode on 127.0.0.1:10249: {body.strip()}"
    if "Connection refused" in err:
        return "none", f"node {node}: nothing answers on 127.0.0.1:10249 (kube-proxy's metrics address)"
    why = f"HTTP {status}" if status else (err.strip().splitlines() or ["no answer"])[-1][:120]
    return "", f"node {node}: /proxyMode on 127.0.0.1:10249 not read ({why})"


def from_nodes(fp: fingerprint.Fingerprint, names: dict[str, list[str]], tunnels: dict[str, list[dict]],
               proxy: tuple[str, str] | None) -> None:
    """What the nodes show, added to what the objects said: the CNI its devices name (and
    their tunnel's kind) where no DaemonSet named one, and the mode kube-proxy answers."""
    cni = cni_of_devices([n for ns in names.values() for n in ns]) if fp.cni == "unknown" else ""
    if cni:
        pattern = dict(DEVICE_NAMES)[cni]
        devs = [d for ts in tunnels.values() for d in ts if pattern.match(d["name"])]
        fp.cni = cni
        if devs:
            fp.encapsulation, fp.routing = devs[0]["kind"], "tunnel"
        shown = sorted({f"{d['name']} ({' '.join([d['kind']] + [f'{k} {d[k]}' for k in ('id', 'dstport') if k in d])})"
                        for d in devs}) or sorted({n for ns in names.values() for n in ns if pattern.match(n)})
        on = ", ".join(sorted(n for n, ns in names.items() if any(pattern.match(x) for x in ns)))
        fp.seen.append(f"devices of {cni} on node(s) {on}: {', '.join(shown)}; no DaemonSet of it, so its "
                       f"own configuration was not read")
    if proxy is None:
        return
    mode, where = proxy
    fp.seen.append(where)
    if mode and mode != "none" and fp.kube_proxy.startswith("replaced"):
        fp.details["kube_proxy_also_running"] = mode
    elif mode and not fp.kube_proxy.startswith("replaced"):
        if fp.kube_proxy not in ("", "none", mode):
            fp.details["kube_proxy_configured"] = fp.kube_proxy
        fp.kube_proxy = mode


def _listed(d: dict) -> dict:
    """A listed DaemonSet (name, namespace, images) as an object of the manifest's shape."""
    return {"kind": "DaemonSet", "metadata": {"name": d["name"], "namespace": d["namespace"]},
            "spec": {"template": {"spec": {"containers": [{"name": f"c{i}", "image": im}
                                                          for i, im in enumerate(d["images"])]}}}}


def node_configmaps(api, cni: str) -> list[dict]:
    """The ConfigMaps the recogniser of `cni` reads, looked for in the system namespaces: for
    a CNI the nodes' devices name that no DaemonSet does (its agents run as node processes,
    configured from its ConfigMap as a chart would leave it)."""
    names = next((cms for c, _pattern, cms, _crds in READS if c == cni), ())
    return [cm for ns in SYSTEM_NAMESPACES for name in names if (cm := api.read_configmap(ns, name)) is not None]


def pod_network(api, sides, node_pods: bool = True) -> dict:
    """Everything of the module doc, read through the API and the run's pods (the nodes'
    devices only where the run has hostNetwork pods, `node_pods`)."""
    info: dict = {"daemonsets": [], "errors": []}
    for ns in SYSTEM_NAMESPACES:
        try:
            info["daemonsets"] += api.list_daemonsets(ns)
        except ApiError as e:
            if ns == "kube-system" or e.status not in (403, 404):
                info["errors"].append(str(e))
    info["cni"], info["cni_from"] = which_cni(info["daemonsets"]), "daemonsets"
    objects = datapath_objects(api, info["daemonsets"])
    info["pod_mtu"] = None
    for s in sides:
        done = s.container.run(["cat", "/sys/class/net/eth0/mtu"], check=False, timeout=20)
        if done.ok and done.stdout.strip().isdigit():
            info["pod_mtu"] = int(done.stdout.strip())
            # the default route's own MTU where it sets a lower one (Cilium: eth0 at the
            # node's MTU, the routes at the tunnel's): what the pod sends at
            route = s.container.run(["ip", "-o", "route", "show", "default"], check=False, timeout=20)
            own = parse_route_mtu(route.stdout) if route.ok else None
            if own and own < info["pod_mtu"]:
                info["pod_mtu"], info["pod_device_mtu"] = own, info["pod_mtu"]
            break
        info["errors"].append(f"{s.container.name}: pod MTU: {(done.stderr or done.stdout).strip()[-200:]}")
    info["encapsulation"] = {}
    names: dict[str, list[str]] = {}
    for s in sides if node_pods else ():
        done = s.host.run(["ip", "-d", "-o", "link", "show"], check=False, timeout=20)
        if done.ok:
            info["encapsulation"][s.name] = parse_links(done.stdout)
            names[s.name] = device_names(done.stdout)
        else:
            info["errors"].append(f"{s.name}: ip -d link: {(done.stderr or done.stdout).strip()[-200:]}")
    fp = fingerprint.of(objects)
    by_devices = cni_of_devices([n for ns in names.values() for n in ns])
    if fp.cni == "unknown" and by_devices and (cms := node_configmaps(api, by_devices)):
        objects["configmaps"] += cms
        fp = fingerprint.of(objects)
        fp.seen.append(f"the nodes' devices name {by_devices}, no DaemonSet does: its configmap read for it")
    if not info["cni"] and fp.cni != "unknown":
        info["cni"], info["cni_from"] = fp.cni, "fingerprint"
    proxy = None
    if node_pods and sides:
        done = sides[0].host.run(PROXY_MODE_ARGV, check=False, timeout=20)
        proxy = parse_proxy_mode(done.stdout, done.stderr, sides[0].name)
    else:
        info["encapsulation_unread"] = "no hostNetwork pod (the run has no host end): the nodes' devices not read"
    from_nodes(fp, names, info["encapsulation"], proxy)
    info["fingerprint"] = fp.as_dict()
    if not info["cni"]:
        info["cni"] = by_devices
        info["cni_from"] = "devices" if info["cni"] else ""
    if not info["errors"]:
        del info["errors"]
    return info
