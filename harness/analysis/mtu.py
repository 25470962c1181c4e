"""The MTU doctor's verdicts: what a path measured, against what it should be.

Pure: every path comes in as the plain dict run/mtu.py measured (JSON's own form, so a
saved `--format json` is judged the same way) and goes out with its verdict, why, what
it costs and the fix. The order of the checks is the order of harm:

- `error`: the mode did not deploy at that MTU (the kernel refused it, a feature is
  missing) or the path could not be probed: nothing else is known of it;
- `asymmetric`: the two directions' path MTUs differ, or the two ends' devices disagree
  (a packet the sender may send, the receiver's device drops);
- `black hole`: a DF packet over the path MTU vanished, no "fragmentation needed" came
  back: every connection whose segments are bigger stalls;
- `udp differs`: the largest DF UDP datagram the far end receives is not the largest DF
  echo that crosses: the path treats ICMP apart, so a ping-based check misjudges it;
- `too big`: the ends send more than the path carries: it fragments (counted by the
  hosts), or it is refused and rediscovered by every new flow;
- `too small`: the path could carry more (an underlay of 9000 under an overlay of 1450):
  each full packet wastes the difference;
- `ok`: the path MTU is what the underlay minus the mode's encapsulation makes it, and
  the ends' devices say so.
"""

from __future__ import annotations

OK, TOO_BIG, BLACK_HOLE, TOO_SMALL, ASYMMETRIC = "ok", "too big", "black hole", "too small", "asymmetric"
ERROR, UDP_DIFFERS = "error", "udp differs"
VERDICTS = (OK, TOO_BIG, BLACK_HOLE, TOO_SMALL, ASYMMETRIC, ERROR, UDP_DIFFERS)
TCP_IP = 52                   # a full segment's IPv4, TCP and timestamp bytes


def expected_mtu(path: dict) -> int | None:
    """The MTU the path should have: the underlay's measured path MTU minus the mode's
    encapsulation (no underlay measurement: the configured underlay)."""
    under = path.get("underlay_path_mtu") or path.get("underlay_mtu")
    return None if under is None else under - (path.get("overhead") or 0)


def fragments(path: dict) -> int:
    """Fragments the hosts created around the path's transfer and full-size pings."""
    f = path.get("fragments") or {}
    return int(f.get("IpFragCreates", 0))


def ratio(path: dict) -> float | None:
    """Throughput at the configured MTU over that at the MTU that fits (None unmeasured)."""
    a, b = path.get("throughput_bps"), path.get("fit_throughput_bps")
    return a / b if a and b else None


def _cost(path: dict) -> str:
    r = ratio(path)
    if r is None:
        if path.get("fit_throughput_bps") and not path.get("throughput_bps"):
            return (f"the transfer at {path.get('src_dev_mtu')} moved nothing measurable "
                    f"({path.get('transfer_error') or 'no throughput'}), against "
                    f"{path['fit_throughput_bps'] / 1e9:.2f} Gbit/s at {path.get('fit_mtu')}")
        return ""
    return (f"{r:.2f}× the throughput of {path.get('fit_mtu')} ({path['throughput_bps'] / 1e9:.2f} against "
            f"{path['fit_throughput_bps'] / 1e9:.2f} Gbit/s)")


# where each CNI takes its pod MTU from (a cluster's fingerprint names the CNI: the row's `cni`)
CNI_MTU_SETTINGS = {
    "flannel": "flannel's CNI config (cni-conf.json), the delegate's \"mtu\", or none there so that flanneld's "
               "own (its interface's MTU less the backend's) applies",
    "cilium": "Cilium's MTU (Helm value MTU, cilium-agent --mtu)",
    "calico": "the Installation's spec.calicoNetwork.mtu (the operator), or calico-node's FELIX_VXLANMTU, "
              "FELIX_IPINIPMTU or FELIX_WIREGUARDMTU",
    "aws-vpc-cni": "the aws-node DaemonSet's AWS_VPC_ENI_MTU",
}


def fix_text(path: dict, mtu: int) -> str:
    """Where to set `mtu` for the path's mode."""
    mode = path.get("mode", "?")
    if mode == "native":
        return f"set the hosts' underlay device MTU to {mtu} (--underlay-mtu {mtu})"
    if mode == "cni":
        where = CNI_MTU_SETTINGS.get(path.get("cni") or "", "the CNI's own MTU setting")
        return f"set the pod network's MTU to {mtu}: {where}; pods made afterwards get it"
    if mode.startswith("flannel"):
        return f"set flannel's MTU to {mtu} (--overlay-mtu {mtu}; flannel's own net-conf.json MTU)"
    return f"set the overlay MTU to {mtu}: --overlay-mtu {mtu} (a scenario's [matrix] overlay_mtu, or [modes.{mode}] overlay_mtu)"


