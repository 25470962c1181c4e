"""The Prometheus export reaches a real Pushgateway (Debian's prometheus-pushgateway), started
here on 127.0.0.1 on a free port, without root, keeping what is pushed in memory only, and
stopped at the end (about 0.05 s).

The gateway is waited for by polling its /-/ready endpoint until it answers (20 s deadline
against milliseconds). The port is one the kernel just handed out and released; another
process taking it in between would fail the start, not the check, and nothing on this
machine binds ports at that rate.
"""

from __future__ import annotations

import pathlib
import shutil
import socket
import subprocess
import time
import urllib.error
import urllib.request

import pytest

from harness.export import export
from test_export_formats import copy_run

DATA = pathlib.Path(__file__).resolve().parents[1] / "data" / "runs" / "quick"
GATEWAY = shutil.which("prometheus-pushgateway")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def gateway(tmp_path):
    port = _free_port()
    log = open(tmp_path / "pushgateway.log", "w")
    # In memory only: Debian's build persists to /var/lib/prometheus/pushgateway.data by
    # default, which would carry one test's pushes into the next (and is not ours to write).
    proc = subprocess.Popen([GATEWAY, f"--web.listen-address=127.0.0.1:{port}", "--persistence.file="],
                            stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 20
    try:
        while True:
            assert proc.poll() is None, (tmp_path / "pushgateway.log").read_text()
            try:
                with urllib.request.urlopen(f"{url}/-/ready", timeout=2) as r:
                    if r.status == 200:
                        break
            except (urllib.error.URLError, ConnectionError):
                assert time.monotonic() < deadline, "pushgateway never became ready"
                time.sleep(0.01)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=20)
        log.close()


def _samples(text: str, keep_run: bool = False) -> dict[tuple, float]:
    from prometheus_client.parser import text_string_to_metric_families
    drop = ("job", "instance") if keep_run else ("job", "instance", "run")
    return {(s.name, tuple(sorted((k, v) for k, v in s.labels.items() if k not in drop))):
            s.value for f in text_string_to_metric_families(text) if f.name.startswith("overlaybench_")
            for s in f.samples}


def _push(gateway: str, run_id: str, body: str) -> None:
    req = urllib.request.Request(f"{gateway}/metrics/job/overlaybench/run/{run_id}", data=body.encode(),
                                 method="PUT", headers={"Content-Type": "text/plain; version=0.0.4"})
    with urllib.request.urlopen(req, timeout=10) as r:
        assert r.status == 200


@pytest.mark.skipif(GATEWAY is None, reason="apt-get install -y prometheus-pushgateway")
def test_the_prometheus_export_is_pushed_and_read_back_whole(gateway):
    body = export(DATA, "prometheus")
    req = urllib.request.Request(f"{gateway}/metrics/job/overlaybench/run/20261128T001508Z-855b",
                                 data=body.encode(), method="PUT",
                                 headers={"Content-Type": "text/plain; version=0.0.4"})
    with urllib.request.urlopen(req, timeout=10) as r:
        assert r.status == 200
    with urllib.request.urlopen(f"{gateway}/metrics", timeout=10) as r:
        back = r.read().decode()
    sent, got = _samples(body), _samples(back)
    assert len(sent) == 168
    assert got == sent
    assert 'overlaybench_throughput_bytes_per_second{datapath="sleeve",instance="",job="overlaybench"' in back


@pytest.mark.skipif(GATEWAY is None, reason="apt-get install -y prometheus-pushgateway")
def test_two_runs_pushed_are_both_read_back_each_under_its_run(gateway, tmp_path):
    """The same figures from two runs (the recorded run and a copy under another id): every
    sample carries its run id as `run`, so each run's series stay its own, and the gateway
    hands both back whole."""
    other_id = "20261129T090000Z-0b0b"
    bodies = {"20261128T001508Z-855b": export(DATA, "prometheus"),
              other_id: export(copy_run(DATA, tmp_path, other_id), "prometheus")}
    sent = {run_id: _samples(body, keep_run=True) for run_id, body in bodies.items()}
    assert all(dict(labels)["run"] == run_id for run_id, s in sent.items() for _, labels in s)
    assert set(sent[other_id]).isdisjoint(sent["20261128T001508Z-855b"])
    for run_id, body in bodies.items():
        _push(gateway, run_id, body)
    with urllib.request.urlopen(f"{gateway}/metrics", timeout=10) as r:
        back = _samples(r.read().decode(), keep_run=True)
    assert back == {**sent["20261128T001508Z-855b"], **sent[other_id]}
    assert len(back) == 2 * 168
