"""A fake Kubernetes API at the client seam (harness/hosts/kube/api.py), for tests without a
cluster, as ScriptedHost is at the Host seam.

The objects a run makes are kept (namespaces, pods, services) and checked as they come: a
pod or service outside a namespace that exists, a second namespace of one name, a call the
seam does not have, all fail the test. Execs answer from a script:

    api = FakeApi(nodes=[node("a"), node("b")])
    api.expect_exec("h0", "ip -o -4 addr show", stdout=…)        # in order, once
    api.allow_exec(re.compile(r"cat /proc/stat"), stdout=STAT)    # any time
    api.expect_start("h1", re.compile(r"iperf3 -s .*"))           # runs until killed
    ...
    api.assert_clean()        # every expected exec ran; nothing unexpected was asked

An exec's argv is matched without the wrappers PodHost adds (`timeout -s KILL T`, a
started command's pid file), as a list, a string split as a shell would, a regular
expression over `shlex.join`, or a predicate.
"""

from __future__ import annotations

import dataclasses
import shlex
import threading

from harness.hosts.kube.api import ApiError, Node, PodStatus
from harness.hosts.scripted import command_matches

RUNNING = PodStatus("Running", "10.244.0.5", "192.0.2.1")


def node(name: str, ready: bool = True, schedulable: bool = True, address: str = "", zone: str = "",
         labels: dict | None = None) -> Node:
    """A node as list_nodes gives it; `zone`: its topology.kubernetes.io/zone label."""
    labels = {**(labels or {}), **({"topology.kubernetes.io/zone": zone} if zone else {})}
    return Node(name, ready, schedulable, address or f"192.0.2.{ord(name[-1]) % 200 + 1}",
                labels=tuple(sorted(labels.items())))


@dataclasses.dataclass
class Exec:
    kind: str                 # run | start
    pod: str
    match: object
    answer: tuple             # (rc, stdout, stderr)
    times: int | None = 1     # None: any number
    used: int = 0

    def matches(self, kind: str, pod: str, argv: list[str]) -> bool:
        if kind != self.kind or pod != self.pod or (self.times is not None and self.used >= self.times):
            return False
        return command_matches(self.match, argv)


