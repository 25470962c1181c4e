"""Bencher Metric Format (BMF) JSON: {benchmark: {measure: {value, lower_value, upper_value}}}.

The benchmark is the case's name (mode/u…/o…/placement/test/p…), the measure
`<Metric.slug>-<unit>` (e.g. `throughput-gbit-s`, `latency-us`), the value the median
over repeats and the bounds their min and max, in the unit the measure names.
"""

from __future__ import annotations

import json
import re

from harness.export.metrics import CPU_PER_GBPS, Export, Metric

SPELLED = {CPU_PER_GBPS: "cpu-pct-per-gbit-s"}     # measures whose unit does not slug well


def measure(m: Metric) -> str:
    """The measure's slug: the metric and its unit, lower-case, hyphenated (Bencher allows 64 characters)."""
    if m.name in SPELLED:
        return SPELLED[m.name]
    unit = re.sub(r"[^a-z0-9]+", "-", m.unit.lower().replace("%", "pct")).strip("-")
    return f"{m.slug}-{unit}"[:64] if unit else m.slug[:64]


def document(export: Export) -> dict:
    out: dict[str, dict] = {}
    for case in export.cases:
        out[case.name] = {measure(v.metric): {"value": v.median * v.metric.scale,
                                              "lower_value": v.lo * v.metric.scale,
                                              "upper_value": v.hi * v.metric.scale}
                          for v in case.values}
    return out


def bmf(export: Export, **_: object) -> str:
    return json.dumps(document(export), indent=2) + "\n"
