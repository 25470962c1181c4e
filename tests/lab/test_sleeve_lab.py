"""The sleeve modes and auto through the real lab: ping and TCP across each, at a
standard and a jumbo MTU; auto's fallback; keys that differ do not talk, nor do
forced AEADs that differ."""

import secrets

import pytest

from conftest import full_size_pings, needs_root
from harness import modes
from harness.modes import sleeve as sleeve_mode
from harness.modes.sleeve import SleeveCrypto
from harness.run.endpoints import endpoints
from harness.run.procs import wait_listening

pytestmark = [needs_root(), pytest.mark.lab]

SLEEVES = ["sleeve", "sleeve-seg", "sleeve-basic", "sleeve-l3", "sleeve-crypto", "sleeve-crypto-chacha"]


def cpu_has_fast_aes() -> bool:
    """AES-NI and carry-less multiply: where `--cipher auto` picks AES-256-GCM."""
    flags = next((ln.split(":", 1)[1].split() for ln in open("/proc/cpuinfo") if ln.startswith("flags")), [])
    return "aes" in flags and "pclmulqdq" in flags


def expected_cipher(name: str) -> str | None:
    if name == "sleeve-crypto":
        return "aes-256-gcm" if cpu_has_fast_aes() else "chacha20-poly1305"
    return "chacha20-poly1305" if name == "sleeve-crypto-chacha" else None


def drop_vxlan(host):
    """Drop VXLAN (UDP 4789) arriving on one host, as a firewall between hosts would."""
    host.run(["nft", "add", "table", "inet", "obtest"])
    host.run(["nft", "add", "chain", "inet", "obtest", "in", "{ type filter hook input priority 0 ; }"])
    host.run(["nft", "add", "rule", "inet", "obtest", "in", "udp", "dport", "4789", "drop"])


def _iperf(lab, dp, placement, seconds=1):
    c, s = endpoints(lab, dp, placement)
    srv = s.host.start(["iperf3", "-s", "-1", "-p", "5201"])
    try:
        why = wait_listening(s.host, 5201, srv)
        assert why is None, why
        out = c.host.run(["iperf3", "-c", s.addr, "-p", "5201", "-t", str(seconds), "-J"], timeout=seconds + 20,
                         check=False)
    finally:
        srv.stop()
    import json
    return json.loads(out.stdout)["end"]["sum_received"]["bits_per_second"]


@pytest.mark.parametrize("underlay, overlay", [(1500, 1410), (9000, 8950)])
@pytest.mark.parametrize("name", SLEEVES)
def test_ping_and_tcp_across_each_sleeve_mode(lab, name, underlay, overlay):
    mode = modes.get(name)
    # 8950 is Weave's jumbo MTU; a mode whose encapsulation is bigger than VXLAN's (crypto)
    # gets the smallest underlay that carries it.
    underlay = max(underlay, overlay + mode.overhead)
    lab.set_underlay(underlay, None)
    dp = mode.deploy(lab, mode.overlay_mtu(underlay, overlay))
    try:
        assert dp.kind == "sleeve" and dp.overlay_mtu == overlay
        full_size_pings(lab, dp, ("container-container", "host-container"), overlay)
        bps = _iperf(lab, dp, "container-container")
        assert bps > 50e6, f"{name} at {overlay}: only {bps / 1e6:.0f} Mbit/s"
        counters = mode.counters(lab, dp)
        h1 = counters["h1"]
        assert h1["rx"]["frames"] > 1000 and h1["crypto"] is mode.crypto
        # the AEAD both daemons agreed on, as the deployment records it for run.json
        assert dp.info.get("cipher") == expected_cipher(name), dp.info
        assert h1["cipher"] == counters["h0"]["cipher"] == expected_cipher(name)
        assert h1["basic"] is (name == "sleeve-basic")
        assert h1["segment"] is (name == "sleeve-seg")
        if name == "sleeve-seg":
            # super-frames were cut on the way out and gathered back on the way in
            assert counters["h0"]["tx"]["segmented"] > 100 and h1["rx"]["coalesced"] > 100
            assert h1["rx"]["fragments"] == 0
        assert h1["overhead"] == mode.overhead  # the harness's MTU arithmetic is the daemon's
        assert sum(h1["drops"].values()) - h1["drops"].get("reasm_timeout", 0) < 0.01 * h1["rx"]["datagrams"]
    finally:
        mode.teardown(lab, dp)
    assert lab.sides[0].host.run(["ip", "link", "show", "sv0"], check=False).returncode != 0


class MismatchedKeys(SleeveCrypto):
    name = "sleeve-crypto-mismatch"

    def keys(self, n=2):
        return tuple(secrets.token_bytes(32) for _ in range(n))


