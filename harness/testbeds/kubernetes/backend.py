"""A Kubernetes cluster as a testbed: two or more of its nodes, each a pair of pods.

Per node (harness/testbeds/kubernetes/specs.py): a hostNetwork pod, the side's host (the
node's own network: what `native` measures), and a pod on the pod network, the side's
container (what `cni` measures), both pinned with nodeName and running the tools image;
with the container-service placement, a ClusterIP Service in front of each pod-network
pod. All of it in the run's namespace, made by build and deleted by teardown (on success,
failure and Ctrl-C alike: the session's `finally`).

Nothing on a node is changed: the underlay's MTU is the node's (read from its hostNetwork
pod; a scenario naming another is refused), and no rate cap can be set. Only `native` and
`cni` run here: a mode that deploys an overlay onto hosts is refused before anything is
made. CPU is per node (PerHostMeter): /proc/stat is not namespaced, so any pod on a node
reads the whole node's.
"""

from __future__ import annotations

import logging
import os
import pathlib
import secrets
import shutil
import socket

from harness.bed import Options, Side, Testbed
from harness.core.errors import HarnessError
from harness.core.placements import PLACEMENTS
from harness.hosts.kube.api import ApiError, Node
from harness.hosts.kube.pod import PodHost
from harness.hosts.local import owned_tempdir, pidns_of
from harness.testbeds import cpusets, facts as facts_mod
from harness.testbeds.cpu import PerHostMeter
from harness.testbeds.kubernetes import found, specs

log = logging.getLogger(__name__)

MODE_KINDS = ("native", "cni")      # what a cluster's backend measures: its nodes' network and its own


def refuse_modes(sc) -> None:
    """One line for the first mode that would deploy an overlay onto the nodes (or for
    container endpoints of another kind than the cluster's pods)."""
    if sc.containers != "netns":
        raise HarnessError(f"--containers {sc.containers}: on the kubernetes backend the containers are the "
                           f"cluster's pods")
    for name in sc.modes:
        if sc.mode(name).kind not in MODE_KINDS:
            raise HarnessError(f"mode {name} deploys an overlay onto the hosts; the kubernetes backend measures "
                               f"the cluster as found: --modes native,cni")


def modes_for(sc, path: str | None) -> list[str] | None:
    """The registry's modes hook (harness/testbeds/registry.py): a scenario's modes are
    overlays the harness deploys onto hosts; on a cluster the overlay is the cluster's own,
    so a scenario with any such mode measures native and cni instead, the same file then
    measuring its nodes' network and its pods'. A scenario whose modes are all of the
    cluster's kinds keeps them (None). Said in a warning when the scenario is a file."""
    other = [m for m in sc.modes if sc.mode(m).kind not in MODE_KINDS]
    if not other:
        return None
    if path:
        log.warning("kubernetes: measuring the cluster's network (native, cni) instead of the scenario's "
                    "modes %s, which deploy overlays onto hosts (--modes native,cni says so)", ", ".join(other))
    return list(MODE_KINDS)


def needs_service(sc) -> bool:
    """Whether a case of `sc` has a service end (its modes' placements as the scenario's
    expand picks them: those asked for that the mode has, else all the mode's)."""
    for m in sc.modes:
        own = sc.mode(m).placements
        chosen = [p for p in sc.placements if p in own] or list(own)
        if any(PLACEMENTS[p].needs_service for p in chosen if p in PLACEMENTS):
            return True
    return False


def permissions(sc, namespace: str) -> list[tuple[str, str, str, str, str]]:
    """(verb, resource, namespace, group, subresource) the run needs, for SelfSubjectAccessReview."""
    need = [("create", "namespaces", "", "", ""), ("delete", "namespaces", "", "", ""),
            ("list", "namespaces", "", "", ""), ("list", "nodes", "", "", ""),
            ("create", "pods", namespace, "", ""), ("get", "pods", namespace, "", ""),
            ("create", "pods", namespace, "", "exec")]
    if needs_service(sc):
        need.append(("create", "services", namespace, "", ""))
    if "cni" in [sc.mode(m).kind for m in sc.modes]:
        need.append(("list", "daemonsets", "kube-system", "apps", ""))
    return need


