"""Testbeds by backend name: the one table of backends.

Each backend is a module with two functions:

    open_testbed(scenario, options) -> Testbed
        connected and checkable, nothing of the run made yet (Vagrant's machines are up);
        the session never asks which it got
    remove_leftovers(options, inventory file or None, force) -> (removed, kept and why)
        what `overlaybench down` does for that backend

and, where its entry names one, a hook that the command line asks before the run:

    modes_for(scenario, path or None) -> list of modes, or None
        the modes to measure when none were asked for on the command line: None keeps the
        scenario's (the kubernetes backend measures the cluster's own network instead of
        modes that deploy overlays onto hosts)

Which backend a run's flags imply when none is named (an inventory: ssh; a kubeconfig:
kubernetes) is `implied`, here only.

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
    modes_for: str | None = None    # "module:function", the modes hook of the module doc
    flags: tuple[str, ...] = ()     # command-line options (by dest) that only this backend takes
    picks_hosts: bool = False       # --hosts is how many of its hosts it picks (Options.node_count),
                                    # not the lab's host count


BACKENDS: dict[str, Backend] = {b.name: b for b in (
    Backend("netns", "harness.testbeds.lab", "the local lab of network namespaces (default)"),
    Backend("ssh", "harness.testbeds.ssh", "hosts of an inventory (two or more), over SSH"),
    Backend("vagrant", "harness.testbeds.vagrant", "Vagrant machines (two or more); `vagrant ssh-config` feeds the "
                                                   "SSH backend"),
    Backend("kubernetes", "harness.testbeds.kubernetes", "an existing cluster's nodes, through pods (native: "
                                                         "hostNetwork; cni: the pod network as found)",
            modes_for="harness.testbeds.kubernetes.plan:modes_for",
            flags=("kubeconfig", "context", "nodes", "image", "namespace", "pod_cpu", "pod_memory", "tolerate",
                   "pod_ready_timeout", "image_pull_secret", "older_than", "node_selector", "across_zones",
                   "same_node", "port_base"), picks_hosts=True),
)}


def implied(inventory: str | None = None, kubeconfig: str | None = None) -> str | None:
    """The backend the given files imply when none is named: an inventory's hosts are
    reached over SSH, a kubeconfig names a cluster; None: neither was given."""
    return "ssh" if inventory else "kubernetes" if kubeconfig else None


def picks_hosts(name: str | None) -> bool:
    """Whether --hosts tells backend `name` how many of its hosts to pick (else: the lab's)."""
    b = BACKENDS.get(name or "")
    return b is not None and b.picks_hosts


def has_modes_hook(name: str | None) -> bool:
    """Whether backend `name` may swap a scenario's modes (modes_for, the module doc)."""
    b = BACKENDS.get(name or "")
    return b is not None and b.modes_for is not None


def modes_for(name: str | None, sc, path: str | None) -> list[str] | None:
    """The modes backend `name` measures instead of scenario `sc`'s (read from `path`, None
    for the built-in one), or None to keep them (and for a backend without the hook)."""
    if not has_modes_hook(name):
        return None
    module, _, function = BACKENDS[name].modes_for.partition(":")
    return getattr(importlib.import_module(module), function)(sc, path)


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
    name = name or implied(inventory, getattr(opts, "kubeconfig", None)) or "netns"
    removed, kept = backend(name, " for down").remove_leftovers(opts, inventory, force)
    return removed + remove_stale_tempdirs(force), kept
