"""WireGuard as two modes, the outside reference for the encrypted sleeve.

    wireguard-go   userspace WireGuard (golang.zx2c4.com/wireguard, pinned in the Makefile,
                   built by `make wireguard-go`), one daemon per host, run in the foreground
    wireguard      the kernel module (`ip link add … type wireguard`), where the kernel has it

Both are configured with `wg` (wireguard-tools) and are L3: each peer's overlay and
container /32s are routed into the device and the bridge answers ARP for them (proxy
ARP), like sleeve-l3, so every placement works on the flat overlay /24. Across more than
two hosts every host has every other as a peer, and one ping per pair makes each
handshake before the first measurement. Keys are made
per deployment on each host (`wg genkey` into a 0600 file in the side's workdir, never
read back by the harness; only public keys travel) and removed at teardown.

A userspace device is driven through a UAPI socket, /var/run/wireguard/<dev>.sock, which
lives in the file system: the lab's hosts are namespaces that share one, so a userspace
device gets a name unique to its side's workdir. Kernel devices live in their namespace.
"""

from __future__ import annotations

import hashlib
import logging
import os
import pathlib
import re
import shutil
import subprocess
import time

from harness.bed import Side, Testbed
from harness.core.errors import CommandError, HarnessError, UnsupportedError
from harness.core.paths import PROJECT
from harness.hosts.base import Process
from harness.modes.base import Datapath, Mode, reset_overlay_path, route_l3, stop_daemon, unroute_l3, wait_ready

log = logging.getLogger(__name__)

PORT = 51820
# Outer IP header + UDP 8 + WireGuard data header 16 (type 4, receiver index 4, counter 8)
# + Poly1305 tag 16. WireGuard pads the inner packet to 16 bytes but never past the MTU,
# so a full-size packet costs exactly this.
OVERHEAD_IPV4 = 20 + 8 + 16 + 16
OVERHEAD_IPV6 = 40 + 8 + 16 + 16

# Where `make wireguard-go` installs the pinned build; OVERLAYBENCH_WIREGUARD_GO names
# another binary to ship instead.
BINARY = PROJECT / ".venv" / "bin" / "wireguard-go"
ENV_BINARY = "OVERLAYBENCH_WIREGUARD_GO"
MODULE = "golang.zx2c4.com/wireguard"
UAPI_DIR = "/var/run/wireguard"
READY_TIMEOUT = 30.0        # a hang, not a speed: the device is up within milliseconds
HANDSHAKE_TIMEOUT = 20.0
KEY_RE = re.compile(r"^[A-Za-z0-9+/]{42}[AEIMQUYcgkosw048]=$")  # base64 of 32 bytes


def overhead_for(underlay_ip: str) -> int:
    return OVERHEAD_IPV6 if ":" in underlay_ip else OVERHEAD_IPV4


def endpoint(ip: str, port: int = PORT) -> str:
    return f"[{ip}]:{port}" if ":" in ip else f"{ip}:{port}"


def allowed_ips(peer: Side) -> list[str]:
    """What a side accepts from and sends to its peer: the peer's overlay addresses."""
    return [f"{ip}/32" for ip in (peer.overlay_ip, peer.container_ip) if ip]


def wg_set_argv(dev: str, key_path: str, peers: list[tuple[str, Side]], port: int = PORT) -> list[str]:
    """One `wg set` that configures a side completely: its key and port, and each of its
    peers (public key, side): endpoint and allowed IPs."""
    argv = ["wg", "set", dev, "listen-port", str(port), "private-key", key_path]
    for public, peer in peers:
        argv += ["peer", public, "endpoint", endpoint(peer.underlay_ip, port),
                 "allowed-ips", ",".join(allowed_ips(peer))]
    return argv