class FakeApi:
    """The seam's methods over kept objects and scripted execs (module doc)."""

    def __init__(self, nodes: list[Node] | None = None, version: str = "v1.34.4", denied: tuple = (),
                 daemonsets: dict | None = None, namespaces: list[dict] | None = None,
                 objects: list[dict] | None = None):
        self.nodes = nodes if nodes is not None else [node("node-a"), node("node-b")]
        self.version, self.denied = version, set(denied)
        self.current_namespace = "default"
        self.daemonsets = daemonsets or {}
        # whole objects as their manifests read (DaemonSets, ConfigMaps, IPPools …): what the
        # optional reads answer; a DaemonSet of `daemonsets` not among them is read as its
        # name and images. "get configmaps" (or another verb and resource) in `denied`: None.
        self.objects = list(objects or [])
        self.namespaces: dict[str, dict] = {n["name"]: n for n in (namespaces or [])}
        self.deleted: list[str] = []
        self.pods: dict[tuple[str, str], dict] = {}
        self.services: dict[tuple[str, str], dict] = {}
        self.objects_made: dict[tuple[str, str, str], dict] = {}      # (kind, namespace, name): secrets …
        self.pod_states: dict[str, list[PodStatus]] = {}     # pod name → the statuses it goes through
        self.failures: dict[str, BaseException] = {}          # method → what it raises
        self.calls: list[tuple] = []
        self.errors: list[str] = []
        self._execs: list[Exec] = []
        self._allowed: list[Exec] = []
        self._running: dict[str, threading.Event] = {}
        self._lock = threading.Lock()

    # ------------------------------------------------------------ scripting
    def fail(self, method: str, error: BaseException) -> None:
        self.failures[method] = error

    def expect_exec(self, pod, match, returncode=0, stdout="", stderr="", times=1) -> None:
        self._execs.append(Exec("run", pod, match, (returncode, stdout, stderr), times))

    def allow_exec(self, pod, match, returncode=0, stdout="", stderr="") -> None:
        self._allowed.append(Exec("run", pod, match, (returncode, stdout, stderr), None))

    def expect_start(self, pod, match, returncode=143, stdout="", stderr="", runs=True) -> None:
        """A started command: runs until a kill comes (then returns), or exits at once."""
        self._execs.append(Exec("start", pod, match, (returncode, stdout, stderr, runs), 1))

    def calls_of(self, method: str) -> list:
        """The last argument of every call of `method`, in order (the bodies of create_*)."""
        return [c[-1] for c in self.calls if c[0] == method]

    def assert_clean(self) -> None:
        left = [f"{e.kind} {e.pod}: {e.match}" for e in self._execs if e.times is not None and e.used < e.times]
        assert not self.errors, "unexpected calls:\n" + "\n".join(self.errors)
        assert not left, "expected but never asked:\n" + "\n".join(left)

    def _check(self, method: str, *args) -> None:
        self.calls.append((method, *args))
        err = self.failures.get(method)
        if err is not None:
            raise err

    def _unexpected(self, what: str) -> AssertionError:
        self.errors.append(what)
        return AssertionError(f"unexpected: {what}")

    # ------------------------------------------------------------ the seam
    def server_version(self) -> str:
        self._check("server_version")
        return self.version

    def list_nodes(self) -> list[Node]:
        self._check("list_nodes")
        return list(self.nodes)

    def allowed(self, verb, resource, namespace="", group="", subresource="") -> bool:
        self._check("allowed", verb, resource, namespace, group, subresource)
        return f"{verb} {resource}{'/' + subresource if subresource else ''}" not in self.denied

    def create_namespace(self, body: dict) -> None:
        self._check("create_namespace", body)
        name = body["metadata"]["name"]
        if name in self.namespaces:
            raise ApiError(409, "create", "namespaces", "AlreadyExists")
        self.namespaces[name] = {"name": name, "labels": dict(body["metadata"]["labels"]), "phase": "Active",
                                 "body": body}

    def delete_namespace(self, name: str) -> None:
        self._check("delete_namespace", name)
        self.namespaces.pop(name, None)
        self.deleted.append(name)
        for store in (self.pods, self.services):
            for key in [k for k in store if k[0] == name]:
                del store[key]

    def list_namespaces(self, selector: str) -> list[dict]:
        self._check("list_namespaces", selector)
        k, _, v = selector.partition("=")
        return [{"name": n["name"], "labels": n["labels"], "phase": n["phase"], "created": n.get("created")}
                for n in self.namespaces.values() if n["labels"].get(k) == v]

    def create_pod(self, namespace: str, body: dict) -> None:
        self._check("create_pod", namespace, body)
        if namespace not in self.namespaces:
            raise self._unexpected(f"pod {body['metadata']['name']} in namespace {namespace}, which does not exist")
        self.pods[(namespace, body["metadata"]["name"])] = body

    def pod_status(self, namespace: str, name: str) -> PodStatus:
        self._check("pod_status", namespace, name)
        if (namespace, name) not in self.pods:
            raise ApiError(404, "get", "pods", "NotFound", namespace)
        seq = self.pod_states.get(name) or [RUNNING]
        st = seq.pop(0) if len(seq) > 1 else seq[0]
        if st.phase == "Running" and name.startswith("h"):
            node = next(n for n in self.nodes if n.name == self.pods[(namespace, name)]["spec"]["nodeName"])
            st = dataclasses.replace(st, ip=node.address, host_ip=node.address)
        elif st.phase == "Running":          # c<i> at .5, the second pod beside it (l<i>) at .7
            st = dataclasses.replace(st, ip=f"10.244.{name[1:]}.{7 if name.startswith('l') else 5}")
        return st

    def create_service(self, namespace: str, body: dict) -> str:
        self._check("create_service", namespace, body)
        if namespace not in self.namespaces:
            raise self._unexpected(f"service in namespace {namespace}, which does not exist")
        self.services[(namespace, body["metadata"]["name"])] = body
        return f"10.96.0.{10 + len(self.services)}"

    def create_object(self, kind: str, namespace: str, body: dict) -> None:
        self._check("create_object", kind, namespace, body)
        if namespace not in self.namespaces:
            raise self._unexpected(f"{kind} in namespace {namespace}, which does not exist")
        self.objects_made[(kind, namespace, body["metadata"]["name"])] = body

    def delete_object(self, kind: str, namespace: str, name: str) -> None:
        self._check("delete_object", kind, namespace, name)
        store = {"pods": self.pods, "services": self.services}.get(kind)
        (store if store is not None else {}).pop((namespace, name), None)
        self.objects_made.pop((kind, namespace, name), None)

    def list_objects(self, kind: str, namespace: str, selector: str) -> list[dict]:
        self._check("list_objects", kind, namespace, selector)
        k, _, v = selector.partition("=")
        store = {"pods": self.pods, "services": self.services}.get(kind, {})
        bodies = [b for (ns, _n), b in store.items() if ns == namespace]
        bodies += [b for (kd, ns, _n), b in self.objects_made.items() if kd == kind and ns == namespace]
        return [{"name": b["metadata"]["name"], "labels": dict(b["metadata"].get("labels") or {}),
                 "created": b["metadata"].get("created")}
                for b in bodies if (b["metadata"].get("labels") or {}).get(k) == v]

    def read_namespace(self, name: str) -> dict | None:
        self._check("read_namespace", name)
        if "get namespaces" in self.denied or name not in self.namespaces:
            return None
        return {"name": name, "labels": dict(self.namespaces[name]["labels"])}

    def read_secret(self, namespace: str, name: str) -> dict | None:
        self._check("read_secret", namespace, name)
        return None if "get secrets" in self.denied else self._object("Secret", namespace, name)

    def list_daemonsets(self, namespace: str) -> list[dict]:
        self._check("list_daemonsets", namespace)
        return [dict(d, namespace=namespace) for d in self.daemonsets.get(namespace, [])]

    def _object(self, kind: str, namespace: str, name: str) -> dict | None:
        return next((o for o in self.objects if o.get("kind") == kind and o["metadata"]["name"] == name
                     and o["metadata"].get("namespace", "") == namespace), None)

    def read_daemonset(self, namespace: str, name: str) -> dict | None:
        self._check("read_daemonset", namespace, name)
        if "get daemonsets" in self.denied:
            return None
        obj = self._object("DaemonSet", namespace, name)
        if obj is not None:
            return obj
        listed = next((d for d in self.daemonsets.get(namespace, []) if d["name"] == name), None)
        if listed is None:
            return None
        return {"kind": "DaemonSet", "metadata": {"name": name, "namespace": namespace},
                "spec": {"template": {"spec": {"containers": [
                    {"name": f"c{i}", "image": image} for i, image in enumerate(listed["images"])]}}}}

    def read_configmap(self, namespace: str, name: str) -> dict | None:
        self._check("read_configmap", namespace, name)
        return None if "get configmaps" in self.denied else self._object("ConfigMap", namespace, name)

    def list_custom_objects(self, group: str, version: str, plural: str) -> list[dict] | None:
        self._check("list_custom_objects", group, version, plural)
        if f"list {plural}" in self.denied:
            return None
        kind = {"ippools": "IPPool", "felixconfigurations": "FelixConfiguration"}.get(plural, plural)
        items = [o for o in self.objects if o.get("kind") == kind and o.get("apiVersion") == f"{group}/{version}"]
        return items or None          # none: as if the CRD were not installed (404)

    def exec(self, namespace, pod, argv, timeout):
        self._check("exec", namespace, pod, tuple(argv))
        if (namespace, pod) not in self.pods:
            raise self._unexpected(f"exec in pod {namespace}/{pod}, which does not exist")
        argv = list(argv)
        if argv[:3] == ["timeout", "-s", "KILL"]:
            argv = argv[4:]
        if argv[:2] == ["sh", "-c"] and argv[2].startswith("kill -s"):
            with self._lock:
                ev = self._running.get(argv[3])
            if ev is not None:
                ev.set()
            return 0, "", ""
        kind = "run"
        if argv[:2] == ["sh", "-c"] and argv[2].startswith("echo $$"):
            kind, pidfile, argv = "start", argv[3], argv[4:]
        with self._lock:
            e = next((e for e in self._execs if e.matches(kind, pod, argv)), None) or \
                next((e for e in self._allowed if e.matches(kind, pod, argv)), None)
            if e is None:
                raise self._unexpected(f"{kind} in {pod}: {shlex.join(argv)}")
            e.used += 1
        if kind == "start":
            rc, out, err, runs = e.answer
            if runs:
                ev = threading.Event()
                with self._lock:
                    self._running[pidfile] = ev
                if not ev.wait(30):
                    raise self._unexpected(f"{shlex.join(argv)} in {pod} never stopped")
            return rc, out, err
        return e.answer
