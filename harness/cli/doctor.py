"""`overlaybench doctor`: what this machine (or an inventory's hosts) can run, and how to
install what is missing."""

from __future__ import annotations

import dataclasses
import json

from harness.cli.args import add_host_keys, options


def add(sub) -> None:
    d = sub.add_parser(
        "doctor", help="check kernel features, tools and the sleeve build (here, or on "
                       "remote hosts with --inventory)",
        description="Check what this machine can run: kernel features (probed for real, as root), the "
                    "measurement tools, the Python packages, the sleeve build, the optional overlays and "
                    "dockerd; each missing part with the command that installs it. Exit 0 when every "
                    "required part is present, 1 otherwise.")
    d.add_argument("--inventory", metavar="FILE",
                   help="also check every host of this inventory over SSH (default: this machine only)")
    add_host_keys(d, "trust hosts whose SSH key is not yet in known_hosts (a changed key is always refused)")
    d.add_argument("--format", choices=["text", "json"], default="text",
                   help="text: a line per check; json: every check as an object (default: %(default)s)")
    d.set_defaults(func=cmd_doctor)


def cmd_doctor(a) -> int:
    from harness.cli import checks as probe  # the whole harness: not for `--help`
    found = probe.all_checks()
    if a.inventory:
        from harness.testbeds.inventory import load  # the testbeds: not for `--help`
        from harness.testbeds.ssh import inventory_ssh_hosts  # paramiko: only with --inventory
        cpus = {s.name: s.cpus for s in load(a.inventory) if s.cpus}
        found += probe.remote_checks(inventory_ssh_hosts(a.inventory, options(a)), cpus, a.inventory)
    ok = all(c.ok for c in found if c.required)
    if a.format == "json":
        print(json.dumps({"ok": ok, "checks": [dataclasses.asdict(c) for c in found]}, indent=2))
        return 0 if ok else 1
    print(probe.render(found))
    if not a.inventory:
        print("backends: netns (this machine, checked above); ssh: real hosts, checked with "
              "`overlaybench doctor --inventory FILE`")
    return 0 if ok else 1
