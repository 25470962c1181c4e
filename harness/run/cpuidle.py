"""Keep this machine's idle CPUs polling instead of halting while a run measures.

A CPU with nothing to run enters an idle state; on a virtual machine the usual one halts
the vCPU, and waking it is a trip through the hypervisor that a round trip pays whenever
it finds the CPU it needs halted. Whether it does depends on what else runs at that
moment, so short latency tests swing between runs of the same build (BENCHMARKS.md,
"Latency noise and the idle state"). A PM QoS request for a wake-up latency of 0 µs,
written to /dev/cpu_dma_latency and held while its file descriptor stays open, makes
cpuidle choose the POLL state instead: the idle CPU spins and wakes at once. The kernel
drops the request when the descriptor closes, so nothing outlives the run, a killed one
included. Polling counts as idle time in /proc/stat, so CPU figures keep their meaning.

Only where the run measures on this machine (the lab): it changes how this machine's CPUs
idle for the run's duration and nothing else.
"""

from __future__ import annotations

import logging
import os

from harness.core.errors import HarnessError

log = logging.getLogger(__name__)

DEVICE = "/dev/cpu_dma_latency"


class PollIdle:
    """The request, held from `hold()` until `release()` (or the process's end)."""

    def __init__(self, fd: int):
        self._fd: int | None = fd

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
            log.debug("released the CPU latency request on %s", DEVICE)


def available(device: str = DEVICE) -> bool:
    """Whether a request can be held here (root, a kernel with PM QoS)."""
    try:
        hold(device).release()
    except HarnessError as e:
        log.debug("%s", e)
        return False
    return True


def hold(device: str = DEVICE) -> PollIdle:
    """Request a wake-up latency of 0 µs; one line naming the device when that cannot be."""
    try:
        fd = os.open(device, os.O_WRONLY | os.O_CLOEXEC)
    except OSError as e:
        raise HarnessError(f"--poll-idle: cannot request a CPU wake-up latency of 0 ({device}: {e.strerror}); "
                           f"it needs root and a kernel with PM QoS") from e
    try:
        os.write(fd, b"0")           # not 4 bytes long: read as a (hex) number of µs, not a binary s32
    except OSError as e:
        os.close(fd)
        raise HarnessError(f"--poll-idle: {device} refused the request ({e.strerror})") from e
    log.debug("holding a CPU latency request of 0 µs on %s", device)
    return PollIdle(fd)
