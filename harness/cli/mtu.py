"""`overlaybench mtu`: the MTU doctor. Every mode's paths, both ways: the path MTU by DF
bisection and the MSS a connection negotiates, what it should be, whether discovery
works, whether anything fragments and what a wrong MTU costs; a verdict and a fix each."""

from __future__ import annotations

import json
import sys

from harness.cli.args import EXIT_REGRESSION, MATRIX_FLAGS, add_paths, add_testbed, options, overrides, settings
from harness.core.errors import HarnessError


def add(sub) -> None:
    p = sub.add_parser("mtu", help="the MTU doctor: each mode's path MTU, discovery, fragments, cost and fix",
                       description="Probe every mode's paths, both directions, for their MTU: the largest DF "
                                   "packet that crosses (bisection to the byte) and the TCP MSS, against the "
                                   "underlay's path MTU minus the mode's encapsulation; whether 'fragmentation "
                                   "needed' comes back; what fragments; a short transfer at the configured MTU "
                                   "and at the one that fits. Verdicts: ok, too big, black hole, too small, "
                                   "asymmetric, each with its fix. Exit 0: every path ok; 1: any is not; "
                                   "2: bad input.")
    p.add_argument("scenario", nargs="?", help="scenario TOML: its modes, MTUs, placements and testbed "
                                               "(default: native,fastdp at underlay 1500, overlay auto)")
    add_paths(p)
    add_testbed(p)
    p.add_argument("--duration", type=float, default=None, metavar="S",
                   help="seconds of each TCP transfer (default: 1)")
    p.add_argument("--concurrent", action="store_true",
                   help="probe even while a run measures on this machine (default: wait for it)")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress lines")
    p.add_argument("--format", choices=["table", "json"], default="table",
                   help="table (default); json: every path's measurements, verdict and fix")
    p.set_defaults(func=cmd_mtu)


def cmd_mtu(a) -> int:
    from harness.analysis import mtu as verdicts    # the harness: not for `--help`
    from harness.run import mtu as doctor
    duration = a.duration if a.duration is not None else 1.0
    raw = overrides(a)
    raw.get("matrix", {}).pop("duration", None)
    rows = doctor.doctor(a.scenario, raw, options(a), settings(a), quiet=a.quiet, duration=duration)
    judged = verdicts.judge_all(rows)
    ok = verdicts.all_ok(judged)
    if a.format == "json":
        print(json.dumps({"ok": ok, "paths": judged}, indent=2))
    else:
        print(verdicts.format_table(judged))
    return 0 if ok else EXIT_REGRESSION


# run's matrix flags the doctor has no use for
NOT_PATHS = tuple(f for f in MATRIX_FLAGS if f in ("tests", "streams", "repeats", "duration", "schedule"))


def check(a) -> dict:
    """`run --mtu-check`: the doctor on the run's paths before it measures; its verdicts on
    stderr, {"ok", "paths"} for run's JSON. A path that is not ok is said, not refused."""
    from harness.analysis import mtu as verdicts
    from harness.run import mtu as doctor
    if getattr(a, "resume", None):
        raise HarnessError("--mtu-check: a resumed run keeps its scenario; check it with `overlaybench mtu`")
    raw = overrides(a)
    for k in NOT_PATHS:
        raw.get("matrix", {}).pop(k, None)
    judged = verdicts.judge_all(doctor.doctor(a.scenario, raw, options(a), settings(a), quiet=a.quiet))
    ok = verdicts.all_ok(judged)
    print(verdicts.format_table(judged), file=sys.stderr)
    if not ok:
        print(f"overlaybench: --mtu-check: {sum(p['verdict'] != 'ok' for p in judged)} of {len(judged)} paths "
              f"not ok (see above); measuring anyway", file=sys.stderr)
    return {"ok": ok, "paths": judged}
