"""Inventories and the [testbed] table: checked before anything connects, one line each."""

import os
import pathlib

import pytest

from harness.core.errors import ScenarioError
from harness.run import scenario as S
from harness.testbeds import inventory

ROOT = pathlib.Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "scenarios" / "inventory.example.toml"


def test_the_shipped_example_loads_with_defaults_applied():
    hosts = inventory.load(EXAMPLE)
    assert [h.name for h in hosts] == ["alpha", "beta", "gamma"]
    alpha, beta, gamma = hosts
    assert alpha.user == "root" and alpha.port == 22 and not alpha.sudo
    assert beta.user == "bench" and beta.sudo and beta.underlay_interface == "eth1"
    assert gamma.underlay_interface == "auto" and gamma.underlay_address == "auto" and not gamma.manage_underlay
    assert (alpha.cpus, beta.cpus, gamma.cpus) == (None, "2-3", None)      # unpinned unless given


def test_pair_picks_by_name_and_defaults_to_the_first_two():
    hosts = inventory.load(EXAMPLE)
    assert [h.name for h in inventory.pick(hosts, None, "x")] == ["alpha", "beta"]
    assert [h.name for h in inventory.pick(hosts, ["gamma", "alpha"], "x")] == ["gamma", "alpha"]
    with pytest.raises(ScenarioError, match=r"x: --pair: no host 'gama' \(did you mean 'gamma'\?\)"):
        inventory.pick(hosts, ["alpha", "gama"], "x")
    assert [h.name for h in inventory.pick(hosts, ["all"], "x")] == ["alpha", "beta", "gamma"]
    assert [h.name for h in inventory.pick(hosts, ["gamma", "beta", "alpha"], "x")] == ["gamma", "beta", "alpha"]
    for bad in (["alpha"], ["alpha", "alpha"], ["alpha", "beta", "alpha"]):
        with pytest.raises(ScenarioError, match=r"x: --pair: expected two or more different host names"):
            inventory.pick(hosts, bad, "x")


def _key(tmp_path, mode=0o600):
    k = tmp_path / "id"
    k.write_text("not really a key\n")
    os.chmod(k, mode)
    return str(k)


@pytest.mark.parametrize("doc, needle", [
    ({"hosts": [{"name": "a"}, {"name": "b", "address": "198.18.1.2"}]},
     "inv.toml: [[hosts]] #1: missing address (every host needs name and address)"),
    ({"hosts": [{"name": "a", "address": "198.18.1.1", "adress": "x"}]},
     "inv.toml: [[hosts]] #1 adress: unknown key (did you mean 'address'?)"),
    ({"hosts": [{"name": "a", "address": "198.18.1.1"}, {"name": "a", "address": "198.18.1.2"}]},
     "inv.toml: [[hosts]] #2 name: 'a' is already host #1"),
    ({"hosts": [{"name": "a", "address": "198.18.1.1"}, {"name": "b", "address": "198.18.1.1"}]},
     "inv.toml: [[hosts]] #2 address: 198.18.1.1:22 is already host 'a'"),
    ({"hosts": [{"name": "a", "address": "198.18.1.1", "port": 0}]}, "[[hosts]] #1 port: 0 is outside 1..65535"),
    ({"hosts": [{"name": "a", "address": "198.18.1.1", "sudo": "yes"}]}, "[[hosts]] #1 sudo: expected bool, got str"),
    ({"hosts": [{"name": "a", "address": "198.18.1.1", "underlay_address": "eth0"}]},
     "[[hosts]] #1 underlay_address: 'eth0': expected \"auto\" or an IPv4 address"),
    ({"hosts": [{"name": "a", "address": "198.18.1.1", "key_file": "/nonexistent/id"}]},
     "[[hosts]] #1 key_file: /nonexistent/id: no such file"),
    ({"hosts": [{"name": "a", "address": "198.18.1.1", "underlay_address": "198.18.0.1"},
                {"name": "b", "address": "198.18.1.2", "underlay_address": "198.18.0.1"}]},
     "[[hosts]] underlay_address: 198.18.0.1 given to more than one host"),
    ({"host": [{"name": "a", "address": "198.18.1.1"}]}, "inv.toml: [host]: unknown table (did you mean 'hosts'?)"),
    ({"hosts": [{"name": "a", "address": "198.18.1.1", "cpus": "2-x"}]},
     "inv.toml: [[hosts]] #1 cpus: '2-x': '2-x' is not a CPU number or range"),
    ({"hosts": [{"name": "a", "address": "198.18.1.1", "cpus": 2}]}, "[[hosts]] #1 cpus: expected str, got int"),
    ({"defaults": {"cpus": "3-1"}, "hosts": [{"name": "a", "address": "198.18.1.1"}]},
     "inv.toml: [defaults] cpus: '3-1': '3-1' is not a range of CPUs"),
    ({"defaults": {"user": "root"}}, "inv.toml: [[hosts]]: no hosts"),
    ({"defaults": {"name": "x"}}, "inv.toml: [defaults] name: unknown key"),
    ({"hosts": {"name": "a"}}, "inv.toml: [[hosts]]: must be an array of tables"),
])
def test_bad_inventories_name_file_and_key(doc, needle):
    with pytest.raises(ScenarioError) as e:
        inventory.from_doc(doc, "inv.toml")
    assert needle in str(e.value)


