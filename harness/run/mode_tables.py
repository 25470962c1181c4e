"""Modes defined by commands in scenario files: the [modes.NAME] tables of a scenario, or of
the files its `mode_files` names (each holding only such tables), checked and registered
(harness/modes/commands.py). Each registered mode's record goes into Scenario.mode_defs, so
run.json keeps the definitions and --resume registers them again. Errors name the file and
the table."""

from __future__ import annotations

import pathlib
import tomllib
from typing import Any

from harness import modes as modes_mod
from harness.core import schema
from harness.core.errors import HarnessError, read_text
from harness.modes import commands
from harness.testbeds.preflight import FEATURES


def define_mode(name: str, definition: dict, source: str) -> dict:
    """Register a mode defined by commands (a [modes.NAME] table of `source`); its record
    for Scenario.mode_defs. Errors name the file and the table."""
    where = f"[modes.{name}]"
    if not commands.NAME_RE.match(name):
        raise schema.error(source, where, "a mode's name is a lowercase letter, then up to 31 lowercase "
                                          "letters, digits, '-' or '_'")
    mode = commands.CommandMode(name, definition, source)
    unknown = [f for f in mode.features if f not in FEATURES]
    if unknown:
        raise schema.error(source, f"{where} features", f"unknown kernel feature {unknown[0]!r}"
                           f"{schema.suggest(unknown[0], FEATURES)}; known: {', '.join(FEATURES)}")
    try:
        modes_mod.define(mode)
    except HarnessError as e:
        raise schema.error(source, where, str(e)) from e
    return {"name": name, "source": source, "definition": definition}


def define_modes(table: Any, source: str) -> list[dict]:
    if not isinstance(table, dict) or not all(isinstance(v, dict) for v in table.values()):
        raise schema.error(source, "[modes]", "expected [modes.NAME] tables, one per mode defined by commands")
    return [define_mode(name, body, source) for name, body in table.items()]


def mode_file(path: pathlib.Path, source: str) -> list[dict]:
    try:
        doc = tomllib.loads(read_text(path, "mode file "))
    except (HarnessError, tomllib.TOMLDecodeError) as e:
        raise schema.error(source, "[scenario] mode_files", f"{path}: {e}") from e
    extra = [k for k in doc if k != "modes"]
    if extra or not doc:
        raise schema.error(str(path), f"[{extra[0]}]" if extra else "[modes]",
                           "a mode file holds [modes.NAME] tables and nothing else")
    return define_modes(doc["modes"], str(path))
