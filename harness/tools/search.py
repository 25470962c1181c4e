"""The highest rate a path carries within a loss ratio: RFC 2544's throughput search, in the
manner of FD.io CSIT's MLRsearch. Pure: trials in, the next trial or the result out.

NDR (non-drop rate) is the highest rate at which the path loses nothing (loss ratio 0); PDR
(partial drop rate) the highest at which it loses at most a stated ratio (0.5 % by default).

A path that drops a few datagrams now and then at any rate (a userspace relay the machine
pauses for a millisecond) has no rate at which every trial is clean, and a search that
believes one unlucky trial settles wherever that trial fell. So a rate (a *load*) is
decided by a vote of its trials, as MLRsearch decides it with an exceed ratio of one half:
trials at one load, up to `load_trials` (3 by default), until a majority of that many
agree, each passing when its loss ratio is at most the target. `load_trials = 1` is
RFC 2544's single trial per rate. The search:

1. a first trial with the sender unpaced, as fast as it goes: what it sent (S) and what got
   through. Within the loss ratio, the path kept up with all the sender could do: the
   result is S, bounded by the sender (`sender_bound`), and only validation follows.
   Else S is a failing load.
2. else the load of what got through in the first (MLRsearch's initial guess from the
   forwarding rate), then loads between the highest that passed (`good`, 0 at first) and
   the lowest that failed (`bad`), until bad − good ≤ max(precision × bad, floor): each a
   step from the bound the last decided load moved, 4 × precision wide and doubling while
   loads keep moving that bound (MLRsearch's external search), never past the middle
   (bisection);
3. a final validation at `good`: more trials there, marked as such, counted with the
   load's own, until a majority of two more than `load_trials` agree (3 of 5 by default).
   If it fails, `good` was luck: it becomes `bad`, the next lower pass (or 0) `good`, and
   the bisection goes on. The search stops after `max_trials` in all, unvalidated if it
   must.

A trial whose sender fell short of the asked rate stands for the rate it did send; a load
for the median of its trials'. Every rate is in packets per second.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from typing import Sequence

from harness.core.errors import HarnessError

DEFAULT_PDR_LOSS = 0.005
DEFAULT_PRECISION = 0.02
DEFAULT_FLOOR_PPS = 1000.0
DEFAULT_LOAD_TRIALS = 3
DEFAULT_MAX_TRIALS = 30
MAX_LOSS = 0.5
MIN_PRECISION = 0.001
MAX_LOAD_TRIALS = 9


@dataclasses.dataclass(frozen=True)
class Settings:
    loss: float = 0.0                    # the loss ratio a trial may have and pass (NDR: 0)
    precision: float = DEFAULT_PRECISION  # the result's width, as a share of the failing rate
    floor_pps: float = DEFAULT_FLOOR_PPS  # ... and never narrower than this
    max_trials: int = DEFAULT_MAX_TRIALS
    load_trials: int = DEFAULT_LOAD_TRIALS  # a load is decided by a majority of this many trials

    def __post_init__(self):
        if not (math.isfinite(self.loss) and 0 <= self.loss <= MAX_LOSS):
            raise HarnessError(f"a search's loss ratio must be 0 to {MAX_LOSS:.0%}, not {self.loss:g}")
        if not (math.isfinite(self.precision) and MIN_PRECISION <= self.precision < 1):
            raise HarnessError(f"a search's precision must be at least {MIN_PRECISION:.1%} (and under "
                               f"100 %), not {self.precision:g}")
        if not (math.isfinite(self.floor_pps) and self.floor_pps > 0):
            raise HarnessError(f"a search's floor must be a positive rate, not {self.floor_pps:g}")
        if not (isinstance(self.load_trials, int) and 1 <= self.load_trials <= MAX_LOAD_TRIALS
                and self.load_trials % 2 == 1):
            raise HarnessError(f"a search's trials a load must be odd, 1 to {MAX_LOAD_TRIALS}, "
                               f"not {self.load_trials}")
        if self.max_trials < 3:
            raise HarnessError(f"a search needs at least 3 trials, not {self.max_trials}")

    @property
    def majority(self) -> int:
        """Trials that must agree to decide a load."""
        return self.load_trials // 2 + 1


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
    validated: bool       # its validation's vote passed
    sender_bound: bool    # the sender, not the path, set it: nothing it sent failed
    trials: int


@dataclasses.dataclass(frozen=True)
class Load:
    """One round of trials at one asked rate (a search's, or a validation's), in the order
    the rounds began."""
    asked: float
    validation: bool
    trials: tuple[Trial, ...]
    passed: bool | None   # the vote's verdict; None: not yet decided
    prior: tuple[Trial, ...] = ()   # a validation's: the trials of the round it validates

    @property
    def rate(self) -> float:
        """The rate the round stands for: the median of what its trials stood for."""
        return statistics.median(_stood_for(t) for t in self.trials)


def _passed(t: Trial, s: Settings) -> bool:
    return t.loss <= s.loss


def _stood_for(t: Trial) -> float:
    """The rate a trial stands for: what it sent, which a paced sender may fall short of."""
    return t.sent if t.asked <= 0 else min(t.asked, t.sent)


def _vote(votes: Sequence[Trial], need: int, s: Settings) -> bool | None:
    passes = sum(_passed(t, s) for t in votes)
    if passes >= need:
        return True
    if len(votes) - passes >= need:
        return False
    return None


def loads(trials: Sequence[Trial], s: Settings) -> list[Load]:
    """The trials as rounds: consecutive trials at one asked rate, of one kind, up to the
    round's verdict. The first, unpaced trial is a round alone. A search's round is a vote
    of `load_trials`; a validation's counts the trials of the round it validates as well,
    and its vote is of two more (3 of 5 by default): one more trial's worth of agreement."""
    out: list[Load] = []
    for i, t in enumerate(trials):
        if i == 0:
            out.append(Load(t.asked, False, (t,), _passed(t, s)))
            continue
        last = out[-1]
        going_on = last.passed is None and (last.asked, last.validation) == (t.asked, t.validation)
        group = last.trials + (t,) if going_on else (t,)
        if t.validation:
            prior = last.prior if going_on else _validated(out)
            ld = Load(t.asked, True, group, _vote(prior + group, s.majority + 1, s), prior)
        else:
            ld = Load(t.asked, False, group, _vote(group, s.majority, s))
        if going_on:
            out[-1] = ld
        else:
            out.append(ld)
    return out


