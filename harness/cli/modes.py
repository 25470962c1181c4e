"""`overlaybench modes`: the modes this installation knows, in table order."""

from __future__ import annotations

import json


def add(sub) -> None:
    m = sub.add_parser(
        "modes", help="list the overlay modes (name, encapsulation, kernel features)",
        description="List the modes --modes and a scenario's [matrix] modes can name, in table order: each "
                    "with its encapsulation overhead in bytes, what it is, and the kernel features it needs.")
    m.add_argument("--format", choices=["text", "json"], default="text",
                   help="text: a line per mode; json: every mode with its placements (default: %(default)s)")
    m.set_defaults(func=cmd_modes)


def cmd_modes(a) -> int:
    from harness import modes  # every mode module: not for `--help`
    rows = [{"name": m.name, "overhead": m.overhead, "features": list(m.features), "placements": list(m.placements),
             "description": m.description} for m in modes.standard().values()]
    if a.format == "json":
        print(json.dumps(rows, indent=2))
        return 0
    width = max(len(r["name"]) for r in rows)
    for r in rows:
        needs = f" [{', '.join(r['features'])}]" if r["features"] else ""
        print(f"{r['name']:<{width}}  {r['overhead']:>3} B  {r['description']}{needs}")
    return 0
