"""The modes registry: a mode is one file in harness/modes/, and everything else reads it.

The throwaway mode is added to a copy of the package (never to the checkout), and the
copy's command line, table and report are run in a fresh interpreter.
"""

from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
import sys

import pytest

from harness import modes
from harness.modes.commands import CommandMode
from harness.report import style
from harness.testbeds import preflight

ROOT = pathlib.Path(__file__).resolve().parents[2]
THROWAWAY = '''
from harness.modes.base import Datapath, Mode


class Throwaway(Mode):
    name = "throwaway"
    kind = "throwaway"
    order = 5                 # between native (0) and fastdp (10)
    colour = "#a1b2c3"
    overhead = 20
    placements = ("host-host",)
    description = "a mode that exists only in this test"

    def deploy(self, testbed, overlay_mtu):
        return Datapath(self.name, self.kind, overlay_mtu)

    def teardown(self, testbed, dp):
        pass
'''
CHECK = '''
import sys
from report_fixtures.synth import make_run
from harness.run import scenario
sc = scenario.build({"matrix": {"modes": ["native", "throwaway"], "overlay_mtu": ["auto"],
                                "placements": ["host-host"], "tests": ["iperf3.tcp"]}}, source="test")
cases = scenario.expand(scenario.resolve_underlay(sc, 1500))
print("cases", sorted({(c.mode, c.overlay_mtu) for c in cases}))
print(make_run(sys.argv[1], modes=["fastdp", "throwaway", "native"], underlay_mtus=[1500], repeats=2))
'''


def test_every_bundled_mode_declares_what_the_report_and_preflight_read():
    bundled = {m.name: m for m in modes.standard().values()}
    for m in bundled.values():
        assert m.colour.startswith("#") and len(m.colour) == 7, m.name
        assert set(m.features) <= set(preflight.FEATURES), m.name
    orders = [m.order for m in bundled.values()]
    assert orders == sorted(orders) and len(set(orders)) == len(orders)
    assert len({m.colour for m in bundled.values()}) == len(bundled)
    looks = modes.standard().looks()
    assert [style.mode_color(n, looks) for n in bundled] == [m.colour for m in bundled.values()]
    ranked = sorted(reversed(list(bundled)), key=looks.rank)
    assert ranked == list(bundled)


@pytest.fixture(scope="module")
def copy_with_throwaway(tmp_path_factory) -> pathlib.Path:
    site = tmp_path_factory.mktemp("site")
    shutil.copytree(ROOT / "harness", site / "harness", ignore=shutil.ignore_patterns("__pycache__"))
    (site / "harness" / "modes" / "throwaway.py").write_text(THROWAWAY)
    return site


def _py(site: pathlib.Path, *argv: str) -> str:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(site), str(ROOT / "tests")]))
    p = subprocess.run([sys.executable, *argv], cwd=site, env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]
    return p.stdout


def test_a_mode_added_as_one_file_reaches_the_cli_the_table_and_the_report(copy_with_throwaway, tmp_path):
    site = copy_with_throwaway
    assert "throwaway" not in modes.standard()               # the checkout's registry is untouched

    listed = _py(site, "-m", "harness.cli", "modes").splitlines()
    assert [ln.split()[0] for ln in listed][:3] == ["native", "throwaway", "fastdp"], listed
    assert "a mode that exists only in this test" in listed[1] and " 20 B " in listed[1]

    out = _py(site, "-c", CHECK, str(tmp_path / "results")).splitlines()
    assert out[0] == "cases [('native', 1500), ('throwaway', 1480)]"    # its overhead, from its file
    run = out[1]

    rows = _py(site, "-m", "harness.cli", "show", run, "--format", "csv").splitlines()
    col = rows[0].split(",").index("mode")
    order = list(dict.fromkeys(r.split(",")[col] for r in rows[1:]))
    assert order == ["native", "throwaway", "fastdp"], rows[:4]

    html = tmp_path / "r.html"
    _py(site, "-m", "harness.cli", "report", run, "-o", str(html))
    page = html.read_text()
    assert 'style="background:#a1b2c3"></span>throwaway' in page


SHIPPED_BYO = pathlib.Path(__file__).resolve().parents[2] / "scenarios" / "bring-your-own.toml"


def test_a_scenario_read_defines_its_modes_for_itself_alone(tmp_path):
    """A scenario's [modes.NAME] (here the shipped vxlan77, defined otherwise) lives in
    that scenario's registry only: the shipped scenario read next defines its own."""
    from harness.run import scenario as S
    other = tmp_path / "other.toml"
    other.write_text(SHIPPED_BYO.read_text().replace("dstport 4790", "dstport 4791"))
    mine = S.load(other)
    assert "vxlan77" in mine.known and "vxlan77" not in modes.standard()
    shipped = S.load(SHIPPED_BYO)
    assert shipped.modes[-1] == "vxlan77"
    assert "4790" in str(shipped.mode("vxlan77").definition) and "4791" in str(mine.mode("vxlan77").definition)


def test_reading_results_imports_no_mode():
    """analysis, gates and report read a mode's place and colour from the run's looks
    (core/looks.py, from run.json), never from the modes' code: importing them loads no mode module."""
    code = ("import sys, harness.analysis.summary, harness.analysis.tablefmt, harness.report.render, "
            "harness.gates.baseline, harness.gates.compare, harness.gates.trend, harness.export\n"
            "print(sorted(m for m in sys.modules if m.startswith('harness.modes') or m.startswith('harness.run')))")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]
    assert p.stdout.strip() == "[]"
