"""Prometheus text exposition (0.0.4) and OpenMetrics 1.0 text: one gauge family per metric,
one sample per case, the case's configuration as labels, values in base units.

Each family is `overlaybench_<Metric.family>` (the median over repeats, in the base unit:
seconds, bytes per second, ratios; a latency's family names its trip: `latency_seconds` is
one way, `rtt_seconds` a round trip); `overlaybench_native_ratio{metric="…"}` holds each
median over native's at the same underlay MTU, test and streams, with `distinct="true"` where
the repeats are separated from native's and `"false"` where they overlap (the table's ≈).
Every sample carries the run id as `run`, so two runs pushed to one Pushgateway stay apart.
Samples carry no timestamp, so a Pushgateway accepts them. OpenMetrics adds `# UNIT` and
the closing `# EOF`.
"""

from __future__ import annotations

from typing import Iterable

from harness.core.metrics import significant
from harness.export.metrics import Export, Metric, labels

PREFIX = "overlaybench_"


def _escape_label(v: str) -> str:
    return v.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _escape_help(v: str) -> str:
    return v.replace("\\", "\\\\").replace("\n", "\\n")


def _labels(d: dict[str, str]) -> str:
    return "{" + ",".join(f'{k}="{_escape_label(v)}"' for k, v in d.items()) + "}"


def _num(x: float) -> str:
    return repr(significant(float(x)))


def _family(name: str, help_: str, unit: str, openmetrics: bool,
            samples: Iterable[tuple[dict[str, str], float]]) -> list[str]:
    lines = [f"# HELP {name} {_escape_help(help_)}", f"# TYPE {name} gauge"]
    if openmetrics and unit:
        lines.insert(1, f"# UNIT {name} {unit}")
    lines += [f"{name}{_labels(lab)} {_num(v)}" for lab, v in samples]
    return lines


def _text(export: Export, openmetrics: bool) -> str:
    families: dict[str, tuple[Metric, list[tuple[dict[str, str], float]]]] = {}
    ratios: list[tuple[dict[str, str], float]] = []
    for case in export.cases:
        lab = {"run": export.run_id, **labels(case)}
        for v in case.values:
            m = v.metric
            families.setdefault(m.family, (m, []))[1].append((lab, v.median * m.base_scale))
            if v.ratio is not None:
                extra = {} if v.distinct is None else {"distinct": "true" if v.distinct else "false"}
                ratios.append(({**lab, "metric": m.name, **extra}, v.ratio))
    lines: list[str] = []
    for family, (m, samples) in families.items():
        lines += _family(PREFIX + family, f"{m.title}: median over repeats of one case", m.base_unit,
                         openmetrics, samples)
    if ratios:
        lines += _family(PREFIX + "native_ratio", "median of the case over native's at the same underlay MTU, "
                         "test and streams (native host-host where the placement has none)", "ratio",
                         openmetrics, ratios)
    if openmetrics:
        lines.append("# EOF")
    return "\n".join(lines) + "\n"


def prometheus(export: Export, **_: object) -> str:
    return _text(export, openmetrics=False)


def openmetrics(export: Export, **_: object) -> str:
    return _text(export, openmetrics=True)
