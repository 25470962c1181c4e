"""The Host contract: run a command, start a background one, copy files, close."""

from __future__ import annotations

import abc
import dataclasses


@dataclasses.dataclass(frozen=True)
class Completed:
    argv: list[str]
    returncode: int | None  # None: killed on timeout
    stdout: str
    stderr: str

    @property
    def ok(self) -> bool:
        return self.returncode == 0


class Process(abc.ABC):
    """A background process on a host (a server, a sleeve daemon)."""

    argv: list[str]
    # CPU seconds (user + system, with its waited-for children) the process used, once it
    # has exited; None where unknown.
    cpu_seconds: float | None = None
    # The process group stop() signals (the pid where the process leads its own group).
    pgid: int | None = None

    @property
    @abc.abstractmethod
    def pid(self) -> int | None:
        """The pid on its host, where known."""

    @abc.abstractmethod
    def poll(self) -> int | None:
        """Exit code, or None while it runs."""

    @abc.abstractmethod
    def wait(self, timeout: float | None = None) -> Completed:
        """Wait for exit (raises TimeoutError) and return what it printed."""

    @abc.abstractmethod
    def stop(self, timeout: float = 5.0) -> Completed:
        """SIGTERM, then SIGKILL after `timeout`, to the process group; returns what it
        printed. Idempotent."""

    @abc.abstractmethod
    def signal(self, sig: int) -> None:
        """Send `sig` to the process itself (e.g. SIGUSR1 for a daemon's counters).
        ProcessLookupError if it is gone."""


class Host(abc.ABC):
    """A machine (or namespace) that runs commands."""

    name: str

    @abc.abstractmethod
    def run(self, argv: list[str], *, timeout: float | None = 60, check: bool = True,
            input: str | None = None) -> Completed:
        """Run to completion. With check, a non-zero exit raises CommandError."""

    @abc.abstractmethod
    def start(self, argv: list[str]) -> Process:
        """Start in the background; stdout and stderr are kept for Process.stop/wait."""

    @abc.abstractmethod
    def put(self, local_path: str, remote_path: str, mode: int = 0o644) -> None:
        """Copy a file onto the host."""

    @abc.abstractmethod
    def get(self, remote_path: str, local_path: str) -> None:
        """Copy a file from the host (CommandError if it cannot be read)."""

    def close(self) -> None:
        """Release connections; the default has none."""

    def stream(self, argv: list[str]):
        """A socket-like byte stream to a command's stdin and stdout on the host (for a
        client that speaks a protocol through it, like `docker system dial-stdio`); the
        caller closes it. Hosts that are this machine have none: reach its sockets directly."""
        raise NotImplementedError(f"{self.name}: no command streams on {type(self).__name__}")

    def which(self, tool: str) -> str | None:
        done = self.run(["sh", "-c", 'command -v "$1"', "sh", tool], check=False, timeout=10)
        path = done.stdout.strip()
        return path if done.ok and path else None

    def read_file(self, path: str) -> str:
        return self.run(["cat", path], timeout=10).stdout

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name}>"
