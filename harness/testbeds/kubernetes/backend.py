"""A Kubernetes cluster as a testbed: two or more of its nodes, each a pair of pods.

Per node (harness/testbeds/kubernetes/specs.py): a hostNetwork pod, the side's host (the
node's own network: what `native` measures; made only where a placement has a host end,
else the side's host is its pod-network pod), and a pod on the pod network, the side's
container (what `cni` measures), both pinned with nodeName and running the tools image;
with the container-service placement, a ClusterIP Service in front of each pod-network
pod; with the same-node placement, a second pod-network pod beside each side's own on its
node (`l<i>`, the side's neighbour: same-node's server, never a client). All of it in the
run's namespace (or, with --namespace, in one made beforehand), made at once and awaited
against one deadline by build, and deleted by teardown (on success, failure and Ctrl-C
alike: the session's `finally`): the namespace, or in one made beforehand only what the
run made. What the run needs is decided in plan.py.

With --same-node the two sides are two pod-network pods on the one node picked (each the
side's host, named `<node>/c0` and `<node>/c1` from the start, so the pairs name them):
the pod network's node-local path. No hostNetwork pod is made there, and placements with a
host end are refused (plan.refuse_same_node says why). The
tools' server ports are their own, or from --port-base (Testbed.tool_ports), in the pods
and the Services alike; run.json records each side's node and zone.

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
import time
from concurrent.futures import ThreadPoolExecutor

from harness.bed import Options, Side, Testbed
from harness.core.errors import HarnessError
from harness.hosts.kube.api import ApiError, Node, PodStatus
from harness.hosts.kube.pod import READY_POLL, READY_TIMEOUT, STUCK, PodHost
from harness.hosts.local import owned_tempdir, pidns_of
from harness.testbeds import cpusets, facts as facts_mod
from harness.testbeds.cpu import PerHostMeter
from harness.testbeds.kubernetes import found, nodes as nodes_mod, psa, specs
from harness.testbeds.kubernetes.nodes import INSTANCE_TYPE, ZONE
from harness.testbeds.kubernetes.plan import (at_once, needs_host_network, needs_local, needs_raw_sockets,
                                              needs_service, permissions, pod_settings, refuse_modes,
                                              refuse_same_node, refuse_tools, secret_permissions, tool_ports)

log = logging.getLogger(__name__)
# A failed pull the kubelet retries (its image back-off begins at 10 s) is waited on this long
# before the image is called unpullable: a node's first pull can fail and its retry succeed
# (seen on the local cluster: "no basic auth credentials" on one node of three, though the
# pod carried its pull secret).
RETRIED = ("ErrImagePull", "ImagePullBackOff")
PULL_GRACE = 25.0


class KubeTestbed(Testbed):
    """The pods of the module doc. Construct (nothing is made), preflight(), build(), teardown()."""

    backend = "kubernetes"
    tool_paths = {b: b for b in specs.IMAGE_BUILT}      # blast: the tools image's own, on PATH

    def __init__(self, api, nodes: list[Node], opts: Options, server: str = "", sleep=None,
                 settings: specs.PodSettings | None = None):
        self.api, self.nodes, self.opts, self.server_version = api, nodes, opts, server
        self.pods = settings or pod_settings(opts)
        self.image = self.pods.image
        self.prefix = "ob" + secrets.token_hex(2)
        self.fresh = not opts.kube_namespace          # the run's own namespace, or one made beforehand
        self.namespace = opts.kube_namespace or specs.namespace_name(self.prefix)
        self.labels = specs.run_labels(self.prefix, opts.run_id, os.getpid(), socket.gethostname(), pidns_of())
        self.ready_timeout = opts.pod_ready_timeout or READY_TIMEOUT
        self.underlay_mtu = 0
        self.rate: str | None = None
        self.meter = PerHostMeter()
        self.service = False
        self.local = False          # a second pod-network pod per side, its neighbour (same-node)
        self.host_network = True    # hostNetwork pods made (preflight: only where a placement has a host end)
        self.raw_sockets = False    # pod-network pods as root with NET_RAW (ping)
        self.level = "privileged"   # the Pod Security level the pods need
        self._sets = 1              # pairs measured at once: the Services' ports
        self._secrets: list[dict] = []      # the image pull secrets found (preflight)
        self._made = False          # the namespace exists, or (--namespace) something was made in it
        self._objects: list[tuple[str, str]] = []   # (kind, name) made in an existing namespace
        self._ready = False         # and everything in it was made and settled
        self._torn_down = False
        self._node_mtu: dict[int, int] = {}
        self._found: dict | None = None
        self._artifacts: pathlib.Path | None = None     # made when first asked for: nothing ships here
        self._sleep = sleep or time.sleep
        kw = self._pod_kw = {} if sleep is None else {"sleep": sleep}
        self.same_node = opts.same_node      # both sides' pods on the one node picked: no host end
        self.side_nodes = [nodes[0]] * 2 if self.same_node else list(nodes)
        self.sides = tuple(
            Side(index=i, host=PodHost(api, self.namespace, f"h{i}", n.name, node=n.name, **kw),
                 underlay_dev="", underlay_ip=n.address, overlay_ip=n.address, bridge="",
                 container=PodHost(api, self.namespace, f"c{i}", f"{n.name}/c{i}", node=n.name, **kw),
                 container_dev="eth0", workdir="/tmp", prefix=self.prefix)
            for i, n in enumerate(self.side_nodes))
        if self.same_node:                  # each side its pod-network pod, named apart from the start
            self.host_network = False
            for s in self.sides:
                s.host = s.container

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
        refuse_tools(sc, self.image)
        if self.same_node:
            refuse_same_node(sc)
        self.service, self.local = needs_service(sc), needs_local(sc)
        for s, n in zip(self.sides, self.side_nodes):       # same-node's servers, beside each side's pod
            s.neighbour = PodHost(self.api, self.namespace, f"l{s.index}", f"{n.name}/l{s.index}", node=n.name,
                                  **self._pod_kw) if self.local else None
        self.host_network, self.raw_sockets = needs_host_network(sc), needs_raw_sockets(sc)
        self.level = psa.level_of(self.host_network, self.raw_sockets)
        self._sets = at_once(sc, [s.name for s in self.sides])
        self.tool_ports = tool_ports(self.opts, self._sets)     # a collision: one line, before anything is made
        if not self.host_network:                       # each side's one pod: its pod-network pod, under
            for s in self.sides:                        # the side's name (the pairs name the sides)
                s.container.name, s.host = s.host.name, s.container
        missing = [f"{verb} {resource}{'/' + sub if sub else ''}" + (f" ({group})" if group else "")
                   for verb, resource, ns, group, sub in permissions(sc, self.namespace, self.fresh)
                   + secret_permissions(self.pods.pull_secrets, self.api.current_namespace, self.namespace, self.fresh)
                   if not self.api.allowed(verb, resource, ns, group, sub)]
        if missing:
            role = "ClusterRole" if self.fresh else "Role (and the ClusterRole for nodes)"
            raise HarnessError(f"forbidden: this kubeconfig's user may not {', '.join(missing)} "
                               f"(docs/kubernetes.md, 'Permissions', has the {role} the run needs)")
        if not self.fresh:
            self._check_namespace()
        self._secrets = [self._find_secret(n) for n in self.pods.pull_secrets]

    def _find_secret(self, name: str) -> dict:
        """An image pull secret where it lives: the namespace the run uses (--namespace), else
        the kubeconfig context's namespace, then default; a missing one is one line."""
        where = [self.namespace] if not self.fresh else list(dict.fromkeys([self.api.current_namespace, "default"]))
        for ns in where:
            found_secret = self.api.read_secret(ns, name)
            if found_secret is not None:
                return found_secret
        raise HarnessError(f"--image-pull-secret {name}: no secret {name} in namespace {' or '.join(where)} "
                           f"(or this kubeconfig's user may not read it)")

    def _check_namespace(self) -> None:
        """The existing namespace is there and (where its label can be read) admits the pods."""
        ns = self.api.read_namespace(self.namespace)
        if ns is None:
            log.info("namespace %s: not read (absent or forbidden); its Pod Security level is not checked",
                     self.namespace)
            return
        enforced = ns["labels"].get(specs.ENFORCE, "")
        if not psa.admits(enforced, self.level):
            why = ("hostNetwork pods (the native reference, host-host, host-container) need a namespace admitting "
                   '"privileged" pods' if self.host_network else
                   'ping runs as root with NET_RAW, which needs a namespace admitting "privileged" pods')
            raise HarnessError(f'namespace {self.namespace} enforces Pod Security "{enforced}": {why}; there, '
                               f"--modes cni --placements container-container,container-service"
                               f"{' without ping or packet tests' if self.raw_sockets else ''} can run")

    def native_mtu(self) -> int:
        """The first node's MTU, read in its hostNetwork pod: the pods are made here (build
        then finds them made)."""
        self._make()
        if not self.host_network:
            raise HarnessError("underlay MTU auto: a run with no host end makes no hostNetwork pod to read the "
                               "nodes' MTU in; give it (--underlay-mtu N)")
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
        """The namespace (or, with --namespace, nothing of it), the pods (and Services), each
        settled; once. On failure, what was made is removed."""
        if self._ready:
            return
        try:
            if self.fresh:
                self.api.create_namespace(specs.namespace(self.prefix, self.opts.run_id, os.getpid(),
                                                          socket.gethostname(), pidns_of(), level=self.level))
                self._made = True
                for secret in self._secrets:        # the run's own copies, gone with the namespace
                    self.api.create_object("secrets", self.namespace, specs.secret_copy(secret, self.labels))
            bodies = []
            for s in self.sides:
                if self.host_network:
                    bodies.append(specs.pod(s.host.pod, s.host.node, self.pods, True, labels=self.labels))
                bodies.append(specs.pod(s.container.pod, s.container.node, self.pods, False,
                                        raw_sockets=self.raw_sockets, labels=self.labels))
                if s.neighbour is not None:     # a server only: it never pings, so never NET_RAW
                    bodies.append(specs.pod(s.neighbour.pod, s.neighbour.node, self.pods, False, labels=self.labels))
            with ThreadPoolExecutor(max_workers=min(8, len(bodies))) as pool:    # made at once, not in turn
                errors = [f.exception() for f in [pool.submit(self._create, "pods", b) for b in bodies]]
            err = next((e for e in errors if e is not None), None)
            if err is not None:
                raise self._denied(err) from err
            if self.service:
                ports = specs.service_ports(self._sets, self.opts.port_base)
                for s in self.sides:
                    body = specs.service(f"s{s.index}", s.container.pod, ports, labels=self.labels)
                    s.service_ip = self.api.create_service(self.namespace, body)
                    self._objects.append(("services", body["metadata"]["name"]))
                    self._made = True
            self._await_pods()
            for s in self.sides:
                self._settle(s)
            self._ready = True
        except BaseException:
            self.teardown()
            raise

    def _create(self, kind: str, body: dict) -> None:
        self.api.create_pod(self.namespace, body)
        self._objects.append((kind, body["metadata"]["name"]))
        self._made = True

    def _denied(self, err: BaseException) -> BaseException:
        """An admission denial of a hostNetwork pod in a namespace made beforehand, with what
        would run there."""
        if isinstance(err, ApiError) and err.policy and not self.fresh and self.host_network:
            return HarnessError(f"{err}; hostNetwork pods (the native reference, host-host, host-container) need a "
                                f'namespace admitting "privileged" pods: here --modes cni --placements '
                                f"container-container,container-service can run")
        return err

    def _await_pods(self) -> None:
        """Every pod running, against one deadline; the first that cannot (an image not
        pulled, a container not made) is one line naming node, image and the kubelet's reason."""
        pending = [s.host for s in self.sides if self.host_network] + [s.container for s in self.sides] + \
            [s.neighbour for s in self.sides if s.neighbour is not None]
        deadline = time.monotonic() + self.ready_timeout
        last: dict[str, PodStatus] = {}
        waited, failing = 0.0, {}      # the polls' time, and when each pod's pull began failing
        while pending:
            for pod in list(pending):
                st = last[pod.pod] = self.api.pod_status(self.namespace, pod.pod)
                if st.reason not in RETRIED:
                    failing.pop(pod.pod, None)
                if st.phase == "Running":
                    pod.status = st
                    pending.remove(pod)
                elif st.reason in RETRIED and waited - failing.setdefault(pod.pod, waited) < PULL_GRACE:
                    continue                    # the kubelet tries again: wait for that try
                elif st.reason in STUCK or st.phase in ("Failed", "Succeeded"):
                    msg = " ".join(st.message.split())
                    msg = msg if len(msg) <= 300 else f"{msg[:120]} … {msg[-170:]}"   # the cause is last
                    if "Image" in st.reason or "image" in st.reason:
                        raise HarnessError(f"image {self.image} cannot be pulled on node {pod.node}: {st.reason}"
                                           + (f": {msg}" if msg else ""))
                    raise HarnessError(f"pod {pod.pod} cannot run on node {pod.node}: {st.reason or st.phase}"
                                       + (f": {msg}" if msg else ""))
            if pending and time.monotonic() >= deadline:
                stuck = ", ".join(f"{p.pod} on node {p.node} ({last[p.pod].reason or last[p.pod].phase})"
                                  for p in pending)
                raise HarnessError(f"pods not running after {self.ready_timeout:.0f}s: {stuck} "
                                   f"(--pod-ready-timeout SECONDS waits longer)")
            if pending:
                self._sleep(READY_POLL)
                waited += READY_POLL

    def _settle(self, s: Side) -> None:
        """Learn the pod's address and, from the hostNetwork pod, the node's device and MTU."""
        if self.host_network:
            st = s.host.wait_running()
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
        s.container_ip = s.container.wait_running().ip
        if s.neighbour is not None:
            s.neighbour_ip = s.neighbour.wait_running().ip

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
            self._found = found.pod_network(self.api, self.sides, node_pods=self.host_network)
        return self._found

    # ------------------------------------------------------------- teardown
    def teardown(self) -> None:
        if self._torn_down:
            return
        self._torn_down = True
        if self._made and self.fresh:
            try:
                self.api.delete_namespace(self.namespace)
            except ApiError as e:
                log.warning("namespace %s not deleted: %s (overlaybench down --kubeconfig removes it)",
                            self.namespace, e)
            else:
                log.info("kubernetes testbed %s deleted", self.namespace)
        elif self._made:
            left = []
            for kind, name in self._objects:        # only what this run made; the namespace stays
                try:
                    self.api.delete_object(kind, self.namespace, name)
                except ApiError as e:
                    left.append(f"{kind} {name} ({e})")
            if left:
                log.warning("in namespace %s, not deleted: %s (overlaybench down --kubeconfig --namespace %s "
                            "removes them)", self.namespace, "; ".join(left), self.namespace)
            else:
                log.info("kubernetes testbed %s: the run's objects in namespace %s deleted", self.prefix,
                         self.namespace)
        if self._artifacts is not None:
            shutil.rmtree(self._artifacts, ignore_errors=True)

    # ------------------------------------------------------------- facts
    def facts(self) -> dict:
        return {"backend": self.backend, "prefix": self.prefix, "namespace": self.namespace,
                "namespace_made": self.fresh, "pod_security": self.level, "host_network": self.host_network,
                "pod_resources": {"cpu": list(self.pods.cpu), "memory": list(self.pods.memory)},
                "tolerations": list(self.pods.tolerations),
                "server_version": self.server_version, "image": self.image, "underlay_mtu": self.underlay_mtu,
                "context": self.opts.kube_context, "service": self.service, "local": self.local,
                "cpus": cpusets.unpinned(len(self.sides)).facts(),     # pods, as the kubelet places them
                "nodes": {"selector": dict(nodes_mod.selector(self.opts.node_selector)),
                          "across_zones": self.opts.across_zones, "same_node": self.same_node},
                "tool_ports": self.tool_ports,          # None: the tools' fixed ports
                "hosts": {f"h{s.index}": {"name": s.name, "node": n.name, "zone": n.label(ZONE),
                                          "instance_type": n.label(INSTANCE_TYPE), "kernel": n.kernel or None,
                                          "node_ip": s.underlay_ip, "underlay_dev": s.underlay_dev,
                                          "nic_mtu": self._node_mtu.get(s.index), "pod_ip": s.container_ip,
                                          "service_ip": s.service_ip or None,
                                          "neighbour": s.neighbour.pod if s.neighbour else None,
                                          "neighbour_ip": s.neighbour_ip or None,
                                          "broken": s.host.broken or s.container.broken
                                          or (s.neighbour.broken if s.neighbour else None)}
                          for s, n in zip(self.sides, self.side_nodes)}}

    def host_facts(self) -> dict:
        return {f"h{s.index}": facts_mod.host_facts(s.host, s.underlay_dev or "lo") if s.host.broken is None
                else {"error": s.host.broken}
                for s in self.sides}
