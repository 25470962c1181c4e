"""Scenario files (TOML) → a frozen Scenario → the list of Cases it asks for.

    [scenario]  name, description, mode_files
    [modes.X]   a mode defined by commands (harness/run/mode_tables.py)
    [matrix]    modes, underlay_mtu, overlay_mtu, placements, tests, streams, repeats, duration, pairs,
                schedule
    [underlay]  rate
    [testbed]   backend, inventory (or hosts inline), pair, containers, lab_hosts, lab_cpus, host_cpus
    [sweep]     from, to, steps: the offered loads of the UDP sweeps (iperf3.udp_sweepN)
    [search]    pdr_loss_pct, precision_pct, load_trials: the rate searches' (udp.pdrN's loss; both's
                precision and the trials that vote on each rate)

Every key is checked before anything runs (the tables of harness/run/scenario_tables.py);
an error names the file and the key. Modes defined by commands, in the scenario's own [modes.X]
tables or in the files `mode_files` names (relative to the scenario; each holds only
[modes.X] tables), are read before [matrix] modes is checked. The Scenario keeps their
definitions (`mode_defs`), so run.json has them and --resume makes them again, and its
registry (`known`): the standard modes, those definitions and any the caller adds (an A/B
run's arms). Reading a scenario registers nothing anywhere else.
"""

from __future__ import annotations

import dataclasses
import logging
import pathlib
import tomllib
from typing import Any

from harness.core import pairs as pairs_mod, schema
from harness.core.arms import ARM_SEP
from harness.core.errors import HarnessError, ScenarioError, read_text
from harness.modes import Mode, Registry, standard
from harness.run import mode_tables
from harness.run.scenario_tables import _KNOWN, TABLES, TESTS  # noqa: F401 (TABLES, TESTS: read as scenario.X)
from harness.tools import TOOLS
from harness.tools import search as search_mod, sweep as sweep_mod
from harness.tools.common import IPV4_UDP_HEADERS

log = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class Scenario:
    name: str = "adhoc"
    description: str = ""
    modes: tuple[str, ...] = ("native", "fastdp")
    # Whole numbers, or "auto": the underlay's own MTU (a remote NIC's; 1500 on the lab).
    underlay_mtus: tuple[int | str, ...] = (1500,)
    # A list for every underlay MTU, or {"1500": (1410,), "9000": (8950,)} per underlay MTU.
    overlay_mtus: tuple[int | str, ...] | dict[str, tuple[int | str, ...]] = ("auto",)
    placements: tuple[str, ...] = ("host-host", "container-container")
    tests: tuple[str, ...] = ("iperf3.tcp", "qperf.tcp_lat")
    streams: tuple[int, ...] = (1,)
    repeats: int = 3
    duration: float = 5.0
    unfit: str = "error"      # a mode/overlay MTU that cannot fit the underlay: "error" or "skip"
    rate: str | None = None
    backend: str = "netns"
    inventory: str | None = None      # the ssh backend's hosts file
    hosts: tuple[dict, ...] = ()      # or the hosts themselves, inline in [testbed]
    pair: tuple[str, ...] = ()        # which inventory hosts, two or more or ("all",) (default: the first two)
    containers: str = "netns"         # what a container endpoint is
    lab_hosts: int = 2                # the lab's hosts (the netns backend)
    # the lab's hosts on CPUs of their own ("own") or as the scheduler puts them (testbeds/cpusets.py)
    lab_cpus: str = "own"
    # real hosts' CPUs (ssh, vagrant): every host the inventory gives no `cpus` runs the
    # harness's processes on this CPU list (taskset -c); None: unpinned
    host_cpus: str | None = None
    # which host pairs are measured (harness/core/pairs.py): ("all",), ("ring",),
    # ("star:HOST",) or pairs by name ("h0-h1", …); () is all of them
    pairs: tuple[str, ...] = ()
    # how pairs share the wire (harness/run/together.py): one at a time, disjoint pairs at
    # once (round-robin rounds), or every pair at once
    schedule: str = "sequential"
    mode_files: tuple[str, ...] = ()  # files of [modes.X] definitions, as the scenario names them
    # modes defined by commands: {"name", "source" (the file), "definition" (its table)}
    mode_defs: tuple[dict, ...] = ()
    # [sweep]: the UDP sweeps' offered loads, `sweep_steps` of them from `sweep_from` to
    # `sweep_to` on a log scale (tools/sweep.py `rates`)
    sweep_from: str = sweep_mod.DEFAULT_FROM
    sweep_to: str = sweep_mod.DEFAULT_TO
    sweep_steps: int = sweep_mod.DEFAULT_STEPS
    search_pdr_loss_pct: float = 100 * search_mod.DEFAULT_PDR_LOSS     # [search] (tools/search.py)
    search_precision_pct: float = 100 * search_mod.DEFAULT_PRECISION
    search_load_trials: int = search_mod.DEFAULT_LOAD_TRIALS
    source: str = "<defaults>"
    # the modes this scenario may name (None: the standard ones): made from the standard
    # modes, mode_defs and a caller's additions; never written out
    registry: Registry | None = dataclasses.field(default=None, compare=False, repr=False)

    @property
    def known(self) -> Registry:
        return self.registry if self.registry is not None else standard()

    def mode(self, name: str) -> Mode:
        return self.known.get(name)

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(dataclasses.replace(self, registry=None))
        del d["registry"]
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any], extra: tuple[Mode, ...] = ()) -> "Scenario":
        """The inverse of to_dict (run.json keeps the scenario this way; --resume reads it),
        its registry holding its definitions' modes and `extra`."""
        names = {f.name for f in dataclasses.fields(cls)}
        out: dict[str, Any] = {}
        for k, v in d.items():
            if k not in names:
                continue
            if k == "hosts":
                v = tuple(dict(h) for h in v or ())
            elif isinstance(v, list):
                v = tuple(v)
            elif isinstance(v, dict):
                v = {kk: tuple(vv) for kk, vv in v.items()}
            out[k] = v
        known = mode_tables.define_into(standard(), list(out.get("mode_defs", ()))).extended(extra)
        return cls(**out, registry=known)


@dataclasses.dataclass(frozen=True)
class Case:
    mode: str
    underlay_mtu: int
    overlay_mtu: int          # resolved: "auto" is already underlay − the mode's overhead
    placement: str
    test: str
    streams: int
    repeat: int
    src: str = ""             # the client's and the server's host, where the run has a pair
    dst: str = ""             # dimension ("": a run of one pair, the testbed's first two hosts)

    @property
    def pair(self) -> str | None:
        """"SRC→DST" where the run has a pair dimension, else None (as in runs of one pair)."""
        return pairs_mod.label(self.src, self.dst) if self.src else None

    @property
    def key(self) -> str:
        """Identifies the configuration across repeats (what `case` holds in a result line)."""
        return (f"{self.mode}/u{self.underlay_mtu}/o{self.overlay_mtu}/{self.placement}/"
                f"{self.test}/p{self.streams}" + (f"/{self.src}-{self.dst}" if self.src else ""))

    @property
    def config(self) -> tuple:
        """The configuration in harness.analysis.stats.CONFIG_KEY's order (run.json's configs_planned)."""
        return (self.mode, self.underlay_mtu, self.overlay_mtu, self.placement, self.test, self.streams, self.pair)

    @property
    def group(self) -> tuple[int, str, int]:
        """Cases of one group share one deployment."""
        return (self.underlay_mtu, self.mode, self.overlay_mtu)


