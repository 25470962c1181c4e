"""How modes look in tables and plots: each one's place (order) and colour, by name, as a value.

Reading results needs no more of a mode than this, so analysis, gates and the report never
import a mode's code. A `Looks` is immutable and passed around explicitly: a registry
gives its modes' (`Registry.looks()`), a run's run.json records its own (`modes`, written
from the scenario's registry) and `Looks.recorded` reads them back, so a run of a plugin's
or a scenario's mode reads the same in a process that never loaded them, and what one run
recorded never changes how another is shown. A report of several runs merges theirs.

A name the looks do not know sorts after the known ones, by name, native first; its colour
is derived from the name.
"""

from __future__ import annotations

import dataclasses
from types import MappingProxyType
from typing import Any, Iterable, Iterator, Mapping

NATIVE = "native"
# Derived colours for names nobody declared (colour-blind safe, none of the bundled modes')
_EXTRA = ["#8c6d31", "#393b79", "#7b4173", "#637939", "#843c39", "#3182bd"]


@dataclasses.dataclass(frozen=True)
class Look:
    order: int          # lower first
    colour: str         # "#rrggbb", or "" for one derived from the name


def derived_colour(name: Any) -> str:
    """The colour of a mode that declared none."""
    return _EXTRA[sum(map(ord, str(name))) % len(_EXTRA)]


class Looks(Mapping[str, Look]):
    """Mode name → Look; immutable (a merge or a reading makes a new one)."""

    __slots__ = ("_by",)

    def __init__(self, looks: Mapping[str, Look] | Iterable[tuple[str, Look]] = ()):
        by = dict(looks.items() if isinstance(looks, Mapping) else looks)
        for name, look in by.items():
            if not isinstance(name, str) or not isinstance(look, Look):
                raise TypeError(f"Looks: {name!r} → {look!r} is not a name and its Look")
        object.__setattr__(self, "_by", MappingProxyType(by))

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("Looks is immutable")

    @classmethod
    def recorded(cls, modes: Any) -> "Looks":
        """The looks a run.json recorded (its `modes`: {name: {"order": int, "colour": str}});
        anything malformed is skipped, as is everything when `modes` is no mapping."""
        if not isinstance(modes, Mapping):
            return EMPTY
        out = {}
        for name, look in modes.items():
            if not (isinstance(name, str) and isinstance(look, Mapping)):
                continue
            order, colour = look.get("order"), look.get("colour")
            if isinstance(order, int) and not isinstance(order, bool):
                out[name] = Look(order, colour if isinstance(colour, str) else "")
        return cls(out)

    def recordable(self) -> dict[str, dict[str, Any]]:
        """As run.json's `modes` holds them (what `recorded` reads back)."""
        return {n: {"order": k.order, "colour": k.colour} for n, k in self._by.items()}

    def merged(self, *others: "Looks") -> "Looks":
        """These looks and the names only `others` know (the first word on a name wins: a
        report's reference run is its first)."""
        out = dict(self._by)
        for o in others:
            for name, look in o.items():
                out.setdefault(name, look)
        return Looks(out)

    def rank(self, name: Any) -> tuple:
        """Sort key: known modes by their order, then the rest by name (native first)."""
        m = str(name)
        known = self._by.get(m)
        if known is not None:
            return (0, known.order, m)
        return (1, 0 if m == NATIVE else 1, m)

    def colour(self, name: Any) -> str:
        known = self._by.get(str(name))
        if known is not None and known.colour:
            return known.colour
        return derived_colour(name)

    def __getitem__(self, name: str) -> Look:
        return self._by[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._by)

    def __len__(self) -> int:
        return len(self._by)

    def __hash__(self) -> int:
        return hash(frozenset(self._by.items()))

    def __repr__(self) -> str:
        return f"Looks({dict(self._by)!r})"


EMPTY = Looks()
