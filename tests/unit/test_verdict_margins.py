"""benchmarks/verdict_margins.py's floors part on a kernel that lacks a mode: the default list
leaves that mode out and says so; a list the user named, or any other harness error, ends
in one line and exit 2. The runs are stand-ins: what is tested is the script's handling."""

from __future__ import annotations

import importlib.util
import pathlib
import sys

from harness.core.errors import HarnessError, UnsupportedError

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _load(monkeypatch):
    """The script as a module; the paths it puts before sys.path are gone after the test."""
    monkeypatch.setattr(sys, "path", list(sys.path))
    spec = importlib.util.spec_from_file_location("verdict_margins", ROOT / "benchmarks" / "verdict_margins.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _lacking(vm, monkeypatch, lacking: str, asked: list):
    """harness_run refuses any list with `lacking` in it, as session.run's mode check does,
    and otherwise stands for a run whose every mode measured 1.0, 1.1 and 1.2 Gbit/s."""
    def run(a, modes, placements, extra=()):
        asked.append(list(modes))
        if lacking in modes:
            raise UnsupportedError(f"mode {lacking}: kernel WireGuard unsupported here on h0 (Error: Unknown device type.)")
        return modes
    monkeypatch.setattr(vm, "harness_run", run)
    monkeypatch.setattr(vm, "tput", lambda modes: {(m, "container-container", r): 1e9 + r * 1e8
                                                      for m in modes for r in range(3)})


def test_the_default_floor_modes_leave_out_what_the_kernel_lacks(monkeypatch, capsys):
    vm = _load(monkeypatch)
    asked: list = []
    _lacking(vm, monkeypatch, "wireguard", asked)
    assert vm.main(["--only", "floors", "--hogs", "0"]) == 0
    out = capsys.readouterr().out
    assert "floors: mode wireguard: kernel WireGuard unsupported here on h0 (Error: Unknown device type.): left out" in out
    assert asked == [vm.FLOOR_MODES, [m for m in vm.FLOOR_MODES if m != "wireguard"]]
    assert "wireguard-go (Mbit/s)" in out and "  wireguard (Mbit/s)" not in out
    assert "wireguard" in vm.FLOOR_MODES              # the module's own list is left as it was


def test_named_modes_the_kernel_lacks_end_in_one_line_and_exit_2(monkeypatch, capsys):
    vm = _load(monkeypatch)
    _lacking(vm, monkeypatch, "wireguard", [])
    assert vm.main(["--only", "floors", "--hogs", "0", "--modes", "fastdp,wireguard"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["verdict_margins: --only floors: mode wireguard: kernel WireGuard unsupported here on h0 "
                   "(Error: Unknown device type.)"]


def test_another_harness_error_ends_in_one_line_and_exit_2(monkeypatch, capsys):
    vm = _load(monkeypatch)

    def run(a, modes, placements, extra=()):
        raise HarnessError("h0: iperf3 not found")
    monkeypatch.setattr(vm, "harness_run", run)
    assert vm.main(["--only", "compare", "--hogs", "0"]) == 2
    assert capsys.readouterr().err.strip() == "verdict_margins: --only compare: h0: iperf3 not found"
