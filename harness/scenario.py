"""Scenario files (TOML) → a frozen Scenario → the list of Cases it asks for.

    [scenario]  name, description
    [matrix]    modes, underlay_mtu, overlay_mtu, placements, tests, streams, repeats, duration
    [underlay]  rate
    [backend]   kind, inventory

Every key is checked before anything runs; an error names the file and the key.
"""

from __future__ import annotations

import dataclasses
import difflib
import logging
import pathlib
import tomllib
from typing import Any

from harness.errors import HarnessError, ScenarioError

PLACEMENTS = ("host-host", "host-container", "container-container")
TESTS = ("iperf3.tcp", "iperf3.udp", "qperf.tcp_bw", "qperf.tcp_lat", "qperf.udp_bw",
         "qperf.udp_lat", "ping.flood")
BACKENDS = ("netns", "ssh", "vagrant")

log = logging.getLogger(__name__)

SCHEMA: dict[str, dict[str, type | tuple]] = {
    "scenario": {"name": str, "description": str},
    "matrix": {"modes": list, "underlay_mtu": list, "overlay_mtu": (list, dict), "placements": list,
               "tests": list, "streams": list, "repeats": int, "duration": (int, float), "unfit": str},
    "underlay": {"rate": str},
    "backend": {"kind": str, "inventory": str},
}


@dataclasses.dataclass(frozen=True)
class Scenario:
    name: str = "adhoc"
    description: str = ""
    modes: tuple[str, ...] = ("native", "fastdp")
    underlay_mtus: tuple[int, ...] = (1500,)
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
    inventory: str | None = None
    source: str = "<defaults>"

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True)
class Case:
    mode: str
    underlay_mtu: int
    overlay_mtu: int          # resolved: "auto" is already underlay − the mode's overhead
    placement: str
    test: str
    streams: int
    repeat: int

    @property
    def key(self) -> str:
        """Identifies the configuration across repeats (what `case` holds in a result line)."""
        return (f"{self.mode}/u{self.underlay_mtu}/o{self.overlay_mtu}/{self.placement}/"
                f"{self.test}/p{self.streams}")

    @property
    def group(self) -> tuple[int, str, int]:
        """Cases of one group share one deployment."""
        return (self.underlay_mtu, self.mode, self.overlay_mtu)


def _err(src: str, key: str, msg: str) -> ScenarioError:
    return ScenarioError(f"{src}: {key}: {msg}")


