"""The highest rate a path carries within a loss ratio: RFC 2544's throughput search, in the
simplified manner of FD.io CSIT's MLRsearch. Pure: trials in, the next trial or the result out.

NDR (non-drop rate) is the highest rate whose trial lost nothing (loss ratio 0); PDR (partial
drop rate) the highest whose trial lost at most a stated ratio (0.5 % by default). The search:

1. a first trial with the sender unpaced, as fast as it goes: what it sent (S) and what got
   through. Within the loss ratio, the path kept up with all the sender could do: the
   result is S, bounded by the sender (`sender_bound`), and only validation follows.
2. else a trial at what got through in the first (MLRsearch's initial guess from the
   forwarding rate), then trials between the highest rate that passed (`good`, 0 at first)
   and the lowest that failed (`bad`), until bad − good ≤ max(precision × bad, floor): each
   a step from the bound the last trial moved, 4 × precision wide and doubling while trials
   keep moving that bound (MLRsearch's external search), never past the middle (bisection);
3. a final validation trial at `good`. If it fails, `good` was luck: it becomes `bad`, the
   next lower pass (or 0) `good`, and the bisection goes on. The search stops after
   `max_trials` in all, unvalidated if it must.

A trial passes when its loss ratio is at most the target. A trial whose sender fell short of
the asked rate stands for the rate it did send. Every rate is in packets per second.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Sequence

from harness.core.errors import HarnessError

DEFAULT_PDR_LOSS = 0.005
DEFAULT_PRECISION = 0.02
DEFAULT_FLOOR_PPS = 1000.0
DEFAULT_MAX_TRIALS = 14
MAX_LOSS = 0.5
MIN_PRECISION = 0.001


@dataclasses.dataclass(frozen=True)
class Settings:
    loss: float = 0.0                    # the loss ratio a trial may have and pass (NDR: 0)
    precision: float = DEFAULT_PRECISION  # the result's width, as a share of the failing rate
    floor_pps: float = DEFAULT_FLOOR_PPS  # ... and never narrower than this
    max_trials: int = DEFAULT_MAX_TRIALS

    def __post_init__(self):
        if not (math.isfinite(self.loss) and 0 <= self.loss <= MAX_LOSS):
            raise HarnessError(f"a search's loss ratio must be 0 to {MAX_LOSS:.0%}, not {self.loss:g}")
        if not (math.isfinite(self.precision) and MIN_PRECISION <= self.precision < 1):
            raise HarnessError(f"a search's precision must be at least {MIN_PRECISION:.1%} (and under "
                               f"100 %), not {self.precision:g}")
        if not (math.isfinite(self.floor_pps) and self.floor_pps > 0):
            raise HarnessError(f"a search's floor must be a positive rate, not {self.floor_pps:g}")
        if self.max_trials < 3:
            raise HarnessError(f"a search needs at least 3 trials, not {self.max_trials}")


@dataclasses.dataclass(frozen=True)
class Trial:
    asked: float          # the rate asked for (0: the sender unpaced)
    sent: float           # what the sender managed, per second
    loss: float           # lost / sent, 0..1
    validation: bool = False


@dataclasses.dataclass(frozen=True)
class Next:
    rate: float           # the next trial's rate (0: unpaced)
    validation: bool


@dataclasses.dataclass(frozen=True)
class Result:
    rate: float           # the highest passing rate found (0.0: none passed)
    validated: bool       # its validation trial passed
    sender_bound: bool    # the sender, not the path, set it: nothing it sent failed
    trials: int


def _passed(t: Trial, s: Settings) -> bool:
    return t.loss <= s.loss


def _stood_for(t: Trial) -> float:
    """The rate a trial stands for: what it sent, which a paced sender may fall short of."""
    return t.sent if t.asked <= 0 else min(t.asked, t.sent)


def _bounds(trials: Sequence[Trial], s: Settings) -> tuple[float, float]:
    """(good, bad) after `trials`: the highest pass under the lowest fail (bad: inf if none)."""
    bad = min((_stood_for(t) for t in trials if not _passed(t, s)), default=math.inf)
    good = max((_stood_for(t) for t in trials if _passed(t, s) and _stood_for(t) < bad), default=0.0)
    return good, bad


def _narrow(good: float, bad: float, s: Settings) -> bool:
    return bad - good <= max(s.precision * bad, s.floor_pps)


def plan(trials: Sequence[Trial], s: Settings) -> Next | Result:
    """The next trial after `trials` (in the order they ran), or the result."""
    if not trials:
        return Next(0.0, False)
    first = trials[0]
    good, bad = _bounds(trials, s)
    last = trials[-1]
    if last.validation and _passed(last, s):
        return Result(_stood_for(last), True, math.isinf(bad), len(trials))
    if len(trials) >= s.max_trials:
        return Result(good, False, math.isinf(bad), len(trials))
    if math.isinf(bad) or _narrow(good, bad, s):
        if good <= 0:       # nothing passed, the failing rate is within the floor of 0
            return Result(0.0, False, False, len(trials))
        return Next(good, True)
    if len(trials) == 1:
        guess = first.sent * (1 - first.loss)
        if good < guess < bad:
            return Next(guess, False)
    return Next(_step(trials, good, bad, s), False)


def _step(trials: Sequence[Trial], good: float, bad: float, s: Settings) -> float:
    """The next rate inside (good, bad): from the bound the last trial moved, a step of
    4 × precision that doubles with each trial that moved it the same way (MLRsearch's
    external search), never past the middle (bisection)."""
    mid = (good + bad) / 2
    if math.isinf(bad):
        return 2 * good
    passed = _passed(trials[-1], s)
    run = 0
    for t in reversed(trials[1:]):
        if _passed(t, s) != passed:
            break
        run += 1
    width = max(4 * s.precision * (good if passed else bad), s.floor_pps) * 2 ** max(0, run - 1)
    return min(mid, good + width) if passed else max(mid, bad - width)


def bits_per_second(pps: float, payload: int) -> float:
    """A packet rate as the UDP payload's bits per second (the goodput of `payload`-byte datagrams)."""
    return pps * payload * 8