def test_a_key_file_others_can_read_is_refused(tmp_path):
    loose = _key(tmp_path, 0o644)
    with pytest.raises(ScenarioError, match=r"key_file: .*permissions 644 are too open.*chmod 600"):
        inventory.from_doc({"hosts": [{"name": "a", "address": "198.18.1.1", "key_file": loose}]}, "inv.toml")
    tight = _key(tmp_path, 0o600)
    h, = inventory.from_doc({"hosts": [{"name": "a", "address": "198.18.1.1", "key_file": tight}]}, "inv.toml")
    assert h.key_file == tight


def test_one_host_is_not_a_pair(tmp_path):
    hosts = inventory.from_doc({"hosts": [{"name": "a", "address": "198.18.1.1"}]}, "inv.toml")
    with pytest.raises(ScenarioError, match="1 host\\(s\\); a pair needs two"):
        inventory.pick(hosts, None, "inv.toml")


def test_scenario_testbed_table_and_inventory_relative_to_the_file(tmp_path):
    (tmp_path / "hosts.toml").write_text("")
    f = tmp_path / "s.toml"
    f.write_text('[matrix]\nmodes = ["native"]\n[testbed]\nbackend = "ssh"\ninventory = "hosts.toml"\n'
                 'pair = ["a", "b"]\n')
    sc = S.load(f)
    assert sc.backend == "ssh" and sc.inventory == str(tmp_path / "hosts.toml") and sc.pair == ("a", "b")
    with pytest.raises(ScenarioError, match=r"\[testbed\] backend: 'sssh': expected .* \(did you mean 'ssh'\?\)"):
        S.build({"testbed": {"backend": "sssh"}}, source="x.toml")
    with pytest.raises(ScenarioError, match=r"\[testbed\] pair: \['a', 'a'\]: expected two or more different host names"):
        S.build({"testbed": {"pair": ["a", "a"]}}, source="x.toml")


def test_an_empty_scenario_file_is_an_error_not_the_default_matrix(tmp_path):
    for text in ("", "# only a comment\n"):
        f = tmp_path / "empty.toml"
        f.write_text(text)
        with pytest.raises(ScenarioError, match=r"empty.toml: empty: a scenario needs at least a \[matrix\] table"):
            S.load(f)


def test_underlay_mtu_auto_is_resolved_by_the_testbed():
    sc = S.build({"matrix": {"modes": ["fastdp"], "underlay_mtu": ["auto", 9000], "repeats": 1}})
    with pytest.raises(ScenarioError, match="resolved by the testbed"):
        S.expand(sc)
    got = {(c.underlay_mtu, c.overlay_mtu) for c in S.expand(S.resolve_underlay(sc, 1500))}
    assert got == {(1500, 1450), (9000, 8950)}
    assert S.resolve_underlay(sc, 9000).underlay_mtus == (9000,)


def test_scenario_round_trips_through_run_json():
    sc = S.build({"matrix": {"modes": ["fastdp"], "overlay_mtu": {"1500": [1410]}},
                  "testbed": {"backend": "ssh", "hosts": [{"name": "a", "address": "198.18.1.1"}],
                              "pair": ["a", "b"]}})
    import json
    assert S.Scenario.from_dict(json.loads(json.dumps(sc.to_dict()))) == sc
