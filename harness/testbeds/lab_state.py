"""The labs on this machine, as their state directories and names show them: each lab's
claim (/run/overlaybench/<P>/state.json: its index and its owner), the lock that keeps
two claims apart, which labs exist (`leftovers`) and their removal (`remove_lab`, `down`).

Every namespace and root-side link of a lab carries its prefix <P> = "ob" + 4 hex digits
(NAME_RE), so removal takes exactly what labs made.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import pathlib
import re
import shutil
import signal
import subprocess
import time

from harness.core import failpoints
from harness.core.errors import HarnessError
from harness.hosts import LocalHost
from harness.hosts.local import owner_alive, pid_alive
from harness.testbeds.containers import base as containers_mod
from harness.testbeds.remote_down import owner_alive as remote_owner_alive

STATE_ROOT = pathlib.Path("/run/overlaybench")
PREFIX_RE = re.compile(r"^ob[0-9a-f]{4}$")
NAME_RE = re.compile(r"^(ob[0-9a-f]{4})-(?:[hcm][0-9]+|sw)$")

log = logging.getLogger(__name__)


def require_root() -> None:
    if os.geteuid() != 0:
        raise HarnessError("the local lab needs root (network namespaces): run as root or with sudo")


def ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    """`ip ARGS` on this machine; with check, a failure is a HarnessError carrying its stderr."""
    p = subprocess.run(["ip", *args], capture_output=True, text=True)
    if check and p.returncode != 0:
        raise HarnessError(f"ip {' '.join(args)}: {p.stderr.strip() or 'failed'}")
    return p


@contextlib.contextmanager
def state_lock(how: int):
    """An flock on the state directory: allocation holds it from reading the labs' indexes to
    writing its state file (so each lab's index and addresses are its own), a listing shared
    (so a lab whose state file is still to come never looks like a dead owner's)."""
    fd = os.open(STATE_ROOT, os.O_RDONLY | os.O_DIRECTORY)
    try:
        try:
            fcntl.flock(fd, how | fcntl.LOCK_NB)
        except BlockingIOError:
            log.warning("waiting for the lock on %s: another process holds it (an overlaybench allocating "
                        "or listing labs, or one stopped doing so)", STATE_ROOT)
            fcntl.flock(fd, how)
        yield
    finally:
        os.close(fd)


def read_state(d: pathlib.Path) -> dict:
    try:
        return json.loads((d / "state.json").read_text())
    except (OSError, ValueError):
        return {}


def _lab_namespaces() -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    p = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True)
    for line in p.stdout.splitlines():
        name = line.split()[0] if line.strip() else ""
        m = NAME_RE.match(name)
        if m:
            out.setdefault(m.group(1), []).append(name)
    return out


def _lab_links() -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    p = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True)
    for line in p.stdout.splitlines():
        parts = line.split(":", 2)
        if len(parts) < 2:
            continue
        name = parts[1].strip().split("@")[0]
        m = NAME_RE.match(name)
        if m:
            out.setdefault(m.group(1), []).append(name)
    return out


def remove_lab(prefix: str) -> list[str]:
    """Remove the lab's containers, kill its processes, delete its namespaces, links and files.
    Returns what went. Containers go first: their own process ends with them (a signal from
    outside would be ignored by a container's init), and their namespaces stay attached
    until the processes the lab started in them are gone."""
    if not PREFIX_RE.match(prefix):
        raise HarnessError(f"{prefix!r} is not a lab prefix (ob + 4 hex digits)")
    removed = containers_mod.remove_prefix_everywhere(LocalHost("root"), prefix)
    namespaces = _lab_namespaces().get(prefix, [])
    for sig in (signal.SIGTERM, signal.SIGKILL):
        pids = set()
        for ns in namespaces:
            p = subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True)
            pids.update(int(x) for x in p.stdout.split() if x.isdigit())
        for pid in pids:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        if not pids:
            break
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline and any(pid_alive(pid) for pid in pids):
            time.sleep(0.05)
    for ns in namespaces:
        ip("netns", "del", ns, check=False)
        removed.append(f"netns {ns}")
        failpoints.reached("teardown")
    for link in _lab_links().get(prefix, []):
        ip("link", "del", link, check=False)
        removed.append(f"link {link}")
    d = STATE_ROOT / prefix
    if d.exists():
        shutil.rmtree(d, ignore_errors=True)
        removed.append(f"dir {d}")
    return removed


def leftovers() -> dict[str, dict]:
    """Every lab on this machine: prefix → {owner pid and pid namespace, alive, foreign, its host,
    namespaces, links}. A remote testbed's directory (this machine one of its hosts) whose
    owner is another machine is foreign and counts as alive: its pid means nothing here, and
    that machine's `down --inventory` removes what it made."""
    ns, links = _lab_namespaces(), _lab_links()
    states = {}
    if STATE_ROOT.is_dir():
        with state_lock(fcntl.LOCK_SH):      # no lab half allocated: its state file is written
            states = {d.name: read_state(d) for d in STATE_ROOT.iterdir() if PREFIX_RE.match(d.name)}
    out = {}
    for p in sorted(set(ns) | set(links) | set(states)):
        st = states.get(p, {})
        pid = st.get("pid")
        judged = remote_owner_alive(st) if st.get("kind") == "remote" else owner_alive(pid, st.get("pidns"))
        out[p] = {"pid": pid, "pidns": st.get("pidns"), "alive": judged is not False, "foreign": judged is None,
                  "host": st.get("owner_host"),
                  "namespaces": ns.get(p, []),
                  "links": links.get(p, [])}
    return out


def down(force: bool = False) -> tuple[list[str], list[str]]:
    """Remove every lab whose owner is gone (all of them with force).
    Returns (removed items, prefixes left alone: a live run, or another machine's, owns them)."""
    require_root()
    removed, kept = [], []
    for prefix, info in leftovers().items():
        if info["alive"] and not force:
            kept.append(f"{prefix} (owned by running pid {info['pid']})" if not info["foreign"] else
                        f"{prefix} (owned by {info['host'] or 'an unknown machine'}, which this machine cannot check)")
            continue
        removed += remove_lab(prefix)
    return removed, kept
