"""The cluster's datapath, named: which CNI, how it carries pods' traffic between nodes, and
what stands in for Services. Pure functions over plain dicts of Kubernetes objects, shaped
as their manifests are (`kubectl get -o yaml`), so that published manifests test them:

    objects = {"daemonsets": [DaemonSet], "configmaps": [ConfigMap],
               "ippools": [IPPool], "felixconfigurations": [FelixConfiguration],
               "unread": ["what could not be read, and why"]}
    of(objects) -> Fingerprint

One recogniser per CNI reads what that CNI itself is configured by:

    cilium        ConfigMap cilium-config: routing-mode (older: tunnel), tunnel-protocol,
                  kube-proxy-replacement, enable-wireguard / enable-ipsec, mtu
    calico        IPPools' ipipMode / vxlanMode / natOutgoing, FelixConfiguration's
                  bpfEnabled / nftablesMode / iptablesBackend / wireguardEnabled; where
                  those are not readable, the calico-node DaemonSet's CALICO_IPV4POOL_* and
                  FELIX_* env; ConfigMap calico-config's veth_mtu
    flannel       ConfigMap kube-flannel-cfg: net-conf.json's Backend.Type and Network,
                  cni-conf.json's mtu
    aws-vpc-cni   the aws-node DaemonSet's env: routed VPC ENIs, no encapsulation
    kube-router   its DaemonSet's args: --run-router, --enable-overlay, --overlay-type,
                  --overlay-encap, --run-service-proxy

and kube-proxy's mode comes from its ConfigMap (config.conf `mode:`; empty is iptables on
Linux), or "none" where no kube-proxy DaemonSet runs. A CNI no recogniser knows stays
`unknown`, with the DaemonSets seen: never a guess. `seen` names every piece of evidence.
What the nodes themselves show (their devices, kube-proxy's own answer) is added by
found.from_nodes.
"""

from __future__ import annotations

import dataclasses
import json
import re

import yaml

_ARCH = re.compile(r"-(amd64|arm64|arm|ppc64le|s390x)$")
# CNIs found by name that have no recogniser here: named, nothing more read
OTHER_CNIS = ("antrea", "weave", "kindnet", "ovn", "canal", "multus")


@dataclasses.dataclass
class Fingerprint:
    cni: str = "unknown"
    version: str = ""
    encapsulation: str = ""     # vxlan | geneve | ipip | udp | wireguard | none ("": not read)
    routing: str = ""           # tunnel | native | cross-subnet (tunnel only between subnets)
    encryption: str = ""        # none | wireguard | ipsec
    dataplane: str = ""         # ebpf | iptables | nftables | ipvs …
    kube_proxy: str = ""        # iptables | ipvs | nftables | none | replaced by … ("": not read)
    mtu: int | None = None
    details: dict = dataclasses.field(default_factory=dict)
    seen: list[str] = dataclasses.field(default_factory=list)

    def summary(self) -> str:
        """`cilium 1.16.1, vxlan, kube-proxy replacement`: the CNI and what differs."""
        head = f"{self.cni} {self.version}".strip()
        parts = [head]
        if self.encapsulation:
            parts.append(self.encapsulation if self.encapsulation != "none" else "no encapsulation")
        if self.routing == "cross-subnet":
            parts.append("cross-subnet only")
        if self.encryption and self.encryption not in ("none", self.encapsulation):
            parts.append(self.encryption)
        if self.dataplane not in ("", "iptables") and self.cni != "cilium":     # cilium's is always eBPF
            parts.append(self.dataplane)
        if self.kube_proxy.startswith("replaced"):
            parts.append("kube-proxy replacement")
        elif self.kube_proxy == "none":
            parts.append("no kube-proxy")
        elif self.kube_proxy and self.kube_proxy != "iptables":
            parts.append(f"kube-proxy {self.kube_proxy}")
        return ", ".join(parts)

    def as_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d["summary"] = self.summary()
        return {k: v for k, v in d.items() if v not in ("", None, {}, [])}


