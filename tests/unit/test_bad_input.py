"""Bad input of every kind, as a user gives it: one line on stderr, exit 2, no traceback,
nothing left behind (no run directory, no lab). Table-driven: scenario files, command-line
arguments, inventories, baselines and damaged run directories."""

import json
import os
import pathlib
import subprocess
import sys

import pytest

from harness.testbeds import lab_state

ROOT = pathlib.Path(__file__).resolve().parents[2]

RUN_JSON = {"schema_version": 1, "run_id": "r", "start": "2026-11-22T00:00:00+00:00", "end": None, "scenario": {}}
LINE = {"case": "native/u1500/o1500/host-host/iperf3.tcp/p1", "mode": "native", "datapath": "native",
        "underlay_mtu": 1500, "overlay_mtu": 1500, "placement": "host-host", "test": "iperf3.tcp", "streams": 1,
        "repeat": 0, "metric": "throughput_bps", "value": 1e9, "unit": "bps", "ok": True, "error": None}
NOT_YAML = "this: is: not\n  - yaml: [\n"
HOSTS = '[[hosts]]\nname = "a"\naddress = "198.18.200.1"\n[[hosts]]\nname = "b"\naddress = "198.18.200.2"\n'


def _run_dir(tmp: pathlib.Path, meta=RUN_JSON, lines: str | None = None) -> str:
    d = tmp / "run"
    d.mkdir()
    (d / "run.json").write_text(meta if isinstance(meta, str) else json.dumps(meta))
    if lines is not None:
        (d / "measurements.jsonl").write_text(lines)
    return str(d)


def _file(tmp: pathlib.Path, name: str, text: str, mode: int = 0o644) -> str:
    f = tmp / name
    f.write_text(text)
    os.chmod(f, mode)
    return str(f)


