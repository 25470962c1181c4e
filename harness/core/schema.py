"""One declarative way to check a TOML document: a table of fields per TOML table.

Scenario files and inventories are both read through `check`: every key is looked up
in its table's fields (unknown keys and tables are refused with a "did you mean"),
its TOML type is checked, then the field's own rule converts or refuses the value.
An error names the file, the table and the key in one line:

    x.toml: [matrix] repeats: 0 is outside 1..1000

A rule is a function value → value that raises ValueError with the reason; the
helpers below build the usual ones. Plain dataclasses and functions instead of a
validation library keep `overlaybench --help` fast (nothing here imports more than
the standard library).
"""

from __future__ import annotations

import dataclasses
import difflib
from typing import Any, Callable

from harness.core.errors import ScenarioError

Rule = Callable[[Any], Any]


@dataclasses.dataclass(frozen=True)
class Field:
    kind: type | tuple[type, ...]    # the TOML type(s) accepted
    rule: Rule | None = None         # converts or refuses (ValueError: the reason)
    dest: str | None = None          # where the value goes; default: the key
    doc: str = ""


def suggest(word: str, choices) -> str:
    close = difflib.get_close_matches(str(word), [str(c) for c in choices], n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def error(source: str, where: str, msg: str) -> ScenarioError:
    return ScenarioError(f"{source}: {where}: {msg}")


def _type_names(kind) -> str:
    return "/".join(t.__name__ for t in (kind if isinstance(kind, tuple) else (kind,)))


def check_table(body: Any, fields: dict[str, Field], source: str, where: str) -> dict[str, Any]:
    """Check one table's keys and values; returns {dest: converted value} for the keys given."""
    if not isinstance(body, dict):
        raise error(source, where, f"must be a table, got {type(body).__name__}")
    out: dict[str, Any] = {}
    for key, val in body.items():
        f = fields.get(key)
        if f is None:
            raise error(source, f"{where} {key}",
                        f"unknown key{suggest(key, fields)}; known: {', '.join(fields)}")
        bad_bool = isinstance(val, bool) and bool not in (f.kind if isinstance(f.kind, tuple) else (f.kind,))
        if not isinstance(val, f.kind) or bad_bool:
            raise error(source, f"{where} {key}", f"expected {_type_names(f.kind)}, got {type(val).__name__} {val!r}")
        if f.rule is not None:
            try:
                val = f.rule(val)
            except ValueError as e:
                raise error(source, f"{where} {key}", str(e)) from e
        out[f.dest or key] = val
    return out


def check(doc: dict[str, Any], tables: dict[str, dict[str, Field]], source: str,
          arrays: dict[str, dict[str, Field]] | None = None) -> dict[str, Any]:
    """Check a whole document. `tables` are [name] tables, `arrays` [[name]] arrays of tables.
    Returns {table: {dest: value}} and {array: [{dest: value}, …]}."""
    arrays = arrays or {}
    known = list(tables) + list(arrays)
    out: dict[str, Any] = {}
    for name, body in doc.items():
        if name in tables:
            out[name] = check_table(body, tables[name], source, f"[{name}]")
        elif name in arrays:
            if not isinstance(body, list):
                raise error(source, f"[[{name}]]", f"must be an array of tables ([[{name}]]), got {type(body).__name__}")
            out[name] = [check_table(item, arrays[name], source, f"[[{name}]] #{i + 1}")
                         for i, item in enumerate(body)]
        else:
            raise error(source, f"[{name}]", f"unknown table{suggest(name, known)}; known: {', '.join(known)}")
    return out


# ----------------------------------------------------------------------- rules

def int_range(lo: int, hi: int, unit: str = "") -> Rule:
    def rule(v):
        if not lo <= v <= hi:
            raise ValueError(f"{v:g}{unit} is outside {lo}..{hi}")
        return v
    return rule


def one_of(*values: str) -> Rule:
    def rule(v):
        if v not in values:
            raise ValueError(f"{v!r}: expected " + " or ".join(f'"{x}"' for x in values) + suggest(v, values))
        return v
    return rule


def choice_list(known, what: str) -> Rule:
    """A non-empty list of known names, duplicates dropped, order kept."""
    def rule(values):
        known_ = tuple(known() if callable(known) else known)
        out = []
        for v in values:
            if not isinstance(v, str) or v not in known_:
                raise ValueError(f"unknown {what} {v!r}{suggest(v, known_)}; known: {', '.join(known_)}")
            if v not in out:
                out.append(v)
        if not out:
            raise ValueError("must not be empty")
        return tuple(out)
    return rule


def int_list(lo: int, hi: int, allow_auto: bool = False) -> Rule:
    """A non-empty list of whole numbers in lo..hi (and "auto" where allowed), duplicates dropped."""
    def rule(values):
        out = []
        for v in values:
            if allow_auto and v == "auto":
                pass
            elif isinstance(v, bool) or not isinstance(v, int):
                raise ValueError(f"{v!r} is not a whole number" + (' or "auto"' if allow_auto else ""))
            elif not lo <= v <= hi:
                raise ValueError(f"{v} is outside {lo}..{hi}")
            if v not in out:
                out.append(v)
        if not out:
            raise ValueError("must not be empty")
        return tuple(out)
    return rule


def non_empty(v: str) -> str:
    if not v.strip():
        raise ValueError("must not be empty")
    return v
