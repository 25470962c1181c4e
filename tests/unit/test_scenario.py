from types import SimpleNamespace

import pytest

from harness.core.errors import ScenarioError
from harness.modes import variants
from harness.run import scenario as S


def test_defaults_expand_native_host_only_and_fastdp_both_placements():
    cases = S.expand(S.build({"matrix": {"repeats": 1}}))
    native = [c for c in cases if c.mode == "native"]
    fastdp = [c for c in cases if c.mode == "fastdp"]
    assert {c.placement for c in native} == {"host-host"}
    assert {c.placement for c in fastdp} == {"host-host", "container-container"}
    assert {c.overlay_mtu for c in fastdp} == {1450}
    assert {c.overlay_mtu for c in native} == {1500}


@pytest.mark.parametrize("asked", ["container-service", "same-node"])
def test_a_placement_only_cni_has_leaves_the_other_modes_their_own(asked):
    """Asked alone of modes that do not measure it (no service, no second container on
    their testbeds), each measures its own placements instead, as for container-service;
    a scenario file accepts it like the others."""
    cases = S.expand(S.build({"matrix": {"repeats": 1, "modes": ["native", "fastdp"], "placements": [asked]}},
                             source="x.toml"))
    assert {(c.mode, c.placement) for c in cases} == {("native", "host-host"), ("fastdp", "host-host"),
                                                      ("fastdp", "host-container"), ("fastdp", "container-container")}
    cni = S.expand(S.build({"matrix": {"repeats": 1, "modes": ["cni"], "placements": ["host-host", asked]}}))
    assert {c.placement for c in cni} == {asked}


def test_modes_rotate_across_repeats():
    sc = S.build({"matrix": {"repeats": 3, "tests": ["iperf3.tcp"], "placements": ["host-host"]}})
    order = [[c.mode for c in S.expand(sc) if c.repeat == r] for r in range(3)]
    assert order[0] == ["native", "fastdp"]
    assert order[1] == ["fastdp", "native"]
    assert order[2] == ["native", "fastdp"]


def test_the_arms_of_a_mode_swap_who_goes_first_every_repeat():
    """Two modes' A/B arms (four groups): the arms of each mode stay together, and base
    and head take turns going first, repeat by repeat, as the sequential verdict's blocks
    of two repeats assume; the modes still rotate."""
    arms = [variants.variant(m, SimpleNamespace(label=label)) for m in ("sleeve", "sleeve-seg")
            for label in (variants.BASE, variants.HEAD)]
    sc = S.build({"matrix": {"modes": [a.name for a in arms], "repeats": 6, "tests": ["iperf3.tcp"],
                             "placements": ["container-container"]}}, extra=tuple(arms))
    cases = S.expand(sc)
    order = [[c.mode for c in cases if c.repeat == r] for r in range(6)]
    assert order[0] == ["sleeve@base", "sleeve@head", "sleeve-seg@base", "sleeve-seg@head"]
    assert order[1] == ["sleeve-seg@head", "sleeve-seg@base", "sleeve@head", "sleeve@base"]
    for m in ("sleeve", "sleeve-seg"):
        first = [next(x for x in o if x.startswith(m + "@")).partition("@")[2] for o in order]
        assert first == ["base", "head"] * 3


def test_underlay_mtu_outermost_and_auto_overlay_follows_it():
    sc = S.build({"matrix": {"underlay_mtu": [1500, 9000], "repeats": 2, "modes": ["fastdp"]}})
    cases = S.expand(sc)
    us = [c.underlay_mtu for c in cases]
    assert us == sorted(us, key=[1500, 9000].index)
    assert {(c.underlay_mtu, c.overlay_mtu) for c in cases} == {(1500, 1450), (9000, 8950)}


def test_streams_only_multiply_iperf3():
    sc = S.build({"matrix": {"streams": [1, 4], "tests": ["iperf3.tcp", "qperf.tcp_lat"], "repeats": 1,
                             "modes": ["native"]}})
    got = sorted((c.test, c.streams) for c in S.expand(sc))
    assert got == [("iperf3.tcp", 1), ("iperf3.tcp", 4), ("qperf.tcp_lat", 1)]


def test_case_key_excludes_repeat():
    sc = S.build({"matrix": {"repeats": 2, "modes": ["native"], "tests": ["iperf3.tcp"]}})
    a, b = S.expand(sc)
    assert a.key == b.key and (a.repeat, b.repeat) == (0, 1)


@pytest.mark.parametrize("raw, needle", [
    ({"matrix": {"mdoes": ["native"]}}, "x.toml: [matrix] mdoes: unknown key (did you mean 'modes'?)"),
    ({"matrx": {}}, "x.toml: [matrx]: unknown table (did you mean 'matrix'?)"),
    ({"matrix": {"modes": ["fastdb"]}}, "unknown mode 'fastdb' (did you mean 'fastdp'?)"),
    ({"matrix": {"tests": ["iperf.tcp"]}}, "unknown test 'iperf.tcp'"),
    ({"matrix": {"placements": ["host"]}}, "unknown placement 'host'"),
    ({"matrix": {"repeats": 0}}, "[matrix] repeats: 0 is outside 1..1000"),
    ({"matrix": {"repeats": "3"}}, "[matrix] repeats: expected int, got str"),
    ({"matrix": {"underlay_mtu": [100]}}, "[matrix] underlay_mtu: 100 is outside 1280..65535"),
    ({"matrix": {"overlay_mtu": ["big"]}}, "[matrix] overlay_mtu: 'big' is not a whole number or \"auto\""),
    ({"underlay": {"rate": "fast"}}, "[underlay] rate: rate 'fast'"),
    ({"matrix": {"modes": []}}, "[matrix] modes: must not be empty"),
])
def test_bad_scenarios_name_file_and_key(raw, needle):
    with pytest.raises(ScenarioError) as e:
        S.build(raw, source="x.toml")
    assert needle in str(e.value)