def parse_wg_show(transfer: str, handshakes: str) -> dict:
    """`wg show DEV transfer` and `… latest-handshakes` (tab-separated, one peer a line)
    → bytes received/sent summed over peers, the latest handshake (Unix time, 0: never) and
    how many peers have had one."""
    out = {"rx_bytes": 0, "tx_bytes": 0, "latest_handshake": 0, "peers_handshaken": 0}
    for line in transfer.splitlines():
        f = line.split("\t")
        if len(f) == 3:
            out["rx_bytes"] += int(f[1])
            out["tx_bytes"] += int(f[2])
    for line in handshakes.splitlines():
        f = line.split("\t")
        if len(f) == 2:
            out["latest_handshake"] = max(out["latest_handshake"], int(f[1]))
            out["peers_handshaken"] += int(f[1]) > 0
    return out


def find_binary(built: pathlib.Path | None = None) -> pathlib.Path:
    """The wireguard-go to ship (`built`, by default where make puts it), or one line
    saying why there is none."""
    built = built or BINARY
    given = os.environ.get(ENV_BINARY)
    if given:
        if not os.access(given, os.X_OK):
            raise HarnessError(f"{ENV_BINARY}={given}: not an executable file")
        return pathlib.Path(given)
    if os.access(built, os.X_OK):
        return built
    if shutil.which("go") is None:
        raise UnsupportedError("mode wireguard-go: unsupported here: wireguard-go is not built and there is "
                               "no go to build it (apt-get install -y golang-go, then make wireguard-go)")
    raise HarnessError(f"mode wireguard-go: wireguard-go is not built ({built} missing): run make wireguard-go")


def go_version(binary: pathlib.Path) -> str:
    """'wireguard-go v0.0.20250522 (golang.zx2c4.com/wireguard v0.0.0-…)': the daemon's own
    version line and the module version the Go toolchain recorded in the binary."""
    try:
        p = subprocess.run([str(binary), "--version"], capture_output=True, text=True, timeout=10)
        line = (p.stdout.strip().splitlines() or ["wireguard-go (no version)"])[0]
        m = re.search(rb"\t" + re.escape(MODULE.encode()) + rb"\t(v[0-9A-Za-z.+-]+)\t", binary.read_bytes())
    except (OSError, subprocess.TimeoutExpired) as e:
        raise HarnessError(f"{binary}: cannot read its version: {e}") from e
    return f"{line} ({MODULE} {m.group(1).decode()})" if m else line


