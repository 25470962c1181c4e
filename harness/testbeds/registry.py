"""Testbeds by backend name: each opener turns a scenario into a Testbed that is connected
and checkable but has made nothing yet. The session picks one from this table and never
asks which it got. `overlaybench down` picks its remover from the second table, DOWN, the
same way.

    netns     the local lab of network namespaces (harness/testbeds/lab.py)
    ssh       two hosts of an inventory, over SSH (harness/testbeds/remote.py)
    vagrant   two Vagrant machines; `vagrant ssh-config` feeds the SSH backend
"""

from __future__ import annotations

import importlib
from typing import Callable

from harness.core.errors import HarnessError, ScenarioError
from harness.testbeds.base import Options, Testbed


def ssh_settings(spec, opts: Options, accept_new: bool | None = None):
    """An inventory host as the SSH transport's settings."""
    from harness.hosts.ssh.connect import SshSettings
    return SshSettings(name=spec.name, hostname=spec.address, port=spec.port, user=spec.user,
                       key_file=spec.key_file, sudo=spec.sudo, known_hosts=spec.known_hosts,
                       accept_new_host_keys=opts.accept_new_host_keys if accept_new is None else accept_new)


def inventory_hosts(sc) -> tuple[list, str]:
    """The scenario's inventory: hosts inline in [testbed], or the --inventory file."""
    from harness.config import inventory
    if sc.hosts:
        src = f"{sc.source} [testbed]"
        return inventory.from_doc({"hosts": [dict(h) for h in sc.hosts]}, src), src
    if sc.inventory:
        return inventory.load(sc.inventory), sc.inventory
    raise ScenarioError(f"backend {sc.backend} needs an inventory: --inventory FILE, or [[testbed.hosts]] "
                        f"in the scenario (see scenarios/inventory.example.toml)")


def inventory_ssh_hosts(path: str, opts: Options) -> list:
    """(name, SshHost) for every host of an inventory file (not connected yet)."""
    from harness.config import inventory
    from harness.hosts.ssh.host import SshHost
    return [(s.name, SshHost(ssh_settings(s, opts))) for s in inventory.load(path)]


def open_ssh(sc, opts: Options) -> Testbed:
    from harness.config import inventory
    specs, src = inventory_hosts(sc)
    pair = inventory.pick(specs, sc.pair, src)
    from harness.hosts.ssh.host import SshHost
    from harness.testbeds.remote import RemoteTestbed
    hosts = tuple(SshHost(ssh_settings(spec, opts)) for spec in pair)
    return RemoteTestbed(pair, hosts, opts, backend="ssh", containers=sc.containers)


BACKENDS: dict[str, str | Callable] = {
    "netns": "harness.testbeds.lab:open_testbed",
    "ssh": open_ssh,
    "vagrant": "harness.testbeds.vagrant:open_vagrant",
}


def _resolve(table: dict, name: str, what: str) -> Callable:
    try:
        entry = table[name]
    except KeyError:
        raise HarnessError(f"unknown backend {name!r}{what} (known: {', '.join(table)})") from None
    if isinstance(entry, str):
        mod, _, fn = entry.partition(":")
        entry = getattr(importlib.import_module(mod), fn)
    return entry


def open_testbed(sc, opts: Options) -> Testbed:
    return _resolve(BACKENDS, sc.backend, "")(sc, opts)


# ------------------------------------------------------------------ down
# Each remover: (options, inventory file or None, force) → (what it removed, what it left and why).

def down_netns(opts: Options, inventory: str | None, force: bool) -> tuple[list[str], list[str]]:
    """Labs on this machine whose owner is gone."""
    if inventory:
        raise HarnessError("down --inventory removes leftovers on SSH hosts: leave out --backend netns")
    from harness.testbeds.lab import down
    return down(force=force)


def down_ssh(opts: Options, inventory: str | None, force: bool) -> tuple[list[str], list[str]]:
    """Remote testbeds and SSH directories, on every host of the inventory, whose owner is gone."""
    if not inventory:
        raise HarnessError("down --backend ssh needs the hosts: --inventory FILE")
    from harness.testbeds.remote_down import down
    hosts = inventory_ssh_hosts(inventory, opts)
    try:
        return down(hosts, force=force)
    finally:
        for _, h in hosts:
            h.close()


def down_vagrant(opts: Options, inventory: str | None, force: bool) -> tuple[list[str], list[str]]:
    """The Vagrantfile's machines destroyed (`vagrant destroy -f`), whoever made them."""
    from harness.testbeds.vagrant import destroy
    return destroy(opts), []


DOWN: dict[str, str | Callable] = {
    "netns": down_netns,
    "ssh": down_ssh,
    "vagrant": down_vagrant,
}


def down(backend: str | None, opts: Options, inventory: str | None = None,
         force: bool = False) -> tuple[list[str], list[str]]:
    """`overlaybench down`: the backend's leftovers removed (ssh when only an inventory is
    given, as for `run`; else the local lab)."""
    name = backend or ("ssh" if inventory else "netns")
    return _resolve(DOWN, name, " for down")(opts, inventory, force)
