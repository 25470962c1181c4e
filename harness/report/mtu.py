"""The report's MTU section and `show`'s MTU lines: the MTU doctor's verdicts as
`run --mtu-check` stored them in run.json (`mtu_check`: `{"ok", "paths"}`, each path as
harness/analysis/mtu.py's judge_all left it).

Nothing here judges a path: the verdict, why, fix and cost are the stored ones, and the
terminal table is analysis/mtu.py's format_table, so the report, `show` and the doctor's
own output say the same of every path.
"""

from __future__ import annotations

from typing import Any, Callable

from harness.analysis import findings as fnd, mtu as verdicts
from harness.core.looks import Looks

CellId = Callable[[int, tuple, str], str]          # render.cell_id: (run index, row id, column) → HTML id
Colour = Callable[[str, Looks], str]               # style.mode_color: handed in, so `show` loads no matplotlib

OK = verdicts.OK
ALL_OK = "each path MTU is the underlay's minus the mode's encapsulation, and the ends' devices agree"


def stored_paths(meta: dict[str, Any]) -> list[dict[str, Any]] | None:
    """run.json's judged paths, in the order the check probed them; None when the run was
    made without the check (or its record holds no judged path list)."""
    check = meta.get("mtu_check")
    if not isinstance(check, dict) or not isinstance(check.get("paths"), list):
        return None
    return [p for p in check["paths"] if isinstance(p, dict) and p.get("verdict") in verdicts.VERDICTS]


def not_ok(paths: list[dict[str, Any]]) -> int:
    return sum(p["verdict"] != OK for p in paths)


def headline(paths: list[dict[str, Any]]) -> str:
    """One line over the paths: all ok, or how many are not."""
    if not paths:
        return "The MTU check recorded no paths."
    bad = not_ok(paths)
    if not bad:
        return f"All {len(paths)} paths ok: {ALL_OK}."
    return f"{bad} of {len(paths)} paths not ok."


def terminal(paths: list[dict[str, Any]]) -> str:
    """`show`'s MTU block: the headline, then analysis/mtu.py's table with its why, cost and fix lines."""
    lines = [f"MTU check (run --mtu-check): {headline(paths)}"]
    if paths:
        lines += ["", verdicts.format_table(paths)]
    return "\n".join(lines)


def _num(v: Any) -> str:
    return "—" if v is None else str(v)


def _cost(p: dict[str, Any]) -> dict[str, str]:
    """The cost cell: the throughput ratio at the configured MTU to that at the MTU that fits,
    the two MTUs below it; a dash where no ratio was measured (a transfer that moved
    nothing: the stored sentence says so under the path). `title`: the stored sentence."""
    r = verdicts.ratio(p)
    configured = p.get("src_dev_mtu") if p.get("src_dev_mtu") is not None else p.get("overlay_mtu")
    if r is not None:
        return {"text": f"{r:.2f}×", "sub": f"at {_num(configured)} vs {_num(p.get('fit_mtu'))}",
                "title": p.get("cost") or ""}
    if p.get("cost"):
        return {"text": "—", "sub": "", "title": p["cost"]}
    return {"text": "—", "sub": "", "title": ""}


def row(p: dict[str, Any], index: int, looks: Looks, cell_id: CellId, colour: Colour) -> dict[str, Any]:
    """One path as the template's row; its verdict cell's id is the one a finding links to."""
    ok = p["verdict"] == OK
    mss = p.get("tcp_mss")
    frags = p.get("fragments")
    if isinstance(frags, dict):                     # as probed, before judging: the counters
        frags = verdicts.fragments(p)
    return {
        "id": cell_id(index, fnd.mtu_path_id(p), fnd.MTU_VERDICT), "ok": ok, "verdict": p["verdict"],
        "mode": p.get("mode"), "color": colour(str(p.get("mode")), looks),
        "placement": p.get("placement"), "path": f"{p.get('src')} → {p.get('dst')}",
        "underlay": _num(p.get("underlay_mtu")), "overlay": _num(p.get("overlay_mtu")),
        "found": _num(p.get("path_mtu")), "expected": _num(p.get("expected_mtu")), "udp": _num(p.get("udp_path_mtu")),
        "mismatch": p.get("path_mtu") != p.get("expected_mtu"),
        "devices": f"{_num(p.get('src_dev_mtu'))} / {_num(p.get('dst_dev_mtu'))}",
        "tcp": _num(p.get("tcp_mtu")), "mss": "" if mss is None else f"MSS {mss}",
        "discovery": _num(p.get("discovery")), "fragments": _num(frags),
        "cost": _cost(p), "fix_mtu": _num(p.get("fix_mtu")) if not ok else "", "fix": p.get("fix") or "",
        "why": p.get("why") or "",
    }


def section(view: Any, cell_id: CellId, colour: Colour) -> dict[str, Any] | None:
    """The MTU section of a run's page (render.Section's builder, with render's `cell_id`
    and style's `mode_color`): None for a run made without the check."""
    paths = stored_paths(view.meta)
    if paths is None:
        return None
    return {"rows": [row(p, view.index, view.looks, cell_id, colour) for p in paths], "n": len(paths),
            "n_bad": not_ok(paths), "headline": headline(paths),
            "udp": any("udp_path_mtu" in p for p in paths)}      # a check that probed with UDP too
