"""Facts about the machine and its tools, for run.json and `doctor`."""

from __future__ import annotations

import os
import platform
import socket
import subprocess

from harness.core.paths import PROJECT
from harness.hosts.base import Host
from harness.modes.base import offloads_of
from harness.tools.packages import version_of


def git_commit() -> str | None:
    try:
        sha = subprocess.run(["git", "-C", str(PROJECT), "rev-parse", "HEAD"], capture_output=True,
                             text=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(PROJECT), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        return None
    return (sha + ("-dirty" if dirty else "")) or None


def cpu_model() -> str:
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def machine() -> dict:
    return {"hostname": socket.gethostname(), "kernel": platform.release(), "cpu": cpu_model(),
            "cpus": os.cpu_count(), "python": platform.python_version()}


SYSCTLS = ("net.core.rmem_max", "net.core.wmem_max", "net.ipv4.tcp_congestion_control",
           "net.core.default_qdisc")


def sysctls(host: Host) -> dict:
    out = {}
    for key in SYSCTLS:
        done = host.run(["sysctl", "-n", key], check=False, timeout=5)
        if done.ok:
            out[key] = done.stdout.strip()
    return out


HOST_SCRIPT = r"""
dev=$1
echo "kernel	$(uname -r)"
echo "arch	$(uname -m)"
echo "cpu	$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n1)"
echo "cpus	$(getconf _NPROCESSORS_ONLN 2>/dev/null)"
echo "hostname	$(cat /proc/sys/kernel/hostname)"
echo "nic_driver	$(ethtool -i "$dev" 2>/dev/null | sed -n 's/^driver: //p')"
echo "nic_speed	$(cat /sys/class/net/$dev/speed 2>/dev/null)"
echo "nic_mtu	$(cat /sys/class/net/$dev/mtu 2>/dev/null)"
echo "nic_qdisc	$(tc qdisc show dev "$dev" root 2>/dev/null | head -n1)"
for k in $SYSCTLS; do echo "sysctl:$k	$(sysctl -n "$k" 2>/dev/null)"; done
"""


def host_facts(host: Host, underlay_dev: str, sleeve_source: dict | None = None) -> dict:
    """What run.json records per host: kernel, CPU model and count, NIC driver, speed, MTU,
    qdisc and offloads, sysctls, tool versions (one command for most of it), and the hash of
    the sleeve source installed there per build label (`sleeve_source`, from the testbed's
    install_sleeve: {"shipped": hash} for the project's own sleeve; empty without a sleeve mode)."""
    done = host.run(["env", f"SYSCTLS={' '.join(SYSCTLS)}", "sh", "-c", HOST_SCRIPT, "sh", underlay_dev],
                    check=False, timeout=20)
    out: dict = {"sysctls": {}}
    for line in done.stdout.splitlines():
        key, _, val = line.partition("\t")
        if key.startswith("sysctl:"):
            if val:
                out["sysctls"][key[7:]] = val
        elif key:
            out[key] = val or None
    out["tools"] = {b: version_of(host, b) for b in ("iperf3", "qperf", "ping", "ip")}
    out["nic_offloads"] = offloads_of(host, underlay_dev)
    out["sleeve_source"] = dict(sleeve_source or {})
    return out
