"""overlaybench's command line: one module per command group, each adding its parsers.

main() parses, calls the command, and maps HarnessError to one line and exit 2,
Ctrl-C and SIGTERM to exit 130. A command imports what it runs when it runs, so that
`--help` and usage errors load argparse and little else.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys

from harness import __version__
from harness.cli import doctor, export, gates, lab, modes, run, show
from harness.cli.args import EXIT_FAILED_CASES, EXIT_INTERRUPTED, EXIT_REGRESSION, EXIT_UNDECIDED, EXIT_USAGE
from harness.cli.helpfmt import HelpFormatter
from harness.core.errors import HarnessError
from harness.testbeds.registry import BACKENDS

COMMANDS = (doctor, lab, run, show, export, gates, modes)     # in the order `--help` lists them


class _Parser(argparse.ArgumentParser):
    """Usage errors in one line, like every other bad input (exit 2); help wrapped at spaces
    and commas only (harness/cli/helpfmt.py). Every subcommand's parser is one of these:
    add_subparsers makes them of the parent's class."""

    def __init__(self, *args, **kw):
        kw.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kw)

    def error(self, message: str):
        self.exit(EXIT_USAGE, f"{self.prog}: {message} (see {self.prog} --help)\n")


EPILOG = "\n".join([
    "backends (run --backend NAME; `down` removes what each left):",
    *(f"  {b.name:<12} {b.summary}" for b in BACKENDS.values()),
    "",
    "exit codes:",
    "  0    all done: every case measured (compare: nothing slower; gate, trend: no regression)",
    f"  {EXIT_REGRESSION:<4} a gate found a regression (gate, compare: head slower; trend: a step for the worse; "
    "doctor: a required check failed)",
    f"  {EXIT_USAGE:<4} bad input: one line on stderr saying what and where",
    f"  {EXIT_FAILED_CASES:<4} run finished, but some cases failed (each is a row with its reason)",
    f"  {EXIT_UNDECIDED:<4} compare undecided: nothing slower, but the pairs ran out before every case was decided",
    f"  {EXIT_INTERRUPTED:<4} interrupted (Ctrl-C, SIGTERM): the lab is removed, measurements so far are kept",
    "",
    "Every command has --help. A RUN is a run directory, or a run id looked up in --results DIR "
    "(default: ./results, then the checkout's results/).",
])


def parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="overlaybench",
        description="Measure what a container overlay costs: native vs kernel VXLAN vs a userspace sleeve, "
                    "over mode × MTU × placement, on a local lab of network namespaces (default) or two "
                    "real hosts over SSH (run --backend ssh --inventory FILE).",
        epilog=EPILOG)
    p.add_argument("--version", action="version", version=f"overlaybench {__version__}")
    p.add_argument("-v", "--verbose", action="count", default=0, help="log more (-vv: every command)")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for command in COMMANDS:
        command.add(sub)
    return p


def _sigterm(signum, frame):
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    level = logging.WARNING - 10 * min(args.verbose, 2)
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s")
    signal.signal(signal.SIGTERM, _sigterm)
    try:
        return args.func(args)
    except HarnessError as e:
        print(f"overlaybench: {e}", file=sys.stderr)
        return EXIT_USAGE
    except BrokenPipeError:
        # `overlaybench show RUN | head`: the reader left; say nothing more.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except KeyboardInterrupt:
        print("overlaybench: interrupted; the lab was removed and measurements so far are kept",
              file=sys.stderr)
        return EXIT_INTERRUPTED
