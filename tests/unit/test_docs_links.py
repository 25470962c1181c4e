"""Every reference in the repository resolves inside it.

(a) a relative link in a tracked markdown file points at a file or folder that exists;
(b) a repository path the docs name in backticks (`harness/...`, `tests/...`, a top-level
    file) exists, unless it is made at run time (results/, reports/, .venv/) or is a
    pattern (a glob, a <placeholder>, RUN);
(c) no tracked file outside docs/journal.md (a record of what was said then) points to
    notes that live outside the repository;
(d) a link's #anchor names a heading of the file it points to;
(e) the documentation site builds: every docs/ page is in mkdocs.yml's nav and every nav
    entry is a page, and a docs/ page links only to pages inside docs/ (mkdocs cannot
    follow a link out of its docs_dir);
(f) README.md is a front page: at most MAX_README_LINES lines, opening with the two
    commands a fresh machine runs, `make bench` and `make test`;
(g) the user docs cite no commit as evidence (the journal does: it is the dated record).
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

# The user docs: a commit there is evidence that belongs in the journal.
USER_DOCS = ["README.md", "RELIABILITY.md", "tests/README.md", "docs/*.md"]
MAX_README_LINES = 300
OPENING_LINES = 40
# A commit as git abbreviates it: 7 to 40 hex digits with at least one letter and one digit
# (so neither a number nor a word such as "facade").
COMMIT = re.compile(r"\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,40}\b")
HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*#*\s*$", re.M)
NAV_PAGE = re.compile(r"^\s*-\s*(?:[^:\n]+:\s*)?([\w./-]+\.md)\s*$", re.M)

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


def slug(heading: str) -> str:
    """A heading's anchor as GitHub makes it: code and link markup dropped, lower case,
    punctuation but hyphens removed, each space a hyphen. (mkdocs agrees on the headings
    docs/ uses, and its strict build checks the anchors between its pages itself.)"""
    h = re.sub(r"`([^`]*)`", r"\1", heading)
    h = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", h)
    h = re.sub(r"[^\w\- ]", "", h.strip().lower())
    return h.replace(" ", "-")


def anchors(md: str) -> set[str]:
    """The anchors of a markdown file's headings (a repeated one gets -1, -2, …)."""
    text = FENCE.sub("", (ROOT / md).read_text(encoding="utf-8"))
    seen: dict[str, int] = {}
    out = set()
    for m in HEADING.finditer(text):
        s = slug(m.group(1))
        n = seen.get(s, 0)
        seen[s] = n + 1
        out.add(s if n == 0 else f"{s}-{n}")
    return out


def broken_anchors(md: str) -> list[str]:
    text = FENCE.sub("", (ROOT / md).read_text(encoding="utf-8"))
    out = []
    for target in LINK.findall(text):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target) or "#" not in target:
            continue
        path, frag = target.split("#", 1)
        dest = (ROOT / md).parent / path if path else ROOT / md
        if dest.suffix != ".md" or not dest.is_file():
            continue                                   # a missing file is the link test's to report
        if frag not in anchors(dest.resolve().relative_to(ROOT).as_posix()):
            out.append(f"{md}: link ({target})")
    return out


def test_every_anchor_a_link_names_is_a_heading_there():
    broken = [b for md in tracked("*.md") for b in broken_anchors(md)]
    assert not broken, "\n".join(broken)


def docs_pages() -> set[str]:
    return {p.name for p in (ROOT / "docs").glob("*.md")}


def test_the_site_lists_every_docs_page_and_only_pages_that_exist():
    nav = NAV_PAGE.findall((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))
    assert nav, "mkdocs.yml has no nav"
    assert sorted(set(nav)) == sorted(nav), "a page is listed twice in mkdocs.yml's nav"
    assert set(nav) == docs_pages(), (f"not in nav: {sorted(docs_pages() - set(nav))}; "
                                      f"in nav, no such page: {sorted(set(nav) - docs_pages())}")


def test_a_docs_page_links_only_inside_docs():
    docs = (ROOT / "docs").resolve()
    outside = []
    for md in sorted(docs.glob("*.md")):
        text = FENCE.sub("", md.read_text(encoding="utf-8"))
        for target in LINK.findall(text):
            path = target.split("#", 1)[0]
            if re.match(r"^[a-z][a-z0-9+.-]*:", target) or not path:
                continue
            if docs not in (md.parent / path).resolve().parents:
                outside.append(f"docs/{md.name}: link ({target}); name it in `code` instead")
    assert not outside, "\n".join(outside)


def test_the_readme_is_a_front_page_that_opens_with_make_bench_and_make_test():
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= MAX_README_LINES, f"README.md has {len(lines)} lines; move reference into docs/"
    opening = [line.split("#", 1)[0].strip() for line in lines[:OPENING_LINES]]
    for command in ("make bench", "make test"):
        assert command in opening, f"README.md does not open with `{command}` in its first {OPENING_LINES} lines"


def test_the_user_docs_cite_no_commit():
    found = []
    for md in tracked(*USER_DOCS):
        if md == "docs/journal.md":
            continue                                   # the dated record: its commits are its evidence
        text = (ROOT / md).read_text(encoding="utf-8")
        found += [f"{md}: {m.group(0)}" for m in COMMIT.finditer(text)]
    assert not found, "commits belong in docs/journal.md, not the user docs:\n" + "\n".join(found)


@pytest.mark.parametrize("text, commits", [
    ("fixed in 597926f (the tear)", ["597926f"]), ("15629344435 bit/s", []), ("a facade, decade", []),
    ("run 20261128T001508Z-855b", []), ("ad4f258 and 0dc5645", ["ad4f258", "0dc5645"])])
def test_a_commit_is_told_from_numbers_and_words(text, commits):
    assert COMMIT.findall(text) == commits


@pytest.mark.parametrize("heading, anchor", [
    ("The lab", "the-lab"), ("A/B: compare", "ab-compare"), ("`run.json`", "runjson"),
    ("Under load: the gates' bands from A/A runs", "under-load-the-gates-bands-from-aa-runs"),
    ("TCP Lat (µs)", "tcp-lat-µs")])
def test_a_heading_becomes_its_anchor(heading, anchor):
    assert slug(heading) == anchor
