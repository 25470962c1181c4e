"""Modes made for one run: a sleeve mode deploying another build of the sleeve.

A Build (harness/sleeve/refs.py) becomes a mode through `variant`: a copy of a sleeve
mode named `MODE@LABEL` (e.g. `sleeve@base`) whose `sleeve_build` is the Build, so the
runner deploys it like any mode and every measurement's `mode` says which arm it is.
`registered` puts such variants into the mode registry for the length of a run.
"""

from __future__ import annotations

import contextlib
import copy
from typing import TYPE_CHECKING, Iterable, Iterator

from harness import modes
from harness.core.errors import HarnessError
from harness.modes.sleeve import Sleeve

if TYPE_CHECKING:
    from harness.sleeve.refs import Build

ARM_SEP = "@"                   # MODE@LABEL
BASE, HEAD = "base", "head"     # the labels of an A/B run's arms


def require_sleeve(mode_name: str):
    """The registered sleeve mode `mode_name`; a clear error for a mode that runs no sleeve."""
    base = modes.get(mode_name)
    if not isinstance(base, Sleeve):
        raise HarnessError(f"mode {mode_name}: does not run the sleeve, so it has no build to compare "
                           f"(sleeve modes: {', '.join(n for n, m in modes.MODES.items() if isinstance(m, Sleeve))})")
    return base


def variant(mode_name: str, build: Build):
    """The sleeve mode `mode_name` deploying `build`, named MODE@LABEL."""
    base = require_sleeve(mode_name)
    m = copy.copy(base)
    m.name = f"{base.name}{ARM_SEP}{build.label}"
    m.sleeve_build = build
    return m


@contextlib.contextmanager
def registered(variants: Iterable) -> Iterator[None]:
    """The given mode variants are known by name (scenario checks, the runner) inside the block."""
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
