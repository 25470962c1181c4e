"""What every measurement tool provides: argv builders and a pure parser.

A tool never runs anything itself. The runner asks it for the server and client
argv, runs them on the endpoints, and hands the captured output to `parse`, which
is a pure function of (stdout, stderr, returncode) and is tested on real captures
under tests/data/.
"""

from __future__ import annotations

import abc
import dataclasses

from harness.core.errors import HarnessError
from harness.core.samples import Sample


# The one metric a tool may give several samples of in one run: one per parallel stream.
PER_STREAM_METRIC = "stream_throughput_bps"


@dataclasses.dataclass(frozen=True)
class ToolResult:
    samples: list[Sample]
    ok: bool
    error: str | None = None
    # Per-interval series where the tool reports one: [(seconds since start, bits/s), ...]
    intervals: list[tuple[float, float]] = dataclasses.field(default_factory=list)


@dataclasses.dataclass(frozen=True)
class TestSpec:
    __test__ = False  # not a pytest class, whatever imports it
    """Everything a tool needs to build its command lines for one case."""

    server_addr: str          # address the client connects to
    duration: float           # seconds of load; every load is bounded
    streams: int = 1
    overlay_mtu: int = 1500   # MTU of the path the traffic takes (to size UDP messages)
    reverse: bool = False
    port: int | None = None   # control port; tool default when None
    data_port: int | None = None
    bind_addr: str | None = None     # the server's own address, where the client reaches another
    # A stepped test's offered loads in bits/s, lowest first (the UDP sweeps); () is the
    # tool's own default steps.
    rates: tuple[float, ...] = ()
    # A rate search's (PDR loss %, precision %, trials a load) ([search]); () is the tool's own
    # defaults.
    search: tuple[float, float, int] = ()


@dataclasses.dataclass(frozen=True)
class Phase:
    """One client command of a case run in phases: every phase runs against the one server
    the case started, one after the other, each within its own timeout; `name` prefixes
    what it measured (`idle`, `loaded`, `step01` …) and names its raw output."""

    name: str
    argv: list[str]
    timeout: float


@dataclasses.dataclass(frozen=True)
class PhaseOutput:
    """What one phase's client printed (returncode None: killed at its timeout)."""

    name: str
    stdout: str
    stderr: str
    returncode: int | None


class Tool(abc.ABC):
    """One test of a measurement tool: its command lines, its parser, and what installs it."""

    name: str                 # "iperf3.tcp", "qperf.tcp_lat", "ping.flood", ...
    binary: str               # what must be installed: "iperf3", "qperf", "ping"
    also_needs: tuple[str, ...] = ()   # other commands it runs (load.irtt's working load: iperf)
    package: str              # the Debian package that installs it
    version_argv: tuple[str, ...]   # prints the version, which
    version_re: str                 # picks out (group 1)
    needs_server: bool = True
    listen: str = "tcp"       # how the server waits for the client: "tcp" (listening) or "udp" (bound)
    payload: int | None = None    # a fixed UDP payload in bytes, checked against the overlay MTU
    parallel: bool = False    # takes the matrix's stream counts (besides iperf3's bulk tests)
    # measures how long something takes (a round trip, a connect): on the lab its idle CPUs
    # poll while it runs, so no mode's latency includes, or is spared, waking a halted CPU
    latency: bool = False
    max_streams: int = 128    # the most streams a case of it may ask for
    # Built from the project's source on this machine (blast) rather than installed: what the
    # build needs on PATH, which preflight asks for instead of `binary`.
    builds: tuple[str, ...] = ()
    port_stride: int = 2      # ports apart the servers of a set's cases are (a server's ports)
    adaptive: bool = False    # chooses its phases as it goes (next_phase)

    def server_argv(self, spec: TestSpec) -> list[str] | None:
        """The server command, run on the far endpoint before the client; None if none."""
        return None

    @abc.abstractmethod
    def client_argv(self, spec: TestSpec) -> list[str]:
        """The client command; it must end by itself within spec.duration plus a margin."""

    def timeout(self, spec: TestSpec) -> float:
        """Hard limit for the client; past it the case is recorded as failed."""
        return spec.duration + 20

    @abc.abstractmethod
    def parse(self, stdout: str, stderr: str, returncode: int | None) -> ToolResult:
        """Pure: captured output → samples, or ok=False with the reason."""

    def phases(self, spec: TestSpec) -> list[Phase] | None:
        """A case run in phases against one server (Phase), or None: one client command,
        `client_argv`, parsed by `parse`."""
        return None

    def next_phase(self, spec: TestSpec, outputs: list[PhaseOutput]) -> Phase | None:
        """An adaptive tool's next phase, chosen from what every phase so far printed (a search
        whose next rate depends on the last trial's loss); None: no more. `phases` gives the
        first ones; the runner asks after each phase."""
        return None

    def parse_adaptive(self, spec: TestSpec, outputs: list[PhaseOutput]) -> ToolResult:
        """Pure: an adaptive tool's phases → the case's samples; `spec` as next_phase had it
        (the choices it made depend on it)."""
        return self.parse_phases(outputs)

    def parse_phases(self, outputs: list[PhaseOutput]) -> ToolResult:
        """Pure: every phase's output, in order, → the case's samples (a tool with phases
        overrides this)."""
        raise NotImplementedError(f"{self.name} has no phases")


class PhasedTool(Tool):
    """A tool whose case runs in phases against one server (`phases`): it has no one client
    command, and its hard limit is its phases' together."""

    phased_as = "phases"      # what its phases are, for the refusal of one client command

    def client_argv(self, spec: TestSpec) -> list[str]:
        raise HarnessError(f"{self.name} runs in phases ({self.phased_as}) against one server: "
                           f"its commands are phases(), not one client command")

    def timeout(self, spec: TestSpec) -> float:
        return sum(p.timeout for p in self.phases(spec) or ())
