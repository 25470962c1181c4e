"""Container endpoints as real Docker containers (`--containers docker`), for real: a dockerd
(the one that answers, or one started here), the locally built tools image, the quick
scenario trimmed to CI size on the lab and over SSH, bad input, and a killed run's
containers removed by `overlaybench down`. Afterwards no container with the
overlaybench.prefix label, no namespace and no link of the runs remains."""

from __future__ import annotations

import json
import os
import pathlib
import secrets
import subprocess
import sys
import time

import pytest

from conftest import needs_root, stray_processes
from harness import results
from harness.testbeds import lab_state

pytestmark = [needs_root(), pytest.mark.lab]
ROOT = pathlib.Path(__file__).resolve().parents[2]
IMAGES = ROOT / "images"
LABEL = "overlaybench.prefix"
# The quick scenario trimmed: one MTU, both container placements, 1 repeat of 1 s.
TRIMMED = [str(ROOT / "scenarios" / "quick.toml"), "--containers", "docker", "--modes", "fastdp,sleeve",
           "--underlay-mtu", "1500", "--placements", "host-container,container-container",
           "--repeats", "1", "--duration", "1", "-q"]


def ob(*args, env=None, timeout=300):
    return subprocess.run([sys.executable, "-m", "harness.cli", *args], cwd=ROOT, capture_output=True,
                          text=True, env=env, timeout=timeout)


def docker(*args, check=True) -> str:
    return subprocess.run(["docker", *args], capture_output=True, text=True, check=check, timeout=300).stdout


def labelled() -> set[str]:
    """Every container (running or not) that carries a testbed's prefix label."""
    return set(docker("ps", "-a", "--filter", f"label={LABEL}", "--format", "{{.Names}}").split())


def dead_labs() -> set[str]:
    """Labs whose owner is gone: a run's subprocess that left something."""
    return {p for p, i in lab_state.leftovers().items() if not i["alive"]}


@pytest.fixture(scope="module")
def tools_image(dockerd) -> str:
    p = subprocess.run([str(IMAGES / "build.sh"), "tools"], capture_output=True, text=True, timeout=1200)
    assert p.returncode == 0, p.stdout + p.stderr        # a no-op while the image is current
    return subprocess.run([str(IMAGES / "build.sh"), "name", "tools"], capture_output=True, text=True,
                          check=True).stdout.strip()


@pytest.fixture
def clean(tools_image):
    """Asserts that a test leaves no labelled container, dead lab or stray process."""
    before_c, before_l = labelled(), dead_labs()
    yield
    assert labelled() - before_c == set()
    assert dead_labs() - before_l == set()
    assert stray_processes() == []


def _check_run(run_dir: pathlib.Path, image: str, started: float) -> str:
    recs = results.read_records(run_dir)
    assert recs and all(r["ok"] for r in recs), [r for r in recs if not r["ok"]][:3]
    assert {r["placement"] for r in recs} == {"host-container", "container-container"}
    tb = results.read_meta(run_dir)["testbed"]
    assert tb["containers"] == "docker"
    image_id = docker("image", "inspect", "-f", "{{.Id}}", image).strip()
    for where, f in tb["docker"].items():
        assert f["version"] and f["api_version"], (where, f)
        assert f["image"] == image and f["image_id"] == image_id, (where, f)
    # dockerd saw the run's two containers start, labelled with the run's prefix and id.
    prefix = tb["prefix"]
    events = docker("events", "--since", str(int(started)), "--until", str(int(time.time()) + 1),
                    "--filter", "event=start", "--filter", f"label={LABEL}={prefix}",
                    "--filter", f"label=overlaybench.run={run_dir.name}", "--format", "{{.Actor.Attributes.name}}")
    assert sorted(events.split()) == [f"{prefix}-c0", f"{prefix}-c1"], events
    return prefix


def test_trimmed_quick_scenario_in_docker_containers_on_the_lab(clean, tools_image, tmp_path):
    started = time.time()
    p = ob("run", *TRIMMED, "--results", str(tmp_path))
    assert p.returncode == 0, p.stderr[-3000:]
    prefix = _check_run(pathlib.Path(p.stdout.splitlines()[0]), tools_image, started)
    assert not [c for c in labelled() if c.startswith(prefix)]
    assert prefix not in lab_state.leftovers()          # no namespace, link or directory of it


