"""Least privilege for the run's pods, and Pod Security Standards as pure checks.

Each pod gets only what its tools need, and the namespace's Pod Security level follows:

    level        pods                                          why
    restricted   pod-network pods, non-root (uid 65534)         iperf3, qperf, sockperf, iperf, irtt
                                                                on unprivileged ports need nothing
    privileged   + pod-network pods as root with NET_RAW        ping -f: an unprivileged user may not
                                                                flood (iputils: interval >= 2 ms);
                                                                packet.*: blast's packet socket; and
                                                                "baseline" admits no NET_RAW
                 + hostNetwork pods (root, NET_RAW)             the native reference, host-* placements

Every container drops ALL capabilities (adding back NET_RAW only where ping -f runs), forbids
privilege escalation and runs under the runtime's default seccomp profile. A non-root pod's
own group may open ICMP datagram sockets (net.ipv4.ping_group_range, a sysctl every level
admits): a single ping, such as the MTU doctor's DF probes, needs no NET_RAW.

`violations(pod, level)` checks a pod manifest against the Pod Security Standards' rules
the run's pods could break (host namespaces, privileged, capabilities, runAsNonRoot and
runAsUser, allowPrivilegeEscalation, seccomp, sysctls, hostPath, hostPorts): [] where the
level admits it. Pure: nothing here reaches the API.
"""

from __future__ import annotations

LEVELS = ("restricted", "baseline", "privileged")      # strictest first
NONROOT_UID = 65534                                     # nobody, in the Debian tools image
# baseline's allowed capabilities to add (restricted: NET_BIND_SERVICE only)
BASELINE_CAPS = {"AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD", "NET_BIND_SERVICE",
                 "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT"}
SAFE_SYSCTLS = {"kernel.shm_rmid_forced", "net.ipv4.ip_local_port_range", "net.ipv4.ip_unprivileged_port_start",
                "net.ipv4.tcp_syncookies", "net.ipv4.ping_group_range", "net.ipv4.ip_local_reserved_ports",
                "net.ipv4.tcp_keepalive_time", "net.ipv4.tcp_fin_timeout", "net.ipv4.tcp_keepalive_intvl",
                "net.ipv4.tcp_keepalive_probes"}


def level_of(host_network: bool, raw_sockets: bool) -> str:
    """The least Pod Security level that admits the run's pods."""
    return "privileged" if host_network or raw_sockets else "restricted"


def admits(enforced: str, needed: str) -> bool:
    """Whether a namespace enforcing `enforced` admits pods of level `needed`."""
    if enforced not in LEVELS:           # no label (the cluster's default) or one unknown here: not judged
        return True
    return LEVELS.index(enforced) >= LEVELS.index(needed)


def security(host_network: bool, raw_sockets: bool) -> tuple[dict, dict]:
    """(the pod's securityContext, its container's) for a pod of that network that runs
    ping (`raw_sockets`) or not."""
    container: dict = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}
    pod: dict = {"seccompProfile": {"type": "RuntimeDefault"}}
    if host_network or raw_sockets:
        container["capabilities"]["add"] = ["NET_RAW"]          # ping's ICMP socket, as root
    else:
        pod.update(runAsNonRoot=True, runAsUser=NONROOT_UID, runAsGroup=NONROOT_UID,
                   sysctls=[{"name": "net.ipv4.ping_group_range", "value": f"{NONROOT_UID} {NONROOT_UID}"}])
    return pod, container


def violations(pod: dict, level: str = "restricted") -> list[str]:
    """What in `pod` (a manifest) the Pod Security Standard `level` forbids; [] where none."""
    if level == "privileged":
        return []
    spec = pod.get("spec", {})
    psc = spec.get("securityContext") or {}
    out = [f"{k}=true" for k in ("hostNetwork", "hostPID", "hostIPC") if spec.get(k)]
    out += [f"hostPath volume {v.get('name')}" for v in spec.get("volumes") or [] if "hostPath" in v]
    for s in psc.get("sysctls") or []:
        if s.get("name") not in SAFE_SYSCTLS:
            out.append(f"sysctl {s.get('name')}")
    for c in spec.get("containers", []) + spec.get("initContainers", []):
        sc, name = c.get("securityContext") or {}, c.get("name", "?")
        if sc.get("privileged"):
            out.append(f"container {name}: privileged")
        if any(p.get("hostPort") for p in c.get("ports") or []):
            out.append(f"container {name}: hostPort")
        add = set((sc.get("capabilities") or {}).get("add") or [])
        allowed = {"NET_BIND_SERVICE"} if level == "restricted" else BASELINE_CAPS
        if add - allowed:
            out.append(f"container {name}: capabilities.add {sorted(add - allowed)}")
        if level != "restricted":
            continue
        if sc.get("allowPrivilegeEscalation") is not False:
            out.append(f"container {name}: allowPrivilegeEscalation != false")
        if "ALL" not in ((sc.get("capabilities") or {}).get("drop") or []):
            out.append(f"container {name}: capabilities.drop lacks ALL")
        if not sc.get("runAsNonRoot", psc.get("runAsNonRoot")):
            out.append(f"container {name}: runAsNonRoot != true")
        if sc.get("runAsUser", psc.get("runAsUser")) == 0:
            out.append(f"container {name}: runAsUser=0")
        seccomp = (sc.get("seccompProfile") or psc.get("seccompProfile") or {}).get("type")
        if seccomp not in ("RuntimeDefault", "Localhost"):
            out.append(f"container {name}: seccompProfile {seccomp or 'unset'}")
    return out
