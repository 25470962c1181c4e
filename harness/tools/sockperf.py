"""sockperf ping-pong: UDP/TCP latency with its tail (percentiles up to 99.9).

The server (`sockperf sr -i ADDR -p PORT [--tcp]`) serves until it is stopped; the UDP one
only binds its socket, it never listens. The client (`sockperf pp ... -t SECONDS`) keeps one
message in flight and prints, on stdout:

    sockperf: ====> avg-latency=25.195 (std-dev=9.403)
    sockperf: ---> <MAX> observation =  990.561
    sockperf: ---> percentile 99.900 =   52.858
    sockperf: ---> <MIN> observation =    9.393

Every figure is in µs and one-way: half of each measured round trip, as qperf's latency.
sockperf's man page says so, and with --full-rtt (not used here) the same run prints
`avg-rtt=` and figures about twice as large. Quirks seen in real output (sockperf 3.7):
- sockperf exits 0 whatever happens: a refused TCP connection ("ERROR: Can`t connect
  socket (errno=111 Connection refused)"), a UDP server that never answers ("No messages
  were received from the server. Is the server down?"), even an unknown option (it prints
  its usage). Failure is read from the output, never from the exit status alone.
- Everything goes to stdout, with ANSI colour codes even into a file.
- The figures cover the "valid duration" only (about 1.55 s of -t 2): the first 400 ms
  of warm-up and the end of the run are left out.
"""

from __future__ import annotations

import logging
import re

from harness.core.samples import Sample
from harness.tools.base import TestSpec, Tool, ToolResult
from harness.tools.common import exit_reason, failed, last_line, whole_seconds

log = logging.getLogger(__name__)

DEFAULT_PORT = 11111

# metric → the percentile sockperf prints it as
PERCENTILES = {"latency_p50_us": 50.0, "latency_p90_us": 90.0, "latency_p99_us": 99.0,
               "latency_p999_us": 99.9}

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_AVG = re.compile(r"avg-(lat|latency|rtt)=\s*([\d.]+)")
_PERCENTILE = re.compile(r"---> percentile\s+([\d.]+)\s*=\s*([\d.]+)")
_OBSERVATION = re.compile(r"---> <(MAX|MIN)> observation\s*=\s*([\d.]+)")
_MESSAGES = re.compile(r"SentMessages=(\d+); ReceivedMessages=(\d+)")
_DROPPED = re.compile(r"# dropped messages = (\d+)")
_PROBLEM = re.compile(r"ERROR|Invalid|No messages were received")


class SockperfPingPong(Tool):
    """sockperf ping-pong over UDP (sockperf.pingpong) or TCP (sockperf.pingpong_tcp)."""

    latency = True
    binary = "sockperf"
    package = "sockperf"
    version_argv = ("sockperf", "--version")
    version_re = r"sockperf, version (\d+(?:\.\d+)*)"
    needs_server = True
    server_exits = False      # the runner stops the server after the client is done

    def __init__(self, protocol: str):
        if protocol not in ("udp", "tcp"):
            raise ValueError(f"unsupported sockperf protocol {protocol!r}")
        self.protocol = protocol
        self.name = "sockperf.pingpong" if protocol == "udp" else "sockperf.pingpong_tcp"
        self.listen = protocol    # the UDP server binds a socket; the TCP one listens

    def _tcp(self) -> list[str]:
        return ["--tcp"] if self.protocol == "tcp" else []

    def server_argv(self, spec: TestSpec) -> list[str]:
        # its own address where the client reaches another (a Service's): it binds one address
        return ["sockperf", "sr", "-i", spec.bind_addr or spec.server_addr,
                "-p", str(spec.port or DEFAULT_PORT)] + self._tcp()

    def client_argv(self, spec: TestSpec) -> list[str]:
        return ["sockperf", "pp", "-i", spec.server_addr, "-p", str(spec.port or DEFAULT_PORT),
                "-t", str(whole_seconds(spec.duration))] + self._tcp()

    def timeout(self, spec: TestSpec) -> float:
        # -t plus 400 ms of warm-up; a TCP connect to nowhere blocks until this limit
        return whole_seconds(spec.duration) + 15

    def parse(self, stdout: str, stderr: str, returncode: int | None) -> ToolResult:
        lines = clean_lines(stdout + "\n" + stderr)
        problem = next((ln for ln in lines if _PROBLEM.search(ln)), None)
        avg = next((m for m in map(_AVG.search, lines) if m), None)
        if returncode != 0:
            reason = exit_reason("sockperf", returncode, problem or last_line("\n".join(lines)))
        elif problem:
            reason = f"sockperf: {problem}"
        elif avg is None:
            usage = any(ln.startswith("Usage: sockperf") for ln in lines)
            reason = ("sockperf printed its usage: bad arguments" if usage else
                      f"sockperf printed no results{': ' + lines[-1] if lines else ''}")
        elif avg[1] == "rtt":
            reason = "sockperf printed round trips (--full-rtt), not one-way latency"
        else:
            try:
                return ToolResult(samples=latency_samples(float(avg[2]), lines), ok=True)
            except KeyError as e:
                reason = f"sockperf printed no {e.args[0]}"
        log.debug("sockperf %s failed: %s", self.protocol, reason)
        return failed(reason)