class WireGuard(Mode):
    """The kernel module. The userspace mode below differs only in how the device appears."""

    name = "wireguard"
    kind = "wireguard"
    order = 90
    colour = "#332288"
    overhead = OVERHEAD_IPV4  # IPv4 underlays; deploy refuses what does not fit an IPv6 one
    description = "kernel WireGuard, routed (L3) with proxy ARP on the bridge"
    multi_host = True

    # names and files ---------------------------------------------------------
    def dev(self, side: Side) -> str:
        # On a real host: the testbed's prefix, and the side's index (two sides may share one
        # machine's /var/run/wireguard when the hosts are namespaces of one kernel).
        return side.dev(f"wg{side.index}") if side.prefix else "obwg0"

    @staticmethod
    def key_path(side: Side) -> str:
        return f"{side.workdir}/wireguard-private.key"

    # check -------------------------------------------------------------------
    def check(self, testbed: Testbed) -> None:
        for s in testbed.sides:
            probe = s.host.run(["ip", "link", "add", "obwgchk", "type", "wireguard"], check=False)
            if not probe.ok:
                why = (probe.stderr.strip() or f"exit {probe.returncode}").splitlines()[-1]
                raise UnsupportedError(f"mode {self.name}: kernel WireGuard unsupported here on {s.host.name} ({why})")
            s.host.run(["ip", "link", "del", "obwgchk"], check=False)
        self._check_wg(testbed)

    def _check_wg(self, testbed: Testbed) -> None:
        for s in testbed.sides:
            if s.host.which("wg") is None:
                raise HarnessError(f"mode {self.name}: `wg` not found on {s.host.name} "
                                   "(apt-get install -y --no-install-recommends wireguard-tools)")

    # deploy ------------------------------------------------------------------
    def deploy(self, testbed: Testbed, overlay_mtu: int) -> Datapath:
        for s in testbed.sides:
            need = overhead_for(s.underlay_ip)
            if overlay_mtu + need > testbed.underlay_mtu:
                raise HarnessError(
                    f"overlay MTU {overlay_mtu} does not fit mode {self.name} on underlay MTU {testbed.underlay_mtu} "
                    f"({s.underlay_ip}): its encapsulation adds {need} bytes, so at most {testbed.underlay_mtu - need}")
        dp = Datapath(self.name, self.kind, overlay_mtu,
                      info={"implementation": self.name, "listen_port": PORT,
                            "overhead": overhead_for(testbed.sides[0].underlay_ip)})
        try:
            publics = {s.index: self._genkey(s) for s in testbed.sides}
            for s in testbed.sides:
                self._create(testbed, s, dp)
            for s in testbed.sides:
                peers = testbed.peers(s)
                s.host.run(wg_set_argv(self.dev(s), self.key_path(s),
                                       [(self.peer_public(s, publics, p), p) for p in peers]))
                reset_overlay_path(s, overlay_mtu, self.dev(s))
                s.host.run(["ip", "link", "set", self.dev(s), "up"])
                for p in peers:
                    route_l3(s, p, self.dev(s))
            dp.info.update(self.versions(testbed))
            dp.info["first_handshake"] = self._handshake(testbed)
        except BaseException:
            self.teardown(testbed, dp)
            raise
        dp.devices = {s.index: [s.underlay_dev, self.dev(s), s.bridge, s.container_port, f"ctr:{s.container_dev}"]
                      for s in testbed.sides}
        return dp

    def _genkey(self, s: Side) -> str:
        """A fresh private key into a 0600 file on the side's host; its public key back."""
        s.host.run(["mkdir", "-p", "-m", "0700", s.workdir])
        done = s.host.run(["sh", "-c", 'rm -f "$1" && umask 077 && set -C && wg genkey > "$1" && wg pubkey < "$1"',
                           "sh", self.key_path(s)])
        public = done.stdout.strip()
        if not KEY_RE.match(public):
            raise HarnessError(f"{s.host.name}: `wg pubkey` printed no public key")
        return public

    def peer_public(self, s: Side, publics: dict[int, str], peer: Side) -> str:
        """The public key side `s` is told `peer` has."""
        return publics[peer.index]

    def _create(self, testbed: Testbed, s: Side, dp: Datapath) -> None:
        s.host.run(["ip", "link", "del", self.dev(s)], check=False)  # a killed run's, by our name
        done = s.host.run(["ip", "link", "add", self.dev(s), "type", "wireguard"], check=False)
        if not done.ok:
            why = (done.stderr.strip() or f"exit {done.returncode}").splitlines()[-1]
            raise UnsupportedError(f"mode {self.name}: kernel WireGuard unsupported here on {s.host.name} ({why})")

    def versions(self, testbed: Testbed) -> dict:
        h = testbed.sides[0].host
        wg = h.run(["wg", "--version"], check=False).stdout.split()
        mod = h.run(["cat", "/sys/module/wireguard/version"], check=False)
        kernel = h.run(["uname", "-r"], check=False).stdout.strip()
        return {"wg": wg[1] if len(wg) > 1 else "unknown",
                "version": f"kernel {kernel} module {mod.stdout.strip() if mod.ok else 'unknown'}"}

    def _handshake(self, testbed: Testbed) -> bool:
        """Send one packet across every pair (from the pair's first host) so no handshake is
        part of a measurement; whether each completed (as `wg` reports it, not the ping)."""
        deadline = time.monotonic() + HANDSHAKE_TIMEOUT
        for a in testbed.sides:
            later = [b for b in testbed.sides if b.index > a.index]
            while later:
                for b in later:
                    a.host.run(["ping", "-c", "1", "-W", "1", b.overlay_ip], check=False, timeout=10)
                snap = self._show(a)      # the earlier hosts' handshakes with `a` are done already
                if snap and snap["peers_handshaken"] >= len(testbed.sides) - 1:
                    break
                if time.monotonic() > deadline:
                    return False
        return True

    # teardown ----------------------------------------------------------------
    def teardown(self, testbed: Testbed, dp: Datapath | None) -> None:
        for s in testbed.sides:
            stop_daemon(s, dp, self.name)
            try:
                for p in testbed.peers(s):
                    unroute_l3(s, p, self.dev(s))
                s.host.run(["ip", "link", "del", self.dev(s)], check=False)
                s.host.run(["rm", "-f", self.key_path(s), *self.files(s)], check=False)
                reset_overlay_path(s, 1500, None)
            except CommandError as e:
                log.warning("%s teardown on %s: %s", self.name, s.host.name, e)

    def files(self, s: Side) -> list[str]:
        """Files besides the key that a deployment may leave on a host."""
        return []

    # counters ----------------------------------------------------------------
    def _show(self, s: Side) -> dict | None:
        tr = s.host.run(["wg", "show", self.dev(s), "transfer"], check=False)
        hs = s.host.run(["wg", "show", self.dev(s), "latest-handshakes"], check=False)
        return parse_wg_show(tr.stdout, hs.stdout) if tr.ok and hs.ok else None

    def counters(self, testbed: Testbed, dp: Datapath) -> dict | None:
        """Bytes through the tunnel and the latest handshake, per host (never `wg show
        dump`: it prints the private key)."""
        out = {f"h{s.index}": self._show(s) for s in testbed.sides}
        return out if any(out.values()) else None


