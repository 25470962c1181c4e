"""How a mode looks in tables and plots: its place (order) and its colour, by name.

Reading results needs no more of a mode than this, so analysis, gates and the report never
import a mode's code. The table holds what is known in this process: every mode a registry
defines notes its look (harness/modes/registry.py), and every run read notes the looks its
run.json recorded for its modes (harness/results.py), so a run of a plugin's or a scenario's
mode reads the same in a process that never loaded them. A name known to neither sorts
after the known ones, by name, native first; its colour is derived from the name.
"""

from __future__ import annotations

import dataclasses
from typing import Any

NATIVE = "native"
# Derived colours for names nobody declared (colour-blind safe, none of the bundled modes')
_EXTRA = ["#8c6d31", "#393b79", "#7b4173", "#637939", "#843c39", "#3182bd"]


@dataclasses.dataclass(frozen=True)
class Look:
    order: int          # lower first
    colour: str         # "#rrggbb", or "" for one derived from the name


_LOOKS: dict[str, Look] = {}


def note(name: str, order: int, colour: str) -> None:
    """What `name` looks like (the latest word wins: a mode defined again is the same mode)."""
    _LOOKS[name] = Look(int(order), colour or "")


def record(looks: Any) -> None:
    """Note a run's recorded looks ({name: {"order": …, "colour": …}}); anything malformed is skipped."""
    if not isinstance(looks, dict):
        return
    for name, look in looks.items():
        if isinstance(name, str) and isinstance(look, dict) and isinstance(look.get("order"), int):
            note(name, look["order"], look.get("colour") if isinstance(look.get("colour"), str) else "")


def of(name: str) -> Look | None:
    return _LOOKS.get(str(name))


def rank(name: Any) -> tuple:
    """Sort key: known modes by their order, then the rest by name (native first)."""
    m = str(name)
    known = _LOOKS.get(m)
    if known is not None:
        return (0, known.order, m)
    return (1, 0 if m == NATIVE else 1, m)


def colour(name: Any) -> str:
    known = _LOOKS.get(str(name))
    if known is not None and known.colour:
        return known.colour
    return _EXTRA[sum(map(ord, str(name))) % len(_EXTRA)]

