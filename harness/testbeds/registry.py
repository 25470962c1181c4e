"""Testbeds by backend name: the one table of backends.

Each backend is a module with two functions:

    open_testbed(scenario, options) -> Testbed
        connected and checkable, nothing of the run made yet (Vagrant's machines are up);
        the session never asks which it got
    remove_leftovers(options, inventory file or None, force) -> (removed, kept and why)
        what `overlaybench down` does for that backend

The modules are imported when used, not here: the SSH transport (paramiko) and Vagrant's
probes cost time that `--help`, scenario checks and the local lab should not pay.
"""

from __future__ import annotations

import dataclasses
import importlib
from types import ModuleType

from harness.core.errors import HarnessError


@dataclasses.dataclass(frozen=True)
class Backend:
    name: str
    module: str         # where open_testbed and remove_leftovers live
    summary: str


BACKENDS: dict[str, Backend] = {b.name: b for b in (
    Backend("netns", "harness.testbeds.lab", "the local lab of network namespaces (default)"),
    Backend("ssh", "harness.testbeds.ssh", "hosts of an inventory (two or more), over SSH"),
    Backend("vagrant", "harness.testbeds.vagrant", "Vagrant machines (two or more); `vagrant ssh-config` feeds the "
                                                   "SSH backend"),
    Backend("kubernetes", "harness.testbeds.kubernetes", "an existing cluster's nodes, through pods (native: "
                                                         "hostNetwork; cni: the pod network as found)"),
)}


def backend(name: str, what: str = "") -> ModuleType:
    try:
        b = BACKENDS[name]
    except KeyError:
        raise HarnessError(f"unknown backend {name!r}{what} (known: {', '.join(BACKENDS)})") from None
    return importlib.import_module(b.module)


def open_testbed(sc, opts):
    return backend(sc.backend).open_testbed(sc, opts)


def down(name: str | None, opts, inventory: str | None = None, force: bool = False) -> tuple[list[str], list[str]]:
    """`overlaybench down`: the backend's leftovers removed (ssh when only an inventory is
    given, as for `run`; kubernetes when only a kubeconfig is; else the local lab)."""
    from harness.hosts.local import remove_stale_tempdirs  # like the backends: on use
    name = name or ("ssh" if inventory else "kubernetes" if getattr(opts, "kubeconfig", None) else "netns")
    removed, kept = backend(name, " for down").remove_leftovers(opts, inventory, force)
    return removed + remove_stale_tempdirs(force), kept
