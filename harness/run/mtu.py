"""`overlaybench mtu`: every mode's paths probed for their MTU, both ways, on a testbed the
session opens as it does for `run` (harness/run/session.py's `opened`).

Per deployment of a mode at an overlay MTU, per placement and direction (src → dst):
the ends' device MTUs (`ip route get` → `ip link`), the path MTU by DF-ping bisection
(tools/mtu.py), discovery (a DF packet one byte over it, the sender's learnt path MTU
forgotten first: an ICMP "fragmentation needed", a local refusal, or nothing: a black
hole), and one short TCP transfer (iperf3 -t DURATION) with the hosts' fragment counters
read around it and a few full-size non-DF pings beside it: the MSS the connection
negotiated, its throughput, what fragmented. Where the configured MTU is not the one
that fits, the mode is deployed once more at that one and the transfer repeated: the cost
as a ratio, in the same run. The underlay's own path MTU is bisected the same way, host
to host, before any mode. The result is a list of plain dicts that analysis/mtu.py judges.
"""

from __future__ import annotations

import json
import logging
import sys
from typing import Callable

from harness.bed import Testbed
from harness.core.errors import CommandError, HarnessError
from harness.hosts.base import Host
from harness.modes.base import Datapath, Mode
from harness.run.endpoints import endpoints
from harness.run.procs import PORTS, wait_listening
from harness.tools import iperf3 as iperf3_tool, mtu as probes

log = logging.getLogger(__name__)

PORT = PORTS["iperf3"][0]
# What a deployment's paths are probed at: the overlay's placements (native: the underlay, host to host).
OVERLAY_PLACEMENT = "container-container"


def check_mtu(value: int, what: str) -> int:
    if not probes.MIN_MTU <= value <= probes.MAX_MTU:
        raise HarnessError(f"{what} {value}: outside {probes.MIN_MTU}–{probes.MAX_MTU}")
    return value


def overlay_mtu(mode: Mode, underlay: int, requested: int | str) -> int:
    """The MTU to deploy `mode` at: "auto" is the underlay minus its encapsulation; a number
    is taken as given, even one that does not fit (that is what the doctor is for)."""
    if requested == "auto":
        return underlay - mode.overhead
    return check_mtu(int(requested), f"overlay MTU for mode {mode.name}:")


def check_modes(modes: list[Mode]) -> None:
    """A mode must state its encapsulation: without it there is no MTU it should have."""
    for m in modes:
        stated = "overhead" in vars(m) or any("overhead" in vars(k) for k in type(m).__mro__ if k is not Mode)
        if m.kind == "cni":
            raise HarnessError(f"mode {m.name}: a cluster's encapsulation is found, not stated, so its right MTU "
                               f"is unknown to the doctor")
        if m.kind != "native" and not stated:
            raise HarnessError(f"mode {m.name} states no encapsulation overhead, so its right MTU is unknown "
                               f"(give [modes.{m.name}] overhead)")


def device_mtu(host: Host, addr: str) -> int | None:
    """The MTU of the device `host` reaches `addr` through."""
    route = host.run(["ip", "-o", "route", "get", addr], check=False, timeout=10)
    dev = probes.parse_route_dev(route.stdout) if route.ok else None
    if dev is None:
        return None
    link = host.run(["ip", "-o", "link", "show", "dev", dev], check=False, timeout=10)
    return probes.parse_link_mtu(link.stdout) if link.ok else None


def forget_path_mtus(host: Host) -> None:
    """Drop what `host` learnt of path MTUs (the route exceptions' generation moves on)."""
    host.run(["ip", "route", "flush", "cache"], check=False, timeout=10)


def prober(host: Host, addr: str) -> Callable[[int], probes.Probe]:
    def probe(size: int) -> probes.Probe:
        done = host.run(probes.df_ping_argv(addr, size), check=False, timeout=10)
        return probes.parse_df_ping(size, done.stdout, done.stderr, done.returncode)
    return probe


def path_mtu(host: Host, addr: str, high: int) -> dict:
    """Bisection from `host` to `addr` up to `high`, then discovery one byte over it."""
    forget_path_mtus(host)
    probe = prober(host, addr)
    try:
        b = probes.bisect(probe, probes.MIN_MTU, max(high, probes.MIN_MTU))
    except probes.ProbeError as e:
        raise HarnessError(f"{host.name}: DF probe to {addr}: {e}") from None
    out = {"path_mtu": b.mtu, "probes": len(b.probes), "discovery": None, "discovery_mtu": None}
    if b.mtu is not None and b.mtu < probes.MAX_MTU:
        forget_path_mtus(host)
        d = probe(b.mtu + 1)
        out.update(discovery=d.outcome, discovery_mtu=d.mtu)
        forget_path_mtus(host)
    return out


