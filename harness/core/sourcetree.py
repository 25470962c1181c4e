"""A C source tree the project builds (the sleeve, blast): a directory with a Makefile and
src/, its files in a fixed order and their hash, which names each cached build."""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import pathlib


@dataclasses.dataclass(frozen=True)
class SourceTree:
    path: pathlib.Path

    def files(self) -> list[pathlib.Path]:
        src = sorted(p for p in (self.path / "src").rglob("*") if p.is_file() and p.suffix in (".c", ".h"))
        return [self.path / "Makefile", *src]

    @functools.cached_property
    def hash(self) -> str:
        """The first 16 hex digits of a SHA-256 over every file's relative name and bytes."""
        h = hashlib.sha256()
        for f in self.files():
            h.update(str(f.relative_to(self.path)).encode() + b"\0")
            h.update(f.read_bytes() + b"\0")
        return h.hexdigest()[:16]
