"""The sleeve's source, its hash, and a binary built from it: here, or on a remote host.

overlaybench carries the sleeve's C source as package data (a wheel or `pipx install .`
has it; from a checkout it is overlay/sleeve). A build is keyed by a hash of the source
(Makefile and src/), so it is rebuilt only when the source changes:

- on this machine under $OVERLAYBENCH_CACHE (default ~/.cache/overlaybench)/sleeve/<hash>/;
- on a remote host under /var/cache/overlaybench/sleeve/<hash>/, from a tarball put over
  SFTP and built with the host's own make and gcc; a host without a compiler gets this
  machine's binary instead where `uname -m` matches and its shared libraries resolve.

OVERLAYBENCH_SLEEVE_BINARY names a prebuilt binary to ship instead of building.

A build on this machine seals AES-256-GCM with AWS-LC when `make setup` has built it
(overlay/sleeve/aws-lc.sh, into $OVERLAYBENCH_CACHE/aws-lc): the same cipher, 2.6 times
OpenSSL 3.0's speed where the CPU has VAES. OVERLAYBENCH_AWSLC=off builds without it, or
names another such directory. Remote hosts build with their own OpenSSL.
"""

from __future__ import annotations

import dataclasses
import io
import logging
import os
import pathlib
import platform
import shutil
import subprocess
import tarfile
import tempfile

from harness.core.errors import HarnessError, UnsupportedError
from harness.core.paths import PACKAGE, PROJECT
from harness.core.sourcetree import SourceTree
from harness.hosts.base import Host

log = logging.getLogger(__name__)

REMOTE_CACHE = "/var/cache/overlaybench/sleeve"
BUILD_TIMEOUT = 300
# What the sleeve needs to build, per tool: the Debian package that provides it.
BUILD_NEEDS = {"make": "make", "gcc": "gcc", "pkg-config": "pkg-config"}
BUILD_HEADERS = {"/usr/include/openssl/evp.h": "libssl-dev"}


def _shipped_dir() -> pathlib.Path:
    """overlay/sleeve of a checkout, or the copy installed as package data."""
    for cand in (PROJECT / "overlay" / "sleeve", PACKAGE / "overlay_src" / "sleeve"):
        if (cand / "Makefile").is_file():
            return cand
    raise UnsupportedError(f"the sleeve's source is not installed (looked in {PROJECT / 'overlay'} "
                           f"and {PACKAGE / 'overlay_src'})")


@dataclasses.dataclass(frozen=True)
class Source(SourceTree):
    """A sleeve source tree: a directory with a Makefile and src/."""

    label: str = "shipped"

    @classmethod
    def shipped(cls) -> "Source":
        return cls(_shipped_dir())

    def tarball(self) -> bytes:
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w:gz") as tar:
            for f in self.files():
                info = tar.gettarinfo(str(f), arcname=str(f.relative_to(self.path)))
                info.uid = info.gid = 0
                info.uname = info.gname = "root"
                info.mtime = 0
                with open(f, "rb") as fh:
                    tar.addfile(info, fh)
        return buf.getvalue()


def cache_dir() -> pathlib.Path:
    return pathlib.Path(os.environ.get("OVERLAYBENCH_CACHE") or pathlib.Path.home() / ".cache" / "overlaybench")


def awslc_dir() -> pathlib.Path | None:
    """The AWS-LC build local sleeve builds link (None: OpenSSL alone)."""
    given = os.environ.get("OVERLAYBENCH_AWSLC")
    if given == "off":
        return None
    d = pathlib.Path(given) if given else cache_dir() / "aws-lc"
    if (d / "lib" / "libsvlc.a").is_file() and (d / "VERSION").is_file():
        return d
    if given:
        raise HarnessError(f"OVERLAYBENCH_AWSLC={given}: no AWS-LC build there "
                           f"(overlay/sleeve/aws-lc.sh DIR makes one; off: OpenSSL alone)")
    return None


def prebuilt() -> pathlib.Path | None:
    given = os.environ.get("OVERLAYBENCH_SLEEVE_BINARY")
    if not given:
        return None
    if not os.access(given, os.X_OK):
        raise HarnessError(f"OVERLAYBENCH_SLEEVE_BINARY={given}: not an executable file")
    return pathlib.Path(given)


def build_local(source: Source | None = None) -> pathlib.Path:
    """A binary built on this machine from `source` (cached by its hash); a clear error if
    it cannot be built."""
    if source is None:
        given = prebuilt()
        if given:
            return given
        source = Source.shipped()
    awslc = awslc_dir()
    key = source.hash + (f"-awslc-{(awslc / 'VERSION').read_text().strip()}" if awslc else "")
    out = cache_dir() / "sleeve" / key
    binary = out / "build" / "sleeve"
    if binary.is_file():
        return binary
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out.parent, prefix=f".{key}-") as tmp:
        with tarfile.open(fileobj=io.BytesIO(source.tarball())) as tar:
            if hasattr(tarfile, "data_filter"):     # Python ≥ 3.11.4; Debian 12 ships 3.11.2
                tar.extractall(tmp, filter="data")
            else:                                   # our own tarball: trusted paths
                tar.extractall(tmp)
        try:
            p = subprocess.run(["make", "-s", "-C", tmp, *([f"AWSLC={awslc}"] if awslc else [])],
                               capture_output=True, text=True, timeout=BUILD_TIMEOUT)
        except FileNotFoundError as e:
            raise HarnessError("building the sleeve needs make: apt-get install -y make gcc libssl-dev") from e
        if p.returncode != 0 or not (pathlib.Path(tmp) / "build" / "sleeve").is_file():
            tail = (p.stderr.strip() or p.stdout.strip()).splitlines()[-1:] or ["no output"]
            raise HarnessError(f"building the sleeve ({source.label}, {source.path}) failed: {tail[0]}")
        if out.exists():            # another run built the same source meanwhile
            shutil.rmtree(out, ignore_errors=True)
        os.replace(tmp, out)
        os.makedirs(tmp)            # for TemporaryDirectory's cleanup
    log.info("built the sleeve %s (%s) in %s", source.label, key, out)
    return binary


