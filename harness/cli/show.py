"""`overlaybench show` and `report`: a finished run as a table, or runs as one HTML page."""

from __future__ import annotations

import pathlib
from typing import Sequence

from harness.cli.args import add_run_arg, run_dir

REPORTS = pathlib.Path("reports")      # where `report` writes without -o (the current directory's)


def add(sub) -> None:
    s = sub.add_parser(
        "show", help="print a run's seed-style table",
        description="Print a finished (or interrupted) run: the summary table, one row per mode, MTU, "
                    "placement and test, with the run's notes; or with --raw every measurement line. "
                    "RUN is a run directory or a run id (looked up in --results DIR).")
    add_run_arg(s)
    s.add_argument("--format", choices=["table", "csv", "json"], default="table",
                   help="table: aligned text with the run's notes; csv or json: the summary rows "
                        "(default: %(default)s)")
    s.add_argument("--raw", action="store_true",
                   help="every measurement line instead of the summary (csv unless --format json; "
                        "default: the summary)")
    s.set_defaults(func=cmd_show)

    rp = sub.add_parser(
        "report", help="render one self-contained HTML report of one or more runs",
        description="Render one self-contained HTML page (plots inline, no network needed to view it) of "
                    "one run, or of several compared with the first. Prints the path written. Without -o: "
                    "reports/<run-id>.html for one run, reports/compare-<a>-<b>.html for two, "
                    "reports/compare-<a>-<b>-and-<N>-more.html for more (reports/ under the current "
                    "directory, made if missing).")
    add_run_arg(rp, dest="runs", nargs="+")
    rp.add_argument("-o", "--output", default=None, metavar="FILE",
                    help="where the page goes (default: reports/<run-id>.html, or reports/compare-<a>-<b>.html "
                         "for several runs)")
    rp.set_defaults(func=cmd_report)


def default_output(run_dirs: Sequence[pathlib.Path]) -> pathlib.Path:
    """`report`'s page when no -o is given: named after the run, or the runs compared."""
    ids = [pathlib.Path(d).resolve().name for d in run_dirs]
    if len(ids) == 1:
        return REPORTS / f"{ids[0]}.html"
    more = f"-and-{len(ids) - 2}-more" if len(ids) > 2 else ""
    return REPORTS / f"compare-{ids[0]}-{ids[1]}{more}.html"


# pandas and matplotlib are imported by the commands that use them, not by `--help`.

def cmd_show(a) -> int:
    from harness.analysis import tablefmt
    from harness import results
    run = run_dir(a, a.run)
    if a.raw:
        fmt = "csv" if a.format == "table" else a.format
        print(tablefmt.format_raw(results.load(run), fmt))
    else:
        df = results.load(run)
        print(tablefmt.format_summary(df, a.format))
        if a.format == "table":
            from harness.analysis import fleet
            meta = results.read_meta(run)
            for line in tablefmt.run_notes(meta):
                print(line)
            for line in fleet.lines(df, meta):
                print(f"note: {line}")
            from harness.report import mtu
            paths = mtu.stored_paths(meta)
            if paths is not None:                  # a run made with --mtu-check: the report's MTU section
                print()
                print(mtu.terminal(paths))
    return 0


def cmd_report(a) -> int:
    from harness.report import render
    runs = [run_dir(a, r) for r in a.runs]
    print(render.render(runs, a.output or default_output(runs)))
    return 0