def clean_lines(text: str) -> list[str]:
    """Non-blank lines without colour codes or the `sockperf: ` prefix."""
    lines = (_ANSI.sub("", raw).strip() for raw in text.splitlines())
    return [ln.removeprefix("sockperf: ") for ln in lines if ln]


def _printed(lines: list[str]) -> dict[float | str, float]:
    """Every percentile sockperf printed (by its percent) and its <MAX>/<MIN> observations."""
    printed: dict[float | str, float] = {}
    for ln in lines:
        if m := _PERCENTILE.search(ln):
            printed[float(m[1])] = float(m[2])
        elif m := _OBSERVATION.search(ln):
            printed[m[1]] = float(m[2])
    return printed


def latency_samples(avg_us: float, lines: list[str]) -> list[Sample]:
    """avg-latency, the percentiles in PERCENTILES and <MAX>/<MIN>, all in µs;
    KeyError naming the first one missing."""
    printed = _printed(lines)
    wanted = {**PERCENTILES, "latency_max_us": "MAX", "latency_min_us": "MIN"}
    samples = [Sample("latency_us", avg_us, "us")]
    for metric, key in wanted.items():
        if key not in printed:
            raise KeyError(f"{key:.3f} percentile" if isinstance(key, float) else f"<{key}>")
        samples.append(Sample(metric, printed[key], "us"))
    return samples


def round_trips(stdout: str, stderr: str, returncode: int | None) -> tuple[dict[str, float], str | None]:
    """One `sockperf pp --full-rtt` client's output → ({"mean", "min", "max", "p50" … "p999",
    "loss", "sent"} in µs and %, over sockperf's valid duration, None), or ({}, why not).
    A ping-pong keeps one message in flight and waits for its reply without a timeout: one
    lost message or reply stalls it to the end of the run, and it then prints its
    `[Total Run]` line (one more sent than answered) and no figures."""
    lines = clean_lines(stdout + "\n" + stderr)
    problem = next((ln for ln in lines if _PROBLEM.search(ln)), None)
    avg = next((m for m in map(_AVG.search, lines) if m), None)
    if returncode != 0:
        return {}, exit_reason("sockperf", returncode, problem or last_line("\n".join(lines)))
    if problem:
        return {}, f"sockperf: {problem}"
    total, valid = (next((m for ln in lines if ln.startswith(f"[{what}]") and (m := _MESSAGES.search(ln))), None)
                    for what in ("Total Run", "Valid Duration"))
    if avg is None and total is not None and valid is None and int(total[1]) > int(total[2]):
        return {}, (f"sockperf: a message or its reply was lost and the ping-pong waited for it to the end "
                    f"({total[1]} sent, {total[2]} answered)")
    if avg is None or valid is None:
        usage = any(ln.startswith("Usage: sockperf") for ln in lines)
        return {}, ("sockperf printed its usage: bad arguments" if usage else
                    f"sockperf printed no results{': ' + lines[-1] if lines else ''}")
    if avg[1] != "rtt":
        return {}, "sockperf printed one-way latency, not round trips (--full-rtt)"
    printed, sent = _printed(lines), int(valid[1])
    dropped = next((int(m[1]) for m in map(_DROPPED.search, lines) if m), 0)
    wanted = {"min": "MIN", "max": "MAX", **{p: PERCENTILES[f"latency_{p}_us"] for p in ("p50", "p90", "p99", "p999")}}
    missing = next((k for k in wanted.values() if k not in printed), None)
    if missing is not None or sent == 0:
        what = "messages in its valid duration" if missing is None else (
            f"{missing:.3f} percentile" if isinstance(missing, float) else f"<{missing}>")
        return {}, f"sockperf printed no {what}"
    got = {k: printed[v] for k, v in wanted.items()}
    return {**got, "mean": float(avg[2]), "loss": 100.0 * dropped / sent, "sent": float(sent)}, None
