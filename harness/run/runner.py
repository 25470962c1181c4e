"""Walk the cases: deploy each group once per repeat, run its tests, append every result.

A tool that fails, dies or times out makes a row with ok=false and the reason; the
matrix goes on. A mode that fails to deploy fails its group's cases the same way.
"""

from __future__ import annotations

import itertools
import logging
import sys
import time
from typing import Any, Callable, TextIO

from harness.bed import Testbed
from harness.core.errors import HarnessError
from harness.core.pairs import rounds as pair_rounds
from harness.modes.base import Datapath, offloads
from harness.results import Measurement, RunStore
from harness.run import case as case_mod, together
from harness.run.procs import daemon_death
from harness.run.scenario import Case, Scenario
from harness.tools import get as get_tool

log = logging.getLogger(__name__)


class Progress:
    """One status line per case: a bar, the case, the ETA. Redrawn in place on a TTY."""

    def __init__(self, total: int, stream: TextIO = sys.stderr, width: int = 24):
        self.total, self.stream, self.width = total, stream, width
        self.done = 0
        self.t0 = time.monotonic()
        self.tty = stream.isatty()

    def show(self, label: str) -> None:
        n = self.done
        frac = n / self.total if self.total else 1.0
        bar = "#" * int(frac * self.width) + "." * (self.width - int(frac * self.width))
        elapsed = time.monotonic() - self.t0
        eta = "?" if n == 0 else _fmt_secs(elapsed / n * (self.total - n))
        line = f"[{bar}] {n}/{self.total} ETA {eta}  {label}"
        if self.tty:
            self.stream.write("\r\x1b[K" + line)
        else:
            self.stream.write(line + "\n")
        self.stream.flush()

    def step(self) -> None:
        self.done += 1

    def finish(self) -> None:
        if self.tty:
            self.stream.write("\r\x1b[K")
        self.stream.write(f"{self.done}/{self.total} cases in {_fmt_secs(time.monotonic() - self.t0)}\n")
        self.stream.flush()


def _fmt_secs(s: float) -> str:
    s = int(s)
    return f"{s // 60}m{s % 60:02d}s" if s >= 60 else f"{s}s"


# After this many cases in a row fail with an exception (not a tool's own failure: a host
# that stopped answering), the run stops cleanly instead of failing every remaining case.
MAX_BROKEN_IN_A_ROW = 3


