"""A run's facts for the report: run.json's keys under labels, the command as typed, the
planned configurations as a table, and what the measurements themselves say.
"""

from __future__ import annotations

import datetime as _dt
import pathlib
import shlex
from typing import Any

import pandas as pd

from harness.analysis import stats
from harness.core.placements import rank as placement_rank
from harness.results import run_looks

# run.json keys shown first, with their labels; everything else follows under label(key).
KNOWN_FACTS = [
    ("run_id", "Run"), ("status", "Status"), ("start", "Started"), ("end", "Finished"), ("command", "Command"),
    ("git", "Commit"), ("git_commit", "Commit"), ("commit", "Commit"), ("hostname", "Host"), ("host", "Host"),
    ("machine", "Machine"), ("kernel", "Kernel"), ("cpu", "CPU"), ("tools", "Tool versions"),
    ("tool_versions", "Tool versions"), ("offloads", "Offloads"), ("underlay", "Underlay"),
    ("rate", "Underlay rate"), ("scenario", "Scenario"), ("cpu_accounting", "CPU accounting"),
    ("cpu_idle", "CPU idle states"), ("sleeve", "Sleeve"), ("sleeve_source", "Sleeve source hash"),
    ("backend", "Backend"), ("testbed", "Testbed"), ("hosts", "Hosts"), ("deployments", "Deployments"),
    ("sysctls", "Sysctls"), ("cases_planned", "Cases planned"), ("schema_version", "Schema version"),
]
# Left out of the facts: shown elsewhere (the planned configurations get a table of their own).
SHOWN_ELSEWHERE = {"configs_planned", "mtu_check"}     # mtu_check: the MTU section
# Words a label spells in capitals.
_ACRONYMS = {"cpu": "CPU", "mtu": "MTU", "id": "ID", "ip": "IP", "tcp": "TCP", "udp": "UDP", "nic": "NIC",
             "qos": "QoS", "pm": "PM", "ssh": "SSH", "json": "JSON", "url": "URL", "vxlan": "VXLAN"}
PLANNED_COLUMNS = ["Mode", "Underlay MTU", "Overlay MTU", "Placement", "Test", "Streams", "Pair"]

# ethtool -k names → short labels for the offload summary.
_OFFLOAD_SHORT = {"tcp-segmentation-offload": "tso", "generic-segmentation-offload": "gso",
                  "generic-receive-offload": "gro", "tx-checksumming": "tx-csum", "rx-checksumming": "rx-csum",
                  "scatter-gather": "sg", "large-receive-offload": "lro", "tx-udp_tnl-segmentation": "udp-tnl",
                  "tx-udp-segmentation": "uso", "rx-udp-gro-forwarding": "udp-gro-fwd"}


def label(key: str) -> str:
    """A run.json key as a label: "cpu_idle" → "CPU idle"."""
    words = [_ACRONYMS.get(w.lower(), w) for w in str(key).replace("-", "_").split("_") if w]
    if not words:
        return str(key)
    first = words[0]
    return " ".join([first if first.isupper() or first in _ACRONYMS.values() else first.capitalize(), *words[1:]])


def command_line(argv: Any) -> str | None:
    """The recorded argv as the user typed it: `overlaybench run …`, whichever way the CLI was started
    (the console script, `python -m harness.cli`, or an interpreter path in front)."""
    if not isinstance(argv, (list, tuple)) or not argv:
        return str(argv) if argv else None
    args = [str(a) for a in argv]
    if "-m" in args[:3] and "harness.cli" in args[:4]:
        args = args[args.index("harness.cli") + 1:]
    else:
        p = pathlib.PurePosixPath(args[0])
        if p.name not in ("overlaybench", "__main__.py", "cli.py"):
            return shlex.join(args)                     # not the CLI's own argv: as recorded
        args = args[1:]
    return shlex.join(["overlaybench", *args])


def planned(meta: dict[str, Any]) -> tuple[list[str], list[list[Any]]]:
    """run.json's configs_planned as (columns, rows) of PLANNED_COLUMNS; the pair column only
    where some configuration has a pair."""
    rows = []
    for c in meta.get("configs_planned") or ():
        if isinstance(c, (list, tuple)):
            row = list(c) + [None] * (len(PLANNED_COLUMNS) - len(c))
            rows.append(["—" if v is None else v for v in row[:len(PLANNED_COLUMNS)]])
    if all(r[-1] == "—" for r in rows):
        return PLANNED_COLUMNS[:-1], [r[:-1] for r in rows]
    return PLANNED_COLUMNS, rows