# Prints each of its arguments the host lacks: a tool (not on PATH) or a header (by its path).
MISSING_SH = ('for t in "$@"; do case $t in /*) [ -e "$t" ] || echo "$t";; '
              '*) command -v "$t" >/dev/null 2>&1 || echo "$t";; esac; done')


def build_needs() -> dict[str, str]:
    """What building the sleeve needs on a host (a tool, or a header by its path) → its package."""
    return {**BUILD_NEEDS, **BUILD_HEADERS}


def missing_needs(host: Host) -> list[str]:
    """What the host lacks to build the sleeve (build_needs' keys)."""
    needs = build_needs()
    done = host.run(["sh", "-c", MISSING_SH, "sh", *needs], check=False, timeout=20)
    return [m for m in done.stdout.split() if m in needs]


def cannot_build(name: str, arch: str, missing: list[str]) -> str:
    """The line for a host that lacks `missing` to build the sleeve and whose `uname -m`,
    `arch`, is not this machine's: the packages that would let it build."""
    needs = build_needs()
    pkgs = sorted({needs.get(m, m) for m in missing})
    return (f"{name}: cannot build the sleeve (missing {', '.join(missing)}) and this machine's sleeve binary "
            f"is for {platform.machine()}, the host is {arch}: apt-get install -y {' '.join(pkgs)}")


def missing_libs(host: Host, path: str) -> list[str]:
    """The shared libraries a binary copied to `host` at `path` needs and the host lacks (ldd)."""
    libs = host.run(["ldd", path], check=False, timeout=10)
    return [ln.split()[0] for ln in libs.stdout.splitlines() if "not found" in ln]


def install_remote(host: Host, dest: str, source: Source | None = None) -> str:
    """Put a sleeve built from `source` at `dest` on `host` (a copy pinned for one run):
    built on the host and cached by the source's hash, or this machine's binary where the
    host cannot build but has the same architecture and libraries."""
    given = prebuilt() if source is None else None
    source = source or (None if given else Source.shipped())
    missing = None if given else missing_needs(host)
    if given is None and not missing:
        tag = source.hash
        d = f"{REMOTE_CACHE}/{tag}"
        cached = host.run(["test", "-x", f"{d}/build/sleeve"], check=False, timeout=10).ok
        if not cached:
            with tempfile.NamedTemporaryFile(suffix=".tar.gz") as f:
                f.write(source.tarball())
                f.flush()
                host.run(["mkdir", "-p", REMOTE_CACHE], timeout=20)
                host.put(f.name, f"{d}.tar.gz", 0o644)
            tmp = f"{d}.tmp"
            script = ('set -e; rm -rf "$1.tmp"; mkdir -p "$1.tmp"; tar -xzf "$1.tar.gz" -C "$1.tmp"; '
                      'make -s -C "$1.tmp" >"$1.tmp/make.log" 2>&1 || { tail -n 3 "$1.tmp/make.log" >&2; exit 1; }; '
                      'rm -rf "$1"; mv "$1.tmp" "$1"; rm -f "$1.tar.gz"')
            done = host.run(["sh", "-c", script, "sh", d], check=False, timeout=BUILD_TIMEOUT)
            if not done.ok:
                host.run(["rm", "-rf", tmp, f"{d}.tar.gz"], check=False, timeout=20)
                why = (done.stderr.strip() or f"exit {done.returncode}").splitlines()[-1]
                raise HarnessError(f"{host.name}: building the sleeve ({source.label}) failed: {why}")
            log.info("%s: built the sleeve %s in %s", host.name, tag, d)
        host.run(["cp", f"{d}/build/sleeve", dest], timeout=20)
        host.run(["chmod", "0755", dest], timeout=10)
        return dest
    local = given or build_local(source)
    arch = host.run(["uname", "-m"], check=False, timeout=10).stdout.strip()
    if arch != platform.machine():
        raise HarnessError(cannot_build(host.name, arch, missing_needs(host) if missing is None else missing))
    host.put(str(local), dest, 0o755)
    lost = missing_libs(host, dest)
    if lost:
        raise HarnessError(f"{host.name}: the shipped sleeve binary needs {', '.join(lost)}: "
                           f"apt-get install -y libssl3 on {host.name}, or make gcc libssl-dev to build it there")
    return dest
