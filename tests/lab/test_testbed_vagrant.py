"""--backend vagrant for real: the repository's Vagrantfile, its docker provider (the hosts
are containers of the locally built image), the quick matrix through the SSH backend, and
`vagrant destroy` afterwards, also when the test fails."""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import subprocess
import sys

import pytest
from test_vagrant_hosts import early_exit_vagrantfile, plant_lost_container

from conftest import needs_root
from harness import results

pytestmark = [needs_root(), pytest.mark.slow]
ROOT = pathlib.Path(__file__).resolve().parents[2]


def _require_docker() -> None:
    """make test starts dockerd and builds the image; without them this is a broken set-up."""
    for tool in ("vagrant", "docker"):
        if not shutil.which(tool):
            pytest.fail(f"{tool} not installed: make test installs it (APT_HOSTS)")
    if subprocess.run(["docker", "info"], capture_output=True, timeout=30).returncode != 0:
        pytest.fail("no dockerd answers: make dockerd-up (make test starts one)")
    if subprocess.run(["docker", "image", "inspect", "overlaybench/vagrant-host:bookworm"],
                      capture_output=True, timeout=30).returncode != 0:
        pytest.fail("the Vagrant host image is missing: make vagrant-image")


@pytest.fixture
def vagrant_env(tmp_path):
    """Vagrant's state for this test in a temp dir (the repository's .vagrant/ stays untouched);
    whatever happens, the machines are destroyed afterwards."""
    _require_docker()
    env = dict(os.environ, VAGRANT_DOTFILE_PATH=str(tmp_path / "dot"), VAGRANT_HOME=str(tmp_path / "home"),
               HOME=str(tmp_path))
    try:
        yield env
    finally:
        subprocess.run(["vagrant", "destroy", "-f"], cwd=ROOT, env=env, capture_output=True, timeout=300)


def ob(*args, env, timeout=900):
    return subprocess.run([sys.executable, "-m", "harness.cli", *args], cwd=ROOT, capture_output=True, text=True,
                          env=env, timeout=timeout)


def _vagrant_containers() -> list[str]:
    out = subprocess.run(["docker", "ps", "-a", "--format", "{{.Names}} {{.Image}}"], capture_output=True,
                         text=True, timeout=30).stdout
    return [ln for ln in out.splitlines() if "vagrant-host" in ln]


def test_quick_matrix_on_two_vagrant_hosts_then_destroyed(vagrant_env, tmp_path):
    # The private network's MTU from the environment, as a user sets it for VMs: the run's
    # underlay (auto) is what the hosts' NICs then have.
    env = dict(vagrant_env, OVERLAYBENCH_MTU="1400")
    p = ob("run", str(ROOT / "scenarios" / "quick.toml"), "--backend", "vagrant", "--vagrant-destroy",
           "--underlay-mtu", "auto", "--tests", "iperf3.tcp", "--repeats", "1", "--duration", "1", "-q",
           "--results", str(tmp_path / "r"),
           env=env)
    assert p.returncode == 0, p.stderr[-3000:]
    run_dir = pathlib.Path(p.stdout.splitlines()[0])
    recs = results.read_records(run_dir)
    assert recs and all(r["ok"] for r in recs), [r for r in recs if not r["ok"]][:3]
    assert {r["underlay_mtu"] for r in recs} == {1400}
    assert {r["overlay_mtu"] for r in recs if r["mode"] == "fastdp"} == {1350}
    assert {r["mode"] for r in recs} == {"native", "fastdp", "sleeve"}
    assert {r["placement"] for r in recs} == {"host-host", "container-container"}
    meta = json.loads((run_dir / "run.json").read_text())
    assert meta["backend"] == "vagrant"
    tb = meta["testbed"]
    assert tb["vagrant"]["machines"] == ["h1", "h2"] and "accepted" in tb["vagrant"]["host_keys"]
    assert {h["underlay_dev"] for h in tb["hosts"].values()} == {"eth1"}
    assert all(h["underlay"].startswith("198.19.253.") for h in tb["hosts"].values())
    # --vagrant-destroy: no machine, no container, no network left
    assert _vagrant_containers() == []
    nets = subprocess.run(["docker", "network", "ls", "--format", "{{.Name}}"], capture_output=True, text=True,
                          timeout=30).stdout.split()
    assert not [n for n in nets if n.startswith("vagrant_network")], nets


def test_three_vagrant_hosts_every_pair_as_a_mesh_then_destroyed(vagrant_env, tmp_path):
    """OVERLAYBENCH_HOSTS=3: the Vagrantfile's three machines, `--pair all`, every pair at
    once over native, fastdp, the sleeve and the keyed sleeve; each pair's line names its
    hosts, and `--vagrant-destroy` leaves no machine. False failures: none by design (no
    figure is judged beyond "a number was measured")."""
    env = dict(vagrant_env, OVERLAYBENCH_HOSTS="3")
    p = ob("run", "--backend", "vagrant", "--vagrant-destroy", "--pair", "all", "--schedule", "mesh",
           "--modes", "native,fastdp,sleeve,sleeve-crypto", "--tests", "iperf3.tcp", "--placements", "host-host",
           "--repeats", "1", "--duration", "1", "-q", "--results", str(tmp_path / "r"), env=env)
    assert p.returncode == 0, p.stderr[-3000:]
    run_dir = pathlib.Path(p.stdout.splitlines()[0])
    recs = [r for r in results.read_records(run_dir) if r["metric"] == "throughput_bps"]
    assert all(r["ok"] and r["value"] > 0 for r in recs), [r for r in recs if not r["ok"]][:3]
    every = ["h1→h2", "h1→h3", "h2→h3"]
    got = {}
    for r in recs:
        got.setdefault(r["mode"], []).append(r["pair"])
    assert got == {m: every for m in ("native", "fastdp", "sleeve", "sleeve-crypto")}
    tb = json.loads((run_dir / "run.json").read_text())["testbed"]
    assert tb["vagrant"]["machines"] == sorted(h["name"] for h in tb["hosts"].values()) == ["h1", "h2", "h3"]
    assert all(h["underlay"].startswith("198.19.253.") for h in tb["hosts"].values())
    assert _vagrant_containers() == []


