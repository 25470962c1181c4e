"""The MTU doctor's probes of one path, from a sender host to an address on the far host:
the device MTUs (`ip route get` → `ip link`), the path MTU by DF-ping bisection and the
same for UDP (tools/mtu.py, tools/mtu_udp.py), discovery (a DF packet one byte over it,
the sender's learnt path MTUs forgotten first: an ICMP "fragmentation needed", a local
refusal, or nothing: a black hole), and one short TCP transfer (iperf3 -t DURATION) with
the hosts' fragment counters read around it and a few full-size non-DF pings beside it.
Every function takes the hosts it runs on; run/mtu.py puts them together per path.
"""

from __future__ import annotations

import json
from typing import Callable

from harness.core.errors import HarnessError
from harness.hosts.base import Host
from harness.run.procs import PORTS, wait_listening
from harness.tools import iperf3 as iperf3_tool, mtu as probes, mtu_udp

PORT = PORTS["iperf3"][0]


def ports(tool_ports: dict | None) -> tuple[int, int]:
    """(the transfer's TCP port, the UDP probe's): iperf3's and the probe's own, or where a
    testbed moves the tools' ports (--port-base on a cluster: Testbed.tool_ports) iperf3's
    first port and the one after it, which a pair measured alone leaves free."""
    moved = (tool_ports or {}).get("iperf3")
    return (moved[0], moved[0] + 1) if moved else (PORT, mtu_udp.PORT)


def device_mtu(host: Host, addr: str) -> int | None:
    """The MTU `host` sends to `addr` at: the device's the route leaves by, or the route's
    own where it sets a lower one (a learnt path MTU is not counted)."""
    route = host.run(["ip", "-o", "route", "get", addr], check=False, timeout=10)
    dev = probes.parse_route_dev(route.stdout) if route.ok else None
    if dev is None:
        return None
    link = host.run(["ip", "-o", "link", "show", "dev", dev], check=False, timeout=10)
    mtu = probes.parse_link_mtu(link.stdout) if link.ok else None
    own = probes.parse_route_mtu(route.stdout)
    return min(m for m in (mtu, own) if m is not None) if (mtu or own) else None


def forget_path_mtus(host: Host) -> None:
    """Drop what `host` learnt of path MTUs (the route exceptions' generation moves on)."""
    host.run(["ip", "route", "flush", "cache"], check=False, timeout=10)


def ping_prober(host: Host, addr: str) -> Callable[[int], probes.Probe]:
    def probe(size: int) -> probes.Probe:
        done = host.run(probes.df_ping_argv(addr, size), check=False, timeout=10)
        return probes.parse_df_ping(size, done.stdout, done.stderr, done.returncode)
    return probe


def udp_prober(host: Host, addr: str, port: int = mtu_udp.PORT) -> Callable[[int], probes.Probe]:
    def probe(size: int) -> probes.Probe:
        done = host.run(mtu_udp.sender_argv(addr, size, port=port), input=mtu_udp.SENDER, check=False, timeout=10)
        return mtu_udp.parse_udp_probe(size, done.stdout, done.stderr, done.returncode)
    return probe


def bisected(host: Host, probe: Callable[[int], probes.Probe], high: int,
             hint: int | None = None) -> tuple[probes.Bisection, probes.Probe | None]:
    """The bisection up to `high` with `probe` (`hint`: tools/mtu.py's bisect), then
    discovery one byte over the path MTU (None where nothing crossed or the path carries
    the largest IP packet); learnt path MTUs forgotten before each and after."""
    forget_path_mtus(host)
    try:
        b = probes.bisect(probe, probes.MIN_MTU, max(high, probes.MIN_MTU), hint=hint)
        found = None
        if b.mtu is not None and b.mtu < probes.MAX_MTU:
            forget_path_mtus(host)
            found = probe(b.mtu + 1)
    finally:
        forget_path_mtus(host)
    return b, found


