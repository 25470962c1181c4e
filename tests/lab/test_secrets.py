"""Keys never leave the hosts' key files: not in logs, run.json, raw/, reports or the
terminal, in any form (raw bytes, hex, base64, Python's escapes); the key files are 0600
from the moment they exist, in 0700 directories, and gone from hosts and orchestrator
when a deployment ends. On the lab and over SSH, for the sleeve's key and WireGuard's."""

import base64
import logging
import os
import stat
import sys

import paramiko
import pytest
from sshd import ssh_world  # noqa: F401 - the fixture
from test_testbed_ssh import ssh_lab  # noqa: F401 - the fixture

from conftest import needs_root
from harness.hosts import LocalHost
from harness.hosts.ssh.host import SshHost
from harness.modes import sleeve as sleeve_mod, wireguard as wg_mod
from harness.report import render
from harness import results
from harness.run import scenario as S
from harness.run.runner import Runner

pytestmark = [needs_root(), pytest.mark.lab]
# 32 bytes nobody else would choose, most of them not printable
KEY = bytes([0x00, 0xff, 0x1b, 0x7f, 0x80, 0x0a, 0x0d, 0x09]) + bytes(range(0xe0, 0xf8))


def _forms(key: bytes) -> list[bytes]:
    b64 = base64.b64encode(key)
    return [key, key.hex().encode(), key.hex().upper().encode(), b64, base64.urlsafe_b64encode(key), b64.rstrip(b"="),
            repr(key)[2:-1].encode()]


def _assert_nowhere(key: bytes, blobs: dict[str, bytes]) -> None:
    assert len(blobs) > 5
    for where, blob in blobs.items():
        for form in _forms(key):
            assert form not in blob, f"the key ({form[:8]!r}…) is in {where}"


class Seen:
    """Wraps a mode's teardown: what its key files hold and their modes, and the modes of
    the directories above them up to the testbed's, while the deployment still stands."""

    def __init__(self, monkeypatch, mode_cls, key_path):
        self.keys: list[bytes] = []
        self.modes: dict[str, int] = {}
        real = mode_cls.teardown

        def teardown(mode, testbed, dp):
            for s in testbed.sides:
                path = key_path(s)
                self.keys.append(base64.b64decode(s.host.run(["base64", "-w0", path]).stdout))
                top = os.path.dirname(os.path.dirname(s.workdir))        # /run/overlaybench
                d = path
                while d != top:
                    self.modes[f"{s.name}:{d}"] = int(s.host.run(["stat", "-c", "%a", d]).stdout, 8)
                    d = os.path.dirname(d)
            return real(mode, testbed, dp)
        monkeypatch.setattr(mode_cls, "teardown", teardown)

    def check(self) -> None:
        assert self.keys and all(len(k) >= 32 for k in self.keys)
        files = {p: m for p, m in self.modes.items() if p.endswith(".key")}
        assert files and all(m == 0o600 for m in files.values()), files
        dirs = {p: m for p, m in self.modes.items() if p not in files}
        assert dirs and all(m == 0o700 for m in dirs.values()), dirs


def _run_and_search(tb, tmp_path, monkeypatch, caplog, capsys) -> None:
    monkeypatch.setattr(sleeve_mod.secrets, "token_bytes", lambda n: KEY[:n])
    seen = [Seen(monkeypatch, sleeve_mod.SleeveCrypto, sleeve_mod.Sleeve.key_path),
            Seen(monkeypatch, wg_mod.WireGuardGo, wg_mod.WireGuard.key_path)]
    caplog.set_level(logging.DEBUG)
    sc = S.build({"matrix": {"modes": ["sleeve-crypto", "wireguard-go"], "tests": ["iperf3.tcp", "ping.flood"],
                             "repeats": 1, "duration": 1, "placements": ["container-container"]}})
    store = results.RunStore.create(tmp_path / "results", {"scenario": sc.to_dict()})
    Runner(sc, tb, store).run(S.expand(sc))
    recs = store.records()
    assert recs and all(r["ok"] for r in recs), [r for r in recs if not r["ok"]]
    report = render.render([store.path], tmp_path / "report.html")
    for s in seen:
        s.check()
    assert seen[0].keys[0] == KEY
    blobs = {"log": caplog.text.encode("utf-8", "surrogateescape"),
             "terminal": "".join(capsys.readouterr()).encode("utf-8", "surrogateescape")}
    blobs["log (latin-1)"] = caplog.text.encode("latin-1", "replace")
    for f in [*store.path.rglob("*"), report]:
        if f.is_file():
            blobs[str(f)] = f.read_bytes()
    for key in {*seen[0].keys, *seen[1].keys}:
        _assert_nowhere(key, blobs)
    # The deployment is over: no key file on either host.
    for s in tb.sides:
        for path in (sleeve_mod.Sleeve.key_path(s), wg_mod.WireGuard.key_path(s)):
            assert s.host.run(["test", "-e", path], check=False).returncode != 0, path


