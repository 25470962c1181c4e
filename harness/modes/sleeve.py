"""The userspace UDP sleeve (overlay/sleeve) as its modes, and `auto`.

    sleeve                TAP on the overlay bridge, every speed feature on (offloads, batching)
    sleeve-seg            sleeve cutting TCP super-frames into segments in userspace
    sleeve-basic          the same binary, one frame per datagram, one syscall per packet (2015)
    sleeve-l3             TUN, IP packets over UDP, routed (Flannel's UDP backend design)
    sleeve-crypto         sleeve with an AEAD from OpenSSL, a fresh key shared by both hosts:
                          `--cipher auto`, AES-256-GCM where both have AES-NI, else ChaCha20-Poly1305
    sleeve-crypto-chacha  the same with ChaCha20-Poly1305 forced on both sides

A keyed deployment records the AEAD the daemons agreed on in Datapath.info["cipher"]
(from their counters: "none" if they refused each other) and, per side, the library
that seals it in Datapath.info["cipher_impl"].

Across more than two hosts every daemon has every other host as a `--peer`, one key
shared by all (each pair's session keys are derived from it and the two addresses), and
sends a frame to the one peer its destination was learned behind, or to all while it is
not known yet (overlay/sleeve/src/route.h). `auto` stays between two hosts.

The testbed puts a binary on each host (built once per run from the shipped source:
harness/sleeve/build.py), the mode starts one daemon per host, waits for its device
to come up, and wires the device in.
"""

from __future__ import annotations

import json
import logging
import os
import pathlib
import secrets
import signal
import time

from harness.bed import Side, Testbed
from harness.core import failpoints
from harness.core.errors import CommandError, UnsupportedError
from harness.hosts.base import Process
from harness.modes.base import Datapath, Mode, reset_overlay_path, route_l3, stop_daemon, unroute_l3, wait_ready
from harness.modes.fastdp import FastDP

log = logging.getLogger(__name__)

PORT = 6784
DEV = "sv0"
# Deadlines catch a hang, never judge speed (each step takes milliseconds): they hold on a
# machine whose CPUs something else keeps busy.
READY_TIMEOUT = 30.0
AGREE_TIMEOUT = 20.0      # for the daemons' first heartbeats: the AEAD they agree on
COUNTERS_TIMEOUT = 20.0   # for a daemon to write its counters after SIGUSR1

# Overhead from overlay/README.md (wire v2): outer IPv4 20 + UDP 8 + header 8
# (+ Ethernet 14 for L2) (+ 32 with a key: session 8, counter 8, tag 16).
OVERHEAD_L2, OVERHEAD_L3, OVERHEAD_CRYPTO = 50, 36, 32


