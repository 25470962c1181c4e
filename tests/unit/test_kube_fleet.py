"""The kubernetes backend on a fleet, its pure parts: which nodes are candidates
(--node-selector), one node per zone (--across-zones), one node for both ends
(--same-node), the tools' ports from --port-base and on the Services (blast's every
flow's among them), and the flags that contradict.
Each test names what a defect would break."""

import itertools
import re

import pytest

from harness.bed import Options
from harness.core.errors import HarnessError
from harness.run.scenario import Scenario
from harness.testbeds.kubernetes import nodes, plan, specs
from scripted_kube import node

ZONED = [node("a", zone="z1"), node("b", zone="z1"), node("c", zone="z2"), node("d", zone="z3"),
         node("e")]                                         # e: no zone label


# ------------------------------------------------------------------ --node-selector
def test_selector_parses_keys_with_prefixes_and_refuses_what_is_no_label():
    assert nodes.selector(["node.kubernetes.io/instance-type=m6i.large", "pool=perf"]) == (
        ("node.kubernetes.io/instance-type", "m6i.large"), ("pool", "perf"))
    assert nodes.selector(["pool=perf", "pool=perf"]) == (("pool", "perf"),)      # said twice: once
    assert nodes.selector(["gpu="]) == (("gpu", ""),)                            # a label's value may be empty
    for bad in ("pool", "=perf", "po ol=perf", "pool=per f", "-pool=x", "a/b/c=x"):
        with pytest.raises(HarnessError, match=rf"^--node-selector {bad}: not KEY=VALUE of a node label"):
            nodes.selector([bad])
    with pytest.raises(HarnessError, match=r"^--node-selector pool=perf and pool=web: no node has both$"):
        nodes.selector(["pool=perf", "pool=web"])


def test_the_selector_filters_the_candidates_and_every_label_must_match():
    have = [node("a", labels={"pool": "web"}), node("b", labels={"pool": "perf", "nic": "100g"}),
            node("c", labels={"pool": "perf"}), node("d", labels={"pool": "perf", "nic": "100g"})]
    # without the selector the first two by name are a and b; with it, a (pool=web) is out
    assert [n.name for n in nodes.pick(have, sel=(("pool", "perf"),))] == ["b", "c"]
    both = (("pool", "perf"), ("nic", "100g"))
    assert [n.name for n in nodes.pick(have, sel=both)] == ["b", "d"]           # c lacks nic=100g
    assert [n.name for n in nodes.pick(have, ("all",), sel=(("pool", "perf"),))] == ["b", "c", "d"]
    with pytest.raises(HarnessError) as e:
        nodes.pick(have, count=3, sel=both)
    assert str(e.value) == ("the cluster has 2 Ready, schedulable nodes matching --node-selector pool=perf,"
                            "nic=100g (b, d); the run needs 3")


# ------------------------------------------------------------------ --across-zones
def _zones(picked):
    return [nodes.zone(n) for n in picked]


def test_across_zones_takes_one_node_per_zone_so_every_pair_crosses():
    two = nodes.pick(ZONED, across_zones=True)
    assert [n.name for n in two] == ["a", "c"] and _zones(two) == ["z1", "z2"]     # by name alone: a, b (z1, z1)
    three = nodes.pick(ZONED, count=3, across_zones=True)
    assert _zones(three) == ["z1", "z2", "z3"]
    assert all(nodes.zone(x) != nodes.zone(y) for x, y in itertools.combinations(three, 2))
    assert _zones(nodes.pick(ZONED, ("all",), across_zones=True)) == ["z1", "z2", "z3"]   # all: every zone once


