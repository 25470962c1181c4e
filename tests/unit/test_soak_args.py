"""tests/soak.py hands everything after `--` to pytest untouched, options among it."""

from __future__ import annotations

import pytest
import soak


def test_pytest_options_after_the_separator_reach_pytest_in_order():
    a = soak.parse_args(["-n", "3", "--hogs", "0", "--", "--durations=0", "-k", "drop or kill", "tests/lab/t.py"])
    assert (a.rounds, a.hogs) == (3, 0)
    assert a.tests == ["--durations=0", "-k", "drop or kill", "tests/lab/t.py"]


def test_files_alone_need_no_separator_and_zero_rounds_are_refused():
    assert soak.parse_args(["tests/lab/a.py", "tests/lab/b.py::t"]).tests == ["tests/lab/a.py", "tests/lab/b.py::t"]
    with pytest.raises(SystemExit):
        soak.parse_args(["-n", "0", "tests/lab/a.py"])
