"""Preflight on a real SSH host (tests/sshd.py): the sleeve's build needs, checked in the
same single round trip as root, tools and kernel features, before anything is made.

The host is a namespace of this machine, so to stand for a host that cannot build the
sleeve and is of another architecture its shell gets a PATH of its own: /usr/bin without
gcc (the build's compiler), and perhaps an `uname` that answers another machine type.
"""

from __future__ import annotations

import os
import platform

import pytest
from sshd import ssh_world  # noqa: F401 - the fixture

from conftest import needs_root
from harness.hosts.ssh.host import SshHost
from harness.run import scenario as S
from harness.testbeds import preflight

pytestmark = [needs_root()]

OTHER_ARCH = "riscv64" if platform.machine() != "riscv64" else "x86_64"


def _bin_dir(path, without=(), arch=None, src="/usr/bin") -> str:
    """A directory standing for /usr/bin (or src), less `without`, with an `uname -m` of `arch`."""
    path.mkdir()
    for name in os.listdir(src):
        if name not in without and not (arch and name == "uname"):
            os.symlink(f"{src}/{name}", path / name)
    if arch:
        (path / "uname").write_text(f'#!/bin/sh\n[ "$1" = -m ] && echo {arch} || exec /usr/bin/uname "$@"\n')
        (path / "uname").chmod(0o755)
    return str(path)


class Counted(SshHost):
    """An SSH host whose shell runs with the given PATH, counting the commands it is sent."""

    def __init__(self, settings, path: str):
        super().__init__(settings)
        self.path, self.commands = path, 0

    def _shell_command(self):
        return f"{'sudo -n ' if self.settings.sudo else ''}env PATH={self.path}:/usr/sbin sh"

    def run(self, argv, **kw):
        self.commands += 1
        return super().run(argv, **kw)


@pytest.fixture(scope="module")
def hosts(ssh_world, tmp_path_factory):
    """name → host: no gcc and another architecture; no gcc, this one; gcc, another one."""
    tmp = tmp_path_factory.mktemp("preflight")
    made = {
        "cross": Counted(ssh_world.root.settings(name="cross"), _bin_dir(tmp / "cross", ("gcc",), OTHER_ARCH)),
        "same": Counted(ssh_world.root.settings(name="same"), _bin_dir(tmp / "same", ("gcc",))),
        "builds": Counted(ssh_world.sudo.settings(name="builds"), _bin_dir(tmp / "builds", (), OTHER_ARCH)),
    }
    yield made
    for h in made.values():
        h.close()


def _sc(*modes):
    return S.build({"matrix": {"modes": list(modes), "tests": ["iperf3.tcp"]}})


@pytest.mark.parametrize("modes", [("sleeve",), ("native", "auto"), ("sleeve-crypto-chacha",)])
def test_a_host_that_can_neither_build_the_sleeve_nor_run_this_machines_binary_is_one_line(hosts, modes):
    h = hosts["cross"]
    before = h.commands
    problems = preflight.host_problems(h, "cross", _sc(*modes))
    assert h.commands - before == 1                     # still one round trip
    assert problems == [f"cross: cannot build the sleeve (missing gcc) and this machine's sleeve binary is for "
                        f"{platform.machine()}, the host is {OTHER_ARCH}: apt-get install -y gcc"], problems


def test_the_build_needs_are_asked_only_of_a_scenario_that_may_deploy_the_sleeve(hosts):
    assert preflight.host_problems(hosts["cross"], "cross", _sc("native", "fastdp")) == []


@pytest.mark.parametrize("name", ["same", "builds"])
def test_a_host_that_builds_the_sleeve_or_takes_this_machines_binary_passes(hosts, name):
    """Without gcc but of this machine's architecture (install_remote ships this machine's
    binary), or of another with everything to build (over sudo here)."""
    assert preflight.host_problems(hosts[name], name, _sc("sleeve", "auto")) == []


def test_the_line_names_every_missing_need_with_its_package():
    line = preflight.sleeve_problem("h1", OTHER_ARCH, ["gcc", "pkg-config", "/usr/include/openssl/evp.h"])
    assert line.startswith("h1: cannot build the sleeve (missing gcc, pkg-config, /usr/include/openssl/evp.h)")
    assert line.endswith("apt-get install -y gcc libssl-dev pkg-config")
    assert preflight.sleeve_problem("h1", platform.machine(), ["gcc"]) is None   # this machine's binary will do
    assert preflight.sleeve_problem("h1", OTHER_ARCH, []) is None


def test_a_tool_missing_on_one_host_is_one_line_naming_that_host_and_the_package(ssh_world, tmp_path):
    """Two hosts over SSH, iperf3 and qperf gone from one of them (over sudo): only that host
    gets a line, naming the tools and the apt-get command, still in one round trip."""
    ok = Counted(ssh_world.root.settings(name="h0"), _bin_dir(tmp_path / "h0"))
    lacking = Counted(ssh_world.sudo.settings(name="h1"), _bin_dir(tmp_path / "h1", ("iperf3", "qperf")))
    sc = S.build({"matrix": {"modes": ["native"], "tests": ["iperf3.tcp", "qperf.tcp_lat"]}})
    try:
        assert preflight.host_problems(ok, "h0", sc) == []
        before = lacking.commands
        assert preflight.host_problems(lacking, "h1", sc) == [
            "h1: iperf3, qperf not found: apt-get install -y iperf3 qperf"]
        assert lacking.commands - before == 1
    finally:
        ok.close()
        lacking.close()


class OwnPath(Counted):
    """An SSH host whose shell's PATH is exactly the one given (no /usr/sbin added)."""

    def _shell_command(self):
        return f"{'sudo -n ' if self.settings.sudo else ''}env PATH={self.path} sh"


def test_a_host_without_nft_fails_preflight_naming_nftables(ssh_world, tmp_path):
    """A testbed confines what its hosts forward with an nftables table: a host without nft
    is one preflight line saying what to install, not a run with its forwarding unconfined."""
    path = f"{_bin_dir(tmp_path / 'bin')}:{_bin_dir(tmp_path / 'sbin', ('nft',), src='/usr/sbin')}"
    h = OwnPath(ssh_world.root.settings(name="h0"), path)
    try:
        assert preflight.host_problems(h, "h0", _sc("fastdp")) == ["h0: nft not found: apt-get install -y nftables"]
    finally:
        h.close()