def test_across_zones_refuses_one_zone_naming_the_zones_seen():
    with pytest.raises(HarnessError) as e:
        nodes.pick([node("a", zone="z1"), node("b", zone="z1"), node("e")], across_zones=True)
    assert str(e.value) == ("--across-zones: the Ready, schedulable nodes span 1 zone (z1) and 1 node without a "
                            "topology.kubernetes.io/zone label; a pair across zones needs two")
    with pytest.raises(HarnessError, match=r"span 0 zones \(none\) and 2 nodes without"):
        nodes.pick([node("a"), node("b")], across_zones=True)
    # an unready node's zone does not count
    with pytest.raises(HarnessError, match=r"matching --node-selector pool=x span 1 zone \(z1\);"):
        nodes.pick([node("a", zone="z1", labels={"pool": "x"}), node("b", zone="z2", ready=False, labels={"pool": "x"}),
                    node("c", zone="z2")], sel=(("pool", "x"),), across_zones=True)
    with pytest.raises(HarnessError) as e:
        nodes.pick(ZONED, count=4, across_zones=True)
    assert str(e.value) == ("--across-zones --hosts 4: one node per zone, and the Ready, schedulable nodes span "
                            "3 zones (z1, z2, z3) and 1 node without a topology.kubernetes.io/zone label; "
                            "--hosts 3 at most")


def test_across_zones_checks_nodes_named():
    assert _zones(nodes.pick(ZONED, ("c", "a"), across_zones=True)) == ["z2", "z1"]
    with pytest.raises(HarnessError, match=r"^--across-zones: nodes a and b are both in zone z1; name nodes"):
        nodes.pick(ZONED, ("a", "c", "b"), across_zones=True)
    with pytest.raises(HarnessError, match=r"^--across-zones: node e has no topology.kubernetes.io/zone label$"):
        nodes.pick(ZONED, ("a", "e"), across_zones=True)


# ------------------------------------------------------------------ --same-node
def test_same_node_takes_one_node_the_first_candidate_or_the_one_named():
    assert [n.name for n in nodes.pick([node("b"), node("a", ready=False), node("c")], same_node=True)] == ["b"]
    assert [n.name for n in nodes.pick([node("a"), node("b")], ("b",), same_node=True)] == ["b"]
    with pytest.raises(HarnessError, match=r"^--nodes a,b: --same-node puts both pods on one node: name one$"):
        nodes.pick([node("a"), node("b")], ("a", "b"), same_node=True)
    with pytest.raises(HarnessError, match=r"^--same-node: no Ready, schedulable node matching --node-selector p=q"):
        nodes.pick([node("a")], sel=(("p", "q"),), same_node=True)
    with pytest.raises(HarnessError, match=r"^--nodes a: name two or more"):      # one name needs --same-node
        nodes.pick([node("a"), node("b")], ("a",))


# ------------------------------------------------------------------ the node plan
@pytest.mark.parametrize("opts, wanted, line", [
    ({"node_selector": ("pool=perf",)}, ("a", "b"),
     "--node-selector with the nodes named (a,b): name the nodes or select them, not both (--nodes all "
     "--node-selector KEY=VALUE takes every node that matches)"),
    ({"same_node": True, "across_zones": True}, (), "--same-node and --across-zones: both ends on one node cannot "
                                                    "be in two zones"),
    ({"same_node": True, "node_count": 3}, (), "--hosts 3 with --same-node: both ends of the pair are on one node"),
    ({"same_node": True}, ("all",), "--nodes all with --same-node: both ends of the pair are on one node; name it, "
                                    "or let the first Ready, schedulable one be taken"),
])
def test_flags_that_contradict_are_one_line(opts, wanted, line):
    with pytest.raises(HarnessError) as e:
        plan.node_plan(Options(**opts), wanted)
    assert str(e.value) == line


def test_node_plan_of_flags_that_agree():
    p = plan.node_plan(Options(node_selector=("pool=perf",), across_zones=True), ("all",))
    assert p == plan.NodePlan((("pool", "perf"),), True, False)
    assert plan.node_plan(Options(same_node=True), ("a",)) == plan.NodePlan((), False, True)


