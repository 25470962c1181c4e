"""One run measuring on this machine at a time.

Two runs loading the same CPUs make every ratio of both wrong, so a run on the local lab
holds an flock on /run/overlaybench/measure.lock while it measures; a second run waits
for it (saying for whom), or `--concurrent` runs anyway. The kernel drops the lock when
its holder dies, however it dies.
"""

from __future__ import annotations

import fcntl
import json
import os
import pathlib
import sys
import time

LOCK = pathlib.Path("/run/overlaybench/measure.lock")


class MachineLock:
    def __init__(self, fd: int):
        self.fd = fd

    def release(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


def hold_machine(run_id: str, quiet: bool = False, path: pathlib.Path = LOCK) -> MachineLock:
    """Take the machine's measuring lock, waiting while another run holds it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        try:
            holder = json.loads(os.pread(fd, 512, 0).decode() or "{}")
        except ValueError:
            holder = {}
        if not isinstance(holder, dict):     # another writer's format: still wait, say less
            holder = {}
        if not quiet:
            print(f"waiting: run {holder.get('run_id', '?')} (pid {holder.get('pid', '?')}) is measuring on this "
                  f"machine; two runs at once would spoil both runs' ratios (--concurrent runs anyway)",
                  file=sys.stderr)
        t0 = time.monotonic()
        fcntl.flock(fd, fcntl.LOCK_EX)
        if not quiet:
            print(f"waited {time.monotonic() - t0:.0f} s", file=sys.stderr)
    os.ftruncate(fd, 0)
    os.pwrite(fd, json.dumps({"run_id": run_id, "pid": os.getpid()}).encode(), 0)
    return MachineLock(fd)
