"""A mode defined by commands: `up` and `down` per host, from a scenario's [modes.NAME].

    [modes.vxlan77]
    description = "a second kernel VXLAN"
    layer = "l2"                 # l2: the harness enslaves ${dev} to the bridge; l3: routes through it
    overhead = 50                # bytes the encapsulation takes: "auto" = underlay MTU - overhead
    device = "vx77"              # ${dev} is this name on the host (prefixed on a real one)
    up = ["ip link add ${dev} type vxlan id 77 dstport 4790 local ${underlay_ip} remote ${peer_underlay_ip}"]
    down = ["ip link del ${dev}"]
    pid_file = "${workdir}/d.pid"  # optional: the daemon `up` started, whose CPU is the mode's

Decisions, and why:

- **Commands are argv templates; the harness never hands a value to a shell.** A command
  is a string split as a shell splits words (quotes group, nothing else is special), or
  an array of words. `${name}` in a word is replaced by the variable's value and the word
  stays one argv element, which the host runs as it runs any argv (over SSH each word is
  quoted), so `x; touch f` or `$(reboot)` arrives as those very bytes, never as syntax.
  A shell is there only where the definition asks for one (`sh -c 'SCRIPT' sh ${dev}`):
  then values go in as its arguments ($1 …); a variable inside the script itself would
  become code, and is refused when the definition is read. `$$` is a literal `$`; any
  other `$` is left alone (a script's own `$1`).
- **Every variable is known when the definition is read**: an unknown `${name}` is an
  error naming the file, the mode and the variable, before anything runs.
- **What a killed run leaves goes with `overlaybench down`.** `${dev}` is Side.dev: on a
  real host it carries the testbed's prefix, which `down` deletes links by; other objects
  should be named `${prefix}-…`. Every command runs through the side's host, which on a
  real host puts OVERLAYBENCH_PREFIX=<P> in its environment, so a daemon `up` starts in
  the background inherits the mark `down` kills by; in the lab it runs inside the lab's
  namespaces, which `down` empties and deletes.
- **Deploy**: on each side `down` first (its failures ignored: what a deployment cut
  short left under this testbed's names), then `up`; then the harness wires `${dev}` in
  as fastdp (l2) or sleeve-l3 (l3) are wired. An `up` that fails raises with the
  command and the last lines of its stderr, after `down` has run on both sides; the
  runner records that as its group's failed rows. Teardown runs `down`, stops the
  pid file's daemon if it outlived `down`, deletes `${dev}` if it is still there and
  resets the overlay path; nothing in it raises for what is gone.
- **CPU**: the runner accounts one daemon per side (Datapath.processes), so a definition
  names at most one, by a pid file `up` writes. PidFileDaemon (harness/modes/pidfile.py)
  gives the runner what it reads of a Process (pid, poll, wait, stop), by its pid and
  start time (a reused pid is not it), as duck typing: modes import no host classes at
  run time.
"""

from __future__ import annotations

import dataclasses
import logging
import re
import shlex

from harness.bed import Side, Testbed
from harness.core import schema
from harness.core.errors import CommandError, HarnessError, ScenarioError
from harness.modes.base import Datapath, Mode, reset_overlay_path, route_l3, unroute_l3
from harness.modes.pidfile import PidFileDaemon

log = logging.getLogger(__name__)

