"""Vagrant hosts for real: the local images, dockerd, `vagrant up --provider=docker`, SSH in.

Everything here is real: debootstrap and `docker import` build the images (cached between
runs), a real dockerd runs the hosts, Vagrant brings them up and tears them down (the
quick matrix on two of them, VXLAN and TAP included, is tests/lab/test_testbed_vagrant.py). Only VirtualBox and libvirt VMs
cannot run on this machine (no nested virtualisation, no VirtualBox): for them the
Vagrantfile is validated, not booted, and VirtualBox's VBoxManage is a stand-in that only
reports a version.

The parsers, on captured output, are tests/unit/test_vagrant_parse.py.

Selection: the tests that build images or bring machines up are marked `slow`;
`pytest tests/lab/test_vagrant_hosts.py -m "not slow"` runs the bad inputs and the
validation in about 20 s. A dockerd that answers is used; when none does, the module starts
one (images/dockerd.sh) and stops it at the end.
"""

from __future__ import annotations

import ipaddress
import json
import os
import pathlib
import secrets
import shutil
import subprocess

import pytest

from conftest import needs_root
from harness.core.errors import HarnessError
from harness.testbeds import vagrant_cli

ROOT = pathlib.Path(__file__).resolve().parents[2]
IMAGES = ROOT / "images"
LAB_RANGE = ipaddress.ip_network("198.18.0.0/15")

slow = pytest.mark.slow
needs_vagrant = pytest.mark.skipif(shutil.which("vagrant") is None,
                                   reason="vagrant is not installed (make setup-test installs it)")


def real(test):
    """Root, vagrant, and a dockerd: built images and containers, so slow."""
    return needs_root()(needs_vagrant(slow(test)))


# ---- bad input, and the Vagrantfile validated ----------------------------------------

def _one_line(excinfo) -> str:
    msg = str(excinfo.value)
    assert "\n" not in msg and msg
    return msg


@needs_vagrant
def test_no_vagrantfile_in_the_directory(tmp_path):
    # A Vagrantfile in a parent does not count: Vagrant is pinned to the directory given.
    shutil.copy(ROOT / "Vagrantfile", tmp_path / "Vagrantfile")
    (tmp_path / "sub").mkdir()
    for d in (tmp_path / "sub", tmp_path / "nowhere"):
        for call in (vagrant_cli.status, vagrant_cli.ssh_config, vagrant_cli.destroy):
            with pytest.raises(HarnessError) as e:
                call(d)
            assert _one_line(e).startswith(f"no Vagrantfile in {d}")


@needs_vagrant
def test_a_bad_setting_in_the_environment_is_one_line(tmp_path):
    env = {"VAGRANT_DOTFILE_PATH": str(tmp_path / ".vagrant")}
    for var, value, needle in [("OVERLAYBENCH_MTU", "jumbo", "OVERLAYBENCH_MTU=jumbo: expected a whole number"),
                               ("OVERLAYBENCH_VAGRANT_NET", "10.0.0", "expected three octets inside 198.18.0.0/15")]:
        with pytest.raises(HarnessError) as e:
            vagrant_cli.status(ROOT, {**env, var: value})
        assert needle in _one_line(e)


@needs_root()
@needs_vagrant
def test_ssh_config_of_machines_not_up(dockerd, tmp_path):
    env = {"VAGRANT_DOTFILE_PATH": str(tmp_path / ".vagrant"), "VAGRANT_DEFAULT_PROVIDER": "docker"}
    assert vagrant_cli.status(ROOT, env) == {"h1": "not_created", "h2": "not_created"}
    with pytest.raises(HarnessError) as e:
        vagrant_cli.ssh_config(ROOT, env)
    assert _one_line(e) == ("vagrant ssh-config: h1 is not running (state not_created), h2 is not running "
                            "(state not_created); bring the machines up first")


@needs_vagrant
def test_dockerd_not_running(tmp_path):
    dead = f"unix://{tmp_path}/dead.sock"
    env = {"VAGRANT_DOTFILE_PATH": str(tmp_path / ".vagrant"), "DOCKER_HOST": dead}
    with pytest.raises(HarnessError) as e:
        vagrant_cli.up(ROOT, provider="docker", env=env)
    assert _one_line(e) == f"vagrant up: dockerd does not answer at {dead} (start one: make dockerd-up)"
    assert vagrant_cli.status(ROOT, env) == {"h1": "not_created", "h2": "not_created"}


