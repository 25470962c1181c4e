"""What a remote testbed leaves on a host, and how it goes: the removal script a testbed's
teardown runs per side, the leftovers `overlaybench down --inventory` finds (a state
directory per prefix under /run/overlaybench, processes marked with OVERLAYBENCH_PREFIX,
and the SSH transport's own directories /tmp/overlaybench-ssh-* and -up-*, each with an
owner file), and whether their owner still runs. A testbed's nftables tables (inet
<P>-h<i>) go with its links; the real Flannel's device, routes and underlay forwarding go by
what its deployment wrote in the side's directory (harness/modes/flannel.py)."""

from __future__ import annotations

import json
import os
import re
import socket

from harness.core.errors import HarnessError
from harness.hosts.base import Host
from harness.hosts.local import boot_id, owner_alive as local_owner_alive
from harness.hosts.ssh.host import DIR_PREFIXES, OWNER_FILE

STATE_ROOT = "/run/overlaybench"
PREFIX_RE = re.compile(r"^ob[0-9a-f]{4}$")
MARK = "OVERLAYBENCH_PREFIX"     # in the environment of every process a testbed starts
# The SSH transport's directories on a host (SshHost.state_dir and its upload directory),
# each with an owner file like a testbed's state.json.
HOST_DIR_RE = re.compile("^(?:" + "|".join(map(re.escape, DIR_PREFIXES)) + ")[0-9a-f]{8}$")
HOST_DIR_GLOBS = " ".join(p + "*" for p in DIR_PREFIXES)


REMOVE_SCRIPT = r"""
P=$1; SIDE=$2; S=/run/overlaybench/$P
# gone PID...: none of them runs any more (a zombie has stopped running)
gone() {
  for p in "$@"; do
    [ -d "/proc/$p" ] && ! grep -q '^State:[[:space:]]*Z' "/proc/$p/status" 2>/dev/null && return 1
  done
  return 0
}
# processes: in the prefix's namespaces, and any carrying the prefix in their environment;
# each signal is waited out (10 s at most) before the next, and before anything they made
# is removed: a flanneld still running would put its host-gw routes back
for sig in TERM KILL; do
  pids=""
  for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep "^$P-"); do
    pids="$pids $(ip netns pids "$ns" 2>/dev/null)"
  done
  for e in /proc/[0-9]*/environ; do
    pid=${e#/proc/}; pid=${pid%/environ}
    [ "$pid" = "$$" ] && continue
    tr '\0' '\n' < "$e" 2>/dev/null | grep -qx "OVERLAYBENCH_PREFIX=$P" && pids="$pids $pid"
  done
  pids=$(echo $pids)
  [ -z "$pids" ] && break
  kill -$sig $pids 2>/dev/null
  n=0
  until gone $pids || [ $n -ge 100 ]; do sleep 0.1; n=$((n + 1)); done
done
for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep "^$P-"); do ip netns del "$ns"; echo "netns $ns"; done
if command -v docker >/dev/null 2>&1; then
  for c in $(docker ps -aq --filter "label=overlaybench.prefix=$P" 2>/dev/null); do docker rm -f "$c" >/dev/null 2>&1 && echo "container $c"; done
fi
for l in $(ip -o link show | awk -F': ' '{print $2}' | cut -d@ -f1 | grep "^$P-"); do ip link del "$l" 2>/dev/null && echo "link $l"; done
# the real Flannel's VXLAN device, named by a VNI that holds the prefix (harness/modes/flannel.py)
v=flannel.$((1048576 + 0x${P#ob})); ip link del "$v" 2>/dev/null && echo "link $v"
# the side's nftables table (every side's when none is named), once its devices are gone
if command -v nft >/dev/null 2>&1; then
  for t in $(nft list tables inet 2>/dev/null | awk '{print $3}' | grep "^$P-h$SIDE"); do
    nft delete table inet "$t" && echo "nft table inet $t"
  done
fi
# the side's directory (all of them when no side is named): a managed underlay back as it was
for d in "$S"/h$SIDE*; do
  [ -d "$d" ] || continue
  f=$d/underlay.json
  dev=$(sed -n 's/.*"dev": "\([^"]*\)".*/\1/p' "$f" 2>/dev/null)
  mtu=$(sed -n 's/.*"mtu": \([0-9]*\).*/\1/p' "$f" 2>/dev/null)
  if grep -q '"managed": true' "$f" 2>/dev/null && [ -n "$dev" ] && [ -n "$mtu" ] && [ -e "/sys/class/net/$dev" ]; then
    ip link set "$dev" mtu "$mtu" && echo "underlay $dev mtu $mtu"
    tc qdisc show dev "$dev" root | grep -q '^qdisc tbf' && tc qdisc del dev "$dev" root && echo "underlay $dev tbf"
  fi
  # the real Flannel's host-gw routes and the underlay's forwarding as it was (flannel.json)
  f=$d/flannel.json
  if [ -f "$f" ]; then
    # another host's side (hosts sharing a file system): that host's own pass removes it
    uip=$(sed -n 's/.*"underlay_ip": "\([^"]*\)".*/\1/p' "$f")
    [ -n "$uip" ] && ! ip -o -4 addr show | grep -q " inet $uip/" && continue
    net=$(sed -n 's/.*"network": "\([^"]*\)".*/\1/p' "$f"); fdev=$(sed -n 's/.*"underlay_dev": "\([^"]*\)".*/\1/p' "$f")
    via=$(sed -n 's/.*"peer_underlay_ip": "\([^"]*\)".*/\1/p' "$f"); fwd=$(sed -n 's/.*"underlay_forwarding": "\([01]\)".*/\1/p' "$f")
    if [ -n "$net" ] && [ -n "$fdev" ] && [ -n "$via" ]; then
      for r in $(ip route show root "$net" via "$via" dev "$fdev" 2>/dev/null | awk '{print $1}'); do
        ip route del "$r" via "$via" dev "$fdev" && echo "route $r"
      done
    fi
    own=$(sed -n 's/.*"device": "\(flannel[.a-z-]*\)".*/\1/p' "$f")
    [ -n "$own" ] && ip link del "$own" 2>/dev/null && echo "link $own"
    [ -n "$fwd" ] && [ -n "$fdev" ] && [ -e "/sys/class/net/$fdev" ] && sysctl -q -w "net/ipv4/conf/$fdev/forwarding=$fwd" && echo "underlay $fdev forwarding $fwd"
  fi
  rm -rf "$d" && echo "dir $d"
done
# the testbed's directory, once no side is left in it
if [ -d "$S" ] && ! ls -d "$S"/h[0-9]* >/dev/null 2>&1; then rm -rf "$S" && echo "dir $S"; fi
exit 0
"""


