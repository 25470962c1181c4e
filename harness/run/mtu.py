"""`overlaybench mtu`: every mode's paths probed for their MTU, both ways, on a testbed the
session opens as it does for `run` (harness/run/session.py's `opened`): the lab, real hosts
over SSH or Vagrant, or a Kubernetes cluster (its pod network, mode cni, probed as found
between pods, its encapsulation read from the datapath's fingerprint; the nodes' own path
MTU from hostNetwork pods, so native is always measured beside it).

Per deployment of a mode at an overlay MTU, per placement and direction (src → dst), the
probes of run/mtu_probe.py: device MTUs, the path MTU by DF ping and by DF UDP, discovery,
and a short TCP transfer with the fragments it made. Where the configured MTU is not the
one that fits, the mode is deployed once more at that one and the transfer repeated: the
cost as a ratio, in the same run. The underlay's own path MTU is bisected the same way,
host to host, before any mode.

An overlay MTU that does not fit its underlay is deployed over an underlay raised for the
moment where the testbed may change it (the lab; a remote host whose inventory says
manage_underlay); where it may not, the mode is deployed as given, and what the kernel
refuses then, like any mode that does not deploy, is a row of its own (`error`) while the
other modes are still probed. The result is a list of plain dicts that analysis/mtu.py judges.
"""

from __future__ import annotations

import logging
import sys
from typing import Callable

from harness.bed import Testbed
from harness.core.errors import CommandError, HarnessError, SshError
from harness.hosts.base import Host
from harness.modes.base import Datapath, Mode
from harness.run.endpoints import endpoints
from harness.run.mtu_probe import device_mtu, path_mtu, ports, transfer, udp_path_mtu
from harness.tools import mtu as probes

log = logging.getLogger(__name__)
# What a deployment's paths are probed at: the overlay's placements (native: the underlay, host to host).
OVERLAY_PLACEMENT = "container-container"


def check_mtu(value: int, what: str) -> int:
    if not probes.MIN_MTU <= value <= probes.MAX_MTU:
        raise HarnessError(f"{what} {value}: outside {probes.MIN_MTU}–{probes.MAX_MTU}")
    return value


def overlay_mtu(mode: Mode, underlay: int, requested: int | str, overhead: int) -> int:
    """The MTU to deploy `mode` at: "auto" is the underlay minus its encapsulation; a number
    is taken as given, even one that does not fit (that is what the doctor is for)."""
    if requested == "auto":
        return underlay - overhead
    return check_mtu(int(requested), f"overlay MTU for mode {mode.name}:")


def check_modes(modes: list[Mode]) -> None:
    """A mode must state its encapsulation (a cluster's, cni, is found once the testbed is
    up): without it there is no MTU it should have."""
    for m in modes:
        stated = "overhead" in vars(m) or any("overhead" in vars(k) for k in type(m).__mro__ if k is not Mode)
        if m.kind != "native" and not stated:
            raise HarnessError(f"mode {m.name} states no encapsulation overhead, so its right MTU is unknown "
                               f"(give [modes.{m.name}] overhead)")


def directions(tb: Testbed, pair_list: list[tuple[str, str]] | None) -> list[tuple[str, str]]:
    """Every pair both ways, each once, in the order given."""
    pl = pair_list or [(tb.sides[0].name, tb.sides[1].name)]
    return list(dict.fromkeys(d for a, b in pl for d in ((a, b), (b, a))))


def watched(tb: Testbed) -> list[Host]:
    return [h for s in tb.sides for h in (s.host, s.container, s.neighbour) if h is not None]


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


def deploy(mode: Mode, tb: Testbed, mtu: int, underlay: int, rate: str | None,
           overhead: int) -> tuple[Datapath, bool]:
    """The mode deployed at `mtu`. A device the kernel will not make bigger than its
    underlay allows (VXLAN bound to its device) is made over an underlay raised for the
    moment, then the underlay set back under it: the state of a NIC reset to a smaller MTU
    beneath a running overlay, which is what an MTU that does not fit is. (True: so made.)
    Where the testbed refuses to raise it (a real NIC it may not change), the mode is
    deployed as given; what fails then says both why."""
    if mtu + overhead <= underlay:
        return mode.deploy(tb, mtu), False
    try:
        tb.set_underlay(mtu + overhead, rate)
    except SshError:
        raise
    except HarnessError as e:
        refused = str(e)
        tb.set_underlay(underlay, rate)             # whatever a host did raise, back where it was
        try:
            return mode.deploy(tb, mtu), False
        except SshError:
            raise
        except HarnessError as e2:
            raise HarnessError(f"{e2} (the underlay could not be raised beneath it: {refused})") from e2
    try:
        dp = mode.deploy(tb, mtu)
    finally:
        tb.set_underlay(underlay, rate)
    return dp, True


def placements_of(mode: Mode, asked: tuple[str, ...]) -> list[str]:
    if mode.kind == "native":
        return ["host-host"]
    ps = [p for p in asked if p != "host-host" and p in mode.placements]
    return ps or [OVERLAY_PLACEMENT]


def path_row(mode: Mode, placement: str, src: str, dst: str, overlay: int, datapath: str | None,
             overhead: int | None) -> dict:
    return {"mode": mode.name, "datapath": datapath, "overhead": overhead, "placement": placement,
            "src": src, "dst": dst, "overlay_mtu": overlay}


