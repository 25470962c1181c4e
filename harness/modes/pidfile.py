"""A daemon known by the pid file a command-defined mode's `up` wrote
(harness/modes/commands.py), as the runner uses a Process.

The runner accounts one daemon per side (Datapath.processes): its pid for the CPU it
used, poll() for whether it died, stop() at teardown. A daemon that `up` started in the
background is no child of the harness, so PidFileDaemon gives what the runner reads of a
Process by the daemon's pid and start time (field 22 of /proc/PID/stat: a reused pid is
not it), one shell round trip each, as duck typing: modes import no host classes at run
time.
"""

from __future__ import annotations

import dataclasses

from harness.core.errors import HarnessError
from harness.hosts.base import Host

STOP_WAIT = 5.0     # seconds from SIGTERM to SIGKILL

# The start time (field 22 of /proc/PID/stat) of a live process, nothing for a gone or
# zombie one; fields counted after the command name's closing parenthesis.
ALIVE = 'set -- $(sed "s/^.*) //" "/proc/$1/stat" 2>/dev/null); [ "$#" -ge 20 ] && [ "$1" != Z ] && echo "${20}"'
STOP = ('same() { set -- $(sed "s/^.*) //" "/proc/$1/stat" 2>/dev/null); [ "$#" -ge 20 ] && [ "$1" != Z ] '
        '&& [ "${20}" = "$START" ]; }; START=$2; same "$1" || exit 0; kill -TERM "$1"; i=0; '
        'while [ $i -lt $3 ]; do same "$1" || exit 0; sleep 0.1; i=$((i + 1)); done; kill -KILL "$1"; echo killed')


@dataclasses.dataclass(frozen=True)
class Exited:
    """What the runner reads of a finished process (as hosts.base.Completed)."""

    argv: list
    returncode: int | None
    stdout: str = ""
    stderr: str = ""

    @property
    def ok(self) -> bool:
        return self.returncode == 0


class PidFileDaemon:
    """A daemon known by the pid `up` wrote, as the runner uses a Process: its pid for
    the CPU it used, poll() for whether it died. Its exit status is its parent's, so a
    gone daemon reports exit 1 and says so."""

    GONE = 1
    cpu_seconds = None
    pgid = None

    def __init__(self, host: Host, pid: int, start: str, path: str):
        self.host, self._pid, self.start, self.path = host, pid, start, path
        self.argv = ["pid_file", path]
        self.gone = False           # seen gone once: it stays gone

    @classmethod
    def read(cls, host: Host, path: str) -> PidFileDaemon:
        done = host.run(["cat", path], check=False, timeout=10)
        text = done.stdout.strip()
        if not done.ok or not text.isdigit():
            raise HarnessError(f"{host.name}: pid_file {path}: "
                               + (f"holds {text[:40]!r}, not a pid" if done.ok else "not written by `up`"))
        start = host.run(["sh", "-c", ALIVE, "sh", text], check=False, timeout=10).stdout.strip()
        if not start:
            raise HarnessError(f"{host.name}: pid_file {path}: process {text} is not running")
        return cls(host, int(text), start, path)

    @property
    def pid(self) -> int:
        return self._pid

    def _gone(self) -> Exited:
        return Exited(self.argv, self.GONE, "", f"pid {self._pid} from {self.path} is gone (its exit status is not "
                                                f"the harness's to know)")

    def poll(self) -> int | None:
        if not self.gone:
            now = self.host.run(["sh", "-c", ALIVE, "sh", str(self._pid)], check=False, timeout=10).stdout.strip()
            self.gone = now != self.start
        return self.GONE if self.gone else None

    def wait(self, timeout: float | None = None) -> Exited:
        """What it left, once gone; TimeoutError at once while it runs (nothing here waits)."""
        if self.poll() is None:
            raise TimeoutError(f"{self.host.name}: pid {self._pid} still runs")
        return self._gone()

    def stop(self, timeout: float = STOP_WAIT) -> Exited:
        """SIGTERM, SIGKILL after `timeout`: one round trip; nothing for a process already gone."""
        if not self.gone:
            self.host.run(["sh", "-c", STOP, "sh", str(self._pid), self.start, str(int(timeout * 10))],
                          check=False, timeout=timeout + 20)
            self.gone = True
        return self._gone()

    def signal(self, sig: int) -> None:
        if self.poll() is not None:
            raise ProcessLookupError(self._pid)
        self.host.run(["kill", f"-{int(sig)}", str(self._pid)], check=False, timeout=10)
