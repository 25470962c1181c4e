"""The kubernetes backend as a platform team runs it, on the local cluster of k8s/ with three
nodes: the tools image built by images/tools.sh (buildah, no daemon), pushed to a real
registry (Debian's docker-registry, TLS with a throwaway certificate and htpasswd) in the
cluster's fabric namespace, and pulled by the nodes only through a pull secret; the run made
by a ServiceAccount holding only the existing-namespace Role, RoleBinding and ClusterRole
that docs/kubernetes.md gives (read from the docs), in a namespace made beforehand.

- Every pair of the three nodes in rounds, host-host, container-container, container-service
  and same-node, with iperf3.tcp, qperf.tcp_lat, load.bounceback, iperf.crr and irtt.udp:
  every case measured; run.json names the datapath (flannel, VXLAN, kube-proxy iptables) and
  the report has the pair heatmap; nothing of the run is left in the namespace.
- In a namespace enforcing Pod Security "restricted", the pod-network placements complete
  (blast's packet rate among them, from the image, through the Services too) and host-host
  is one line naming what could run.
- Bad input on the live cluster is one line, exit 2, nothing left: an image pulled without
  the secret its registry needs, a missing pull secret, a namespace the user may not use,
  one zone for --across-zones, ports past 65535 (a mesh's, and one pair's whose last are
  blast's flows).

No timing is asserted: the verdicts are about what ran. Needs the binaries `make k8s-build`
caches, flanneld, and buildah, skopeo, docker-registry, htpasswd and openssl (make
setup-test): skipped without them, as on a fresh machine's `make test`.
"""

from __future__ import annotations

import json
import os
import pathlib
import re
import secrets
import shutil
import signal
import subprocess
import sys
import time

import pytest
import yaml

import kube_cluster as kc
from conftest import needs_root

# unsoaked: make test leaves it out (make test-k8s runs it) until its 30 rounds under load
pytestmark = [needs_root(), pytest.mark.lab, pytest.mark.unsoaked,
              pytest.mark.skipif(kc.missing() is not None, reason=kc.missing() or "")]
NEEDED = ("buildah", "skopeo", "docker-registry", "htpasswd", "openssl")
FABRIC = "obk8s-fab"
REG = "198.19.208.1:5443"            # the fabric bridge's address: every node reaches it
IMAGE = f"{REG}/overlaybench/tools:bookworm"
UNPULLED = f"{REG}/overlaybench/tools:unpulled"     # the same image under a tag no run pulls with a secret
NODES = ("obk8s-n1", "obk8s-n2", "obk8s-n3")


def ob(*args, timeout=900) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "harness.cli", *args], cwd=kc.ROOT, capture_output=True,
                          text=True, timeout=timeout)


def sh(*argv, timeout=300, check=True) -> subprocess.CompletedProcess:
    p = subprocess.run([str(a) for a in argv], capture_output=True, text=True, timeout=timeout)
    if check:
        assert p.returncode == 0, f"{argv}: rc {p.returncode}\n{p.stdout}\n{p.stderr}"
    return p


def docs_role(namespace: str) -> list[dict]:
    """docs/kubernetes.md's objects for a run in an existing namespace, for `namespace`."""
    doc = (kc.ROOT / "docs" / "kubernetes.md").read_text()
    block = re.search(r"```yaml\n(.*?)```", doc.split("### An existing namespace (`--namespace`)")[1], re.S).group(1)
    out = []
    for d in yaml.safe_load_all(block):
        text = json.dumps(d).replace('"bench"', json.dumps(namespace))
        d = json.loads(text)
        if d["kind"].startswith("Cluster"):
            d["metadata"]["name"] += f"-{namespace}"
            if d["kind"] == "ClusterRoleBinding":
                d["roleRef"]["name"] += f"-{namespace}"
        out.append(d)
    return out


