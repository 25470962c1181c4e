"""The Prometheus export reaches a real Pushgateway (Debian's prometheus-pushgateway), started
here on 127.0.0.1 on a free port, without root, and stopped at the end (about 0.05 s).

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
    proc = subprocess.Popen([GATEWAY, f"--web.listen-address=127.0.0.1:{port}"], stdout=log,
                            stderr=subprocess.STDOUT)
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


def _samples(text: str) -> dict[tuple, float]:
    from prometheus_client.parser import text_string_to_metric_families
    return {(s.name, tuple(sorted((k, v) for k, v in s.labels.items() if k not in ("job", "instance", "run")))):
            s.value for f in text_string_to_metric_families(text) if f.name.startswith("overlaybench_")
            for s in f.samples}


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
