"""`overlaybench export`: a run in a format CI and monitoring read (harness/export)."""

from __future__ import annotations

import pathlib
import sys

from harness.cli.args import add_run_arg, run_dir
from harness.export import FORMATS


def add(sub) -> None:
    e = sub.add_parser(
        "export", help="write a run as OpenMetrics, Prometheus text, Bencher BMF, github-action-benchmark or "
                       "OpenSearch bulk NDJSON",
        description="One value per case and metric: the median over repeats, with their min and max where "
                    "the format has room. docs/export.md lists the names, labels and units.\n\n"
                    "formats:\n" + "\n".join(f"  {f.name:<15} {f.what}" for f in FORMATS.values()))
    add_run_arg(e)
    e.add_argument("--format", required=True, choices=list(FORMATS), metavar="F",
                   help="one of: " + ", ".join(FORMATS) + " (required)")
    e.add_argument("-o", "--output", metavar="FILE", help="write here (default: stdout; - is stdout too)")
    e.add_argument("--index", default="overlaybench", metavar="NAME",
                   help="opensearch: the index the action lines name (default: %(default)s)")
    e.set_defaults(func=cmd_export)


def cmd_export(a) -> int:
    from harness.core.errors import HarnessError
    from harness.export import export

    options = {"index": a.index} if a.format == "opensearch" else {}
    text = export(run_dir(a, a.run), a.format, **options)
    if a.output in (None, "-"):
        sys.stdout.write(text)
        return 0
    out = pathlib.Path(a.output)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text, encoding="utf-8")
    except OSError as e:
        raise HarnessError(f"{out}: cannot write the export ({e.strerror})") from e
    print(out)
    return 0
