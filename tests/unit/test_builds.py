"""harness.sleeve.refs on a throwaway git repository whose "sleeve" is a tiny Makefile project.

The Makefile counts its own runs (in $BUILDS_LOG), so the tests see when the cache spares a build.
"""

from __future__ import annotations

import subprocess

import pytest

from harness import modes
from harness.core.errors import HarnessError
from harness.modes import variants
from harness.run import scenario as S
from harness.sleeve import build as sleeve_build, refs as builds

MAKEFILE = """\
build/sleeve: src/main.c
\tmkdir -p build
\techo built >> $(BUILDS_LOG)
\tprintf '#!/bin/sh\\necho %s\\n' "$$(cat src/main.c)" > build/sleeve
\tchmod +x build/sleeve
"""


def git(repo, *args):
    return subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t.invalid", *args],
                          capture_output=True, text=True, check=True).stdout.strip()


@pytest.fixture
def repo(tmp_path, monkeypatch):
    monkeypatch.setenv("OVERLAYBENCH_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("BUILDS_LOG", str(tmp_path / "builds.log"))
    r = tmp_path / "repo"
    src = r / "overlay" / "sleeve"
    (src / "src").mkdir(parents=True)
    (src / "Makefile").write_text(MAKEFILE)
    (src / "src" / "main.c").write_text("v1")
    subprocess.run(["git", "init", "-q", str(r)], check=True)
    git(r, "add", ".")
    git(r, "commit", "-qm", "v1")
    return r


def builds_run(repo):
    log = repo.parent / "builds.log"
    return len(log.read_text().splitlines()) if log.exists() else 0


def run(binary):
    return subprocess.run([str(binary)], capture_output=True, text=True).stdout.strip()


@pytest.fixture
def snaps():
    with builds.Snapshots() as s:
        yield s


def binary(build):
    return sleeve_build.build_local(build.source)      # cached: the one Snapshots.add made


def test_a_ref_and_an_unchanged_working_tree_share_one_build(repo, snaps):
    a = snaps.add(repo, "HEAD", "base")
    b = snaps.add(repo, None, "head", ["--calibrate-ns", "10"])
    assert a.source_hash == b.source_hash and binary(a) == binary(b)
    assert builds_run(repo) == 1          # one source, one build
    assert run(binary(a)) == "v1"
    assert a.commit == git(repo, "rev-parse", "HEAD") and b.commit is None
    assert b.flags == ("--calibrate-ns", "10") and "working tree" in b.origin
    assert not (repo / "overlay" / "sleeve" / "build").exists()


def test_a_change_is_another_build_and_the_ref_still_builds_the_old_source(repo, snaps):
    (repo / "overlay" / "sleeve" / "src" / "main.c").write_text("v2")
    head = snaps.add(repo, None, "head")
    base = snaps.add(repo, "HEAD", "base")
    assert head.source_hash != base.source_hash
    assert (run(binary(head)), run(binary(base))) == ("v2", "v1")
    git(repo, "commit", "-qam", "v2")
    assert binary(snaps.add(repo, "HEAD", "x")) == binary(head)       # cached: same source
    assert builds_run(repo) == 2


def test_snapshots_go_when_the_comparison_ends(repo):
    with builds.Snapshots() as s:
        b = s.add(repo, "HEAD", "base")
        assert (b.source.path / "Makefile").is_file()
    assert not b.source.path.exists()


def test_bad_refs_and_failed_builds_are_one_clear_line(repo, tmp_path, snaps):
    with pytest.raises(HarnessError, match="nope: no such commit"):
        snaps.add(repo, "nope", "base")
    git(repo, "commit", "-q", "--allow-empty", "-m", "empty")
    shallow = tmp_path / "shallow"
    subprocess.run(["git", "clone", "-q", "--depth", "1", f"file://{repo}", str(shallow)], check=True)
    with pytest.raises(HarnessError, match="HEAD~1: no such commit .*shallow.*git fetch"):
        builds.resolve_commit(shallow, "HEAD~1")
    with pytest.raises(HarnessError, match="not a git repository"):
        builds.resolve_commit(tmp_path, "HEAD")
    (repo / "overlay" / "sleeve" / "src" / "main.c").unlink()
    with pytest.raises(HarnessError, match="building the sleeve .* failed"):
        snaps.add(repo, None, "head")


def test_variants_are_sleeve_modes_under_their_own_name_for_a_while(repo, snaps):
    b = snaps.add(repo, None, "head", ["--calibrate-ns", "7"])
    v = variants.variant("sleeve-crypto", b)
    assert v.name == "sleeve-crypto@head" and v.crypto and v.sleeve_build is b and v.source() is b.source
    assert v.argv_flags()[-2:] == ("--calibrate-ns", "7")
    assert modes.get("sleeve-crypto").sleeve_build is None            # the registered mode is untouched
    sc = S.build({"matrix": {"modes": ["sleeve-crypto@head"]}}, extra=(v,))
    assert sc.mode("sleeve-crypto@head") is v                         # known to the run it is made for,
    assert "sleeve-crypto@head" not in modes.standard()               # and to nothing else
    with pytest.raises(HarnessError, match="mode fastdp: does not run the sleeve"):
        variants.variant("fastdp", b)


def test_a_ref_exports_and_builds_on_a_python_without_tar_filters(repo, monkeypatch, snaps):
    import tarfile
    monkeypatch.delattr(tarfile, "data_filter", raising=False)     # as in Debian 12's Python 3.11.2
    assert run(binary(snaps.add(repo, "HEAD", "base"))) == "v1"
