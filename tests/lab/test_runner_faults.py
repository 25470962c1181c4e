"""Faults during a run on the real lab: the data path's daemon dies mid-test."""

import os
import signal
import subprocess

import pytest

from conftest import needs_root
from harness.core import failpoints
from harness import results
from harness.run import scenario as S
from harness.run.runner import Runner

pytestmark = [needs_root(), pytest.mark.lab]


def _pids(netns: str, prefix: str) -> list[int]:
    out = subprocess.run(["ip", "netns", "pids", netns], capture_output=True, text=True).stdout.split()
    pids = []
    for pid in out:
        try:
            if open(f"/proc/{pid}/comm").read().startswith(prefix):
                pids.append(int(pid))
        except OSError:
            pass
    return pids


def test_sleeve_killed_mid_test_fails_that_case_with_the_signal_and_the_next_deploys_clean(lab, tmp_path,
                                                                                          monkeypatch):
    """Timing: none decides the outcome. h1's sleeve is killed by the runner's own thread at
    its "mid-test" point (the iperf3 client has just been started and is not yet waited
    for), so the death lands inside that case by construction: ~0."""
    sc = S.build({"matrix": {"modes": ["sleeve"], "tests": ["iperf3.tcp", "qperf.tcp_lat"], "repeats": 1,
                             "duration": 2, "placements": ["container-container"]}})
    store = results.RunStore.create(tmp_path, {"scenario": sc.to_dict()})
    killed = []
    real = failpoints.reached

    def reached(name: str) -> None:
        if name == "mid-test" and not killed:      # the first case's client is started
            killed.extend(_pids(lab.sides[1].host.netns, "sleeve"))
            for pid in killed:
                os.kill(pid, signal.SIGKILL)
        real(name)

    monkeypatch.setattr(failpoints, "reached", reached)
    Runner(sc, lab, store).run(S.expand(sc))
    assert killed
    recs = store.records()
    iperf = [r for r in recs if r["test"] == "iperf3.tcp"]
    assert len(iperf) == 1 and iperf[0]["ok"] is False, iperf
    assert iperf[0]["error"].startswith("sleeve on h1 died (signal 9, SIGKILL)"), iperf[0]["error"]
    lat = [r for r in recs if r["test"] == "qperf.tcp_lat" and r["metric"] == "latency_us"]
    assert lat and lat[0]["ok"] is True, recs
    deployments = store.read_meta()["datapaths"]
    assert len(deployments) == 2, "the case after the death runs on a fresh deployment"
    # Nothing of either deployment is left: no sleeve process, no sv0 device.
    assert not _pids(lab.sides[0].host.netns, "sleeve") and not _pids(lab.sides[1].host.netns, "sleeve")
    for s in lab.sides:
        assert s.host.run(["ip", "link", "show", "sv0"], check=False).returncode != 0
