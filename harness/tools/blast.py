"""blast (overlay/blast): UDP packet rate from a batching sender of the project's own.

iperf3 sends one datagram per syscall from one thread, so at small payloads its packet rate
is often the generator's, not the path's. `blast send` batches sendmmsg over FLOWS connected
sockets (one per flow, each to its own port, so receive-side steering can spread them) and
`blast recv` counts with recvmmsg on one bound socket per flow. Two senders, two tests each:

- udp.ppsN: through the UDP sockets (no privilege: a Pod Security "restricted" pod runs it);
- packet.ppsN: `--packet`, the same datagrams written whole into a packet socket on the
  route's device past its qdisc (CAP_NET_RAW), as a packet generator does: the sender's own
  UDP, routing and qdisc work is left out of every packet, so more of one CPU goes to the path.
 When the send window ends,
the sender asks the receiver for its counts of that run over the path itself and prints one
JSON line with both sides (overlay/blast/README.md). Per run:

- `pps`: datagrams the receiver got per second of the send window;
- `sent_pps`: what the sender managed; `loss_pct`: the share of sent datagrams not counted;
- `socket_drops`: the receiving sockets' own drop counter (SO_RXQ_OVFL) over the run;
- `sender_cpu_pct`: the sender's CPU (user + system) as % of one CPU;
- `sender_wait_pct`: how long the sender waited, runnable, for a CPU, as % of the window
  (its schedstat run delay): a sender starved by the machine rather than blocked by the path;
- `sender_bound` (1/0): the sender was the limit, not the path: it fell short of a rate it
  was asked for, or, asked for all it could, nothing was lost while it ran or waited to run
  for the whole window (a CPU of its own saturated, or a share of a busy one: starved).
"""

from __future__ import annotations

import json
from typing import Any

from harness.core.samples import Sample
from harness.sleeve import blast as blast_build
from harness.tools.base import TestSpec, Tool, ToolResult
from harness.tools.common import exit_reason, failed

DEFAULT_PORT = 9000
FLOWS = 4
MIN_PAYLOAD = 18               # blast's own header: magic, run, sequence number, flow
MAX_PAYLOAD = 65507
SHORT_OF_ASKED = 0.95          # sent under this share of an asked rate: the sender fell short
CLEAN_LOSS_PCT = 0.1           # under this loss the path kept up with everything sent
SATURATED_CPU_PCT = 90.0       # a sender at this share of one CPU could not go faster
RECV_MARGIN = 30.0             # the receiver's hard bound past the client's own


def send_argv(binary: str, spec: TestSpec, size: int, duration: float, rate: float = 0.0,
              packet: bool = False) -> list[str]:
    """`blast send` of `size`-byte payloads for `duration` s at `rate` packets/s (0: all it
    can); `packet`: through a packet socket (--packet)."""
    return [binary, "send", "--addr", spec.server_addr, "--port", str(spec.port or DEFAULT_PORT),
            "--flows", str(FLOWS), "--size", str(size), "--mtu", str(spec.overlay_mtu),
            "--duration", f"{duration:g}", "--rate", f"{rate:.0f}"] + (["--packet"] if packet else [])


def recv_argv(binary: str, spec: TestSpec, bound: float) -> list[str]:
    argv = [binary, "recv", "--port", str(spec.port or DEFAULT_PORT), "--flows", str(FLOWS),
            "--mtu", str(max(spec.overlay_mtu, 1500)), "--duration", f"{bound:g}"]
    return argv + (["--addr", spec.bind_addr] if spec.bind_addr else [])


def last_json(stdout: str, role: str) -> dict[str, Any] | None:
    """The last JSON line whose "blast" is `role`; None if there is none."""
    for line in reversed(stdout.strip().splitlines()):
        try:
            doc = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(doc, dict) and doc.get("blast") == role:
            return doc
    return None


def sender_bound(asked: float, sent_pps: float, loss_pct: float, cpu_pct: float, wait_pct: float = 0.0) -> bool:
    """Whether the sender, not the path, set the rate (module doc). Unpaced and lossless, a
    sender that ran or waited for a CPU nearly all the window set the rate; one that spent
    the window blocked (a path's back-pressure) did not."""
    if asked > 0:
        return sent_pps < SHORT_OF_ASKED * asked
    return loss_pct < CLEAN_LOSS_PCT and cpu_pct + max(0.0, wait_pct) >= SATURATED_CPU_PCT