def test_sleeves_with_different_keys_do_not_talk(lab, monkeypatch):
    # Daemons with different keys never agree on an AEAD, however long deploy waits for
    # them to (20 s in a run): 2 s ends the wait sooner and changes no outcome.
    monkeypatch.setattr(sleeve_mode, "AGREE_TIMEOUT", 2.0)
    mode = MismatchedKeys()
    dp = mode.deploy(lab, 1410)
    try:
        assert dp.info["cipher"] is None, dp.info      # not heard in time: they never agreed
        c, s = endpoints(lab, dp, "container-container")
        out = c.host.run(["ping", "-c", "3", "-i", "0.2", "-W", "1", s.addr], check=False)
        assert out.returncode != 0 and "100% packet loss" in out.stdout
        drops = mode.counters(lab, dp)["h1"]["drops"]
        assert drops["auth_fail"] > 0
    finally:
        mode.teardown(lab, dp)


class ForcedCiphersDiffer(SleeveCrypto):
    """h0 with --cipher aes-256-gcm, h1 with --cipher chacha20-poly1305."""

    name = "sleeve-crypto-differ"

    def _start(self, testbed, s, binary, mtu, key):
        self.cipher = ("aes-256-gcm", "chacha20-poly1305")[s.index]
        return super()._start(testbed, s, binary, mtu, key)


def test_sleeves_with_different_forced_ciphers_refuse_each_other(lab):
    mode = ForcedCiphersDiffer()
    dp = mode.deploy(lab, 1410)
    try:
        assert dp.info["cipher"] == "none", dp.info
        c, s = endpoints(lab, dp, "container-container")
        # Both ways, so that each side has frames to send: its refusals are counted on send.
        for a, b in ((c, s), (s, c)):
            out = a.host.run(["ping", "-c", "3", "-i", "0.2", "-W", "1", b.addr], check=False)
            assert out.returncode != 0 and "100% packet loss" in out.stdout
        counters = mode.counters(lab, dp)
        for side in ("h0", "h1"):
            snap = counters[side]
            # refused and counted, never sent in plaintext nor opened
            assert snap["peers"][0]["heard"] and snap["peers"][0]["cipher"] == "none", snap["peers"]
            assert snap["drops"]["cipher_mismatch"] > 0 and snap["rx"]["frames"] == 0, snap["drops"]
            assert snap["drops"]["crypto_mismatch"] == 0
    finally:
        mode.teardown(lab, dp)
    outs = [p.stop() for p in dp.processes.values()]  # idempotent: what each printed
    # one line each, not one per datagram
    assert [o.stderr.count("accepts only") for o in outs] == [1, 1], [o.stderr for o in outs]


def test_run_json_names_the_cipher(lab, tmp_path):
    from harness import results
    from harness.run import scenario as S
    from harness.run.runner import Runner
    sc = S.build({"matrix": {"modes": ["sleeve-crypto", "sleeve-crypto-chacha"], "tests": ["qperf.tcp_lat"],
                             "placements": ["container-container"], "repeats": 1, "duration": 1}})
    store = results.RunStore.create(tmp_path, {"scenario": sc.to_dict()})
    Runner(sc, lab, store).run(S.expand(sc))
    assert all(r["ok"] for r in store.records())
    dps = store.read_meta()["datapaths"]
    assert {d["mode"]: d["info"]["cipher"] for d in dps} == {m: expected_cipher(m) for m in
                                                             ("sleeve-crypto", "sleeve-crypto-chacha")}


def test_auto_picks_fastdp_when_vxlan_passes(lab):
    mode = modes.get("auto")
    dp = mode.deploy(lab, 1410)
    try:
        assert dp.kind == "fastdp" and "passed" in dp.info["decision"]
    finally:
        mode.teardown(lab, dp)


def test_auto_falls_back_to_the_sleeve_when_udp_4789_is_dropped(lab):
    drop_vxlan(lab.sides[1].host)
    mode = modes.get("auto")
    dp = mode.deploy(lab, 1410)
    try:
        assert dp.kind == "sleeve", dp.info
        assert "DF probe across VXLAN failed" in dp.info["decision"]
        c, s = endpoints(lab, dp, "container-container")
        c.host.run(["ping", "-c", "2", "-W", "10", s.addr])
    finally:
        mode.teardown(lab, dp)


def test_auto_records_the_datapath_in_every_measurement(lab, tmp_path):
    from harness import results
    from harness.run import scenario as S
    from harness.run.runner import Runner
    drop_vxlan(lab.sides[1].host)
    sc = S.build({"matrix": {"modes": ["auto"], "tests": ["qperf.tcp_lat"], "placements": ["container-container"],
                             "repeats": 1, "duration": 1}})
    store = results.RunStore.create(tmp_path, {"scenario": sc.to_dict()})
    Runner(sc, lab, store).run(S.expand(sc))
    recs = store.records()
    assert recs and all(r["datapath"] == "sleeve" and r["mode"] == "auto" and r["ok"] for r in recs)
    assert any(r["metric"] == "cpu_sleeve_pct" and r["value"] > 0 for r in recs)
    assert list((store.path / "raw").glob("*.counters.json"))


def test_overlay_mtu_too_big_for_the_sleeve_is_refused():
    from harness.core.errors import HarnessError
    with pytest.raises(HarnessError, match="does not fit mode sleeve-crypto"):
        modes.get("sleeve-crypto").overlay_mtu(1500, 1450)
