"""The Kubernetes API as the harness uses it: the one module that imports the `kubernetes`
client, behind a small surface of plain values (the client seam).

Everything above takes an object with these methods, so tests hand in a fake that answers
from a script (tests/scripted_kube.py) and no cluster is needed:

    server_version()                        "v1.34.4"; raises ApiError(0, …) when unreachable
    current_namespace                       the kubeconfig context's namespace ("default")
    list_nodes()                            [Node]
    allowed(verb, resource, namespace, group, subresource) -> bool   (SelfSubjectAccessReview)
    create_namespace(body) / delete_namespace(name) / list_namespaces(selector) -> [dict]
                                            (name, labels, phase, created: epoch seconds)
    create_pod(namespace, body) / pod_status(namespace, name) -> PodStatus
    create_service(namespace, body) -> its ClusterIP
    create_object / delete_object(kind, namespace, name) / list_objects(kind, namespace, selector)
                                            pods, services, secrets (a namespace the run did not make)
    read_namespace(name) / read_secret(namespace, name) -> dict | None   (optional reads)
    list_daemonsets(namespace) -> [dict]
    read_daemonset(namespace, name) -> dict | None      (the object as its manifest reads)
    read_configmap(namespace, name) -> dict | None      (likewise)
    list_custom_objects(group, version, plural) -> [dict] | None   (cluster-scoped: IPPools …)
    exec(namespace, pod, argv, timeout) -> (exit code or None on timeout, stdout, stderr)

Bodies are plain dicts (the manifests as a user would write them). A refused call raises
ApiError naming the verb and the resource; 403 is a forbidden verb (or, with `policy`, an
admission policy's denial in its own words), 0 the API unreachable.
The three reads the datapath's fingerprint makes are optional: an object that is not there
(404) or that this user may not read (403) is None, logged, and the run goes on.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import re
import threading
import time

from harness.core.errors import HarnessError

log = logging.getLogger(__name__)

TIMEOUT = (5, 30)        # connect, read: every call but exec (a call hangs no longer than this)
SA_WAIT = 30.0           # for a new namespace's default ServiceAccount (create_pod)
HANDSHAKE = 30.0         # the exec stream's websocket handshake (its own deadline: the stream then has none)
# transient faults (429, 5xx, a reset connection) are asked again, after these pauses: a
# bounded budget per call (a 429's Retry-After is heeded up to the pause's cap)
RETRY_PAUSES = (0.5, 1.0, 2.0, 4.0)
RETRY_CAP = 8.0
RESET = re.compile(r"Connection reset|Connection aborted|RemoteDisconnected|ProtocolError|"
                   r"IncompleteRead|BrokenPipe", re.I)
NO_SA = "retry after the service account is created"      # admission's words for that 403


class ApiError(HarnessError):
    """A refused or failed API call: `status` 0 (unreachable), 403 (forbidden), 404 …, -1 (an
    answer the client cannot read)."""

    def __init__(self, status: int, verb: str, resource: str, detail: str = "", namespace: str = "",
                 policy: str = ""):
        self.status, self.verb, self.resource, self.namespace = status, verb, resource, namespace
        self.policy = policy        # an admission policy's own words (PodSecurity, a webhook): not RBAC
        where = f" in namespace {namespace}" if namespace else ""
        if policy:
            msg = f"{verb} {resource}{where} denied by admission: {policy}"
        elif status == 403:
            msg = f"forbidden: this kubeconfig's user may not {verb} {resource}{where}"
        elif status == 0:
            msg = f"the Kubernetes API is unreachable ({verb} {resource}: {detail})"
        else:
            msg = f"{verb} {resource}{where}: {status} {detail}".rstrip()
        super().__init__(msg)


@dataclasses.dataclass(frozen=True)
class Node:
    name: str
    ready: bool
    schedulable: bool        # not cordoned, no NoSchedule/NoExecute taint
    address: str             # its InternalIP ("" where it has none)
    taints: tuple[tuple[str, str, str], ...] = ()     # (key, value, effect) of NoSchedule/NoExecute ones
    cordoned: bool = False
    labels: tuple[tuple[str, str], ...] = ()     # its labels (key, value), sorted: --node-selector, zones
    kernel: str = ""          # status.nodeInfo.kernelVersion (run.json's hosts)

    def label(self, key: str) -> str | None:
        return next((v for k, v in self.labels if k == key), None)


@dataclasses.dataclass(frozen=True)
class PodStatus:
    phase: str               # Pending | Running | Succeeded | Failed | Unknown
    ip: str = ""
    host_ip: str = ""
    reason: str = ""         # the container's waiting or terminated reason (ImagePullBackOff …)
    message: str = ""


def connect(kubeconfig: str | None, context: str | None) -> "KubeApi":
    """A client for the kubeconfig (None: $KUBECONFIG or ~/.kube/config) and context."""
    from kubernetes import client, config  # the client's import costs ~0.4 s: on use only
    from kubernetes.config.config_exception import ConfigException
    import yaml
    try:
        cfg = client.Configuration()
        config.load_kube_config(config_file=kubeconfig, context=context, client_configuration=cfg,
                                persist_config=False)
    except (ConfigException, OSError, TypeError, ValueError) as e:
        where = kubeconfig or "$KUBECONFIG or ~/.kube/config"
        raise HarnessError(f"no usable kubeconfig ({where}): {e}") from e
    except yaml.YAMLError as e:        # the client lets its YAML parser's error through
        where = kubeconfig or "$KUBECONFIG or ~/.kube/config"
        raise HarnessError(f"not a kubeconfig ({where}): not YAML: {' '.join(str(e).split())}") from e
    cfg.retries = 0
    api = KubeApi(client.ApiClient(cfg))
    try:                # the context's namespace: where an image pull secret is looked for first
        _all, active = config.list_kube_config_contexts(config_file=kubeconfig)
        chosen = next((c for c in _all if c.get("name") == context), active) if context else active
        api.current_namespace = (chosen or {}).get("context", {}).get("namespace") or "default"
    except (ConfigException, OSError, TypeError, ValueError, AttributeError, yaml.YAMLError):
        pass
    return api


# what an admission denial's message says (PodSecurity, a validating webhook, a policy
# engine such as Kyverno or Gatekeeper), as against RBAC's "cannot create resource"
POLICY = re.compile(r"violates PodSecurity|admission webhook|denied the request|denied request|"
                    r"validation error|ValidatingAdmissionPolicy", re.I)


def denial(body) -> str:
    """The message of a 403 body that an admission policy wrote ("" where RBAC did)."""
    try:
        msg = str((json.loads(body) if isinstance(body, (str, bytes)) else body or {}).get("message") or "")
    except (ValueError, AttributeError):
        msg = str(body or "")
    msg = " ".join(msg.split())
    return msg[:400] if POLICY.search(msg) else ""


def transient(e, verb: str = "get", resource: str = "") -> float | None:
    """How long to wait at least before asking again after `e`, or None where asking again
    would not help, or might do twice what was done (a create, after a reset connection)."""
    status = getattr(e, "status", None)
    if status == 429 or (isinstance(status, int) and status in (500, 502, 503, 504)):
        after = str((getattr(e, "headers", None) or {}).get("Retry-After") or "")
        return min(float(after), RETRY_CAP) if after.isdigit() else 0.0
    if isinstance(status, int) and status != 0:
        return None
    once = verb != "create" or resource == "selfsubjectaccessreviews"      # asking twice does no harm
    return 0.0 if once and RESET.search(f"{getattr(e, 'reason', '')} {e!r}") else None


def _status_error(e, verb: str, resource: str, namespace: str = "", server: str = "") -> ApiError:
    import urllib3
    status = getattr(e, "status", None)
    if isinstance(status, int):             # the client's ApiException: the server answered
        policy = denial(getattr(e, "body", None)) if status in (400, 403, 422) else ""
        return ApiError(status, verb, resource, str(getattr(e, "reason", "") or ""), namespace, policy)
    text = (str(getattr(e, "reason", None) or e).splitlines() or [type(e).__name__])[0]
    text = re.sub(r"<[\w.]+ object at 0x[0-9a-f]+>: ", "", text)[:200]      # urllib3's connection repr
    if isinstance(e, (urllib3.exceptions.HTTPError, OSError)):    # refused, timed out, TLS
        return ApiError(0, verb, resource, f"{server}: {text}" if server else text)
    return ApiError(-1, verb, resource, f"an answer the client cannot read ({text})", namespace)


class KubeApi:
    """The real client behind the seam (module doc)."""

    def __init__(self, api_client):
        from kubernetes import client
        from kubernetes.client.rest import ApiException
        self._client = api_client
        self.server = api_client.configuration.host
        self.current_namespace = "default"       # the kubeconfig context's namespace
        self._core = client.CoreV1Api(api_client)
        # The client's stream() swaps its ApiClient's request method for a websocket one while
        # it opens a stream: exec gets an ApiClient of its own, so that no other call made
        # meanwhile (from another thread) goes out as a websocket, and streams open one at a
        # time, so that no swap undoes another's.
        self._exec_core = client.CoreV1Api(client.ApiClient(api_client.configuration))
        self._exec_lock = threading.Lock()
        self._apps = client.AppsV1Api(api_client)
        self._authz = client.AuthorizationV1Api(api_client)
        self._version = client.VersionApi(api_client)
        self._errors = (ApiException, OSError, Exception)

    sleep = staticmethod(time.sleep)

    def _call(self, verb: str, resource: str, fn, *args, namespace: str = "", **kw):
        for attempt in range(len(RETRY_PAUSES) + 1):
            try:
                return fn(*args, _request_timeout=TIMEOUT, **kw)
            except HarnessError:
                raise
            except Exception as e:  # noqa: BLE001 (the client raises ApiException, urllib3's and ssl's errors)
                wait = transient(e, verb, resource)
                if wait is None or attempt == len(RETRY_PAUSES):
                    raise _status_error(e, verb, resource, namespace, self.server) from e
                log.info("%s %s: %s; asked again", verb, resource, getattr(e, "status", None) or type(e).__name__)
                self.sleep(max(wait, RETRY_PAUSES[attempt]))

    def server_version(self) -> str:
        return self._call("get", "version", self._version.get_code).git_version

    def list_nodes(self) -> list[Node]:
        out = []
        for n in self._call("list", "nodes", self._core.list_node).items:
            conds = {c.type: c.status for c in (n.status.conditions or [])}
            taints = tuple((t.key or "", t.value or "", t.effect) for t in (n.spec.taints or [])
                           if t.effect in ("NoSchedule", "NoExecute"))
            addrs = {a.type: a.address for a in (n.status.addresses or [])}
            out.append(Node(n.metadata.name, conds.get("Ready") == "True", not n.spec.unschedulable and not taints,
                            addrs.get("InternalIP", ""), taints, bool(n.spec.unschedulable),
                            tuple(sorted((n.metadata.labels or {}).items())),
                            getattr(n.status.node_info, "kernel_version", "") or ""))
        return out

    def allowed(self, verb: str, resource: str, namespace: str = "", group: str = "", subresource: str = "") -> bool:
        from kubernetes import client
        attrs = client.V1ResourceAttributes(verb=verb, resource=resource, group=group, subresource=subresource or None,
                                            namespace=namespace or None)
        body = client.V1SelfSubjectAccessReview(spec=client.V1SelfSubjectAccessReviewSpec(resource_attributes=attrs))
        review = self._call("create", "selfsubjectaccessreviews", self._authz.create_self_subject_access_review, body)
        return bool(review.status.allowed)

    def create_namespace(self, body: dict) -> None:
        self._call("create", "namespaces", self._core.create_namespace, body)

    def delete_namespace(self, name: str) -> None:
        try:
            self._call("delete", "namespaces", self._core.delete_namespace, name, propagation_policy="Background")
        except ApiError as e:
            if e.status != 404:
                raise

    def list_namespaces(self, selector: str) -> list[dict]:
        items = self._call("list", "namespaces", self._core.list_namespace, label_selector=selector).items
        return [{"name": n.metadata.name, "labels": dict(n.metadata.labels or {}), "phase": n.status.phase,
                 "created": n.metadata.creation_timestamp.timestamp() if n.metadata.creation_timestamp else None}
                for n in items]

    def create_pod(self, namespace: str, body: dict) -> None:
        """Create the pod; while the new namespace's `default` ServiceAccount is not made yet
        (the controller manager makes it within moments), admission refuses every pod with a
        403 that says so: that one is waited out, up to SA_WAIT seconds."""
        deadline = time.monotonic() + SA_WAIT
        while True:
            try:
                return self._call("create", "pods", self._core.create_namespaced_pod, namespace, body,
                                  namespace=namespace)
            except ApiError as e:
                cause = e.__cause__
                if e.status == 403 and NO_SA in str(getattr(cause, "body", "") or "") \
                        and time.monotonic() < deadline:
                    time.sleep(0.2)
                    continue
                raise

    def pod_status(self, namespace: str, name: str) -> PodStatus:
        p = self._call("get", "pods", self._core.read_namespaced_pod, name, namespace, namespace=namespace)
        reason = message = ""
        for c in p.status.container_statuses or []:
            st = c.state
            why = st.waiting or st.terminated if st else None
            if why is not None and why.reason:
                reason, message = why.reason, why.message or ""
        return PodStatus(p.status.phase or "Unknown", p.status.pod_ip or "", p.status.host_ip or "", reason, message)

    def create_service(self, namespace: str, body: dict) -> str:
        svc = self._call("create", "services", self._core.create_namespaced_service, namespace, body,
                         namespace=namespace)
        return svc.spec.cluster_ip or ""

    # the run's objects in a namespace it did not make (--namespace): by kind, deleted one by one
    KINDS = {"pods": "pod", "services": "service", "secrets": "secret"}

    def create_object(self, kind: str, namespace: str, body: dict) -> None:
        self._call("create", kind, getattr(self._core, f"create_namespaced_{self.KINDS[kind]}"), namespace, body,
                   namespace=namespace)

    def delete_object(self, kind: str, namespace: str, name: str) -> None:
        """Delete it (already gone: nothing to do)."""
        try:
            self._call("delete", kind, getattr(self._core, f"delete_namespaced_{self.KINDS[kind]}"), name, namespace,
                       namespace=namespace, grace_period_seconds=0)
        except ApiError as e:
            if e.status != 404:
                raise

    def list_objects(self, kind: str, namespace: str, selector: str) -> list[dict]:
        items = self._call("list", kind, getattr(self._core, f"list_namespaced_{self.KINDS[kind]}"), namespace,
                           namespace=namespace, label_selector=selector).items
        return [{"name": o.metadata.name, "labels": dict(o.metadata.labels or {}),
                 "created": o.metadata.creation_timestamp.timestamp() if o.metadata.creation_timestamp else None}
                for o in items]

    def read_namespace(self, name: str) -> dict | None:
        """{"name", "labels"}; None where it is not there or may not be read (404, 403)."""
        obj = self._optional("get", "namespaces", self._core.read_namespace, name)
        return None if obj is None else {"name": name, "labels": dict(obj.get("metadata", {}).get("labels") or {})}

    def read_secret(self, namespace: str, name: str) -> dict | None:
        return self._optional("get", "secrets", self._core.read_namespaced_secret, name, namespace,
                              namespace=namespace)

    def list_daemonsets(self, namespace: str) -> list[dict]:
        items = self._call("list", "daemonsets", self._apps.list_namespaced_daemon_set, namespace,
                           namespace=namespace).items
        return [{"name": d.metadata.name, "namespace": namespace,
                 "images": [c.image for c in d.spec.template.spec.containers or []]}
                for d in items]

    def _optional(self, verb: str, resource: str, fn, *args, namespace: str = ""):
        """fn's answer as a plain dict (camelCase, as a manifest reads); None on 403 or 404."""
        try:
            obj = self._call(verb, resource, fn, *args, namespace=namespace)
        except ApiError as e:
            if e.status in (403, 404):
                log.info("not read (optional): %s", e)
                return None
            raise
        return obj if isinstance(obj, dict) else self._client.sanitize_for_serialization(obj)

    def read_daemonset(self, namespace: str, name: str) -> dict | None:
        return self._optional("get", "daemonsets", self._apps.read_namespaced_daemon_set, name, namespace,
                              namespace=namespace)

    def read_configmap(self, namespace: str, name: str) -> dict | None:
        return self._optional("get", "configmaps", self._core.read_namespaced_config_map, name, namespace,
                              namespace=namespace)

    def list_custom_objects(self, group: str, version: str, plural: str) -> list[dict] | None:
        from kubernetes import client
        api = client.CustomObjectsApi(self._client)
        answer = self._optional("list", f"{plural}.{group}", api.list_cluster_custom_object, group, version, plural)
        return None if answer is None else list(answer.get("items") or [])

    def exec(self, namespace: str, pod: str, argv: list[str], timeout: float | None) -> tuple[int | None, str, str]:
        """Run argv in the pod's first container through the exec stream; stdout, stderr and
        the exit code (None: still running after `timeout`, the stream closed)."""
        import yaml
        from kubernetes.stream import stream
        import websocket
        try:
            with self._exec_lock:
                # the handshake has a deadline of its own (the client sets none): the library's
                # default timeout while it connects, none on the stream after it
                before = websocket.getdefaulttimeout()
                websocket.setdefaulttimeout(HANDSHAKE)
                try:
                    ws = stream(self._exec_core.connect_get_namespaced_pod_exec, pod, namespace, command=argv,
                                stderr=True, stdin=False, stdout=True, tty=False, _preload_content=False)
                finally:
                    websocket.setdefaulttimeout(before)
                ws.sock.settimeout(before)
        except Exception as e:  # noqa: BLE001
            # The client reports every failed websocket as status 0; the handshake's own
            # status (403: the verb is forbidden, 404: no such pod) is in its reason.
            m = re.search(r"Handshake status (\d{3})", str(getattr(e, "reason", "") or e))
            if m:
                raise ApiError(int(m.group(1)), "create", "pods/exec", f"(pod {pod})", namespace) from e
            raise _status_error(e, "create", "pods/exec", namespace, self.server) from e
        out, err = [], []
        deadline = None if timeout is None else time.monotonic() + timeout
        try:
            while ws.is_open():
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return None, "".join(out + [ws.read_channel(1)]), "".join(err + [ws.read_channel(2)])
                ws.update(timeout=min(left, 1.0) if left is not None else 1.0)
                out.append(ws.read_channel(1))
                err.append(ws.read_channel(2))
            status = yaml.safe_load(ws.read_channel(3) or "{}") or {}
        finally:
            ws.close(timeout=1)      # a stream given up on answers no close: wait 1 s, not the default 3
        if status.get("status") == "Success":
            return 0, "".join(out), "".join(err)
        causes = (status.get("details") or {}).get("causes") or []
        code = next((c.get("message") for c in causes if c.get("reason") == "ExitCode"), None)
        if code is not None and str(code).isdigit():
            return int(code), "".join(out), "".join(err)
        return 126, "".join(out), "".join(err) + str(status.get("message", "exec failed")) + "\n"