def _registry(d: pathlib.Path, state: pathlib.Path) -> tuple[subprocess.Popen, str]:
    """docker-registry serving REG in the fabric namespace, TLS and one htpasswd user; the
    nodes' containerd trusts its certificate (state/certs.d). (process, user:password)."""
    (d / "data").mkdir(parents=True)
    sh("openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "1",
       "-subj", "/CN=198.19.208.1", "-addext", "subjectAltName=IP:198.19.208.1",
       "-keyout", d / "key.pem", "-out", d / "ca.crt")
    password = secrets.token_hex(12)
    (d / "htpasswd").write_text(sh("htpasswd", "-Bbn", "bench", password).stdout)
    (d / "config.yml").write_text(json.dumps({
        "version": 0.1, "log": {"level": "warn", "accesslog": {"disabled": True}},
        "storage": {"filesystem": {"rootdirectory": str(d / "data")}},
        "http": {"addr": REG, "tls": {"certificate": str(d / "ca.crt"), "key": str(d / "key.pem")}},
        "auth": {"htpasswd": {"realm": "overlaybench-test", "path": str(d / "htpasswd")}}}))
    log = open(d / "log", "w")
    proc = subprocess.Popen(["ip", "netns", "exec", FABRIC, "docker-registry", "serve", str(d / "config.yml")],
                            stdout=log, stderr=log, stdin=subprocess.DEVNULL, start_new_session=True)
    log.close()
    deadline = time.monotonic() + 30
    while sh("ip", "netns", "exec", FABRIC, "ss", "-Hltn", f"sport = :{REG.split(':')[1]}").stdout.strip() == "":
        assert proc.poll() is None, (d / "log").read_text()
        assert time.monotonic() < deadline, f"docker-registry not listening: {(d / 'log').read_text()}"
        time.sleep(0.1)
    (state / "certs.d" / REG).mkdir(parents=True)
    shutil.copy(d / "ca.crt", state / "certs.d" / REG / "ca.crt")
    return proc, f"bench:{password}"


def _token_kubeconfig(admin: str, namespace: str, path: pathlib.Path) -> str:
    token = kc.kubectl(admin, "-n", namespace, "create", "token", "overlaybench", "--duration", "2h").stdout.strip()
    assert token
    conf = yaml.safe_load(pathlib.Path(admin).read_text())
    conf["users"] = [{"name": "overlaybench", "user": {"token": token}}]
    conf["contexts"] = [{"name": "bench", "context": {"cluster": conf["clusters"][0]["name"], "user": "overlaybench",
                                                      "namespace": namespace}}]
    conf["current-context"] = "bench"
    path.write_text(yaml.safe_dump(conf))
    path.chmod(0o600)
    return str(path)


@pytest.fixture(scope="module")
def platform(tmp_path_factory):
    """Three nodes, the registry holding the image, namespaces `bench` (privileged) and
    `strict` (restricted), each with the docs' Role for ServiceAccount overlaybench and a pull
    secret `regcred`: {namespace: that ServiceAccount's kubeconfig}, plus "admin". All of it
    removed afterwards."""
    missing = [c for c in NEEDED if not shutil.which(c)]
    if missing:
        pytest.skip(f"not installed: {', '.join(missing)} (make setup-test installs them)")
    kc.clear_killed()
    if kc.objects():
        pytest.skip(f"a cluster is up here already: {kc.objects()}")
    sh(kc.ROOT / "images" / "tools.sh", "build", timeout=900)
    local = sh(kc.ROOT / "images" / "tools.sh", "name").stdout.strip()
    tmp = tmp_path_factory.mktemp("platform")
    registry = None
    try:
        up = kc.run("up", timeout=300, env={"OBK8S_NODES": "3"})
        assert up.returncode == 0, up.stderr
        admin = up.stdout.strip().splitlines()[-1]
        registry, creds = _registry(tmp / "registry", kc.STATE)
        for ref in (IMAGE, UNPULLED):
            sh("ip", "netns", "exec", FABRIC, "skopeo", "copy", "-q", "--dest-cert-dir", tmp / "registry",
               "--dest-creds", creds, f"containers-storage:{local}", f"docker://{ref}", timeout=300)
        configs = {"admin": admin}
        for ns, level in (("bench", "privileged"), ("strict", "restricted")):
            for argv in (("create", "namespace", ns),
                         ("label", "namespace", ns, f"pod-security.kubernetes.io/enforce={level}"),
                         ("-n", ns, "create", "serviceaccount", "overlaybench"),
                         ("-n", ns, "create", "secret", "docker-registry", "regcred", f"--docker-server={REG}",
                          f"--docker-username={creds.split(':')[0]}", f"--docker-password={creds.split(':')[1]}")):
                p = kc.kubectl(admin, *argv)
                assert p.returncode == 0, p.stderr
            role = tmp / f"role-{ns}.yaml"
            role.write_text(yaml.safe_dump_all(docs_role(ns)))
            p = kc.kubectl(admin, "apply", "-f", str(role))
            assert p.returncode == 0, p.stderr
            configs[ns] = _token_kubeconfig(admin, ns, tmp / f"{ns}.kubeconfig")
        for node, zone in (("obk8s-n1", "zone-a"), ("obk8s-n2", "zone-b")):   # n3 carries no zone
            assert kc.kubectl(admin, "label", "node", node, f"topology.kubernetes.io/zone={zone}").returncode == 0
        yield configs
    finally:
        if registry is not None:
            os.killpg(registry.pid, signal.SIGTERM)
            registry.wait(timeout=30)
        down = kc.run("down", timeout=180)
        assert down.returncode == 0, down.stderr
        assert kc.objects() == []


