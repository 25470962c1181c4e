"""The ssh backend: hosts of an inventory (two or more), reached over SSH, as a RemoteTestbed.

The vagrant backend reuses it: Vagrant's `ssh-config` becomes inventory hosts.
"""

from __future__ import annotations

from harness.bed import Options, Testbed
from harness.core.errors import HarnessError, ScenarioError
from harness.hosts.ssh.connect import SshSettings
from harness.hosts.ssh.host import SshHost
from harness.testbeds import inventory, remote_down
from harness.testbeds.remote import RemoteTestbed


def ssh_settings(spec: inventory.HostSpec, opts: Options, accept_new: bool | None = None) -> SshSettings:
    """An inventory host as the SSH transport's settings."""
    return SshSettings(name=spec.name, hostname=spec.address, port=spec.port, user=spec.user,
                       key_file=spec.key_file, sudo=spec.sudo, known_hosts=spec.known_hosts,
                       accept_new_host_keys=opts.accept_new_host_keys if accept_new is None else accept_new)


def inventory_hosts(sc) -> tuple[list[inventory.HostSpec], str]:
    """The scenario's inventory: hosts inline in [testbed], or the --inventory file."""
    if sc.hosts:
        src = f"{sc.source} [testbed]"
        return inventory.from_doc({"hosts": [dict(h) for h in sc.hosts]}, src), src
    if sc.inventory:
        return inventory.load(sc.inventory), sc.inventory
    raise ScenarioError(f"backend {sc.backend} needs an inventory: --inventory FILE, or [[testbed.hosts]] "
                        f"in the scenario (see scenarios/inventory.example.toml)")


def inventory_ssh_hosts(path: str, opts: Options) -> list[tuple[str, SshHost]]:
    """(name, SshHost) for every host of an inventory file (not connected yet)."""
    return [(s.name, SshHost(ssh_settings(s, opts))) for s in inventory.load(path)]


def open_testbed(sc, opts: Options) -> Testbed:
    specs, src = inventory_hosts(sc)
    pair = inventory.pick(specs, sc.pair, src)
    hosts = tuple(SshHost(ssh_settings(spec, opts)) for spec in pair)
    return RemoteTestbed(pair, hosts, opts, backend="ssh", containers=sc.containers, host_cpus=sc.host_cpus,
                         source=src)


def remove_leftovers(opts: Options, inventory_path: str | None, force: bool) -> tuple[list[str], list[str]]:
    """Remote testbeds and SSH directories, on every host of the inventory, whose owner is gone."""
    if not inventory_path:
        raise HarnessError("down --backend ssh needs the hosts: --inventory FILE")
    hosts = inventory_ssh_hosts(inventory_path, opts)
    try:
        return remote_down.down(hosts, force=force)
    finally:
        for _, h in hosts:
            h.close()
