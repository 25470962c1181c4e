"""`--help` as a user reads it: every command described, every option explained with its
default, names never broken across lines however narrow the terminal, and the top-level
page naming the backends and the exit codes."""

import argparse
import re

import pytest

from harness import cli
from harness.cli import helpfmt
from harness.cli.args import EXIT_FAILED_CASES, EXIT_INTERRUPTED, EXIT_REGRESSION, EXIT_UNDECIDED, EXIT_USAGE
from harness.core.placements import PLACEMENTS
from harness.testbeds.registry import BACKENDS

SKIP = (argparse._HelpAction, argparse._VersionAction, argparse._SubParsersAction)


def parsers():
    """(name, parser) for the top level and every command, with a fresh parser (COLUMNS is
    read when a help page is formatted)."""
    top = cli.parser()
    yield "overlaybench", top
    for action in top._actions:
        if isinstance(action, argparse._SubParsersAction):
            yield from action.choices.items()


def helps(monkeypatch, columns: int) -> dict[str, str]:
    monkeypatch.setenv("COLUMNS", str(columns))
    return {name: p.format_help() for name, p in parsers()}


def tokens() -> set[str]:
    """Names a help page may mention that must stay whole: tests, placements, modes, backends."""
    from harness import modes
    from harness.tools import TOOLS
    return set(TOOLS) | set(PLACEMENTS) | set(modes.standard()) | set(BACKENDS)


def split_tokens(text: str, names: set[str]) -> list[str]:
    """The names of `names` that `text` breaks across a line end."""
    broken = []
    for t in names:
        for k in range(1, len(t)):
            if re.search(re.escape(t[:k]) + r"\n\s*" + re.escape(t[k:]), text):
                broken.append(f"{t[:k]}|{t[k:]}")
    return broken


def test_every_parser_wraps_with_the_token_keeping_formatter():
    for name, p in parsers():
        assert p.formatter_class is helpfmt.HelpFormatter, name


def test_every_command_has_a_description_and_every_option_help_with_its_default():
    for name, p in parsers():
        assert p.description, f"{name}: no description"
        for a in p._actions:
            if isinstance(a, SKIP):
                continue
            what = f"{name} {'/'.join(a.option_strings) or a.dest}"
            assert a.help and a.help != argparse.SUPPRESS, f"{what}: no help"
            takes_value = a.option_strings and a.nargs != 0
            if takes_value and not a.required:
                assert "default" in a.help or "required unless" in a.help, f"{what}: help names no default"


@pytest.mark.parametrize("columns", [60, 45, 100])
def test_no_name_is_split_across_lines(monkeypatch, columns):
    names = tokens()
    pages = helps(monkeypatch, columns)
    every = "\n".join(pages.values())
    # the pages do mention them (run lists the tests and placements, the top level the backends)
    assert {"iperf3.pps1400", "container-container", "sockperf.pingpong_tcp", "kubernetes"} <= set(
        t for t in names if t in every)
    for name, text in pages.items():
        assert split_tokens(text, names) == [], name


def test_lines_fit_the_terminal_unless_one_word_cannot(monkeypatch):
    for name, text in helps(monkeypatch, 60).items():
        for line in text.split("\n\n", 1)[1].splitlines():        # after the usage (argparse's own)
            assert len(line) <= 60 or " " not in line.strip(), (name, line)


def test_argparse_own_formatter_would_split_them(monkeypatch):
    """What this guards against: the stock HelpFormatter breaks inside these names."""
    monkeypatch.setenv("COLUMNS", "60")
    run = dict(parsers())["run"]
    run.formatter_class = argparse.HelpFormatter
    assert split_tokens(run.format_help(), tokens())


def test_wrap_breaks_at_spaces_and_after_commas_only():
    assert helpfmt.wrap("a,b,c dd", 4) == ["a,b,", "c dd"]
    assert helpfmt.wrap("container-container,iperf3.pps1400 x", 10) == ["container-container,", "iperf3.pps1400",
                                                                        "x"]
    assert helpfmt.wrap("  spaced   out  ", 80) == ["spaced out"]


def test_descriptions_keep_their_rows_and_wrap_them_under_their_text(monkeypatch):
    monkeypatch.setenv("COLUMNS", "60")
    text = dict(parsers())["export"].format_help()
    rows = text.split("formats:\n", 1)[1].split("\n\n", 1)[0].splitlines()
    assert rows[0].startswith("  openmetrics     ")
    assert all(r.startswith("  ") for r in rows)
    assert all(r.startswith(" " * 18) for r in rows if not re.match(r"  \S", r))


def test_top_level_help_lists_the_backends_and_the_exit_codes(monkeypatch):
    text = helps(monkeypatch, 80)["overlaybench"]
    for b in BACKENDS.values():
        assert re.search(rf"^  {re.escape(b.name)} +\S", text, re.M), b.name
    codes = {int(m) for m in re.findall(r"^  (\d+) +\S", text.split("exit codes:", 1)[1], re.M)}
    assert codes == {0, EXIT_REGRESSION, EXIT_USAGE, EXIT_FAILED_CASES, EXIT_UNDECIDED, EXIT_INTERRUPTED}
    assert (EXIT_REGRESSION, EXIT_USAGE, EXIT_FAILED_CASES, EXIT_UNDECIDED, EXIT_INTERRUPTED) == (1, 2, 3, 4, 130)


def test_the_exit_codes_named_for_help_are_the_ones_returned():
    from harness.gates import render
    assert EXIT_UNDECIDED == render.EXIT_UNDECIDED


def test_run_lists_every_test_and_placement():
    from harness.cli.run import TEST_NAMES
    from harness.tools import TOOLS
    assert TEST_NAMES == tuple(TOOLS)
    run = dict(parsers())["run"]
    by = {a.dest: a.help for a in run._actions}
    assert all(p in by["placements"] for p in PLACEMENTS)
