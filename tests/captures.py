"""Reading the real tool outputs kept under tests/data/ (see tests/data/capture.sh)."""

from __future__ import annotations

import pathlib

DATA = pathlib.Path(__file__).parent / "data"


def capture(name: str) -> tuple[str, str]:
    """(stdout, stderr) of one capture; stderr is empty where none was kept."""
    err = DATA / f"{name}.err"
    return (DATA / f"{name}.out").read_text(), err.read_text() if err.exists() else ""


def captured_argv(name: str) -> list[str]:
    """The argv the capture was made with (captures.tsv)."""
    for line in (DATA / "captures.tsv").read_text().splitlines():
        n, _rc, argv = line.split("\t")
        if n == name:
            return argv.split()
    raise KeyError(name)


def values(result) -> dict[str, float]:
    return {s.metric: s.value for s in result.samples}
