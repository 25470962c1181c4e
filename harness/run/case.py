"""One case routine for every schedule: a set of cases measured at once on one deployment.

A sequential case is a set of one. The cases of a set differ only in their pair; each gets
its own ports (the tool's fixed ports plus 2 × its place in the set), so two servers on one
host never collide. The steps, for every set:

  1. start each case's server and wait until it listens (a server that never does fails
     its case alone, with what it printed);
  2. start every client at once, each waited for within its own deadline (a hang is
     stopped at the tool's hard timeout); a tool that runs in phases (a probe idle, then
     under load; the steps of a sweep) runs phase after phase against its one server,
     phase k of every case at once; an adaptive one (a rate search) names its next phase
     from the outputs of all its phases so far;
  3. keep what each tool printed (raw/), note a data path daemon that died under the set
     (every case of the set fails with why), the deployment's counters;
  4. parse each case alone into its rows; a tool's failure is a failed row with its reason
     and the server's last words.

CPU is recorded for a set of one case of one phase only: a set shares the machine, and
no share of it is one pair's; phases measure different things one after the other. A host
that fails under one case's own step (its endpoints, its server, its client) fails that
case; `Outcome.host_failed` says whether every case of the set failed so, which the runner
counts toward stopping a run whose hosts stopped answering.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import math
import time

from harness.bed import Testbed
from harness.core import failpoints
from harness.core.errors import HarnessError
from harness.core.samples import Sample
from harness.hosts.base import Completed
from harness.modes.base import Datapath, Mode
from harness.results import Measurement, RunStore
from harness.run.endpoints import endpoints, pair_sides
from harness.run.procs import PORTS, daemon_death, raw_name, save, wait_listening
from harness.run.scenario import Case, Scenario, sweep_rates
from harness.testbeds import cpu
from harness.tools import get as get_tool
from harness.tools.base import Phase, PhaseOutput, TestSpec


class Recorder:
    """A case's result lines: its samples, or its failure, with the case's fields."""

    def __init__(self, testbed: Testbed, rate: str | None):
        self.tb, self.rate = testbed, rate

    def row(self, case: Case, datapath: str, s: Sample, ok: bool = True, error: str | None = None,
            intervals=None, overlay_mtu: int | None = None) -> Measurement:
        """`overlay_mtu`: the deployment's, where it is not the case's (a cluster's pod network
        runs at the MTU its CNI set, whatever the scenario expanded)."""
        src, dst = pair_sides(self.tb, case.src, case.dst)
        return Measurement(case=case.key, mode=case.mode, datapath=datapath,
                           underlay_mtu=case.underlay_mtu, overlay_mtu=overlay_mtu or case.overlay_mtu,
                           placement=case.placement, test=case.test, streams=case.streams,
                           repeat=case.repeat, metric=s.metric, value=s.value, unit=s.unit, ok=ok,
                           error=error, rate=self.rate, intervals=intervals,
                           src_host=src.name, dst_host=dst.name, pair=case.pair)

    def failed(self, case: Case, datapath: str, reason: str, overlay_mtu: int | None = None) -> Measurement:
        return self.row(case, datapath, Sample("failed", math.nan, ""), ok=False, error=reason,
                        overlay_mtu=overlay_mtu)


@dataclasses.dataclass
class Outcome:
    rows: list[list[Measurement]]     # per case, in the set's order
    host_failed: str | None = None    # why, where a host failed under every case of the set


@dataclasses.dataclass
class _Started:
    index: int
    tool: object
    spec: TestSpec
    client: object                    # the client Endpoint
    server_host: object
    server: object | None             # the server Process (None: the tool has no server)
    phases: list[Phase]               # its client commands, in order (one for most tools)
    outs: list[tuple[Phase, Completed]] = dataclasses.field(default_factory=list)


def _phases(tool, spec: TestSpec) -> list[Phase]:
    """A tool's client commands: its phases, or its one command as a phase without a name."""
    phased = tool.phases(spec)
    return phased if phased is not None else [Phase("", tool.client_argv(spec), tool.timeout(spec))]


def _tool_for(tb: Testbed, test: str):
    """The test's tool; one the harness builds runs from the testbed's own copy where its
    hosts hold one (Testbed.tool_paths: the tools image's blast on a cluster)."""
    tool = get_tool(test)
    path = (tb.tool_paths or {}).get(tool.binary) if tool.builds else None
    if path:
        tool = copy.copy(tool)
        tool.locate = lambda: path
    return tool


