"""The session's leftover check (conftest.py `nothing_left_behind`) sees what it must.

The check itself runs once, after the last test of every session, in any order; these
tests prove it would notice a process in a namespace whose lab was deleted under it, a
lab whose owner is this process, and a testbed's nftables table left in a namespace.
"""

import os
import pathlib
import subprocess
import time

from conftest import leftovers_now, needs_root, stray_processes, stray_tables
from harness.testbeds.lab import Lab


def _wait_for_exec(pid: int, comm: str, deadline_s: float = 30.0) -> None:
    """Until `ip netns exec` has entered the namespace and become `comm` (the check looks
    for the tool by name). Polls a condition, not a guess at a delay: 30 s is thousands
    of times what an exec takes, so only a process that never becomes the tool fails."""
    end = time.monotonic() + deadline_s
    while pathlib.Path(f"/proc/{pid}/comm").read_text().strip() != comm:
        assert time.monotonic() < end, f"pid {pid} never became {comm}"
        time.sleep(0.01)


@needs_root()
def test_the_check_sees_a_process_in_a_deleted_lab_namespace():
    lab = Lab.create()
    proc = None
    try:
        proc = lab.sides[0].host.start(["iperf3", "-s", "-p", "5299"])
        _wait_for_exec(proc.pid, "iperf3")
        subprocess.run(["ip", "netns", "del", lab.sides[0].host.netns], check=True)
        assert f"iperf3[{proc.pid}] in a deleted namespace" in stray_processes()
    finally:
        if proc:
            proc.stop()
        lab.teardown()
    assert stray_processes() == []


@needs_root()
def test_the_check_sees_a_lab_this_process_still_owns():
    lab = Lab.create()
    try:
        found = leftovers_now()
        assert any(lab.prefix in line for line in found), found
    finally:
        lab.teardown()
    assert not any(lab.prefix in line for line in leftovers_now())


@needs_root()
def test_the_check_sees_a_testbeds_table_left_in_a_namespace():
    ns = "obtb" + os.urandom(3).hex()
    subprocess.run(["ip", "netns", "add", ns], check=True)
    try:
        subprocess.run(["ip", "netns", "exec", ns, "nft", "add", "table", "inet", "ob0bad-h1"], check=True)
        assert f"nft table inet ob0bad-h1 in {ns}" in stray_tables()
    finally:
        subprocess.run(["ip", "netns", "del", ns], check=True)
    assert not [t for t in stray_tables() if ns in t]