def test_same_node_refuses_every_host_end_and_keeps_pod_to_pod():
    with pytest.raises(HarnessError, match=r"^--same-node: mode native's placement host-host has a host end"):
        plan.refuse_same_node(Scenario(modes=("native", "cni")))
    with pytest.raises(HarnessError, match=r"^--same-node: mode cni's placement host-container has a host end"):
        plan.refuse_same_node(Scenario(modes=("cni",), placements=("host-container", "container-container")))
    plan.refuse_same_node(Scenario(modes=("cni",), placements=("container-container", "container-service")))
    plan.refuse_same_node(Scenario(modes=("cni",)))             # the default placements: container-container


# ------------------------------------------------------------------ --port-base
def test_port_base_lays_every_tool_out_from_the_base():
    assert specs.tool_ports(1) == specs.TOOL_PORTS                 # no base: the tools' fixed ports
    assert specs.tool_ports(1, 30000) == {"iperf3": (30000, None), "qperf": (30002, 30003),
                                          "sockperf": (30004, 30005), "iperf": (30006, None), "irtt": (30008, 30009),
                                          "blast": (30010, None)}
    assert specs.service_ports(1, 30000) == [30000, 30002, 30003, 30004, 30005, 30006, 30008, 30009,
                                             30010, 30011, 30012, 30013]          # blast: a port per flow
    assert plan.tool_ports(Options(), 4) is None
    # the pairs of a set: port + stride × place (harness/run/case.py; blast's stride its
    # FLOWS ports, the rest's 2) stay inside each tool's block
    for sets in (1, 2, 5, 33):
        used = [p + 2 * k for tool, (port, data) in specs.tool_ports(sets, 20000).items() if tool != "blast"
                for p in (port, data) if p is not None for k in range(sets)]
        blast = specs.tool_ports(sets, 20000)["blast"][0]
        used += [blast + 4 * k + f for k in range(sets) for f in range(4)]
        assert len(used) == len(set(used)) and min(used) == 20000 and max(used) == 20000 + 14 * sets - 1
        assert sorted(used) == specs.service_ports(sets, 20000)


@pytest.mark.parametrize("sets", [1, 2, 3, 10, 33])
def test_blasts_block_under_a_port_base_overlaps_no_other_tools(sets):
    """blast's receivers, FLOWS ports each, get a block of FLOWS × pairs of their own past
    irtt's: a block sized like the others' (2 × pairs) would hand a pair's flows the next
    pair's receiver, or past the range, ports no Service carries."""
    ports = specs.tool_ports(sets, 30000)
    first = ports["blast"][0]
    blast = set(range(first, first + 4 * sets))
    others = {p + 2 * k for tool, (port, data) in ports.items() if tool != "blast" for p in (port, data)
              if p is not None for k in range(sets)}
    assert not blast & others and first > max(others) and max(blast) == 30000 + 14 * sets - 1
    assert blast <= set(specs.service_ports(sets, 30000))


@pytest.mark.parametrize("sets, base, line", [
    (1, 80, "--port-base 80: below 1024 (the pods run as non-root); give one from 1024 to 65522"),
    (1, 65530, "--port-base 65530: 1 pair at once needs ports 65530..65543, past 65535; give one from 1024 to 65522"),
    (1, 65523, "--port-base 65523: 1 pair at once needs ports 65523..65536, past 65535; give one from 1024 to 65522"),
    (10, 65500, "--port-base 65500: 10 pairs at once need ports 65500..65639, past 65535; give one from 1024 to "
                "65396"),
])
def test_a_port_base_that_does_not_fit_is_one_line(sets, base, line):
    """The range check counts blast's block: a base whose last FLOWS ports (blast's one
    receiver) are past 65535 is refused too."""
    with pytest.raises(HarnessError) as e:
        plan.tool_ports(Options(port_base=base), sets)
    assert str(e.value) == line
    specs.tool_ports(sets, int(line.rsplit(" ", 1)[1]))            # the largest base it names fits
    assert max(specs.service_ports(sets, int(line.rsplit(" ", 1)[1]))) == 65535


