"""The vagrant backend: machines of a Vagrantfile (the first two, those `--pair` names, or
all), measured through the ssh backend.

Vagrant only brings the machines up and says how to reach them (vagrant_cli.py);
the SSH transport does everything else, as pyinfra's Vagrant connector does. Vagrant
turns host-key checking off for its machines, so their keys are accepted here — for this
backend only, into a known_hosts file of the run's own — and run.json says so. The
underlay is each machine's interface on the subnet they all share that does not carry its
default route (Vagrant's own management network does). The shipped Vagrantfile defines
OVERLAYBENCH_HOSTS machines (default 2).
"""

from __future__ import annotations

import ipaddress
import logging
import os
import pathlib
import shutil
import sys
import tempfile

from harness.bed import Options, Testbed
from harness.core.errors import HarnessError
from harness.core.paths import PROJECT
from harness.hosts.ssh.host import SshHost
from harness.testbeds import inventory, vagrant_cli
from harness.testbeds.inventory import HostSpec
from harness.testbeds.remote import RemoteTestbed
from harness.testbeds.ssh import ssh_settings

log = logging.getLogger(__name__)


def vagrant_dir(opts: Options) -> pathlib.Path:
    d = pathlib.Path(opts.vagrant_dir or PROJECT).expanduser()
    if not (d / "Vagrantfile").is_file():
        raise HarnessError(f"{d}: no Vagrantfile there (--vagrant-dir names the directory that holds one)")
    return d


def provider(opts: Options) -> str:
    """The provider to bring machines up with: the flag, $VAGRANT_DEFAULT_PROVIDER, or docker
    (what runs where no VM boots; Vagrant itself would prefer any VM plugin installed)."""
    return opts.vagrant_provider or os.environ.get("VAGRANT_DEFAULT_PROVIDER") or "docker"


def _progress(line: str) -> None:
    """Vagrant's lines as it brings machines up: on a terminal as they come, else in the log (-v)."""
    if sys.stderr.isatty():
        print(f"vagrant: {line}", file=sys.stderr)
    else:
        log.info("vagrant: %s", line)


def machines(opts: Options) -> dict:
    """The Vagrantfile's machines up and running (`vagrant up` where needed, with progress),
    and how to reach each: name → VagrantMachine."""
    d = vagrant_dir(opts)
    vagrant_cli.up(d, provider=provider(opts), progress=_progress)
    found = vagrant_cli.ssh_config(d)
    if len(found) < 2:
        raise HarnessError(f"{d}/Vagrantfile defines {len(found)} machine(s); the vagrant backend needs two or more")
    return found


def _addresses(host) -> tuple[list[tuple[str, ipaddress.IPv4Interface]], set[str]]:
    """(interface, address) pairs of a host, and the interfaces that carry a default route."""
    addrs = host.run(["ip", "-o", "-4", "addr", "show"], timeout=20).stdout
    pairs = [(ln.split()[1], ipaddress.IPv4Interface(ln.split()[3])) for ln in addrs.splitlines()
             if len(ln.split()) > 3 and ln.split()[1] != "lo"]
    routes = host.run(["ip", "-o", "-4", "route", "show", "default"], timeout=20).stdout
    default = {ln.split()[ln.split().index("dev") + 1] for ln in routes.splitlines() if " dev " in ln}
    return pairs, default


def shared_underlay(hosts) -> list[tuple[str, str]]:
    """(dev, ip) on each host: the subnet they all share, other than a default route's."""
    found = [_addresses(h) for h in hosts]
    (first, first_default), rest = found[0], found[1:]
    for dev0, i0 in first:
        if dev0 in first_default:
            continue
        picks = [(dev0, str(i0.ip))]
        for addrs, default in rest:
            hit = next(((d, i) for d, i in addrs if i.network == i0.network and d not in default
                        and str(i.ip) not in {ip for _, ip in picks}), None)
            if hit is None:
                break
            picks.append((hit[0], str(hit[1].ip)))
        else:
            return picks
    raise HarnessError(f"{', '.join(h.name for h in hosts)} share no network besides Vagrant's management one: "
                       f"give them a private network in the Vagrantfile")


def open_testbed(sc, opts: Options) -> Testbed:
    found = machines(opts)
    names = list(found)
    specs0 = [HostSpec(name=m.name, address=m.hostname, port=m.port, user=m.user, sudo=m.user != "root",
                       key_file=m.identity_file) for m in found.values()]
    pair = inventory.pick(specs0, sc.pair, f"{vagrant_dir(opts)}/Vagrantfile")
    known = pathlib.Path(tempfile.mkdtemp(prefix="overlaybench-vagrant-")) / "known_hosts"
    known.touch(mode=0o600)
    hosts = []
    for spec in pair:
        spec = HostSpec(**{**spec.to_dict(), "known_hosts": str(known)})
        # Vagrant asks for no host-key checking; its machines' keys are taken on first sight,
        # into this run's own known_hosts, never the user's.
        hosts.append(SshHost(ssh_settings(spec, opts, accept_new=True)))
    try:
        underlays = shared_underlay(hosts)
    except BaseException:
        for h in hosts:
            h.close()
        raise
    pair = tuple(HostSpec(**{**s.to_dict(), "underlay_interface": dev, "underlay_address": ip,
                             "known_hosts": str(known)})
                 for s, (dev, ip) in zip(pair, underlays))
    facts = {"vagrant": {"dir": str(vagrant_dir(opts)), "machines": names, "provider": provider(opts),
                         "host_keys": "accepted on first sight (Vagrant turns host-key checking off for "
                                      "its machines), into the run's own known_hosts"}}
    tb = RemoteTestbed(pair, tuple(hosts), opts, backend="vagrant", facts=facts, containers=sc.containers,
                       host_cpus=sc.host_cpus)
    tb.after_teardown.append(lambda: shutil.rmtree(known.parent, ignore_errors=True))
    if opts.vagrant_destroy:
        tb.after_teardown.append(lambda: destroy(opts))
    return tb


def remove_leftovers(opts: Options, inventory_path: str | None, force: bool) -> tuple[list[str], list[str]]:
    """The vagrant backend's `down`: the Vagrantfile's machines destroyed (`vagrant destroy -f`),
    whoever made them."""
    return destroy(opts), []


def destroy(opts: Options) -> list[str]:
    """`vagrant destroy -f` of the Vagrantfile's machines (`down --backend vagrant`), and the
    containers of its machines that Vagrant lost track of."""
    d = vagrant_dir(opts)
    before = vagrant_cli.status(d)
    lost = vagrant_cli.destroy(d)
    return ([f"vagrant machine {n} ({s})" for n, s in before.items() if s != "not_created"]
            + [f"container {c}, which vagrant lost track of" for c in lost])


