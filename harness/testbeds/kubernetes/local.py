"""The local cluster `make k8s-up` starts (k8s/cluster.sh, the kubernetes backend's test
fixture) as `overlaybench down` sees it:

    state()    "up" (every daemon it started runs), "stopped" (one was killed: the cluster
               is a leftover), or None (none here, or no k8s/ in this checkout)
    remove()   k8s/cluster.sh down: every process, namespace, cgroup, mount, sysctl change
               and file of it

Only what the script made is touched; it names everything obk8s-*.
"""

from __future__ import annotations

import subprocess

from harness.core.errors import HarnessError
from harness.core.paths import PROJECT

SCRIPT = PROJECT / "k8s" / "cluster.sh"
STATES = {0: "up", 3: "stopped", 1: None}


def _script(command: str, timeout: float) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(["bash", str(SCRIPT), command], capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as e:
        raise HarnessError(f"{SCRIPT} {command}: no answer within {timeout:.0f} s") from e


def state() -> str | None:
    if not SCRIPT.exists():
        return None
    done = _script("status", 30)
    if done.returncode not in STATES:
        raise HarnessError(f"{SCRIPT} status: exit {done.returncode}: {done.stderr.strip()[-300:]}")
    return STATES[done.returncode]


def remove() -> list[str]:
    done = _script("down", 180)
    if done.returncode != 0:
        raise HarnessError(f"{SCRIPT} down: exit {done.returncode}: {done.stderr.strip()[-300:]}")
    return ["the local Kubernetes cluster (k8s/cluster.sh: namespaces obk8s-*)"]
