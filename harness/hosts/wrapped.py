"""A host that runs every command of the host it wraps with words in front of it.

The base of Pinned (`taskset -c CPUS`, harness/hosts/pinned.py) and Tagged (`env
OVERLAYBENCH_PREFIX=<P>`, harness/testbeds/tagged.py): a subclass says what goes in front
(`front`); results and errors name the command as asked, files and byte streams are the
wrapped host's.
"""

from __future__ import annotations

from harness.core.errors import CommandError
from harness.hosts.base import Completed, Host, Process


class Wrapped(Host):
    def __init__(self, inner: Host):
        self.inner, self.name = inner, inner.name

    def front(self) -> list[str]:
        raise NotImplementedError

    def run(self, argv, *, timeout=60, check=True, input=None) -> Completed:
        done = self.inner.run([*self.front(), *argv], timeout=timeout, check=False, input=input)
        done = Completed(list(argv), done.returncode, done.stdout, done.stderr)
        if check and not done.ok:
            raise CommandError(self.name, list(argv), done.returncode, done.stdout, done.stderr)
        return done

    def start(self, argv) -> Process:
        try:
            proc = self.inner.start([*self.front(), *argv])
        except CommandError as e:
            raise CommandError(self.name, list(argv), e.returncode, e.stdout, e.stderr) from e
        proc.argv = list(argv)
        return proc

    def put(self, local_path, remote_path, mode=0o644) -> None:
        self.inner.put(local_path, remote_path, mode)

    def get(self, remote_path, local_path) -> None:
        self.inner.get(remote_path, local_path)

    def stream(self, argv):
        return self.inner.stream(argv)    # a byte stream (a tunnel's), not a process of the run

    def close(self) -> None:
        self.inner.close()