def build(raw: dict[str, Any], source: str = "<flags>", base: Scenario | None = None,
          here: pathlib.Path | None = None, extra: tuple[Mode, ...] = ()) -> Scenario:
    """Validate a parsed TOML document (or flag overrides in the same shape) onto `base`;
    `here`: the directory mode_files are relative to (default: the current one); `extra`:
    modes the caller defines for this scenario (an A/B run's arms)."""
    raw = dict(raw)
    base = base or Scenario()
    new: list[dict] = []
    head = raw.get("scenario")
    files = head.get("mode_files") if isinstance(head, dict) else None
    if files is not None:       # read first: [matrix] modes may name their modes
        files = schema.check_table({"mode_files": files}, TABLES["scenario"], source, "[scenario]")["mode_files"]
        for f in files:
            new += mode_tables.mode_file((here or pathlib.Path.cwd()) / f, source)
    if "modes" in raw:
        new += mode_tables.read_modes(raw.pop("modes"), source)
    known = mode_tables.define_into(base.known, new).extended(extra)
    token = _KNOWN.set(known)
    try:
        return _build(raw, source, base, list(base.mode_defs) + new, known)
    finally:
        _KNOWN.reset(token)


def _build(raw: dict[str, Any], source: str, base: Scenario, defs: list[dict], known: Registry) -> Scenario:
    got = schema.check(raw, TABLES, source)
    ch: dict[str, Any] = {"source": source, "mode_defs": tuple(defs), "registry": known}
    for table in got.values():
        ch.update(table)
    o = ch.get("overlay_mtus")
    if isinstance(o, dict):
        unders = ch.get("underlay_mtus", base.underlay_mtus)
        per = {}
        for k, v in o.items():
            key = f"[matrix.overlay_mtu] {k}"
            if not k.isdigit() and k not in known:
                raise schema.error(source, key, f"neither one of the underlay MTUs ({', '.join(map(str, unders))}) "
                                   f"nor a mode{schema.suggest(k, list(known))}")
            if k.isdigit() and int(k) not in unders:
                raise schema.error(source, key, f"not one of the underlay MTUs ({', '.join(map(str, unders))})")
            if not isinstance(v, list):
                raise schema.error(source, key, f"expected a list, got {type(v).__name__} {v!r}")
            try:
                per[k] = schema.int_list(576, 65535, allow_auto=True)(v)
            except ValueError as e:
                raise schema.error(source, key, str(e)) from e
        missing = [u for u in unders if str(u) not in per]
        if missing and any(k.isdigit() for k in per):
            raise schema.error(source, "[matrix.overlay_mtu]",
                               f"no overlay MTUs for underlay MTU {', '.join(map(str, missing))}")
        ch["overlay_mtus"] = per
    if "hosts" in ch:
        ch["hosts"] = tuple(ch["hosts"])
    out = dataclasses.replace(base, **ch)
    if out.lab_cpus != base.lab_cpus and out.backend != "netns":
        raise schema.error(source, "[testbed] lab_cpus", f"the lab's CPU placement; the {out.backend} backend's "
                                                         f"hosts are machines with CPUs of their own")
    if out.host_cpus is not None and out.backend not in ("ssh", "vagrant"):
        raise schema.error(source, "[testbed] host_cpus", "pins real hosts (backend ssh or vagrant); " + (
            "the lab's hosts get CPUs of their own by lab_cpus (--lab-cpus)" if out.backend == "netns" else
            f"the {out.backend} backend's processes run in pods, where their nodes place them"))
    if out.lab_hosts != 2 and out.backend != "netns":
        raise schema.error(source, "[testbed] lab_hosts", f"the lab's host count; the {out.backend} backend's hosts "
                                                          f"are its machines")
    _check_under_load(out, source)
    return out


# ---- the under-load tests (tools/iperf2.py, tools/sweep.py): their streams and sweep steps

def _check_under_load(sc: Scenario, source: str) -> None:
    """A test whose streams are its working load takes no more than its `max_streams`; the
    sweep's steps must make a sweep (tools/sweep.py `rates`)."""
    for t in sc.tests:
        tool = TOOLS[t]
        over = [n for n in sc.streams if n > tool.max_streams]
        if tool.parallel and over:
            raise schema.error(source, "[matrix] streams", f"{t} runs 1 to {tool.max_streams} working-load "
                                                           f"streams each way, not {over[0]}")
    try:
        sweep_rates(sc)
    except HarnessError as e:
        raise schema.error(source, "[sweep]", str(e)) from e