def test_the_mtu_doctor_probes_between_docker_containers(clean, tools_image):
    """`overlaybench mtu --containers docker`: fastdp's and the sleeve's paths between two
    Docker containers, both ways, `ok` at 1450 to the byte by ping, UDP and the MSS (the
    probes are the host's tools, run in the containers' namespaces); exit 0."""
    p = ob("mtu", "--containers", "docker", "--modes", "fastdp,sleeve", "--format", "json", "-q")
    assert p.returncode == 0, p.stderr[-3000:]
    paths = [x for x in json.loads(p.stdout)["paths"] if x["mode"] != "native"]
    assert {(x["mode"], x["src"], x["dst"]) for x in paths} == {(m, a, b) for m in ("fastdp", "sleeve")
                                                               for a, b in (("h0", "h1"), ("h1", "h0"))}
    for x in paths:
        assert x["verdict"] == "ok" and x["placement"] == "container-container", x
        assert x["path_mtu"] == x["udp_path_mtu"] == x["tcp_mtu"] == x["src_dev_mtu"] == 1450, x


def test_trimmed_quick_scenario_in_docker_containers_over_ssh(tools_image, tmp_path):
    """Each host's daemon reached through the harness's SSH connection (one host as root,
    the other through sudo): `docker system dial-stdio` there, a unix socket here."""
    import shutil
    import tempfile

    from test_testbed_ssh import SshLab
    before, tunnels = labelled(), set(pathlib.Path(tempfile.gettempdir()).glob("overlaybench-tunnel-*"))
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="obsshlab-"))
    sl = SshLab(tmp)
    try:
        sl.bare()
        started = time.time()
        p = ob("run", *TRIMMED, "--inventory", sl.inventory(), "--results", str(tmp_path), env=sl.env())
        assert p.returncode == 0, p.stderr[-3000:]
        run_dir = pathlib.Path(p.stdout.splitlines()[0])
        prefix = _check_run(run_dir, tools_image, started)
        assert set(results.read_meta(run_dir)["testbed"]["docker"]) == {"h0", "h1"}
        assert [x for x in sl.leftovers() if prefix in x or x.startswith("process ") and _marked(x, prefix)] == []
    finally:
        sl.close()
        shutil.rmtree(tmp, ignore_errors=True)
    assert labelled() - before == set()
    assert set(pathlib.Path(tempfile.gettempdir()).glob("overlaybench-tunnel-*")) - tunnels == set()


def _marked(item: str, prefix: str) -> bool:
    """Whether the process a leftover line names carries this testbed's mark (another
    testbed's run may go on beside the tests)."""
    try:
        return f"OVERLAYBENCH_PREFIX={prefix}".encode() in pathlib.Path(f"/proc/{item.split()[1]}/environ").read_bytes()
    except OSError:
        return False


@pytest.fixture(scope="module")
def exits_early(tools_image):
    """An image whose `sleep` is `false`: its container starts and exits at once."""
    name = f"overlaybench-test/exits-early:{secrets.token_hex(3)}"
    maker = f"obtest-{secrets.token_hex(3)}"
    docker("run", "--name", maker, "--network", "none", tools_image, "ln", "-sf", "/bin/false", "/usr/bin/sleep")
    try:
        docker("commit", maker, name)
    finally:
        docker("rm", "-f", maker)
    yield name
    docker("rmi", "-f", name, check=False)


@pytest.mark.parametrize("case", ["dockerd-dead", "image-missing", "exits-early"])
def test_bad_docker_input_is_one_line_exit_2_and_leaves_nothing(case, clean, exits_early, tmp_path):
    env = dict(os.environ)
    if case == "dockerd-dead":
        dead = tmp_path / "dead.sock"
        env["DOCKER_HOST"] = f"unix://{dead}"
        want = f"overlaybench: this machine: dockerd does not answer at unix://{dead} " \
               "(No such file or directory; start one: make dockerd-up)"
    elif case == "image-missing":
        env["OVERLAYBENCH_TOOLS_IMAGE"] = "overlaybench-test/absent:nope"
        want = "overlaybench: this machine: the tools image overlaybench-test/absent:nope is missing (make tools-image)"
    else:
        env["OVERLAYBENCH_TOOLS_IMAGE"] = exits_early
        want = f"from {exits_early} exited at once (exit code 1)"
    p = ob("run", *TRIMMED, "--results", str(tmp_path / "res"), env=env)
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert p.returncode == 2, (p.returncode, p.stderr[-2000:])
    assert len(lines) == 1 and (lines[0] == want if case != "exits-early" else want in lines[0]), p.stderr
    assert "Traceback" not in p.stderr


