"""Sleeve sources from a chosen place: a git ref or the working tree, as the arms of an A/B run.

`overlaybench compare` measures two builds of the sleeve in one run. Each arm is a
`Build`: a snapshot of overlay/sleeve at a git ref (exported with `git archive`, so the
repository's work tree and index are never touched, and a ref works wherever its commit
is present, whatever the clone's depth) or of the working tree, as a
`sleeve_build.Source`. The testbed builds and pins it like the shipped source (cached by
the source's hash, here or on each remote host: `Testbed.install_sleeve`), so two arms
with the same source share one binary. `Snapshots` owns the exported directories and
removes them when the run is over.

A Build becomes a mode through `harness.modes.variants`.
"""

from __future__ import annotations

import dataclasses
import io
import logging
import pathlib
import shutil
import subprocess
import tarfile
import tempfile
from typing import Iterable

from harness.core.errors import HarnessError
from harness.sleeve import build as sleeve_build

log = logging.getLogger(__name__)

SLEEVE_SUBDIR = "overlay/sleeve"


@dataclasses.dataclass(frozen=True)
class Build:
    """One arm's sleeve: its source snapshot, where it came from, and extra flags."""

    label: str                      # the arm: "base", "head"
    origin: str                     # "main (a1b2c3d4e5f6)", "working tree of /repo"
    commit: str | None              # the commit the source came from (None: a working tree)
    source: sleeve_build.Source     # a snapshot; lives as long as the Snapshots that made it
    flags: tuple[str, ...] = ()     # extra sleeve flags for this arm (e.g. --calibrate-ns N)

    @property
    def source_hash(self) -> str:
        return self.source.hash

    def describe(self) -> dict:
        return {"label": self.label, "origin": self.origin, "commit": self.commit,
                "source_hash": self.source_hash, "flags": list(self.flags)}


def _git(repo: pathlib.Path, *args: str, text: bool = True, check: bool = True) -> subprocess.CompletedProcess:
    try:
        p = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=text, timeout=120)
    except FileNotFoundError as e:
        raise HarnessError("git not found: apt-get install -y git") from e
    if check and p.returncode != 0:
        err = p.stderr if text else p.stderr.decode(errors="replace")
        raise HarnessError(f"git {' '.join(args)} in {repo}: {(err.strip() or 'failed').splitlines()[-1]}")
    return p


def resolve_commit(repo: pathlib.Path | str, ref: str) -> str:
    """The full commit id `ref` names in `repo`; a clear error if it names none."""
    repo = pathlib.Path(repo)
    if ref.startswith("-") or not ref.strip():
        raise HarnessError(f"{ref!r}: not a git ref")
    if _git(repo, "rev-parse", "--git-dir", check=False).returncode != 0:
        raise HarnessError(f"{repo}: not a git repository")
    p = _git(repo, "rev-parse", "--verify", "--quiet", "--end-of-options", f"{ref}^{{commit}}", check=False)
    if p.returncode == 0:
        return p.stdout.strip()
    shallow = _git(repo, "rev-parse", "--is-shallow-repository", check=False).stdout.strip() == "true"
    hint = (" (this clone is shallow: fetch the history it needs, e.g. `git fetch --deepen=50` "
            "or `git fetch --unshallow`)" if shallow else "")
    raise HarnessError(f"{ref}: no such commit in {repo}{hint}")


def _export_ref(repo: pathlib.Path, commit: str, dest: pathlib.Path) -> pathlib.Path:
    """overlay/sleeve at `commit`, written under dest with `git archive` (index untouched)."""
    p = _git(repo, "archive", "--format=tar", commit, "--", SLEEVE_SUBDIR, text=False, check=False)
    if p.returncode != 0:
        msg = p.stderr.decode(errors="replace").strip().splitlines()[-1:] or ["failed"]
        raise HarnessError(f"commit {commit[:12]} has no {SLEEVE_SUBDIR} to build ({msg[0]})")
    with tarfile.open(fileobj=io.BytesIO(p.stdout)) as tar:
        if hasattr(tarfile, "data_filter"):     # Python ≥ 3.11.4; Debian 12 ships 3.11.2
            tar.extractall(dest, filter="data")
        else:                                   # git archive of the repository itself: trusted paths
            tar.extractall(dest)
    return dest / SLEEVE_SUBDIR


def _copy_tree(repo: pathlib.Path, dest: pathlib.Path) -> pathlib.Path:
    """A snapshot of the working tree's overlay/sleeve, without build outputs."""
    src = repo / SLEEVE_SUBDIR
    if not (src / "Makefile").exists():
        raise HarnessError(f"{src}: no sleeve source (Makefile) to build")
    out = dest / SLEEVE_SUBDIR
    shutil.copytree(src, out, symlinks=True, ignore=shutil.ignore_patterns("build"))
    return out


class Snapshots:
    """Exported sleeve sources for one comparison; `close` (or the with-block) removes them."""

    def __init__(self) -> None:
        self._tmp = tempfile.TemporaryDirectory(prefix="overlaybench-src-")
        self._n = 0

    def __enter__(self) -> "Snapshots":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        self._tmp.cleanup()

    def add(self, repo: pathlib.Path | str, ref: str | None, label: str, flags: Iterable[str] = ()) -> Build:
        """The sleeve of `repo` at `ref` (None: its working tree) as the arm `label`, built
        once here so that a compile error stops the comparison before anything runs."""
        repo = pathlib.Path(repo).resolve()
        self._n += 1
        dest = pathlib.Path(self._tmp.name) / str(self._n)
        if ref is None:
            tree, commit, origin = _copy_tree(repo, dest), None, f"working tree of {repo}"
        else:
            commit = resolve_commit(repo, ref)
            tree, origin = _export_ref(repo, commit, dest), f"{ref} ({commit[:12]})"
        build = Build(label=label, origin=origin, commit=commit,
                      source=sleeve_build.Source(tree, label=label), flags=tuple(flags))
        sleeve_build.build_local(build.source)
        return build
