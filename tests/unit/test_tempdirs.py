"""This machine's temporary directories of a run: owned, and removed by `down` once the
owner is gone (a remote testbed's artifacts and a Docker tunnel's socket live there)."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
import tempfile

from harness.hosts import local
from harness.hosts.local import OWNER_FILE, owned_tempdir, owned_tempdirs, owner_alive, pidns_of, remove_stale_tempdirs

MAKE_ONE = "from harness.hosts.local import owned_tempdir; print(owned_tempdir('test'))"


def test_a_dead_owners_directory_goes_and_a_live_ones_stays(tmp_path, monkeypatch):
    # a /tmp of the test's own: a forced removal here must not take anyone else's directories
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path), TMPDIR=str(tmp_path))
    dead = subprocess.run([sys.executable, "-c", MAKE_ONE], capture_output=True, text=True, check=True,
                          env=env).stdout.strip()
    live = owned_tempdir("test")
    (live / "sock").write_text("")
    foreign = tempfile.mkdtemp(prefix="overlaybench-test-")            # no owner file: not known to be ours
    outside = tmp_path / "target"
    outside.mkdir()
    (outside / OWNER_FILE).write_text(json.dumps({"owner_host": os.uname().nodename, "pid": 1 << 30}))
    link = tempfile.mktemp(prefix="overlaybench-test-")
    os.symlink(outside, link)                                         # a link is never followed
    fifo = pathlib.Path(tempfile.mkdtemp(prefix="overlaybench-test-"))
    os.mkfifo(fifo / OWNER_FILE)                                      # nor a FIFO waited on
    try:
        assert json.loads((live / OWNER_FILE).read_text())["pid"] == os.getpid()
        found = owned_tempdirs()
        assert found[live] == (os.getpid(), pidns_of()) and str(dead) in map(str, found)
        removed = remove_stale_tempdirs()
        assert f"temporary directory {dead}" in removed
        assert not os.path.exists(dead) and live.is_dir() and os.path.isdir(foreign) and outside.is_dir()
        assert fifo.is_dir() and fifo not in found
        assert f"temporary directory {live}" in remove_stale_tempdirs(force=True) and not live.exists()
    finally:
        os.unlink(link)
        os.rmdir(foreign)
        subprocess.run(["rm", "-rf", str(fifo)])
        subprocess.run(["rm", "-rf", str(live), dead])


# ------------------------------------------------------------------ owners in other pid namespaces
def test_an_owner_of_this_pid_namespace_is_looked_up_by_pid():
    assert owner_alive(os.getpid(), pidns_of()) and owner_alive(os.getpid())
    assert not owner_alive(1 << 30, pidns_of()) and not owner_alive(None)


def test_an_owner_in_another_pid_namespace_seen_from_inside_one_counts_as_alive(monkeypatch):
    """A session in a private pid namespace cannot look up a pid of the machine's: whatever
    that pid is here, the owner counts as alive (the soak's lab is not removed under it)."""
    monkeypatch.setattr(local, "pidns_of", lambda pid="self": 4026532999 if pid == "self" else None)
    assert owner_alive(1 << 30, local.INIT_PIDNS)


def test_from_the_initial_namespace_an_owner_lives_while_its_namespace_has_processes(monkeypatch):
    spaces = {"self": local.INIT_PIDNS, "41": 4026532999}
    monkeypatch.setattr(local, "pidns_of", lambda pid="self": spaces.get(str(pid), local.INIT_PIDNS))
    monkeypatch.setattr(local, "_pids", lambda: ["1", "41"])
    assert owner_alive(1 << 30, 4026532999)             # pid 41 is in it
    assert not owner_alive(1 << 30, 4026532888)         # nobody is: the namespace is gone