# name → what it holds, on the side the command runs on
VARIABLES = {
    "prefix": "the testbed's prefix (ob + 4 hex digits)",
    "side": "0 (the client's host) or 1 (the server's)",
    "dev": "the mode's device on this host: `device`, prefixed on a real host",
    "underlay_dev": "the device facing the peer",
    "underlay_ip": "this host's underlay address",
    "peer_underlay_ip": "the peer's underlay address",
    "overlay_ip": "this host's address on the overlay bridge",
    "peer_overlay_ip": "the peer's address on its overlay bridge",
    "container_ip": "this side's container address",
    "peer_container_ip": "the peer's container address",
    "overlay_prefix": "the overlay network's prefix length (24)",
    "mtu": "the overlay MTU of this deployment",
    "underlay_mtu": "the underlay MTU",
    "bridge": "the overlay bridge",
    "workdir": "a directory of this side's own (removed with the testbed)",
}
SHELLS = {"sh", "bash", "dash", "ash", "ksh", "mksh", "zsh", "busybox"}
LAYERS = ("l2", "l3")
MIN_MTU = 576                       # IPv4's minimum datagram every host must take
NAME_RE = re.compile(r"^[a-z][a-z0-9_-]{0,31}$")
DEVICE_RE = re.compile(r"^[a-z][a-z0-9]{0,7}$")   # "ob12ab-" + 8 characters: IFNAMSIZ - 1


@dataclasses.dataclass(frozen=True)
class Var:
    name: str


Word = tuple  # of str (literal) and Var parts


def parse_word(word: str, where: str) -> Word:
    """One word of a command template → its literal and variable parts; ValueError for an
    unknown variable or a `${` left open."""
    parts: list = []
    lit, i = "", 0
    while i < len(word):
        if word.startswith("$$", i):
            lit, i = lit + "$", i + 2
        elif word.startswith("${", i):
            end = word.find("}", i)
            if end < 0:
                raise ValueError(f"{where}: `${{` without a closing `}}` in {word!r}")
            name = word[i + 2:end]
            if name not in VARIABLES:
                raise ValueError(f"{where}: unknown variable ${{{name}}}{schema.suggest(name, VARIABLES)}; "
                                 f"known: {', '.join(VARIABLES)}")
            if lit:
                parts.append(lit)
            parts.append(Var(name))
            lit, i = "", end + 1
        else:
            lit, i = lit + word[i], i + 1
    if lit or not parts:
        parts.append(lit)
    return tuple(parts)


def _script_words(words: list[Word]) -> list[int]:
    """Indexes of the words a shell will run as code: the operand after `-c` of any word
    that names a shell (`sh -c`, `env X=1 bash -ec`, `ip netns exec N sh -c`)."""
    out = []
    for k, w in enumerate(words):
        if not (len(w) == 1 and isinstance(w[0], str) and w[0].rsplit("/", 1)[-1] in SHELLS):
            continue
        j, saw_c = k + 1, False
        while j < len(words) and len(words[j]) == 1 and isinstance(words[j][0], str) \
                and words[j][0][:1] in "-+" and words[j][0] not in ("-", "--"):
            flag = words[j][0]
            if flag in ("-o", "+o"):
                j += 2
                continue
            saw_c = saw_c or (flag[0] == "-" and "c" in flag[1:])
            j += 1
        if j < len(words) and words[j] == ("--",):
            j += 1
        if saw_c and j < len(words):
            out.append(j)
    return out


def parse_command(cmd, where: str) -> tuple[Word, ...]:
    """A command (a string split as a shell splits words, or an array of words) → its words."""
    if isinstance(cmd, str):
        try:
            raw = shlex.split(cmd)
        except ValueError as e:
            raise ValueError(f"{where}: {cmd!r}: {e}") from e
    elif isinstance(cmd, list) and all(isinstance(w, str) for w in cmd):
        raw = list(cmd)
    else:
        raise ValueError(f"{where}: expected a string or an array of strings, got {cmd!r}")
    if not raw:
        raise ValueError(f"{where}: an empty command")
    words = [parse_word(w, where) for w in raw]
    for j in _script_words(words):
        used = [p.name for p in words[j] if isinstance(p, Var)]
        if used:
            raise ValueError(f"{where}: ${{{used[0]}}} inside a shell's script would become code: pass it as an "
                             f"argument (sh -c '… \"$1\"' sh ${{{used[0]}}})")
    return tuple(words)