# A testbed's state directory made with mkdir (not -p), 0700: it fails where the prefix's
# directory exists, unless it holds this testbed's own claim (two sides on one file system).
CLAIM_SCRIPT = r"""
umask 077
mkdir -p "$1" || exit 3
if mkdir -m 0700 "$1/$2"; then printf '%s\n' "$3" > "$1/$2/claim" || exit 3; exit 0; fi
[ -d "$1/$2" ] && [ ! -L "$1/$2" ] && [ "$(cat "$1/$2/claim" 2>/dev/null)" = "$3" ] && exit 0
[ -e "$1/$2" ] && exit 17
exit 3
"""


def claim_state_dir(host: Host, prefix: str, nonce: str, who: str) -> bool:
    """Make /run/overlaybench/<prefix> on `host` for the testbed whose claim is `nonce`;
    False: another testbed's is there."""
    inner = getattr(host, "inner", host)
    done = inner.run(["sh", "-c", CLAIM_SCRIPT, "sh", STATE_ROOT, prefix, nonce], check=False, timeout=20)
    if done.returncode == 17:
        return False
    if not done.ok:
        raise HarnessError(f"{who}: cannot make {STATE_ROOT}/{prefix}: "
                           f"{(done.stderr.strip() or f'exit {done.returncode}')[-200:]}")
    return True


def release_state_dir(host: Host, prefix: str, nonce: str) -> None:
    """Undo claim_state_dir (the directory holds nothing else yet)."""
    d = f"{STATE_ROOT}/{prefix}"
    inner = getattr(host, "inner", host)
    inner.run(["sh", "-c", '[ "$(cat "$1/claim" 2>/dev/null)" = "$2" ] && rm -f "$1/claim" && rmdir "$1"',
               "sh", d, nonce], check=False, timeout=20)


def remove_remote(host: Host, prefix: str, side: int | None = None) -> list[str]:
    """Kill a prefix's processes on a host, delete its namespaces and links, restore a managed
    underlay and remove the state directory of `side` (every side's when None, as `down`
    does: a real host holds one). Returns what went."""
    if not PREFIX_RE.match(prefix):
        raise HarnessError(f"{prefix!r} is not a testbed prefix (ob + 4 hex digits)")
    inner = getattr(host, "inner", host)   # the script must not carry the mark itself
    done = inner.run(["sh", "-c", REMOVE_SCRIPT, "sh", prefix, "" if side is None else str(side)],
                     check=False, timeout=60)
    if not done.ok:
        raise HarnessError(f"{host.name}: removing {prefix} failed: {(done.stderr.strip() or 'no output')[-200:]}")
    return [f"{host.name}: {ln}" for ln in done.stdout.splitlines() if ln.strip()]