class WireGuardGo(WireGuard):
    name = "wireguard-go"
    order = 80
    colour = "#882255"
    description = "userspace WireGuard (wireguard-go, pinned), routed (L3) with proxy ARP on the bridge"

    def __init__(self, built: pathlib.Path | None = None):
        self.built = built  # None: where `make wireguard-go` puts it

    def dev(self, side: Side) -> str:
        if side.prefix:
            return side.dev(f"wg{side.index}")
        # Unique per workdir: the UAPI socket's path is shared by namespaces on one machine.
        return "obwg" + hashlib.sha256(side.workdir.encode()).hexdigest()[:6]

    def files(self, s: Side) -> list[str]:
        return [self.socket(s)]

    def socket(self, s: Side) -> str:
        return f"{UAPI_DIR}/{self.dev(s)}.sock"

    def binary(self, testbed: Testbed) -> pathlib.Path:
        """Copied into the testbed's directory once, so a run ships one build throughout."""
        pinned = pathlib.Path(testbed.artifact_dir) / "wireguard-go"
        if not pinned.exists():
            built = find_binary(self.built)
            tmp = pinned.with_suffix(".tmp")
            tmp.write_bytes(built.read_bytes())
            tmp.chmod(0o755)
            tmp.replace(pinned)
        return pinned

    def local_check(self) -> None:
        find_binary(self.built)

    def check(self, testbed: Testbed) -> None:
        find_binary(self.built)
        for s in testbed.sides:
            if s.host.run(["test", "-c", "/dev/net/tun"], check=False).returncode != 0:
                raise UnsupportedError(f"mode {self.name}: /dev/net/tun missing on {s.host.name}: "
                                       "TUN unsupported here")
        self._check_wg(testbed)

    def _create(self, testbed: Testbed, s: Side, dp: Datapath) -> None:
        binary = self.binary(testbed)
        remote = f"{s.workdir}/wireguard-go"
        s.host.put(str(binary), remote, 0o755)
        # -f: in the foreground, so the harness owns the process (and its CPU seconds);
        # WG_PROCESS_FOREGROUND=1 only quiets the "use the kernel module" banner.
        dp.processes[s.index] = s.host.start(["env", "WG_PROCESS_FOREGROUND=1", "LOG_LEVEL=error",
                                              remote, "-f", self.dev(s)])
        self._wait_ready(s, dp.processes[s.index])

    def _wait_ready(self, s: Side, proc: Process) -> None:
        wait_ready(s, proc, lambda: s.host.run(["test", "-S", self.socket(s)], check=False).ok, "wireguard-go",
                   READY_TIMEOUT, exited="exited before its device was up")

    def versions(self, testbed: Testbed) -> dict:
        wg = testbed.sides[0].host.run(["wg", "--version"], check=False).stdout.split()
        return {"wg": wg[1] if len(wg) > 1 else "unknown", "version": go_version(self.binary(testbed))}