@needs_root()
@needs_vagrant
def test_vagrantfile_validates_for_every_provider(dockerd, tmp_path):
    """libvirt and VirtualBox VMs cannot boot here; their settings are validated, not run.
    VirtualBox's provider asks `VBoxManage --version` before validating: a stand-in answers.
    (The docker provider asks dockerd whether it is usable, so a dockerd runs.)"""
    env = {"VAGRANT_DOTFILE_PATH": str(tmp_path / ".vagrant"), "OVERLAYBENCH_MTU": "9000"}
    had_dotdir = (ROOT / ".vagrant").exists()
    vagrant_cli.validate(ROOT, "docker", env)
    plugins = subprocess.run(["vagrant", "plugin", "list"], capture_output=True, text=True, cwd=tmp_path,
                             env={**os.environ, "VAGRANT_CHECKPOINT_DISABLE": "1"}).stdout
    if "vagrant-libvirt" in plugins:
        vagrant_cli.validate(ROOT, "libvirt", env)
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "VBoxManage").write_text("#!/bin/sh\necho 7.0.20r163906\n")
    (fake / "VBoxManage").chmod(0o755)
    vagrant_cli.validate(ROOT, "virtualbox", {**env, "PATH": f"{fake}:{os.environ['PATH']}"})
    # A setting a provider does not know fails validation, so the checks above mean something.
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "images" / "host").mkdir(parents=True)
    shutil.copy(IMAGES / "rootfs.packages", broken / "images")
    shutil.copy(IMAGES / "host" / "packages", broken / "images" / "host")
    (broken / "Vagrantfile").write_text((ROOT / "Vagrantfile").read_text().replace("vb.cpus = 2", "vb.cpuz = 2"))
    with pytest.raises(HarnessError) as e:
        vagrant_cli.validate(broken, "virtualbox", {**env, "PATH": f"{fake}:{os.environ['PATH']}"})
    assert "cpuz" in _one_line(e)
    assert (ROOT / ".vagrant").exists() == had_dotdir  # the repository's .vagrant/ untouched


# ---- dockerd and the images ---------------------------------------------------------

def _docker(*args, check=True) -> str:
    return subprocess.run(["docker", *args], capture_output=True, text=True, check=check, timeout=600).stdout


def plant_lost_container(data_path, machine: str, image: str, *create_args: str) -> str:
    """A container labelled as the bundled Vagrantfile labels `machine`'s for the Vagrant data
    directory `data_path`, but never recorded by Vagrant (created, not started): its id."""
    return _docker("create", "--label", f"{vagrant_cli.DATA_LABEL}={data_path}", "--label",
                   f"{vagrant_cli.MACHINE_LABEL}={machine}", *create_args, image, "true").strip()


def _build(kind: str, env: dict | None = None, script: pathlib.Path = IMAGES / "build.sh") -> str:
    p = subprocess.run([str(script), kind], capture_output=True, text=True, timeout=1200,
                       env={**os.environ, **(env or {})})
    assert p.returncode == 0, p.stdout + p.stderr
    return p.stdout


def _name(kind: str) -> str:
    return subprocess.run([str(IMAGES / "build.sh"), "name", kind], capture_output=True, text=True,
                          check=True).stdout.strip()


@pytest.fixture(scope="module")
def host_image(dockerd) -> str:
    _build("vagrant-host")  # a no-op when the image carries the current recipe
    return _name("vagrant-host")


@pytest.fixture(scope="module")
def tools_image(dockerd) -> str:
    _build("tools")
    return _name("tools")


def _label(image: str) -> str:
    return _docker("image", "inspect", "-f", '{{index .Config.Labels "org.overlaybench.recipe"}}', image).strip()


def _key(kind: str) -> str:
    return subprocess.run([str(IMAGES / "build.sh"), "key", kind], capture_output=True, text=True,
                          check=True).stdout.strip()


