"""A run made with `--mtu-check`: the MTU doctor's paths as harness/run/mtu.py's `measure`
returns them (the lab's figures of the faults docs/mtu.md shows), judged by
harness/analysis/mtu.py's judge_all and stored in run.json's `mtu_check` as
`overlaybench run --mtu-check` stores them.

At underlay 1500: native host to host is ok; fastdp deployed at 1500 is too big (frag-needed
comes back, 12 fragments, its throughput against that at 1450 measured); the sleeve at 1500
is a black hole (nothing comes back, its transfer at 1500 moved nothing).
"""

from __future__ import annotations

import pathlib
from typing import Any

from report_fixtures.synth import make_run

from harness.analysis import mtu as verdicts

FRAGS = ("IpFragCreates", "IpFragOKs", "IpFragFails", "IpReasmReqds", "IpReasmOKs", "IpReasmFails")


def _path(mode: str, datapath: str, overhead: int, placement: str, src: str, dst: str, overlay: int, *,
          path_mtu: int, discovery: str, mss: int | None, thr: float | None, frags: int = 0,
          fit: tuple[int, float] | None = None, error: str | None = None, raised: bool = False) -> dict[str, Any]:
    """One direction, its keys in the order measure_paths, path_mtu, transfer and measure add them."""
    row: dict[str, Any] = {"mode": mode, "datapath": datapath, "overhead": overhead, "placement": placement,
                           "src": src, "dst": dst, "overlay_mtu": overlay, "src_dev_mtu": overlay,
                           "dst_dev_mtu": overlay, "path_mtu": path_mtu, "probes": 11, "discovery": discovery,
                           "discovery_mtu": path_mtu if discovery == "frag-needed" else None,
                           "tcp_mss": mss, "tcp_mtu": mss + 52 if mss else None, "throughput_bps": thr,
                           "fragments": {k: (frags if k == "IpFragCreates" else 0) for k in FRAGS}}
    if error:
        row["transfer_error"] = error
    row.update(underlay_mtu=1500, underlay_path_mtu=1500, requested="auto" if mode == "native" else overlay,
               deployed_over_raised_underlay=raised)
    if fit:
        row.update(fit_mtu=fit[0], fit_throughput_bps=fit[1])
    return row


def raw_paths(faults: bool = True, udp: bool = False) -> list[dict[str, Any]]:
    """The doctor's rows: native ok both ways, and with `faults` fastdp too big and the
    sleeve a black hole; without, fastdp at the MTU that fits (ok). `udp`: each path also
    probed with DF UDP datagrams, the far end receiving as large as the DF echo crossed."""
    rows = _raw_paths(faults)
    if udp:
        for r in rows:
            r.update(udp_path_mtu=r["path_mtu"], udp_probes=11)
    return rows


def _raw_paths(faults: bool) -> list[dict[str, Any]]:
    cc = "container-container"
    rows = [_path("native", "native", 0, "host-host", a, b, 1500, path_mtu=1500, discovery="local", mss=1448,
                  thr=19.0e9) for a, b in (("h0", "h1"), ("h1", "h0"))]
    if not faults:
        return rows + [_path("fastdp", "fastdp", 50, cc, a, b, 1450, path_mtu=1450, discovery="local", mss=1398,
                             thr=15.2e9) for a, b in (("h0", "h1"), ("h1", "h0"))]
    rows += [_path("fastdp", "fastdp", 50, cc, "h0", "h1", 1500, path_mtu=1450, discovery="frag-needed", mss=1448,
                   thr=15.6e9, frags=12, fit=(1450, 15.2e9), raised=True),
             _path("fastdp", "fastdp", 50, cc, "h1", "h0", 1500, path_mtu=1450, discovery="frag-needed", mss=1398,
                   thr=15.9e9, frags=12, fit=(1450, 15.1e9), raised=True)]
    rows += [_path("sleeve", "sleeve", 50, cc, a, b, 1500, path_mtu=1450, discovery="lost", mss=1448, thr=None,
                   fit=(1450, 9.6e9), error="iperf3: the transfer timed out") for a, b in (("h0", "h1"), ("h1", "h0"))]
    return rows


def mtu_check(faults: bool = True, udp: bool = False) -> dict[str, Any]:
    """run.json's `mtu_check`, as harness/cli/mtu.py's check returns it."""
    judged = verdicts.judge_all(raw_paths(faults, udp))
    return {"ok": verdicts.all_ok(judged), "paths": judged}


def make_mtu_run(root: pathlib.Path | str, faults: bool = True, udp: bool = False, **kw: Any) -> pathlib.Path:
    """A small run (native, fastdp, sleeve at underlay 1500) whose run.json carries the check."""
    kw.setdefault("modes", ["native", "fastdp", "sleeve"])
    kw.setdefault("underlay_mtus", [1500])
    kw.setdefault("tests", ["iperf3.tcp", "qperf.tcp_lat"])
    return make_run(root, meta={"mtu_check": mtu_check(faults, udp)}, **kw)
