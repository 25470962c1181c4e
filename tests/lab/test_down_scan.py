"""`down --inventory`'s scan of a host, as root over SSH (tests/sshd.py), against what
anyone can plant in world-writable /tmp under the SSH directories' names: an owner file
that is a FIFO, a symlink to a root-only file, a huge file, and a directory that is a
symlink. The scan neither blocks, nor follows a link, nor reads more than OWNER_MAX."""

from __future__ import annotations

import json
import os
import secrets
import shutil
import time

import pytest
from sshd import ssh_world  # noqa: F401 - the fixture

from conftest import needs_root
from harness.hosts.ssh.host import SshHost
from harness.testbeds import remote_down

pytestmark = [needs_root()]


@pytest.fixture
def planted(tmp_path):
    """name → path of SSH-directory look-alikes in /tmp, removed afterwards."""
    made = {k: f"/tmp/overlaybench-ssh-{secrets.token_hex(4)}" for k in ("fifo", "link", "big", "dirlink", "plain")}
    secret = tmp_path / "secret.json"
    secret.write_text(json.dumps({"owner_host": "secret", "pid": 1}))
    secret.chmod(0o600)
    for k in ("fifo", "link", "big", "plain"):
        os.mkdir(made[k], 0o777)
    os.mkfifo(f"{made['fifo']}/owner.json")
    os.symlink(secret, f"{made['link']}/owner.json")
    with open(f"{made['big']}/owner.json", "w") as f:
        f.write('{"owner_host": "big", "pad": "' + "a" * (8 << 20) + '"}')
    os.symlink(tmp_path, made["dirlink"])
    shutil.copy(secret, tmp_path / "owner.json")
    with open(f"{made['plain']}/owner.json", "w") as f:
        json.dump({"owner_host": "plain", "pid": 2}, f)
    yield made
    for p in made.values():
        if os.path.islink(p):
            os.unlink(p)
        else:
            shutil.rmtree(p, ignore_errors=True)


def test_the_scan_does_not_block_follow_links_or_read_without_bound(ssh_world, planted):
    """(False-failure probability: nil; a blocked scan takes its 20 s timeout, a sound
    one a fraction of a second, and the bound is 10 s.)"""
    host = SshHost(ssh_world.root.settings())
    try:
        t0 = time.monotonic()
        _, dirs = remote_down._scan(host)
        took = time.monotonic() - t0
    finally:
        host.close()
    assert took < 10, f"the scan took {took:.1f} s: it blocked on the FIFO"
    assert dirs.get(planted["plain"]) == {"owner_host": "plain", "pid": 2}, dirs.get(planted["plain"])
    assert dirs.get(planted["fifo"]) == {}
    assert dirs.get(planted["link"]) == {}, "the scan followed a symlinked owner file"
    assert dirs.get(planted["big"]) == {}, "the scan read the whole of an 8 MB owner file"
    assert planted["dirlink"] not in dirs, "the scan followed a symlinked directory"