def test_overlay_mtu_that_cannot_fit_is_refused_before_anything_runs():
    sc = S.build({"matrix": {"modes": ["fastdp"], "overlay_mtu": [1460]}}, source="x.toml")
    with pytest.raises(ScenarioError, match=r"overlay MTU 1460 does not fit mode fastdp on underlay MTU 1500.*at most 1450"):
        S.expand(sc)


def test_load_reports_toml_syntax_with_file(tmp_path):
    p = tmp_path / "bad.toml"
    p.write_text("[matrix\nmodes = 1\n")
    with pytest.raises(ScenarioError, match=r"bad.toml: not valid TOML"):
        S.load(p)


def test_shipped_scenarios_load_and_expand():
    import pathlib
    files = sorted(f for f in pathlib.Path(__file__).parents[2].joinpath("scenarios").glob("*.toml")
                   if not f.name.startswith("inventory"))   # inventories: tests/unit/test_inventory.py
    assert files
    for f in files:
        assert S.expand(S.load(f)), f


def test_overlay_mtu_per_underlay_mtu():
    sc = S.build({"matrix": {"modes": ["fastdp"], "underlay_mtu": [1500, 9000], "repeats": 1,
                             "overlay_mtu": {"1500": [1410], "9000": [8950, "auto"]}}})
    got = sorted({(c.underlay_mtu, c.overlay_mtu) for c in S.expand(sc)})
    assert got == [(1500, 1410), (9000, 8950)]


@pytest.mark.parametrize("table, needle", [
    ({"1400": [1350]}, "[matrix.overlay_mtu] 1400: not one of the underlay MTUs (1500)"),
    ({"1500": 1410}, "[matrix.overlay_mtu] 1500: expected a list"),
])
def test_overlay_mtu_table_errors(table, needle):
    with pytest.raises(ScenarioError) as e:
        S.build({"matrix": {"overlay_mtu": table}}, source="x.toml")
    assert needle in str(e.value)


def test_overlay_mtu_table_must_cover_every_underlay():
    with pytest.raises(ScenarioError, match=r"no overlay MTUs for underlay MTU 9000"):
        S.build({"matrix": {"underlay_mtu": [1500, 9000], "overlay_mtu": {"1500": [1410]}}}, source="x.toml")


def test_unfit_skip_drops_only_what_cannot_fit(caplog):
    raw = {"matrix": {"modes": ["fastdp", "sleeve-crypto"], "underlay_mtu": [1500, 9000], "repeats": 1,
                      "overlay_mtu": {"1500": [1410], "9000": [8950]}}}
    with pytest.raises(ScenarioError, match="8950 does not fit mode sleeve-crypto"):
        S.expand(S.build(raw))
    raw["matrix"]["unfit"] = "skip"
    got = sorted({(c.mode, c.underlay_mtu, c.overlay_mtu) for c in S.expand(S.build(raw))})
    assert got == [("fastdp", 1500, 1410), ("fastdp", 9000, 8950), ("sleeve-crypto", 1500, 1410)]
    assert "skipped: overlay MTU 8950 does not fit mode sleeve-crypto" in caplog.text
    with pytest.raises(ScenarioError, match=r"\[matrix\] unfit: 'maybe'"):
        S.build({"matrix": {"unfit": "maybe"}})


def test_a_payload_that_cannot_cross_a_modes_overlay_mtu_is_refused_or_skipped():
    """1,400 bytes need 1,428: sleeve-crypto has 1,418 on a 1,500 underlay, native 1,500."""
    base = {"modes": ["native", "sleeve-crypto"], "tests": ["iperf3.pps64", "iperf3.pps1400", "iperf3.tcp"],
            "streams": [1, 2], "repeats": 1}
    with pytest.raises(ScenarioError, match="iperf3.pps1400 sends 1400-byte payloads, which need an MTU of "
                                            "at least 1428; mode sleeve-crypto has 1418"):
        S.expand(S.build({"matrix": base}))
    cases = S.expand(S.build({"matrix": {**base, "unfit": "skip"}}))
    got = {(c.mode, c.test, c.streams) for c in cases}
    assert ("sleeve-crypto", "iperf3.pps1400", 1) not in got and ("native", "iperf3.pps1400", 1) in got
    assert ("sleeve-crypto", "iperf3.pps64", 1) in got
    # one sender per packet-rate case; only the bulk iperf3 tests take the stream counts
    assert ("native", "iperf3.pps64", 2) not in got and ("sleeve-crypto", "iperf3.tcp", 2) in got


def test_keep_underlay_leaves_out_the_other_mtus_and_their_overlays():
    sc = S.build({"matrix": {"modes": ["native", "fastdp"], "underlay_mtu": [1500, 9000],
                             "overlay_mtu": {"1500": [1400], "9000": [8900]}}})
    kept = S.keep_underlay(sc, 1500, "kubernetes")
    assert kept.underlay_mtus == (1500,) and kept.overlay_mtus == {"1500": (1400,)}
    assert {(c.underlay_mtu, c.overlay_mtu) for c in S.expand(kept) if c.mode == "fastdp"} == {(1500, 1400)}
    with pytest.raises(S.HarnessError, match=r"^underlay MTU 1500, 9000: the kubernetes backend measures at the "
                                             r"nodes' MTU, 1450, and changes none \(--underlay-mtu 1450 or auto\)$"):
        S.keep_underlay(sc, 1450, "kubernetes")