# ------------------------------------------------------------------ the objects' plain parts
def _name(obj: dict) -> str:
    return (obj.get("metadata") or {}).get("name", "")


def _ns(obj: dict) -> str:
    return (obj.get("metadata") or {}).get("namespace", "")


def containers(ds: dict) -> list[dict]:
    spec = (((ds.get("spec") or {}).get("template") or {}).get("spec") or {})
    return list(spec.get("containers") or [])


def image_version(image: str) -> str:
    """The tag of an image reference, without a digest or an architecture suffix ("" where
    it has none): quay.io/cilium/cilium:v1.16.1@sha256:… → v1.16.1."""
    ref = image.split("@", 1)[0]
    last = ref.rsplit("/", 1)[-1]
    if ":" not in last:
        return ""
    return _ARCH.sub("", last.rsplit(":", 1)[1])


def env(container: dict) -> dict[str, str]:
    """A container's env as name → value; a value from a ConfigMap key reads
    `configMapKeyRef:NAME/KEY` (the ConfigMap itself is read where it matters)."""
    out = {}
    for e in container.get("env") or []:
        if "value" in e:
            out[e["name"]] = str(e["value"])
        else:
            ref = (e.get("valueFrom") or {}).get("configMapKeyRef")
            if ref:
                out[e["name"]] = f"configMapKeyRef:{ref.get('name')}/{ref.get('key')}"
    return out


def flags(container: dict) -> dict[str, str]:
    """`--name=value` and bare `--name` (→ "true") of a container's command and args."""
    out = {}
    for a in list(container.get("command") or []) + list(container.get("args") or []):
        if isinstance(a, str) and a.startswith("--"):
            k, eq, v = a[2:].partition("=")
            out[k] = v if eq else "true"
    return out


def _true(v) -> bool:
    return str(v).strip().lower() in ("true", "1", "yes", "enabled", "strict")


def _daemonset(objects: dict, pattern: str) -> dict | None:
    return next((d for d in objects.get("daemonsets") or [] if re.search(pattern, _name(d))), None)


def _daemonset_by_image(objects: dict, needle: str) -> dict | None:
    return next((d for d in objects.get("daemonsets") or []
                 if any(needle in (c.get("image") or "") for c in containers(d))), None)


def _configmap(objects: dict, name: str, namespace: str = "") -> dict | None:
    return next((c for c in objects.get("configmaps") or []
                 if _name(c) == name and (not namespace or _ns(c) == namespace)), None)


def _version_of(ds: dict, image_part: str) -> str:
    c = next((c for c in containers(ds) if image_part in (c.get("image") or "")), None)
    return image_version(c["image"]) if c else ""


def _mtu(v) -> int | None:
    try:
        n = int(str(v).strip())
    except (TypeError, ValueError):
        return None
    return n or None            # 0: detected by the CNI itself, not set


# ------------------------------------------------------------------ one recogniser per CNI
def _agent(objects: dict, cni: str, pattern: str, image: str, configmap: str,
           dataplane: str) -> tuple[Fingerprint | None, dict | None]:
    """A CNI known by its agent's DaemonSet (by name, else by image) and its ConfigMap: the
    fingerprint begun from what was seen, and the ConfigMap (None: not read); (None, None):
    neither is there."""
    ds = _daemonset(objects, pattern) or _daemonset_by_image(objects, image)
    cm = _configmap(objects, configmap)
    if ds is None and cm is None:
        return None, None
    fp = Fingerprint(cni, dataplane=dataplane)
    if ds is not None:
        fp.version = _version_of(ds, cni)
        fp.seen.append(f"daemonset {_ns(ds)}/{_name(ds)}")
    fp.seen.append(f"configmap {_ns(cm)}/{configmap}" if cm is not None else f"configmap {configmap}: not read")
    return fp, cm