def path_mtu(host: Host, addr: str, high: int) -> dict:
    """DF-ping bisection from `host` to `addr` up to `high`, then discovery one byte over it."""
    try:
        b, d = bisected(host, ping_prober(host, addr), high)
    except probes.ProbeError as e:
        raise HarnessError(f"{host.name}: DF probe to {addr}: {e}") from None
    return {"path_mtu": b.mtu, "probes": len(b.probes), "discovery": d.outcome if d else None,
            "discovery_mtu": d.mtu if d else None}


def udp_path_mtu(client: Host, server: Host, addr: str, high: int, hint: int | None = None,
                 port: int = mtu_udp.PORT) -> dict:
    """The largest DF UDP datagram `server` receives from `client` at `addr` (bisected up to
    `high`, the DF ping's path MTU tried first as `hint`: where UDP agrees with it, two
    probes) and its discovery one byte over; `udp_error` instead where the probe cannot run
    (no python3 on a host, a receiver that does not start, an ICMP error other than
    "fragmentation needed")."""
    for h in (client, server):
        if h.which("python3") is None:
            return {"udp_path_mtu": None, "udp_error": f"{h.name}: no python3 for the UDP probe"}
    rcv = server.start(mtu_udp.receiver_argv(addr, port))
    try:
        why = wait_listening(server, port, rcv, proto="udp")
        if why:
            return {"udp_path_mtu": None, "udp_error": f"{server.name}: UDP probe receiver: {why}"}
        try:
            b, d = bisected(client, udp_prober(client, addr, port), high, hint)
        except probes.ProbeError as e:
            return {"udp_path_mtu": None, "udp_error": f"{client.name}: UDP probe to {addr}: {e}"}
    finally:
        rcv.stop()
    return {"udp_path_mtu": b.mtu, "udp_probes": len(b.probes), "udp_discovery": d.outcome if d else None}


def counters(hosts: list[Host]) -> dict[str, dict[str, int]]:
    out = {}
    for h in hosts:
        done = h.run(probes.nstat_argv(), check=False, timeout=10)
        out[h.name] = probes.parse_nstat(done.stdout) if done.ok else {}
    return out


def transfer(client: Host, server: Host, addr: str, duration: float, full: int | None,
             watch: list[Host], port: int = PORT) -> dict:
    """One TCP transfer of `duration` s (and three non-DF pings of `full` bytes beside it),
    the fragment counters of `watch` read around both."""
    srv = server.start(["iperf3", "-s", "-1", "-p", str(port)])
    out: dict = {"tcp_mss": None, "tcp_mtu": None, "throughput_bps": None, "fragments": {}}
    try:
        why = wait_listening(server, port, srv)
        if why:
            out["transfer_error"] = why
            return out
        before = counters(watch)
        secs = max(1, round(duration))
        done = client.run(["iperf3", "-c", addr, "-p", str(port), "-t", str(secs), "-J"], check=False,
                          timeout=secs + 15)
        if full:
            client.run(["ping", "-M", "dont", "-s", str(full - probes.IP_ICMP_HEADERS), "-c", "3", "-i", "0.2",
                        "-W", "1", "-n", addr], check=False, timeout=10)
        after = counters(watch)
        total = {k: 0 for k in probes.FRAG_COUNTERS}
        for name in after:
            for k, v in probes.frag_delta(before.get(name, {}), after[name]).items():
                total[k] += v
        out["fragments"] = total
        doc, err = iperf3_tool.load(done.stdout, done.stderr, done.returncode)
        if doc is None:
            try:
                doc = json.loads(done.stdout)      # a transfer that stalled still says its MSS
            except (json.JSONDecodeError, ValueError):
                doc = {}
            out["transfer_error"] = err
        mss = probes.parse_mss(doc if isinstance(doc, dict) else {})
        out.update(tcp_mss=mss, tcp_mtu=probes.mss_mtu(mss) if mss else None)
        if not err:
            out["throughput_bps"] = float(doc["end"]["sum_received"]["bits_per_second"])
    finally:
        srv.stop()
    return out
