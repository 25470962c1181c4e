"""What the real Flannel is given and gives back, without hosts: its network (and what it
may not overlap), the VXLAN VNI that names a testbed, its subnet file, the pinned binary
and its version. harness/modes/flannel.py deploys it."""

from __future__ import annotations

import ipaddress
import os
import pathlib
import re

from harness.bed import Testbed
from harness.core.errors import HarnessError
from harness.core.paths import PROJECT

# The flannel network (an SSH inventory may name another, `flannel_network`): in the
# benchmark range 198.18.0.0/15, clear of the lab's underlay (198.18.0.0/24), overlay
# (198.18.64.0/24) and management links (198.18.128.0/17) and dockerd's bridge (198.19.254.0/24).
NETWORK = "198.19.64.0/18"
RANGE = "198.18.0.0/15"
RESERVED = ("198.18.0.0/24", "198.18.64.0/24", "198.18.128.0/17", "198.19.254.0/24")
SUBNET_LEN = 24
BINARY = PROJECT / ".venv" / "bin" / "flanneld"
ENV_BINARY = "OVERLAYBENCH_FLANNELD"
MODULE = "github.com/flannel-io/flannel"
VNI_BASE = 1 << 20         # a real host's VXLAN VNI: this plus the prefix's 16 bits


def vni_for(prefix: str) -> int:
    """The VXLAN VNI (and so the device flannel.<VNI>) of a testbed: 1 inside a lab
    namespace, else one that names the prefix, so `down` can find a killed run's device."""
    return VNI_BASE + int(prefix[2:], 16) if prefix else 1


def forwarding(dev: str) -> str:
    """The forwarding sysctl of `dev`, spelt with slashes: a device name may hold a dot
    (flannel.1, eth0.100), which the dotted form would split."""
    return f"net/ipv4/conf/{dev}/forwarding"


def check_network(value: str) -> str:
    """A flannel network as given, or ValueError saying why it cannot be one."""
    try:
        net = ipaddress.IPv4Network(value)
    except ValueError as e:
        raise ValueError(f"{value!r}: not an IPv4 network ({e})") from None
    if not net.subnet_of(ipaddress.IPv4Network(RANGE)):
        raise ValueError(f"{value}: outside the benchmark range {RANGE}")
    if net.prefixlen > SUBNET_LEN - 2:
        raise ValueError(f"{value}: too small for a /{SUBNET_LEN} per host (at most /{SUBNET_LEN - 2})")
    for other in RESERVED:
        if net.overlaps(ipaddress.IPv4Network(other)):
            raise ValueError(f"{value}: overlaps {other}, a range the lab or dockerd uses")
    return value


def parse_subnet_env(text: str) -> dict[str, str]:
    """flanneld's subnet file (FLANNEL_NETWORK=…, FLANNEL_SUBNET=…, FLANNEL_MTU=…), checked."""
    env = {}
    for line in text.splitlines():
        key, eq, val = line.strip().partition("=")
        if eq and key.startswith("FLANNEL_"):
            env[key] = val.strip()
    try:
        ipaddress.ip_interface(env["FLANNEL_SUBNET"])
        ipaddress.ip_network(env["FLANNEL_NETWORK"])
        int(env["FLANNEL_MTU"])
    except (KeyError, ValueError) as e:
        raise HarnessError(f"flanneld's subnet file lacks or garbles {e}: {text[:200]!r}") from None
    return env


def network(testbed: Testbed) -> str:
    """The testbed's flannel network: its inventory's, else NETWORK."""
    return testbed.flannel_network or NETWORK


def endpoint_addrs(subnet: str) -> tuple[str, str]:
    """(bridge, container) addresses in a host's flannel subnet ("198.19.71.1/24"): its first
    two, as Docker's --bip gave the bridge the first."""
    net = ipaddress.ip_interface(subnet).network
    return str(net.network_address + 1), str(net.network_address + 2)


def find_binary(built: pathlib.Path | None = None) -> pathlib.Path:
    given = os.environ.get(ENV_BINARY)
    if given:
        if not os.access(given, os.X_OK):
            raise HarnessError(f"{ENV_BINARY}={given}: not an executable file")
        return pathlib.Path(given)
    built = built or BINARY
    if os.access(built, os.X_OK):
        return built
    raise HarnessError(f"flannel modes: flanneld is not built ({built} missing): run make setup "
                       f"(or make flanneld)")


def version_of(binary: pathlib.Path) -> str:
    m = re.search(rb"\t" + re.escape(MODULE.encode()) + rb"\t(v[0-9A-Za-z.+-]+)\t", binary.read_bytes())
    return m.group(1).decode() if m else "unknown"
