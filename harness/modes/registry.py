"""Overlay modes by name, in table order: a Registry, and the standard one.

The standard registry holds every Mode subclass with its own `name` in a module of this
package (`bundled`) and the modes Python packages add through the `overlaybench.modes`
entry-point group (`plugins`). It is made once, on first use (`standard()`), and never
changed: a run's registry is a copy with the run's own modes defined into it (a scenario's
modes defined by commands, an A/B run's arms), so nothing one run defines outlives it.

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
from typing import Iterable, Iterator

from harness.core.errors import HarnessError
from harness.core.looks import Look, Looks
from harness.modes.base import Mode
from harness.modes.commands import CommandMode

PACKAGE = "harness.modes"
# this package's modules that define no mode of their own
NOT_MODES = ("base", "registry", "variants", "etcd", "flannel_config", "commands")
ENTRY_POINTS = "overlaybench.modes"


def _origin(mode: Mode) -> str:
    return mode.source if isinstance(mode, CommandMode) else f"{type(mode).__module__}.{type(mode).__name__}"


class Registry:
    """Modes by name, kept in table order (`order`, then name)."""

    def __init__(self, modes: Iterable[Mode] = ()):
        self._by_name: dict[str, Mode] = {}
        for m in modes:
            self.define(m)

    def define(self, mode: Mode) -> Mode:
        """Add `mode`. The same command-defined mode again (a resumed run, a scenario read
        twice) is the one already there; any other mode under a name already taken is refused."""
        name = getattr(mode, "name", None)
        if not isinstance(name, str) or not name:
            raise HarnessError(f"{_origin(mode)}: a mode needs a name")
        have = self._by_name.get(name)
        if have is not None:
            if isinstance(mode, CommandMode) and mode.same(have):
                return have
            builtin = type(have).__module__.startswith(f"{PACKAGE}.") and not isinstance(have, CommandMode)
            raise HarnessError(f"mode {name}: the name is taken by "
                               + ("a built-in mode" if builtin else f"the mode of {_origin(have)}"))
        ordered = sorted([*self._by_name.values(), mode], key=lambda m: (m.order, m.name))
        self._by_name = {m.name: m for m in ordered}
        return mode

    def extended(self, modes: Iterable[Mode]) -> "Registry":
        """A copy with `modes` defined into it (this registry is left as it is)."""
        out = Registry()
        out._by_name = dict(self._by_name)
        for m in modes:
            out.define(m)
        return out

    def get(self, name: str) -> Mode:
        try:
            return self._by_name[name]
        except KeyError:
            raise HarnessError(f"unknown mode {name!r} (known: {', '.join(self._by_name)})") from None

    def __contains__(self, name: object) -> bool:
        return name in self._by_name

    def __iter__(self) -> Iterator[str]:
        return iter(self._by_name)

    def __len__(self) -> int:
        return len(self._by_name)

    def values(self) -> list[Mode]:
        return list(self._by_name.values())

    def looks(self) -> Looks:
        """How its modes look in tables and plots (what a run records in run.json's `modes`)."""
        return Looks({m.name: Look(int(m.order), m.colour or "") for m in self._by_name.values()})

    def needing(self, feature: str) -> list[str]:
        """The modes that need a kernel feature, in table order."""
        return [m.name for m in self._by_name.values() if feature in m.features]


def bundled() -> list[Mode]:
    """One of each Mode subclass with its own `name` in the modules of this package."""
    package = importlib.import_module(PACKAGE)
    found = []
    for info in pkgutil.iter_modules(package.__path__):
        if info.name in NOT_MODES or info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{PACKAGE}.{info.name}")
        for obj in vars(module).values():
            if (inspect.isclass(obj) and issubclass(obj, Mode) and obj.__module__ == module.__name__
                    and "name" in obj.__dict__ and not inspect.isabstract(obj)):
                found.append(obj())
    return found


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


def load(eps=None) -> Registry:
    """The bundled modes and the plugins' (of `eps`, default: the installed ones)."""
    reg = Registry(bundled())
    for mode, where in plugins(eps):
        try:
            reg.define(mode)
        except HarnessError as e:
            raise HarnessError(f"{where}: {e}") from e
    return reg


_STANDARD: Registry | None = None


def standard() -> Registry:
    """The bundled and installed modes, loaded on the first call (not on import)."""
    global _STANDARD
    if _STANDARD is None:
        _STANDARD = load()
    return _STANDARD