def _fingerprint(fp: dict[str, Any]) -> str:
    """The cni mode's fingerprint of the cluster's datapath in one line: its summary, then
    the fields the summary leaves out."""
    extra = [f"{k.replace('_', '-')} {fp[k]}" for k in ("routing", "encryption", "dataplane", "kube_proxy", "mtu")
             if fp.get(k) not in (None, "")]
    return f"{fp['summary']} ({', '.join(extra)})" if extra else str(fp["summary"])


def _datapath_facts(datapaths: list[dict[str, Any]]) -> tuple[dict[str, str], dict[str, str]]:
    """run.json's per-deployment list → one line per deployment and one per device's offloads."""
    deployments: dict[str, str] = {}
    offloads: dict[str, str] = {}
    for d in datapaths:
        name = f"{d.get('mode')} · u{d.get('underlay_mtu')} o{d.get('overlay_mtu')}"
        info = d.get("info") or {}
        parts = [f"via {d.get('datapath')}"]
        for k, v in info.items():
            if isinstance(v, dict) and "summary" in v:
                parts.append(f"{k} {_fingerprint(v)}")
            elif v not in (None, "", [], {}):
                parts.append(f"{k} {' '.join(map(str, v)) if isinstance(v, list) else v}")
        deployments.setdefault(name, " · ".join(parts))
        for host, devs in (d.get("offloads") or {}).items():
            for dev, feats in (devs or {}).items():
                if not isinstance(feats, dict):
                    continue
                on = [_OFFLOAD_SHORT.get(k, k) for k, v in feats.items() if str(v).startswith("on")]
                key = f"{d.get('mode')} u{d.get('underlay_mtu')} {host} {dev}"
                offloads.setdefault(key, feats.get("error") or ("on: " + ", ".join(on) if on else "all off"))
    return deployments, offloads


def facts(meta: dict[str, Any]) -> list[tuple[str, Any]]:
    """(label, value) for every fact of run.json worth showing, known keys first."""
    meta = dict(meta)
    if isinstance(meta.get("datapaths"), list):
        deployments, offloads = _datapath_facts(meta.pop("datapaths"))
        meta["deployments"], meta["offloads"] = deployments, offloads
    if "command" in meta:
        meta["command"] = command_line(meta["command"])
    out, used = [], set(SHOWN_ELSEWHERE)
    for key, name in KNOWN_FACTS:
        if key in meta and key not in used and meta[key] not in (None, "", {}, []):
            v = meta[key]
            if key == "git" and isinstance(v, dict):
                c = str(v.get("commit") or "")
                v = (c[:12] + (" (dirty)" if v.get("dirty") else "")) if c else v
            out.append((name, v))
        used.add(key)
    for key, v in meta.items():
        if key not in used and v not in (None, "", {}, []):
            out.append((label(key), v))
    return out


def duration(meta: dict[str, Any]) -> str | None:
    try:
        a = _dt.datetime.fromisoformat(str(meta["start"]))
        b = _dt.datetime.fromisoformat(str(meta["end"]))
    except (KeyError, ValueError, TypeError):
        return None
    secs = int((b - a).total_seconds())
    if secs < 0:
        return None
    h, rem = divmod(secs, 3600)
    return f"{h}h {rem // 60:02d}m" if h else f"{rem // 60}m {rem % 60:02d}s"


def derived(df: pd.DataFrame, meta: dict[str, Any]) -> list[tuple[str, str]]:
    """Facts read off the measurements themselves (its modes in the run's order: run.json's looks)."""
    looks = run_looks(meta)
    out = []
    d = duration(meta)
    if d:
        out.append(("Duration", d))
    if df.empty:
        return out

    def uniq(col: str) -> list:
        if col not in df.columns:
            return []
        vals = {stats.key_value(v) for v in df[col] if stats.key_value(v) is not None}
        return sorted(vals, key=lambda v: (looks.rank(v) if col == "mode"
                                           else placement_rank(v) if col == "placement" else (0, v)))

    mtus = uniq("underlay_mtu")
    if mtus:
        out.append(("Underlay MTU", ", ".join(map(str, mtus))))
    rates = uniq("rate")
    out.append(("Underlay rate", ", ".join(map(str, rates)) if rates else "uncapped"))
    for col, name in (("mode", "Modes"), ("datapath", "Datapaths"), ("placement", "Placements"),
                      ("test", "Tests")):
        v = uniq(col)
        if v:
            out.append((name, ", ".join(map(str, v))))
    reps = uniq("repeat")
    if reps:
        out.append(("Repeats", str(len(reps))))
    return out
