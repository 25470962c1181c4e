"""`overlaybench up` and `down`: a lab left standing, and what killed runs left removed."""

from __future__ import annotations

from harness.cli.args import add_backend, add_host_keys, add_kube, backend_of, options
from harness.testbeds import registry


def add(sub) -> None:
    u = sub.add_parser("up", help="bring a local lab up and leave it (remove with `down`)")
    u.add_argument("--underlay-mtu", type=int, default=1500, metavar="N")
    u.add_argument("--rate", help="tbf rate cap on the underlay, e.g. 1gbit")
    u.set_defaults(func=cmd_up)

    dn = sub.add_parser("down", help="remove labs (or, with --inventory, remote testbeds; with --kubeconfig, run "
                                     "namespaces) left by killed runs or `up`")
    dn.add_argument("--force", action="store_true",
                    help="also remove what a running overlaybench (or another machine's) owns")
    dn.add_argument("--inventory", metavar="FILE", help="remove leftovers on this inventory's hosts over SSH")
    add_kube(dn, run=False)
    add_backend(dn, help="vagrant: destroy the Vagrantfile's machines (vagrant destroy -f); kubernetes: delete "
                         "the run namespaces whose owner is gone (--kubeconfig)")
    add_host_keys(dn)
    dn.set_defaults(func=cmd_down)


def cmd_up(a) -> int:
    from harness.testbeds.lab import Lab  # the lab and what it needs: not for `--help`
    lab = Lab.create(a.underlay_mtu, a.rate, persistent=True)
    f = lab.facts()
    print(f"lab {lab.prefix} up: namespaces {', '.join(s.host.netns + ', ' + s.container.netns for s in lab.sides)}")
    for h, addrs in f["addresses"].items():
        print(f"  {h}: " + ", ".join(f"{k} {v}" for k, v in addrs.items()))
    print("remove it with: overlaybench down")
    return 0


def cmd_down(a) -> int:
    removed, kept = registry.down(backend_of(a), options(a), inventory=a.inventory, force=a.force)
    for r in removed:
        print(f"removed {r}")
    for k in kept:
        print(f"left {k}; --force removes it too")
    if not removed and not kept:
        print("nothing to remove")
    return 0
