"""Opening one SSH connection: settings, ~/.ssh/config, known_hosts, keys, one-line errors.

Host keys are checked against the user's and the system's known_hosts; an unknown key is
refused unless accepting new keys was asked for (then it is appended to the user's file),
and a changed key is always refused. Every failure becomes an SshError subclass whose one
line names the host; no paramiko traceback reaches a user.
"""

from __future__ import annotations

import dataclasses
import getpass
import logging
import os
import socket

import paramiko

from harness.core.errors import SshAuthError, SshConnectError, SshError, SshHostKeyError

log = logging.getLogger(__name__)

USER_KNOWN_HOSTS = "~/.ssh/known_hosts"
SYSTEM_KNOWN_HOSTS = "/etc/ssh/ssh_known_hosts"
USER_CONFIG = "~/.ssh/config"
KEEPALIVE = 15  # seconds: SSH keepalive and TCP keepalive idle time


class _OnlyWhenDebugging(logging.Filter):
    """paramiko logs, at ERROR, the tracebacks of failures that become one-line errors here;
    they are shown only when debugging (-vv), never to a user reading an error."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno < logging.ERROR or logging.getLogger().isEnabledFor(logging.DEBUG)


for _name in ("paramiko.transport", "paramiko.transport.sftp"):
    logging.getLogger(_name).addFilter(_OnlyWhenDebugging())


@dataclasses.dataclass(frozen=True)
class SshSettings:
    """How to reach one host. None means: from ~/.ssh/config, else OpenSSH's default."""

    name: str                          # what messages call the host
    hostname: str                      # address, name, or a Host alias of the ssh config
    port: int | None = None            # config's Port, else 22
    user: str | None = None            # config's User, else the local user
    key_file: str | None = None        # config's IdentityFile, else ~/.ssh/id_* and the agent
    sudo: bool = False                 # run everything as root through `sudo -n`
    known_hosts: str | None = None     # None: ~/.ssh/known_hosts and /etc/ssh/ssh_known_hosts
    accept_new_host_keys: bool = False  # add an unknown host key (to the known_hosts above)
    connect_timeout: float = 10.0      # TCP connect, SSH banner, authentication, channel open
    ssh_config: str | None = None      # None: ~/.ssh/config


@dataclasses.dataclass(frozen=True)
class Target:
    """The settings with ~/.ssh/config applied."""

    hostname: str
    port: int
    user: str
    key_files: tuple[str, ...]
    known_hosts: tuple[str, ...]       # read, in order
    save_known_hosts: str              # where an accepted new key goes

    def where(self) -> str:
        return f"{self.user}@{self.hostname}:{self.port}"


def resolve(s: SshSettings) -> Target:
    path = os.path.expanduser(s.ssh_config or USER_CONFIG)
    cfg = paramiko.SSHConfig()
    if os.path.isfile(path):
        try:
            cfg = paramiko.SSHConfig.from_path(path)
        except (OSError, paramiko.SSHException, ValueError) as e:
            raise SshError(f"{s.name}: cannot read ssh config {path}: {e}") from e
    entry = cfg.lookup(s.hostname)
    try:
        port = s.port or int(entry.get("port", 22))
    except ValueError as e:
        raise SshError(f"{s.name}: ssh config {path}: Port {entry.get('port')!r} is not a number") from e
    keys = [s.key_file] if s.key_file else list(entry.get("identityfile", []))
    user_file = os.path.expanduser(s.known_hosts or USER_KNOWN_HOSTS)
    files = (user_file,) if s.known_hosts else (user_file, SYSTEM_KNOWN_HOSTS)
    return Target(hostname=entry.get("hostname", s.hostname), port=port,
                  user=s.user or entry.get("user") or getpass.getuser(),
                  key_files=tuple(os.path.expanduser(k) for k in keys),
                  known_hosts=files, save_known_hosts=user_file)


class _UnknownHostKey(paramiko.SSHException):
    def __init__(self, hostname: str, key: paramiko.PKey):
        super().__init__(hostname)
        self.hostname, self.key = hostname, key


class _Reject(paramiko.MissingHostKeyPolicy):
    def missing_host_key(self, client, hostname, key):
        raise _UnknownHostKey(hostname, key)


class _AcceptNew(paramiko.MissingHostKeyPolicy):
    """Trust an unknown key on first use and append it to the user's known_hosts."""

    def __init__(self, path: str, name: str):
        self.path, self.name = path, name

    def missing_host_key(self, client, hostname, key):
        client.get_host_keys().add(hostname, key.get_name(), key)
        os.makedirs(os.path.dirname(self.path) or ".", mode=0o700, exist_ok=True)
        with open(self.path, "a") as f:
            f.write(f"{hostname} {key.get_name()} {key.get_base64()}\n")
        log.warning("%s: added the host key of %s (%s %s) to %s", self.name, hostname,
                    key.get_name(), key.fingerprint, self.path)


