"""Several pairs measured at the same time on one deployment: the `rounds` and `mesh` schedules.

The runner hands over a set of cases that differ only in their pair. Each gets its own
ports (the tool's fixed ports plus 2 × its place in the set), so two servers on one host
never collide; every server must listen before any client starts, then every client starts
at once and each is waited for within its own deadline. Each case is parsed alone, as a
sequential case is, and the set's lines are stored as one batch (a kill keeps all of them
or none, so `--resume` measures a set again whole). CPU is not recorded: the set shares
the machine, and no share of it is one pair's. A case whose server never listens, or whose
host fails under it, fails alone; the others of the set are measured.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from typing import TYPE_CHECKING

from harness.core.errors import HarnessError
from harness.hosts.base import Completed
from harness.run.endpoints import endpoints
from harness.run.procs import PORTS, daemon_death, raw_name, save, wait_listening
from harness.tools import get as get_tool
from harness.tools.base import TestSpec

if TYPE_CHECKING:
    from harness.modes.base import Datapath
    from harness.results import Measurement
    from harness.run.runner import Runner
    from harness.run.scenario import Case

log = logging.getLogger(__name__)


def sets(cases: list[Case], schedule: str, rounds: list[list[tuple[str, str]]] | None = None) -> list[list[Case]]:
    """A deployment's cases in the sets measured together, in run order: one case a set for
    `sequential`; for `rounds`, the cases of one configuration whose pairs share a round;
    for `mesh`, every pair of one configuration."""
    if schedule == "sequential":
        return [[c] for c in cases]
    round_of = {p: i for i, r in enumerate(rounds or []) for p in r}
    configs: dict[tuple, int] = {}
    out: dict[tuple, list[Case]] = {}
    for c in cases:
        config = configs.setdefault((c.placement, c.test, c.streams), len(configs))
        out.setdefault((config, round_of.get((c.src, c.dst), 0) if schedule == "rounds" else 0), []).append(c)
    # within a set, the pairs in their round's order
    order = {p: j for r in rounds or [] for j, p in enumerate(r)}
    return [sorted(out[k], key=lambda c: order.get((c.src, c.dst), 0)) for k in sorted(out)]


def measure(runner: Runner, cases: list[Case], dp: Datapath) -> list[list[Measurement]]:
    """Measure `cases` at once (module doc); one list of lines per case, in order."""
    rows: list[list[Measurement] | None] = [None] * len(cases)
    started = []          # (index, tool, spec, client endpoint, server process or None, server endpoint)
    clients = []          # (index, client process, deadline)
    try:
        for i, case in enumerate(cases):
            tool = get_tool(case.test)
            try:
                client, server = endpoints(runner.tb, dp, case.placement, case.src, case.dst)
                base, data = PORTS.get(tool.binary, (None, None))
                spec = TestSpec(server_addr=server.addr, duration=runner.sc.duration, streams=case.streams,
                                overlay_mtu=dp.overlay_mtu, port=None if base is None else base + 2 * i,
                                data_port=None if data is None else data + 2 * i)
                argv = tool.server_argv(spec)
                srv = server.host.start(argv) if argv else None
            except HarnessError as e:
                rows[i] = [runner._failed(case, dp.kind, str(e))]
                continue
            started.append((i, tool, spec, client, srv, server))
        for i, tool, spec, client, srv, server in list(started):
            why = wait_listening(server.host, spec.port, srv, proto=tool.listen) if srv and spec.port else None
            if why:
                save(runner.store, f"{raw_name(cases[i])}.server", srv.stop())
                rows[i] = [runner._failed(cases[i], dp.kind, why)]
                started.remove((i, tool, spec, client, srv, server))
        for i, tool, spec, client, srv, server in started:
            try:
                clients.append((i, client.host.start(tool.client_argv(spec)), time.monotonic() + tool.timeout(spec)))
            except HarnessError as e:
                rows[i] = [runner._failed(cases[i], dp.kind, str(e))]
        outs: dict[int, Completed] = {}
        for i, cli, deadline in clients:
            try:
                outs[i] = cli.wait(max(0.0, deadline - time.monotonic()))
            except TimeoutError:
                outs[i] = dataclasses.replace(cli.stop(), returncode=None)
        died = daemon_death(runner.tb, dp)
        for i, tool, spec, client, srv, server in started:
            if i not in outs:
                continue
            raw = raw_name(cases[i])
            save(runner.store, f"{raw}.client", outs[i])
            srv_out = srv.stop() if srv is not None else None
            if srv_out is not None:
                save(runner.store, f"{raw}.server", srv_out)
            if died:
                rows[i] = [runner._failed(cases[i], dp.kind, died)]
                continue
            res = tool.parse(outs[i].stdout, outs[i].stderr, outs[i].returncode)
            if not res.ok:
                rows[i] = [runner._failed(cases[i], dp.kind, res.error or "tool failed")]
                continue
            rows[i] = [runner._measurement(cases[i], dp.kind, s, intervals=res.intervals
                                           if s.metric == "throughput_bps" and res.intervals else None)
                       for s in res.samples if not s.metric.startswith("cpu_")]
    finally:
        for proc in [c for _i, c, _d in clients] + [s for _i, _t, _p, _c, s, _e in started]:
            if proc is not None and proc.poll() is None:
                proc.stop()
    return [r if r is not None else [runner._failed(c, dp.kind, "not measured")] for r, c in zip(rows, cases)]
