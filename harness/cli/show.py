"""`overlaybench show` and `report`: a finished run as a table, or runs as one HTML page."""

from __future__ import annotations

import pathlib


def add(sub) -> None:
    s = sub.add_parser("show", help="print a run's seed-style table")
    s.add_argument("run", help="run directory or id")
    s.add_argument("--format", choices=["table", "csv", "json"], default="table")
    s.add_argument("--raw", action="store_true",
                   help="every measurement line instead of the summary (csv unless --format json)")
    s.set_defaults(func=cmd_show)

    rp = sub.add_parser("report", help="render one self-contained HTML report of one or more runs")
    rp.add_argument("runs", nargs="+", metavar="RUN")
    rp.add_argument("-o", "--output", default=None, metavar="FILE",
                    help="default: reports/<run-id>.html")
    rp.set_defaults(func=cmd_report)


# pandas and matplotlib are imported by the commands that use them, not by `--help`.

def cmd_show(a) -> int:
    from harness.analysis import tablefmt
    from harness import results
    if a.raw:
        fmt = "csv" if a.format == "table" else a.format
        print(tablefmt.format_raw(results.load(a.run), fmt))
    else:
        df = results.load(a.run)
        print(tablefmt.format_summary(df, a.format))
        if a.format == "table":
            from harness.analysis import fleet
            meta = results.read_meta(a.run)
            for line in tablefmt.run_notes(meta):
                print(line)
            for line in fleet.lines(df, meta):
                print(f"note: {line}")
    return 0


def cmd_report(a) -> int:
    from harness.report import render
    print(render.render([pathlib.Path(r) for r in a.runs], a.output))
    return 0
