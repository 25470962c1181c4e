"""The Kubernetes API as the harness uses it: the one module that imports the `kubernetes`
client, behind a small surface of plain values (the client seam).

Everything above takes an object with these methods, so tests hand in a fake that answers
from a script (tests/scripted_kube.py) and no cluster is needed:

    server_version()                        "v1.34.4"; raises ApiError(0, …) when unreachable
    list_nodes()                            [Node]
    allowed(verb, resource, namespace, group, subresource) -> bool   (SelfSubjectAccessReview)
    create_namespace(body) / delete_namespace(name) / list_namespaces(selector) -> [dict]
    create_pod(namespace, body) / pod_status(namespace, name) -> PodStatus
    create_service(namespace, body) -> its ClusterIP
    list_daemonsets(namespace) -> [dict]
    read_daemonset(namespace, name) -> dict | None      (the object as its manifest reads)
    read_configmap(namespace, name) -> dict | None      (likewise)
    list_custom_objects(group, version, plural) -> [dict] | None   (cluster-scoped: IPPools …)
    exec(namespace, pod, argv, timeout) -> (exit code or None on timeout, stdout, stderr)

Bodies are plain dicts (the manifests as a user would write them). A refused call raises
ApiError naming the verb and the resource; 403 is a forbidden verb, 0 the API unreachable.
The three reads the datapath's fingerprint makes are optional: an object that is not there
(404) or that this user may not read (403) is None, logged, and the run goes on.
"""

from __future__ import annotations

import dataclasses
import logging
import re
import threading
import time

from harness.core.errors import HarnessError

log = logging.getLogger(__name__)

TIMEOUT = (5, 30)        # connect, read: every call but exec (a call hangs no longer than this)
SA_WAIT = 30.0           # for a new namespace's default ServiceAccount (create_pod)
NO_SA = "retry after the service account is created"      # admission's words for that 403


class ApiError(HarnessError):
    """A refused or failed API call: `status` 0 (unreachable), 403 (forbidden), 404 …, -1 (an
    answer the client cannot read)."""

    def __init__(self, status: int, verb: str, resource: str, detail: str = "", namespace: str = ""):
        self.status, self.verb, self.resource, self.namespace = status, verb, resource, namespace
        where = f" in namespace {namespace}" if namespace else ""
        if status == 403:
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
    return KubeApi(client.ApiClient(cfg))


def _status_error(e, verb: str, resource: str, namespace: str = "", server: str = "") -> ApiError:
    import urllib3
    status = getattr(e, "status", None)
    if isinstance(status, int):             # the client's ApiException: the server answered
        return ApiError(status, verb, resource, str(getattr(e, "reason", "") or ""), namespace)
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

    def _call(self, verb: str, resource: str, fn, *args, namespace: str = "", **kw):
        try:
            return fn(*args, _request_timeout=TIMEOUT, **kw)
        except HarnessError:
            raise
        except Exception as e:  # noqa: BLE001 (the client raises ApiException, urllib3's and ssl's errors)
            raise _status_error(e, verb, resource, namespace, self.server) from e

    def server_version(self) -> str:
        return self._call("get", "version", self._version.get_code).git_version

    def list_nodes(self) -> list[Node]:
        out = []
        for n in self._call("list", "nodes", self._core.list_node).items:
            conds = {c.type: c.status for c in (n.status.conditions or [])}
            taints = [t.effect for t in (n.spec.taints or [])]
            addrs = {a.type: a.address for a in (n.status.addresses or [])}
            out.append(Node(n.metadata.name, conds.get("Ready") == "True",
                            not n.spec.unschedulable and not {"NoSchedule", "NoExecute"} & set(taints),
                            addrs.get("InternalIP", "")))
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
        return [{"name": n.metadata.name, "labels": dict(n.metadata.labels or {}), "phase": n.status.phase}
                for n in items]

    def create_pod(self, namespace: str, body: dict) -> None:
        """Create the pod; while the new namespace's `default` ServiceAccount is not made yet
        (the controller manager makes it within moments), admission refuses every pod with a
        403 that says so: that one is waited out, up to SA_WAIT seconds."""
        deadline = time.monotonic() + SA_WAIT
        while True:
            try:
                return self._core.create_namespaced_pod(namespace, body, _request_timeout=TIMEOUT)
            except Exception as e:  # noqa: BLE001 (as in _call)
                if getattr(e, "status", None) == 403 and NO_SA in str(getattr(e, "body", "") or "") \
                        and time.monotonic() < deadline:
                    time.sleep(0.2)
                    continue
                raise _status_error(e, "create", "pods", namespace, self.server) from e

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
        try:
            with self._exec_lock:
                ws = stream(self._exec_core.connect_get_namespaced_pod_exec, pod, namespace, command=argv,
                            stderr=True, stdin=False, stdout=True, tty=False, _preload_content=False)
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