def _one_line(p) -> str:
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert p.returncode == 2, (p.returncode, p.stderr[-1500:])
    assert len(lines) == 1 and "Traceback" not in p.stderr, p.stderr
    return lines[0]


@pytest.mark.parametrize("case, needle", [
    ("no-vagrant", "vagrant"),
    ("no-vagrantfile", "no Vagrantfile there"),
    ("dead-dockerd", "dockerd"),
    ("image-missing", "overlaybench/nope"),
])
def test_bad_vagrant_input_is_one_line_exit_2_and_leaves_nothing(vagrant_env, tmp_path, case, needle):
    env = dict(vagrant_env)
    args = ["run", "--backend", "vagrant", "--modes", "native", "--tests", "iperf3.tcp", "--repeats", "1",
            "--duration", "1", "--results", str(tmp_path / "r")]
    if case == "no-vagrant":
        bindir = tmp_path / "bin"
        bindir.mkdir()
        for tool in ("ip", "docker", "ping"):
            os.symlink(shutil.which(tool), bindir / tool)
        env["PATH"] = str(bindir)
    elif case == "no-vagrantfile":
        args += ["--vagrant-dir", str(tmp_path)]
    elif case == "dead-dockerd":
        env["DOCKER_HOST"] = f"unix://{tmp_path}/no-docker.sock"
    elif case == "image-missing":
        env["OVERLAYBENCH_HOST_IMAGE"] = "overlaybench/nope:missing"
    line = _one_line(ob(*args, env=env, timeout=300))
    assert needle in line, line
    assert not (tmp_path / "r").exists()
    assert _vagrant_containers() == []


def test_a_machine_that_does_not_come_up_is_one_line_exit_2_and_leaves_nothing(vagrant_env, tmp_path):
    """`run --backend vagrant` on a Vagrantfile whose hosts exit as soon as they start: one
    line naming the machine, exit 2, no run directory, and Vagrant's machines are gone."""
    d = early_exit_vagrantfile(tmp_path / "early", "overlaybench/vagrant-host:bookworm",
                               {"h1": "198.19.253.31", "h2": "198.19.253.32"})
    p = ob("run", "--backend", "vagrant", "--vagrant-dir", str(d), "--modes", "native", "--tests", "iperf3.tcp",
           "--repeats", "1", "--duration", "1", "--results", str(tmp_path / "r"), env=vagrant_env, timeout=300)
    line = _one_line(p)
    # the machine and Vagrant's own reason, not its heading for machines brought up in parallel
    assert line.startswith(("overlaybench: vagrant up: h1: ", "overlaybench: vagrant up: h2: ")), line
    assert "in parallel" not in line and ("boot" in line or '"stopped" state' in line), line
    assert not (tmp_path / "r").exists()
    assert _vagrant_containers() == []
    st = subprocess.run(["vagrant", "status", "--machine-readable"], cwd=d, env=vagrant_env, capture_output=True,
                        text=True, timeout=120).stdout
    assert ",state,not_created" in st and ",state,running" not in st, st


def test_down_backend_vagrant_destroys_the_machines(vagrant_env, tmp_path):
    """Machines a run left up (no --vagrant-destroy) are destroyed by `down --backend vagrant`,
    which says what it removed; a second `down` finds nothing. Also removed: a container of
    this project's Vagrant data that Vagrant lost track of, as an `up` killed between `docker
    create` and Vagrant writing the machine's id leaves one (planted here, labelled as the
    Vagrantfile labels a machine's)."""
    up = subprocess.run(["vagrant", "up", "--provider=docker"], cwd=ROOT, env=vagrant_env, capture_output=True,
                        text=True, timeout=600)
    assert up.returncode == 0, up.stdout[-2000:] + up.stderr[-2000:]
    assert len(_vagrant_containers()) == 2
    name = f"obtest-lost-{os.getpid()}"
    lost = plant_lost_container(vagrant_env["VAGRANT_DOTFILE_PATH"], "h3", "overlaybench/vagrant-host:bookworm",
                                "--name", name)
    try:
        p = ob("down", "--backend", "vagrant", env=vagrant_env, timeout=300)
        assert p.returncode == 0, p.stderr[-2000:]
        assert "h1" in p.stdout + p.stderr and "h2" in p.stdout + p.stderr, (p.stdout, p.stderr)
        assert f"container {name} (h3), which vagrant lost track of" in p.stdout, p.stdout
        assert _vagrant_containers() == []
        again = ob("down", "--backend", "vagrant", env=vagrant_env, timeout=300)
        assert again.returncode == 0 and "h1" not in again.stdout and "h3" not in again.stdout, \
            (again.stdout, again.stderr)
    finally:
        subprocess.run(["docker", "rm", "-f", lost], capture_output=True, timeout=120)  # only if the test failed
