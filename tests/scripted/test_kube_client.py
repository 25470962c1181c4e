"""The real side of the client seam (harness/hosts/kube/api.py's KubeApi, on the pinned
`kubernetes` client) against a small HTTP server on loopback that answers as an API server
does: the requests it sends (paths, verbs, bodies) and what it makes of the answers
(nodes, access reviews, pod states, a 403 naming verb and resource). The exec stream's
websocket is not served here."""

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from harness.hosts.kube import api as api_mod
from harness.hosts.kube.api import ApiError
from harness.testbeds.kubernetes import specs

NODES = {"kind": "NodeList", "apiVersion": "v1", "metadata": {}, "items": [
    {"metadata": {"name": "node-a", "labels": {"topology.kubernetes.io/zone": "z1", "pool": "perf"}}, "spec": {},
     "status": {"conditions": [{"type": "Ready", "status": "True"}],
                "addresses": [{"type": "Hostname", "address": "node-a"},
                              {"type": "InternalIP", "address": "192.0.2.1"}],
                "nodeInfo": {"architecture": "amd64", "bootID": "b", "containerRuntimeVersion": "containerd://2.4.2",
                             "kernelVersion": "6.18.44-fc-v1300", "kubeProxyVersion": "", "kubeletVersion": "v1.34.4",
                             "machineID": "m", "operatingSystem": "linux", "osImage": "Debian GNU/Linux 12 (bookworm)",
                             "systemUUID": "u"}}},
    {"metadata": {"name": "node-b"}, "spec": {"unschedulable": True},
     "status": {"conditions": [{"type": "Ready", "status": "True"}], "addresses": []}},
    {"metadata": {"name": "node-c"}, "spec": {"taints": [{"key": "k", "effect": "NoSchedule"}]},
     "status": {"conditions": [{"type": "Ready", "status": "False"}], "addresses": []}},
]}
POD = {"kind": "Pod", "apiVersion": "v1", "metadata": {"name": "c1", "namespace": "ns"}, "spec": {"containers": []},
       "status": {"phase": "Pending", "containerStatuses": [
           {"name": "tools", "image": "x", "imageID": "", "ready": False, "restartCount": 0,
            "state": {"waiting": {"reason": "ImagePullBackOff", "message": "Back-off pulling image \"x\""}}}]}}
NO_SA = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "Forbidden", "code": 403,
         "message": 'pods "h0" is forbidden: service account ns/default was not found, retry after the service '
                    'account is created'}
FORBIDDEN = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "Forbidden", "code": 403,
             "message": 'namespaces is forbidden: User "u" cannot create resource "namespaces"'}

CILIUM_CONFIG = {"kind": "ConfigMap", "apiVersion": "v1", "metadata": {"name": "cilium-config", "namespace": "kube-system"},
                 "data": {"routing-mode": "tunnel", "tunnel-protocol": "geneve"}}
