"""Faults during a run on the real lab: a hung tool, a full disk."""

import json
import os
import pathlib
import signal
import subprocess
import sys
import time

import pytest

from conftest import needs_root
from harness.core import failpoints
from harness import results
from harness.run import scenario as S
from harness.run.runner import Runner
from harness.testbeds import lab_state
from harness.tools.iperf3 import Iperf3Tcp

pytestmark = [needs_root(), pytest.mark.lab]
ROOT = pathlib.Path(__file__).resolve().parents[2]


def _pids(netns: str, comm: str) -> list[int]:
    out = subprocess.run(["ip", "netns", "pids", netns], capture_output=True, text=True).stdout.split()
    found = []
    for pid in out:
        try:
            if open(f"/proc/{pid}/comm").read().strip() == comm:
                found.append(int(pid))
        except OSError:
            pass
    return found


def at_mid_test(monkeypatch, action) -> list:
    """Have the runner call `action` once, in its own thread, at its "mid-test" point (the
    first case's client has just been started and is not yet waited for), so what `action`
    does lands inside that case by construction. Returns what `action` returned, once done."""
    done = []
    real = failpoints.reached

    def reached(name: str) -> None:
        if name == "mid-test" and not done:
            done.append(action())
        real(name)
    monkeypatch.setattr(failpoints, "reached", reached)
    return done


def test_a_hung_server_is_a_hard_timeout_and_a_failed_row_and_the_matrix_goes_on(lab, tmp_path, monkeypatch):
    """Timing: none decides the outcome. The server is frozen by the runner's own thread
    once the client is started and before it is waited for, so the frozen server hangs that
    case and no other (the client never gets its server's answers, however long it waits);
    the upper bound on the whole run is its legitimate time (the hard timeout, 5 s of
    stopping the frozen server, the qperf case) plus 60 s, only to catch a hang: ~0."""
    # iperf3's hard timeout cut from duration + 20 s to duration + 3 s: the hung case ends
    # sooner, and no other case's limit changes (qperf's is its own tool's).
    monkeypatch.setattr(Iperf3Tcp, "timeout", lambda self, spec: spec.duration + 3)
    sc = S.build({"matrix": {"modes": ["native"], "tests": ["iperf3.tcp", "qperf.tcp_lat"], "repeats": 1,
                             "duration": 2}})
    store = results.RunStore.create(tmp_path, {"scenario": sc.to_dict()})

    def freeze_server() -> list[int]:
        stopped = _pids(lab.sides[1].host.netns, "iperf3")    # it listens: the runner waited for it
        for pid in stopped:
            os.kill(pid, signal.SIGSTOP)
        return stopped

    froze = at_mid_test(monkeypatch, freeze_server)
    t0 = time.monotonic()
    Runner(sc, lab, store).run(S.expand(sc))
    assert froze and froze[0], "the runner reached mid-test with the server running"
    stopped = froze[0]
    recs = store.records()
    iperf = [r for r in recs if r["test"] == "iperf3.tcp"]
    assert len(iperf) == 1 and iperf[0]["metric"] == "failed" and not iperf[0]["ok"], iperf
    assert "timed out" in iperf[0]["error"] or "timeout" in iperf[0]["error"], iperf[0]["error"]
    assert time.monotonic() - t0 < 2 + 3 + 5 + 2 + 60, "the hard timeout (duration + 3 s) bounded the hang"
    lat = [r for r in recs if r["test"] == "qperf.tcp_lat" and r["metric"] == "latency_us"]
    assert lat and lat[0]["ok"], recs
    for pid in stopped:                # the frozen server was killed, not left behind
        assert not os.path.exists(f"/proc/{pid}") or open(f"/proc/{pid}/stat").read().split()[2] == "Z"


@pytest.fixture
def small_disk(tmp_path):
    mnt = tmp_path / "small"
    mnt.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=96k", "obtest-results", str(mnt)], check=True)
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def test_a_full_disk_is_one_line_earlier_lines_intact_and_the_lab_removed(small_disk):
    """Timing: none; the lab judged is this run's own (its pid), not any other on the machine."""
    p = subprocess.Popen([sys.executable, "-m", "harness.cli", "run", "--modes", "native,fastdp", "--tests",
                          "iperf3.tcp", "--placements", "host-host", "--repeats", "10", "--duration", "1",
                          "--results", str(small_disk), "-q"], cwd=ROOT, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    try:
        _, err = p.communicate(timeout=300)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 2, (p.returncode, err)
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and "No space left on device" in lines[0] and "Traceback" not in err, err
    run_dir, = small_disk.iterdir()
    recs = results.read_records(run_dir)
    assert recs, "what was measured before the disk filled is kept"
    assert all(json.loads(ln) for ln in (run_dir / "measurements.jsonl").read_text().splitlines())
    mine = [pfx for pfx, i in lab_state.leftovers().items() if i["pid"] == p.pid]
    assert mine == []