def left_in(admin: str, namespace: str) -> str:
    p = kc.kubectl(admin, "-n", namespace, "get", "pods,services", "-l", "app.kubernetes.io/managed-by=overlaybench",
                   "-o", "name")
    assert p.returncode == 0, p.stderr
    return p.stdout.strip()


def _run_dir(stdout: str) -> pathlib.Path:
    return pathlib.Path(next(ln for ln in stdout.splitlines() if ln.startswith("/")).split(":")[0])


COMMON = ("--image", IMAGE, "--underlay-mtu", "1500", "--repeats", "1", "--duration", "1")


def test_three_nodes_every_pair_four_placements_five_tests_from_the_registry(platform, tmp_path):
    p = ob("run", "--kubeconfig", platform["bench"], "--namespace", "bench", "--nodes", ",".join(NODES),
           "--pairs", "all", "--schedule", "rounds",
           "--placements", "host-host,container-container,container-service,same-node",
           "--tests", "iperf3.tcp,qperf.tcp_lat,load.bounceback,iperf.crr,irtt.udp",
           "--image-pull-secret", "regcred", "--results", str(tmp_path), *COMMON)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    run = _run_dir(p.stdout)
    rows = [json.loads(ln) for ln in (run / "measurements.jsonl").read_text().splitlines()]
    cases = {(r["mode"], r["placement"], r["test"], r["pair"]) for r in rows}
    pairs = {f"{a}→{b}" for i, a in enumerate(NODES) for b in NODES[i + 1:]}
    assert {r["pair"] for r in rows} == pairs and all(r["ok"] for r in rows), [r["error"] for r in rows if not r["ok"]]
    assert len(cases) == 3 * 5 * 4                     # 3 pairs × 5 tests × (native + cni's three placements)
    meta = json.loads((run / "run.json").read_text())
    (cni,) = [d for d in meta["datapaths"] if d["mode"] == "cni"]
    fp = cni["info"]["fingerprint"]
    assert (fp["cni"], fp["encapsulation"], fp["kube_proxy"]) == ("flannel", "vxlan", "iptables"), fp
    assert {r["datapath"] for r in rows if r["mode"] == "cni"} == {"cni (flannel, vxlan)"}
    assert meta["testbed"]["image"] == IMAGE and meta["testbed"]["namespace"] == "bench"
    report = tmp_path / "report.html"
    p = ob("report", str(run), "-o", str(report))
    assert p.returncode == 0, p.stderr
    assert 'alt="heatmaps of host pairs per mode"' in report.read_text()
    assert left_in(platform["admin"], "bench") == ""
    p = ob("down", "--kubeconfig", platform["bench"], "--namespace", "bench")
    assert p.returncode == 0 and "nothing to remove" in p.stdout, p.stdout + p.stderr