def _suggest(word: str, choices) -> str:
    close = difflib.get_close_matches(word, list(choices), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _choice_list(src: str, key: str, values, known, what: str) -> tuple[str, ...]:
    out = []
    for v in values:
        if not isinstance(v, str) or v not in known:
            raise _err(src, key, f"unknown {what} {v!r}{_suggest(str(v), known)}; known: {', '.join(known)}")
        if v not in out:
            out.append(v)
    if not out:
        raise _err(src, key, "must not be empty")
    return tuple(out)


def _int_list(src: str, key: str, values, lo: int, hi: int, allow_auto: bool = False) -> tuple:
    out = []
    for v in values:
        if allow_auto and v == "auto":
            out.append(v)
            continue
        if isinstance(v, bool) or not isinstance(v, int):
            raise _err(src, key, f"{v!r} is not a whole number" + (" or \"auto\"" if allow_auto else ""))
        if not lo <= v <= hi:
            raise _err(src, key, f"{v} is outside {lo}..{hi}")
        if v not in out:
            out.append(v)
    if not out:
        raise _err(src, key, "must not be empty")
    return tuple(out)


def build(raw: dict[str, Any], source: str = "<flags>", base: Scenario | None = None) -> Scenario:
    """Validate a parsed TOML document (or flag overrides in the same shape) onto `base`."""
    from harness import modes as modes_mod  # the registry knows the valid mode names

    base = base or Scenario()
    for table, body in raw.items():
        if table not in SCHEMA:
            raise _err(source, f"[{table}]", f"unknown table{_suggest(table, SCHEMA)}; known: {', '.join(SCHEMA)}")
        if not isinstance(body, dict):
            raise _err(source, table, "must be a table")
        for key, val in body.items():
            want = SCHEMA[table].get(key)
            if want is None:
                raise _err(source, f"[{table}] {key}",
                           f"unknown key{_suggest(key, SCHEMA[table])}; known: {', '.join(SCHEMA[table])}")
            if not isinstance(val, want) or isinstance(val, bool):
                names = "/".join(t.__name__ for t in (want if isinstance(want, tuple) else (want,)))
                raise _err(source, f"[{table}] {key}", f"expected {names}, got {type(val).__name__} {val!r}")
    s = raw.get("scenario", {})
    m = raw.get("matrix", {})
    u = raw.get("underlay", {})
    b = raw.get("backend", {})
    ch: dict[str, Any] = {"source": source}
    if "name" in s:
        ch["name"] = s["name"]
    if "description" in s:
        ch["description"] = s["description"]
    if "modes" in m:
        ch["modes"] = _choice_list(source, "[matrix] modes", m["modes"], tuple(modes_mod.MODES), "mode")
    if "underlay_mtu" in m:
        ch["underlay_mtus"] = _int_list(source, "[matrix] underlay_mtu", m["underlay_mtu"], 1280, 65535)
    if "overlay_mtu" in m:
        o = m["overlay_mtu"]
        if isinstance(o, dict):
            unders = ch.get("underlay_mtus", base.underlay_mtus)
            per = {}
            for k, v in o.items():
                key = f"[matrix.overlay_mtu] {k}"
                if not k.isdigit() or int(k) not in unders:
                    raise _err(source, key, f"not one of the underlay MTUs ({', '.join(map(str, unders))})")
                if not isinstance(v, list):
                    raise _err(source, key, f"expected a list, got {type(v).__name__} {v!r}")
                per[k] = _int_list(source, key, v, 576, 65535, allow_auto=True)
            missing = [u for u in unders if str(u) not in per]
            if missing:
                raise _err(source, "[matrix.overlay_mtu]", f"no overlay MTUs for underlay MTU {', '.join(map(str, missing))}")
            ch["overlay_mtus"] = per
        else:
            ch["overlay_mtus"] = _int_list(source, "[matrix] overlay_mtu", o, 576, 65535, allow_auto=True)
    if "placements" in m:
        ch["placements"] = _choice_list(source, "[matrix] placements", m["placements"], PLACEMENTS, "placement")
    if "tests" in m:
        ch["tests"] = _choice_list(source, "[matrix] tests", m["tests"], TESTS, "test")
    if "streams" in m:
        ch["streams"] = _int_list(source, "[matrix] streams", m["streams"], 1, 128)
    if "repeats" in m:
        if not 1 <= m["repeats"] <= 1000:
            raise _err(source, "[matrix] repeats", f"{m['repeats']} is outside 1..1000")
        ch["repeats"] = m["repeats"]
    if "duration" in m:
        if not 1 <= m["duration"] <= 3600:
            raise _err(source, "[matrix] duration", f"{m['duration']} s is outside 1..3600")
        ch["duration"] = float(m["duration"])
    if "unfit" in m:
        if m["unfit"] not in ("error", "skip"):
            raise _err(source, "[matrix] unfit", f"{m['unfit']!r}: expected \"error\" or \"skip\"")
        ch["unfit"] = m["unfit"]
    if "rate" in u:
        from harness.lab import parse_rate
        try:
            parse_rate(u["rate"])
        except Exception as e:
            raise _err(source, "[underlay] rate", str(e)) from e
        ch["rate"] = u["rate"]
    if "kind" in b:
        ch["backend"] = _choice_list(source, "[backend] kind", [b["kind"]], BACKENDS, "backend")[0]
    if "inventory" in b:
        ch["inventory"] = b["inventory"]
    return dataclasses.replace(base, **ch)


def load(path: str | pathlib.Path) -> Scenario:
    p = pathlib.Path(path)
    try:
        text = p.read_text()
    except OSError as e:
        raise ScenarioError(f"{p}: cannot read ({e.strerror})") from e
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise ScenarioError(f"{p}: not valid TOML ({e})") from e
    return build(raw, source=str(p))


def expand(sc: Scenario) -> list[Case]:
    """Every case of the matrix, in run order: underlay MTU, then repeat, then groups with the
    mode order rotated each repeat (so drift hits every mode alike), then the tests of a group.
    Overlay MTUs are resolved and checked against each mode here, before anything runs."""
    from harness import modes as modes_mod

    cases: list[Case] = []
    for u in sc.underlay_mtus:
        if isinstance(sc.overlay_mtus, dict):
            if str(u) not in sc.overlay_mtus:
                raise ScenarioError(f"{sc.source}: [matrix.overlay_mtu]: no overlay MTUs for underlay MTU {u}")
            overlays = sc.overlay_mtus[str(u)]
        else:
            overlays = sc.overlay_mtus
        groups = [(m, o) for m in sc.modes for o in overlays]
        resolved: list[tuple[str, int]] = []
        for mode_name, o in groups:
            mode = modes_mod.get(mode_name)
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
                resolved.append(pair)
        for r in range(sc.repeats):
            k = r % len(resolved)
            for mode_name, o in resolved[k:] + resolved[:k]:
                mode = modes_mod.get(mode_name)
                placements = [p for p in sc.placements if p in mode.placements] or list(mode.placements)
                for pl in placements:
                    for t in sc.tests:
                        # Only iperf3 runs parallel streams; other tools run one.
                        for st in (sc.streams if t.startswith("iperf3.") else (1,)):
                            cases.append(Case(mode_name, u, o, pl, t, st, r))
    return cases
