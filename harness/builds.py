"""Builds of the sleeve from a chosen source: a git ref or the working tree, cached by source hash.

`overlaybench compare` measures two builds of the sleeve in one run. Each arm is a
`Build`: the source of overlay/sleeve at a git ref (exported with `git archive`, so the
repository's own work tree and index are never touched, and a ref works wherever its
commit is present, whatever the clone's depth) or a snapshot of the working tree, built
with the source's own Makefile and cached under the hash of that source and the
compiler. Two arms with the same source share one binary.

A Build becomes a mode through `variant`: a copy of a sleeve mode named `MODE@LABEL`
(e.g. `sleeve@base`) whose `sleeve_build` is the Build, so the runner deploys it like
any mode and every measurement's `mode` says which arm it is. `registered` puts such
variants into the mode registry for the length of a run.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import hashlib
import io
import logging
import os
import pathlib
import shutil
import subprocess
import tarfile
import tempfile
from typing import Iterable, Iterator

from harness.errors import HarnessError

log = logging.getLogger(__name__)

SLEEVE_SUBDIR = "overlay/sleeve"
BUILD_TIMEOUT = 300


@dataclasses.dataclass(frozen=True)
class Build:
    """One build of the sleeve, ready to deploy."""

    label: str                      # the arm: "base", "head"
    origin: str                     # "main (a1b2c3d4e5f6)", "working tree of /repo"
    commit: str | None              # the commit the source came from (None: a working tree)
    source_hash: str                # sha256 of the source files and the compiler
    binary: pathlib.Path            # the cached executable
    flags: tuple[str, ...] = ()     # extra sleeve flags for this arm (e.g. --calibrate-ns N)

    def describe(self) -> dict:
        return {"label": self.label, "origin": self.origin, "commit": self.commit,
                "source_hash": self.source_hash, "flags": list(self.flags)}


def cache_root() -> pathlib.Path:
    """Where built binaries are kept: $OVERLAYBENCH_CACHE, else ~/.cache/overlaybench/sleeve."""
    given = os.environ.get("OVERLAYBENCH_CACHE")
    if given:
        return pathlib.Path(given)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return pathlib.Path(base) / "overlaybench" / "sleeve"


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


def _compiler_id() -> str:
    cc = os.environ.get("CC", "gcc")
    try:
        p = subprocess.run([cc, "--version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return cc
    return (p.stdout.splitlines() or [cc])[0]


def source_hash(tree: pathlib.Path) -> str:
    """sha256 over every file's path, executable bit and bytes (build outputs excluded) and
    the compiler's version line: equal hashes build equal binaries."""
    h = hashlib.sha256(_compiler_id().encode() + b"\0")
    for p in sorted(x for x in tree.rglob("*") if "build" not in x.relative_to(tree).parts):
        rel = p.relative_to(tree).as_posix()
        if p.is_symlink():
            h.update(b"L" + rel.encode() + b"\0" + os.readlink(p).encode() + b"\0")
        elif p.is_file():
            h.update(b"F" + rel.encode() + b"\0" + (b"x" if os.access(p, os.X_OK) else b"-"))
            h.update(hashlib.sha256(p.read_bytes()).digest())
    return h.hexdigest()


def _build_tree(tree: pathlib.Path, digest: str) -> pathlib.Path:
    """The cached binary for this source, built with the source's own Makefile if absent."""
    cached = cache_root() / digest / "sleeve"
    if cached.exists():
        log.info("sleeve %s: cached build %s", digest[:12], cached)
        return cached
    try:
        p = subprocess.run(["make", "-s", "-C", str(tree)], capture_output=True, text=True,
                           timeout=BUILD_TIMEOUT)
    except subprocess.TimeoutExpired as e:
        raise HarnessError(f"building the sleeve in {tree} took over {BUILD_TIMEOUT}s") from e
    built = tree / "build" / "sleeve"
    if p.returncode != 0 or not built.exists():
        tail = (p.stderr.strip() or p.stdout.strip()).splitlines()[-1:] or ["no output"]
        raise HarnessError(f"building the sleeve failed (make -C {tree}): {tail[0]}")
    try:
        cached.parent.mkdir(parents=True, exist_ok=True)
        tmp = cached.with_name(f".sleeve.{os.getpid()}.tmp")
        shutil.copy2(built, tmp)
        os.replace(tmp, cached)
    except OSError as e:
        raise HarnessError(f"{cached.parent}: cannot cache the sleeve build ({e.strerror})") from e
    return cached


def prepare(repo: pathlib.Path | str, ref: str | None, label: str, flags: Iterable[str] = ()) -> Build:
    """Build the sleeve of `repo` at `ref` (None: its working tree) as the arm `label`."""
    repo = pathlib.Path(repo).resolve()
    with tempfile.TemporaryDirectory(prefix="overlaybench-src-") as tmp:
        if ref is None:
            tree, commit, origin = _copy_tree(repo, pathlib.Path(tmp)), None, f"working tree of {repo}"
        else:
            commit = resolve_commit(repo, ref)
            tree, origin = _export_ref(repo, commit, pathlib.Path(tmp)), f"{ref} ({commit[:12]})"
        digest = source_hash(tree)
        binary = _build_tree(tree, digest)
    return Build(label=label, origin=origin, commit=commit, source_hash=digest, binary=binary,
                 flags=tuple(flags))


def require_sleeve(mode_name: str):
    """The registered sleeve mode `mode_name`; a clear error for a mode that runs no sleeve."""
    from harness import modes
    from harness.modes.sleeve import Sleeve

    base = modes.get(mode_name)
    if not isinstance(base, Sleeve):
        raise HarnessError(f"mode {mode_name}: does not run the sleeve, so it has no build to compare "
                           f"(sleeve modes: {', '.join(n for n, m in modes.MODES.items() if isinstance(m, Sleeve))})")
    return base


def variant(mode_name: str, build: Build):
    """The sleeve mode `mode_name` deploying `build`, named MODE@LABEL."""
    base = require_sleeve(mode_name)
    m = copy.copy(base)
    m.name = f"{base.name}@{build.label}"
    m.sleeve_build = build
    return m


@contextlib.contextmanager
def registered(variants: Iterable) -> Iterator[None]:
    """The given mode variants are known by name (scenario checks, the runner) inside the block."""
    from harness import modes

    added = []
    try:
        for v in variants:
            if v.name in modes.MODES:
                raise HarnessError(f"mode {v.name}: already defined")
            modes.MODES[v.name] = v
            added.append(v.name)
        yield
    finally:
        for name in added:
            modes.MODES.pop(name, None)