def test_a_restricted_namespace_runs_the_pod_network_and_refuses_host_host_in_one_line(platform, tmp_path):
    p = ob("run", "--kubeconfig", platform["strict"], "--namespace", "strict", "--nodes", "obk8s-n1,obk8s-n2",
           "--modes", "cni", "--placements", "container-container,container-service,same-node",
           "--tests", "iperf3.tcp,qperf.tcp_lat,irtt.udp", "--image-pull-secret", "regcred",
           "--results", str(tmp_path), *COMMON)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    rows = [json.loads(ln) for ln in (_run_dir(p.stdout) / "measurements.jsonl").read_text().splitlines()]
    assert {r["placement"] for r in rows} == {"container-container", "container-service", "same-node"}
    assert all(r["ok"] for r in rows), [r["error"] for r in rows if not r["ok"]]
    # blast from the image, in pods "restricted" admits (no capability), through the Service too
    # (its four flows' ports on it; the receiver's report back by conntrack)
    p = ob("run", "--kubeconfig", platform["strict"], "--namespace", "strict", "--nodes", "obk8s-n1,obk8s-n2",
           "--modes", "cni", "--placements", "container-container,container-service,same-node",
           "--tests", "udp.pps64", "--image-pull-secret", "regcred", "--results", str(tmp_path), *COMMON)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    rows = [json.loads(ln) for ln in (_run_dir(p.stdout) / "measurements.jsonl").read_text().splitlines()]
    assert {r["placement"] for r in rows} == {"container-container", "container-service", "same-node"}
    assert all(r["ok"] for r in rows) and any(r["metric"] == "pps" and r["value"] > 0 for r in rows)
    p = ob("run", "--kubeconfig", platform["strict"], "--namespace", "strict", "--nodes", "obk8s-n1,obk8s-n2",
           "--placements", "host-host,container-container", "--image-pull-secret", "regcred",
           "--results", str(tmp_path), *COMMON)
    assert p.returncode == 2 and p.stderr.count("\n") == 1, p.stderr
    assert p.stderr.startswith('overlaybench: namespace strict enforces Pod Security "restricted": hostNetwork pods')
    assert "--modes cni --placements container-container,container-service" in p.stderr
    assert left_in(platform["admin"], "strict") == ""


@pytest.mark.parametrize("args, line", [
    (["--image", UNPULLED],      # no --image-pull-secret: the registry asks for credentials
     rf"^overlaybench: image {re.escape(UNPULLED)} cannot be pulled on node obk8s-n\d: (ErrImagePull|ImagePullBackOff): "
     r".*pull access denied"),
    (["--image-pull-secret", "nosuch"],
     r"^overlaybench: --image-pull-secret nosuch: no secret nosuch in namespace bench"),
    (["--namespace", "kube-system"],
     r"^overlaybench: forbidden: this kubeconfig's user may not create pods"),
    (["--nodes", "all", "--node-selector", "topology.kubernetes.io/zone=zone-a", "--across-zones"],
     r"^overlaybench: --across-zones: .* span 1 zone \(zone-a\); a pair across zones needs two$"),
    (["--nodes", "all", "--pairs", "all", "--schedule", "mesh", "--modes", "cni", "--placements",
      "container-service", "--port-base", "65510"],
     r"^overlaybench: --port-base 65510: 3 pairs at once need ports 65510\.\.65551, past 65535; give one from 1024 to "
     r"65494$"),
    (["--tests", "udp.ndr64", "--modes", "cni", "--placements", "container-service", "--port-base", "65523"],
     r"^overlaybench: --port-base 65523: 1 pair at once needs ports 65523\.\.65536, past 65535; give one from 1024 to "
     r"65522$"),
], ids=["image-without-its-secret", "missing-secret", "forbidden-namespace", "one-zone", "ports-past-65535",
        "blast-flows-past-65535"])
def test_bad_input_on_the_live_cluster_is_one_line_and_leaves_nothing(platform, tmp_path, args, line):
    base = ["--kubeconfig", platform["bench"], "--namespace", "bench", "--pod-ready-timeout", "120"]
    if "--nodes" not in args:
        base += ["--nodes", "obk8s-n1,obk8s-n2"]
    p = ob("run", *base, *COMMON[2:], *args, "--results", str(tmp_path))
    assert p.returncode == 2 and p.stderr.count("\n") == 1 and re.search(line, p.stderr), p.stderr
    assert left_in(platform["admin"], "bench") == ""