def sweep_rates(sc: Scenario) -> tuple[float, ...]:
    """The offered loads (bits/s, lowest first) a sweep case runs: TestSpec.rates."""
    return sweep_mod.rates(sc.sweep_from, sc.sweep_to, sc.sweep_steps)


def load(path: str | pathlib.Path) -> Scenario:
    p = pathlib.Path(path)
    try:
        text = read_text(p)
    except HarnessError as e:
        raise ScenarioError(str(e)) from e
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise ScenarioError(f"{p}: not valid TOML ({e})") from e
    if not raw:
        raise ScenarioError(f"{p}: empty: a scenario needs at least a [matrix] table "
                            f"(see scenarios/quick.toml)")
    sc = build(raw, source=str(p), here=p.parent)
    if sc.inventory and not pathlib.Path(sc.inventory).is_absolute():
        # An inventory named in a scenario file is relative to that file.
        sc = dataclasses.replace(sc, inventory=str((p.parent / sc.inventory).resolve()))
    return sc


def resolve_underlay(sc: Scenario, auto_mtu: int) -> Scenario:
    """The scenario with underlay MTU "auto" replaced by the testbed's own (a NIC's MTU)."""
    if "auto" not in sc.underlay_mtus:
        return sc
    mtus = tuple(dict.fromkeys(auto_mtu if u == "auto" else u for u in sc.underlay_mtus))
    o = sc.overlay_mtus
    if isinstance(o, dict) and "auto" in o:
        o = {(str(auto_mtu) if k == "auto" else k): v for k, v in o.items()}
    return dataclasses.replace(sc, underlay_mtus=mtus, overlay_mtus=o)


def keep_underlay(sc: Scenario, mtu: int, backend: str) -> Scenario:
    """The scenario at the one underlay MTU a testbed that sets none measures at (a
    cluster's nodes'): the others are left out, each said once; none of them being that
    MTU is an error."""
    if mtu not in sc.underlay_mtus:
        asked = ", ".join(str(u) for u in sc.underlay_mtus)
        raise HarnessError(f"underlay MTU {asked}: the {backend} backend measures at the nodes' MTU, {mtu}, and "
                           f"changes none (--underlay-mtu {mtu} or auto)")
    for u in sc.underlay_mtus:
        if u != mtu:
            log.warning("underlay MTU %s left out: the %s backend measures at the nodes' MTU, %s", u, backend, mtu)
    o = sc.overlay_mtus
    if isinstance(o, dict):
        o = {k: v for k, v in o.items() if k == str(mtu)}
    return dataclasses.replace(sc, underlay_mtus=(mtu,), overlay_mtus=o)


def from_command_line(path: str | None, overrides: dict | None = None, extra: tuple[Mode, ...] = ()) -> Scenario:
    """The scenario file (or the built-in default) with the command line's flags over it;
    `extra`: modes the caller defines for it (an A/B run's arms), which the flags may name."""
    sc = load(path) if path else Scenario()
    if overrides or extra:
        return build(overrides or {}, source="command line" if overrides else sc.source, base=sc, extra=extra)
    return sc


def _parallel(test: str) -> bool:
    """Only iperf3's bulk tests and the tests whose streams are a working load (Tool.parallel)
    run the matrix's stream counts; the others (the packet-rate tests included: one sender,
    one size) run one."""
    tool = TOOLS[test]
    return tool.parallel or (tool.binary == "iperf3" and tool.payload is None)


