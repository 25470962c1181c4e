"""A background process on an SSH host: started by SshHost.start inside a waiter of its own
(shell.py), so its output, exit status and CPU time live in files on the host and any
control shell, even after a reconnect, can poll, wait for, signal or stop it.

It reaches its host through one callable handed in at start (a framed call in one of the
host's pooled shells), not through the SshHost itself."""

from __future__ import annotations

import logging
import re
import signal as _signal
import time
from typing import Protocol

from harness.core.errors import SshError
from harness.hosts.base import Completed, Process
from harness.hosts.ssh.shell import Frame

log = logging.getLogger(__name__)

WAIT_SLICE = 30.0                   # a remote wait blocks a shell at most this long per call
TIMES_RE = re.compile(r"(\d+)m([\d.]+)s")


def secs(x: float) -> str:
    """Seconds for the remote `timeout`, where 0 must mean "do not wait" (for it, 0 is forever)."""
    return "0" if x < 0.001 else f"{x:.3f}"


def exit_code(rc: int) -> int:
    """A shell reports death by signal n as 128+n; subprocess (and LocalHost) say -n."""
    return -(rc - 128) if 128 < rc <= 128 + 64 else rc


class Call(Protocol):
    """One framed call of a shell function in one of the host's pooled shells (SshHost's);
    `what` names it in errors."""

    def __call__(self, what: str, func: str, args: list[str], *, timeout: float) -> Frame: ...


class SshProcess(Process):
    """A background process on an SshHost. Its output and exit status live in files on the
    host (written by a waiter), so any shell, even after a reconnect, can ask for them.
    `host_name` names the host in messages; `clk_tck` is its USER_HZ (None: unknown)."""

    def __init__(self, call: Call, host_name: str, clk_tck: int | None, argv: list[str], files: str, waiter: int,
                 pid: int, pgid: int | None):
        self.argv = argv
        self.pgid = pgid
        self._call = call
        self._host_name = host_name
        self._clk_tck = clk_tck
        self._files = files
        self._waiter = waiter
        self._pid = pid
        self._rc: int | None = None
        self._result: Completed | None = None
        self._stat_cpu: float | None = None

    @property
    def pid(self) -> int | None:
        return self._pid

    def _args(self) -> list[str]:
        return [self._files, str(self._waiter), str(self._pid)]

    def poll(self) -> int | None:
        if self._result is not None or self._rc is not None:
            return self._rc
        frame = self._call(f"poll {self.argv[0]}", "_ob_poll", self._args(), timeout=30)
        text = frame.out.decode().strip()
        if text:
            self._rc = -1 if text == "lost" else exit_code(int(text))
        return self._rc

    def wait(self, timeout: float | None = None) -> Completed:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self._result is None:
            left = WAIT_SLICE if deadline is None else min(WAIT_SLICE, max(0.0, deadline - time.monotonic()))
            frame = self._call(f"wait {self.argv[0]}", "_ob_wait", [*self._args(), secs(left)],
                               timeout=left + 30)
            if self._finish(frame.out, frame.err) is None and deadline is not None \
                    and time.monotonic() >= deadline:
                raise TimeoutError(f"{self.argv[0]} still running after {timeout}s")
        return self._result

    def stop(self, timeout: float = 5.0) -> Completed:
        if self._result is not None:
            return self._result
        frame = self._call(f"stop {self.argv[0]}", "_ob_stop", [*self._args(), secs(timeout)],
                           timeout=timeout + 40)
        stat, _, rest = frame.out.partition(b"\n")
        self._stat_cpu = self._cpu_from_stat(stat.decode(errors="replace"))
        if self._finish(rest, frame.err) is None:
            raise SshError(f"{self._host_name}: {self.argv[0]} (pid {self._pid}) survived SIGKILL")
        return self._result

    def signal(self, sig: int) -> None:
        name = _signal.Signals(sig).name.removeprefix("SIG")
        frame = self._call(f"kill -{name} {self._pid}", "_ob_sig", [name, str(self._pid)], timeout=30)
        if frame.rc != 0:
            raise ProcessLookupError(f"{self._host_name}: kill -{name} {self._pid}: "
                                     f"{frame.err.decode(errors='replace').strip()}")

    def _finish(self, out: bytes, err: bytes) -> Completed | None:
        """Parse `RC CHILD-CPU` + output; the Completed once the process has ended."""
        head, _, body = out.partition(b"\n")
        fields = head.decode(errors="replace").split(" ", 1)
        if not fields or fields[0] in ("", "-"):
            return None
        self._rc = -1 if fields[0] == "lost" else exit_code(int(fields[0]))
        times = TIMES_RE.findall(fields[1]) if len(fields) > 1 else []
        if len(times) == 2:
            self.cpu_seconds = sum(int(m) * 60 + float(s) for m, s in times)
        else:
            self.cpu_seconds = self._stat_cpu
        if fields[0] == "lost":
            log.warning("%s: the exit status of %s (pid %d) was lost", self._host_name, self.argv, self._pid)
        self._result = Completed(self.argv, self._rc, body.decode(errors="replace"),
                                 err.decode(errors="replace"))
        return self._result

    def _cpu_from_stat(self, line: str) -> float | None:
        """utime+stime+cutime+cstime from a /proc/PID/stat line, in seconds."""
        rest = line.rsplit(")", 1)[-1].split()
        if len(rest) < 15 or not self._clk_tck:
            return None
        return sum(int(x) for x in rest[11:15]) / self._clk_tck
