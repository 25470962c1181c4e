import json
import math

import pytest

from harness.core.errors import HarnessError
from harness import results


def _m(**kw):
    base = dict(case="fastdp/u1500/o1450/host-host/iperf3.tcp/p1", mode="fastdp", datapath="fastdp",
                underlay_mtu=1500, overlay_mtu=1450, placement="host-host", test="iperf3.tcp", streams=1,
                repeat=0, metric="throughput_bps", value=1e9, unit="bps")
    base.update(kw)
    return results.Measurement(**base)


def test_append_is_line_per_metric_and_load_gives_dataframe(tmp_path):
    store = results.RunStore.create(tmp_path, {"scenario": {}})
    store.append([_m(), _m(metric="retransmits", value=3, unit="count")])
    store.append([_m(metric="failed", value=math.nan, unit="", ok=False, error="boom")])
    lines = (store.path / "measurements.jsonl").read_text().splitlines()
    assert len(lines) == 3
    first = json.loads(lines[0])
    for field in ["case", "mode", "datapath", "underlay_mtu", "overlay_mtu", "placement", "test",
                  "streams", "repeat", "metric", "value", "unit", "ok", "error"]:
        assert field in first
    assert first["run_id"] == store.run_id and first["ts"]
    assert json.loads(lines[2])["value"] is None
    df = results.load(store.path)
    assert list(df["metric"]) == ["throughput_bps", "retransmits", "failed"]
    assert df["value"].isna().tolist() == [False, False, True]


def test_torn_last_line_is_dropped_but_torn_middle_line_is_an_error(tmp_path):
    store = results.RunStore.create(tmp_path, {})
    store.append([_m(), _m(repeat=1)])
    p = store.path / "measurements.jsonl"
    p.write_text(p.read_text() + '{"case": "x", "mo')
    assert len(results.read_records(store.path)) == 2
    lines = p.read_text().splitlines()
    p.write_text("\n".join([lines[0], '{"broken', lines[1]]) + "\n")
    with pytest.raises(HarnessError, match=r"measurements.jsonl:2: not valid JSON"):
        results.read_records(store.path)


def _set(*pairs):
    """The lines of cases measured at once, one per pair, two metrics each."""
    return [_m(case=f"native/u1500/o1500/host-host/iperf3.tcp/p1/{a}-{b}", metric=m)
            for a, b in pairs for m in ("throughput_bps", "retransmits")]


@pytest.mark.parametrize("whole", [0, 1, 2, 3])
def test_repair_cuts_a_set_cut_short_wholly_and_keeps_whole_batches_of_the_same_size(tmp_path, whole):
    """A set's lines are one batch: a kill that leaves `whole` of its four lines and a torn
    fifth loses the whole set, while the set before it (also of four lines) and the single
    case before that stay."""
    store = results.RunStore.create(tmp_path, {})
    store.append([_m(), _m(metric="retransmits", value=3, unit="count")])
    store.append(_set(("h0", "h1"), ("h2", "h3")))
    p = store.path / "measurements.jsonl"
    kept = p.read_bytes()
    store.append(_set(("h0", "h2"), ("h1", "h3")))
    torn = p.read_bytes()[len(kept):].splitlines(keepends=True)
    p.write_bytes(kept + b"".join(torn[:whole]) + torn[whole][:20])
    store.lock()
    assert store.repair() > 0
    assert p.read_bytes() == kept
    assert [r["lines"] for r in store.records()] == [2, 2, 4, 4, 4, 4]


def test_schema_version_is_checked(tmp_path):
    store = results.RunStore.create(tmp_path, {})
    meta = json.loads((store.path / "run.json").read_text())
    assert meta["schema_version"] == results.SCHEMA_VERSION
    meta["schema_version"] = 99
    (store.path / "run.json").write_text(json.dumps(meta))
    with pytest.raises(HarnessError, match="schema_version 99"):
        results.read_meta(store.path)


def test_not_a_run_directory(tmp_path):
    with pytest.raises(HarnessError, match="not a run directory"):
        results.load(tmp_path)