def expand(words: tuple[Word, ...], values: dict[str, str]) -> list[str]:
    """The argv of a parsed command: each word one element, whatever its values hold."""
    return ["".join(values[p.name] if isinstance(p, Var) else p for p in w) for w in words]


def _commands(where: str):
    def rule(v):
        if not v:
            raise ValueError(f"{where}: must not be empty")
        return tuple(parse_command(c, f"{where} #{i + 1}") for i, c in enumerate(v))
    return rule


def _names(v: list) -> tuple[str, ...]:
    if not all(isinstance(x, str) for x in v):
        raise ValueError(f"{v!r}: expected a list of names")
    return tuple(v)


def _match(regex: re.Pattern, what: str):
    def rule(v):
        if not regex.match(v):
            raise ValueError(f"{v!r}: {what}")
        return v
    return rule


F = schema.Field
FIELDS = {
    "description": F(str),
    "layer": F(str, schema.one_of(*LAYERS)),
    "overhead": F(int, schema.int_range(0, 65535 - MIN_MTU, " bytes")),
    "device": F(str, _match(DEVICE_RE, "a letter, then up to 7 lowercase letters or digits")),
    "up": F(list),
    "down": F(list),
    "pid_file": F(str, lambda v: parse_word(v, "pid_file")),
    "features": F(list, lambda v: _names(v), doc="kernel features preflight probes (the scenario knows which)"),
    "timeout": F(int, schema.int_range(1, 3600, " s")),
}
REQUIRED = ("layer", "overhead", "device", "up", "down")


