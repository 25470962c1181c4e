"""blast, the project's UDP packet generator (overlay/blast), as something to build and run.

Built like the sleeve (sleeve/build.py, which this module does not import), from its source keyed by a hash of the Makefile and
src/, so it is rebuilt only when the source changes:

- on this machine under $OVERLAYBENCH_CACHE (default ~/.cache/overlaybench)/blast/<hash>/;
  the lab's hosts are namespaces of this machine, so a tool's argv names that binary by its
  absolute path and every lab host runs it;
- remote hosts (ssh, vagrant, kubernetes) are not served yet: a blast test there fails with
  the missing path.

It needs no library beyond libc and libm. OVERLAYBENCH_BLAST_BINARY names a prebuilt binary
to run instead.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import os
import pathlib
import shutil
import subprocess
import tempfile

from harness.core.errors import HarnessError, UnsupportedError
from harness.core.paths import PACKAGE, PROJECT
from harness.core.sourcetree import SourceTree

log = logging.getLogger(__name__)

# What building it needs on a host (commands on PATH).
BUILD_NEEDS = ("make", "gcc")
BUILD_TIMEOUT = 120


@dataclasses.dataclass(frozen=True)
class Source(SourceTree):
    """blast's source tree: a directory with a Makefile and src/ (no hosts: the summary's
    columns reach this module through the tools, and analysis may not reach hosts)."""

    def copy_to(self, dest: str) -> None:
        for f in self.files():
            target = pathlib.Path(dest) / f.relative_to(self.path)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(f, target)


def cache_dir() -> pathlib.Path:
    """$OVERLAYBENCH_CACHE, or ~/.cache/overlaybench (the sleeve's builds are there too)."""
    return pathlib.Path(os.environ.get("OVERLAYBENCH_CACHE") or pathlib.Path.home() / ".cache" / "overlaybench")


def source() -> Source:
    """overlay/blast of a checkout, or the copy installed as package data."""
    for cand in (PROJECT / "overlay" / "blast", PACKAGE / "overlay_src" / "blast"):
        if (cand / "Makefile").is_file():
            return Source(cand)
    raise UnsupportedError(f"blast's source is not installed (looked in {PROJECT / 'overlay'} "
                           f"and {PACKAGE / 'overlay_src'})")


def _make(tmp: str, what: str) -> None:
    try:
        p = subprocess.run(["make", "-s", "-C", tmp, "build/blast"], capture_output=True, text=True,
                           timeout=BUILD_TIMEOUT)
    except FileNotFoundError as e:
        raise HarnessError("building blast needs make: apt-get install -y make gcc") from e
    if p.returncode != 0 or not (pathlib.Path(tmp) / "build" / "blast").is_file():
        tail = (p.stderr.strip() or p.stdout.strip()).splitlines()[-1:] or ["no output"]
        raise HarnessError(f"building blast ({what}) failed: {tail[0]}")


@functools.lru_cache(maxsize=None)
def _built(path: str, key: str) -> pathlib.Path:
    src = Source(pathlib.Path(path))
    out = cache_dir() / "blast" / key
    binary = out / "build" / "blast"
    if binary.is_file():
        return binary
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out.parent, prefix=f".{key}-") as tmp:
        src.copy_to(tmp)
        _make(tmp, str(src.path))
        if out.exists():            # another run built the same source meanwhile
            shutil.rmtree(out, ignore_errors=True)
        os.replace(tmp, out)
        os.makedirs(tmp)            # for TemporaryDirectory's cleanup
    log.info("built blast %s in %s", key, out)
    return binary


def local_binary() -> str:
    """The absolute path of a blast built on this machine (cached by its source's hash)."""
    given = os.environ.get("OVERLAYBENCH_BLAST_BINARY")
    if given:
        if not os.access(given, os.X_OK):
            raise HarnessError(f"OVERLAYBENCH_BLAST_BINARY={given}: not an executable file")
        return given
    src = source()
    return str(_built(str(src.path), src.hash))
