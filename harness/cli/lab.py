"""`overlaybench up` and `down`: a lab left standing, and what killed runs left removed."""

from __future__ import annotations

from harness.cli.args import add_backend, add_host_keys, add_kube, backend_of, options
from harness.testbeds import registry


def add(sub) -> None:
    u = sub.add_parser(
        "up", help="bring a local lab up and leave it (remove with `down`)",
        description="Build the local lab of network namespaces a run uses (two hosts, each with a "
                    "container namespace behind it, on one underlay link) and leave it standing, to look "
                    "at or measure by hand; prints its namespaces and addresses. No overlay is deployed. "
                    "`overlaybench down` removes it. As root.")
    u.add_argument("--underlay-mtu", type=int, default=1500, metavar="N",
                   help="the underlay link's MTU (default: %(default)s)")
    u.add_argument("--rate", help="tbf rate cap on the underlay, e.g. 1gbit (default: none)")
    u.set_defaults(func=cmd_up)

    dn = sub.add_parser(
        "down", help="remove labs (or, with --inventory, remote testbeds; with --kubeconfig, run "
                     "namespaces) left by killed runs or `up`",
        description="Remove what killed runs and `up` left: local labs (their namespaces and state), "
                    "or a backend's leftovers (--backend, or the one --inventory or "
                    "--kubeconfig implies). What a running overlaybench owns is kept and named, unless "
                    "--force.")
    dn.add_argument("--force", action="store_true",
                    help="also remove what a running overlaybench (or another machine's) owns "
                         "(default: keep it and say whose)")
    dn.add_argument("--inventory", metavar="FILE",
                    help="remove leftovers on this inventory's hosts over SSH (implies --backend ssh; "
                         "default: none)")
    add_kube(dn, run=False)
    add_backend(dn, help="vagrant: destroy the Vagrantfile's machines (vagrant destroy -f); kubernetes: delete "
                         "the run namespaces whose owner is gone (--kubeconfig) (default: netns, the local "
                         "labs; --inventory implies ssh, --kubeconfig kubernetes)")
    add_host_keys(dn, "trust hosts whose SSH key is not yet in known_hosts (a changed key is always refused)")
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
