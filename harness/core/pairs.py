"""Which host pairs a run measures, and in what order: the pair dimension of the matrix.

A pair is (client host, server host), by the hosts' names. The selections:

    all         every unordered pair once, the earlier host (in the testbed's order) the client
    ring        each host with the next, the last with the first
    star:HOST   HOST with every other host, HOST the client
    A-B,C-D     the pairs named (a name holding "-" is matched against the hosts' names)

A run whose one pair is the testbed's first two hosts, the first the client (what every
selection gives on two hosts but a named `h1-h0` or `star:h1`), has no pair dimension
(cases and measurements as they always were). `rounds` is the round-robin
tournament schedule ("circle method"): disjoint pairs that can be measured at the same
time, every pair of `all` once over N − 1 rounds (N rounded up to even).
"""

from __future__ import annotations

from harness.core.errors import HarnessError

SELECTIONS = ("all", "ring", "star:HOST", "A-B,C-D")
# How a set of pairs shares the wire (harness/run/together.py): one pair at a time,
# disjoint pairs at once (rounds), every pair at once (mesh).
SCHEDULES = ("sequential", "rounds", "mesh")
ARROW = "→"


def label(src: str, dst: str) -> str:
    """A pair as measurements and tables name it: "h0→h2"."""
    return f"{src}{ARROW}{dst}"


def split(pair) -> tuple[str, str] | None:
    """(client, server) of a pair's label, or None for anything else (no pair: None, NaN)."""
    if not isinstance(pair, str) or ARROW not in pair:
        return None
    src, dst = pair.split(ARROW, 1)
    return src, dst


def _named(item: str, names: list[str], where: str) -> tuple[str, str]:
    splits = [(item[:i], item[i + 1:]) for i, ch in enumerate(item) if ch == "-"]
    known = [(a, b) for a, b in splits if a in names and b in names]
    if len(known) > 1:
        raise HarnessError(f"{where}: {item!r} is ambiguous: it splits into the hosts "
                           + " or ".join(f"{a} and {b}" for a, b in known))
    if not known:
        if not splits:
            raise HarnessError(f"{where}: {item!r} is not a pair: expected CLIENT-SERVER (hosts: {', '.join(names)})")
        a, b = splits[0]
        bad = a if a not in names else b
        raise HarnessError(f"{where}: {item!r} names the unknown host {bad!r} (hosts: {', '.join(names)})")
    a, b = known[0]
    if a == b:
        raise HarnessError(f"{where}: {item!r} names host {a} twice")
    return a, b


def select(spec: str | list[str] | tuple[str, ...] | None, names: list[str], where: str = "--pairs") -> list[tuple[str, str]]:
    """The pairs `spec` selects among the hosts `names` (in the testbed's order), in run order.
    Bad input is one HarnessError naming `where`."""
    if len(names) < 2:
        raise HarnessError(f"{where}: {len(names)} host{'s' if len(names) != 1 else ''}: a pair needs at least 2")
    if len(set(names)) != len(names):
        raise HarnessError(f"{where}: the hosts' names are not unique: {', '.join(names)}")
    if not spec:
        spec = "all"
    items = [spec] if isinstance(spec, str) else list(spec)
    if len(items) == 1 and isinstance(items[0], str):
        one = items[0].strip()
        if one == "all":
            return [(a, b) for i, a in enumerate(names) for b in names[i + 1:]]
        if one == "ring":
            ring = [(names[i], names[(i + 1) % len(names)]) for i in range(len(names))]
            return ring[:1] if len(names) == 2 else ring
        if one.startswith("star:"):
            hub = one[len("star:"):]
            if hub not in names:
                raise HarnessError(f"{where}: star:{hub}: unknown host {hub!r} (hosts: {', '.join(names)})")
            return [(hub, b) for b in names if b != hub]
        items = one.split(",")
    out: list[tuple[str, str]] = []
    for item in items:
        if not isinstance(item, str) or not item.strip():
            raise HarnessError(f"{where}: {item!r}: expected {', '.join(SELECTIONS)}")
        pair = _named(item.strip(), names, where)
        if pair in out:
            raise HarnessError(f"{where}: the pair {pair[0]}-{pair[1]} is named twice")
        out.append(pair)
    return out


def rounds(pairs: list[tuple[str, str]], names: list[str]) -> list[list[tuple[str, str]]]:
    """`pairs` grouped into rounds of pairs that share no host, in the order of the round-robin
    tournament over `names`; each pair keeps its own direction. Pairs the tournament leaves
    (a pair named both ways) follow in rounds of their own."""
    left = list(pairs)
    ring = list(names) + ([None] if len(names) % 2 else [])
    n = len(ring)
    out: list[list[tuple[str, str]]] = []
    for _ in range(n - 1):
        here = []
        for i in range(n // 2):
            match = {ring[i], ring[n - 1 - i]}
            pick = next((p for p in left if set(p) == match), None)
            if pick is not None:
                left.remove(pick)
                here.append(pick)
        if here:
            out.append(here)
        ring = [ring[0], ring[-1], *ring[1:-1]]
    while left:
        busy: set[str] = set()
        here = [p for p in left if not (set(p) & busy) and not busy.update(p)]
        for p in here:
            left.remove(p)
        out.append(here)
    return out
