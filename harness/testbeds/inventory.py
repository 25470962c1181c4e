"""Inventories: the real hosts the ssh backend measures between (TOML).

    [defaults]                      # optional: applies to every host that does not say
    user = "root"
    key_file = "~/.ssh/id_ed25519"

    [[hosts]]
    name = "a"                      # required, unique
    address = "203.0.113.10"        # required, unique (with port): where SSH reaches it
    port = 22
    user = "root"                   # root, or a user with passwordless sudo (sudo = true)
    sudo = false
    key_file = "~/.ssh/id_ed25519"  # default: the SSH agent, ~/.ssh/config, ~/.ssh/id_*
    known_hosts = "~/bench/known_hosts"  # default: ~/.ssh/known_hosts and /etc/ssh/ssh_known_hosts
    underlay_interface = "auto"     # the NIC facing the peer; auto: the route to the peer's
    underlay_address = "auto"       # this host's address on it; auto: that route's source
    manage_underlay = false         # true lets overlaybench set the NIC's MTU and a tbf cap
                                    # (restored afterwards); false: never touched
    etcd_endpoints = "http://198.51.100.7:2379"  # an etcd the flannel modes use (the first
                                    # host's); default: one started for each deployment
    flannel_network = "198.19.64.0/18"  # the flannel modes' network (the first host's): in
                                    # 198.18.0.0/15, clear of the lab's ranges; this is the default
    cpus = "2-3"                    # the CPUs every process the harness starts here runs on
                                    # (taskset -c: the tools, the data path's daemons); default:
                                    # unpinned (testbeds/cpusets.py)

Checked with the same field tables as scenarios (harness/core/schema.py): every error names
the file and the key, with "did you mean". The same [[hosts]] may sit inline in a
scenario's [testbed] table.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import os
import pathlib
import re
import tomllib
from typing import Any

from harness.core import schema
from harness.core.errors import HarnessError, ScenarioError, read_text
from harness.modes.flannel_config import check_network
from harness.testbeds.cpusets import cpu_list

NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,31}$")


@dataclasses.dataclass(frozen=True)
class HostSpec:
    name: str
    address: str
    port: int = 22
    user: str | None = None
    sudo: bool = False
    key_file: str | None = None
    known_hosts: str | None = None
    underlay_interface: str = "auto"
    underlay_address: str = "auto"
    manage_underlay: bool = False
    etcd_endpoints: str | None = None
    flannel_network: str | None = None
    cpus: str | None = None         # a CPU list as taskset reads it; None: unpinned

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def _name(v: str) -> str:
    if not NAME_RE.match(v):
        raise ValueError(f"{v!r}: letters, digits, '.', '_' and '-', at most 32")
    return v


def _address(v: str) -> str:
    if not v.strip() or any(c.isspace() for c in v):
        raise ValueError(f"{v!r}: expected a host name or an IP address")
    return v


def _auto_or_ip(v: str) -> str:
    if v == "auto":
        return v
    try:
        ipaddress.IPv4Address(v)
    except ValueError:
        raise ValueError(f"{v!r}: expected \"auto\" or an IPv4 address") from None
    return v


def _ifname(v: str) -> str:
    if v != "auto" and not re.match(r"^[A-Za-z0-9_.:@-]{1,15}$", v):
        raise ValueError(f"{v!r}: expected \"auto\" or an interface name (at most 15 characters)")
    return v


def _etcd_endpoints(v: str) -> str:
    for url in v.split(","):
        if not re.match(r"^https?://[^\s/,]+:[0-9]{1,5}/?$", url.strip()):
            raise ValueError(f"{url.strip()!r}: expected http://HOST:PORT (comma-separated for several)")
    return v


def _key_file(v: str) -> str:
    p = pathlib.Path(os.path.expanduser(v))
    if not p.is_file():
        raise ValueError(f"{v}: no such file")
    mode = p.stat().st_mode & 0o777
    if mode & 0o077:
        raise ValueError(f"{v}: permissions {mode:o} are too open (other users can read it): chmod 600 {v}")
    return str(p)


F = schema.Field
HOST_FIELDS: dict[str, schema.Field] = {
    "name": F(str, _name),
    "address": F(str, _address),
    "port": F(int, schema.int_range(1, 65535)),
    "user": F(str, schema.non_empty),
    "sudo": F(bool),
    "key_file": F(str, _key_file),
    "known_hosts": F(str, lambda v: str(pathlib.Path(os.path.expanduser(v)))),
    "underlay_interface": F(str, _ifname),
    "underlay_address": F(str, _auto_or_ip),
    "manage_underlay": F(bool),
    "etcd_endpoints": F(str, _etcd_endpoints),
    "flannel_network": F(str, check_network),
    "cpus": F(str, cpu_list),
}
DEFAULT_FIELDS = {k: f for k, f in HOST_FIELDS.items() if k not in ("name", "address")}
REQUIRED = ("name", "address")


def from_doc(doc: dict[str, Any], source: str) -> list[HostSpec]:
    """Hosts from a parsed inventory document ({"defaults": {…}, "hosts": [{…}, …]})."""
    got = schema.check(doc, {"defaults": DEFAULT_FIELDS}, source, arrays={"hosts": HOST_FIELDS})
    hosts = got.get("hosts") or []
    if not hosts:
        raise schema.error(source, "[[hosts]]", "no hosts: an inventory lists at least two [[hosts]]")
    defaults = got.get("defaults", {})
    out: list[HostSpec] = []
    names: dict[str, int] = {}
    addrs: dict[tuple[str, int], str] = {}
    for i, h in enumerate(hosts, 1):
        where = f"[[hosts]] #{i}"
        missing = [k for k in REQUIRED if k not in h]
        if missing:
            raise schema.error(source, where, f"missing {' and '.join(missing)} (every host needs "
                               f"{' and '.join(REQUIRED)})")
        spec = HostSpec(**{**defaults, **h})
        if spec.name in names:
            raise schema.error(source, f"{where} name", f"{spec.name!r} is already host #{names[spec.name]}")
        names[spec.name] = i
        if (spec.address, spec.port) in addrs:
            raise schema.error(source, f"{where} address",
                               f"{spec.address}:{spec.port} is already host {addrs[spec.address, spec.port]!r}")
        addrs[spec.address, spec.port] = spec.name
        out.append(spec)
    under = [h.underlay_address for h in out if h.underlay_address != "auto"]
    dup = {a for a in under if under.count(a) > 1}
    if dup:
        raise schema.error(source, "[[hosts]] underlay_address", f"{', '.join(sorted(dup))} given to more than one host")
    return out


def load(path: str | pathlib.Path) -> list[HostSpec]:
    p = pathlib.Path(path)
    try:
        text = read_text(p, "inventory ")
    except HarnessError as e:
        raise ScenarioError(str(e)) from e
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise ScenarioError(f"{p}: not valid TOML ({e})") from e
    return from_doc(doc, str(p))


def pick(hosts: list[HostSpec], pair: tuple[str, ...] | list[str] | None, source: str) -> tuple[HostSpec, ...]:
    """The hosts the testbed is made of: `pair` by name (two or more), ["all"] for every
    host of the inventory, or the first two."""
    if not pair or list(pair) == ["all"]:
        if len(hosts) < 2:
            raise ScenarioError(f"{source}: [[hosts]]: {len(hosts)} host(s); a pair needs two")
        return tuple(hosts) if pair else (hosts[0], hosts[1])
    by_name = {h.name: h for h in hosts}
    chosen = []
    for name in pair:
        if name not in by_name:
            raise ScenarioError(f"{source}: --pair: no host {name!r}{schema.suggest(name, by_name)}; "
                                f"known: {', '.join(by_name)}")
        chosen.append(by_name[name])
    if len(chosen) < 2 or len({h.name for h in chosen}) != len(chosen):
        raise ScenarioError(f"{source}: --pair: expected two or more different host names (or all), "
                            f"got {','.join(pair)}")
    return tuple(chosen)
