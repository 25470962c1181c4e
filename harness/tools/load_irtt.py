"""load.irtt: latency under a working load, irtt's probe timed to the nanosecond.

irtt (tools/irtt.py) sends one 60-byte UDP probe a millisecond and reports each round trip
in nanoseconds; the percentiles are nearest ranks over every probe that came back. The two
phases, the server's shell and the figures are every under-load probe's (tools/underload.py).
A probe a millisecond leaves the CPUs time to go idle between probes: on a VM, waking one
sets the idle tail (load.sockperf's probe every 100 µs keeps them busy).
"""

from __future__ import annotations

from harness.tools import irtt
from harness.tools.base import TestSpec
from harness.tools.underload import Figures, LoadProbe


class LoadIrtt(LoadProbe):
    name = "load.irtt"
    binary = "irtt"
    package = "irtt"
    version_argv = irtt.IrttUdp.version_argv
    version_re = irtt.IrttUdp.version_re
    default_port = irtt.DEFAULT_PORT

    def probe_server(self, spec: TestSpec) -> list[str]:
        return irtt.IrttUdp().server_argv(spec)

    def probe(self, spec: TestSpec) -> list[str]:
        return irtt.IrttUdp().client_argv(spec)

    def round_trips(self, stdout: str, stderr: str, returncode: int | None) -> tuple[Figures, str | None]:
        return irtt.round_trips(stdout, stderr, returncode)
