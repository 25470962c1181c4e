"""A run named by its id from any directory: show, report, export, gate and baseline look it
up in --results DIR, else in ./results and the checkout's results/, and say every place
they looked when it is nowhere; `report` without -o writes reports/<run-id>.html."""

import os
import pathlib
import subprocess
import sys

import pytest

from harness import results
from harness.core.errors import HarnessError
from harness.core.paths import PROJECT

ROOT = pathlib.Path(__file__).resolve().parents[2]
KW = dict(modes=["native", "fastdp"], underlay_mtus=[1500], tests=["iperf3.tcp"], repeats=3)


def ob(*args, cwd):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    return subprocess.run([sys.executable, "-m", "harness.cli", *args], cwd=cwd, capture_output=True, text=True,
                          env=env, timeout=300)


@pytest.fixture
def stored(tmp_path):
    """Two runs in a results directory, and an empty directory to run commands from."""
    from report_fixtures.synth import make_run
    store = tmp_path / "store"
    a = make_run(store, **KW)
    b = make_run(store, seed=3, **KW)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    return store, a, b, elsewhere


def test_a_path_and_an_id_under_a_named_directory(stored):
    store, a, _, _ = stored
    assert results.resolve_run(a) == a
    assert results.resolve_run(a.name, store) == store / a.name
    assert results.resolve_run(a.name, [store.parent, store]) == store / a.name


def test_an_id_under_the_current_directorys_results(stored, monkeypatch):
    store, a, _, elsewhere = stored
    (elsewhere / "results").symlink_to(store)
    monkeypatch.chdir(elsewhere)
    assert results.resolve_run(a.name).resolve() == a.resolve()


def test_the_default_places_are_here_then_the_checkout():
    roots = [os.path.abspath(r) for r in results.default_roots()]
    assert roots[-1] == str(PROJECT / "results")
    assert roots[0] == os.path.abspath("results") and len(set(roots)) == len(roots)


def test_not_found_names_every_directory_tried(stored, monkeypatch):
    store, _, _, elsewhere = stored
    monkeypatch.chdir(elsewhere)
    with pytest.raises(HarnessError) as e:
        results.resolve_run("20990101T000000Z-beef")
    msg = str(e.value)
    assert msg.startswith("20990101T000000Z-beef: not a run directory") and "\n" not in msg
    for d in (elsewhere, elsewhere / "results", PROJECT / "results"):
        assert f"{d / '20990101T000000Z-beef'}" in msg
    with pytest.raises(HarnessError, match=f"in {elsewhere / 'x'}, {store / 'x'}\\)$"):
        results.resolve_run("x", store)


@pytest.mark.parametrize("cmd", ["show", "export", "gate", "baseline", "report"])
def test_every_run_command_finds_an_id_from_elsewhere_with_results(stored, cmd):
    store, a, b, elsewhere = stored
    extra = {"show": [], "export": ["--format", "bmf"], "report": ["-o", "r.html"],
             "baseline": ["-o", "b.json"], "gate": ["--baseline", "b.json"]}[cmd]
    if cmd == "gate":
        assert ob("baseline", b.name, "--results", str(store), "-o", "b.json", cwd=elsewhere).returncode == 0
    p = ob(cmd, a.name, "--results", str(store), *extra, cwd=elsewhere)
    assert p.returncode in ((0, 1) if cmd == "gate" else (0,)), p.stderr
    assert "Traceback" not in p.stderr
    missing = ob(cmd, "20990101T000000Z-beef", "--results", str(store), *extra, cwd=elsewhere)
    assert missing.returncode == 2 and missing.stderr.count("\n") == 1, missing.stderr
    assert f"no run.json in {elsewhere / '20990101T000000Z-beef'}, {store / '20990101T000000Z-beef'})" \
        in missing.stderr


def test_an_id_without_results_is_looked_up_in_the_current_directorys_results(stored):
    store, a, _, elsewhere = stored
    (elsewhere / "results").symlink_to(store)
    p = ob("show", a.name, "--format", "csv", cwd=elsewhere)
    assert p.returncode == 0, p.stderr
    assert "native" in p.stdout


def test_report_without_output_writes_reports_run_id_html_and_says_where(stored):
    store, a, b, elsewhere = stored
    p = ob("report", a.name, "--results", str(store), cwd=elsewhere)
    assert p.returncode == 0, p.stderr
    assert "Traceback" not in p.stderr
    assert p.stdout.strip() == f"reports/{a.name}.html"
    page = elsewhere / "reports" / f"{a.name}.html"
    assert page.read_text().lstrip().lower().startswith("<!doctype html")

    two = ob("report", str(a), str(b), cwd=elsewhere)
    assert two.returncode == 0, two.stderr
    assert two.stdout.strip() == f"reports/compare-{a.name}-{b.name}.html"
    assert (elsewhere / two.stdout.strip()).is_file()


def test_report_names_three_runs_after_the_first_two():
    from harness.cli.show import default_output
    runs = [pathlib.Path(f"/r/{n}") for n in ("a", "b", "c", "d")]
    assert default_output(runs[:1]) == pathlib.Path("reports/a.html")
    assert default_output(runs[:2]) == pathlib.Path("reports/compare-a-b.html")
    assert default_output(runs) == pathlib.Path("reports/compare-a-b-and-2-more.html")