def _socket(s: SshSettings, t: Target) -> socket.socket:
    where = f"{t.hostname}:{t.port}"
    try:
        sock = socket.create_connection((t.hostname, t.port), timeout=s.connect_timeout)
    except socket.gaierror as e:
        raise SshConnectError(f"{s.name}: cannot resolve {t.hostname}: {e.strerror}") from e
    except TimeoutError as e:
        raise SshConnectError(f"{s.name}: no answer from {where} within {s.connect_timeout:g}s "
                              f"(unreachable address or filtered port)") from e
    except ConnectionRefusedError as e:
        raise SshConnectError(f"{s.name}: connection refused by {where} (no SSH server on that port)") from e
    except OSError as e:
        raise SshConnectError(f"{s.name}: cannot reach {where}: {e.strerror or e}") from e
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
    for opt, val in (("TCP_KEEPIDLE", KEEPALIVE), ("TCP_KEEPINTVL", 5), ("TCP_KEEPCNT", 3)):
        if hasattr(socket, opt):
            sock.setsockopt(socket.IPPROTO_TCP, getattr(socket, opt), val)
    return sock


def connect(s: SshSettings) -> tuple[paramiko.SSHClient, Target]:
    """An authenticated client, or an SshError naming the host and what went wrong."""
    t = resolve(s)
    for k in t.key_files:
        if not os.path.isfile(k):
            raise SshAuthError(f"{s.name}: key file {k} does not exist")
    client = paramiko.SSHClient()
    for path in t.known_hosts:
        if os.path.isfile(path):
            try:
                client.load_system_host_keys(path)
            except OSError as e:
                raise SshHostKeyError(f"{s.name}: cannot read known_hosts {path}: {e.strerror}") from e
    client.set_missing_host_key_policy(
        _AcceptNew(t.save_known_hosts, s.name) if s.accept_new_host_keys else _Reject())
    sock = _socket(s, t)
    try:
        client.connect(t.hostname, t.port, username=t.user, key_filename=list(t.key_files) or None,
                       # timeout bounds the key exchange; a bit more than the banner's, so
                       # that a silent server is reported as such
                       sock=sock, timeout=s.connect_timeout + 1, banner_timeout=s.connect_timeout,
                       auth_timeout=s.connect_timeout, channel_timeout=s.connect_timeout,
                       allow_agent=not t.key_files, look_for_keys=not t.key_files)
    except BaseException as e:
        client.close()
        sock.close()
        if isinstance(e, Exception):
            raise _one_line(s, t, e) from e
        raise
    transport = client.get_transport()
    transport.set_keepalive(KEEPALIVE)
    log.info("%s: connected to %s", s.name, t.where())
    return client, t


def _one_line(s: SshSettings, t: Target, e: Exception) -> SshError:
    where, n = t.where(), s.name
    if isinstance(e, _UnknownHostKey):
        return SshHostKeyError(
            f"{n}: the host key of {e.hostname} ({e.key.get_name()} {e.key.fingerprint}) is not in "
            f"{' or '.join(t.known_hosts)}: check it and add it there, or pass --accept-new-host-keys")
    if isinstance(e, paramiko.BadHostKeyException):
        return SshHostKeyError(
            f"{n}: the host key of {t.hostname} CHANGED (known_hosts has {e.expected_key.fingerprint}, "
            f"the server offers {e.key.get_name()} {e.key.fingerprint}): refusing to connect; if the "
            f"change is expected, remove the old key with ssh-keygen -R {t.hostname}")
    if isinstance(e, paramiko.PasswordRequiredException):
        return SshAuthError(f"{n}: key file {', '.join(t.key_files)} is encrypted: give an unencrypted key "
                            f"or leave the key unset and use ssh-agent")
    if isinstance(e, paramiko.AuthenticationException):
        keys = ", ".join(t.key_files) or "the keys in ~/.ssh and the agent"
        return SshAuthError(f"{n}: {where} refused the login with {keys}: authentication failed")
    if isinstance(e, (TimeoutError, EOFError, ConnectionError)):
        return SshConnectError(f"{n}: {where} closed or stalled the connection during the SSH handshake "
                               f"({type(e).__name__})")
    if isinstance(e, paramiko.SSHException) and "banner" in str(e).lower():
        return SshConnectError(f"{n}: no SSH server answered at {t.hostname}:{t.port} "
                               f"within {s.connect_timeout:g}s")
    if isinstance(e, paramiko.SSHException) and str(e) in ("No existing session", "Negotiation failed."):
        return SshConnectError(f"{n}: the SSH handshake with {t.hostname}:{t.port} did not complete "
                               f"within {s.connect_timeout + 1:g}s")
    first = (str(e).strip().splitlines() or [type(e).__name__])[0]
    return SshConnectError(f"{n}: ssh to {where} failed: {first}")
