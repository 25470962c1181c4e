"""qperf: TCP/UDP bandwidth and latency.

The server (`qperf -lp PORT`) serves until it is stopped. The client runs with `-uu`
(fixed units, no thousands separators: `bw = 1269006336 bytes/sec`, `latency = 9808 ns`)
and `-v`. Quirks seen in real output:
- qperf prints its errors ("198.18.0.2: failed to connect") on STDOUT, after the test's
  header line, and exits 1.
- `latency` is qperf's one-way figure, half the measured round trip (ping reports the
  whole round trip).
- `-v` does not print message counts for udp_bw (`-vv` and `-vs` do); loss then comes
  from send_bw and recv_bw, which measure the same messages over the same time.
- *_cpus_used is the whole machine's CPU, in % of one CPU (195 on 2 vCPUs); in the lab
  both ends share the machine, so it is not reported as a per-end figure here.
"""

from __future__ import annotations

import logging
import re

from harness.core.samples import Sample
from harness.tools.base import TestSpec, Tool, ToolResult
from harness.tools.common import exit_reason, failed, last_line, udp_payload, whole_seconds

log = logging.getLogger(__name__)

DEFAULT_PORT = 19765
DEFAULT_DATA_PORT = 19766

BITS_PER_SECOND = {"bytes/sec": 8.0, "KB/sec": 8e3, "MB/sec": 8e6, "GB/sec": 8e9,
                   "TB/sec": 8e12}
MICROSECONDS = {"ns": 1e-3, "us": 1.0, "ms": 1e3, "sec": 1e6}

_HEADER = re.compile(r"^(\w+):$")
_FIELD = re.compile(r"^(\w+)\s*=\s*([\d,.]+)\s*(.*?)\s*$")


class Qperf(Tool):
    """One qperf test (tcp_bw, tcp_lat, udp_bw, udp_lat)."""

    binary = "qperf"
    package = "qperf"
    version_argv = ("qperf", "--version")
    version_re = r"qperf (\S+)"
    needs_server = True
    server_exits = False      # the runner stops the server after the client is done

    def __init__(self, test: str):
        if test not in ("tcp_bw", "tcp_lat", "udp_bw", "udp_lat"):
            raise ValueError(f"unsupported qperf test {test!r}")
        self.test = test
        self.name = f"qperf.{test}"
        self.latency = test.endswith("_lat")

    def server_argv(self, spec: TestSpec) -> list[str]:
        return ["qperf", "-lp", str(spec.port or DEFAULT_PORT)]

    def client_argv(self, spec: TestSpec) -> list[str]:
        argv = ["qperf", "-lp", str(spec.port or DEFAULT_PORT),
                "-ip", str(spec.data_port or DEFAULT_DATA_PORT),
                "-t", str(whole_seconds(spec.duration)), "-uu", "-v"]
        if self.test == "udp_bw":
            # the default 32 KiB messages would be IP-fragmented
            argv += ["-m", str(udp_payload(spec.overlay_mtu, spec.server_addr))]
        return argv + [spec.server_addr, self.test]

    def timeout(self, spec: TestSpec) -> float:
        # qperf gives up connecting after about 5 s on its own
        return whole_seconds(spec.duration) + 15

    def parse(self, stdout: str, stderr: str, returncode: int | None) -> ToolResult:
        fields, unparsed = parse_fields(stdout)
        if returncode != 0 or unparsed:
            reason = error_reason(unparsed, stderr, returncode)
            log.debug("qperf %s failed: %s", self.test, reason)
            return failed(reason)
        try:
            samples = (bw_samples(fields) if self.test.endswith("_bw") else lat_samples(fields))
        except (KeyError, ValueError) as e:
            return failed(f"qperf {self.test}: output lacks {e}" if isinstance(e, KeyError)
                          else f"qperf {self.test}: {e}")
        return ToolResult(samples=samples, ok=True)


def parse_fields(stdout: str) -> tuple[dict[str, tuple[float, str]], list[str]]:
    """`name = value unit` lines as {name: (value, unit)}, and the lines that are neither
    such a field nor a test header (qperf's error messages)."""
    fields: dict[str, tuple[float, str]] = {}
    unparsed: list[str] = []
    for raw in stdout.splitlines():
        line = raw.strip()
        if not line or _HEADER.match(line):
            continue
        m = _FIELD.match(line)
        value = _number(m[2]) if m else None
        if m and value is not None:
            fields[m[1]] = (value, m[3])
        else:
            unparsed.append(line)
    return fields, unparsed


def _number(text: str) -> float | None:
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return None


def error_reason(unparsed: list[str], stderr: str, returncode: int | None) -> str:
    """qperf's own message where it printed one, else how it ended."""
    errors = [ln for ln in stderr.splitlines() if ln.strip() and not ln.startswith("warning:")]
    message = unparsed[-1] if unparsed else last_line("\n".join(errors))
    if returncode is None:
        return f"qperf timed out (killed){': ' + message if message else ''}"
    if message:
        return f"qperf: {message}"
    if returncode != 0:
        return exit_reason("qperf", returncode)
    return "qperf printed no results"


def bits_per_second(field: tuple[float, str]) -> float:
    value, unit = field
    if unit not in BITS_PER_SECOND:
        raise ValueError(f"unknown bandwidth unit {unit!r}")
    return value * BITS_PER_SECOND[unit]


def microseconds(field: tuple[float, str]) -> float:
    value, unit = field
    if unit not in MICROSECONDS:
        raise ValueError(f"unknown time unit {unit!r}")
    return value * MICROSECONDS[unit]


def bw_samples(fields: dict[str, tuple[float, str]]) -> list[Sample]:
    """tcp_bw: `bw`. udp_bw: `recv_bw` is the goodput; loss from the message counts when
    printed (-vv), else from send_bw vs recv_bw."""
    if "bw" in fields:
        return [Sample("throughput_bps", bits_per_second(fields["bw"]), "bps")]
    sent_bps = bits_per_second(fields["send_bw"])
    recv_bps = bits_per_second(fields["recv_bw"])
    if "send_msgs" in fields and "recv_msgs" in fields:
        sent, received = fields["send_msgs"][0], fields["recv_msgs"][0]
    else:
        sent, received = sent_bps, recv_bps
    loss = 100 * (1 - received / sent) if sent > 0 else 100.0
    return [Sample("throughput_bps", recv_bps, "bps"),
            Sample("loss_pct", max(0.0, loss), "pct")]


def lat_samples(fields: dict[str, tuple[float, str]]) -> list[Sample]:
    """tcp_lat / udp_lat: qperf's one-way latency (half the round trip)."""
    return [Sample("latency_us", microseconds(fields["latency"]), "us")]