def test_fixed_ports_still_refuse_a_set_too_large_and_name_the_way_out():
    with pytest.raises(HarnessError, match=r"meet iperf3's from 5201 \(harness/run/procs.py's fixed ports\); "
                                           r"measure fewer pairs at once, or give --port-base$"):
        plan.tool_ports(Options(), 3000)
    assert plan.tool_ports(Options(port_base=1024), 3000)["irtt"] == (1024 + 8 * 3000, 1024 + 8 * 3000 + 1)
    assert plan.tool_ports(Options(port_base=1024), 3000)["blast"] == (1024 + 10 * 3000, None)


# ------------------------------------------------------------------ blast's flows on the Services
@pytest.mark.parametrize("sets", [1, 2, 3, 7, 100])
def test_the_service_carries_every_flow_of_every_blast_receiver_at_its_case_port(sets):
    """Each pair's receiver binds FLOWS ports from the port harness/run/case.py gives it
    (port + stride × place, the fixed ports and --port-base alike), and the sender sends each
    flow to its own: a port left off the Service is a flow whose datagrams kube-proxy drops."""
    from harness.run.procs import PORTS
    from harness.tools import get
    from harness.tools.blast import FLOWS
    tool = get("udp.pps64")
    for base in (None, 30000):
        first = (specs.tool_ports(sets, base) if base else PORTS)["blast"][0]
        flows = {first + tool.port_stride * i + f for i in range(sets) for f in range(FLOWS)}
        assert len(flows) == FLOWS * sets
        svc = specs.service("s1", "c1", specs.service_ports(sets, base))
        carried = {(p["protocol"], p["port"]) for p in svc["spec"]["ports"]}
        assert {("UDP", p) for p in flows} <= carried, sorted(flows - {p for _, p in carried})


def test_the_tools_ports_are_the_runs_fixed_ports_and_strides():
    """One layout: the Services carry the ports harness/run/case.py hands the tools, so the
    two tables and the tools' strides must agree (blast's FLOWS, the rest's 2)."""
    from harness.run.procs import PORTS
    from harness.tools import TOOLS
    assert specs.TOOL_PORTS == PORTS
    for tool in TOOLS.values():
        if tool.binary in specs.TOOL_PORTS:
            assert specs.stride(tool.binary) == tool.port_stride, tool.name
    assert specs.span("blast") == specs.stride("blast") == 4 and specs.per_pair() == 14


def test_blasts_fixed_block_meets_no_other_tool_wherever_the_fixed_ports_hold():
    """blast's fixed block, 9000 .. 9000 + FLOWS × pairs − 1, stays clear of every other
    tool's for every set the fixed ports allow (up to 100 pairs: iperf 2's 101st meets
    iperf3's first); past that the set is refused in one line anyway."""
    for sets in range(1, 101):
        ports = specs.service_ports(sets)                  # raises where two tools' ports meet
        others = [p for p in ports if not 9000 <= p < 9000 + 4 * sets]
        assert len(ports) - len(others) == 4 * sets
    for sets in (101, 528, 1901):                          # blast's block reaches sockperf's at 528, iperf3's at 1901
        with pytest.raises(HarnessError) as e:
            plan.tool_ports(Options(), sets)
        assert str(e.value).startswith(f"{sets} pairs at once: ") and "\n" not in str(e.value)
        assert str(e.value).endswith("measure fewer pairs at once, or give --port-base")


@pytest.mark.parametrize("test", ["udp.ndr64", "udp.pdr64", "udp.pps64", "packet.pps64"])
def test_blast_through_a_service_passes_the_tools_check_and_an_image_without_it_does_not(test, monkeypatch):
    """The Services carry blast's flows, so container-service is no reason to refuse it; an
    image that does not build it still is, in one line."""
    from harness.run.scenario import from_command_line
    sc = from_command_line(None, {"testbed": {"backend": "kubernetes"},
                                  "matrix": {"modes": ["cni"], "placements": ["container-service"], "tests": [test]}})
    plan.refuse_tools(sc, "img")
    monkeypatch.setattr(specs, "IMAGE_BUILT", frozenset())
    with pytest.raises(HarnessError, match=rf"^test {re.escape(test)} needs blast, which the image img does not hold "):
        plan.refuse_tools(sc, "img")
