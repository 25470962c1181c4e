"""Who waits on an flock, as the kernel lists it in /proc/locks: a test that needs a
process (or thread) to be blocked on a lock waits for that, not for a while."""

from __future__ import annotations

import os
import pathlib


def flock_waiters(path: pathlib.Path) -> set[int]:
    """Pids blocked in flock on this file or directory, from /proc/locks
    ("N: -> FLOCK ... PID MAJ:MIN:INODE ..."); a thread shows as its process."""
    ino = os.stat(path).st_ino
    out = set()
    for ln in pathlib.Path("/proc/locks").read_text().splitlines():
        f = ln.split()
        if len(f) >= 7 and f[1] == "->" and f[2] == "FLOCK" and f[6].rsplit(":", 1)[-1] == str(ino):
            out.add(int(f[5]))
    return out
