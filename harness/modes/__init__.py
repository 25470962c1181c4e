"""Overlay modes by name, in one registry (MODES): every Mode subclass with its own `name`
in a module of this package, the modes Python packages add through the
`overlaybench.modes` entry-point group, and the modes a scenario defines by commands
(harness/modes/commands.py), registered by `define` when the scenario is read.

Adding a mode is adding one module here: its class declares the name, its place in
tables (`order`), its colour, the kernel features it needs and its overhead
(harness/modes/base.py); the scenario checks, the runner, preflight, doctor, the tables
and the report read them from MODES.

A plugin's entry point names a Mode subclass (made with no arguments), a Mode, or a
function returning a Mode or several. One that cannot be loaded, or whose mode takes a
name already there, is an error naming the entry point: a mode silently missing would
turn up as "unknown mode" far from its cause.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import inspect
import pkgutil

from harness.core.errors import HarnessError
from harness.modes.base import Datapath, Mode
from harness.modes.commands import CommandMode

NOT_MODES = ("base", "variants", "etcd", "flannel_config", "commands")     # this package's modules that define no mode of their own
ENTRY_POINTS = "overlaybench.modes"


def _discover() -> list[Mode]:
    found = []
    for info in pkgutil.iter_modules(__path__):
        if info.name in NOT_MODES or info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        for obj in vars(module).values():
            if (inspect.isclass(obj) and issubclass(obj, Mode) and obj.__module__ == module.__name__
                    and "name" in obj.__dict__ and not inspect.isabstract(obj)):
                found.append(obj())
    return found


def _origin(mode: Mode) -> str:
    return mode.source if isinstance(mode, CommandMode) else f"{type(mode).__module__}.{type(mode).__name__}"


def define(mode: Mode) -> Mode:
    """Register `mode` in MODES (kept in table order). The same command-defined mode again
    (a resumed run, a scenario read twice) is the one already there; any other mode under a
    name already taken is refused."""
    name = getattr(mode, "name", None)
    if not isinstance(name, str) or not name:
        raise HarnessError(f"{_origin(mode)}: a mode needs a name")
    have = MODES.get(name)
    if have is not None:
        if isinstance(mode, CommandMode) and mode.same(have):
            return have
        builtin = type(have).__module__.startswith(f"{__name__}.") and not isinstance(have, CommandMode)
        raise HarnessError(f"mode {name}: the name is taken by "
                           + ("a built-in mode" if builtin else f"the mode of {_origin(have)}"))
    MODES[name] = mode
    ordered = sorted(MODES.values(), key=lambda m: (m.order, m.name))
    MODES.clear()
    MODES.update((m.name, m) for m in ordered)
    return mode


def _define_plugin(mode: Mode, where: str) -> None:
    try:
        define(mode)
    except HarnessError as e:
        raise HarnessError(f"{where}: {e}") from e


def plugins(eps=None) -> list[tuple[Mode, str]]:
    """The modes of the `overlaybench.modes` entry points (of `eps`, default: the installed ones),
    each with where it came from."""
    out: list[tuple[Mode, str]] = []
    for ep in importlib.metadata.entry_points(group=ENTRY_POINTS) if eps is None else eps:
        where = f"entry point {ep.name} = {ep.value} ({ENTRY_POINTS})"
        try:
            obj = ep.load()
            made = obj() if inspect.isclass(obj) or (callable(obj) and not isinstance(obj, Mode)) else obj
        except Exception as e:      # a plugin's own code: whatever it raises is its failure
            raise HarnessError(f"{where}: cannot load: {type(e).__name__}: {e}") from e
        made = [made] if isinstance(made, Mode) else list(made) if isinstance(made, (list, tuple)) else made
        if not isinstance(made, list) or not made or not all(isinstance(m, Mode) for m in made):
            raise HarnessError(f"{where}: gave {made!r}, not a Mode (a Mode subclass, a Mode, or a function "
                               f"returning Modes)")
        out += [(m, where) for m in made]
    return out


MODES: dict[str, Mode] = {}
for _found in _discover():
    define(_found)
for _found, _where in plugins():
    _define_plugin(_found, _where)


def get(name: str) -> Mode:
    try:
        return MODES[name]
    except KeyError:
        raise HarnessError(f"unknown mode {name!r} (known: {', '.join(MODES)})") from None


def needing(feature: str) -> list[str]:
    """The modes that need a kernel feature, in table order."""
    return [m.name for m in MODES.values() if feature in m.features]


__all__ = ["CommandMode", "Datapath", "Mode", "MODES", "define", "get", "needing", "plugins"]