class CommandMode(Mode):
    """A mode whose deploy and teardown are a definition's commands. No class-level
    `name`: the registry's discovery never makes one; definitions do (harness/modes/__init__)."""

    order = 1000

    def __init__(self, name: str, definition: dict, source: str):
        self.name, self.kind, self.source = name, name, source
        self.definition = definition                 # as given: what run.json keeps
        where = f"[modes.{name}]"
        got = schema.check_table(definition, FIELDS, source, where)
        missing = [k for k in REQUIRED if k not in got]
        if missing:
            why = {"down": "a mode defined by commands must say how to remove what `up` makes"}
            raise schema.error(source, where, f"no `{missing[0]}`" + (f": {why[missing[0]]}" if missing[0] in why
                                                                      else f" (needs {', '.join(REQUIRED)})"))
        for key in ("up", "down"):
            try:
                got[key] = _commands(key)(got[key])
            except ValueError as e:
                raise ScenarioError(f"{source}: {where} {e}") from e
        self.description = got.get("description", f"defined by commands in {source}")
        self.layer, self.overhead, self.device = got["layer"], got["overhead"], got["device"]
        self.up, self.down = got["up"], got["down"]
        self.pid_file: Word | None = got.get("pid_file")
        self.features = tuple(got.get("features", ()))
        self.timeout = got.get("timeout", 60)

    def same(self, other: Mode) -> bool:
        return isinstance(other, CommandMode) and (other.name, other.definition) == (self.name, self.definition)

    def overlay_mtu(self, underlay_mtu, requested):
        if underlay_mtu - self.overhead < MIN_MTU:
            raise HarnessError(f"mode {self.name} ({self.source}): its overhead of {self.overhead} bytes leaves "
                               f"{underlay_mtu - self.overhead} of underlay MTU {underlay_mtu}, below {MIN_MTU}")
        return super().overlay_mtu(underlay_mtu, requested)

    # ---------------------------------------------------------------- the hosts
    def values(self, testbed: Testbed, s: Side, mtu: int) -> dict[str, str]:
        peer = testbed.peer(s)
        prefix = getattr(testbed, "prefix", "") or s.table.rpartition("-h")[0]
        return {"prefix": prefix, "side": str(s.index), "dev": s.dev(self.device),
                "underlay_dev": s.underlay_dev, "underlay_ip": s.underlay_ip, "peer_underlay_ip": peer.underlay_ip,
                "overlay_ip": s.overlay_ip, "peer_overlay_ip": peer.overlay_ip, "container_ip": s.container_ip,
                "peer_container_ip": peer.container_ip, "overlay_prefix": str(testbed.overlay_prefix),
                "mtu": str(mtu), "underlay_mtu": str(testbed.underlay_mtu), "bridge": s.bridge, "workdir": s.workdir}

    def check(self, testbed: Testbed) -> None:
        """Every program the commands start is there on each host."""
        programs = dict.fromkeys(w[0][0] for w in (*self.up, *self.down) if len(w[0]) == 1 and isinstance(w[0][0], str))
        for s in testbed.sides:
            for p in programs:
                if s.host.which(p) is None:
                    raise HarnessError(f"mode {self.name} ({self.source}): `{p}` not found on {s.host.name}")

    def _run(self, s: Side, step: str, commands, values: dict[str, str], check: bool) -> None:
        for words in commands:
            argv = expand(words, values)
            done = s.host.run(argv, check=False, timeout=self.timeout)
            if done.ok:
                continue
            said = " | ".join((done.stderr.strip() or done.stdout.strip()).splitlines()[-3:])
            what = "timed out" if done.returncode is None else f"exited {done.returncode}"
            if check:
                raise HarnessError(f"mode {self.name}: {step} on {s.host.name}: `{shlex.join(argv)}` {what}"
                                   + (f": {said[-400:]}" if said else ""))
            log.info("%s %s on %s: `%s` %s: %s", self.name, step, s.host.name, shlex.join(argv), what, said)

    def deploy(self, testbed: Testbed, overlay_mtu: int) -> Datapath:
        dp = Datapath(self.name, self.kind, overlay_mtu,
                      info={"layer": self.layer, "overhead": self.overhead, "defined_in": self.source})
        try:
            for s in testbed.sides:
                values = self.values(testbed, s, overlay_mtu)
                s.host.run(["mkdir", "-p", "-m", "0700", s.workdir])
                self._run(s, "down", self.down, values, check=False)
                self._run(s, "up", self.up, values, check=True)
            for s in testbed.sides:
                self._wire(testbed, s, overlay_mtu)
                if self.pid_file is not None:
                    dp.processes[s.index] = PidFileDaemon.read(s.host, expand((self.pid_file,),
                                                                              self.values(testbed, s, overlay_mtu))[0])
        except BaseException:
            self.teardown(testbed, dp)
            raise
        dp.devices = {s.index: [s.underlay_dev, s.dev(self.device), s.bridge, s.container_port,
                                f"ctr:{s.container_dev}"] for s in testbed.sides}
        return dp

    def _wire(self, testbed: Testbed, s: Side, mtu: int) -> None:
        dev = s.dev(self.device)
        if not s.host.run(["ip", "link", "show", "dev", dev], check=False).ok:
            raise HarnessError(f"mode {self.name}: `up` made no device {dev} on {s.host.name}")
        reset_overlay_path(s, mtu, dev)
        if self.layer == "l2":
            s.host.run(["ip", "link", "set", dev, "master", s.bridge, "up"])
        else:
            s.host.run(["ip", "link", "set", dev, "up"])
            route_l3(s, testbed.peer(s), dev)

    def teardown(self, testbed: Testbed, dp: Datapath | None) -> None:
        for s in testbed.sides:
            dev = s.dev(self.device)
            try:
                if self.layer == "l3":
                    unroute_l3(s, testbed.peer(s), dev)
                self._run(s, "down", self.down, self.values(testbed, s, dp.overlay_mtu if dp else 1500), check=False)
                daemon = dp.processes.get(s.index) if dp else None
                if daemon is not None:
                    daemon.stop()
                s.host.run(["ip", "link", "del", dev], check=False)
                reset_overlay_path(s, 1500, None)
            except CommandError as e:
                log.warning("%s teardown on %s: %s", self.name, s.host.name, e)
