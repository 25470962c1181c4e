"""Overlay modes by name: every Mode subclass with its own `name` in a module of this package.

Adding a mode is adding one module here: its class declares the name, its place in
tables (`order`), its colour, the kernel features it needs and its overhead
(harness/modes/base.py); the scenario checks, the runner, preflight, doctor, the tables
and the report read them from MODES.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil

from harness.core.errors import HarnessError
from harness.modes.base import Datapath, Mode

NOT_MODES = ("base", "variants")     # this package's modules that define no mode


def _discover() -> dict[str, Mode]:
    found = []
    for info in pkgutil.iter_modules(__path__):
        if info.name in NOT_MODES or info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        for obj in vars(module).values():
            if (inspect.isclass(obj) and issubclass(obj, Mode) and obj.__module__ == module.__name__
                    and "name" in obj.__dict__ and not inspect.isabstract(obj)):
                found.append(obj())
    return {m.name: m for m in sorted(found, key=lambda m: (m.order, m.name))}


MODES: dict[str, Mode] = _discover()


def get(name: str) -> Mode:
    try:
        return MODES[name]
    except KeyError:
        raise HarnessError(f"unknown mode {name!r} (known: {', '.join(MODES)})") from None


def needing(feature: str) -> list[str]:
    """The modes that need a kernel feature, in table order."""
    return [m.name for m in MODES.values() if feature in m.features]


__all__ = ["Datapath", "Mode", "MODES", "get", "needing"]
