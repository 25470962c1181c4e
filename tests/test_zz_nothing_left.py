"""Runs last (file order): every test before it cleaned up after itself."""

import json
import os
import pathlib

from conftest import needs_root, stray_processes, stray_tables
from harness.lab import leftovers, pid_alive


@needs_root()
def test_no_lab_namespace_link_or_process_is_left():
    labs = {p: i for p, i in leftovers().items() if not i["alive"] or i["pid"] == os.getpid()}
    assert labs == {}
    assert stray_processes() == []
    assert stray_tables() == []


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


@needs_root()
def test_the_check_sees_a_testbeds_table_left_in_a_namespace():
    import subprocess
    ns = "obtb" + os.urandom(3).hex()
    subprocess.run(["ip", "netns", "add", ns], check=True)
    try:
        subprocess.run(["ip", "netns", "exec", ns, "nft", "add", "table", "inet", "ob0bad-h1"], check=True)
        assert f"nft table inet ob0bad-h1 in {ns}" in stray_tables()
    finally:
        subprocess.run(["ip", "netns", "del", ns], check=True)
    assert not [t for t in stray_tables() if ns in t]


def _owner_alive(prefix: str) -> bool:
    """A testbed (lab or remote) whose owning process lives: a run beside the tests."""
    try:
        pid = json.loads((pathlib.Path("/run/overlaybench") / prefix / "state.json").read_text()).get("pid")
    except (OSError, ValueError):
        return False
    return isinstance(pid, int) and pid > 0 and pid != os.getpid() and pid_alive(pid)


def test_no_overlaybench_container_is_left():
    from harness.docker_containers import PREFIX_LABEL, connect
    from harness.errors import HarnessError
    from harness.hosts import LocalHost
    try:
        client, _ = connect(LocalHost("local"))
    except HarnessError:
        return                  # no dockerd answers: no container of anyone's is running
    try:
        found = client.containers.list(all=True, filters={"label": PREFIX_LABEL})
        left = [f"{c.name} ({c.status})" for c in found if not _owner_alive(c.labels.get(PREFIX_LABEL, ""))]
    finally:
        client.close()
    assert left == []