# (id, make(tmp) -> argv, needle in the one line)
CASES = [
    # scenario files
    ("empty-scenario", lambda t: ["run", _file(t, "s.toml", "")], "s.toml: empty: a scenario needs at least a [matrix]"),
    ("comment-only-scenario", lambda t: ["run", _file(t, "s.toml", "# nothing\n")], "empty: a scenario needs"),
    ("not-toml", lambda t: ["run", _file(t, "s.toml", "[matrix\nmodes=1")], "s.toml: not valid TOML"),
    ("unknown-table", lambda t: ["run", _file(t, "s.toml", "[matrx]\n")], "[matrx]: unknown table (did you mean 'matrix'?)"),
    ("misspelled-key", lambda t: ["run", _file(t, "s.toml", "[matrix]\nmodse = []\n")], "[matrix] modse: unknown key (did you mean 'modes'?)"),
    ("wrong-type", lambda t: ["run", _file(t, "s.toml", '[matrix]\nrepeats = "3"\n')], "[matrix] repeats: expected int, got str"),
    ("no-modes", lambda t: ["run", _file(t, "s.toml", "[matrix]\nmodes = []\n")], "[matrix] modes: must not be empty"),
    ("unknown-mode", lambda t: ["run", _file(t, "s.toml", '[matrix]\nmodes = ["sleve"]\n')], "unknown mode 'sleve' (did you mean 'sleeve'?)"),
    ("mtu-cannot-fit", lambda t: ["run", _file(t, "s.toml", '[matrix]\nmodes = ["fastdp"]\noverlay_mtu = [1480]\n')],
     "overlay MTU 1480 does not fit mode fastdp on underlay MTU 1500"),
    ("zero-duration", lambda t: ["run", _file(t, "s.toml", "[matrix]\nduration = 0\n")], "[matrix] duration: 0 s is outside 1..3600"),
    ("kube-flag-without-kube", lambda t: ["run", "--pod-cpu", "1"], "--pod-cpu is the kubernetes backend's"),
    ("unknown-backend", lambda t: ["run", _file(t, "s.toml", '[testbed]\nbackend = "k8s"\n')], "[testbed] backend: 'k8s': expected"),
    ("scenario-missing", lambda t: ["run", str(t / "none.toml")], "none.toml: cannot read"),
    ("scenario-is-a-directory", lambda t: ["run", str(t)], "cannot read"),
    # command-line arguments
    # the MTU doctor: an MTU outside 576..65535, a mode whose encapsulation is not stated
    ("mtu-overlay-too-small", lambda t: ["mtu", "--overlay-mtu", "100"], "overlay_mtu: 100 is outside 576..65535"),
    ("mtu-overlay-too-big", lambda t: ["mtu", "--overlay-mtu", "1500,70000"], "70000 is outside 576..65535"),
    ("mtu-mode-without-overhead", lambda t: ["mtu", _file(t, "m.toml", '[modes.mine]\nlayer = "l2"\ndevice = "x0"\n'
                                                                      'up = ["true"]\ndown = ["true"]\n'
                                                                      '[matrix]\nmodes = ["mine"]\n')],
     "[modes.mine]: no `overhead`"),
    ("mtu-check-on-resume", lambda t: ["run", "--mtu-check", "--resume", str(t)], "--mtu-check: a resumed run"),
    ("mtu-cni-off-a-cluster", lambda t: ["mtu", "--modes", "cni"], "mode cni measures a Kubernetes cluster's own"),
    ("mtu-cni-overlay-mtu", lambda t: ["mtu", "--modes", "cni", "--overlay-mtu", "1400"],
     "--overlay-mtu 1400: a cluster's pod MTU is its CNI's"),
    ("flag-not-a-number", lambda t: ["run", "--repeats", "many"], "argument --repeats: invalid int value: 'many'"),
    ("unknown-command", lambda t: ["bench"], "invalid choice: 'bench'"),
    ("unknown-flag", lambda t: ["run", "--mode", "native", "--frobnicate"], "unrecognized arguments: --frobnicate"),
    ("flag-unknown-test", lambda t: ["run", "--tests", "iperf3.tpc"], "unknown test 'iperf3.tpc' (did you mean 'iperf3.tcp'?)"),
    ("flag-bad-rate", lambda t: ["run", "--rate", "fast"], "rate 'fast'"),
    ("flag-empty-list", lambda t: ["run", "--modes", ","], "argument --modes: empty list"),
    ("flag-zero-streams", lambda t: ["run", "--streams", "1,0"], "[matrix] streams: 0 is outside 1..128"),
    ("flag-too-many-streams", lambda t: ["run", "--streams", "129"], "[matrix] streams: 129 is outside 1..128"),
    ("payload-cannot-fit", lambda t: ["run", "--modes", "native,sleeve-crypto", "--tests", "iperf3.pps1400"],
     "iperf3.pps1400 sends 1400-byte payloads, which need an MTU of at least 1428; mode sleeve-crypto has 1418"),
    ("resume-not-a-run", lambda t: ["run", "--resume", str(t / "nope")], "not a run directory"),
    ("resume-with-flags", lambda t: ["run", "--resume", _run_dir(t), "--modes", "native"], "--resume takes the scenario from the run"),
    ("ssh-without-inventory", lambda t: ["run", "--backend", "ssh"], "backend ssh needs an inventory"),
    ("inventory-missing", lambda t: ["run", "--inventory", str(t / "hosts.toml")], "hosts.toml: cannot read inventory"),
    ("pair-unknown-host", lambda t: ["run", "--inventory", _file(t, "h.toml", HOSTS), "--pair", "a,c"],
     "--pair: no host 'c'"),
    # kubeconfigs (nothing reached: the file is refused as it is read)
    ("kubeconfig-not-yaml", lambda t: ["run", "--kubeconfig", _file(t, "kc", NOT_YAML), "--modes", "native"],
     "not a kubeconfig ("),
    ("down-kubeconfig-not-yaml", lambda t: ["down", "--kubeconfig", _file(t, "kc", NOT_YAML)], "kc): not YAML: "),
    # inventories
    ("inventory-missing-field", lambda t: ["run", "--inventory", _file(t, "h.toml", '[[hosts]]\nname = "a"\n')],
     "[[hosts]] #1: missing address"),
    ("inventory-unknown-key", lambda t: ["doctor", "--inventory", _file(t, "h.toml", HOSTS + 'usr = "x"\n')],
     "[[hosts]] #2 usr: unknown key (did you mean 'user'?)"),
    ("inventory-duplicate-name", lambda t: ["down", "--inventory", _file(t, "h.toml", HOSTS.replace('"b"', '"a"'))],
     "[[hosts]] #2 name: 'a' is already host #1"),
    ("inventory-same-address", lambda t: ["run", "--inventory", _file(t, "h.toml", HOSTS.replace('"198.18.200.2"', '"198.18.200.1"'))],
     "198.18.200.1:22 is already host 'a'"),
    ("inventory-loose-key-file", lambda t: ["run", "--inventory", _file(
        t, "h.toml", HOSTS + f'key_file = "{_file(t, "id", "k", 0o644)}"\n')], "permissions 644 are too open"),
    ("poll-idle-elsewhere", lambda t: ["run", "--inventory", _file(t, "h.toml", HOSTS), "--poll-idle"],
     "--poll-idle holds this machine's CPUs out of halting: the ssh backend measures elsewhere"),
    ("compare-run-poll-idle", lambda t: ["compare", "--run", _run_dir(t, lines=""), "--poll-idle"],
     "--run judges a finished A/B run: give no"),
    ("inventory-one-host", lambda t: ["run", "--inventory", _file(t, "h.toml", HOSTS.split("[[hosts]]\nname = \"b\"")[0])],
     "1 host(s); a pair needs two"),
    # baselines
    ("baseline-missing", lambda t: ["gate", _run_dir(t, lines=json.dumps(LINE) + "\n"), "--baseline", str(t / "b.json")],
     "baseline file not found"),
    ("baseline-not-json", lambda t: ["gate", _run_dir(t, lines=""), "--baseline", _file(t, "b.json", "{nope")],
     "b.json: not valid JSON"),
    ("baseline-wrong-kind", lambda t: ["gate", _run_dir(t, lines=""), "--baseline", _file(t, "b.json", '{"kind": "x"}')],
     "not an overlaybench baseline"),
    ("baseline-from-run-without-native", lambda t: ["baseline", _run_dir(t, lines=json.dumps(
        {**LINE, "mode": "fastdp", "case": "fastdp/x"}) + "\n"), "-o", str(t / "b.json")], "no gated case has a ratio to native"),
    # damaged run directories
    ("run-garbage-lines", lambda t: ["show", _run_dir(t, lines="garbage\nmore garbage\n")], "measurements.jsonl:1: not valid JSON"),
    ("run-line-not-a-measurement", lambda t: ["show", _run_dir(t, lines='{"hello": 1}\n')], "measurements.jsonl:1: not a measurement"),
    ("run-json-missing", lambda t: ["show", str(pathlib.Path(_run_dir(t)).parent / "elsewhere")], "not a run directory"),
    ("run-json-not-json", lambda t: ["show", _run_dir(t, meta="{")], "run.json: not valid JSON"),
    ("run-json-newer-schema", lambda t: ["show", _run_dir(t, meta={**RUN_JSON, "schema_version": 9})],
     "schema_version 9 was written by a newer overlaybench"),
    ("run-json-not-an-object", lambda t: ["report", _run_dir(t, meta="[1, 2]"), "-o", str(t / "r.html")], "not a run.json"),
]


