"""Faults during a run on the real lab: a hung tool, a full disk."""

import json
import os
import pathlib
import signal
import subprocess
import sys
import threading
import time

import pytest

from conftest import needs_root
from harness import lab as labmod, results, scenario as S
from harness.runner import Runner

pytestmark = [needs_root(), pytest.mark.lab]
ROOT = pathlib.Path(__file__).resolve().parent.parent


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


def test_a_hung_server_is_a_hard_timeout_and_a_failed_row_and_the_matrix_goes_on(lab, tmp_path):
    sc = S.build({"matrix": {"modes": ["native"], "tests": ["iperf3.tcp", "qperf.tcp_lat"], "repeats": 1,
                             "duration": 2}})
    store = results.RunStore.create(tmp_path, {"scenario": sc.to_dict()})
    stopped = []

    def freeze_server():
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if _pids(lab.sides[0].host.netns, "iperf3"):      # the client runs: freeze the server
                time.sleep(0.5)
                for pid in _pids(lab.sides[1].host.netns, "iperf3"):
                    os.kill(pid, signal.SIGSTOP)
                    stopped.append(pid)
                return
            time.sleep(0.05)

    t = threading.Thread(target=freeze_server)
    t.start()
    t0 = time.monotonic()
    Runner(sc, lab, store).run(S.expand(sc))
    t.join()
    assert stopped
    recs = store.records()
    iperf = [r for r in recs if r["test"] == "iperf3.tcp"]
    assert len(iperf) == 1 and iperf[0]["metric"] == "failed" and not iperf[0]["ok"], iperf
    assert "timed out" in iperf[0]["error"] or "timeout" in iperf[0]["error"], iperf[0]["error"]
    assert time.monotonic() - t0 < 2 + 20 + 30, "the hard timeout (duration + 20 s) bounded the hang"
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
    p = subprocess.run([sys.executable, "-m", "harness.cli", "run", "--modes", "native,fastdp", "--tests",
                        "iperf3.tcp", "--placements", "host-host", "--repeats", "10", "--duration", "1",
                        "--results", str(small_disk), "-q"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert p.returncode == 2, (p.returncode, p.stderr)
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "No space left on device" in lines[0] and "Traceback" not in p.stderr, p.stderr
    run_dir, = small_disk.iterdir()
    recs = results.read_records(run_dir)
    assert recs, "what was measured before the disk filled is kept"
    assert all(json.loads(ln) for ln in (run_dir / "measurements.jsonl").read_text().splitlines())
    mine = [pfx for pfx, i in labmod.leftovers().items() if i["pid"] == p.pid or not i["alive"]]
    assert mine == []