OWNER_MAX = 4096                 # bytes of an owner record read, at most
# The SSH directories sit in world-writable /tmp and the scan runs as root: a directory
# or owner file that is a symlink is not followed, a FIFO is opened without blocking
# (read as empty), and no more than OWNER_MAX bytes are read of any.
SCAN_SCRIPT = f"""
owner() {{ dd if="$1" iflag=nofollow,nonblock bs={OWNER_MAX} count=1 2>/dev/null | tr -d '\\n'; }}
for d in {STATE_ROOT}/ob????; do [ -d "$d" ] && [ ! -L "$d" ] || continue; printf 'state\\t%s\\t' "${{d##*/}}"; owner "$d/state.json"; echo; done
for d in {HOST_DIR_GLOBS}; do [ -d "$d" ] && [ ! -L "$d" ] || continue; printf 'dir\\t%s\\t' "$d"; owner "$d/{OWNER_FILE}"; echo; done
exit 0
"""


def _scan(host: Host) -> tuple[dict[str, dict], dict[str, dict]]:
    """In one round trip: prefixes with a state directory on the host (prefix → its
    state.json, or {}), and the SSH transport's directories there (path → its owner file, or {})."""
    done = host.run(["sh", "-c", SCAN_SCRIPT], check=False, timeout=20)
    states: dict[str, dict] = {}
    dirs: dict[str, dict] = {}
    for ln in done.stdout.splitlines():
        kind, _, rest = ln.partition("\t")
        name, _, body = rest.partition("\t")
        into = states if kind == "state" and PREFIX_RE.match(name) else \
            dirs if kind == "dir" and HOST_DIR_RE.match(name) else None
        if into is None:
            continue
        try:
            doc = json.loads(body) if body.strip() else {}
        except ValueError:
            doc = {}
        into[name] = doc if isinstance(doc, dict) else {}
    return states, dirs


def _own(owner: dict) -> bool:
    """Made by this very process (the connection `down` itself runs on)."""
    return owner.get("owner_host") == socket.gethostname() and owner.get("pid") == os.getpid()


def remove_host_dirs(host: Host, dirs: list[str]) -> list[str]:
    """rm -rf the SSH transport's directories (only paths of that shape); what went."""
    dirs = [d for d in dirs if HOST_DIR_RE.match(d)]
    if not dirs:
        return []
    inner = getattr(host, "inner", host)
    done = inner.run(["sh", "-c", 'for d; do [ -d "$d" ] || continue; rm -rf "$d" && echo "dir $d"; done',
                      "sh", *dirs], check=False, timeout=60)
    if not done.ok:
        raise HarnessError(f"{host.name}: removing {', '.join(dirs)} failed: "
                           f"{(done.stderr.strip() or 'no output')[-200:]}")
    return [f"{host.name}: {ln}" for ln in done.stdout.splitlines() if ln.strip()]


def owner_alive(state: dict) -> bool | None:
    """Is the run that made a testbed still alive? None: its orchestrator is another machine,
    told by its kernel's boot id where the record has one (two machines can share a host
    name), else by its host name."""
    boot = state.get("boot_id")
    elsewhere = boot != boot_id() if isinstance(boot, str) else state.get("owner_host") != socket.gethostname()
    if elsewhere:
        return None
    pid, ns = state.get("pid"), state.get("pidns")
    return isinstance(pid, int) and pid > 0 and local_owner_alive(pid, ns if isinstance(ns, int) else None)


def _why_kept(owner: dict) -> str | None:
    """Why a leftover whose owner record is `owner` stays without --force; None: it goes."""
    alive = owner_alive(owner)
    if alive:
        return f"owned by running pid {owner.get('pid')}"
    if alive is None:
        return f"owned by {owner.get('owner_host') or 'an unknown machine'}, which this machine cannot check"
    return None


def down(hosts: list[tuple[str, Host]], force: bool = False) -> tuple[list[str], list[str]]:
    """Remove, on each host, testbeds whose owner is gone (every one with force)."""
    removed, kept = [], []
    # Every host's leftovers first, then the removals: hosts that share a filesystem (host
    # namespaces of one machine) see each other's state directories, which the first
    # removal takes away with its own.
    found = [(name, host, *_scan(host)) for name, host in hosts]
    for name, host, leftovers, _ in found:
        for prefix, state in leftovers.items():
            why = None if force else _why_kept(state)
            if why:
                kept.append(f"{name}: {prefix} ({why})")
            else:
                removed += remove_remote(host, prefix)
    # The SSH transport's directories after the testbeds: a killed run's background
    # processes are gone by now, so nothing writes into them any more.
    for name, host, _, dirs in found:
        gone = []
        for d, owner in dirs.items():
            if _own(owner):
                continue                    # this command's own connection: its close() removes it
            why = None if force else (_why_kept(owner) if owner else "no owner recorded")
            if why:
                kept.append(f"{name}: {d} ({why})")
            else:
                gone.append(d)
        removed += remove_host_dirs(host, gone)
    return removed, kept
