"""Exports of a run into the formats CI and monitoring already read, one module per format.

FORMATS is the registry, as data: a format's name, what it is, and the module and function
that turn a run (`metrics.load`: its cases, each metric's median and spread over repeats)
into text. The modules are imported when a format is written, so the command line lists
the formats without loading pandas. Readers of results only: nothing here reaches a host,
a testbed or a run.
"""

from __future__ import annotations

import dataclasses
import importlib
import pathlib
from typing import Any


@dataclasses.dataclass(frozen=True)
class Format:
    name: str
    what: str
    module: str          # harness.export.<module>
    function: str        # (Export, **options) → text


FORMATS: dict[str, Format] = {f.name: f for f in [
    Format("openmetrics", "OpenMetrics 1.0 text: a gauge per metric, a sample per case, base units",
           "openmetrics", "openmetrics"),
    Format("prometheus", "Prometheus text format 0.0.4, as a Pushgateway takes it: the same samples",
           "openmetrics", "prometheus"),
    Format("bmf", "Bencher Metric Format JSON: the median, with the repeats' min and max as bounds", "bmf", "bmf"),
    Format("github-bigger", "github-action-benchmark customBiggerIsBetter JSON: throughput, packet rate",
           "github", "bigger"),
    Format("github-smaller", "github-action-benchmark customSmallerIsBetter JSON: latency, loss, CPU",
           "github", "smaller"),
    Format("opensearch", "NDJSON for the OpenSearch/Elasticsearch _bulk API, with k8s-netperf's field names "
           "where they mean the same", "opensearch", "ndjson"),
]}


def export(run: pathlib.Path | str, fmt: str, **options: Any) -> str:
    """The run (a directory, or an id under results/) as text in format `fmt`."""
    from harness.core.errors import HarnessError
    from harness.export.metrics import load

    if fmt not in FORMATS:
        raise HarnessError(f"export: unknown format {fmt!r} (one of: {', '.join(FORMATS)})")
    f = FORMATS[fmt]
    write = getattr(importlib.import_module(f"harness.export.{f.module}"), f.function)
    return write(load(run), **options)