AWS_NODE = {"kind": "DaemonSet", "apiVersion": "apps/v1", "metadata": {"name": "aws-node", "namespace": "kube-system"},
            "spec": {"selector": {}, "template": {"spec": {"containers": [
                {"name": "aws-node", "image": "602401143452.dkr.ecr.us-west-2.amazonaws.com/amazon-k8s-cni:v1.19.0",
                 "env": [{"name": "AWS_VPC_ENI_MTU", "value": "9001"},
                         {"name": "MY_NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}]}]}}}}
IPPOOL = {"apiVersion": "crd.projectcalico.org/v1", "kind": "IPPool", "metadata": {"name": "default-ipv4-ippool"},
          "spec": {"cidr": "192.168.0.0/16", "ipipMode": "Always", "natOutgoing": True}}


class Handler(BaseHTTPRequestHandler):
    seen: list = []
    broken_version = False
    pod_refusals: list = []          # the answers to pod creates, in turn, before a 201

    def log_message(self, *a):
        pass

    def _answer(self, code: int, doc: dict) -> None:
        data = json.dumps(doc).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _body(self):
        n = int(self.headers.get("Content-Length") or 0)
        return json.loads(self.rfile.read(n)) if n else None

    def do_GET(self):
        self.seen.append(("GET", self.path, None))
        if self.path in ("/version", "/version/") and self.broken_version:
            self._answer(200, {"major": "1"})
        elif self.path in ("/version", "/version/"):
            self._answer(200, {"major": "1", "minor": "34", "gitVersion": "v1.34.4", "gitCommit": "0" * 40,
                               "gitTreeState": "clean", "buildDate": "2026-01-01T00:00:00Z", "goVersion": "go1.24",
                               "compiler": "gc", "platform": "linux/amd64"})
        elif self.path == "/api/v1/nodes":
            self._answer(200, NODES)
        elif self.path == "/api/v1/namespaces/ns/pods/c1":
            self._answer(200, POD)
        elif self.path.startswith("/api/v1/namespaces?labelSelector="):
            self._answer(200, {"kind": "NamespaceList", "apiVersion": "v1", "metadata": {}, "items": [
                {"metadata": {"name": "overlaybench-ob12ab", "labels": {"overlaybench/run": "r1"}},
                 "status": {"phase": "Terminating"}}]})
        elif self.path == "/api/v1/namespaces/kube-system/configmaps/cilium-config":
            self._answer(200, CILIUM_CONFIG)
        elif self.path == "/api/v1/namespaces/kube-system/configmaps/kube-proxy":
            self._answer(403, {**FORBIDDEN, "message": 'configmaps "kube-proxy" is forbidden'})
        elif self.path == "/apis/apps/v1/namespaces/kube-system/daemonsets/aws-node":
            self._answer(200, AWS_NODE)
        elif self.path == "/apis/crd.projectcalico.org/v1/ippools":
            self._answer(200, {"apiVersion": "crd.projectcalico.org/v1", "kind": "IPPoolList", "metadata": {},
                               "items": [IPPOOL]})
        elif self.path == "/apis/apps/v1/namespaces/kube-system/daemonsets":
            self._answer(200, {"kind": "DaemonSetList", "apiVersion": "apps/v1", "metadata": {}, "items": [
                {"metadata": {"name": "kube-flannel-ds"},
                 "spec": {"selector": {}, "template": {"spec": {"containers": [
                     {"name": "f", "image": "ghcr.io/flannel-io/flannel:v0.26.7"}]}}}}]})
        else:
            self._answer(404, {"kind": "Status", "status": "Failure", "code": 404, "reason": "NotFound"})

    def do_POST(self):
        body = self._body()
        self.seen.append(("POST", self.path, body))
        if self.path == "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews":
            attrs = body["spec"]["resourceAttributes"]
            self._answer(201, {**body, "status": {"allowed": attrs.get("subresource") != "exec"}})
        elif self.path == "/api/v1/namespaces":
            self._answer(403, FORBIDDEN)
        elif self.path == "/api/v1/namespaces/ns/pods":
            if self.pod_refusals:
                answer = self.pod_refusals.pop(0)
                self._answer(*(answer if isinstance(answer, tuple) else (403, answer)))
            else:
                self._answer(201, body)
        elif self.path == "/api/v1/namespaces/ns/services":
            self._answer(201, {**body, "spec": {**body["spec"], "clusterIP": "10.96.0.11"}})
        else:
            self._answer(404, {"kind": "Status", "status": "Failure", "code": 404, "reason": "NotFound"})

    def do_DELETE(self):
        self.seen.append(("DELETE", self.path, self._body()))
        self._answer(404, {"kind": "Status", "status": "Failure", "code": 404, "reason": "NotFound"})


@pytest.fixture
def api(tmp_path):
    Handler.seen = []
    Handler.pod_refusals = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    t = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    t.start()
    kc = tmp_path / "kubeconfig"
    kc.write_text(f"""apiVersion: v1
kind: Config
clusters: [{{name: c, cluster: {{server: "http://127.0.0.1:{server.server_address[1]}"}}}}]
users: [{{name: u, user: {{token: t}}}}]
contexts: [{{name: x, context: {{cluster: c, user: u}}}}]
current-context: x
""")
    yield api_mod.connect(str(kc), "x")
    server.shutdown()
    server.server_close()


def test_version_and_nodes(api):
    assert api.server_version() == "v1.34.4"
    assert [(n.name, n.ready, n.schedulable, n.address) for n in api.list_nodes()] == [
        ("node-a", True, True, "192.0.2.1"), ("node-b", True, False, ""), ("node-c", False, False, "")]
    a, b, _c = api.list_nodes()
    assert a.labels == (("pool", "perf"), ("topology.kubernetes.io/zone", "z1")) and a.label("pool") == "perf"
    assert b.labels == () and b.label("topology.kubernetes.io/zone") is None
    assert (a.kernel, b.kernel) == ("6.18.44-fc-v1300", "")        # status.nodeInfo, where the node has one


def test_access_review_asks_for_the_verb_resource_and_namespace(api):
    assert api.allowed("create", "pods", "overlaybench-ob12ab") is True
    assert api.allowed("create", "pods", "overlaybench-ob12ab", subresource="exec") is False
    (_m, path, body), _ = Handler.seen
    assert path == "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"
    assert body["spec"]["resourceAttributes"] == {"verb": "create", "resource": "pods", "group": "",
                                                  "namespace": "overlaybench-ob12ab"}


def test_an_answer_the_client_cannot_read_is_not_called_unreachable(api):
    Handler.broken_version = True
    try:
        with pytest.raises(ApiError) as e:
            api.server_version()
    finally:
        Handler.broken_version = False
    assert e.value.status == -1 and "unreachable" not in str(e.value)
    assert str(e.value).startswith("get version: -1 an answer the client cannot read")


def test_a_forbidden_create_names_verb_and_resource(api):
    with pytest.raises(ApiError) as e:
        api.create_namespace(specs.namespace("ob12ab", "r1", 1, "h"))
    assert e.value.status == 403
    assert str(e.value) == "forbidden: this kubeconfig's user may not create namespaces"
    assert Handler.seen[0][2]["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "privileged"


def test_a_stuck_pod_reports_its_reason(api):
    st = api.pod_status("ns", "c1")
    assert (st.phase, st.reason, st.message) == ("Pending", "ImagePullBackOff", 'Back-off pulling image "x"')


def test_services_daemonsets_namespaces_and_a_delete_of_what_is_gone(api):
    assert api.create_service("ns", specs.service("s1", "c1", specs.service_ports(1))) == "10.96.0.11"
    assert api.list_daemonsets("kube-system") == [
        {"name": "kube-flannel-ds", "namespace": "kube-system", "images": ["ghcr.io/flannel-io/flannel:v0.26.7"]}]
    assert api.list_namespaces(specs.SELECTOR) == [
        {"name": "overlaybench-ob12ab", "labels": {"overlaybench/run": "r1"}, "phase": "Terminating", "created": None}]
    assert ("GET", "/api/v1/namespaces?labelSelector=app.kubernetes.io%2Fmanaged-by%3Doverlaybench", None) \
        in Handler.seen
    api.delete_namespace("overlaybench-ob12ab")        # already gone (404): not an error
    assert Handler.seen[-1][:2] == ("DELETE", "/api/v1/namespaces/overlaybench-ob12ab?propagationPolicy=Background")


def test_a_pod_made_before_the_namespace_has_its_service_account_is_made_once_it_has(api):
    """Admission refuses pods in a namespace whose `default` ServiceAccount the controller
    manager has not made yet; that 403 is waited out (the pod is asked for again)."""
    Handler.pod_refusals = [NO_SA, NO_SA]
    api.create_pod("ns", specs.pod("h0", "node-a", "img:1", True))
    assert [m for m, path, _ in Handler.seen if path == "/api/v1/namespaces/ns/pods"] == ["POST"] * 3


def test_a_pod_create_forbidden_for_another_reason_fails_at_once(api):
    Handler.pod_refusals = [{**FORBIDDEN, "message": 'pods is forbidden: User "u" cannot create resource "pods"'}]
    with pytest.raises(ApiError) as e:
        api.create_pod("ns", specs.pod("h0", "node-a", "img:1", True))
    assert str(e.value) == "forbidden: this kubeconfig's user may not create pods in namespace ns"
    assert len([p for _m, p, _ in Handler.seen if p == "/api/v1/namespaces/ns/pods"]) == 1


def test_transient_faults_are_asked_again_within_a_budget(api):
    slept = []
    api.sleep = slept.append
    busy = {"kind": "Status", "status": "Failure", "code": 429, "reason": "TooManyRequests"}
    Handler.pod_refusals = [(429, busy), (503, {**busy, "code": 503, "reason": "ServiceUnavailable"})]
    api.create_pod("ns", specs.pod("h0", "node-a", "img:1", True))
    assert slept == [0.5, 1.0]
    Handler.pod_refusals = [(503, {**busy, "code": 503})] * 5
    with pytest.raises(ApiError) as e:
        api.create_pod("ns", specs.pod("h0", "node-a", "img:1", True))
    assert e.value.status == 503 and slept[2:] == [0.5, 1.0, 2.0, 4.0]         # the budget, then the error


@pytest.mark.parametrize("message", [
    'pods "c0" is forbidden: violates PodSecurity "restricted:latest": host namespaces (hostNetwork=true)',
    'admission webhook "validate.kyverno.svc-fail" denied the request: policy require-labels: missing team'])
def test_an_admission_denial_is_reported_in_the_policys_words_not_as_rbac(api, message):
    Handler.pod_refusals = [{**FORBIDDEN, "message": message}]
    with pytest.raises(ApiError) as e:
        api.create_pod("ns", specs.pod("h0", "node-a", "img:1", True))
    assert e.value.status == 403 and e.value.policy == message
    assert str(e.value) == f"create pods in namespace ns denied by admission: {message}"
    assert "may not" not in str(e.value)


def test_the_optional_reads_answer_manifest_shaped_dicts_and_none_for_403_and_404(api):
    cm = api.read_configmap("kube-system", "cilium-config")
    assert cm["metadata"]["name"] == "cilium-config" and cm["data"] == CILIUM_CONFIG["data"]
    ds = api.read_daemonset("kube-system", "aws-node")
    (c,) = ds["spec"]["template"]["spec"]["containers"]
    assert c["image"].endswith("amazon-k8s-cni:v1.19.0") and c["env"][0] == {"name": "AWS_VPC_ENI_MTU", "value": "9001"}
    assert c["env"][1]["valueFrom"] == {"fieldRef": {"fieldPath": "spec.nodeName"}}      # camelCase, as written
    assert api.read_configmap("kube-system", "kube-proxy") is None          # 403
    assert api.read_configmap("kube-system", "calico-config") is None       # 404
    assert api.read_daemonset("kube-system", "calico-node") is None
    assert api.list_custom_objects("crd.projectcalico.org", "v1", "ippools") == [IPPOOL]
    assert api.list_custom_objects("projectcalico.org", "v3", "ippools") is None
