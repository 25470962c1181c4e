"""How modes look (harness/core/looks.py): a value that travels with a run, never a process's state.

A run's run.json records each mode's place and colour; results.load puts them in every row,
and every table, finding, figure and gate reads them from there (or from a Looks passed in).
Reading one run never changes how another is shown.
"""

from __future__ import annotations

import pathlib
import subprocess
import sys

import pandas as pd
import pytest

from harness import modes, results
from harness.analysis import findings as fnd, stats, summary as summ
from harness.core.looks import EMPTY, Look, Looks, derived_colour
from harness.modes.commands import CommandMode
from harness.report import render, style

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_a_looks_ranks_known_modes_by_order_then_the_rest_by_name_native_first():
    looks = Looks({"b": Look(2, "#000002"), "a": Look(1, "")})
    assert sorted(["zz", "native", "b", "aa", "a"], key=looks.rank) == ["a", "b", "native", "aa", "zz"]
    assert looks.colour("b") == "#000002"
    assert looks.colour("a") == derived_colour("a") == EMPTY.colour("a")     # declared none: derived
    assert sorted(["x", "native", "a"], key=EMPTY.rank) == ["native", "a", "x"]


def test_a_looks_is_immutable_and_merges_into_a_new_one():
    a = Looks({"x": Look(1, "#111111")})
    b = Looks({"x": Look(9, "#999999"), "y": Look(5, "")})
    with pytest.raises(AttributeError):
        a._by = {}                                                   # type: ignore[misc]
    with pytest.raises(TypeError):
        a["x"] = Look(3, "")                                         # type: ignore[index]
    m = a.merged(b)
    assert m == {"x": Look(1, "#111111"), "y": Look(5, "")}          # the first word on a name wins
    assert a == {"x": Look(1, "#111111")} and len(b) == 2            # neither changed
    assert hash(m) == hash(Looks(dict(m)))


def test_recorded_looks_skip_what_is_malformed():
    looks = Looks.recorded({"x": {"order": 3, "colour": "#333333"}, "y": {"order": 4},
                            "bad": {"order": "1"}, "flag": {"order": True}, "z": [1], 7: {"order": 1},
                            "c": {"order": 2, "colour": 5}})
    assert looks == {"x": Look(3, "#333333"), "y": Look(4, ""), "c": Look(2, "")}
    assert Looks.recorded(None) == Looks.recorded([1, 2]) == EMPTY
    assert Looks.recorded(looks.recordable()) == looks


def test_a_registry_gives_its_modes_looks_and_defining_one_changes_no_other():
    std = modes.standard()
    assert std.looks() == {m.name: Look(m.order, m.colour) for m in std.values()}
    mode = CommandMode("only-mine", {"layer": "l2", "overhead": 50, "device": "vxm",
                                     "up": ["ip link add ${dev} type vxlan id 9 dstport 4790"],
                                     "down": ["ip link del ${dev}"]}, "test")
    mode.order, mode.colour = 7, "#123456"
    mine = std.extended([mode])
    assert mine.looks()["only-mine"] == Look(7, "#123456")
    assert "only-mine" not in std.looks()                                    # the standard one is untouched
    assert std.looks().colour("only-mine") == derived_colour("only-mine")    # nothing global learnt it
    assert sorted(["only-mine", "fastdp"], key=std.looks().rank) == ["fastdp", "only-mine"]


def _rows(mode_names):
    """Measurement rows built by hand: no run.json, so no looks."""
    out = []
    for m in mode_names:
        for rep in (1, 2):
            out.append(dict(run_id="r", case=f"{m}-{rep}", mode=m, datapath="dp", underlay_mtu=1500,
                            overlay_mtu=1450, placement="host-host", test="iperf3.tcp", streams=1, repeat=rep,
                            metric="throughput_bps", value=1e9 * (1 + rep / 10), unit="bps", ok=True, error=None))
    return pd.DataFrame(out)


def _measure(store: results.RunStore, mode_names) -> None:
    items = []
    for m in mode_names:
        for rep in (1, 2):
            items.append(results.Measurement(
                case=f"{m}-{rep}", mode=m, datapath="dp", underlay_mtu=1500, overlay_mtu=1450,
                placement="host-host", test="iperf3.tcp", streams=1, repeat=rep, metric="throughput_bps",
                value=(9e9 if m == "native" else 5e9) * (1 + rep / 100), unit="bps"))
    store.append(items)