def figures(doc: dict[str, Any]) -> list[Sample]:
    """A sender's JSON line (with its receiver's report) → the samples; ValueError if it lacks them."""
    rx = doc.get("receiver")
    if not isinstance(rx, dict):
        raise ValueError("the receiver's counts never came back (no receiver, or the path lost every ask)")
    sent, seconds = int(doc["sent"]), float(doc["seconds"])
    got, asked = int(rx["packets"]), float(doc["asked_pps"])
    if seconds <= 0 or sent < 0 or got < 0:
        raise ValueError(f"{sent} sent, {got} received in {seconds} s")
    sent_pps = sent / seconds
    loss = 100.0 * max(0, sent - got) / sent if sent else 100.0
    cpu = 100.0 * float(doc["cpu_s"]) / seconds
    wait = float(doc.get("wait_s", -1))          # older senders, or a kernel without schedstat: unknown
    out = [Sample("pps", got / seconds, "pps"), Sample("sent_pps", sent_pps, "pps"),
           Sample("loss_pct", loss, "pct"), Sample("socket_drops", float(rx["drops"]), "count"),
           Sample("sender_cpu_pct", round(cpu, 2), "pct")]
    if wait >= 0:
        out.append(Sample("sender_wait_pct", round(100.0 * wait / seconds, 2), "pct"))
    return out + [Sample("sender_bound", float(sender_bound(asked, sent_pps, loss, cpu, 100.0 * wait / seconds)),
                         "bool")]


def parse_send(stdout: str, stderr: str, returncode: int | None) -> ToolResult:
    """Pure: `blast send`'s output → its samples, or why there are none."""
    doc = last_json(stdout, "send")
    if returncode != 0 or doc is None:
        return failed(exit_reason("blast", returncode, stderr) if returncode != 0
                      else "blast printed no result line")
    try:
        return ToolResult(samples=figures(doc), ok=True)
    except (KeyError, TypeError, ValueError) as e:
        return failed(f"blast: {e}")


class Blast(Tool):
    """Built from overlay/blast on this machine (sleeve/blast.py): the lab's hosts run it by
    its absolute path. `binary` names it for the record; preflight asks for `builds`."""

    binary = "blast"
    package = "make gcc"          # built from the project's source: what building it needs
    version_argv = ()
    version_re = ""
    builds = blast_build.BUILD_NEEDS
    needs_server = True
    listen = "udp"
    server_exits = False          # the runner stops the receiver after the sender is done
    port_stride = FLOWS           # the receiver binds FLOWS ports from its first

    def __init__(self, locate=blast_build.local_binary):
        self.locate = locate      # → the binary's path (tests: a fixed name)

    def server_argv(self, spec: TestSpec) -> list[str]:
        return recv_argv(self.locate(), spec, self.timeout(spec) + RECV_MARGIN)


class BlastPps(Blast):
    """udp.ppsN (packet.ppsN with `packet`): N-byte payloads as fast as blast sends them, for
    the test's duration."""

    def __init__(self, size: int, locate=blast_build.local_binary, packet: bool = False):
        super().__init__(locate)
        if not MIN_PAYLOAD <= size <= MAX_PAYLOAD:
            raise ValueError(f"blast payload must be {MIN_PAYLOAD}..{MAX_PAYLOAD} bytes, not {size}")
        self.name = f"{'packet' if packet else 'udp'}.pps{size}"
        self.payload = size
        self.packet = packet

    def client_argv(self, spec: TestSpec) -> list[str]:
        return send_argv(self.locate(), spec, self.payload, spec.duration, packet=self.packet)

    def timeout(self, spec: TestSpec) -> float:
        return spec.duration + 15  # the report's ask (1.5 s) and a loaded machine on top

    def parse(self, stdout: str, stderr: str, returncode: int | None) -> ToolResult:
        return parse_send(stdout, stderr, returncode)