class Runner:
    def __init__(self, scenario: Scenario, testbed: Testbed, store: RunStore,
                 progress: Progress | None = None, poll_latency: Callable[[], Any] | None = None):
        self.sc = scenario
        self.tb = testbed
        self.store = store
        self.progress = progress
        self.known = scenario.known      # the run's modes: the standard ones and the scenario's
        self.recorder = case_mod.Recorder(testbed, scenario.rate)
        # held while a set of latency tests runs, released after (run/cpuidle.py's hold)
        self.poll_latency = poll_latency
        self.datapaths: list[dict] = []
        self._broken: list[str] = []
        self.stopped: dict[int, int] = {}    # underlay MTU → repeats measured, where `enough` stopped it

    # ------------------------------------------------------------------ matrix
    def run(self, cases: list[Case], skip: set[tuple[str, int]] = frozenset(),
            enough: Callable[[int], bool] | None = None) -> None:
        """Measure `cases` but those in `skip` ((key, repeat)). `enough(underlay_mtu)`, asked
        between one repeat and the next, stops that underlay's remaining repeats when it
        says so (a sequential verdict already decided)."""
        todo = [c for c in cases if (c.key, c.repeat) not in skip]
        if self.progress:
            self.progress.total = len(todo)
        current_u, unusable, last_r = None, None, None
        for (u, r, mode_name, o), group in itertools.groupby(
                todo, key=lambda c: (c.underlay_mtu, c.repeat, c.mode, c.overlay_mtu)):
            group = list(group)
            if u in self.stopped:
                continue
            if enough is not None and u == current_u and r != last_r and not unusable and enough(u):
                self.stopped[u] = r
                log.info("underlay MTU %s: decided after %d repeats; the rest are not measured", u, r)
                if self.progress:
                    self.progress.total -= sum(c.underlay_mtu == u and c.repeat >= r for c in todo)
                continue
            last_r = r
            if u != current_u:
                current_u, unusable = u, None
                try:
                    self.tb.set_underlay(u, self.sc.rate)
                except HarnessError as e:
                    # This underlay cannot be had (a path that does not carry its MTU):
                    # its cases fail with the reason, the other underlays are measured.
                    log.warning("underlay MTU %s: %s", u, e)
                    unusable = f"underlay MTU {u}: {e}"
            if unusable:
                self._fail(group, self.known.get(mode_name).kind, unusable)
                continue
            self._run_group(self.known.get(mode_name), o, group)

    def _deploy(self, mode, overlay_mtu: int, cases: list[Case], label: str) -> Datapath | None:
        if self.progress:
            self.progress.show(f"{label}: deploying")
        try:
            dp = mode.deploy(self.tb, overlay_mtu)
        except HarnessError as e:
            log.warning("deploy %s failed: %s", label, e)
            self._fail(cases, mode.kind, f"deploy failed: {e}")
            return None
        self._record_datapath(cases[0], dp)
        return dp

    def _sets(self, group: list[Case]) -> list[list[Case]]:
        """The group's cases in the sets measured at once (run/together.py; one each when sequential)."""
        pairs_here = list(dict.fromkeys((c.src, c.dst) for c in group if c.src))
        rounds = pair_rounds(pairs_here, [s.name for s in self.tb.sides]) if self.sc.schedule == "rounds" else None
        return together.sets(group, self.sc.schedule if pairs_here else "sequential", rounds)

    def _run_group(self, mode, overlay_mtu: int, group: list[Case]) -> None:
        label = f"{mode.name} u{group[0].underlay_mtu} o{overlay_mtu} r{group[0].repeat}"
        dp = self._deploy(mode, overlay_mtu, group, label)
        sets = self._sets(group)
        try:
            for i, batch in enumerate(sets):
                if dp is None:
                    return
                if self.progress:
                    self.progress.show(f"{batch[0].key} r{batch[0].repeat}"
                                       + (f" and {len(batch) - 1} more pairs at once" if len(batch) > 1 else ""))
                # one batch: a kill keeps all of a set or none of it
                self.store.append([m for rows in self._guarded(mode, batch, dp) for m in rows])
                if self.progress:
                    for _ in batch:
                        self.progress.step()
                if daemon_death(self.tb, dp) and i + 1 < len(sets):
                    # The case already failed with the reason; the rest get a clean deployment.
                    mode.teardown(self.tb, dp)
                    dp = self._deploy(mode, overlay_mtu, [c for b in sets[i + 1:] for c in b], label)
        finally:
            if dp is not None:
                mode.teardown(self.tb, dp)

    def _guarded(self, mode, batch: list[Case], dp: Datapath) -> list[list[Measurement]]:
        """run/case.py's measure, with a host that fails under the set (a dropped connection,
        a command that cannot run) recorded as each of its cases' failure; so many sets in a
        row that stop the run."""
        hold = (self.poll_latency() if self.poll_latency is not None
                and any(get_tool(c.test).latency for c in batch) else None)
        try:
            outcome = case_mod.measure(self.tb, self.store, self.recorder, self.sc, mode, batch, dp)
            why = outcome.host_failed
        except HarnessError as e:
            outcome, why = None, str(e)
        finally:
            if hold is not None:
                hold.release()
        if why is None:
            self._broken.clear()
            return outcome.rows
        more = f" and {len(batch) - 1} more pairs" if len(batch) > 1 else ""
        log.warning("%s r%d%s: %s", batch[0].key, batch[0].repeat, more, why)
        self._broken.append(why)
        failed = outcome.rows if outcome is not None else [[self._failed(c, dp.kind, why)] for c in batch]
        if len(self._broken) >= MAX_BROKEN_IN_A_ROW:
            self.store.append([m for rows in failed for m in rows])
            raise HarnessError(f"stopping: {len(self._broken)} cases in a row could not run; "
                               f"the last: {why}")
        return failed

    def _failed(self, case: Case, datapath: str, reason: str) -> Measurement:
        return self.recorder.failed(case, datapath, reason)

    def _fail(self, cases: list[Case], datapath: str, reason: str) -> None:
        """One failed line for each of `cases`, in one batch (a set is never written in part)."""
        self.store.append([self._failed(case, datapath, reason) for case in cases])
        if self.progress:
            for _ in cases:
                self.progress.step()

    def _record_datapath(self, case: Case, dp: Datapath) -> None:
        entry = {"mode": dp.mode, "datapath": dp.kind, "underlay_mtu": case.underlay_mtu,
                 "overlay_mtu": dp.overlay_mtu, "repeat": case.repeat, "info": dp.info}
        if case.repeat == 0:  # offloads do not change between repeats; read them once
            entry["offloads"] = {f"h{s.index}": offloads(s, dp.devices.get(s.index, []))
                                 for s in self.tb.sides}
        self.datapaths.append(entry)
        self.store.update_meta(datapaths=self.datapaths)
