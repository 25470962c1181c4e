"""overlaybench outside its checkout: a wheel carries the sleeve's source and builds it."""

import pathlib
import shutil
import subprocess
import sys
import zipfile

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    """Built from a copy of the checkout's files (setuptools writes build/ where it builds)."""
    out = tmp_path_factory.mktemp("wheel")
    src = tmp_path_factory.mktemp("src")
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT, capture_output=True,
                           text=True, check=True).stdout.splitlines()
    for f in files:
        if (ROOT / f).is_file():
            (src / f).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / f, src / f)
    # Offline: the venv's setuptools builds it (no isolated build environment from an index).
    p = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
                        "--no-index", "-w", str(out), str(src)], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    whl, = out.glob("overlaybench-*.whl")
    return whl


def test_the_wheel_carries_the_sleeve_source_and_every_subpackage(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    src = sorted((ROOT / "overlay" / "sleeve" / "src").glob("*.[ch]"))
    assert src
    for f in src:
        assert f"harness/overlay_src/sleeve/src/{f.name}" in names
    assert "harness/overlay_src/sleeve/Makefile" in names and "harness/overlay_src/sleeve/aws-lc.sh" in names
    for pkg in sorted(p.parent for p in (ROOT / "harness").rglob("__init__.py")):
        rel = pkg.relative_to(ROOT).as_posix()
        assert f"{rel}/__init__.py" in names, f"{rel} is not packaged (pyproject.toml packages)"


def test_installed_outside_the_checkout_it_finds_hashes_and_builds_the_same_source(wheel, tmp_path):
    target = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target), str(wheel)],
                   check=True, capture_output=True, timeout=300)
    code = ("import harness.sleeve.build as b, harness; s = b.Source.shipped(); "
            "print(harness.__file__); print(s.path); print(s.hash); print(b.build_local())")
    env = {"PYTHONPATH": str(target), "PATH": "/usr/local/bin:/usr/bin:/bin",
           "OVERLAYBENCH_CACHE": str(tmp_path / "cache"), "HOME": str(tmp_path)}
    p = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True,
                       timeout=300)
    assert p.returncode == 0, p.stderr
    mod, path, digest, binary = p.stdout.split()
    assert mod.startswith(str(target)) and path.startswith(str(target))
    from harness.sleeve.build import Source
    assert digest == Source.shipped().hash
    v = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=10)
    assert v.returncode == 0 and v.stdout.startswith("sleeve ")
    assert binary.startswith(str(tmp_path / "cache" / "sleeve" / digest))
