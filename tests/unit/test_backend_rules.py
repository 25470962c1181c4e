"""What a backend declares in harness/testbeds/registry.py and the command line follows
without naming any backend: which one an inventory or a kubeconfig implies, the flags only
one takes, what --hosts means to it, and the modes it measures instead of a scenario's."""

import argparse

import pytest

from harness.cli.args import backend_of, overrides
from harness.core.errors import HarnessError
from harness.run.scenario import Scenario
from harness.testbeds import registry


def flags(**given) -> argparse.Namespace:
    base = dict(backend=None, inventory=None, kubeconfig=None, context=None, nodes=None, image=None, modes=None,
                scenario=None, resume=None, pair=None, containers=None, hosts=None, rate=None)
    return argparse.Namespace(**{**base, **given})


def test_an_inventory_implies_ssh_and_a_kubeconfig_kubernetes():
    assert registry.implied() is None
    assert registry.implied(inventory="h.toml") == "ssh"
    assert registry.implied(kubeconfig="kc") == "kubernetes"
    assert registry.implied(inventory="h.toml", kubeconfig="kc") == "ssh"
    assert backend_of(flags(kubeconfig="kc")) == "kubernetes"
    assert backend_of(flags(backend="netns")) == "netns"


def test_a_backends_own_flag_with_another_backend_is_refused():
    with pytest.raises(HarnessError, match=r"^--context is the kubernetes backend's; this is --backend ssh$"):
        backend_of(flags(inventory="h.toml", context="c"))
    assert backend_of(flags(context="c")) is None          # no backend named: nothing to refuse


def test_hosts_is_the_labs_count_unless_the_backend_picks_its_hosts():
    assert [b for b in registry.BACKENDS if registry.picks_hosts(b)] == ["kubernetes"]
    assert overrides(flags(hosts=4))["testbed"] == {"lab_hosts": 4}
    assert "lab_hosts" not in overrides(flags(hosts=4, kubeconfig="kc"))["testbed"]


def test_only_the_kubernetes_backend_swaps_the_modes():
    assert [b for b in registry.BACKENDS if registry.has_modes_hook(b)] == ["kubernetes"]
    assert registry.modes_for("netns", Scenario(), None) is None
    assert registry.modes_for(None, Scenario(), None) is None
    assert registry.modes_for("kubernetes", Scenario(), None) == ["native", "cni"]        # native, fastdp
    assert registry.modes_for("kubernetes", Scenario(modes=("native",)), None) is None
    assert overrides(flags(kubeconfig="kc"))["matrix"] == {"modes": ["native", "cni"]}
    assert "matrix" not in overrides(flags(kubeconfig="kc", modes=None, resume="r"))
    assert "matrix" not in overrides(flags())


def test_a_scenario_file_is_told_what_was_swapped(tmp_path, caplog):
    sc = tmp_path / "s.toml"
    sc.write_text('[matrix]\nmodes = ["native", "sleeve"]\n')
    assert overrides(flags(kubeconfig="kc", scenario=str(sc)))["matrix"] == {"modes": ["native", "cni"]}
    assert any("instead of the scenario's modes sleeve" in r.getMessage() for r in caplog.records)
