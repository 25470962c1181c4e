"""images/tools.sh and tools.Containerfile, read and asked without building (rootless): the
Containerfile installs exactly images/rootfs.packages and carries blast as its only built
binary; the builder is picked buildah, podman, docker; multi-arch is built only where the
base comes from a registry and qemu's binfmt handlers are registered, and otherwise one line
says why; the recipe hash moves with what goes into the image."""

from __future__ import annotations

import os
import pathlib
import re
import shutil
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
TOOLS_SH = ROOT / "images" / "tools.sh"
CONTAINERFILE = ROOT / "images" / "tools.Containerfile"


def packages(text: str) -> set[str]:
    return {w for ln in text.splitlines() if not ln.lstrip().startswith("#") for w in ln.split()}


def test_the_containerfile_installs_the_rootfs_packages_and_builds_blast_apart():
    text = CONTAINERFILE.read_text()
    stages = re.split(r"^FROM ", text, flags=re.M)[1:]
    assert [s.split()[0] for s in stages] == ["${BASE}", "${BASE}"] and " AS blast" in stages[0].splitlines()[0]
    final = stages[1]
    installed = re.search(r"--no-install-recommends \\\s*\n\s*([^>]+)>", final)[1].split()
    assert set(installed) == packages((ROOT / "images" / "rootfs.packages").read_text())
    assert "gcc" not in final and "COPY --from=blast /out/blast /usr/local/bin/blast" in final
    assert 'CMD ["sleep", "infinity"]' in final and not re.search(r"^USER ", text, flags=re.M)
    assert re.search(r"^ARG BASE=docker\.io/library/debian:bookworm$", text, flags=re.M)


# What tools.sh and build.sh's rootfs-key run besides a builder.
SYSTEM = ("bash", "sh", "env", "dpkg", "dpkg-query", "sha256sum", "cut", "grep", "cat", "dirname", "uname", "xargs",
          "sed", "tr", "head", "tail")


@pytest.fixture
def fake_bin(tmp_path):
    """The only PATH: do-nothing buildah, podman and docker, and the system's other tools."""
    b = tmp_path / "bin"
    b.mkdir()
    for name in ("buildah", "podman", "docker"):
        (b / name).write_text("#!/bin/sh\nexit 0\n")
        (b / name).chmod(0o755)
    for name in SYSTEM:
        real = shutil.which(name)
        if real:
            (b / name).symlink_to(real)
    return b


def tools(*args, env: dict, path: pathlib.Path) -> subprocess.CompletedProcess:
    e = {k: v for k, v in os.environ.items() if not k.startswith("OVERLAYBENCH_")}
    e.update(env, PATH=str(path))
    return subprocess.run([str(TOOLS_SH), *args], capture_output=True, text=True, env=e, timeout=30)


def test_the_builder_is_buildah_then_podman_then_docker(fake_bin):
    assert tools("builder", env={}, path=fake_bin).stdout.strip() == "buildah"
    (fake_bin / "buildah").unlink()
    assert tools("builder", env={}, path=fake_bin).stdout.strip() == "podman"
    (fake_bin / "podman").unlink()
    assert tools("builder", env={}, path=fake_bin).stdout.strip() == "docker"
    bad = tools("builder", env={"OVERLAYBENCH_BUILDER": "kaniko"}, path=fake_bin)
    assert bad.returncode == 1 and bad.stderr.count("\n") == 1 and "kaniko" in bad.stderr


def test_the_default_name_is_fully_qualified(fake_bin):
    assert tools("name", env={}, path=fake_bin).stdout.strip() == "localhost/overlaybench/tools:bookworm"


@pytest.mark.parametrize("builder, base, handler, want, why", [
    ("buildah", None, True, "linux/amd64", "the base is the local amd64 rootfs"),
    ("buildah", "docker.io/library/debian:bookworm", False, "linux/amd64", "no qemu-aarch64 binfmt handler"),
    ("docker", "docker.io/library/debian:bookworm", True, "linux/amd64", "docker's legacy builder"),
    ("buildah", "docker.io/library/debian:bookworm", True, "linux/amd64,linux/arm64", None),
    ("podman", "docker.io/library/debian:bookworm", True, "linux/amd64,linux/arm64", None),
])
def test_multi_arch_only_where_it_can_be_built(fake_bin, tmp_path, builder, base, handler, want, why):
    if subprocess.run(["dpkg", "--print-architecture"], capture_output=True, text=True).stdout.strip() != "amd64":
        pytest.skip("the cases are written for an amd64 machine")
    binfmt = tmp_path / "binfmt"
    binfmt.mkdir()
    if handler:
        (binfmt / "qemu-aarch64").write_text("enabled\ninterpreter /usr/libexec/qemu-binfmt/aarch64-binfmt-P\n")
    env = {"OVERLAYBENCH_BUILDER": builder, "OVERLAYBENCH_BINFMT": str(binfmt)}
    if base:
        env["OVERLAYBENCH_BASE"] = base
    p = tools("platforms", env=env, path=fake_bin)
    assert p.returncode == 0 and p.stdout.strip() == want, p.stderr
    if why:
        assert p.stderr.count("\n") == 1 and "multi-arch: unsupported here: " + why in p.stderr, p.stderr
    else:
        assert p.stderr == ""


def test_the_recipe_hash_moves_with_the_base_and_the_platforms(fake_bin, tmp_path):
    binfmt = tmp_path / "binfmt"
    binfmt.mkdir()
    (binfmt / "qemu-aarch64").write_text("enabled\n")
    common = {"OVERLAYBENCH_BUILDER": "buildah", "OVERLAYBENCH_BINFMT": str(binfmt)}
    keys = {tools("key", env={**common, **e}, path=fake_bin).stdout.strip() for e in (
        {}, {"OVERLAYBENCH_BASE": "docker.io/library/debian:bookworm"},
        {"OVERLAYBENCH_BASE": "docker.io/library/debian:bookworm", "OVERLAYBENCH_PLATFORMS": "linux/amd64"},
        {"OVERLAYBENCH_BASE": "mirror.example/debian:bookworm"})}
    assert len(keys) == 4 and all(re.fullmatch(r"[0-9a-f]{16}", k) for k in keys)
    assert tools("key", env=common, path=fake_bin).stdout.strip() in keys      # and it is stable
