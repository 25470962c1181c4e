"""load.sockperf: latency under a working load, sockperf's ping-pong every 100 µs.

sockperf's ping-pong client (tools/sockperf.py) keeps one 14-byte UDP message in flight,
sends the next at the following 100 µs slot (`--mps 10000`) once the reply is back, and
reports every round trip to the nanosecond (`--full-rtt`), its percentiles over the valid
duration (the run less its first 400 ms and its end). A probe every 100 µs keeps the CPUs
from going idle between probes, so the idle tail is the path's rather than a vCPU's
wake-up (load.irtt's probe a millisecond leaves them time to). The two phases, the server's
shell and the figures are every under-load probe's (tools/underload.py).

Its limit: the ping-pong waits for each reply without a timeout, so one lost message or
reply stalls it to the end of the phase, and the case fails saying so (irtt counts losses
and goes on: load.irtt is the probe for a path that drops).
"""

from __future__ import annotations

from harness.tools import sockperf
from harness.tools.base import TestSpec
from harness.tools.common import whole_seconds
from harness.tools.underload import Figures, LoadProbe

PROBES_PER_S = 10_000     # --mps: a probe every 100 µs


class LoadSockperf(LoadProbe):
    name = "load.sockperf"
    binary = "sockperf"
    package = "sockperf"
    version_argv = sockperf.SockperfPingPong.version_argv
    version_re = sockperf.SockperfPingPong.version_re
    default_port = sockperf.DEFAULT_PORT

    def probe_server(self, spec: TestSpec) -> list[str]:
        return sockperf.SockperfPingPong("udp").server_argv(spec)

    def probe(self, spec: TestSpec) -> list[str]:
        return ["sockperf", "pp", "-i", spec.server_addr, "-p", str(spec.port or self.default_port),
                "-t", str(whole_seconds(spec.duration)), f"--mps={PROBES_PER_S}", "--full-rtt"]

    def probe_limit(self, spec: TestSpec) -> float:
        return whole_seconds(spec.duration) + 15      # its warm-up; a stalled ping-pong ends at -t

    def round_trips(self, stdout: str, stderr: str, returncode: int | None) -> tuple[Figures, str | None]:
        return sockperf.round_trips(stdout, stderr, returncode)