def judge(path: dict, reverse: dict | None = None) -> dict:
    """The verdict of one direction of a path ({verdict, why, fix, fix_mtu, cost}); `reverse`
    is the other direction's measurement, where there is one."""
    src, dst = path.get("src_dev_mtu"), path.get("dst_dev_mtu")
    measured = path.get("path_mtu")
    want = expected_mtu(path)
    fit = min(x for x in (want, measured) if x is not None) if (want or measured) else None
    frags = fragments(path)
    out = {"expected_mtu": want, "fragments": frags, "cost": _cost(path), "fix_mtu": None, "fix": ""}

    def say(verdict, why, mtu=None):
        out.update(verdict=verdict, why=why)
        if mtu is not None:
            out.update(fix_mtu=mtu, fix=fix_text(path, mtu))
        return out

    if path.get("error"):
        over = path.get("overlay_mtu")
        out["fragments"] = None                     # nothing was counted
        return say(ERROR, path["error"], want if want and over and over > want else None)
    if measured is None:
        return say(BLACK_HOLE, "not even a packet of the smallest size crossed with DF set", fit)
    back = reverse.get("path_mtu") if reverse else None
    if src is not None and dst is not None and src != dst:
        agree = want if want else min(src, dst)
        out.update(verdict=ASYMMETRIC, fix_mtu=agree,
                   why=f"the ends' devices disagree: {src} at the sender, {dst} at the receiver (path MTU {measured})",
                   fix=f"make both ends agree: {fix_text(path, agree)}, on both hosts")
        return out
    if back is not None and back != measured:
        agree = min(measured, back)
        out.update(verdict=ASYMMETRIC, fix_mtu=agree, why=f"the directions differ: {measured} this way, {back} back",
                   fix=f"make both directions agree: {fix_text(path, agree)}, on both hosts")
        return out
    configured = src if src is not None else path.get("overlay_mtu")
    if path.get("discovery") == "lost" and configured is not None and configured > measured:
        return say(BLACK_HOLE, f"a DF packet of {measured + 1} bytes vanished: no 'fragmentation needed' came "
                               f"back, so flows with {configured}-byte packets stall", fit)
    udp = path.get("udp_path_mtu")
    if "udp_probes" in path and not path.get("udp_error") and udp != measured:
        agree = min(x for x in (udp, measured, want) if x) if (udp or want) else None
        said = f"{udp} bytes" if udp else "not even the smallest datagram"
        out.update(verdict=UDP_DIFFERS, fix_mtu=agree,
                   why=f"the largest DF UDP datagram the far end received: {said}; the largest DF echo that "
                       f"crossed: {measured}: the path treats ICMP apart, so a ping-based check "
                       f"{'overstates' if (udp or 0) < measured else 'understates'} what UDP (and a tunnel over it) "
                       f"gets through",
                   fix=(f"find what treats UDP and ICMP apart on the path (a filter, a policer), or "
                        f"{fix_text(path, agree)}" if agree else "find what drops UDP on the path"))
        return out
    if configured is not None and want is not None and configured > want:
        how = (f"{frags} fragments created (full-size non-DF packets and the TCP transfer)" if frags else
               f"refused and rediscovered (path MTU {measured}, ICMP frag-needed)" if measured < configured else
               "carried only by fragmenting the encapsulation")
        return say(TOO_BIG, f"the ends send {configured} bytes, the underlay carries {want} after "
                            f"{path.get('overhead') or 0} bytes of encapsulation: {how}", fit)
    if frags:
        return say(TOO_BIG, f"{frags} fragments created at path MTU {measured}", fit)
    if configured is not None and want is not None and configured < want:
        waste = want - configured
        share = waste / (want - TCP_IP)
        return say(TOO_SMALL, f"{waste} bytes a packet unused: the underlay could carry {want}; each full "
                              f"segment carries {share:.0%} less than it could", want)
    return say(OK, f"path MTU {measured} = underlay {want + (path.get('overhead') or 0) if want else '?'} − "
                   f"{path.get('overhead') or 0} bytes of encapsulation")


def judge_all(paths: list[dict]) -> list[dict]:
    """Every path with its verdict merged in; the two directions of a path judge each other."""
    by = {(p.get("mode"), p.get("placement"), p.get("src"), p.get("dst")): p for p in paths}
    out = []
    for p in paths:
        rev = by.get((p.get("mode"), p.get("placement"), p.get("dst"), p.get("src")))
        out.append({**p, **judge(p, rev)})
    return out


def all_ok(judged: list[dict]) -> bool:
    return all(p["verdict"] == OK for p in judged)


COLUMNS = (("mode", "mode"), ("placement", "placement"), ("path", "path"), ("dev", "devices"),
           ("expected_mtu", "expected"), ("path_mtu", "path MTU"), ("udp_path_mtu", "UDP"), ("tcp_mtu", "TCP"),
           ("discovery", "discovery"), ("fragments", "frags"), ("verdict", "verdict"))


def _cell(p: dict, key: str) -> str:
    if key == "path":
        return f"{p.get('src')}→{p.get('dst')}"
    if key == "dev":
        return f"{p.get('src_dev_mtu', '-')}/{p.get('dst_dev_mtu', '-')}"
    v = p.get(key)
    return "-" if v is None else str(v)


def format_table(judged: list[dict]) -> str:
    """The verdicts as a terminal table, each not-ok path followed by its why, cost and fix."""
    rows = [[_cell(p, k) for k, _ in COLUMNS] for p in judged]
    heads = [h for _, h in COLUMNS]
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(heads)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(heads, widths)).rstrip()]
    notes = []
    for p, r in zip(judged, rows):
        lines.append("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip())
        if p["verdict"] != OK:
            where = f"{p.get('mode')} {p.get('placement')} {p.get('src')}→{p.get('dst')}"
            notes.append(f"{where}: {p['verdict']}: {p['why']}"
                         + (f"; measured: {p['cost']}" if p.get("cost") else "")
                         + (f". Fix: {p['fix']}" if p.get("fix") else ""))
    return "\n".join(lines + ([""] + notes if notes else []))
