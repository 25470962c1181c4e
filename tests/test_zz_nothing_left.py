"""Runs last (file order): every test before it cleaned up after itself."""

import os

from conftest import needs_root, stray_processes
from harness.lab import leftovers


@needs_root()
def test_no_lab_namespace_link_or_process_is_left():
    labs = {p: i for p, i in leftovers().items() if not i["alive"] or i["pid"] == os.getpid()}
    assert labs == {}
    assert stray_processes() == []


@needs_root()
def test_the_check_sees_a_process_in_a_deleted_lab_namespace():
    from harness.lab import Lab
    lab = Lab.create()
    proc = None
    try:
        proc = lab.sides[0].host.start(["iperf3", "-s", "-p", "5299"])
        import subprocess, time
        time.sleep(0.3)
        subprocess.run(["ip", "netns", "del", lab.sides[0].host.netns], check=True)
        assert any(f"iperf3[{proc.pid}] in a deleted namespace" == s for s in stray_processes())
    finally:
        if proc:
            proc.stop()
        lab.teardown()
    assert stray_processes() == []
