"""A real OpenSSH server in a network namespace, for tests of the SSH transport and of testbeds.

Building blocks (plain functions, usable from any fixture):

    keygen(path)                          an ed25519 key pair made by ssh-keygen
    ensure_user(name, sudo)               a local account for key logins, with or without
                                          passwordless sudo (made if missing, kept afterwards)
    start_sshd(netns, address, workdir, authorized)
                                          Debian's /usr/sbin/sshd inside `netns`, listening on
                                          address:port, with its own host key and config
    SshdNamespace.create(...)             a namespace of its own, joined to the root namespace
                                          by a veth with a /29 from 198.19.200.0/24, running sshd

and session fixtures built on them: `ssh_world` (two namespaces: one reached as root, one
as the sudo user `obssh`, plus the sudo-less user `obnosudo` on the second). Everything a
fixture makes carries the prefix "obssh" + 4 hex digits and is removed on every path
(success, failure, Ctrl-C); a session killed outright is cleaned by the next one, which
removes the namespaces of owners that are gone (state in /run/overlaybench-sshd/).
The accounts stay: they are machine set-up, like an installed package, and two test
sessions may use them at once.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import ipaddress
import json
import os
import pathlib
import re
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import time

import pytest

SSHD = "/usr/sbin/sshd"
NET = ipaddress.ip_network("198.19.200.0/24")   # inside 198.18.0.0/15, apart from the labs' ranges
STATE = pathlib.Path("/run/overlaybench-sshd")
PREFIX_RE = re.compile(r"^obssh[0-9a-f]{4}$")
NS_RE = re.compile(r"^(obssh[0-9a-f]{4})-[0-9]$")
SUDO_USER = "obssh"
PLAIN_USER = "obnosudo"


def _run(argv: list[str], check: bool = True, **kw) -> subprocess.CompletedProcess:
    p = subprocess.run(argv, capture_output=True, text=True, **kw)
    if check and p.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)}: exit {p.returncode}: {p.stderr.strip()}")
    return p


def require() -> None:
    """Skip without root (like every namespace test); fail, saying what to install, when a
    tool is missing: `make test` installs them, so a missing one is a broken set-up."""
    if os.geteuid() != 0:
        pytest.skip("needs root for network namespaces and sshd")
    missing = [t for t in (SSHD, "ssh-keygen", "sudo", "visudo", "useradd", "ip") if not shutil.which(t)]
    if missing:
        pytest.fail(f"missing {', '.join(missing)}: apt-get install -y openssh-server openssh-client sudo")


# keys and accounts -------------------------------------------------------------------

def keygen(path: str | os.PathLike) -> str:
    """An ed25519 key pair at path (private) and path.pub; returns the private key's path."""
    path = str(path)
    _run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "overlaybench-test", "-f", path])
    return path


def public_key(path: str) -> str:
    return pathlib.Path(path + ".pub").read_text().strip()


def ensure_user(name: str, sudo: bool) -> None:
    """A local account that can log in with a key (password '*': no password, not locked),
    with passwordless sudo for everything or none at all."""
    try:
        _run(["id", "-u", name])
    except RuntimeError:
        p = _run(["useradd", "-m", "-s", "/bin/sh", "-p", "*", name], check=False)
        if p.returncode not in (0, 9):  # 9: made meanwhile by another session
            raise RuntimeError(f"useradd {name}: {p.stderr.strip()}")
    shadow = _run(["getent", "shadow", name]).stdout.split(":")
    if len(shadow) > 1 and shadow[1].startswith("!"):
        _run(["usermod", "-p", "*", name])  # sshd refuses locked accounts without PAM
    rule = pathlib.Path(f"/etc/sudoers.d/overlaybench-{name}")
    if sudo:
        text = f"{name} ALL=(ALL:ALL) NOPASSWD: ALL\n"
        if not rule.exists() or rule.read_text() != text:
            tmp = rule.with_name(f".{rule.name}.{os.getpid()}")
            tmp.write_text(text)
            os.chmod(tmp, 0o440)
            _run(["visudo", "-cqf", str(tmp)])
            os.replace(tmp, rule)
    elif rule.exists():
        rule.unlink()