def cilium(objects: dict) -> Fingerprint | None:
    fp, cm = _agent(objects, "cilium", r"^cilium$", "/cilium:", "cilium-config", "ebpf")
    if cm is None:              # not there (None), or its ConfigMap not read
        return fp
    data = cm.get("data") or {}
    routing, proto = data.get("routing-mode", ""), data.get("tunnel-protocol", "")
    if not routing and data.get("tunnel"):           # before 1.14: tunnel: vxlan|geneve|disabled
        old = data["tunnel"]
        routing, proto = ("native", "") if old == "disabled" else ("tunnel", old)
    if routing == "native":
        fp.routing, fp.encapsulation = "native", "none"
    elif routing == "tunnel":
        fp.routing, fp.encapsulation = "tunnel", proto or "vxlan"
    kpr = data.get("kube-proxy-replacement", "")
    if kpr:
        fp.details["kube_proxy_replacement"] = kpr
    if _true(kpr):
        fp.kube_proxy = "replaced by cilium"
    fp.encryption = "wireguard" if _true(data.get("enable-wireguard")) else \
        "ipsec" if _true(data.get("enable-ipsec")) else "none"
    fp.mtu = _mtu(data.get("mtu"))
    for key in ("ipam", "datapath-mode", "cni-chaining-mode"):
        if data.get(key):
            fp.details[key] = data[key]
    return fp


_ON = ("Always", "CrossSubnet")


def calico(objects: dict) -> Fingerprint | None:
    ds = _daemonset(objects, r"^calico-node$") or _daemonset_by_image(objects, "calico/node")
    pools = [p for p in objects.get("ippools") or [] if not (p.get("spec") or {}).get("disabled")]
    if ds is None and not pools:
        return None
    fp = Fingerprint("calico", dataplane="iptables")
    node = {}
    if ds is not None:
        fp.version = _version_of(ds, "calico/node")
        node = next((env(c) for c in containers(ds) if "calico/node" in (c.get("image") or "")), {})
        fp.seen.append(f"daemonset {_ns(ds)}/{_name(ds)}")
    if pools:
        ipip = {(p.get("spec") or {}).get("ipipMode") or "Never" for p in pools}
        vxlan = {(p.get("spec") or {}).get("vxlanMode") or "Never" for p in pools}
        fp.details["ippools"] = {_name(p): {k: (p.get("spec") or {}).get(k) for k in
                                            ("cidr", "ipipMode", "vxlanMode", "natOutgoing")
                                            if (p.get("spec") or {}).get(k) is not None} for p in pools}
        fp.seen.append(f"ippools {', '.join(_name(p) for p in pools)}")
        where = "ippools"
    elif node:
        ipip, vxlan = {node.get("CALICO_IPV4POOL_IPIP", "Never")}, {node.get("CALICO_IPV4POOL_VXLAN", "Never")}
        fp.seen.append("calico-node env CALICO_IPV4POOL_IPIP/VXLAN (the default pool as first made; "
                       "IPPools not read)")
        where = "env"
    else:
        ipip = vxlan = set()
        where = ""
    if where:
        on_v, on_i = vxlan & set(_ON), ipip & set(_ON)
        fp.encapsulation = "vxlan" if on_v else "ipip" if on_i else "none"
        modes = on_v | on_i
        fp.routing = "native" if not modes else "tunnel" if "Always" in modes else "cross-subnet"
    felix = next((f for f in objects.get("felixconfigurations") or [] if _name(f) == "default"), None)
    spec = (felix or {}).get("spec") or {}
    if felix is not None:
        fp.seen.append("felixconfiguration default")
    bpf = spec.get("bpfEnabled", node.get("FELIX_BPFENABLED"))
    nft = spec.get("nftablesMode", node.get("FELIX_NFTABLESMODE"))
    backend = spec.get("iptablesBackend", node.get("FELIX_IPTABLESBACKEND"))
    if _true(bpf):
        fp.dataplane = "ebpf"
    elif str(nft or "").lower() == "enabled":
        fp.dataplane = "nftables"
    if backend and fp.dataplane == "iptables":
        fp.details["iptables_backend"] = str(backend)
    wg = spec.get("wireguardEnabled", node.get("FELIX_WIREGUARDENABLED"))
    fp.encryption = "wireguard" if _true(wg) else "none"
    if fp.dataplane == "ebpf":
        fp.kube_proxy = "replaced by calico ebpf"
    cm = _configmap(objects, "calico-config")
    if cm is not None:
        fp.seen.append(f"configmap {_ns(cm)}/calico-config")
        fp.mtu = _mtu((cm.get("data") or {}).get("veth_mtu"))
        if (cm.get("data") or {}).get("calico_backend"):
            fp.details["calico_backend"] = cm["data"]["calico_backend"]
    return fp