class Sleeve(Mode):
    kind = "sleeve"
    name = "sleeve"
    order = 30
    colour = "#E69F00"
    features = ("tun",)
    ships_sleeve = True
    multi_host = True
    description = "userspace UDP sleeve, TAP on the bridge, offloads and batching on"
    flags: tuple[str, ...] = ()
    l3 = False
    crypto = False
    cipher = "auto"       # --cipher, with a key
    # A harness.sleeve.refs.Build to deploy instead of the project's own build (the arms of
    # `overlaybench compare`, e.g. sleeve@base and sleeve@head; see harness/modes/variants.py).
    sleeve_build = None

    @property
    def overhead(self) -> int:  # type: ignore[override]
        return (OVERHEAD_L3 if self.l3 else OVERHEAD_L2) + (OVERHEAD_CRYPTO if self.crypto else 0)

    def source(self):
        """The sleeve source this mode deploys: its build's (an A/B arm), else None (shipped)."""
        return None if self.sleeve_build is None else self.sleeve_build.source

    def check(self, testbed: Testbed) -> None:
        for s in testbed.sides:
            testbed.install_sleeve(s, self.source())   # builds it now: a build error stops the run here
        h = testbed.sides[0].host
        if h.run(["test", "-c", "/dev/net/tun"], check=False).returncode != 0:
            raise UnsupportedError(f"mode {self.name}: /dev/net/tun missing on {h.name}: TUN/TAP unsupported here")

    @staticmethod
    def version(host, binary: str) -> str:
        out = host.run([binary, "--version"], check=False).stdout.strip().splitlines()
        return out[0] if out else "unknown"

    # ------------------------------------------------------------------ deploy
    def deploy(self, testbed: Testbed, overlay_mtu: int) -> Datapath:
        dp = Datapath(self.name, self.kind, overlay_mtu, info={"flags": list(self.argv_flags()), "port": PORT})
        if self.sleeve_build is not None:
            dp.info["build"] = self.sleeve_build.describe()
        try:
            keys = self.keys(len(testbed.sides))
            binaries = {}
            for s in testbed.sides:
                binaries[s.index] = testbed.install_sleeve(s, self.source())
                dp.processes[s.index] = self._start(testbed, s, binaries[s.index], overlay_mtu, keys[s.index])
                failpoints.reached("deploy")
            for s in testbed.sides:
                self._wait_ready(s, dp.processes[s.index])
            for s in testbed.sides:
                self._wire(testbed, s, overlay_mtu)
            dp.info["version"] = self.version(testbed.sides[0].host, binaries[0])
            if self.crypto:
                dp.info["cipher"] = self.agreed_cipher(testbed, dp)
                dp.info["cipher_impl"] = self.cipher_impls(testbed, dp)
        except BaseException:
            self.teardown(testbed, dp)
            raise
        dp.devices = {s.index: [s.underlay_dev, s.dev(DEV), s.bridge, s.container_port, f"ctr:{s.container_dev}"]
                      for s in testbed.sides}
        return dp

    def keys(self, n: int = 2) -> tuple[bytes | None, ...]:
        """The key each of `n` sides gets: one fresh random key shared by all, or none."""
        key = secrets.token_bytes(32) if self.crypto else None
        return (key,) * n

    def argv_flags(self) -> tuple[str, ...]:
        extra = self.sleeve_build.flags if self.sleeve_build is not None else ()
        return ((("--l3",) if self.l3 else ()) + self.flags + (("--cipher", self.cipher) if self.crypto else ())
                + extra)

    def cipher_impls(self, testbed: Testbed, dp: Datapath) -> list[str | None]:
        """Per side, the library that seals the agreed AEAD there ("AWS-LC 5.12.0", "OpenSSL
        3.0.19 ..."): the cipher is the same either way, the speed is not."""
        snaps = self.counters(testbed, dp) or {}
        return [(snaps.get(f"h{s.index}") or {}).get("cipher_impl") for s in testbed.sides]

    def agreed_cipher(self, testbed: Testbed, dp: Datapath) -> str | None:
        """The AEAD every daemon seals with towards each of its peers, once each has heard
        them all: a name, "none" (they refuse each other), "mismatch: A/B" (they do not
        agree, which the daemons' rule rules out), or None (not heard in time)."""
        deadline = time.monotonic() + AGREE_TIMEOUT
        want = len(testbed.sides) * (len(testbed.sides) - 1)
        while True:
            snaps = self.counters(testbed, dp) or {}
            seen = [p.get("cipher") for snap in snaps.values() for p in ((snap or {}).get("peers") or [])]
            if len(seen) == want and all(seen):
                return seen[0] if len(set(seen)) == 1 else "mismatch: " + "/".join(dict.fromkeys(seen))
            if time.monotonic() > deadline:
                log.warning("sleeve: the daemons did not report an agreed AEAD within %.0fs: %s",
                            AGREE_TIMEOUT, seen)
                return None
            time.sleep(0.1)

    def _start(self, testbed: Testbed, s: Side, binary: str, mtu: int, key: bytes | None) -> Process:
        peers = [a for p in testbed.peers(s) for a in ("--peer", f"{p.underlay_ip}:{PORT}")]
        argv = [binary, "--dev", s.dev(DEV), "--local", f"{s.underlay_ip}:{PORT}", *peers,
                "--mtu", str(mtu), "--stats-file", self.stats_path(s), *self.argv_flags()]
        if key is not None:
            key_path = self.key_path(s)
            local = pathlib.Path(testbed.artifact_dir) / f"key-{s.index}"
            local.parent.mkdir(parents=True, exist_ok=True)
            local.unlink(missing_ok=True)           # a failed deployment's
            fd = os.open(local, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
            try:
                with os.fdopen(fd, "wb") as f:
                    f.write(key)
                s.host.put(str(local), key_path, 0o600)
            finally:
                if local != pathlib.Path(key_path):
                    local.unlink(missing_ok=True)
            argv += ["--key-file", key_path]
        return s.host.start(argv)

    @staticmethod
    def key_path(s: Side) -> str:
        return f"{s.workdir}/sleeve.key"

    @staticmethod
    def stats_path(s: Side) -> str:
        return f"{s.workdir}/sleeve-stats.json"

    def _wait_ready(self, s: Side, proc: Process) -> None:
        def up() -> bool:
            link = s.host.run(["ip", "-o", "link", "show", s.dev(DEV)], check=False)
            return link.ok and ",UP" in link.stdout
        wait_ready(s, proc, up, "sleeve", READY_TIMEOUT)

    def _wire(self, testbed: Testbed, s: Side, mtu: int) -> None:
        h, dev = s.host, s.dev(DEV)
        reset_overlay_path(s, mtu, dev)
        if not self.l3:
            h.run(["ip", "link", "set", dev, "master", s.bridge, "up"])
            return
        for peer in testbed.peers(s):
            route_l3(s, peer, dev)

    # ---------------------------------------------------------------- teardown
    def teardown(self, testbed: Testbed, dp: Datapath | None) -> None:
        for s in testbed.sides:
            stop_daemon(s, dp, "sleeve")
            try:
                s.host.run(["ip", "link", "del", s.dev(DEV)], check=False)
                s.host.run(["rm", "-f", self.key_path(s), self.stats_path(s)], check=False)
                if self.l3:
                    for peer in testbed.peers(s):
                        unroute_l3(s, peer, s.dev(DEV))
                reset_overlay_path(s, 1500, None)
            except CommandError as e:
                log.warning("sleeve teardown on %s: %s", s.host.name, e)

    # ---------------------------------------------------------------- counters
    def counters(self, testbed: Testbed, dp: Datapath) -> dict | None:
        """Ask each daemon for its counters (SIGUSR1 → stats file, tmp + rename) and read them."""
        out = {}
        for s in testbed.sides:
            proc = dp.processes.get(s.index)
            if proc is None or proc.pid is None or proc.poll() is not None:
                continue
            path = self.stats_path(s)
            s.host.run(["rm", "-f", path], check=False)
            try:
                proc.signal(signal.SIGUSR1)
            except ProcessLookupError:
                continue
            deadline = time.monotonic() + COUNTERS_TIMEOUT
            snap = None
            while snap is None and time.monotonic() < deadline:
                done = s.host.run(["cat", path], check=False)
                if done.ok and done.stdout:
                    try:
                        snap = json.loads(done.stdout)
                    except ValueError:
                        pass
                else:
                    time.sleep(0.05)
            out[f"h{s.index}"] = snap
        return out or None


class SleeveBasic(Sleeve):
    name = "sleeve-basic"
    order = 70
    colour = "#D55E00"
    description = "the 2015 reference: one frame per datagram, one syscall per packet"
    flags = ("--basic",)


class SleeveSeg(Sleeve):
    """The other way to carry a super-frame ("measure both"): the sender cuts
    it into MSS-sized TCP segments in userspace and the receiver gathers them back."""

    name = "sleeve-seg"
    order = 40
    colour = "#F0E442"
    description = "sleeve cutting TCP super-frames into segments (userspace GSO/GRO)"
    flags = ("--segment",)


class SleeveL3(Sleeve):
    name = "sleeve-l3"
    order = 50
    colour = "#CC79A7"
    description = "TUN, IP packets over UDP, routed (Flannel UDP)"
    l3 = True


class SleeveCrypto(Sleeve):
    name = "sleeve-crypto"
    order = 60
    colour = "#009E73"
    description = "sleeve with AEAD (OpenSSL): AES-256-GCM where both have AES-NI, else ChaCha20-Poly1305"
    crypto = True


class SleeveCryptoChacha(SleeveCrypto):
    """sleeve-crypto with ChaCha20-Poly1305 forced, so one run compares both AEADs."""

    name = "sleeve-crypto-chacha"
    order = 65
    colour = "#117733"
    description = "sleeve with ChaCha20-Poly1305 (OpenSSL) forced on both sides"
    cipher = "chacha20-poly1305"


class Auto(Mode):
    """fastdp where a full-MTU DF probe across VXLAN succeeds, the sleeve where it does not
    (Weave 1.2's automatic fallback). What carried the traffic is the Datapath's kind.

    Across more than two hosts every pair is probed (from its first host) and each pair's
    outcome recorded (Datapath.info["decisions"]); one data path serves them all, so
    fastdp stays only where every pair's probe passes."""

    name = "auto"
    kind = "auto"
    order = 20
    colour = "#56B4E9"
    features = ("vxlan", "tun")
    ships_sleeve = True
    multi_host = True
    description = "fastdp if a full-MTU probe across VXLAN passes, else sleeve"

    def __init__(self):
        self.fast, self.slow = FastDP(), Sleeve()

    @property
    def overhead(self) -> int:  # type: ignore[override]
        return max(self.fast.overhead, self.slow.overhead)

    def check(self, testbed):
        self.fast.check(testbed)
        self.slow.check(testbed)

    def probe(self, testbed: Testbed, mtu: int) -> dict[str, str | None]:
        """Per pair ("h0→h1"): None if full-size DF pings cross the fastdp overlay both ways,
        else the reason."""
        return {f"{a.name}→{b.name}": self._probe_pair(a, b, mtu)
                for a in testbed.sides for b in testbed.sides if b.index > a.index}

    @staticmethod
    def _probe_pair(a: Side, b: Side, mtu: int) -> str | None:
        # -w: until 3 replies or 5 s (ping exits 0 only with all 3). With -W, ping would wait
        # for the last reply only twice the slowest round trip so far once one came back.
        done = a.host.run(["ping", "-c", "3", "-i", "0.2", "-w", "5", "-M", "do", "-s", str(mtu - 28),
                           b.overlay_ip], check=False, timeout=15)
        if done.ok:
            return None
        lines = (done.stdout.strip() or done.stderr.strip()).splitlines()
        loss = [ln for ln in lines if "packet loss" in ln]
        return f"full-MTU ({mtu}) DF probe across VXLAN failed: " + (loss or lines or ["no reply"])[-1].strip()

    def deploy(self, testbed, overlay_mtu):
        dp = self.fast.deploy(testbed, overlay_mtu)
        try:
            per_pair = self.probe(testbed, overlay_mtu)
        except BaseException:
            self.fast.teardown(testbed, dp)
            raise
        failed = {p: why for p, why in per_pair.items() if why is not None}
        decisions = {p: "fastdp: probe passed" if why is None else f"sleeve: {why}" for p, why in per_pair.items()}
        if not failed:
            dp.mode, dp.info["decision"] = self.name, "fastdp: full-MTU probe across VXLAN passed"
            if len(per_pair) > 1:
                dp.info["decisions"] = decisions
            return dp
        why = next(iter(failed.values())) if len(per_pair) == 1 else \
            f"{', '.join(failed)}: " + "; ".join(dict.fromkeys(failed.values()))
        log.info("auto: %s; falling back to the sleeve", why)
        self.fast.teardown(testbed, dp)
        dp = self.slow.deploy(testbed, overlay_mtu)
        dp.mode, dp.info["decision"] = self.name, f"sleeve: {why}"
        if len(per_pair) > 1:
            dp.info["decisions"] = decisions
        return dp

    def teardown(self, testbed, dp):
        (self.fast if dp is not None and dp.kind == "fastdp" else self.slow).teardown(testbed, dp)

    def counters(self, testbed, dp):
        return self.slow.counters(testbed, dp) if dp.kind == "sleeve" else None
