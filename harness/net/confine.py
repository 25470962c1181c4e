"""What a testbed lets a host forward: only its own bridge <-> tunnel traffic.

`net.ipv4.conf.<dev>.forwarding=1` on the overlay bridge (and on an L3 mode's tunnel
device) lets the kernel forward anything that arrives on that device to any interface
it has a route to: the kernel checks only the input device. So each side of a testbed
gets an nftables table of its own, `inet <P>-h<i>`, made before any forwarding is turned
on, whose forward chain

    accepts  bridge -> bridge (bridged frames under br_netfilter), bridge <-> a tunnel
             device in its set `tunnels` (what route_l3 adds: a TUN, a WireGuard device),
             bridge <-> an underlay in its set `gateways` for addresses in `gateway_nets`
             (a mode that routes over the underlay unencapsulated: Flannel's host-gw)
    drops    anything else forwarded from, or towards, the bridge or those devices, and
             anything forwarded from a gateway in `confined_gateways` (an underlay whose
             forwarding the mode turned on) to anywhere but the bridge

and touches nothing else (policy accept: the host's other forwarding is not the
testbed's). Bridged modes (fastdp's VXLAN device, the sleeve's TAP) are bridge ports: the
bridge carries their frames without the IP forward path. Teardown deletes the table;
`down` deletes a killed run's by name (harness/testbeds/remote_down.py).
"""

from __future__ import annotations

import re

from harness.core.errors import HarnessError
from harness.hosts.base import Host

FAMILY = "inet"
TABLE_RE = re.compile(r"^(ob[0-9a-f]{4})-h[0-9]$")
INSTALL_HINT = "apt-get install -y nftables"

RULES = """
table inet {table} {{
  set tunnels {{ type ifname; }}
  set gateways {{ type ifname; }}
  set gateway_nets {{ type ipv4_addr; flags interval; }}
  set confined_gateways {{ type ifname; }}
  chain forward {{
    type filter hook forward priority filter; policy accept;
    iifname "{br}" oifname "{br}" accept
    iifname "{br}" oifname @tunnels accept
    iifname @tunnels oifname "{br}" accept
    iifname "{br}" oifname @gateways ip daddr @gateway_nets accept
    iifname @gateways oifname "{br}" ip daddr @gateway_nets accept
    iifname "{br}" counter drop
    iifname @tunnels counter drop
    oifname "{br}" counter drop
    oifname @tunnels counter drop
    iifname @confined_gateways counter drop
  }}
}}
"""


def table_name(prefix: str, index: int) -> str:
    """The table of side `index` of testbed `prefix` ("ob12ab-h0")."""
    return f"{prefix}-h{index}"


def confine(host: Host, table: str, bridge: str) -> None:
    """Make the side's table (replacing one of that name, a killed run's), before the
    bridge forwards anything. Raises HarnessError where nft cannot make it: a testbed
    never runs unconfined."""
    if not TABLE_RE.match(table):
        raise HarnessError(f"{table!r} is not a testbed's nftables table")
    script = f"table inet {table}\ndelete table inet {table}\n" + RULES.format(table=table, br=bridge)
    done = host.run(["nft", "-f", "-"], input=script, check=False, timeout=30)
    if not done.ok:
        why = (done.stderr.strip() or f"exit {done.returncode}").splitlines()[-1]
        raise HarnessError(f"{host.name}: cannot make the nftables table {table} that confines the "
                           f"testbed's forwarding ({why}); nft comes with nftables: {INSTALL_HINT}")


def allow_tunnel(host: Host, table: str, dev: str) -> None:
    """Let `dev` (an L3 tunnel device) forward to and from the bridge, and nowhere else."""
    host.run(["nft", "add", "element", FAMILY, table, "tunnels", f'{{ "{dev}" }}'])


def forget_tunnel(host: Host, table: str, dev: str) -> None:
    """Undo allow_tunnel; never raises for what is already gone."""
    host.run(["nft", "delete", "element", FAMILY, table, "tunnels", f'{{ "{dev}" }}'], check=False)


def allow_gateway(host: Host, table: str, dev: str, nets: list[str], only_bridge: bool) -> None:
    """Let the underlay `dev` forward to and from the bridge for destinations in `nets`;
    with `only_bridge` (its forwarding was off until the mode turned it on), nothing else
    arriving there is forwarded."""
    host.run(["nft", "add", "element", FAMILY, table, "gateway_nets", f"{{ {', '.join(nets)} }}"])
    host.run(["nft", "add", "element", FAMILY, table, "gateways", f'{{ "{dev}" }}'])
    if only_bridge:
        host.run(["nft", "add", "element", FAMILY, table, "confined_gateways", f'{{ "{dev}" }}'])


def forget_gateway(host: Host, table: str, dev: str, nets: list[str]) -> None:
    """Undo allow_gateway; never raises for what is already gone."""
    for s, elem in (("confined_gateways", f'"{dev}"'), ("gateways", f'"{dev}"'), ("gateway_nets", ", ".join(nets))):
        host.run(["nft", "delete", "element", FAMILY, table, s, f"{{ {elem} }}"], check=False)


def unconfine(host: Host, table: str) -> None:
    """Delete the side's table; never raises for one already gone."""
    if TABLE_RE.match(table):
        host.run(["nft", "delete", "table", FAMILY, table], check=False)


def tables(host: Host) -> list[str]:
    """The testbed tables on a host (inet family, named like table_name)."""
    done = host.run(["nft", "list", "tables", FAMILY], check=False, timeout=30)
    out = []
    for ln in done.stdout.splitlines():
        f = ln.split()
        if len(f) == 3 and f[0] == "table" and f[1] == FAMILY and TABLE_RE.match(f[2]):
            out.append(f[2])
    return out