def test_the_keys_appear_nowhere_and_their_files_are_private_on_the_lab(lab, tmp_path, monkeypatch, caplog, capsys):
    _run_and_search(lab, tmp_path, monkeypatch, caplog, capsys)
    left = [p for p in lab.state_dir.rglob("*") if "key" in p.name]
    assert left == [], left


def test_the_keys_appear_nowhere_and_their_files_are_private_over_ssh(ssh_lab, tmp_path, monkeypatch, caplog,
                                                                     capsys):
    from harness.testbeds import registry as backends
    from harness.bed import Options
    ssh_lab.bare()
    monkeypatch.setenv("HOME", str(ssh_lab.tmp))
    sc = S.build({"matrix": {"modes": ["sleeve-crypto"]},
                  "testbed": {"backend": "ssh", "inventory": ssh_lab.inventory()}})
    tb = backends.open_testbed(sc, Options())
    try:
        tb.preflight(sc)
        tb.build(1500, None)
        _run_and_search(tb, tmp_path, monkeypatch, caplog, capsys)
    finally:
        tb.teardown()
    assert ssh_lab.leftovers() == []


# ------------------------------------------------------------------ put, moment by moment

class Exposed:
    """Every file in the watched directories that group or others could open, at each
    moment the watcher is asked to look."""

    def __init__(self, *dirs: str):
        self.dirs, self.found = list(dirs), []

    def look(self, _why=None, _args=None) -> None:
        for d in self.dirs:
            for name in os.listdir(d) if os.path.isdir(d) else []:
                st = os.lstat(os.path.join(d, name))
                if stat.S_ISREG(st.st_mode) and name != "owner.json" and st.st_mode & 0o077:
                    self.found.append(f"{name} {oct(st.st_mode & 0o777)}")


WATCHING: list[Exposed] = []


def _audit(event, args):
    if WATCHING and event in ("open", "os.chmod", "os.rename", "shutil.copyfile", "os.remove"):
        WATCHING[-1].look()


sys.addaudithook(_audit)


def _key_file(tmp_path) -> str:
    src = tmp_path / "key"
    src.write_bytes(KEY)
    return str(src)


def test_localhost_put_never_lets_a_key_file_be_readable_by_others(tmp_path):
    """Python's audit events (every open, chmod, rename) look at the destination directory
    while put runs: no moment shows the key file with group or other bits."""
    old = os.umask(0o022)
    dest = tmp_path / "dest"
    dest.mkdir()
    try:
        WATCHING.append(Exposed(str(dest)))
        LocalHost().put(_key_file(tmp_path), str(dest / "k.key"), 0o600)
    finally:
        watched = WATCHING.pop()
        os.umask(old)
    assert watched.found == []
    assert (dest / "k.key").read_bytes() == KEY and (dest / "k.key").stat().st_mode & 0o777 == 0o600


def test_localhost_put_replaces_a_planted_symlink_instead_of_writing_through_it(tmp_path):
    dest, target = tmp_path / "k.key", tmp_path / "theirs"
    target.write_text("theirs")
    target.chmod(0o644)
    dest.symlink_to(target)
    LocalHost().put(_key_file(tmp_path), str(dest), 0o600)
    assert target.read_bytes() == b"theirs" and target.stat().st_mode & 0o777 == 0o644
    assert not dest.is_symlink() and dest.read_bytes() == KEY


@pytest.mark.parametrize("who", ["root", "sudo"])
def test_sshhost_put_never_lets_a_key_file_be_readable_by_others(ssh_world, tmp_path, monkeypatch, who):
    """Before every SFTP request the client sends, the destination and upload directories
    (this machine's: the hosts are namespaces of it) are looked at: the uploaded file is
    0600 from the OPEN that made it, and so is the key file in the end."""
    host = SshHost(getattr(ssh_world, who).settings())
    dest = tmp_path / "dest"
    dest.mkdir()
    tmp_path.chmod(0o755)
    dest.chmod(0o777 if who == "root" else 0o755)
    watched = Exposed(str(dest), host._upload_dir)
    for name in ("_request", "_async_request"):
        real = getattr(paramiko.SFTPClient, name)
        monkeypatch.setattr(paramiko.SFTPClient, name,
                            lambda self, *a, _real=real: (watched.look(), _real(self, *a))[1])
    try:
        host.put(_key_file(tmp_path), str(dest / "k.key"), 0o600)
        assert host.run(["stat", "-c", "%a", str(dest / "k.key")]).stdout.strip() == "600"
    finally:
        host.close()
    assert watched.found == []
    assert (dest / "k.key").read_bytes() == KEY