def _orphan_labs() -> set[str]:
    """Labs whose owner is gone: what a refused command would have left. Live labs belong
    to runs going on beside the tests, not to the command under test."""
    if os.geteuid() != 0:
        return set()
    return {pfx for pfx, i in lab_state.leftovers().items() if not i["alive"]}


@pytest.mark.parametrize("make, needle", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_input_is_one_line_exit_2_and_leaves_nothing(tmp_path, make, needle):
    assert len(CASES) >= 30
    work = tmp_path / "in"
    work.mkdir()
    argv = make(work)
    results_dir = tmp_path / "results"
    if argv[0] == "run":
        argv += ["--results", str(results_dir)]
    before = _orphan_labs()
    p = subprocess.run([sys.executable, "-m", "harness.cli", *argv], cwd=ROOT, capture_output=True, text=True,
                       timeout=60, env=dict(os.environ, HOME=str(tmp_path)))
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert p.returncode == 2, (p.returncode, p.stdout[-500:], p.stderr[-2000:])
    assert len(lines) == 1 and "Traceback" not in p.stderr, p.stderr
    assert needle in lines[0], lines[0]
    assert not results_dir.exists(), "a run directory was made for bad input"
    if os.geteuid() == 0:
        assert _orphan_labs() <= before, "a lab was left behind"


def test_a_torn_last_line_is_read_with_a_warning_not_refused(tmp_path):
    """What a writer killed mid-line leaves is not bad input: the whole lines are shown."""
    d = _run_dir(tmp_path, lines=json.dumps(LINE) + "\n" + json.dumps(LINE)[:40])
    p = subprocess.run([sys.executable, "-m", "harness.cli", "show", d, "--format", "csv"], cwd=ROOT,
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert "torn" in p.stderr and "native" in p.stdout
