"""`overlaybench doctor`'s checks: what this machine can run, what is missing, how to install it.

Kernel features are probed for real, by creating the device or qdisc in a scratch
namespace that carries a lab prefix (so `down` would remove it after a kill).
"""

from __future__ import annotations

import dataclasses
import importlib.util
import os
import secrets
import shutil
import subprocess

from harness import modes
from harness.core.errors import HarnessError, UnsupportedError
from harness.hosts.local import LocalHost
from harness.modes import flannel_config as flannel
from harness.modes import wireguard
from harness.run import scenario as scen
from harness.sleeve import build as sleeve_build
from harness.testbeds import preflight
from harness.testbeds.containers import docker as dc
from harness.tools import get as get_tool
from harness.tools.packages import install_hint


@dataclasses.dataclass
class Check:
    group: str
    name: str
    ok: bool
    detail: str = ""
    fix: str = ""
    required: bool = True


def _run(argv, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(argv, capture_output=True, text=True, timeout=20, **kw)


# (name, what it is, argv run inside the scratch namespace, required)
KERNEL_PROBES = [
    ("veth", "veth pairs (the underlay)", ["ip", "link", "add", "pv0", "type", "veth", "peer", "name", "pv1"], True),
    ("bridge", "Linux bridge (the overlay bridge)", ["ip", "link", "add", "pb0", "type", "bridge"], True),
    ("vxlan", "kernel VXLAN", ["ip", "link", "add", "px0", "type", "vxlan", "id", "1", "dstport", "4789"], True),
    ("tun", "TUN/TAP", ["ip", "tuntap", "add", "pt0", "mode", "tap"], True),
    ("tbf", "tbf rate cap", ["tc", "qdisc", "add", "dev", "lo", "root", "tbf", "rate", "1gbit", "burst", "64k", "latency", "50ms"], True),
    ("nftables", "nftables (each testbed's forwarding table)", ["nft", "add", "table", "inet", "pobchk"], True),
    ("netem", "netem delay/loss emulation", ["tc", "qdisc", "add", "dev", "lo", "root", "netem", "delay", "1ms"], False),
    ("geneve", "GENEVE tunnels", ["ip", "link", "add", "pg0", "type", "geneve", "id", "1", "remote", "198.18.0.2"], False),
    ("gre", "GRE tunnels", ["ip", "link", "add", "pgr0", "type", "gretap", "local", "198.18.0.1", "remote", "198.18.0.2"], False),
    ("ipip", "IPIP tunnels", ["ip", "link", "add", "pi0", "type", "ipip", "local", "198.18.0.1", "remote", "198.18.0.2"], False),
    ("wireguard", "kernel WireGuard (mode wireguard)", ["ip", "link", "add", "pw0", "type", "wireguard"], False),
    ("openvswitch", "Open vSwitch datapath", ["ip", "link", "add", "po0", "type", "openvswitch"], False),
    ("xfrm-esp", "kernel IPsec ESP with AES-GCM", ["ip", "xfrm", "state", "add", "src", "198.18.0.1", "dst", "198.18.0.2",
                                                   "proto", "esp", "spi", "0x100", "mode", "transport", "aead",
                                                   "rfc4106(gcm(aes))", "0x" + "11" * 20, "128"], False),
]

TOOLS = [("iperf3", True), ("qperf", True), ("sockperf", False), ("ping", True), ("ip", True), ("tc", True), ("bridge", True),
         ("ss", True), ("ethtool", False), ("nft", True), ("gcc", True), ("make", True)]

PY_MODULES = [("pandas", True), ("jinja2", True), ("matplotlib", True), ("scipy", True),
              ("paramiko", False), ("docker", False), ("kubernetes", False)]


def kernel_checks() -> list[Check]:
    if os.geteuid() != 0:
        return [Check("kernel", "features", False, "probing needs root", "run as root")]
    ns = f"ob{secrets.token_hex(2)}-h9"
    if _run(["ip", "netns", "add", ns]).returncode != 0:
        return [Check("kernel", "netns", False, "cannot create a network namespace", "a kernel with CONFIG_NET_NS")]
    out = [Check("kernel", "netns", True, "network namespaces")]
    try:
        for name, what, argv, required in KERNEL_PROBES:
            needers = modes.standard().needing(name)
            what = f"{what} ({', '.join(needers)})" if needers else what
            p = _run(["ip", "netns", "exec", ns, *argv])
            detail = what if p.returncode == 0 else f"{what}: unsupported here ({(p.stderr.strip().splitlines() or ['failed'])[-1]})"
            out.append(Check("kernel", name, p.returncode == 0, detail,
                             "" if p.returncode == 0 or not required else "load the module or use a kernel that has it",
                             required))
    finally:
        _run(["ip", "netns", "del", ns])
    return out


def tool_checks() -> list[Check]:
    out = []
    for tool, required in TOOLS:
        path = shutil.which(tool)
        out.append(Check("tools", tool, path is not None, path or "not found",
                         "" if path else install_hint([tool]), required))
    ssl = os.path.exists("/usr/include/openssl/evp.h")
    out.append(Check("tools", "libssl-dev", ssl, "openssl/evp.h" if ssl else "headers not found",
                     "" if ssl else "apt-get install -y libssl-dev"))
    return out


def python_checks() -> list[Check]:
    out = []
    for mod, required in PY_MODULES:
        ok = importlib.util.find_spec(mod) is not None
        out.append(Check("python", mod, ok, "importable" if ok else "missing",
                         "" if ok else "make setup (installs the .venv)", required))
    return out


def sleeve_checks() -> list[Check]:
    try:
        src = sleeve_build.Source.shipped()
    except HarnessError as e:
        return [Check("overlay", "sleeve", False, str(e), "", required=False)]
    try:
        binary = sleeve_build.build_local()
    except HarnessError as e:
        return [Check("overlay", "sleeve", False, str(e), "apt-get install -y make gcc libssl-dev pkg-config")]
    v = _run([str(binary), "--version"])
    first = (v.stdout.strip() or v.stderr.strip()).splitlines()[:1]  # one line per check
    return [Check("overlay", "sleeve", v.returncode == 0,
                  f"{first[0] if first else 'no version'} (source {src.hash}, {binary})")]


def remote_checks(hosts, cpus: dict[str, str] | None = None, source: str = "the inventory") -> list[Check]:
    """The run's checks on each inventory host (reachable, root or sudo, tools, kernel
    features, and taskset and the CPUs where `cpus` pins a host by name) for a scenario
    using every mode and test (but blast's: built on this machine, the lab's alone)."""
    every = scen.Scenario(modes=("fastdp", "sleeve"), tests=tuple(t for t in scen.TESTS if not get_tool(t).builds))
    out = []
    for name, host in hosts:
        try:
            problems = preflight.host_problems(host, name, every, cpus=(cpus or {}).get(name), cpus_from=source)
        except HarnessError as e:
            problems = [str(e)]
        finally:
            host.close()
        if problems:
            out += [Check("remote", name, False, p) for p in problems]
        else:
            out.append(Check("remote", name, True, "reachable, root, tools and kernel features present"))
    return out


def wireguard_go_checks() -> list[Check]:
    """One line: the pinned wireguard-go built (and its version), or why not."""
    try:
        binary = wireguard.find_binary()
        detail = wireguard.go_version(binary)
    except HarnessError as e:
        unsupported = isinstance(e, UnsupportedError)
        return [Check("overlay", "wireguard-go", False, str(e).split(": ", 1)[-1] if unsupported else "not built",
                      "" if unsupported else "make wireguard-go", required=False)]
    if shutil.which("wg") is None:
        return [Check("overlay", "wireguard-go", False, f"{detail}; `wg` not found",
                      "apt-get install -y --no-install-recommends wireguard-tools", required=False)]
    return [Check("overlay", "wireguard-go", True, detail, required=False)]


def flannel_checks() -> list[Check]:
    """One line: the pinned flanneld built (its module version) and etcd and curl beside it
    (the flannel modes' etcd of their own), or what is missing."""
    try:
        binary = flannel.find_binary()
    except HarnessError:
        return [Check("overlay", "flanneld", False, "not built", "make flanneld", required=False)]
    missing = [b for b in ("etcd", "curl") if shutil.which(b) is None]
    if missing:
        return [Check("overlay", "flanneld", False, f"{flannel.version_of(binary)}; {', '.join(missing)} not found",
                      install_hint(missing), required=False)]
    return [Check("overlay", "flanneld", True, f"{flannel.MODULE} {flannel.version_of(binary)}", required=False)]


def docker_checks() -> list[Check]:
    """dockerd and the tools image, for --containers docker (optional: the default
    container endpoints are bare namespaces)."""
    if importlib.util.find_spec("docker") is None:
        return [Check("docker", "dockerd", False, "the Docker SDK for Python is missing", "make setup", required=False)]
    try:
        client, _ = dc.connect(LocalHost("local"))
    except HarnessError as e:
        return [Check("docker", "dockerd", False, str(e).split("; start one")[0] + ")", "make dockerd-up", required=False)]
    import docker.errors  # the SDK is optional: only --containers docker needs it
    try:
        v = client.version()
        out = [Check("docker", "dockerd", True, f"{v.get('Version')} (API {v.get('ApiVersion')}): "
                                               f"--containers docker", required=False)]
        try:
            img = client.images.get(dc.image_name())
            out.append(Check("docker", "tools-image", True, f"{dc.image_name()} {img.short_id}", required=False))
        except docker.errors.ImageNotFound:
            out.append(Check("docker", "tools-image", False, f"{dc.image_name()} missing", "make tools-image",
                             required=False))
    finally:
        client.close()
    return out


def all_checks() -> list[Check]:
    root = os.geteuid() == 0
    return ([Check("system", "root", root, "running as root" if root else "not root",
                   "" if root else "run as root (namespaces need CAP_NET_ADMIN)")]
            + kernel_checks() + tool_checks() + python_checks() + sleeve_checks() + wireguard_go_checks()
            + flannel_checks()
            + docker_checks())


def render(checks: list[Check]) -> str:
    lines = []
    for c in checks:
        status = "ok" if c.ok else ("MISSING" if c.required else "no")
        fix = f"  → {c.fix}" if c.fix and not c.ok else ""
        lines.append(f"{status:8} {c.group:8} {c.name:12} {c.detail}{fix}")
    missing = [c for c in checks if c.required and not c.ok]
    lines.append("")
    lines.append("all required parts present" if not missing else
                 f"{len(missing)} required part(s) missing: {', '.join(c.name for c in missing)}")
    return "\n".join(lines)
