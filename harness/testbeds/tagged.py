"""A host whose every command carries OVERLAYBENCH_PREFIX=<P> in its environment.

A remote testbed runs everything on its hosts through this (harness/testbeds/remote.py),
so a daemon started in the background inherits the mark and `overlaybench down
--inventory` finds what a killed run left on a host by it
(harness/testbeds/remote_down.py).
"""

from __future__ import annotations

from harness.core.errors import CommandError
from harness.hosts.base import Completed, Host, Process
from harness.testbeds.remote_down import MARK


class Tagged(Host):
    """A host whose every command carries OVERLAYBENCH_PREFIX=<P> in its environment."""

    def __init__(self, inner: Host, prefix: str):
        self.inner, self.prefix, self.name = inner, prefix, inner.name

    def _wrap(self, argv: list[str]) -> list[str]:
        return ["env", f"{MARK}={self.prefix}", *argv]

    def run(self, argv, *, timeout=60, check=True, input=None) -> Completed:
        done = self.inner.run(self._wrap(argv), timeout=timeout, check=False, input=input)
        done = Completed(list(argv), done.returncode, done.stdout, done.stderr)
        if check and not done.ok:
            raise CommandError(self.name, list(argv), done.returncode, done.stdout, done.stderr)
        return done

    def start(self, argv) -> Process:
        proc = self.inner.start(self._wrap(argv))
        proc.argv = list(argv)
        return proc

    def put(self, local_path, remote_path, mode=0o644) -> None:
        self.inner.put(local_path, remote_path, mode)

    def get(self, remote_path, local_path) -> None:
        self.inner.get(remote_path, local_path)

    def stream(self, argv):
        return self.inner.stream(argv)    # not marked: it ends with the connection

    def close(self) -> None:
        self.inner.close()
