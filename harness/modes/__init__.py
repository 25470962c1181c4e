"""Overlay modes: one module per mode, and the registry that finds them (modes/registry.py).

Adding a mode is adding one module here: its class declares the name, its place in
tables (`order`), its colour, the kernel features it needs and its overhead
(harness/modes/base.py); the scenario checks, the runner, preflight, doctor, the tables
and the report read them through a Registry. Importing this package imports no mode:
`standard()` loads them, once, when something first needs them.
"""

from __future__ import annotations

from harness.modes.base import Datapath, Mode
from harness.modes.commands import CommandMode
from harness.modes.registry import Registry, bundled, load, plugins, standard



def get(name: str) -> Mode:
    """The standard mode `name` (a run's own modes are its scenario's: `Scenario.mode`)."""
    return standard().get(name)


__all__ = ["CommandMode", "Datapath", "Mode", "Registry", "bundled", "get", "load", "plugins", "standard"]
