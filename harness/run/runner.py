"""Walk the cases: deploy each group once per repeat, run its tests, append every result.

A tool that fails, dies or times out makes a row with ok=false and the reason; the
matrix goes on. A mode that fails to deploy fails its group's cases the same way.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import logging
import math
import sys
import time
from typing import Callable, TextIO

from harness import modes
from harness.core import failpoints
from harness.core.errors import HarnessError
from harness.core.pairs import rounds as pair_rounds
from harness.hosts.base import Completed
from harness.modes.base import Datapath, offloads
from harness.run import together
from harness.run.endpoints import endpoints, pair_sides
from harness.run.procs import PORTS, daemon_death, raw_name, save, wait_listening
from harness.results import Measurement, RunStore
from harness.run.scenario import Case, Scenario
from harness.testbeds import cpu
from harness.testbeds.base import Testbed
from harness.tools import get as get_tool
from harness.tools.base import Sample, TestSpec, ToolResult

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
                 progress: Progress | None = None):
        self.sc = scenario
        self.tb = testbed
        self.store = store
        self.progress = progress
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
                self._fail(group, modes.get(mode_name).kind, unusable)
                continue
            self._run_group(modes.get(mode_name), o, group)

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
                if len(batch) == 1:
                    self.store.append(self._guarded_case(batch[0], dp))
                else:                    # one batch: a kill keeps all of the set or none of it
                    self.store.append([m for rows in self._guarded_set(batch, dp) for m in rows])
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

    def _guarded_case(self, case: Case, dp: Datapath) -> list[Measurement]:
        """run_case, with a host that fails under it (a dropped connection, a command that
        cannot run) recorded as the case's failure; too many in a row stop the run."""
        try:
            rows = self.run_case(case, dp)
        except HarnessError as e:
            log.warning("%s r%d: %s", case.key, case.repeat, e)
            self._broken.append(str(e))
            if len(self._broken) >= MAX_BROKEN_IN_A_ROW:
                self.store.append([self._failed(case, dp.kind, str(e))])
                raise HarnessError(f"stopping: {len(self._broken)} cases in a row could not run; "
                                   f"the last: {e}") from e
            return [self._failed(case, dp.kind, str(e))]
        self._broken.clear()
        return rows

    def _guarded_set(self, batch: list[Case], dp: Datapath) -> list[list[Measurement]]:
        """together.measure, with a host that fails under the set recorded as the failure of
        each of its cases, counted as one, as _guarded_case counts."""
        try:
            rows = together.measure(self, batch, dp)
        except HarnessError as e:
            log.warning("%s r%d and %d more pairs: %s", batch[0].key, batch[0].repeat, len(batch) - 1, e)
            self._broken.append(str(e))
            failed = [[self._failed(c, dp.kind, str(e))] for c in batch]
            if len(self._broken) >= MAX_BROKEN_IN_A_ROW:
                self.store.append([m for rows in failed for m in rows])
                raise HarnessError(f"stopping: {len(self._broken)} cases in a row could not run; "
                                   f"the last: {e}") from e
            return failed
        self._broken.clear()
        return rows

    def _failed(self, case: Case, datapath: str, reason: str) -> Measurement:
        return self._measurement(case, datapath, Sample("failed", math.nan, ""), ok=False, error=reason)

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

    def _measurement(self, case: Case, datapath: str, s: Sample, ok: bool = True,
                     error: str | None = None, intervals=None) -> Measurement:
        src, dst = pair_sides(self.tb, case.src, case.dst)
        return Measurement(case=case.key, mode=case.mode, datapath=datapath,
                           underlay_mtu=case.underlay_mtu, overlay_mtu=case.overlay_mtu,
                           placement=case.placement, test=case.test, streams=case.streams,
                           repeat=case.repeat, metric=s.metric, value=s.value, unit=s.unit, ok=ok,
                           error=error, rate=self.sc.rate, intervals=intervals,
                           src_host=src.name, dst_host=dst.name, pair=case.pair)

    # -------------------------------------------------------------------- case
    def run_case(self, case: Case, dp: Datapath) -> list[Measurement]:
        tool = get_tool(case.test)
        client, server = endpoints(self.tb, dp, case.placement, case.src, case.dst)
        port, data_port = PORTS.get(tool.binary, (None, None))
        spec = TestSpec(server_addr=server.addr, duration=self.sc.duration, streams=case.streams,
                        overlay_mtu=dp.overlay_mtu, port=port, data_port=data_port)
        raw = raw_name(case)
        srv = cli = None
        srv_out: Completed | None = None
        try:
            server_argv = tool.server_argv(spec)
            if server_argv:
                srv = server.host.start(server_argv)
                why = wait_listening(server.host, port, srv, proto=tool.listen) if port else None
                if why:
                    srv_out = srv.stop()
                    save(self.store, f"{raw}.server", srv_out)
                    return [self._failed(case, dp.kind, why)]
            begun = self.tb.meter.begin(client.host, server.host)
            sleeve_a = self._daemon_seconds(dp)
            t0 = time.monotonic()
            cli = client.host.start(tool.client_argv(spec))
            failpoints.reached("mid-test")
            try:
                out = cli.wait(tool.timeout(spec))
            except TimeoutError:
                out = dataclasses.replace(cli.stop(), returncode=None)
            wall = time.monotonic() - t0
            cpu_samples = self.tb.meter.end(begun, cli, srv, wall)
            sleeve_b = self._daemon_seconds(dp)
            died = daemon_death(self.tb, dp)
            if srv is not None:
                srv_out = srv.stop()
        finally:
            for proc in (cli, srv):
                if proc is not None and proc.poll() is None:
                    proc.stop()
        save(self.store, f"{raw}.client", out)
        if srv_out is not None:
            save(self.store, f"{raw}.server", srv_out)
        snap = modes.get(dp.mode).counters(self.tb, dp)
        if snap:
            self.store.save_raw(f"{raw}.counters.json", json.dumps(snap, indent=1))
        if died:
            return [self._failed(case, dp.kind, died)]

        res: ToolResult = tool.parse(out.stdout, out.stderr, out.returncode)
        if not res.ok:
            reason = res.error or "tool failed"
            if srv_out is not None and srv_out.returncode not in (0, None, -15) and srv_out.stderr.strip():
                reason += f" (server: {srv_out.stderr.strip().splitlines()[-1]})"
            return [self._failed(case, dp.kind, reason)]

        samples = [s for s in res.samples if not s.metric.startswith("cpu_")] + cpu_samples
        if sleeve_a is not None and sleeve_b is not None and wall > 0:
            samples.append(Sample("cpu_sleeve_pct", round(100 * (sleeve_b - sleeve_a) / wall, 2), "pct"))
        return [self._measurement(case, dp.kind, s,
                                  intervals=res.intervals if s.metric == "throughput_bps" and res.intervals else None)
                for s in samples]

    def _daemon_seconds(self, dp: Datapath) -> float | None:
        """CPU seconds all of the data path's daemons have used so far (None: no daemons)."""
        if not dp.processes:
            return None
        total = 0.0
        for side_index, proc in dp.processes.items():
            if proc.pid is None:
                return None
            secs = cpu.process_seconds(self.tb.sides[side_index].host, proc.pid)
            if secs is None:
                return None
            total += secs
        return total
