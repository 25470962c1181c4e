"""Modes made for one run: a sleeve mode deploying another build of the sleeve.

A Build (harness/sleeve/refs.py) becomes a mode through `variant`: a copy of a sleeve
mode named `MODE@LABEL` (e.g. `sleeve@base`) whose `sleeve_build` is the Build, so the
runner deploys it like any mode and every measurement's `mode` says which arm it is. The
session defines such variants into the run's own registry (`session.run(extra_modes=…)`).
"""

from __future__ import annotations

import copy

from harness.core.arms import ARM_SEP, BASE, HEAD
from harness.core.errors import HarnessError
from harness.modes.registry import Registry, standard
from harness.modes.sleeve import Sleeve
from harness.sleeve.refs import Build

__all__ = ["ARM_SEP", "BASE", "HEAD", "require_sleeve", "variant"]


def require_sleeve(mode_name: str, known: Registry | None = None):
    """The sleeve mode `mode_name` (of `known`, default the standard modes); a clear error
    for a mode that runs no sleeve."""
    known = known or standard()
    base = known.get(mode_name)
    if not isinstance(base, Sleeve):
        raise HarnessError(f"mode {mode_name}: does not run the sleeve, so it has no build to compare "
                           f"(sleeve modes: {', '.join(m.name for m in known.values() if isinstance(m, Sleeve))})")
    return base


def variant(mode_name: str, build: Build, known: Registry | None = None):
    """The sleeve mode `mode_name` deploying `build`, named MODE@LABEL."""
    base = require_sleeve(mode_name, known)
    m = copy.copy(base)
    m.name = f"{base.name}{ARM_SEP}{build.label}"
    m.sleeve_build = build
    return m