@real
def test_dockerd_bridge_is_in_the_benchmark_range(dockerd):
    mine = subprocess.run([str(IMAGES / "dockerd.sh"), "status"], capture_output=True, text=True).stdout
    if "started by this script" not in mine:
        pytest.skip("dockerd was started elsewhere; its bridge is not ours to check")
    subnets = json.loads(_docker("network", "inspect", "bridge", "-f", "{{json .IPAM.Config}}"))
    assert subnets and all(ipaddress.ip_network(s["Subnet"]).subnet_of(LAB_RANGE) for s in subnets)


@real
def test_host_image_has_what_vagrant_and_the_harness_need(host_image):
    assert _label(host_image) == _key("vagrant-host")
    assert json.loads(_docker("image", "inspect", "-f", "{{json .Config.Cmd}}", host_image)) == [
        "/usr/local/sbin/overlaybench-sshd"]
    script = ("set -e; id vagrant; sudo -n -u vagrant sudo -n true && echo SUDO-OK; "
              "cat /home/vagrant/.ssh/authorized_keys; ls /etc/ssh/ | grep -c ssh_host_ || true; "
              "test -d /run/sshd && echo RUN-SSHD; "
              "for t in sshd ip ethtool iperf3 qperf ping ps nft gcc make pkg-config; do command -v $t >/dev/null "
              "|| { echo missing $t; exit 1; }; done; pkg-config --exists libssl libcrypto && echo LIBS-OK")
    out = _docker("run", "--rm", "--network", "none", "--entrypoint", "/bin/sh", host_image, "-c", script)
    assert "uid=1000(vagrant)" in out and "SUDO-OK" in out and "RUN-SSHD" in out and "LIBS-OK" in out
    assert "vagrant insecure public key" in out
    assert "\n0\n" in out  # no host key baked in: each container makes its own


@real
def test_tools_image_runs_the_tools_and_sleeps(tools_image):
    assert _label(tools_image) == _key("tools")
    assert json.loads(_docker("image", "inspect", "-f", "{{json .Config.Cmd}}", tools_image)) == ["sleep", "infinity"]
    out = _docker("run", "--rm", "--network", "none", "--entrypoint", "/bin/sh", tools_image, "-c",
                  "iperf3 --version; qperf --version; ping -V; ip -V; ethtool --version; ps -V")
    assert "iperf 3." in out and "ip utility" in out and "ethtool version" in out


@real
def test_a_build_is_cached_and_redone_when_its_recipe_changes(tools_image, tmp_path):
    """A copy of images/ builds a per-test tag from the same cached rootfs; built again it is a
    no-op; after its recipe changes it is rebuilt and the image it replaced is gone."""
    recipe = tmp_path / "images"
    shutil.copytree(IMAGES, recipe)
    tag = f"overlaybench/tools-test-{secrets.token_hex(3)}:t"
    env = {"OVERLAYBENCH_TOOLS_IMAGE": tag}
    try:
        assert "built " + tag in _build("tools", env, recipe / "build.sh")
        first = _docker("image", "inspect", "-f", "{{.Id}}", tag).strip()
        assert "is up to date" in _build("tools", env, recipe / "build.sh")
        assert _docker("image", "inspect", "-f", "{{.Id}}", tag).strip() == first
        with open(recipe / "build.sh", "a") as f:
            f.write("# a changed recipe\n")
        assert "built " + tag in _build("tools", env, recipe / "build.sh")
        second = _docker("image", "inspect", "-f", "{{.Id}}", tag).strip()
        assert second != first and _label(tag) != _label(tools_image)
        assert first not in _docker("images", "-q", "--no-trunc")
    finally:
        _docker("rmi", tag, check=False)
    assert tag.split(":")[0] not in _docker("images", "--format", "{{.Repository}}")


# ---- Vagrant's docker provider, for real ----------------------------------------------

def _left_behind(dotfile: pathlib.Path) -> list[str]:
    """Containers, docker networks and Vagrant machine-index entries a test could leave."""
    out = []
    containers = _docker("ps", "-a", "--format", "{{.Names}} {{.Image}}").splitlines()
    out += [c for c in containers if "overlaybench/vagrant-host" in c or "overlaybench/nope" in c]
    out += [n for n in _docker("network", "ls", "--format", "{{.Name}}").splitlines()
            if n.startswith("vagrant_network")]
    subprocess.run(["vagrant", "global-status", "--prune"], capture_output=True, cwd=dotfile.parent,
                   env={**os.environ, "VAGRANT_CHECKPOINT_DISABLE": "1"})
    index = pathlib.Path(os.environ.get("VAGRANT_HOME", pathlib.Path.home() / ".vagrant.d")) / "data/machine-index/index"
    if index.exists():
        machines = json.loads(index.read_text()).get("machines", {})
        out += [f"vagrant machine {m.get('name')} in {m.get('local_data_path')}" for m in machines.values()
                if str(m.get("local_data_path", "")).startswith(str(dotfile))]
    return out


