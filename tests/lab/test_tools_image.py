"""The tools image as a platform team handles it, for real: built from images/tools.Containerfile
by images/tools.sh (what `make tools-image` runs; a no-op while its recipe is unchanged), pushed
with credentials to a real registry (Debian's docker-registry, distribution) on 127.0.0.1 with
TLS (a throwaway self-signed certificate) and htpasswd auth, refused to a pull without
credentials, pulled with them, and holding every tool of IMAGE_TOOLS plus blast, blast and
iperf3 running as uid 65534.

Everything it starts (the registry, buildah working containers) is bound to 127.0.0.1 or has no
network of its own, and is removed on success, failure and Ctrl-C; the registry's storage, key
and password file live in pytest's tmp_path. What would make it fail: a Containerfile that
does not build, a tool missing from the image, a tool that needs root, a registry that serves
without credentials, an image that changes on its way through the registry."""

from __future__ import annotations

import json
import os
import pathlib
import secrets
import shutil
import socket
import subprocess
import tempfile
import time

import pytest

from conftest import needs_root
from harness.testbeds.kubernetes import specs
from harness.tools import mtu, mtu_udp

pytestmark = [needs_root(), pytest.mark.lab]
ROOT = pathlib.Path(__file__).resolve().parents[2]
TOOLS_SH = ROOT / "images" / "tools.sh"
REPO = "overlaybench/tools:bookworm"
NEEDED = ("buildah", "skopeo", "docker-registry", "htpasswd", "openssl")
# IMAGE_TOOLS' binaries and the rest of the image, each with a command that only reports
# (rc 0) and a word its output holds.
VERSIONS = {"iperf3": (["iperf3", "--version"], "iperf 3."),
            "qperf": (["qperf", "--version"], "qperf"),
            "sockperf": (["sockperf", "--version"], "sockperf"),
            "ping": (["ping", "-V"], "iputils"),
            "iperf": (["sh", "-c", "iperf --version 2>&1 || true"], "iperf version 2."),   # exits 1
            "irtt": (["irtt", "version"], "irtt version"),
            "blast": (["blast", "--version"], "blast 0."),
            "ip": (["ip", "-V"], "iproute2"),
            "ethtool": (["ethtool", "--version"], "ethtool version"),
            "ps": (["ps", "-V"], "procps")}


def run(*argv, check=True, timeout=300, **kw) -> subprocess.CompletedProcess:
    p = subprocess.run([str(a) for a in argv], capture_output=True, text=True, timeout=timeout, **kw)
    if check:
        assert p.returncode == 0, f"{argv}: rc {p.returncode}\n{p.stdout}\n{p.stderr}"
    return p


