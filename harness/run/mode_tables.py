"""Modes defined by commands in scenario files: the [modes.NAME] tables of a scenario, or of
the files its `mode_files` names (each holding only such tables), checked and returned as
definitions (harness/modes/commands.py). Each definition's record goes into
Scenario.mode_defs, so run.json keeps the definitions and --resume makes the modes again;
the scenario's registry holds the modes made from them. Nothing here registers a mode
anywhere. Errors name the file and the table."""

from __future__ import annotations

import pathlib
import tomllib
from typing import Any

from harness.core import schema
from harness.core.errors import HarnessError, read_text
from harness.modes import Registry, commands
from harness.testbeds.preflight import FEATURES


def make_mode(record: dict) -> commands.CommandMode:
    """The mode a definition's record ({"name", "definition", "source"}) describes, checked.
    Errors name the file and the table."""
    name, source = record["name"], record["source"]
    where = f"[modes.{name}]"
    if not commands.NAME_RE.match(name):
        raise schema.error(source, where, "a mode's name is a lowercase letter, then up to 31 lowercase "
                                          "letters, digits, '-' or '_'")
    mode = commands.CommandMode(name, record["definition"], source)
    unknown = [f for f in mode.features if f not in FEATURES]
    if unknown:
        raise schema.error(source, f"{where} features", f"unknown kernel feature {unknown[0]!r}"
                           f"{schema.suggest(unknown[0], FEATURES)}; known: {', '.join(FEATURES)}")
    return mode


def define_into(known: Registry, records: list[dict]) -> Registry:
    """`known` extended with the modes of `records`; a name already taken is an error naming
    the file and the table."""
    out = known.extended(())
    for r in records:
        mode = make_mode(r)
        try:
            out.define(mode)
        except HarnessError as e:
            raise schema.error(r["source"], f"[modes.{r['name']}]", str(e)) from e
    return out


def read_modes(table: Any, source: str) -> list[dict]:
    """The definitions of a [modes] table, each checked on its own."""
    if not isinstance(table, dict) or not all(isinstance(v, dict) for v in table.values()):
        raise schema.error(source, "[modes]", "expected [modes.NAME] tables, one per mode defined by commands")
    records = [{"name": name, "source": source, "definition": body} for name, body in table.items()]
    for r in records:
        make_mode(r)
    return records


def mode_file(path: pathlib.Path, source: str) -> list[dict]:
    try:
        doc = tomllib.loads(read_text(path, "mode file "))
    except (HarnessError, tomllib.TOMLDecodeError) as e:
        raise schema.error(source, "[scenario] mode_files", f"{path}: {e}") from e
    extra = [k for k in doc if k != "modes"]
    if extra or not doc:
        raise schema.error(str(path), f"[{extra[0]}]" if extra else "[modes]",
                           "a mode file holds [modes.NAME] tables and nothing else")
    return read_modes(doc["modes"], str(path))
