"""Testbeds by backend name: each opener turns a scenario into a Testbed that is connected
and checkable but has made nothing yet. The session picks one from this table and never
asks which it got.

    netns     the local lab of network namespaces (harness/lab.py)
    ssh       two hosts of an inventory, over SSH (harness/remote.py)
    vagrant   two Vagrant machines; `vagrant ssh-config` feeds the SSH backend
"""

from __future__ import annotations

import importlib
from typing import Callable

from harness.errors import HarnessError, ScenarioError
from harness.testbed import Options, Testbed


def ssh_settings(spec, opts: Options, accept_new: bool | None = None):
    """An inventory host as the SSH transport's settings."""
    from harness.hosts.ssh import SshSettings
    return SshSettings(name=spec.name, hostname=spec.address, port=spec.port, user=spec.user,
                       key_file=spec.key_file, sudo=spec.sudo, known_hosts=spec.known_hosts,
                       accept_new_host_keys=opts.accept_new_host_keys if accept_new is None else accept_new)


def inventory_hosts(sc) -> tuple[list, str]:
    """The scenario's inventory: hosts inline in [testbed], or the --inventory file."""
    from harness import inventory
    if sc.hosts:
        src = f"{sc.source} [testbed]"
        return inventory.from_doc({"hosts": [dict(h) for h in sc.hosts]}, src), src
    if sc.inventory:
        return inventory.load(sc.inventory), sc.inventory
    raise ScenarioError(f"backend {sc.backend} needs an inventory: --inventory FILE, or [[testbed.hosts]] "
                        f"in the scenario (see scenarios/inventory.example.toml)")


def open_ssh(sc, opts: Options) -> Testbed:
    from harness import inventory
    specs, src = inventory_hosts(sc)
    pair = inventory.pick(specs, sc.pair, src)
    from harness.hosts.ssh import SshHost
    from harness.remote import RemoteTestbed
    hosts = tuple(SshHost(ssh_settings(spec, opts)) for spec in pair)
    return RemoteTestbed(pair, hosts, opts, backend="ssh", containers=sc.containers)


BACKENDS: dict[str, str | Callable] = {
    "netns": "harness.lab:open_testbed",
    "ssh": open_ssh,
    "vagrant": "harness.vagrant_backend:open_vagrant",
}


def open_testbed(sc, opts: Options) -> Testbed:
    try:
        opener = BACKENDS[sc.backend]
    except KeyError:
        raise HarnessError(f"unknown backend {sc.backend!r} (known: {', '.join(BACKENDS)})") from None
    if isinstance(opener, str):
        mod, _, fn = opener.partition(":")
        opener = getattr(importlib.import_module(mod), fn)
    return opener(sc, opts)
