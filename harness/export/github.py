"""github-action-benchmark's custom JSON: a list of {name, unit, value, range, extra}, one
file for `tool: customBiggerIsBetter` (throughput, packet rate, fairness) and one for
`tool: customSmallerIsBetter` (latency, jitter, loss, retransmits, CPU).

`name` is "<case> <metric title>", `value` the median over repeats in `unit`, `range`
the min–max of the repeats, `extra` the repeats, datapath, % of native, the verdict against
native and run id. Beside each, where the run has a native reference, "<case> <metric
title> ratio to native" (unit "× native"): the figure that holds on a noisy runner. Each
metric's file is the one its direction in the metric table names.
"""

from __future__ import annotations

import json

from harness.core.metrics import significant
from harness.export.metrics import Export


def _g(x: float) -> str:
    return f"{x:.4g}"


def entries(export: Export, bigger: bool) -> list[dict]:
    out = []
    for case in export.cases:
        for v in case.values:
            m = v.metric
            if m.higher_is_better != bigger:
                continue
            extra = [f"{v.n} repeats", f"datapath {case.config.get('datapath')}"]
            if v.pct_of_native is not None:
                extra.append(f"{v.pct_of_native:.1f} % of native" + (f" ({v.verdict})" if v.verdict else ""))
            extra.append(f"run {export.run_id}")
            out.append({"name": f"{case.name} {m.title}", "unit": m.unit, "value": significant(v.median * m.scale),
                        "range": f"{_g(v.lo * m.scale)}–{_g(v.hi * m.scale)}", "extra": "\n".join(extra)})
            if v.ratio is not None:
                out.append({"name": f"{case.name} {m.title} ratio to native", "unit": "× native",
                            "value": v.ratio, "extra": "\n".join(extra)})
    return out


def bigger(export: Export, **_: object) -> str:
    return json.dumps(entries(export, True), indent=2, ensure_ascii=False) + "\n"


def smaller(export: Export, **_: object) -> str:
    return json.dumps(entries(export, False), indent=2, ensure_ascii=False) + "\n"
