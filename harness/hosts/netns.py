"""A network namespace on a host: any Host, with `ip netns exec NS` in front of each command.

It holds the host it wraps (the local machine by default, or an SSH host) rather than
being one, so the same class serves the local lab and a namespace on a remote machine.
`ip netns exec` changes only the network namespace (and /sys, /etc/netns), so files are
the wrapped host's: put and get go straight to it.

With `cpus` (a CPU list as taskset reads it, "0" or "2-3") every command runs on those
CPUs alone, through the wrapped host pinned (harness/hosts/pinned.py, the mechanism real
hosts are pinned by too): the lab gives each of its hosts CPUs of its own this way, and
whatever a command starts (a daemon's threads, a shell's children) inherits the affinity.

`start` on this machine returns only once the process has entered the namespace:
`ip netns exec` enters it after it runs, and a teardown in between (an error, a Ctrl-C right
after a daemon starts) would look for the namespace's processes, miss this one and leave it
running in a namespace nobody can name any more.
"""

from __future__ import annotations

import logging
import time

from harness.core.errors import CommandError
from harness.hosts.base import Completed, Host, Process
from harness.hosts.local import LocalHost, LocalProcess, ns_of
from harness.hosts.pinned import Pinned

log = logging.getLogger(__name__)


class NetnsHost(Host):
    def __init__(self, netns: str, name: str | None = None, host: Host | None = None,
                 cpus: str | None = None):
        self.netns = netns
        self.name = name or netns
        host = host if host is not None else LocalHost()
        self.host = Pinned(host, cpus) if cpus else host
        self.cpus = cpus

    def wrap(self, argv: list[str]) -> list[str]:
        return ["ip", "netns", "exec", self.netns, *argv]

    def run(self, argv, *, timeout=60, check=True, input=None) -> Completed:
        inner = self.host.run(self.wrap(argv), timeout=timeout, check=False, input=input)
        done = Completed(list(argv), inner.returncode, inner.stdout, inner.stderr)
        if check and not done.ok:
            log.debug("%s: %s failed rc=%s stdout=%r stderr=%r", self.name, inner.argv,
                      done.returncode, done.stdout, done.stderr)
            raise CommandError(self.name, list(argv), done.returncode, done.stdout, done.stderr)
        return done

    def start(self, argv) -> Process:
        try:
            proc = self.host.start(self.wrap(argv))
        except CommandError as e:
            raise CommandError(self.name, list(argv), e.returncode, e.stdout, e.stderr) from e
        proc.argv = list(argv)   # what the caller asked for, as its Completed will say
        if isinstance(proc, LocalProcess):
            _await_entry(proc)
        return proc

    def put(self, local_path, remote_path, mode=0o644) -> None:
        self.host.put(local_path, remote_path, mode)

    def get(self, remote_path, local_path) -> None:
        self.host.get(remote_path, local_path)

    def close(self) -> None:
        """Nothing of its own to release; whoever made the wrapped host closes it."""

    def __repr__(self) -> str:
        return f"<NetnsHost {self.name} ({self.netns} on {self.host!r})>"


def _await_entry(proc: LocalProcess, timeout: float = 10.0) -> None:
    """Return once a process started on this machine has left this process's network
    namespace (for the one `ip netns exec` enters) or has ended. Polls /proc: the wait is
    the few milliseconds `taskset` and `ip` take to exec; past `timeout` it returns anyway
    and the process is left to whoever waits for it."""
    own = ns_of("self", "net")
    deadline = time.monotonic() + timeout
    while proc.poll() is None:
        now = ns_of(proc.pid, "net")
        if now is None or now != own:
            return
        if time.monotonic() >= deadline:
            log.warning("%s (pid %s) has not entered its namespace after %.0f s", proc.argv[0], proc.pid, timeout)
            return
        time.sleep(0.001)
