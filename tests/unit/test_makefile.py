"""The Makefile's installs, read without running them (rootless): every apt-get install goes
through scripts/apt-install.sh (tests/unit/test_apt_install.py), so no package it brings
leaves a service enabled or running; `make bench` installs what the quick scenario needs
and nothing more."""

import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[2]
QUOTED = re.compile(r'"(?:[^"\\]|\\.)*"|\'[^\']*\'')


def logical_lines(text: str) -> list[str]:
    """The Makefile's lines with backslash continuations joined."""
    return re.sub(r"\\\n", " ", text).splitlines()


def parse(path: pathlib.Path = ROOT / "Makefile"):
    """(variables, {target: prerequisites}, {target: recipe lines}) of a plain Makefile."""
    variables: dict[str, str] = {}
    prereqs: dict[str, list[str]] = {}
    recipes: dict[str, list[str]] = {}
    current: list[str] = []
    for line in logical_lines(path.read_text()):
        if line.startswith("\t"):
            for t in current:
                recipes.setdefault(t, []).append(line.strip())
            continue
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        m = re.match(r"^([A-Za-z_][A-Za-z0-9_]*)\s*(?::=|\?=|=)\s*(.*)$", line)
        if m:
            variables[m[1]] = m[2].split("#")[0].strip()
            current = []
            continue
        m = re.match(r"^([^:=#]+):(?!=)(.*)$", line)
        if m:
            current = m[1].split()
            for t in current:
                prereqs.setdefault(t, []).extend(m[2].split("#")[0].split())
    return variables, prereqs, recipes


def expand(text: str, variables: dict[str, str]) -> str:
    for _ in range(10):
        text = re.sub(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)", lambda m: variables.get(m[1], m[0]), text)
    return text


def closure(target: str, prereqs: dict[str, list[str]], variables) -> set[str]:
    seen: set[str] = set()
    todo = [target]
    while todo:
        t = todo.pop()
        for p in expand(" ".join(prereqs.get(t, [])), variables).split():
            if p not in seen:
                seen.add(p)
                todo.append(p)
    return seen


def unquoted_installs(lines: list[str]) -> list[str]:
    """Lines that run apt-get install themselves (an install hint inside quotes is text)."""
    return [ln for ln in lines if re.search(r"apt-get\s+(\S+\s+)*install", QUOTED.sub("", ln))]


def test_every_apt_get_install_of_the_makefile_goes_through_the_helper():
    variables, _, recipes = parse()
    every = [ln for rs in recipes.values() for ln in rs] + list(variables.values())
    assert unquoted_installs(every) == []
    assert variables["APT"] == "scripts/apt-install.sh"
    assert variables["APT_INSTALL"].startswith("$(APT) ")
    # and every recipe that names a package list installs it with the helper
    for target, lines in recipes.items():
        text = " ".join(lines)
        if re.search(r"\$\(APT_(BENCH|RUN|TEST|HOSTS|RUN_BARE|IMAGE|REGISTRY)\)", text):
            assert re.search(r"\$\(APT(_INSTALL)?\) ", text), target


def test_the_ci_script_installs_through_the_helper_too():
    lines = logical_lines((ROOT / ".ci" / "run").read_text())
    assert unquoted_installs([ln for ln in lines if not ln.lstrip().startswith("#")]) == []
    assert any(re.search(r"^\s*make test\b", ln) for ln in lines)


def test_unquoted_installs_sees_through_hints_only():
    assert unquoted_installs(['echo "no go (apt-get install -y golang-go)"']) == []
    assert unquoted_installs(["apt-get update -qq && apt-get -y install etcd-server"])
    assert unquoted_installs(["DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing"])


def test_bench_installs_what_the_quick_scenario_needs_and_not_the_rest():
    from harness.run.scenario import load
    from harness.sleeve import build as sleeve_build
    from harness.testbeds import preflight
    from harness.testbeds.lab import LAB_BINARIES
    from harness.tools.packages import command

    variables, prereqs, _ = parse()
    bench = closure("bench", prereqs, variables)
    assert ".apt-bench.stamp" in bench and ".venv/.stamp" in bench and "sleeve" in bench
    assert not bench & {"setup", ".apt-run.stamp", ".apt-test.stamp", ".apt-hosts.stamp", "aws-lc",
                        "wireguard-go", "flanneld", "wireguard-tools"}

    sc = load(ROOT / "scenarios" / "quick.toml")
    binaries = set(preflight.needed_binaries(sc, base=LAB_BINARIES)) | set(preflight.BASE_BINARIES)
    need = {command(b).package for b in binaries}
    if preflight.sleeve_modes(sc):
        need |= set(sleeve_build.build_needs().values())
    need |= {"python3-venv", "git"}           # the .venv; run.json's commit
    have = set(expand(variables["APT_BENCH"], variables).split())
    assert need - {"dash", "coreutils", "util-linux", "libc-bin"} <= have, need - have
    assert not have & {"etcd-server", "irtt", "cmake", "prometheus", "docker.io", "chromium"}
    # make setup installs everything bench does, and more
    assert have < set(expand(variables["APT_RUN"], variables).split())
    assert {".venv/.stamp", "sleeve", "aws-lc", ".apt-run.stamp"} <= closure("setup", prereqs, variables)
    assert {".apt-test.stamp", ".apt-hosts.stamp", ".apt-image.stamp"} <= closure("test", prereqs, variables)
    assert not bench & {".apt-image.stamp"}


def test_the_tools_image_is_built_without_a_daemon():
    """make tools-image installs buildah (and skopeo, to copy into a dockerd or registry) and
    builds with images/tools.sh, which needs no dockerd; the lab test's registry comes with make test."""
    variables, prereqs, recipes = parse()
    assert {"buildah", "skopeo", "debootstrap"} <= set(variables["APT_IMAGE"].split())
    assert {"docker-registry", "apache2-utils"} <= set(variables["APT_REGISTRY"].split())
    for target in ("tools-image", "tools-archive"):
        assert "dockerd-up" not in closure(target, prereqs, variables), target
        assert ".apt-image.stamp" in prereqs[target]
        assert any(ln.startswith("@images/tools.sh ") for ln in recipes[target]), recipes[target]