def _run(root: pathlib.Path, run_id: str, recorded: dict) -> pathlib.Path:
    store = results.RunStore.create(root, {"modes": recorded}, run_id=run_id)
    _measure(store, ["native", "xmode", "ymode"])
    store.unlock()
    return store.path


def test_a_run_read_after_another_keeps_its_own_order(tmp_path):
    """Run A puts xmode before ymode, run B after: reading B in the same process changes
    nothing of A's table, findings or report."""
    a = _run(tmp_path, "run-a", {"native": {"order": 0, "colour": "#000000"},
                                 "xmode": {"order": 1, "colour": "#aa0000"}, "ymode": {"order": 5, "colour": ""}})
    b = _run(tmp_path, "run-b", {"native": {"order": 0, "colour": "#000000"},
                                 "xmode": {"order": 9, "colour": "#bb0000"}, "ymode": {"order": 5, "colour": ""}})
    df_a = results.load(a)
    df_b = results.load(b)
    assert list(df_a.drop_duplicates("mode")[results.MODE_ORDER]) == [0, 1, 5]
    assert list(summ.summary_table(df_a)["mode"]) == ["native", "xmode", "ymode"]
    assert list(summ.summary_table(df_b)["mode"]) == ["native", "ymode", "xmode"]
    assert list(stats.summarize(results.load(a))["mode"]) == ["native", "xmode", "ymode"]
    assert list(stats.ratio_to_native(df_a)["mode"]) == ["xmode", "ymode"]

    view_a = render.load_run(a)
    render.load_run(b)
    assert [r["r"]["mode"] for r in view_a.tables[0]["rows"]] == ["native", "xmode", "ymode"]
    assert view_a.tables[0]["rows"][1]["color"] == "#aa0000"
    assert style.mode_color("xmode", view_a.looks) == "#aa0000"
    assert dict(view_a.derived)["Modes"] == "native, xmode, ymode"
    found = fnd.findings(summ.summary_table(df_a), df_a)
    assert [f.parts[0].text for f in found if f.kind == "cost"][:2] == ["xmode", "ymode"]

    # a report of both: each run's table in its own order; the legend in the first run's
    html = render.render_html([a, b])
    legend = html[html.index('aria-label="mode colours"'):html.index("</div>", html.index('aria-label="mode colours"'))]
    assert legend.index(">xmode<") < legend.index(">ymode<") and "#aa0000" in legend and "#bb0000" not in legend
    assert 'background:#bb0000"></span>xmode' in html                      # run B's rows keep B's colour


def test_rows_without_recorded_looks_sort_by_name_native_first():
    df = _rows(["zeta", "alpha", "native"])
    assert stats.looks_of(df) == EMPTY
    assert list(stats.summarize(df)["mode"]) == ["native", "alpha", "zeta"]
    looks = Looks({"zeta": Look(1, ""), "alpha": Look(2, "")})
    assert list(stats.sort_configs(stats.summarize(df), looks)["mode"]) == ["zeta", "alpha", "native"]


def test_a_process_that_never_loaded_the_modes_shows_a_plugin_modes_recorded_colour(tmp_path):
    """A run of a plugin's mode, read where neither the plugin nor harness.modes was ever
    imported: its table order and colour are run.json's."""
    run = _run(tmp_path, "run-plugin", {"native": {"order": 0, "colour": "#000000"},
                                        "ymode": {"order": 2, "colour": "#0a0b0c"},
                                        "xmode": {"order": 3, "colour": "#c0ffee"}})
    code = ("import sys, pathlib\n"
            "from harness.report import render\n"
            "from harness.analysis import summary, tablefmt\n"
            "from harness import results\n"
            f"run = pathlib.Path({str(run)!r})\n"
            "html = render.render_html([run])\n"
            "print(list(summary.summary_table(results.load(run))['mode']))\n"
            "print('background:#c0ffee\"></span>xmode' in html, 'background:#0a0b0c\"></span>ymode' in html)\n"
            "print(sorted(m for m in sys.modules if m.startswith('harness.modes')))\n")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]
    assert p.stdout.splitlines() == ["['native', 'ymode', 'xmode']", "True True", "[]"]