# sshd --------------------------------------------------------------------------------

@dataclasses.dataclass
class Sshd:
    """One running sshd: where it listens and the host key it presents."""

    netns: str
    address: str
    port: int
    workdir: pathlib.Path
    host_key: str
    proc: subprocess.Popen

    @property
    def pid(self) -> int:
        return self.proc.pid

    def known_hosts_line(self, key_file: str | None = None) -> str:
        """A known_hosts line for this server (with another key's public half if given)."""
        name = self.address if self.port == 22 else f"[{self.address}]:{self.port}"
        return f"{name} {public_key(key_file or self.host_key)}\n"

    def log(self) -> str:
        try:
            return (self.workdir / "sshd.log").read_text()
        except OSError:
            return ""

    def stop(self) -> None:
        """The listener and every connection it forked."""
        for pid in [*descendants(self.pid), self.pid]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(5)


def start_sshd(netns: str, address: str, workdir: str | os.PathLike, authorized: dict[str, list[str]],
               port: int = 22) -> Sshd:
    """Debian's sshd inside `netns` on address:port, its host key, config and logs in workdir;
    `authorized` maps each user who may log in to their public keys."""
    work = pathlib.Path(workdir)
    (work / "auth").mkdir(parents=True, exist_ok=True)
    os.makedirs("/run/sshd", mode=0o755, exist_ok=True)   # sshd's privilege-separation directory
    host_key = keygen(work / "host_ed25519")
    for user, keys in authorized.items():
        (work / "auth" / f"{user}.keys").write_text("".join(k.strip() + "\n" for k in keys))
    config = work / "sshd_config"
    config.write_text("\n".join([
        f"ListenAddress {address}:{port}", f"HostKey {host_key}", f"PidFile {work}/sshd.pid",
        f"AuthorizedKeysFile {work}/auth/%u.keys",
        # The key files live under /tmp (world-writable), which StrictModes would refuse.
        "StrictModes no", "UsePAM no", "PasswordAuthentication no", "KbdInteractiveAuthentication no",
        "PermitRootLogin prohibit-password", "UseDNS no", "LoginGraceTime 20",
        "MaxSessions 64", "MaxStartups 64", "Subsystem sftp internal-sftp", "LogLevel VERBOSE", ""]))
    log = open(work / "sshd.log", "ab")
    try:
        proc = subprocess.Popen(["ip", "netns", "exec", netns, SSHD, "-D", "-e", "-f", str(config)],
                                stdin=subprocess.DEVNULL, stdout=log, stderr=log)
    finally:
        log.close()
    sshd = Sshd(netns, address, port, work, host_key, proc)
    deadline = time.monotonic() + 30        # a hang, not a speed: sshd listens within milliseconds
    while "Server listening on" not in sshd.log():
        if proc.poll() is not None or time.monotonic() > deadline:
            sshd.stop()
            raise RuntimeError(f"sshd in {netns} did not start: {sshd.log().strip()[-500:]}")
        time.sleep(0.02)
    return sshd