def test_down_removes_the_containers_of_a_killed_run(clean, tmp_path):
    env = dict(os.environ, OVERLAYBENCH_FAILPOINT="mid-test")
    p = ob("run", *TRIMMED, "--results", str(tmp_path), env=env)
    assert p.returncode == -9, (p.returncode, p.stderr[-2000:])
    run_dir, = tmp_path.iterdir()
    prefix = results.read_meta(run_dir)["testbed"]["prefix"]
    assert {f"{prefix}-c0", f"{prefix}-c1"} <= labelled()
    d = ob("down")
    assert d.returncode == 0, d.stderr
    assert f"removed container {prefix}-c0" in d.stdout and f"removed container {prefix}-c1" in d.stdout
    assert not [c for c in labelled() if c.startswith(prefix)]
    assert prefix not in lab_state.leftovers()


def test_killed_over_ssh_down_inventory_removes_everything_and_resume_completes(tools_image, tmp_path):
    """The orchestrator SIGKILLed mid-test on two SSH hosts with Docker containers: every
    finished line stays, `down --inventory` removes exactly that run's processes,
    namespaces, links, containers and state directories on both hosts, and `--resume`
    finishes the run with no (case, repeat) twice."""
    import shutil
    import tempfile

    from test_testbed_ssh import SshLab
    before = labelled()
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="obsshlab-"))
    sl = SshLab(tmp)
    try:
        sl.bare()
        inv = sl.inventory()
        p = ob("run", *TRIMMED, "--inventory", inv, "--results", str(tmp_path),
               env=dict(sl.env(), OVERLAYBENCH_FAILPOINT="mid-test:2"))
        assert p.returncode == -9, (p.returncode, p.stderr[-2000:])
        run_dir, = tmp_path.iterdir()
        prefix = results.read_meta(run_dir)["testbed"]["prefix"]
        finished = results.read_records(run_dir)
        assert finished, "the kill came after the first case"
        assert {f"{prefix}-c0", f"{prefix}-c1"} <= labelled()
        assert [x for x in sl.leftovers() if prefix in x or x.startswith("process ") and _marked(x, prefix)]
        d = ob("down", "--inventory", inv, env=sl.env())
        assert d.returncode == 0, d.stderr
        assert "container" in d.stdout and f"netns {prefix}-c0" in d.stdout, d.stdout
        assert [x for x in sl.leftovers() if prefix in x or x.startswith("process ") and _marked(x, prefix)] == []
        assert not [c for c in labelled() if c.startswith(prefix)]
        r = ob("run", "--resume", str(run_dir), "-q", env=sl.env())
        assert r.returncode == 0, r.stderr[-2000:]
        recs = results.read_records(run_dir)
        keys = [(x["case"], x["repeat"], x["metric"]) for x in recs]
        assert len(keys) == len(set(keys)) and all(x in recs for x in finished)
        assert len({(x["case"], x["repeat"]) for x in recs if x["ok"]}) == 2 * 2 * 2   # modes × placements × tests
    finally:
        sl.close()
        shutil.rmtree(tmp, ignore_errors=True)
    assert labelled() - before == set()


def test_the_docker_sdk_is_imported_only_when_docker_containers_are_used():
    p = subprocess.run([sys.executable, "-X", "importtime", "-m", "harness.cli", "run", "--help"], cwd=ROOT,
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0
    imported = {ln.split("|")[-1].strip() for ln in p.stderr.splitlines() if ln.startswith("import time:")}
    assert "harness.core.errors" in imported and not [m for m in imported if m.split(".")[0] == "docker"]


def test_seed003_asks_for_docker_containers():
    from harness.run import scenario
    assert scenario.load(ROOT / "scenarios" / "seed003-weave-docker-ping-iperf.toml").containers == "docker"