class KubeTestbed(Testbed):
    """The pods of the module doc. Construct (nothing is made), preflight(), build(), teardown()."""

    backend = "kubernetes"

    def __init__(self, api, nodes: list[Node], opts: Options, server: str = "", sleep=None):
        self.api, self.nodes, self.opts, self.server_version = api, nodes, opts, server
        self.image = opts.image or specs.DEFAULT_IMAGE
        self.prefix = "ob" + secrets.token_hex(2)
        self.namespace = specs.namespace_name(self.prefix)
        self.underlay_mtu = 0
        self.rate: str | None = None
        self.meter = PerHostMeter()
        self.service = False
        self._made = False          # the namespace exists (teardown deletes it)
        self._ready = False         # and everything in it was made and settled
        self._torn_down = False
        self._node_mtu: dict[int, int] = {}
        self._found: dict | None = None
        self._artifacts: pathlib.Path | None = None     # made when first asked for: nothing ships here
        kw = {} if sleep is None else {"sleep": sleep}
        self.sides = tuple(
            Side(index=i, host=PodHost(api, self.namespace, f"h{i}", n.name, node=n.name, **kw),
                 underlay_dev="", underlay_ip=n.address, overlay_ip=n.address, bridge="",
                 container=PodHost(api, self.namespace, f"c{i}", f"{n.name}/c{i}", node=n.name, **kw),
                 container_dev="eth0", workdir="/tmp", prefix=self.prefix)
            for i, n in enumerate(nodes))

    @property
    def artifact_dir(self) -> pathlib.Path:
        if self._artifacts is None:
            self._artifacts = owned_tempdir(self.prefix)
        return self._artifacts

    # ------------------------------------------------------------- before anything is made
    def preflight(self, sc) -> None:
        refuse_modes(sc)
        if sc.rate:
            raise HarnessError("--rate: the kubernetes backend sets nothing on a node (no rate cap)")
        self.service = needs_service(sc)
        missing = [f"{verb} {resource}{'/' + sub if sub else ''}" + (f" ({group})" if group else "")
                   for verb, resource, ns, group, sub in permissions(sc, self.namespace)
                   if not self.api.allowed(verb, resource, ns, group, sub)]
        if missing:
            raise HarnessError(f"forbidden: this kubeconfig's user may not {', '.join(missing)} "
                               "(docs/kubernetes.md, 'Permissions', has the ClusterRole the run needs)")

    def native_mtu(self) -> int:
        """The first node's MTU, read in its hostNetwork pod: the pods are made here (build
        then finds them made)."""
        self._make()
        if 0 not in self._node_mtu:
            raise HarnessError(f"node {self.sides[0].name}: its MTU could not be read "
                               f"({self.sides[0].host.broken or 'no device holds its address'}); "
                               f"give the nodes' MTU (--underlay-mtu N)")
        return self._node_mtu[0]

    def fixed_underlay_mtu(self) -> int | None:
        """The first node's MTU that could be read; None where none could (their pods cannot
        run: the cases that need them fail with the pods' reasons)."""
        self._make()
        return next((self._node_mtu[i] for i in sorted(self._node_mtu)), None)

    # ------------------------------------------------------------- build
    def build(self, underlay_mtu: int, rate: str | None) -> None:
        try:
            self._make()
            self.underlay_mtu, self.rate = underlay_mtu, rate
            self._check_mtu(underlay_mtu)
        except BaseException:
            self.teardown()
            raise
        log.info("kubernetes testbed %s up on %s", self.namespace, ", ".join(n.name for n in self.nodes))

    def _make(self) -> None:
        """The namespace, the pods (and Services), each settled; once. On failure, what was
        made is removed."""
        if self._ready:
            return
        try:
            self.api.create_namespace(specs.namespace(self.prefix, self.opts.run_id, os.getpid(),
                                                      socket.gethostname(), pidns_of()))
            self._made = True
            for s in self.sides:
                for pod, host_network in ((s.host, True), (s.container, False)):
                    self.api.create_pod(self.namespace, specs.pod(pod.pod, pod.node, self.image, host_network))
            if self.service:
                sets = max(1, len(self.sides) * (len(self.sides) - 1))
                for s in self.sides:
                    s.service_ip = self.api.create_service(self.namespace, specs.service(f"s{s.index}", s.container.pod,
                                                                                         sets))
            for s in self.sides:
                self._settle(s)
            self._ready = True
        except BaseException:
            self.teardown()
            raise

    def _settle(self, s: Side) -> None:
        """Wait for the side's pods; learn the pod's address and the node's device and MTU.
        A pod that cannot run is left to fail the cases that need it (PodHost)."""
        st = s.host.wait_running()
        if st is not None:
            s.underlay_ip = s.overlay_ip = st.ip or s.underlay_ip
            done = s.host.run(["ip", "-o", "-4", "addr", "show"], check=False, timeout=20)
            for ln in done.stdout.splitlines():
                f = ln.split()
                if len(f) > 3 and f[3].split("/")[0] == s.underlay_ip:
                    s.underlay_dev = f[1]
            if s.underlay_dev:
                mtu = s.host.run(["cat", f"/sys/class/net/{s.underlay_dev}/mtu"], check=False, timeout=20)
                if mtu.ok and mtu.stdout.strip().isdigit():
                    self._node_mtu[s.index] = int(mtu.stdout.strip())
        else:
            log.warning("%s", s.host.broken)
        cst = s.container.wait_running()
        if cst is not None:
            s.container_ip = cst.ip
        else:
            log.warning("%s", s.container.broken)

    def _check_mtu(self, mtu: int) -> None:
        for s in self.sides:
            have = self._node_mtu.get(s.index)
            if have is not None and have != mtu:
                raise HarnessError(f"node {s.name}: its {s.underlay_dev} has MTU {have}, not the scenario's underlay "
                                   f"MTU {mtu}; the kubernetes backend changes nothing on a node "
                                   f"(--underlay-mtu {have})")

    def set_underlay(self, mtu: int, rate: str | None) -> None:
        if rate:
            raise HarnessError("the kubernetes backend sets no rate cap on a node")
        self._check_mtu(mtu)
        self.underlay_mtu, self.rate = mtu, rate

    def install_sleeve(self, side: Side, source=None) -> str:
        raise HarnessError("the kubernetes backend ships no sleeve: it measures the cluster as found")

    def pod_network(self) -> dict | None:
        if self._found is None:
            self._found = found.pod_network(self.api, self.sides)
        return self._found

    # ------------------------------------------------------------- teardown
    def teardown(self) -> None:
        if self._torn_down:
            return
        self._torn_down = True
        if self._made:
            try:
                self.api.delete_namespace(self.namespace)
            except ApiError as e:
                log.warning("namespace %s not deleted: %s (overlaybench down --kubeconfig removes it)",
                            self.namespace, e)
            else:
                log.info("kubernetes testbed %s deleted", self.namespace)
        if self._artifacts is not None:
            shutil.rmtree(self._artifacts, ignore_errors=True)

    # ------------------------------------------------------------- facts
    def facts(self) -> dict:
        return {"backend": self.backend, "prefix": self.prefix, "namespace": self.namespace,
                "server_version": self.server_version, "image": self.image, "underlay_mtu": self.underlay_mtu,
                "context": self.opts.kube_context, "service": self.service,
                "cpus": cpusets.unpinned(len(self.sides)).facts(),     # pods, as the kubelet places them
                "hosts": {f"h{s.index}": {"name": s.name, "node_ip": s.underlay_ip, "underlay_dev": s.underlay_dev,
                                          "nic_mtu": self._node_mtu.get(s.index), "pod_ip": s.container_ip,
                                          "service_ip": s.service_ip or None,
                                          "broken": s.host.broken or s.container.broken}
                          for s in self.sides}}

    def host_facts(self) -> dict:
        return {f"h{s.index}": facts_mod.host_facts(s.host, s.underlay_dev or "lo") if s.host.broken is None
                else {"error": s.host.broken}
                for s in self.sides}
