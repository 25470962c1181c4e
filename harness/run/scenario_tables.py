"""The scenario file's tables: every [table] and key a scenario may hold, each with its
check (harness/core/schema.py), and the names they choose from (the tools', backends',
container kinds' and, while a scenario is read, its registry's modes)."""

from __future__ import annotations

import contextvars

from harness.core import pairs as pairs_mod, schema
from harness.core.errors import HarnessError
from harness.core.placements import NAMES as PLACEMENTS
from harness.core.units import parse_rate
from harness.modes import Registry, standard
from harness.testbeds import cpusets, registry
from harness.testbeds.containers.base import KINDS
from harness.tools import TOOLS
from harness.tools import search as search_mod, sweep as sweep_mod

TESTS = tuple(TOOLS)            # the registries' names, as the schema's choices
MAX_LAB_HOSTS = 8               # the lab's hosts share this machine's CPUs
BACKENDS = tuple(registry.BACKENDS)
CONTAINERS = tuple(KINDS)

# the names [matrix] modes may hold while a scenario is being built (its own registry's)
_KNOWN: contextvars.ContextVar[Registry | None] = contextvars.ContextVar("known_modes", default=None)


def _mode_names():
    return _KNOWN.get() or standard()


def _rate(v: str) -> str:
    try:
        parse_rate(v)
    except HarnessError as e:
        raise ValueError(str(e)) from e
    return v


def _search(key: str):
    """A [search] percentage, checked as the search's Settings check it."""
    def rule(v):
        try:
            search_mod.Settings(**{key: float(v) / 100})
        except HarnessError as e:
            lo, hi = ((0, 100 * search_mod.MAX_LOSS) if key == "loss" else (100 * search_mod.MIN_PRECISION, 100))
            raise ValueError(f"{v:g} % is outside {lo:g}..{hi:g} %" if key == "loss" else
                             f"{v:g} % is under {lo:g} % (or not under {hi:g} %)") from e
        return float(v)
    return rule


def _load_trials(v):
    """[search] load_trials: checked as the search's Settings check it."""
    try:
        search_mod.Settings(load_trials=v)
    except HarnessError as e:
        raise ValueError(f"{v} is not an odd number from 1 to {search_mod.MAX_LOAD_TRIALS}") from e
    return v


def _overlay_mtus(v):
    if isinstance(v, dict):
        return v    # checked against the underlay MTUs in build(), which knows them
    return schema.int_list(576, 65535, allow_auto=True)(v)


def _file_list(v) -> tuple[str, ...]:
    if not all(isinstance(x, str) and x.strip() for x in v):
        raise ValueError(f"{v!r}: expected a list of file names")
    return tuple(v)


F = schema.Field
TABLES: dict[str, dict[str, schema.Field]] = {
    "scenario": {
        "name": F(str, schema.non_empty),
        "description": F(str),
        "mode_files": F(list, _file_list),
    },
    "matrix": {
        "modes": F(list, schema.choice_list(_mode_names, "mode")),
        "underlay_mtu": F(list, schema.int_list(1280, 65535, allow_auto=True), "underlay_mtus"),
        "overlay_mtu": F((list, dict), _overlay_mtus, "overlay_mtus"),
        "placements": F(list, schema.choice_list(PLACEMENTS, "placement")),
        "tests": F(list, schema.choice_list(TESTS, "test")),
        "streams": F(list, schema.int_list(1, 128)),
        "repeats": F(int, schema.int_range(1, 1000)),
        "pairs": F((str, list), lambda v: _pairs_spec(v)),
        "schedule": F(str, schema.one_of(*pairs_mod.SCHEDULES)),
        "duration": F((int, float), lambda v: float(schema.int_range(1, 3600, " s")(v))),
        "unfit": F(str, schema.one_of("error", "skip")),
    },
    "underlay": {
        "rate": F(str, _rate),
    },
    "testbed": {
        "backend": F(str, schema.one_of(*BACKENDS)),
        "inventory": F(str, schema.non_empty),
        "hosts": F(list, doc="the inventory's [[hosts]], inline"),
        "pair": F(list, lambda v: _pair(v)),
        "containers": F(str, schema.one_of(*CONTAINERS)),
        "lab_hosts": F(int, schema.int_range(2, MAX_LAB_HOSTS)),
        "lab_cpus": F(str, schema.one_of(*cpusets.CHOICES)),
        "host_cpus": F(str, cpusets.cpu_list),
    },
    "sweep": {
        "from": F(str, _rate, "sweep_from"),
        "to": F(str, _rate, "sweep_to"),
        "steps": F(int, schema.int_range(sweep_mod.MIN_STEPS, sweep_mod.MAX_STEPS), "sweep_steps"),
    },
    "search": {
        "pdr_loss_pct": F((int, float), _search("loss"), "search_pdr_loss_pct"),
        "precision_pct": F((int, float), _search("precision"), "search_precision_pct"),
        "load_trials": F(int, _load_trials, "search_load_trials"),
    },
}


def _pairs_spec(v) -> tuple[str, ...]:
    """The pair selection as written ("all", "ring", "star:HOST", or pairs "A-B"); checked
    against the hosts' names once the testbed names them (harness/core/pairs.py)."""
    items = [v] if isinstance(v, str) else v
    if not items or not all(isinstance(x, str) and x.strip() for x in items):
        raise ValueError(f"{v!r}: expected \"all\", \"ring\", \"star:HOST\" or a list of pairs \"A-B\"")
    return tuple(x.strip() for x in items)


def _pair(v) -> tuple[str, ...]:
    if list(v) == ["all"]:
        return ("all",)
    if len(v) < 2 or not all(isinstance(x, str) and x for x in v) or len(set(v)) != len(v):
        raise ValueError(f"{v!r}: expected two or more different host names, or [\"all\"]")
    return tuple(v)