@pytest.fixture(scope="module")
def image() -> str:
    """The image images/tools.sh builds (the real one, under its real name: a no-op when
    current, as in make test after make images)."""
    missing = [c for c in NEEDED if not shutil.which(c)]
    if missing:
        pytest.skip(f"not installed: {', '.join(missing)} (make setup-test installs them)")
    run(TOOLS_SH, "build", timeout=900)
    return run(TOOLS_SH, "name").stdout.strip()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def registry(tmp_path):
    """A registry on 127.0.0.1 with TLS and one htpasswd user: (address, cert dir, user:password).
    Stopped and its storage removed afterwards."""
    d = tmp_path / "registry"
    certs = tmp_path / "certs"
    d.mkdir()
    certs.mkdir()
    run("openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
        "-days", "1", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
        "-keyout", d / "key.pem", "-out", certs / "ca.crt")
    user, password = "bench", secrets.token_hex(12)
    (d / "htpasswd").write_text(run("htpasswd", "-Bbn", user, password).stdout)
    port = _free_port()
    (d / "config.yml").write_text(json.dumps({      # YAML is a superset of JSON
        "version": 0.1, "log": {"level": "warn", "accesslog": {"disabled": True}},
        "storage": {"filesystem": {"rootdirectory": str(d / "data")}},
        "http": {"addr": f"127.0.0.1:{port}", "tls": {"certificate": str(certs / "ca.crt"),
                                                      "key": str(d / "key.pem")}},
        "auth": {"htpasswd": {"realm": "overlaybench-test", "path": str(d / "htpasswd")}}}))
    log = open(d / "log", "w")
    proc = subprocess.Popen(["docker-registry", "serve", str(d / "config.yml")], stdout=log, stderr=log,
                            stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert proc.poll() is None, f"docker-registry exited: {(d / 'log').read_text()}"
                assert time.monotonic() < deadline, f"docker-registry not listening: {(d / 'log').read_text()}"
                time.sleep(0.1)
        yield f"127.0.0.1:{port}", certs, f"{user}:{password}"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()
        shutil.rmtree(d / "data", ignore_errors=True)


@pytest.fixture
def no_auth_file(tmp_path, monkeypatch):
    """skopeo reads no credentials but those given here (none stored on this machine leak in)."""
    f = tmp_path / "auth.json"
    f.write_text("{}")
    monkeypatch.setenv("REGISTRY_AUTH_FILE", str(f))
    return f


@pytest.fixture
def working(image):
    """A buildah working container of the image (no network of its own), removed afterwards."""
    name = f"overlaybench-test-{secrets.token_hex(4)}"
    run("buildah", "from", "--name", name, "--pull-never", image)
    try:
        yield name
    finally:
        run("buildah", "rm", name, check=False)


def inside(ctr: str, *argv, user: str = "0:0", timeout=60) -> subprocess.CompletedProcess:
    """argv run in the working container; its output written to files in a directory bound
    in from here, not relayed by buildah: buildah's relay now and then loses all the output
    of a process that exits at once (`sockperf --version`: rc 0, nothing, 1 in 30 rounds)."""
    with tempfile.TemporaryDirectory(prefix="overlaybench-test-") as d:
        os.chmod(d, 0o777)          # written by uid 65534 too
        p = run("buildah", "run", "--isolation", "chroot", "--network", "host", "--user", user,
                "--volume", f"{d}:/ob-out", ctr, "--", "sh", "-c", '"$@" >/ob-out/stdout 2>/ob-out/stderr',
                "sh", *argv, check=False, timeout=timeout)
        out, err = (pathlib.Path(d, f).read_text() if pathlib.Path(d, f).exists() else "" for f in ("stdout", "stderr"))
        return subprocess.CompletedProcess(p.args, p.returncode, out, err + p.stderr)


def test_pushed_with_credentials_and_pulled_only_with_them(image, registry, no_auth_file, tmp_path):
    addr, certs, creds = registry
    ref = f"docker://{addr}/{REPO}"
    run("skopeo", "copy", "-q", "--dest-cert-dir", certs, "--dest-creds", creds, f"containers-storage:{image}", ref)

    anon = run("skopeo", "inspect", "--cert-dir", certs, "--no-creds", ref, check=False)
    assert anon.returncode != 0 and "unauthorized" in anon.stderr.lower(), anon.stderr
    wrong = run("skopeo", "inspect", "--cert-dir", certs, "--creds", creds.split(":")[0] + ":nope", ref, check=False)
    assert wrong.returncode != 0 and "unauthorized" in wrong.stderr.lower(), wrong.stderr
    untrusted = run("skopeo", "inspect", "--creds", creds, ref, check=False)   # the system's CAs only
    assert untrusted.returncode != 0 and "certificate" in untrusted.stderr.lower(), untrusted.stderr

    seen = json.loads(run("skopeo", "inspect", "--cert-dir", certs, "--creds", creds, ref).stdout)
    assert seen["Labels"]["org.overlaybench.image"] == "tools" and seen["Architecture"]
    oci = tmp_path / "pulled"
    run("skopeo", "copy", "-q", "--src-cert-dir", certs, "--src-creds", creds, ref, f"oci:{oci}:bookworm")
    index = json.loads((oci / "index.json").read_text())
    algo, digest = index["manifests"][0]["digest"].split(":")
    manifest = json.loads((oci / "blobs" / algo / digest).read_text())
    built = run("buildah", "inspect", "--type", "image", "-f", "{{.FromImageID}}", image).stdout.strip()
    assert manifest["config"]["digest"] == f"sha256:{built}"   # the same image came back
    for layer in manifest["layers"]:
        a, d = layer["digest"].split(":")
        assert (oci / "blobs" / a / d).stat().st_size == layer["size"]


def test_the_image_holds_every_tool_and_runs_them_as_nobody(image, working):
    assert set(specs.IMAGE_TOOLS) <= set(VERSIONS)
    for binary, (argv, word) in VERSIONS.items():
        p = inside(working, *argv)
        assert p.returncode == 0 and word in p.stdout + p.stderr, f"{binary}: rc {p.returncode} {p.stdout}{p.stderr}"
    cfg = json.loads(run("buildah", "inspect", "--type", "image", image).stdout)["OCIv1"]["config"]
    assert cfg["Cmd"] == ["sleep", "infinity"] and cfg.get("User", "") in ("", "0", "root")

    for argv in (["id", "-u"], ["blast", "--version"], ["iperf3", "--version"]):
        p = inside(working, *argv, user="65534:65534")
        assert p.returncode == 0, f"{argv} as 65534: {p.stderr}"
    assert inside(working, "id", "-u", user="65534:65534").stdout.strip() == "65534"
    # A real transfer of each as nobody on loopback (iperf3: 1 MB; blast: 500 packets); iperf3's
    # client retries until its server listens, judged by its JSON: iperf 3.12 with -J exits 0
    # on "Connection refused" too. Every process is bounded by timeout(1), so none outlives a
    # failure.
    port = _free_port()
    script = (f"timeout 30 iperf3 -s -1 -B 127.0.0.1 -p {port} >/dev/null & s=$!; i=0; "
              f"until timeout 20 iperf3 -c 127.0.0.1 -p {port} -n 1M -J >/tmp/c.json 2>/dev/null; "
              f"grep -q bits_per_second /tmp/c.json && ! grep -q '\"error\"' /tmp/c.json; do "
              f"i=$((i+1)); [ $i -lt 100 ] || {{ kill $s; cat /tmp/c.json; exit 1; }}; sleep 0.1; done; "
              f"wait $s && echo IPERF3-OK; rm -f /tmp/c.json; "
              f"timeout 10 blast recv --addr 127.0.0.1 --port {port} --duration 3 & r=$!; sleep 0.5; "
              f"timeout 10 blast send --addr 127.0.0.1 --port {port} --duration 0.5 --rate 1000; wait $r")
    p = inside(working, "sh", "-c", script, user="65534:65534", timeout=90)
    assert p.returncode == 0 and "IPERF3-OK" in p.stdout, p.stdout + p.stderr
    assert '"blast":"send"' in p.stdout and '"sent":' in p.stdout, p.stdout + p.stderr


def test_the_mtu_doctors_udp_probe_runs_as_nobody(working):
    """The doctor's UDP probe (harness/tools/mtu_udp.py's two programs, on the image's
    python3-minimal) as a pod-network pod runs it: a 1400-byte DF datagram to a receiver on
    loopback comes back `passed`. The sender is sent again until its receiver listens (each
    waits 1 s for the answer; at most 50), all of it under timeout(1)."""
    port = _free_port()
    script = (f'timeout 60 python3 -c "$1" 127.0.0.1 {port} >/dev/null & r=$!; i=0; '
              f'until printf %s "$2" | timeout 5 python3 - 127.0.0.1 {port} 1400 1 >/tmp/u.out; '
              f"grep -q '^passed 1400$' /tmp/u.out; do "
              f"i=$((i+1)); [ $i -lt 50 ] || {{ kill $r; cat /tmp/u.out; exit 1; }}; done; kill $r; cat /tmp/u.out")
    p = inside(working, "sh", "-c", script, "sh", mtu_udp.RECEIVER, mtu_udp.SENDER, user="65534:65534", timeout=90)
    assert p.returncode == 0, p.stdout + p.stderr
    assert mtu_udp.parse_udp_probe(1400, p.stdout, p.stderr, 0) == mtu.Probe(1400, mtu.PASSED), p.stdout


def test_a_second_build_is_a_no_op(image):
    p = run(TOOLS_SH, "build", timeout=120)
    assert "is up to date" in p.stdout, p.stdout + p.stderr
    assert run(TOOLS_SH, "key").stdout.strip() == run(
        "buildah", "inspect", "--type", "image", "-f", '{{index .OCIv1.Config.Labels "org.overlaybench.recipe"}}',
        image).stdout.strip()


def test_nothing_is_left_running(image, tmp_path_factory):
    """No registry of these tests (their configs live under pytest's base temp) and no working
    container of theirs (run last in this file; their tools are bounded by timeout(1))."""
    base = str(tmp_path_factory.getbasetemp())
    ours = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            argv = pathlib.Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        text = " ".join(a.decode(errors="replace") for a in argv)
        if "docker-registry" in text and base in text:
            ours.append(f"{pid}: {text}")
    assert ours == []
    ctrs = run("buildah", "containers", "--format", "{{.ContainerName}}").stdout.split()
    assert not [c for c in ctrs if c.startswith(("overlaybench-test-", "overlaybench-base-"))], ctrs