def measure(tb: Testbed, store: RunStore, rec: Recorder, sc: Scenario, mode: Mode,
            cases: list[Case], dp: Datapath) -> Outcome:
    """Measure `cases` of scenario `sc` at once on deployment `dp` of `mode` (module doc)."""
    rows: list[list[Measurement] | None] = [None] * len(cases)
    host_errors: list[str] = []

    def fail(i: int, why: str, host: bool = False) -> None:
        rows[i] = [rec.failed(cases[i], dp.kind, why, dp.overlay_mtu)]
        if host:
            host_errors.append(why)

    started: list[_Started] = []
    running: list[object] = []        # client processes of the phase under way
    meter = begun = sleeve_a = None
    try:
        for i, case in enumerate(cases):
            tool = _tool_for(tb, case.test)
            try:
                client, server = endpoints(tb, dp, case.placement, case.src, case.dst)
                base, data = (tb.tool_ports or {}).get(tool.binary) or PORTS.get(tool.binary, (None, None))
                spec = TestSpec(server_addr=server.addr, bind_addr=server.bind, duration=sc.duration,
                                streams=case.streams, overlay_mtu=dp.overlay_mtu,
                                port=None if base is None else base + tool.port_stride * i,
                                data_port=None if data is None else data + 2 * i, rates=sweep_rates(sc),
                                search=(sc.search_pdr_loss_pct, sc.search_precision_pct, sc.search_load_trials))
                phases = _phases(tool, spec)
                argv = tool.server_argv(spec)
                srv = server.host.start(argv) if argv else None
            except HarnessError as e:
                fail(i, str(e), host=True)
                continue
            started.append(_Started(i, tool, spec, client, server.host, srv, phases))
        for s in list(started):
            why = (wait_listening(s.server_host, s.spec.port, s.server, proto=s.tool.listen)
                   if s.server is not None and s.spec.port else None)
            if why:
                save(store, f"{raw_name(cases[s.index])}.server", s.server.stop())
                fail(s.index, why)
                started.remove(s)
        if len(cases) == 1 and started and len(started[0].phases) == 1 and not started[0].tool.adaptive:
            meter = tb.meter
            begun = meter.begin(started[0].client.host, started[0].server_host)
            sleeve_a = daemon_seconds(tb, dp)
        t0 = time.monotonic()
        first_client = None
        k = 0
        while any(k < len(s.phases) for s in started):
            # phase k of every case at once, each waited for within its own timeout
            going = []
            for s in started:
                if k >= len(s.phases) or rows[s.index] is not None:
                    continue
                ph = s.phases[k]
                try:
                    proc = s.client.host.start(ph.argv)
                except HarnessError as e:
                    fail(s.index, str(e), host=True)
                    continue
                running.append(proc)
                going.append((s, ph, proc, time.monotonic() + ph.timeout))
                first_client = first_client or proc
            if k == 0:
                failpoints.reached("mid-test")
            for j, (s, ph, proc, deadline) in enumerate(going):
                try:    # the first waits its whole timeout; the rest what is left of theirs
                    out = proc.wait(ph.timeout if j == 0 else max(0.0, deadline - time.monotonic()))
                except TimeoutError:
                    out = dataclasses.replace(proc.stop(), returncode=None)
                s.outs.append((ph, out))
                if s.tool.adaptive and rows[s.index] is None:   # its next phase from all so far
                    nxt = s.tool.next_phase(s.spec, [PhaseOutput(p.name, o.stdout, o.stderr, o.returncode)
                                                     for p, o in s.outs])
                    if nxt is not None:
                        s.phases.append(nxt)
            running.clear()
            k += 1
        wall = time.monotonic() - t0
        cpu_samples: list[Sample] = []
        if meter is not None and first_client is not None:
            cpu_samples = meter.end(begun, first_client, started[0].server, wall)
            sleeve_b = daemon_seconds(tb, dp)
            if sleeve_a is not None and sleeve_b is not None and wall > 0:
                cpu_samples.append(Sample("cpu_sleeve_pct", round(100 * (sleeve_b - sleeve_a) / wall, 2), "pct"))
        died = daemon_death(tb, dp)
        measured = [s for s in started if s.outs]
        srv_outs: dict[int, Completed] = {}
        for s in measured:
            raw = raw_name(cases[s.index])
            for ph, out in s.outs:
                save(store, f"{raw}.{ph.name}.client" if ph.name else f"{raw}.client", out)
            if s.server is not None:
                srv_outs[s.index] = s.server.stop()
                save(store, f"{raw}.server", srv_outs[s.index])
        if measured:
            snap = mode.counters(tb, dp)
            if snap:
                for s in measured:
                    store.save_raw(f"{raw_name(cases[s.index])}.counters.json", json.dumps(snap, indent=1))
        for s in measured:
            if rows[s.index] is not None:
                continue
            if died:
                fail(s.index, died)
                continue
            rows[s.index] = _parse(rec, cases[s.index], dp, s, srv_outs.get(s.index), cpu_samples)
    finally:
        for proc in running + [s.server for s in started]:
            if proc is not None and proc.poll() is None:
                proc.stop()
    out = [r if r is not None else [rec.failed(c, dp.kind, "not measured", dp.overlay_mtu)]
           for r, c in zip(rows, cases)]
    every = len(host_errors) == len(cases)
    return Outcome(out, host_errors[-1] if every and host_errors else None)


def _parse(rec: Recorder, case: Case, dp: Datapath, s: _Started, srv_out: Completed | None,
           cpu_samples: list[Sample]) -> list[Measurement]:
    if len(s.outs) == 1 and not s.outs[0][0].name:
        out = s.outs[0][1]
        res = s.tool.parse(out.stdout, out.stderr, out.returncode)
    else:
        outs = [PhaseOutput(ph.name, o.stdout, o.stderr, o.returncode) for ph, o in s.outs]
        res = s.tool.parse_adaptive(s.spec, outs) if s.tool.adaptive else s.tool.parse_phases(outs)
    if not res.ok:
        reason = res.error or "tool failed"
        if srv_out is not None and srv_out.returncode not in (0, None, -15) and srv_out.stderr.strip():
            reason += f" (server: {srv_out.stderr.strip().splitlines()[-1]})"
        return [rec.failed(case, dp.kind, reason, dp.overlay_mtu)]
    samples = [x for x in res.samples if not x.metric.startswith("cpu_")] + cpu_samples
    return [rec.row(case, dp.kind, x, intervals=res.intervals if x.metric == "throughput_bps" and res.intervals
                    else None, overlay_mtu=dp.overlay_mtu)
            for x in samples]


def daemon_seconds(tb: Testbed, dp: Datapath) -> float | None:
    """CPU seconds all of the data path's daemons have used so far (None: no daemons)."""
    if not dp.processes:
        return None
    total = 0.0
    for side_index, proc in dp.processes.items():
        if proc.pid is None:
            return None
        secs = cpu.process_seconds(tb.sides[side_index].host, proc.pid)
        if secs is None:
            return None
        total += secs
    return total
