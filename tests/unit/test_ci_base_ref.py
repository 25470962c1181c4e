""".ci/base-ref, the commit CI's A/B gate compares HEAD with, on clones of every shape.

Each test builds a small repository with the script committed in it, then clones it the
way a CI machine might: full, shallow, a branch off main, a first commit.
"""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from harness.core.paths import PROJECT


def git(repo, *args):
    return subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t.invalid",
                           "-c", "init.defaultBranch=main", "-c", "protocol.file.allow=always", *args],
                          capture_output=True, text=True, check=True).stdout.strip()


def base_ref(repo, **env):
    env = {k: v for k, v in os.environ.items() if k not in ("BASE_REF", "BASE_SHA")} | env
    return subprocess.run([str(repo / ".ci" / "base-ref")], capture_output=True, text=True, env=env)


@pytest.fixture
def upstream(tmp_path):
    """main with three commits: c1 (the script), c2, c3."""
    r = tmp_path / "upstream"
    r.mkdir()
    git(r, "init", "-q")
    (r / ".ci").mkdir()
    shutil.copy(PROJECT / ".ci" / "base-ref", r / ".ci" / "base-ref")
    git(r, "add", ".")
    git(r, "commit", "-qm", "c1")
    for n in (2, 3):
        (r / f"f{n}").write_text(str(n))
        git(r, "add", ".")
        git(r, "commit", "-qm", f"c{n}")
    return r


def test_on_main_the_base_is_the_previous_commit(upstream, tmp_path):
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(upstream), str(clone))
    p = base_ref(clone)
    assert p.returncode == 0 and p.stdout.strip() == git(upstream, "rev-parse", "HEAD~1"), p.stderr


def test_on_a_branch_the_base_is_the_merge_base_with_main(upstream, tmp_path):
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(upstream), str(clone))
    fork = git(clone, "rev-parse", "HEAD")
    git(clone, "checkout", "-qb", "topic")
    for n in (4, 5):
        (clone / f"t{n}").write_text(str(n))
        git(clone, "add", ".")
        git(clone, "commit", "-qm", f"t{n}")
    assert base_ref(clone).stdout.strip() == fork
    # A pull request's base commit given by the CI system wins; an explicit BASE_REF wins over all.
    assert base_ref(clone, BASE_SHA=git(upstream, "rev-parse", "HEAD~2")).stdout.strip() == \
        git(upstream, "rev-parse", "HEAD~2")
    assert base_ref(clone, BASE_REF="HEAD~1").stdout.strip() == git(clone, "rev-parse", "HEAD~1")


def test_a_shallow_clone_fetches_the_commit_it_needs(upstream, tmp_path):
    clone = tmp_path / "shallow"
    git(tmp_path, "clone", "-q", "--depth", "1", f"file://{upstream}", str(clone))
    assert git(clone, "rev-parse", "--is-shallow-repository") == "true"
    p = base_ref(clone)
    assert p.returncode == 0 and p.stdout.strip() == git(upstream, "rev-parse", "HEAD~1"), p.stderr


def test_a_shallow_clone_that_cannot_fetch_says_so_in_one_line(upstream, tmp_path):
    clone = tmp_path / "shallow"
    git(tmp_path, "clone", "-q", "--depth", "1", f"file://{upstream}", str(clone))
    git(clone, "remote", "remove", "origin")
    p = base_ref(clone)
    lines = p.stderr.strip().splitlines()
    assert p.returncode == 2 and len(lines) == 1 and "shallow clone" in lines[0] and p.stdout == ""


def test_the_first_commit_has_nothing_to_compare(tmp_path):
    r = tmp_path / "first"
    r.mkdir()
    git(r, "init", "-q")
    (r / ".ci").mkdir()
    shutil.copy(PROJECT / ".ci" / "base-ref", r / ".ci" / "base-ref")
    git(r, "add", ".")
    git(r, "commit", "-qm", "first")
    p = base_ref(r)
    assert p.returncode == 3 and "first commit" in p.stderr and p.stdout == ""
