"""harness.core.pairs: which host pairs a run measures, and the round-robin rounds; the pair
dimension in the scenario's cases. Pure functions on names: no chance in it."""

from __future__ import annotations

import itertools

import pytest

from harness.core import pairs as P
from harness.core.errors import HarnessError
from harness.run import scenario as S

FOUR = ["h0", "h1", "h2", "h3"]


def test_the_selections():
    assert P.select("all", FOUR) == [("h0", "h1"), ("h0", "h2"), ("h0", "h3"), ("h1", "h2"), ("h1", "h3"),
                                     ("h2", "h3")]
    assert P.select(None, FOUR) == P.select((), FOUR) == P.select(["all"], FOUR) == P.select("all", FOUR)
    assert P.select("ring", FOUR) == [("h0", "h1"), ("h1", "h2"), ("h2", "h3"), ("h3", "h0")]
    assert P.select("ring", FOUR[:2]) == [("h0", "h1")]        # two hosts: one pair, not both ways
    assert P.select("star:h2", FOUR) == [("h2", "h0"), ("h2", "h1"), ("h2", "h3")]
    assert P.select("h3-h0,h1-h2", FOUR) == P.select(["h3-h0", "h1-h2"], FOUR) == [("h3", "h0"), ("h1", "h2")]


def test_names_with_dashes_split_where_the_hosts_are():
    assert P.select("node-a-node-b", ["node-a", "node-b"]) == [("node-a", "node-b")]
    with pytest.raises(HarnessError, match=r"ambiguous: it splits into the hosts a and b-c or a-b and c"):
        P.select("a-b-c", ["a", "b-c", "a-b", "c"])


@pytest.mark.parametrize("spec, names, needle", [
    ("h0-h9", FOUR, "'h0-h9' names the unknown host 'h9' (hosts: h0, h1, h2, h3)"),
    ("h1-h1", FOUR, "'h1-h1' names host h1 twice"),
    ("h0", FOUR, "'h0' is not a pair: expected CLIENT-SERVER"),
    ("star:h9", FOUR, "star:h9: unknown host 'h9'"),
    ("h0-h1,h0-h1", FOUR, "the pair h0-h1 is named twice"),
    ("all", ["h0"], "1 host: a pair needs at least 2"),
    ("all", ["a", "a"], "the hosts' names are not unique"),
])
def test_bad_selections_are_one_line_naming_where(spec, names, needle):
    with pytest.raises(HarnessError) as e:
        P.select(spec, names, where="x.toml: [matrix] pairs")
    assert str(e.value).startswith("x.toml: [matrix] pairs: ") and needle in str(e.value)
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("n", [2, 3, 4, 5, 8])
def test_rounds_cover_every_pair_once_in_n_minus_one_rounds_of_disjoint_pairs(n):
    names = [f"h{i}" for i in range(n)]
    every = P.select("all", names)
    rounds = P.rounds(every, names)
    assert len(rounds) == (n - 1 if n % 2 == 0 else n)      # the circle method over N rounded up to even
    assert sorted(itertools.chain(*rounds)) == sorted(every)
    for r in rounds:
        hosts = [h for p in r for h in p]
        assert len(hosts) == len(set(hosts))                 # no host twice in a round
        assert len(r) == n // 2 or n % 2                     # full rounds where N is even


def test_rounds_keep_each_pairs_direction_and_place_a_pair_named_both_ways():
    rounds = P.rounds([("h1", "h0"), ("h0", "h1"), ("h3", "h2")], FOUR)
    assert sorted(itertools.chain(*rounds)) == sorted([("h1", "h0"), ("h0", "h1"), ("h3", "h2")])
    assert all(len({h for p in r for h in p}) == 2 * len(r) for r in rounds)


def test_a_scenario_names_its_pairs_and_the_lab_its_hosts():
    sc = S.build({"matrix": {"modes": ["native", "fastdp"], "pairs": "ring", "placements": ["host-host"],
                             "tests": ["iperf3.tcp"], "repeats": 2},
                  "testbed": {"lab_hosts": 3}})
    assert sc.pairs == ("ring",) and sc.lab_hosts == 3
    assert S.build({"matrix": {"pairs": ["h0-h1", " h2-h0"]}}).pairs == ("h0-h1", "h2-h0")
    for bad, needle in (({"matrix": {"pairs": []}}, "[matrix] pairs"),
                        ({"matrix": {"pairs": 3}}, "[matrix] pairs"),
                        ({"testbed": {"lab_hosts": 9}}, "[testbed] lab_hosts"),
                        ({"testbed": {"lab_hosts": 1}}, "[testbed] lab_hosts"),
                        ({"testbed": {"lab_hosts": 3, "backend": "ssh", "inventory": "x"}},
                         "[testbed] lab_hosts: the lab's host count; the ssh backend's hosts are its machines")):
        with pytest.raises(HarnessError, match=needle.replace("[", r"\[").replace("]", r"\]")):
            S.build(bad)


def test_cases_carry_their_pair_inside_each_deployment_and_in_their_key():
    sc = S.build({"matrix": {"modes": ["native", "fastdp"], "placements": ["host-host"], "tests": ["iperf3.tcp"],
                             "repeats": 2}})
    plain = S.expand(sc)
    assert [c.key for c in plain[:2]] == ["native/u1500/o1500/host-host/iperf3.tcp/p1",
                                          "fastdp/u1500/o1450/host-host/iperf3.tcp/p1"]
    assert all(c.pair is None and c.config[-1] is None for c in plain)
    pairs = [("h0", "h1"), ("h0", "h2"), ("h1", "h2")]
    cases = S.expand(sc, pairs)
    assert len(cases) == 3 * len(plain)
    first = cases[:3]               # one deployment (native, repeat 0): every pair, then the next mode
    assert [(c.mode, c.src, c.dst) for c in first] == [("native", a, b) for a, b in pairs]
    assert first[1].key == "native/u1500/o1500/host-host/iperf3.tcp/p1/h0-h2" and first[1].pair == "h0→h2"
    assert first[1].config == ("native", 1500, 1500, "host-host", "iperf3.tcp", 1, "h0→h2")
    assert len({(c.key, c.repeat) for c in cases}) == len(cases)