def measure_paths(tb: Testbed, dp: Datapath, mode: Mode, placements: list[str], dirs: list[tuple[str, str]],
                  duration: float, overhead: int) -> list[dict]:
    """Every path of a deployment; a path whose probe cannot run is a row with its `error`."""
    rows = []
    tcp_port, udp_port = ports(getattr(tb, "tool_ports", None))
    for placement in placements:
        for src, dst in dirs:
            c, s = endpoints(tb, dp, placement, src, dst)
            row = path_row(mode, placement, src, dst, dp.overlay_mtu, dp.kind, overhead)
            if (dp.info.get("fingerprint") or {}).get("cni"):
                row["cni"] = dp.info["fingerprint"]["cni"]          # where its fix goes
            try:
                row.update(src_dev_mtu=device_mtu(c.host, s.addr), dst_dev_mtu=device_mtu(s.host, c.addr))
                high = row["src_dev_mtu"] or dp.overlay_mtu
                row.update(path_mtu(c.host, s.addr, high))
                row.update(udp_path_mtu(c.host, s.host, s.addr, high, row["path_mtu"], udp_port))
                row.update(transfer(c.host, s.host, s.addr, duration, row["src_dev_mtu"], watched(tb), tcp_port))
            except SshError:
                raise
            except HarnessError as e:
                row["error"] = str(e)
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
                out[(placement, src, dst)] = transfer(c.host, s.host, s.addr, duration, None, [],
                                                      ports(getattr(tb, "tool_ports", None))[0])["throughput_bps"]
        return out
    finally:
        mode.teardown(tb, dp)


def deployment(tb: Testbed, mode: Mode, mtu: int, underlay: int, rate: str | None, ps: list[str],
               dirs: list[tuple[str, str]], duration: float,
               after_deploy: Callable[[Testbed, Datapath], None] | None, overhead: int) -> list[dict]:
    """The paths of one deployment of `mode` at `mtu`; one that does not deploy (a kernel
    that refuses the MTU, a missing feature) gives each path a row with its `error`."""
    try:
        dp, raised = deploy(mode, tb, mtu, underlay, rate, overhead)
    except SshError:
        raise
    except HarnessError as e:
        log.info("mode %s at overlay MTU %s did not deploy: %s", mode.name, mtu, e)     # the row says it
        return error_rows(mode, ps, dirs, mtu, overhead, f"did not deploy at overlay MTU {mtu}: {e}")
    try:
        if after_deploy is not None:
            after_deploy(tb, dp)
        got = measure_paths(tb, dp, mode, ps, dirs, duration, overhead)
    finally:
        try:
            mode.teardown(tb, dp)
        except CommandError as e:
            log.warning("teardown %s: %s", mode.name, e)
    for r in got:
        r["deployed_over_raised_underlay"] = raised
    return got


def error_rows(mode: Mode, ps: list[str], dirs: list[tuple[str, str]], mtu: int | None, overhead: int | None,
               why: str) -> list[dict]:
    return [{**path_row(mode, p, src, dst, mtu, None, overhead), "error": why, "deployed_over_raised_underlay": False}
            for p in ps for src, dst in dirs]


# modes whose MTU is not the doctor's to choose: the underlay's own (native), a cluster's pod
# network as its CNI set it (cni: found, never redeployed, so no cost at the MTU that fits)
AS_FOUND = ("native", "cni")


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
        ps = placements_of(mode, placements)
        try:
            oh = mode.overhead_on(tb)
        except HarnessError as e:
            rows += [{**r, "underlay_mtu": underlay, "underlay_path_mtu": under.get((r["src"], r["dst"])),
                      "requested": "auto"} for r in error_rows(mode, ps, dirs, None, None, str(e))]
            continue
        for requested in dict.fromkeys(overlay_requests if mode.kind not in AS_FOUND else ["auto"]):
            mtu = underlay if mode.kind == "native" else overlay_mtu(mode, underlay, requested, oh)
            got = deployment(tb, mode, mtu, underlay, rate, ps, dirs, duration, after_deploy, oh)
            for r in got:
                r.update(underlay_mtu=underlay, underlay_path_mtu=under.get((r["src"], r["dst"])),
                         requested=requested)
            fits = [u - oh for u in (r["underlay_path_mtu"] for r in got) if u]
            fit = min(fits) if fits else None
            devs = {m for r in got for m in (r.get("src_dev_mtu"), r.get("dst_dev_mtu")) if m}
            if fit and mode.kind not in AS_FOUND and devs and devs != {fit} and fit >= probes.MIN_MTU:
                try:
                    thr = fit_throughputs(tb, mode, fit, ps, dirs, duration)
                except SshError:
                    raise
                except HarnessError as e:
                    log.warning("mode %s at the MTU that fits, %s, did not deploy: %s", mode.name, fit, e)
                    thr = {}
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
    if any(m.kind == "cni" for m in modes):
        if [o for o in overlays if o != "auto"]:
            raise HarnessError(f"--overlay-mtu {','.join(map(str, overlays))}: a cluster's pod MTU is its CNI's "
                               f"to set; the doctor probes it as found (leave --overlay-mtu out)")
        if "native" not in sc.modes:            # the nodes' path MTU, from their hostNetwork pods
            sc = dataclasses.replace(sc, modes=("native", *sc.modes))
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