def descendants(pid: int) -> list[int]:
    """Every live process below pid (children first)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = open(f"/proc/{entry}/stat").read()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry))
    out, todo = [], [pid]
    while todo:
        for c in children.get(todo.pop(), []):
            out.append(c)
            todo.append(c)
    return out


def parent(pid: int) -> int | None:
    try:
        return int(open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return None


def kill_connection(sshd: Sshd, pid: int) -> list[int]:
    """Kill the sshd processes serving the connection that `pid` (a process of a session)
    runs under: its ancestors up to, not including, the listener. Returns their pids."""
    chain, p = [], parent(pid)
    while p and p != sshd.pid and p > 1:
        chain.append(p)
        p = parent(p)
    if p != sshd.pid:
        raise RuntimeError(f"pid {pid} is not served by sshd {sshd.pid}")
    for q in chain:
        with contextlib.suppress(ProcessLookupError):
            os.kill(q, signal.SIGKILL)
    return chain


# namespaces --------------------------------------------------------------------------

@contextlib.contextmanager
def _allocation_lock():
    STATE.mkdir(parents=True, exist_ok=True)
    with open(STATE / ".lock", "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        yield


def _used_addresses() -> set[ipaddress.IPv4Address]:
    out = _run(["ip", "-4", "-o", "addr", "show"]).stdout
    return {ipaddress.ip_interface(ln.split()[3]).ip for ln in out.splitlines() if len(ln.split()) > 3}


def _owner_alive(prefix: str) -> bool:
    try:
        pid = json.loads((STATE / f"{prefix}.json").read_text())["pid"]
        os.kill(pid, 0)
    except (OSError, ValueError, KeyError):
        return False
    return True


def remove_stale() -> list[str]:
    """Namespaces and state of earlier sessions whose process is gone."""
    removed = []
    names = [ln.split()[0] for ln in _run(["ip", "netns", "list"]).stdout.splitlines() if ln.strip()]
    prefixes = {m.group(1) for n in names if (m := NS_RE.match(n))}
    if STATE.is_dir():
        prefixes |= {p.stem for p in STATE.glob("obssh*.json") if PREFIX_RE.match(p.stem)}
    for prefix in sorted(prefixes):
        if not _owner_alive(prefix):
            removed += remove_prefix(prefix)
    return removed


def _gone(pid: int) -> bool:
    """Whether pid has exited: no such process, or a zombie. A zombie that is this
    process's child (the session's sshd listeners) is reaped, so that it leaves /proc."""
    try:
        state = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True
    if state not in ("Z", "X"):
        return False
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)
    return True


def remove_prefix(prefix: str) -> list[str]:
    """Kill the processes in every namespace of `prefix`, delete them and their links."""
    assert PREFIX_RE.match(prefix), prefix
    names = [ln.split()[0] for ln in _run(["ip", "netns", "list"]).stdout.splitlines()
             if ln.strip() and ln.split()[0].startswith(prefix + "-")]
    for sig in (signal.SIGTERM, signal.SIGKILL):
        pids = {int(x) for ns in names for x in _run(["ip", "netns", "pids", ns], check=False).stdout.split()}
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
        deadline = time.monotonic() + 3
        while pids and time.monotonic() < deadline and not all(_gone(p) for p in pids):
            time.sleep(0.05)
    for ns in names:
        _run(["ip", "netns", "del", ns], check=False)
        _run(["ip", "link", "del", ns], check=False)   # the root-side veth end, if still there
    state = STATE / f"{prefix}.json"
    try:
        tmp = json.loads(state.read_text()).get("tmp")
    except (OSError, ValueError):
        tmp = None
    if tmp and pathlib.Path(tmp).name.startswith(prefix + "-"):
        shutil.rmtree(tmp, ignore_errors=True)
    with contextlib.suppress(FileNotFoundError):
        state.unlink()
    return names


@dataclasses.dataclass
class SshdNamespace:
    """A namespace standing in for a remote machine: a veth to the root namespace
    (root end .1, namespace end .2 of its /29; .5 is on the link and answers nobody)."""

    netns: str
    root_addr: str
    addr: str
    silent_addr: str
    sshd: Sshd | None = None

    @classmethod
    def create(cls, prefix: str, index: int) -> "SshdNamespace":
        name = f"{prefix}-{index}"
        with _allocation_lock():
            used = _used_addresses()
            block = next((b for b in NET.subnets(new_prefix=29) if not used & set(b)), None)
            if block is None:
                raise RuntimeError(f"no free /29 left in {NET}")
            hosts = list(block.hosts())
            _run(["ip", "netns", "add", name])
            _run(["ip", "-n", name, "link", "set", "lo", "up"])
            _run(["ip", "link", "add", name, "type", "veth", "peer", "name", "mg0", "netns", name])
            _run(["ip", "addr", "add", f"{hosts[0]}/29", "dev", name])
            _run(["ip", "link", "set", name, "up"])
            _run(["ip", "-n", name, "addr", "add", f"{hosts[1]}/29", "dev", "mg0"])
            _run(["ip", "-n", name, "link", "set", "mg0", "up"])
        _run(["ip", "netns", "exec", name, "sysctl", "-q", "-w", "net.ipv6.conf.all.disable_ipv6=1"], check=False)
        return cls(name, str(hosts[0]), str(hosts[1]), str(hosts[4]))


def new_prefix() -> str:
    STATE.mkdir(parents=True, exist_ok=True)
    while True:
        prefix = "obssh" + secrets.token_hex(2)
        path = STATE / f"{prefix}.json"
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            continue
        with os.fdopen(fd, "w") as f:
            json.dump({"pid": os.getpid(), "created": time.time()}, f)
        return prefix


# what tests get ------------------------------------------------------------------------

@dataclasses.dataclass
class Target:
    """Everything a client needs to reach one account on one test sshd."""

    name: str
    space: SshdNamespace
    user: str
    sudo: bool
    key_file: str
    known_hosts: str
    ssh_config: str

    @property
    def sshd(self) -> Sshd:
        assert self.space.sshd is not None
        return self.space.sshd

    def settings(self, **over):
        from harness.hosts.ssh.connect import SshSettings
        kw = dict(name=self.name, hostname=self.space.addr, port=self.sshd.port, user=self.user,
                  key_file=self.key_file, sudo=self.sudo, known_hosts=self.known_hosts,
                  ssh_config=self.ssh_config, connect_timeout=20.0)
        kw.update(over)
        return SshSettings(**kw)


@dataclasses.dataclass
class SshWorld:
    prefix: str
    tmp: pathlib.Path
    spaces: list[SshdNamespace]
    user_key: str      # authorized for every account on both servers
    other_key: str     # authorized nowhere
    root: Target       # host 0 as root
    sudo: Target       # host 1 as SUDO_USER (passwordless sudo)
    nosudo: Target     # host 1 as PLAIN_USER (no sudo rights)


@contextlib.contextmanager
def ssh_world_context():
    """Two sshd namespaces and their accounts; everything removed on leaving."""
    require()
    remove_stale()
    ensure_user(SUDO_USER, sudo=True)
    ensure_user(PLAIN_USER, sudo=False)
    prefix = new_prefix()
    tmp = pathlib.Path(tempfile.mkdtemp(prefix=f"{prefix}-"))
    state = STATE / f"{prefix}.json"
    state.write_text(json.dumps({**json.loads(state.read_text()), "tmp": str(tmp)}))
    try:
        os.chmod(tmp, 0o755)
        user_key = keygen(tmp / "id_user")
        other_key = keygen(tmp / "id_other")
        authorized = {u: [public_key(user_key)] for u in ("root", SUDO_USER, PLAIN_USER)}
        spaces = []
        for i in (0, 1):
            space = SshdNamespace.create(prefix, i)
            spaces.append(space)
            space.sshd = start_sshd(space.netns, space.addr, tmp / f"sshd{i}", authorized)
        known = tmp / "known_hosts"
        known.write_text("".join(s.sshd.known_hosts_line() for s in spaces))
        no_config = str(tmp / "ssh_config")   # absent: no ~/.ssh/config of the machine's user applies
        common = dict(key_file=user_key, known_hosts=str(known), ssh_config=no_config)
        yield SshWorld(prefix, tmp, spaces, user_key, other_key,
                       root=Target("r0", spaces[0], "root", False, **common),
                       sudo=Target("s1", spaces[1], SUDO_USER, True, **common),
                       nosudo=Target("n1", spaces[1], PLAIN_USER, True, **common))
    finally:
        remove_prefix(prefix)   # its namespaces, their processes, the temp dir and the state


@pytest.fixture(scope="session")
def ssh_world():
    with ssh_world_context() as world:
        yield world


def can_connect(address: str, port: int, timeout: float = 2.0) -> bool:
    try:
        with socket.create_connection((address, port), timeout=timeout):
            return True
    except OSError:
        return False