def early_exit_vagrantfile(d: pathlib.Path, image: str, hosts: dict[str, str]) -> pathlib.Path:
    """A Vagrantfile in `d` whose docker-provider hosts (name → private address) exit as
    soon as they start, with a boot timeout of 5 s; returns `d`."""
    d.mkdir()
    machines = "".join(f"""
  config.vm.define "{name}" do |h|
    h.vm.provider "docker" do |docker|
      docker.image = "{image}"
      docker.cmd = ["/bin/sh", "-c", "echo exiting early >&2; exit 3"]
      docker.has_ssh = true
      docker.remains_running = true
    end
    h.vm.network :private_network, ip: "{ip}", netmask: "24"
  end""" for name, ip in hosts.items())
    (d / "Vagrantfile").write_text(f"""
Vagrant.configure("2") do |config|
  config.vm.synced_folder ".", "/vagrant", disabled: true
  config.vm.boot_timeout = 5{machines}
end
""")
    return d


@real
def test_a_machine_that_does_not_come_up_is_destroyed_again(host_image, tmp_path):
    """A host whose container exits at once: Vagrant waits for SSH until its boot timeout
    (the container joins a network, so Vagrant starts it without watching it run), then
    one line naming the machine, and nothing left: container, network, machine."""
    d = early_exit_vagrantfile(tmp_path / "early", host_image, {"h1": "198.19.253.21"})
    dotfile = tmp_path / ".vagrant"
    env = {"VAGRANT_DOTFILE_PATH": str(dotfile)}
    with pytest.raises(HarnessError) as e:
        vagrant_cli.up(d, provider="docker", env=env)
    # Which of its two messages Vagrant gives depends on whether it saw the container stop
    # before or after joining the network: either names the machine and what went wrong.
    line = _one_line(e)
    assert line.startswith(("vagrant up: h1: Timed out while waiting for the machine to boot.",
                            'vagrant up: h1: The container started either never left the "stopped" state')), line
    assert vagrant_cli.status(d, env) == {"h1": "not_created"}
    assert _left_behind(dotfile) == []


@real
def test_an_interrupted_up_stops_vagrant_and_destroys_what_it_made(host_image, tmp_path):
    """Ctrl-C in the middle of `up` (here: from the progress callback, once a container
    exists): Vagrant is stopped, the machines it was creating are destroyed, the interrupt
    goes on to the caller. Also removed: a container Vagrant created but never recorded, as
    an interrupt between `docker create` and Vagrant writing the machine's id leaves one
    (planted here, labelled as the Vagrantfile labels h2's: the race itself is rare)."""
    dotfile = tmp_path / ".vagrant"
    env = {"VAGRANT_DOTFILE_PATH": str(dotfile)}
    seen: list[str] = []
    by_label = f"label={vagrant_cli.DATA_LABEL}={dotfile}"
    lost = plant_lost_container(dotfile, "h2", host_image)
    try:
        labelled: list[str] = []

        def progress(line: str) -> None:
            seen.append(line)
            if "Container created" in line:
                labelled.extend(_docker("ps", "-aq", "--no-trunc", "--filter", by_label).split())
                raise KeyboardInterrupt

        with pytest.raises(KeyboardInterrupt):
            vagrant_cli.up(ROOT, provider="docker", progress=progress, env=env)
        assert any("Container created" in ln for ln in seen)
        # Vagrant's own container carries the labels the harness looks for.
        assert set(labelled) - {lost}, labelled
        assert any("Deleting the container" in ln for ln in seen), seen[-10:]
        assert _docker("ps", "-aq", "--filter", by_label) == ""
        assert vagrant_cli.status(ROOT, env) == {"h1": "not_created", "h2": "not_created"}
        assert _left_behind(dotfile) == []
    finally:
        _docker("rm", "-f", lost, check=False)  # only if the test failed
