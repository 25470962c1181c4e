"""The harness's own readers fed random and mutated input: nothing but HarnessError escapes.

Scenario files, inventories, baselines and run directories are what users hand-edit,
copy between machines and half-write; each reader must answer with one clear error."""

import json
import pathlib

from hypothesis import HealthCheck, given, settings, strategies as st

from harness.core.errors import HarnessError
from harness.gates import baseline as gate
from harness import results
from harness.run import scenario as S
from harness.testbeds import inventory

ROOT = pathlib.Path(__file__).resolve().parents[2]
# No deadline and no health checks: those judge how fast examples are made, which a busy
# machine decides; what fails here is a parser's answer.
FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))

scalars = st.one_of(st.none(), st.booleans(), st.integers(-2**40, 2**40), st.floats(allow_nan=True),
                    st.text(max_size=12))
toml_values = st.recursive(scalars.filter(lambda v: v is not None),
                           lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                   st.dictionaries(st.text(max_size=8), inner, max_size=4)),
                           max_leaves=12)
SCENARIO_KEYS = {t: list(f) for t, f in S.TABLES.items()}


@st.composite
def scenario_docs(draw):
    """Documents shaped like scenarios (known tables and keys) with values of any type."""
    doc = {}
    for table in draw(st.lists(st.sampled_from(list(SCENARIO_KEYS) + ["bogus"]), max_size=4, unique=True)):
        keys = SCENARIO_KEYS.get(table, ["x"])
        doc[table] = {k: draw(toml_values) for k in draw(st.lists(st.sampled_from(keys), max_size=4, unique=True))}
    return doc


@FUZZ
@given(scenario_docs())
def test_scenario_build_and_expand_raise_only_harness_errors(doc):
    try:
        S.expand(S.resolve_underlay(S.build(doc, source="fuzz.toml"), 1500))
    except HarnessError:
        pass


SHIPPED = [p.read_text() for p in sorted((ROOT / "scenarios").glob("*.toml"))]


@FUZZ
@given(st.sampled_from(SHIPPED), st.integers(0, 10_000), st.integers(0, 40), st.text(max_size=20))
def test_scenario_text_mutated_raises_only_harness_errors(tmp_path_factory, text, at, cut, insert):
    at %= len(text) + 1
    mutated = text[:at] + insert + text[at + cut:]
    f = tmp_path_factory.mktemp("s") / "m.toml"
    f.write_text(mutated)
    try:
        sc = S.load(f)
        if sc.source.endswith("inventory.example.toml"):
            return
        S.expand(S.resolve_underlay(sc, 1500))
    except HarnessError:
        pass


host_dicts = st.dictionaries(st.sampled_from(list(inventory.HOST_FIELDS) + ["zz"]), toml_values, max_size=6)


@FUZZ
@given(st.dictionaries(st.sampled_from(["hosts", "defaults", "x"]),
                       st.one_of(st.lists(host_dicts, max_size=4), host_dicts, toml_values), max_size=3),
       st.one_of(st.none(), st.lists(st.text(max_size=4), max_size=3)))
def test_inventory_raises_only_harness_errors(doc, pair):
    try:
        hosts = inventory.from_doc(doc, "fuzz.toml")
        inventory.pick(hosts, pair, "fuzz.toml")
    except HarnessError:
        pass


BASELINE = (ROOT / "results" / "baseline.json").read_text()


@FUZZ
@given(st.integers(0, len(BASELINE)), st.integers(0, 200), st.text(max_size=30),
       st.one_of(st.none(), toml_values))
def test_baseline_reader_raises_only_harness_errors(tmp_path_factory, at, cut, insert, replace_cases):
    text = BASELINE[:at] + insert + BASELINE[at + cut:]
    if replace_cases is not None:
        try:
            b = json.loads(BASELINE)
            b["cases"][0]["ratios"] = replace_cases
            text = json.dumps(b)
        except (ValueError, TypeError):
            pass
    f = tmp_path_factory.mktemp("b") / "baseline.json"
    f.write_text(text)
    try:
        gate.load_baseline(f)
    except HarnessError:
        pass


LINE = json.dumps({"case": "native/u1500/o1500/host-host/iperf3.tcp/p1", "mode": "native", "datapath": "native",
                   "underlay_mtu": 1500, "overlay_mtu": 1500, "placement": "host-host", "test": "iperf3.tcp",
                   "streams": 1, "repeat": 0, "metric": "throughput_bps", "value": 1e9, "unit": "bps", "ok": True,
                   "error": None, "lines": 1})
META = json.dumps({"schema_version": 1, "run_id": "r", "start": "x", "end": None, "scenario": {}})


@FUZZ
@given(st.binary(max_size=300), st.integers(0, 400), st.integers(0, 60), st.binary(max_size=40),
       st.booleans())
def test_run_directory_readers_raise_only_harness_errors(tmp_path_factory, junk, at, cut, insert, damage_meta):
    d = tmp_path_factory.mktemp("run")
    lines = (LINE + "\n") * 3
    data = lines.encode()
    data = data[:at] + insert + data[at + cut:] + junk
    (d / "measurements.jsonl").write_bytes(data)
    meta = META.encode()
    if damage_meta:
        meta = meta[:at % len(meta)] + insert + meta[(at + cut) % len(meta):]
    (d / "run.json").write_bytes(meta)
    try:
        results.read_meta(d)
        results.load(d)
        results.RunStore.open(d).repair()
        results.read_records(d)
    except HarnessError:
        pass