def _fitting_tests(sc: Scenario, mode: str, overlay_mtu: int) -> tuple[str, ...]:
    """The scenario's tests that fit the mode's overlay MTU: a test with a fixed UDP payload
    must cross unfragmented. One that does not is an error, or (unfit = "skip") left out."""
    out = []
    for t in sc.tests:
        size = TOOLS[t].payload
        if size is not None and size + IPV4_UDP_HEADERS > overlay_mtu:
            why = (f"{t} sends {size}-byte payloads, which need an MTU of at least "
                   f"{size + IPV4_UDP_HEADERS}; mode {mode} has {overlay_mtu}")
            if sc.unfit != "skip":
                raise ScenarioError(f"{sc.source}: [matrix] tests: {why}")
            log.warning("skipped: %s", why)
            continue
        out.append(t)
    return tuple(out)


def overlay_mtus_of(sc: Scenario, underlay: int, mode: str) -> tuple[int | str, ...]:
    """The overlay MTUs `sc` asks of `mode` at `underlay`: the mode's own entry in
    [matrix.overlay_mtu] (a mode that sets its MTU itself, as Flannel does, takes "auto"
    there), else the underlay MTU's, else the [matrix] list."""
    o = sc.overlay_mtus
    if not isinstance(o, dict):
        return o
    if mode in o:
        return o[mode]
    if not any(k.isdigit() for k in o):
        return ("auto",)
    if str(underlay) not in o:
        raise ScenarioError(f"{sc.source}: [matrix.overlay_mtu]: no overlay MTUs for underlay MTU {underlay}")
    return o[str(underlay)]


def expand(sc: Scenario, pairs: list[tuple[str, str]] | None = None) -> list[Case]:
    """Every case of the matrix, in run order: underlay MTU, then repeat, then groups with the
    mode order rotated each repeat (so drift hits every mode alike), then within a group
    (one deployment) the pairs, then the tests. `pairs`: (client, server) host names, the
    pair dimension (None: the run of one pair). Overlay MTUs are resolved and checked
    against each mode here, before anything runs."""

    cases: list[Case] = []
    for u in sc.underlay_mtus:
        if u == "auto":
            raise ScenarioError(f"{sc.source}: [matrix] underlay_mtu: \"auto\" is resolved by the testbed "
                                f"(the underlay's own MTU) before the cases are expanded")
        groups = [(m, o) for m in sc.modes for o in overlay_mtus_of(sc, u, m)]
        resolved: list[tuple[str, int]] = []
        fitting: dict[tuple[str, int], tuple[str, ...]] = {}
        for mode_name, o in groups:
            mode = sc.mode(mode_name)
            if mode.kind == "native":
                pair = (mode_name, u)   # native has no overlay MTU: it is the underlay's
            else:
                try:
                    pair = (mode_name, mode.overlay_mtu(u, o))
                except HarnessError as e:
                    if sc.unfit == "skip":
                        log.warning("skipped: %s", e)
                        continue
                    raise ScenarioError(f"{sc.source}: [matrix] overlay_mtu: {e}") from e
            if pair not in resolved:
                fitting[pair] = _fitting_tests(sc, mode_name, pair[1])
                resolved.append(pair)
        # The arms of one mode (MODE@LABEL, A/B runs) at one overlay MTU move as a unit and
        # swap their order every repeat, so two arms' pairs alternate who goes first
        # strictly, whatever else the run holds (analysis/sequential.py's blocks need it).
        units: dict[tuple[str, int], list[tuple[str, int]]] = {}
        for mode_name, o in resolved:
            units.setdefault((mode_name.partition(ARM_SEP)[0], o), []).append((mode_name, o))
        order = list(units.values())
        for r in range(sc.repeats):
            k = r % len(order)
            turn = [g for unit in order[k:] + order[:k] for g in (unit[::-1] if r % 2 else unit)]
            for mode_name, o in turn:
                mode = sc.mode(mode_name)
                placements = [p for p in sc.placements if p in mode.placements] or list(mode.placements)
                for src, dst in pairs or [("", "")]:
                    for pl in placements:
                        for t in fitting[(mode_name, o)]:
                            for st in (sc.streams if _parallel(t) else (1,)):
                                cases.append(Case(mode_name, u, o, pl, t, st, r, src, dst))
    return cases
