"""Every reference in the repository resolves inside it.

(a) a relative link in a tracked markdown file points at a file or folder that exists;
(b) a repository path the docs name in backticks (`harness/...`, `tests/...`, a top-level
    file) exists, unless it is made at run time (results/, reports/, .venv/) or is a
    pattern (a glob, a <placeholder>, RUN);
(c) no tracked file outside docs/journal.md (a record of what was said then) points to
    notes that live outside the repository.
"""

from __future__ import annotations

import pathlib
import re
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]

# The reference docs whose backticked paths are checked; tests/data/compare/README.md and
# the like describe captured files and are checked for links only.
DOCS = ["README.md", "ARCHITECTURE.md", "BENCHMARKS.md", "RELIABILITY.md", "tests/README.md",
        "overlay/README.md", "docs/*.md"]
PREFIXES = ("harness/", "tests/", "overlay/", "scenarios/", "benchmarks/", "images/", "docs/",
            "results/", "reports/", ".ci/", ".github/")
# Made by a run, a build or `make setup`, not tracked: a mention names what will be there.
RUNTIME = ("results/", "reports/", ".venv/", "overlay/sleeve/build/", "build/")
# Notes kept outside the repository (its style and design notes, the lab notes, the shared
# folder beside the checkout); nobody who clones it can follow them. A pattern, so that
# this file names none of them itself.
OUTSIDE = re.compile(r"\b(?:STYLE|DESIGN|LAB-NOTES)\.md\b|\.\./shared\b")
PLACEHOLDER = re.compile(r"[*?\[\]{}<>…]|\bRUN\b|\bN\b|\bX\b|\.\.\.|(^|/)x(\.|/|$)|_x\.|_new\.")

LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
CODE = re.compile(r"`([^`\n]+)`")
FENCE = re.compile(r"^```.*?^```", re.S | re.M)


def tracked(*patterns: str) -> list[str]:
    out = subprocess.run(["git", "ls-files", "-z", "--", *patterns], cwd=ROOT, capture_output=True,
                         text=True, check=True).stdout
    return [f for f in out.split("\0") if f]


@pytest.fixture(scope="module")
def files() -> list[str]:
    return tracked()


def _top_level() -> set[str]:
    return {p.name for p in ROOT.iterdir() if p.is_file()}


def broken_links(md: str) -> list[str]:
    text = FENCE.sub("", (ROOT / md).read_text(encoding="utf-8"))
    out = []
    for target in LINK.findall(text):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith("#"):
            continue                                   # a URL, a mailto:, an anchor in this file
        path = target.split("#", 1)[0]
        if path and not (ROOT / md).parent.joinpath(path).exists():
            out.append(f"{md}: link ({target})")
    return out


def repo_path(token: str, top: set[str]) -> str | None:
    """The repository path a backticked token names, or None when it names none."""
    token = token.strip("\"'.,;:()")
    token = token.split("::", 1)[0]                  # tests/x.py::test_name
    if token.startswith("./"):
        token = token[2:]
    if token.startswith(PREFIXES) or (token in top):
        return token
    return None


def missing_paths(md: str, top: set[str]) -> list[str]:
    text = FENCE.sub("", (ROOT / md).read_text(encoding="utf-8"))
    out = []
    for span in CODE.findall(text):
        for token in span.split():
            path = repo_path(token, top)
            if path is None or path.startswith(RUNTIME) or PLACEHOLDER.search(path) or "$" in path:
                continue
            if not (ROOT / path).exists():
                out.append(f"{md}: `{path}`")
    return out


def test_every_relative_link_in_the_markdown_resolves():
    broken = [b for md in tracked("*.md") for b in broken_links(md)]
    assert not broken, "\n".join(broken)


def test_every_repository_path_named_in_the_docs_exists():
    top = _top_level()
    missing = [m for md in tracked(*DOCS) for m in missing_paths(md, top)]
    assert not missing, "\n".join(missing)


def test_no_file_points_to_notes_outside_the_repository(files):
    found = []
    for f in files:
        if f == "docs/journal.md":
            continue
        try:
            text = (ROOT / f).read_text(encoding="utf-8")
        except (UnicodeDecodeError, FileNotFoundError, IsADirectoryError):
            continue                                   # binary, or a symlink to nothing
        found += [f"{f}: {m.group(0)}" for m in OUTSIDE.finditer(text)]
    assert not found, "\n".join(found)


def test_the_outside_pattern_finds_each_note_and_nothing_else():
    said = "see " + "STYLE" + ".md, DESIGN" + ".md point 3, LAB-NOTES" + ".md and .." + "/shared/seeds"
    assert [m.group(0) for m in OUTSIDE.finditer(said)] == [
        "STYLE" + ".md", "DESIGN" + ".md", "LAB-NOTES" + ".md", ".." + "/shared"]
    assert not OUTSIDE.search("ARCHITECTURE.md, docs/style.md, shared/ and .." + "/sharedlib")


@pytest.mark.parametrize("token, named", [
    ("harness/run/runner.py", "harness/run/runner.py"), ("tests/unit/x.py::test_y", "tests/unit/x.py"),
    ("Makefile", "Makefile"), ("runner.py", None), ("src/rx.c", None), ("'tests/data/',", "tests/data/")])
def test_a_repository_path_is_told_from_other_code(token, named):
    assert repo_path(token, {"Makefile", "README.md"}) == named


def test_a_missing_path_a_dead_link_and_a_pattern_are_told_apart(tmp_path, monkeypatch):
    """The check itself: a made-up path and link fail, a glob, a placeholder and a run's
    output do not."""
    doc = ROOT / "docs" / "journal.md"
    text = ("`harness/no_such_module.py` `tests/unit/test_*.py` `results/<run-id>/run.json` "
            "`reports/RUN.html` `README.md` [x](no/such/file.md) [y](../README.md) [z](https://a.invalid)")
    monkeypatch.setattr(pathlib.Path, "read_text", lambda self, encoding=None: text if self == doc else "")
    assert missing_paths("docs/journal.md", {"README.md"}) == ["docs/journal.md: `harness/no_such_module.py`"]
    assert broken_links("docs/journal.md") == ["docs/journal.md: link (no/such/file.md)"]
