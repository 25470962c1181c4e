"""A case's processes on its hosts: fixed ports, waiting for a server, keeping what a tool
printed, and noticing a data path's daemon gone: the pieces of run/case.py's routine that
the runner also needs (a daemon gone between sets)."""

from __future__ import annotations

import json
import signal
import time

from harness.bed import Testbed
from harness.hosts.base import Completed, Host
from harness.modes.base import Datapath
from harness.results import RunStore
from harness.run.scenario import Case

# Fixed ports: reproducible, and what a firewall rule would name (the tools' own defaults;
# sockperf's documented example port; a probe's data port carries load.irtt's and load.sockperf's
# working load).
PORTS = {"iperf3": (5201, None), "qperf": (19765, 19766), "sockperf": (11111, 11112), "iperf": (5001, None),
         "irtt": (2112, 2113), "blast": (9000, None)}
# Deadlines catch a hang, never judge speed: a server listens within milliseconds, and 30 s
# holds on a machine whose CPUs something else keeps busy.
SERVER_READY_TIMEOUT = 30.0


def raw_name(case: Case) -> str:
    return f"{case.key.replace('/', '_')}_r{case.repeat}"


def wait_listening(host: Host, port: int, proc, timeout: float = SERVER_READY_TIMEOUT,
                   proto: str = "tcp") -> str | None:
    """Wait until something listens on TCP `port` (or, proto "udp", has UDP `port` bound) on
    `host`; the reason if it never does."""
    flags = "-Hlun" if proto == "udp" else "-Hltn"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            out = proc.wait(0)
            return f"server exited {out.returncode} before listening: {(out.stderr or out.stdout).strip()[-300:]}"
        done = host.run(["ss", flags, f"sport = :{port}"], check=False, timeout=5)
        if done.ok and done.stdout.strip():
            return None
        time.sleep(0.05)
    return f"server not listening on port {port} after {timeout:.0f}s"


def daemon_death(testbed: Testbed, dp: Datapath) -> str | None:
    """Why a data path's daemon is gone ("sleeve on h1 died (signal 8 SIGFPE): …"), or None."""
    for side_index, proc in sorted(dp.processes.items()):
        rc = proc.poll()
        if rc is None:
            continue
        out = proc.wait(0)
        how = f"signal {-rc}, {signal.Signals(-rc).name}" if rc < 0 and -rc in signal.valid_signals() \
            else f"exit {rc}"
        last = (out.stderr.strip() or out.stdout.strip()).splitlines()[-1:]
        return (f"{dp.kind} on {testbed.sides[side_index].host.name} died ({how})"
                + (f": {last[0][-300:]}" if last else ""))
    return None


def save(store: RunStore, name: str, c: Completed) -> None:
    """The tool's own stdout as it printed it, and how it was run beside it."""
    store.save_raw(f"{name}.out", c.stdout)
    store.save_raw(f"{name}.cmd.json", json.dumps({"argv": c.argv, "exit": c.returncode,
                                                   "stderr": c.stderr}, indent=1))
