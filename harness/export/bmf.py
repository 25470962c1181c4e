"""Bencher Metric Format (BMF) JSON: {benchmark: {measure: {value, lower_value, upper_value}}}.

The benchmark is the case's name (mode/u…/o…/placement/test/p…), the measure
`<Metric.slug>-<unit>` (e.g. `throughput-gbit-s`, `latency-us`), the value the median
over repeats and the bounds their min and max, in the unit the measure names. Beside each,
where the run has a native reference, `<Metric.slug>-native-ratio`: the median over
native's, the figure that holds on a noisy runner.
"""

from __future__ import annotations

import json
import re

from harness.core.metrics import significant
from harness.export.metrics import CPU_PER_GBIT, Export, Metric

SPELLED = {CPU_PER_GBIT: "cpu-seconds-per-gbit"}     # measures whose unit does not slug well


def measure(m: Metric) -> str:
    """The measure's slug: the metric and its unit, lower-case, hyphenated (Bencher allows 64 characters)."""
    if m.name in SPELLED:
        return SPELLED[m.name]
    unit = re.sub(r"[^a-z0-9]+", "-", m.unit.lower().replace("%", "pct").replace("µ", "u")).strip("-")
    return f"{m.slug}-{unit}"[:64] if unit else m.slug[:64]


def document(export: Export) -> dict:
    out: dict[str, dict] = {}
    for case in export.cases:
        doc: dict[str, dict] = {}
        for v in case.values:
            m = v.metric
            doc[measure(m)] = {"value": significant(v.median * m.scale),
                               "lower_value": significant(v.lo * m.scale),
                               "upper_value": significant(v.hi * m.scale)}
            if v.ratio is not None:
                doc[f"{m.slug}-native-ratio"[:64]] = {"value": v.ratio}
        out[case.name] = doc
    return out


def bmf(export: Export, **_: object) -> str:
    return json.dumps(document(export), indent=2) + "\n"