FLANNEL_BACKENDS = {"vxlan": ("vxlan", "tunnel", "none"), "host-gw": ("none", "native", "none"),
                    "udp": ("udp", "tunnel", "none"), "wireguard": ("wireguard", "tunnel", "wireguard"),
                    "extension": ("", "", ""), "ipsec": ("ipsec", "tunnel", "ipsec"),
                    "ipip": ("ipip", "tunnel", "none")}


def flannel(objects: dict) -> Fingerprint | None:
    fp, cm = _agent(objects, "flannel", r"flannel", "flannel:", "kube-flannel-cfg", "iptables")
    if cm is None:              # not there (None), or its ConfigMap not read
        return fp
    data = cm.get("data") or {}
    try:
        net = json.loads(data.get("net-conf.json") or "{}")
    except ValueError as e:
        fp.seen.append(f"net-conf.json: not JSON ({e})")
        net = {}
    backend = net.get("Backend") or {}
    kind = str(backend.get("Type") or "").lower()
    if kind:
        fp.encapsulation, fp.routing, fp.encryption = FLANNEL_BACKENDS.get(kind, ("", "", ""))
        fp.details["backend"] = kind
        if kind == "vxlan" and _true(backend.get("DirectRouting")):
            fp.routing = "cross-subnet"
    if net.get("Network"):
        fp.details["network"] = net["Network"]
    try:
        conf = json.loads(data.get("cni-conf.json") or "{}")
    except ValueError:
        conf = {}
    for plugin in conf.get("plugins") or [conf]:
        if plugin.get("type") == "flannel":
            fp.mtu = _mtu(plugin.get("mtu") or (plugin.get("delegate") or {}).get("mtu"))
    return fp


def aws_vpc_cni(objects: dict) -> Fingerprint | None:
    ds = _daemonset(objects, r"^aws-node$") or _daemonset_by_image(objects, "amazon-k8s-cni:")
    if ds is None:
        return None
    fp = Fingerprint("aws-vpc-cni", encapsulation="none", routing="native", encryption="none",
                     dataplane="iptables")
    fp.version = _version_of(ds, "amazon-k8s-cni:")
    fp.seen.append(f"daemonset {_ns(ds)}/{_name(ds)} (routed VPC ENIs)")
    e = next((env(c) for c in containers(ds) if "amazon-k8s-cni:" in (c.get("image") or "")), {})
    fp.mtu = _mtu(e.get("AWS_VPC_ENI_MTU"))
    if _true(e.get("ENABLE_NFTABLES")):
        fp.dataplane = "nftables"
    for key, name in (("AWS_VPC_K8S_CNI_EXTERNALSNAT", "external_snat"), ("ENABLE_POD_ENI", "pod_eni"),
                      ("ENABLE_PREFIX_DELEGATION", "prefix_delegation"), ("ENABLE_IPv6", "ipv6"),
                      ("AWS_VPC_K8S_CNI_CUSTOM_NETWORK_CFG", "custom_network")):
        if key in e:
            fp.details[name] = e[key]
    return fp