def _validated(done: Sequence[Load]) -> tuple[Trial, ...]:
    """The trials of the round a validation that begins after `done` validates: the one
    that stood for `good`."""
    good = _good(done)
    return good.trials if good is not None and not good.validation else ()


def _latest(done: Sequence[Load]) -> list[Load]:
    """The decided rounds that count: where two tried one asked rate (a search's and its
    validation's), the later one."""
    return list({ld.asked: ld for ld in done if ld.passed is not None}.values())


def _bad(done: Sequence[Load]) -> float:
    return min((ld.rate for ld in _latest(done) if not ld.passed), default=math.inf)


def _good(done: Sequence[Load]) -> Load | None:
    """The highest passing round under the lowest failing one."""
    bad = _bad(done)
    return max((ld for ld in _latest(done) if ld.passed and ld.rate < bad), key=lambda ld: ld.rate, default=None)


def _bounds(done: Sequence[Load]) -> tuple[float, float]:
    """(good, bad) after the decided rounds: the highest pass under the lowest fail (bad: inf
    if none)."""
    good = _good(done)
    return (0.0 if good is None else good.rate), _bad(done)


def _narrow(good: float, bad: float, s: Settings) -> bool:
    return bad - good <= max(s.precision * bad, s.floor_pps)


def plan(trials: Sequence[Trial], s: Settings) -> Next | Result:
    """The next trial after `trials` (in the order they ran), or the result."""
    if not trials:
        return Next(0.0, False)
    rounds = loads(trials, s)
    last = rounds[-1]
    if last.passed is None and len(trials) < s.max_trials:
        return Next(last.asked, last.validation)           # the vote goes on
    done = [ld for ld in rounds if ld.passed is not None]
    good, bad = _bounds(done)
    if last.validation and last.passed:
        return Result(last.rate, True, math.isinf(bad), len(trials))
    if len(trials) >= s.max_trials:
        return Result(good, False, math.isinf(bad), len(trials))
    if math.isinf(bad) or _narrow(good, bad, s):
        if good <= 0:       # nothing passed, the failing rate is within the floor of 0
            return Result(0.0, False, False, len(trials))
        at = _good(done)          # the unpaced first round: validated paced, at what it sent
        return Next(at.asked if at.asked > 0 else good, True)
    if len(done) == 1:
        first = trials[0]
        guess = first.sent * (1 - first.loss)
        if good < guess < bad:
            return Next(guess, False)
    return Next(_step(done, good, bad, s), False)


def _step(done: Sequence[Load], good: float, bad: float, s: Settings) -> float:
    """The next rate inside (good, bad): from the bound the last decided load moved, a step
    of 4 × precision that doubles with each load that moved it the same way (MLRsearch's
    external search), never past the middle (bisection)."""
    mid = (good + bad) / 2
    if math.isinf(bad):
        return 2 * good
    passed = done[-1].passed
    run = 0
    for ld in reversed(done[1:]):
        if ld.passed != passed:
            break
        run += 1
    width = max(4 * s.precision * (good if passed else bad), s.floor_pps) * 2 ** max(0, run - 1)
    return min(mid, good + width) if passed else max(mid, bad - width)


def bits_per_second(pps: float, payload: int) -> float:
    """A packet rate as the UDP payload's bits per second (the goodput of `payload`-byte datagrams)."""
    return pps * payload * 8
