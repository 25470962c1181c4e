"""blast built on this machine (harness/sleeve/blast.py): cached by its source's hash, a
prebuilt binary named instead, a failed build said in one line. Needs make and gcc, no root."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from harness.core.errors import HarnessError
from harness.sleeve import blast


def test_build_is_cached_by_hash_and_runs(tmp_path, monkeypatch):
    monkeypatch.setenv("OVERLAYBENCH_CACHE", str(tmp_path))
    monkeypatch.delenv("OVERLAYBENCH_BLAST_BINARY", raising=False)
    blast._built.cache_clear()
    path = blast.local_binary()
    assert path == str(tmp_path / "blast" / blast.source().hash / "build" / "blast")
    out = subprocess.run([path, "--version"], capture_output=True, text=True, check=True).stdout
    assert out.startswith("blast ")
    mtime = os.stat(path).st_mtime_ns
    blast._built.cache_clear()
    assert blast.local_binary() == path and os.stat(path).st_mtime_ns == mtime   # not rebuilt


def test_the_hash_follows_the_source(tmp_path):
    src = tmp_path / "blast"
    shutil.copytree(blast.source().path, src, ignore=shutil.ignore_patterns("build"))
    before = blast.Source(src).hash
    (src / "src" / "main.c").write_text((src / "src" / "main.c").read_text() + "\n")
    assert blast.Source(src).hash != before


def test_a_failed_build_says_so(tmp_path, monkeypatch):
    monkeypatch.setenv("OVERLAYBENCH_CACHE", str(tmp_path / "cache"))
    src = tmp_path / "blast"
    shutil.copytree(blast.source().path, src, ignore=shutil.ignore_patterns("build"))
    (src / "src" / "main.c").write_text("this is not C\n")
    with pytest.raises(HarnessError, match=r"^building blast \(.*\) failed: "):
        blast._built(str(src), blast.Source(src).hash)


def test_a_prebuilt_binary_that_is_not_one(monkeypatch, tmp_path):
    monkeypatch.setenv("OVERLAYBENCH_BLAST_BINARY", str(tmp_path / "nothing"))
    with pytest.raises(HarnessError, match="OVERLAYBENCH_BLAST_BINARY=.*not an executable file"):
        blast.local_binary()
