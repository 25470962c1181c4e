"""Named points where a test can have the orchestrator killed (failpoints, as etcd and
TiKV have them): OVERLAYBENCH_FAILPOINT=<name> SIGKILLs this process when it reaches
that point. Tests use them to prove that a run killed at any point loses nothing and
leaves nothing `overlaybench down` cannot remove. Unset, a point costs one dict lookup.

    deploy          a mode's data path is half up (after the first host's daemon started)
    mid-test        the client is running
    append          a case's lines are cut off halfway through the last one
    run-json        the new run.json is written but not yet in place
    teardown        the testbed is half removed (after the first host)

`name:N` fires on the Nth time the point is reached (default: the first).
"""

from __future__ import annotations

import os
import signal

POINTS = ("deploy", "mid-test", "append", "run-json", "teardown")


_seen: dict[str, int] = {}


def armed(name: str) -> bool:
    """Would reaching `name` now kill the process?"""
    want = os.environ.get("OVERLAYBENCH_FAILPOINT")
    if not want:
        return False
    point, _, nth = want.partition(":")
    return point == name and _seen.get(name, 0) + 1 == int(nth or 1)


def reached(name: str) -> None:
    if not os.environ.get("OVERLAYBENCH_FAILPOINT"):
        return
    if armed(name):
        os.kill(os.getpid(), signal.SIGKILL)
    _seen[name] = _seen.get(name, 0) + 1
