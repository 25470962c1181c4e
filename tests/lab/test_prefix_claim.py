"""A testbed prefix has 16 bits: a new testbed that draws one another testbed holds picks
again, and never builds on, nor tears down, the other's objects (lab and SSH). Labs
allocated at once take different indexes, and so different management addresses; `down`
beside an allocation leaves the lab being allocated alone, and leaves a remote testbed's
directory whose owner is another machine's."""

from __future__ import annotations

import json
import os
import pathlib
import secrets
import shutil
import socket
import threading
import time

import pytest
from flocks import flock_waiters
from test_testbed_ssh import ssh_lab  # noqa: F401 - the fixture

from conftest import needs_root
from harness.hosts.local import boot_id
from harness.testbeds import lab as labmod
from harness.testbeds import lab_state

pytestmark = [needs_root(), pytest.mark.lab]
STATE = lab_state.STATE_ROOT


def _plant(doc: dict) -> pathlib.Path:
    """A state directory under a prefix nobody holds, with `doc` (and the prefix) as its state file."""
    while True:
        d = STATE / ("ob" + secrets.token_hex(2))
        try:
            d.mkdir(mode=0o700, parents=True)
            break
        except FileExistsError:                  # another testbed's
            continue
    (d / "state.json").write_text(json.dumps({"prefix": d.name, **doc}))
    return d


@pytest.fixture
def taken():
    """A prefix whose state directory another (live: this process) testbed holds."""
    d = _plant({"kind": "remote", "pid": os.getpid(), "owner_host": socket.gethostname()})
    yield d.name
    shutil.rmtree(d, ignore_errors=True)


def _draw_first(monkeypatch, prefix: str) -> None:
    """The next 2-byte token drawn is the taken prefix's; the rest are random."""
    picks, real = [prefix[2:]], secrets.token_hex
    monkeypatch.setattr(secrets, "token_hex", lambda n=None: picks.pop() if n == 2 and picks else real(n))


def test_a_lab_draws_again_on_a_prefix_that_is_taken(taken, monkeypatch):
    _draw_first(monkeypatch, taken)
    lab = labmod.Lab.allocate()
    try:
        assert lab.prefix != taken and lab.state_dir.is_dir()
        assert (lab.state_dir.stat().st_mode & 0o777) == 0o700
    finally:
        lab.teardown()
    assert json.loads((STATE / taken / "state.json").read_text())["prefix"] == taken


def test_a_remote_testbed_draws_again_and_leaves_the_other_testbeds_objects(ssh_lab, taken, monkeypatch):
    from harness.run import scenario as S
    from harness.testbeds import registry as backends
    from harness.bed import Options
    ssh_lab.bare()
    monkeypatch.setenv("HOME", str(ssh_lab.tmp))
    h0 = ssh_lab.lab.sides[0].host
    h0.run(["ip", "link", "add", f"{taken}-br0", "type", "bridge"])     # the other testbed's bridge
    try:
        _draw_first(monkeypatch, taken)
        sc = S.build({"matrix": {"modes": ["fastdp"]},
                      "testbed": {"backend": "ssh", "inventory": ssh_lab.inventory()}})
        tb = backends.open_testbed(sc, Options())
        assert tb.prefix == taken
        try:
            tb.preflight(sc)
            tb.build(1500, None)
            assert tb.prefix != taken and all(s.bridge.startswith(tb.prefix) for s in tb.sides)
            assert (STATE / tb.prefix).stat().st_mode & 0o777 == 0o700
        finally:
            tb.teardown()
        assert h0.run(["ip", "link", "show", f"{taken}-br0"], check=False).ok, "the other testbed's bridge went"
        assert json.loads((STATE / taken / "state.json").read_text())["pid"] == os.getpid()
    finally:
        h0.run(["ip", "link", "del", f"{taken}-br0"], check=False)
    assert ssh_lab.leftovers() == []


def test_labs_allocated_at_once_take_different_indexes(monkeypatch):
    """The free index is read from the other labs' state files. Here each allocation also
    pauses 0.2 s between that read and writing its own state file, so labs allocated at
    once without the allocation lock would all read the same labs and take one index."""
    real = labmod.pidns_of

    def slow(*args):
        time.sleep(0.2)
        return real(*args)

    monkeypatch.setattr(labmod, "pidns_of", slow)
    n, start = 4, threading.Barrier(4)
    labs, errors = [], []

    def allocate():
        start.wait()
        try:
            labs.append(labmod.Lab.allocate())
        except Exception as e:  # noqa: BLE001 - reported by the assertion below
            errors.append(e)

    threads = [threading.Thread(target=allocate) for _ in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    try:
        assert errors == []
        assert len({lab.index for lab in labs}) == n, sorted(lab.index for lab in labs)
        assert len({lab.mgmt_addrs(0) for lab in labs}) == n
    finally:
        for lab in labs:
            lab.teardown()


def test_down_beside_an_allocation_never_takes_the_lab_for_a_dead_owners(monkeypatch):
    """A lab's state directory exists a moment before its state file (its owner) does. Here
    the allocation stays in that moment until `down`, run beside it, is blocked on the
    lock (or 30 s have gone): without the shared lock `down` would not wait, would see a lab
    without an owner, remove its directory and fail the allocation."""
    real, inside = labmod.pidns_of, threading.Event()

    def held(*args):
        inside.set()
        deadline = time.monotonic() + 30
        while not flock_waiters(lab_state.STATE_ROOT) and time.monotonic() < deadline:
            time.sleep(0.01)
        return real(*args)

    monkeypatch.setattr(labmod, "pidns_of", held)
    got, errors = [], []

    def allocate():
        try:
            got.append(labmod.Lab.allocate())
        except Exception as e:  # noqa: BLE001 - reported by the assertion below
            errors.append(e)

    t = threading.Thread(target=allocate)
    t.start()
    try:
        assert inside.wait(30)
        removed, _ = lab_state.down()
        t.join()
        assert errors == [] and len(got) == 1
        assert not any(got[0].prefix in r for r in removed), removed
        assert json.loads((got[0].state_dir / "state.json").read_text())["pid"] == os.getpid()
    finally:
        t.join()
        for lab in got:
            lab.teardown()


def test_down_leaves_a_remote_testbeds_directory_whose_owner_is_on_another_machine():
    """This machine as a host of a remote testbed run from elsewhere: the state directory
    names an owner whose pid means nothing here. `down` keeps it and says whose it is, told
    by the owner's kernel (boot id) where recorded, else by its host name; the same directory
    owned from this kernel by a pid that cannot exist goes."""
    dead = int(open("/proc/sys/kernel/pid_max").read()) + 1
    here, other_boot = socket.gethostname(), "00000000-0000-4000-8000-000000000000"
    owners = {"named": {"owner_host": "elsewhere.invalid"},                  # a record without a boot id
              "same-name": {"owner_host": here, "boot_id": other_boot},      # a clone with this host name
              "this-kernel": {"owner_host": here, "boot_id": boot_id()}}
    made = {}
    try:
        for what, owner in owners.items():
            made[what] = _plant({"kind": "remote", "pid": dead, "pidns": None, **owner})
        removed, kept = lab_state.down()
        assert made["named"].is_dir()
        assert f"{made['named'].name} (owned by elsewhere.invalid, which this machine cannot check)" in kept
        assert made["same-name"].is_dir() and f"{made['same-name'].name} (owned by {here}, " \
            f"which this machine cannot check)" in kept
        assert not made["this-kernel"].exists() and f"dir {made['this-kernel']}" in removed
    finally:
        for d in made.values():
            shutil.rmtree(d, ignore_errors=True)