def counters(hosts: list[Host]) -> dict[str, dict[str, int]]:
    out = {}
    for h in hosts:
        done = h.run(probes.nstat_argv(), check=False, timeout=10)
        out[h.name] = probes.parse_nstat(done.stdout) if done.ok else {}
    return out


def transfer(client: Host, server: Host, addr: str, duration: float, full: int | None,
             watch: list[Host]) -> dict:
    """One TCP transfer of `duration` s (and three non-DF pings of `full` bytes beside it),
    the fragment counters of `watch` read around both."""
    srv = server.start(["iperf3", "-s", "-1", "-p", str(PORT)])
    out: dict = {"tcp_mss": None, "tcp_mtu": None, "throughput_bps": None, "fragments": {}}
    try:
        why = wait_listening(server, PORT, srv)
        if why:
            out["transfer_error"] = why
            return out
        before = counters(watch)
        secs = max(1, round(duration))
        done = client.run(["iperf3", "-c", addr, "-p", str(PORT), "-t", str(secs), "-J"], check=False,
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


def directions(tb: Testbed, pair_list: list[tuple[str, str]] | None) -> list[tuple[str, str]]:
    """Every pair both ways, each once, in the order given."""
    pl = pair_list or [(tb.sides[0].name, tb.sides[1].name)]
    return list(dict.fromkeys(d for a, b in pl for d in ((a, b), (b, a))))


def watched(tb: Testbed) -> list[Host]:
    return [h for s in tb.sides for h in (s.host, s.container) if h is not None]


def underlay_paths(tb: Testbed, dirs: list[tuple[str, str]], native: Mode, underlay: int) -> dict:
    """The underlay's path MTU, host to host, per direction."""
    dp = native.deploy(tb, underlay)
    try:
        out = {}
        for src, dst in dirs:
            c, s = endpoints(tb, dp, "host-host", src, dst)
            out[(src, dst)] = path_mtu(c.host, s.addr, device_mtu(c.host, s.addr) or underlay)["path_mtu"]
        return out
    finally:
        native.teardown(tb, dp)


def deploy(mode: Mode, tb: Testbed, mtu: int, underlay: int, rate: str | None) -> tuple[Datapath, bool]:
    """The mode deployed at `mtu`. A device the kernel will not make bigger than its
    underlay allows (VXLAN bound to its device) is made over an underlay raised for the
    moment, then the underlay set back under it: the state of a NIC reset to a smaller MTU
    beneath a running overlay, which is what an MTU that does not fit is. (True: so made.)"""
    if mtu + mode.overhead <= underlay:
        return mode.deploy(tb, mtu), False
    try:
        tb.set_underlay(mtu + mode.overhead, rate)
        dp = mode.deploy(tb, mtu)
    finally:
        tb.set_underlay(underlay, rate)
    return dp, True


def placements_of(mode: Mode, asked: tuple[str, ...]) -> list[str]:
    if mode.kind == "native":
        return ["host-host"]
    ps = [p for p in asked if p != "host-host" and p in mode.placements]
    return ps or [OVERLAY_PLACEMENT]


def measure_paths(tb: Testbed, dp: Datapath, mode: Mode, placements: list[str], dirs: list[tuple[str, str]],
                  duration: float) -> list[dict]:
    rows = []
    for placement in placements:
        for src, dst in dirs:
            c, s = endpoints(tb, dp, placement, src, dst)
            row = {"mode": mode.name, "datapath": dp.kind, "overhead": mode.overhead, "placement": placement,
                   "src": src, "dst": dst, "overlay_mtu": dp.overlay_mtu,
                   "src_dev_mtu": device_mtu(c.host, s.addr), "dst_dev_mtu": device_mtu(s.host, c.addr)}
            row.update(path_mtu(c.host, s.addr, row["src_dev_mtu"] or dp.overlay_mtu))
            row.update(transfer(c.host, s.host, s.addr, duration, row["src_dev_mtu"], watched(tb)))
            rows.append(row)
    return rows


def fit_throughputs(tb: Testbed, mode: Mode, fit: int, placements: list[str], dirs: list[tuple[str, str]],
                    duration: float) -> dict:
    """Throughput per (placement, src, dst) with the mode deployed at `fit`."""
    dp = mode.deploy(tb, fit)
    try:
        out = {}
        for placement in placements:
            for src, dst in dirs:
                c, s = endpoints(tb, dp, placement, src, dst)
                out[(placement, src, dst)] = transfer(c.host, s.host, s.addr, duration, None, [])["throughput_bps"]
        return out
    finally:
        mode.teardown(tb, dp)


def measure(tb: Testbed, modes: list[Mode], overlay_requests: list[int | str], placements: tuple[str, ...],
            pair_list: list[tuple[str, str]] | None, underlay: int, rate: str | None = None,
            duration: float = 1.0, after_deploy: Callable[[Testbed, Datapath], None] | None = None,
            native: Mode | None = None) -> list[dict]:
    """Every mode's paths at every overlay MTU asked, on a built testbed at `underlay`.
    `after_deploy(tb, dp)`: called once a deployment is up (a fault put on the path)."""
    check_modes(modes)
    dirs = directions(tb, pair_list)
    from harness import modes as registry
    native = native or registry.get("native")
    under = underlay_paths(tb, dirs, native, underlay)
    rows: list[dict] = []
    for mode in modes:
        for requested in dict.fromkeys(overlay_requests if mode.kind != "native" else ["auto"]):
            mtu = underlay if mode.kind == "native" else overlay_mtu(mode, underlay, requested)
            dp, raised = deploy(mode, tb, mtu, underlay, rate)
            try:
                if after_deploy is not None:
                    after_deploy(tb, dp)
                ps = placements_of(mode, placements)
                got = measure_paths(tb, dp, mode, ps, dirs, duration)
            finally:
                try:
                    mode.teardown(tb, dp)
                except CommandError as e:
                    log.warning("teardown %s: %s", mode.name, e)
            for r in got:
                r.update(underlay_mtu=underlay, underlay_path_mtu=under.get((r["src"], r["dst"])),
                         requested=requested, deployed_over_raised_underlay=raised)
            fits = [u - mode.overhead for u in (r["underlay_path_mtu"] for r in got) if u]
            fit = min(fits) if fits else None
            devs = {m for r in got for m in (r["src_dev_mtu"], r["dst_dev_mtu"]) if m}
            if fit and mode.kind != "native" and devs != {fit} and fit >= probes.MIN_MTU:
                thr = fit_throughputs(tb, mode, fit, ps, dirs, duration)
                for r in got:
                    r.update(fit_mtu=fit, fit_throughput_bps=thr.get((r["placement"], r["src"], r["dst"])))
            rows += got
    return rows


def doctor(scenario_path: str | None, overrides: dict, options, settings, quiet: bool = False,
           duration: float = 1.0) -> list[dict]:
    """The scenario's modes, pairs and placements probed on the testbed a run would open
    (harness/run/session.py's `opened`), at each underlay MTU asked; the lab's normal teardown."""
    import dataclasses

    from harness import results
    from harness.run import scenario as scen, session
    sc = scen.from_command_line(scenario_path, overrides)
    for u in sc.underlay_mtus:
        if u != "auto":
            check_mtu(int(u), "underlay MTU")
    overlays = sc.overlay_mtus
    if isinstance(overlays, dict):
        raise HarnessError("mtu: overlay MTUs per underlay MTU are a run's; give --overlay-mtu auto|N,..")
    for o in overlays:
        if o != "auto":
            check_mtu(int(o), "overlay MTU")
    modes = [sc.mode(m) for m in sc.modes]
    check_modes(modes)
    for m in modes:
        m.local_check()
    opts = dataclasses.replace(options, run_id=results.new_run_id())
    rows: list[dict] = []
    with session.opened(sc, opts, settings, quiet) as (sc, tb, pair_list, _idle):
        first = True
        for u in sc.underlay_mtus:
            if first:
                tb.build(int(u), sc.rate)
                for m in modes:
                    m.check(tb)
                first = False
            else:
                tb.set_underlay(int(u), sc.rate)
            if not quiet:
                print(f"mtu: underlay {u} on the {tb.backend} backend: {', '.join(sc.modes)}", file=sys.stderr)
            rows += measure(tb, modes, list(overlays), sc.placements, pair_list, int(u), sc.rate, duration)
    return rows