def kube_router(objects: dict) -> Fingerprint | None:
    ds = _daemonset(objects, r"^kube-router") or _daemonset_by_image(objects, "kube-router")
    if ds is None:
        return None
    fp = Fingerprint("kube-router", dataplane="iptables", encryption="none")
    c = next((c for c in containers(ds) if "kube-router" in (c.get("image") or "")), containers(ds)[0])
    fp.version = image_version(c.get("image") or "")
    f = flags(c)
    fp.seen.append(f"daemonset {_ns(ds)}/{_name(ds)} args")
    fp.details = {k: f[k] for k in ("run-router", "run-firewall", "run-service-proxy", "enable-overlay",
                                    "overlay-type", "overlay-encap") if k in f}
    # kube-router's defaults: every part runs; the overlay only between subnets, over IPIP
    if _true(f.get("run-router", "true")):
        if _true(f.get("enable-overlay", "true")):
            fp.encapsulation = f.get("overlay-encap", "ipip")
            fp.routing = "tunnel" if f.get("overlay-type", "subnet") == "full" else "cross-subnet"
        else:
            fp.encapsulation, fp.routing = "none", "native"
    if _true(f.get("run-service-proxy", "true")):
        fp.kube_proxy = "replaced by kube-router (ipvs)"
    return fp


RECOGNISERS = (cilium, calico, flannel, aws_vpc_cni, kube_router)


def kube_proxy_mode(objects: dict) -> tuple[str, str]:
    """kube-proxy's mode and where it was read: its ConfigMap's config.conf `mode:` (empty:
    iptables, the Linux default), else its --proxy-mode flag; "none" where no kube-proxy
    DaemonSet runs; "" where it runs but its mode could not be read."""
    ds = _daemonset(objects, r"^kube-proxy")
    if ds is None:
        return "none", "no kube-proxy daemonset"
    for c in containers(ds):
        mode = flags(c).get("proxy-mode")
        if mode:
            return mode, f"daemonset {_ns(ds)}/{_name(ds)} --proxy-mode"
    for name, key in (("kube-proxy", "config.conf"), ("kube-proxy-config", "config")):
        cm = _configmap(objects, name)
        text = ((cm or {}).get("data") or {}).get(key)
        if not text:
            continue
        try:
            conf = yaml.safe_load(text) or {}
        except yaml.YAMLError:
            return "", f"configmap {_ns(cm)}/{name} {key}: not YAML"
        mode = str(conf.get("mode") or "") if isinstance(conf, dict) else ""
        return mode or "iptables", f"configmap {_ns(cm)}/{name} {key} mode: {mode or '(empty: iptables)'}"
    return "", f"daemonset {_ns(ds)}/{_name(ds)}; its configmap not read"


def of(objects: dict) -> Fingerprint:
    """The fingerprint of the cluster these objects were read from (module doc)."""
    found = [fp for fp in (r(objects) for r in RECOGNISERS) if fp is not None]
    if found:
        # calico's policy beside flannel's network (canal) or cilium chained: the first wins,
        # and the others are named
        fp = found[0]
        if len(found) > 1:
            fp.details["also"] = [f.cni for f in found[1:]]
    else:
        fp = Fingerprint()
        names = [f"{_ns(d)}/{_name(d)} ({', '.join(c.get('image', '') for c in containers(d))})"
                 for d in objects.get("daemonsets") or []]
        text = " ".join(names).lower()
        other = next((c for c in OTHER_CNIS if c in text), "")
        if other:
            fp.cni = other
            ds = next(d for d in objects["daemonsets"] if other in (_name(d) + str(containers(d))).lower())
            fp.version = _version_of(ds, other) if any(other in (c.get("image") or "") for c in containers(ds)) \
                else ""
            fp.seen.append(f"{other}: named by its daemonset; no recogniser reads its configuration")
        fp.seen += [f"daemonset {n}" for n in names] or ["no daemonset of a known CNI"]
    mode, where = kube_proxy_mode(objects)
    if not fp.kube_proxy.startswith("replaced"):
        fp.kube_proxy = mode
    elif mode != "none":
        fp.details["kube_proxy_also_running"] = mode or "mode not read"
    fp.seen.append(where)
    fp.seen += list(objects.get("unread") or [])
    return fp
