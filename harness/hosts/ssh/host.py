"""Commands on a remote machine over SSH (paramiko), behind the Host contract.

One connection per host, reused, with keepalive; after a drop the next command reconnects
(with backoff) and a command that was running when it dropped fails with SshConnectionLost.
Commands do not open a channel each: they are framed inside long-lived shells (see
shell.py), a small pool of them so that two threads do not queue behind each other.
With `sudo`, every shell is `sudo -n sh`, so every command and background process runs as
root; files go up by SFTP into a directory of the user's and are installed from there.

The host's two remote directories, /tmp/overlaybench-ssh-<tag> (background processes'
files) and /tmp/overlaybench-up-<tag> (sudo uploads), each get an owner file when made
(OWNER_FILE: this machine's hostname and pid, as a testbed's state.json has them), so
`overlaybench down --inventory` can remove those of an orchestrator that was killed
before close() could.
"""

from __future__ import annotations

import itertools
import json
import logging
import os
import secrets
import shlex
import shutil
import socket
import threading
import time

import paramiko

from harness.core.errors import CommandError, SshConnectError, SshConnectionLost, SshError, SshSudoError
from harness.hosts.base import Completed, Host, Process
from harness.hosts.local import owner_stamp
from harness.hosts.ssh.connect import SshSettings, Target, connect
from harness.hosts.ssh.process import SshProcess, exit_code
from harness.hosts.ssh.shell import KILL_CHILDREN, Frame, Shell, ShellClosed

__all__ = ["SshHost", "SshProcess", "SshSettings"]

log = logging.getLogger(__name__)

MAX_SHELLS = 4                      # control shells per host (more threads wait for one)
DIR_PREFIXES = ("/tmp/overlaybench-ssh-", "/tmp/overlaybench-up-")   # + 8 hex digits: a host's remote dirs
OWNER_FILE = "owner.json"           # in each: {"owner_host", "pid", "pidns", "created"}
RECONNECT_DELAYS = (0.5, 1.0, 2.0, 4.0)


# As root: the upload copied into a new file beside the destination (umask 077: 0600 from
# its creation; noclobber: O_EXCL), given its mode, renamed over the destination.
INSTALL_SH = 'umask 077 && set -C && cat -- "$1" > "$3" && chmod "$4" "$3" && mv -f -- "$3" "$2" || { rm -f -- "$3"; exit 1; }'


def _create_excl(sftp: paramiko.SFTPClient, path: str, perm: int) -> paramiko.SFTPFile:
    """Open a new remote file for writing: CREATE|EXCL, with its permissions in the OPEN
    request itself, so the server creates it with them (never with its default first)."""
    attrs = paramiko.SFTPAttributes()
    attrs.st_mode = perm
    flags = paramiko.sftp.SFTP_FLAG_WRITE | paramiko.sftp.SFTP_FLAG_CREATE | paramiko.sftp.SFTP_FLAG_EXCL
    t, msg = sftp._request(paramiko.sftp.CMD_OPEN, path, flags, attrs)
    if t != paramiko.sftp.CMD_HANDLE:
        raise paramiko.SFTPError("Expected handle")
    return paramiko.SFTPFile(sftp, msg.get_binary(), "wb")


def _upload(sftp: paramiko.SFTPClient, local_path: str, remote: str, mode: int) -> None:
    """local_path into a new remote file made 0600, then given `mode`."""
    with open(local_path, "rb") as src, _create_excl(sftp, remote, 0o600) as dst:
        dst.set_pipelined(True)
        shutil.copyfileobj(src, dst, 32768)
        if mode != 0o600:
            dst.chmod(mode)


class SshHost(Host):
    """A remote machine reached over SSH; `settings.name` is what messages call it."""

    reconnect_delays = RECONNECT_DELAYS   # seconds before each reconnect attempt after the first

    def __init__(self, settings: SshSettings):
        self.settings = settings
        self.name = settings.name
        self._lock = threading.RLock()
        self._cond = threading.Condition(self._lock)
        self._client: paramiko.SSHClient | None = None
        self._target: Target | None = None
        self._generation = 0
        self._connected_once = False
        self._idle: list[Shell] = []
        self._shells = 0                       # open or being opened, idle or busy
        self._sftp: paramiko.SFTPClient | None = None
        self._sftp_lock = threading.Lock()
        tag = secrets.token_hex(4)
        self.state_dir = DIR_PREFIXES[0] + tag      # remote: background processes' files
        self._upload_dir = DIR_PREFIXES[1] + tag    # remote, the login user's (sudo uploads)
        self._upload_made = False
        self._seq = itertools.count()
        self.channels_opened = 0               # SSH channels opened over the host's life
        self.clk_tck: int | None = None        # the host's USER_HZ, known once connected
        self.grouped = True                    # whether background processes get a group

    # connection ----------------------------------------------------------------------
    def connect(self) -> None:
        """Connect now (otherwise the first command does): checks reachability, host key,
        login and, with sudo, `sudo -n`. Raises an SshError naming the host."""
        self._release(self._acquire(), True)

    @property
    def connected(self) -> bool:
        """Whether the connection is up, as far as is known: a drop is noticed when the
        server's end closes, so a command sent in the instant between may still fail as
        lost (it cannot be known whether it ran)."""
        with self._lock:
            t = self._client.get_transport() if self._client else None
            return t is not None and t.is_active()

    def _transport(self) -> paramiko.Transport:
        with self._lock:
            t = self._client.get_transport() if self._client else None
            if t is not None and t.is_active():
                return t
            if self._client is not None:
                self._drop()
            if not self._connected_once:
                self._client, self._target = connect(self.settings)
            else:
                self._client, self._target = self._reconnect()
            self._connected_once = True
            return self._client.get_transport()

    def _reconnect(self):
        last: SshError | None = None
        for i, delay in enumerate((0.0, *self.reconnect_delays)):
            time.sleep(delay)
            try:
                client = connect(self.settings)
                log.warning("%s: reconnected (attempt %d)", self.name, i + 1)
                return client
            except SshConnectError as e:
                last = e
                log.info("%s: reconnect attempt %d failed: %s", self.name, i + 1, e)
        why = str(last).removeprefix(f"{self.name}: ")
        raise SshConnectionLost(f"{self.name}: connection lost, and {len(self.reconnect_delays) + 1} "
                                f"attempts to reconnect failed: {why}") from last

    def _drop(self) -> None:
        """Forget a dead connection and everything on it (under the lock)."""
        self._generation += 1
        for sh in self._idle:
            sh.close()
        self._shells -= len(self._idle)
        self._idle.clear()
        self._sftp = None
        if self._client is not None:
            self._client.close()
        self._client = None

    def _channel(self, transport: paramiko.Transport) -> paramiko.Channel:
        with self._lock:
            self.channels_opened += 1
        try:
            return transport.open_session(timeout=self.settings.connect_timeout)
        except (paramiko.SSHException, OSError, EOFError) as e:
            raise SshConnectionLost(f"{self.name}: cannot open an SSH channel: {e}") from e

    def _owner(self) -> str:
        return json.dumps({"owner_host": socket.gethostname(), **owner_stamp(), "created": time.time()})

    def _shell_command(self) -> str:
        """The control shell: first the state directory and its owner file (kept if there:
        the first shell of the host's life wrote it), then `exec sh`, the same process, which
        the bootstrap then talks to. No round trip of its own."""
        d = shlex.quote(self.state_dir)
        prologue = (f"mkdir -p -m 700 {d} && {{ [ -s {d}/{OWNER_FILE} ] || "
                    f"{{ printf '%s\\n' {shlex.quote(self._owner())} >{d}/.owner.$$ && "
                    f"mv -f {d}/.owner.$$ {d}/{OWNER_FILE}; }}; }}; exec sh")
        return f"{'sudo -n sh' if self.settings.sudo else 'sh'} -c {shlex.quote(prologue)}"

    def _open_shell(self) -> Shell:
        for attempt in (1, 2):
            transport = self._transport()
            generation = self._generation
            try:
                sh = Shell(self._channel(transport), self._shell_command(), self.state_dir,
                           self.settings.connect_timeout)
            except ShellClosed as e:
                if transport.is_active():
                    raise self._shell_refused(e) from e
                if attempt == 2:
                    raise SshConnectionLost(f"{self.name}: connection lost while starting a shell") from e
                continue
            except (SshConnectionLost, paramiko.SSHException, OSError, EOFError) as e:
                if attempt == 2:
                    if isinstance(e, SshError):
                        raise
                    raise SshConnectionLost(f"{self.name}: cannot start a shell: {e}") from e
                continue
            sh.generation = generation
            self.clk_tck, self.grouped = sh.clk_tck, sh.grouped
            if self.settings.sudo and sh.uid != 0:
                sh.close()
                raise SshSudoError(f"{self.name}: `sudo -n sh` runs as uid {sh.uid}, not root")
            return sh
        raise AssertionError("unreachable")

    def _shell_refused(self, e: ShellClosed) -> SshError:
        why = (e.err.decode(errors="replace").strip().splitlines() or [str(e)])[-1]
        if self.settings.sudo:
            user = self._target.user if self._target else "the user"
            return SshSudoError(f"{self.name}: {user} may not run commands as root without a password "
                                f"(`sudo -n true` fails: {why})")
        return SshError(f"{self.name}: the remote shell did not start: {why}")

    def _acquire(self) -> Shell:
        with self._cond:
            while True:
                while self._idle:
                    sh = self._idle.pop()
                    if sh.generation == self._generation and sh.alive():
                        return sh
                    sh.close()
                    self._shells -= 1
                if self._shells < MAX_SHELLS:
                    self._shells += 1
                    break
                self._cond.wait()
        try:
            return self._open_shell()
        except BaseException:
            with self._cond:
                self._shells -= 1
                self._cond.notify()
            raise

    def _release(self, sh: Shell, reusable: bool) -> None:
        with self._cond:
            if reusable and sh.generation == self._generation and sh.alive():
                self._idle.append(sh)
            else:
                sh.close()
                self._shells -= 1
            self._cond.notify()

    def _call(self, what: str, func: str, args: list[str], data: bytes | None = None,
              timeout: float | None = None, kill_on_timeout: bool = False) -> Frame:
        """One framed call in a pooled shell; `what` names it in errors."""
        for attempt in (1, 2):
            sh = self._acquire()
            reusable = False
            deadline = None if timeout is None else time.monotonic() + timeout
            killer = (lambda: self._kill_children(sh)) if kill_on_timeout else None
            try:
                frame = sh.call(func, args, data, deadline, killer)
                reusable = frame.rc is not None
                return frame
            except KeyboardInterrupt:
                if killer is not None:   # do not leave the command running behind a Ctrl-C
                    killer()
                raise
            except ShellClosed as e:
                if not e.sent and attempt == 1:
                    continue   # the command never went out: a fresh shell may carry it
                if sh.chan.get_transport() is None or not sh.chan.get_transport().is_active():
                    raise SshConnectionLost(f"{self.name}: connection lost while running `{what}`") from e
                raise SshError(f"{self.name}: the remote shell ended while running `{what}`") from e
            finally:
                self._release(sh, reusable)
        raise AssertionError("unreachable")

    def _kill_children(self, sh: Shell) -> None:
        """A command overstayed its deadline: kill it from a second channel (the shell is
        busy waiting for it). Costs a channel, only on a timeout."""
        script = KILL_CHILDREN % {"pid": sh.pid}
        command = shlex.join(["sudo", "-n", "sh", "-c", script] if self.settings.sudo else ["sh", "-c", script])
        try:
            chan = self._channel(sh.chan.get_transport())
            chan.exec_command(command)
            if not chan.status_event.wait(10):
                log.warning("%s: killing a timed-out command took over 10s", self.name)
            chan.close()
        except (SshError, paramiko.SSHException, OSError) as e:
            log.warning("%s: could not kill a timed-out command: %s", self.name, e)

    # the Host contract ----------------------------------------------------------------
    def run(self, argv, *, timeout=60, check=True, input=None) -> Completed:
        argv = [str(a) for a in argv]
        if not argv:
            raise ValueError("empty argv")
        data = input.encode() if isinstance(input, str) else input
        frame = self._call(shlex.join(argv), "_ob_runin" if data is not None else "_ob_run", argv,
                           data, timeout, kill_on_timeout=True)
        rc = None if frame.timed_out or frame.rc is None else exit_code(frame.rc)
        done = Completed(argv, rc, frame.out.decode(errors="replace"), frame.err.decode(errors="replace"))
        if check and not done.ok:
            log.debug("%s: %s failed rc=%s stdout=%r stderr=%r", self.name, argv, done.returncode,
                      done.stdout, done.stderr)
            raise CommandError(self.name, argv, done.returncode, done.stdout, done.stderr)
        return done

    def start(self, argv) -> Process:
        argv = [str(a) for a in argv]
        if not argv:
            raise ValueError("empty argv")
        files = f"{self.state_dir}/{next(self._seq)}"
        frame = self._call(f"start {shlex.join(argv)}", "_ob_start", [files, *argv], timeout=30)
        fields = frame.out.split()
        if len(fields) != 2:
            raise SshError(f"{self.name}: could not start `{shlex.join(argv)}`: "
                           f"{frame.err.decode(errors='replace').strip() or 'no pid'}")
        waiter, pid = int(fields[0]), int(fields[1])
        log.debug("%s: started %s pid %d", self.name, argv, pid)
        return SshProcess(self._call, self.name, self.clk_tck, argv, files, waiter, pid,
                          pid if self.grouped else None)

    def stream(self, argv) -> paramiko.Channel:
        """A channel of its own whose stdin and stdout are the command's (as root with sudo);
        its stderr stays apart (`recv_stderr`). The caller closes it."""
        cmd = shlex.join(str(a) for a in argv)
        chan = self._channel(self._transport())
        try:
            chan.exec_command(f"sudo -n {cmd}" if self.settings.sudo else cmd)
        except (paramiko.SSHException, OSError, EOFError) as e:
            chan.close()
            raise SshConnectionLost(f"{self.name}: cannot start `{cmd}`: {e}") from e
        return chan

    def put(self, local_path, remote_path, mode=0o644) -> None:
        """A new file (O_EXCL, mode 0600 from its creation) written by SFTP, given `mode` and
        renamed over remote_path; with sudo it goes up into the user's 0700 upload directory
        and is copied from there by root the same way (umask 077, noclobber)."""
        tmp_name = f".overlaybench-{secrets.token_hex(6)}"
        with self._sftp_lock:
            sftp = self._sftp_client()
            try:
                if self.settings.sudo:
                    if not self._upload_made:
                        sftp.mkdir(self._upload_dir, 0o700)
                        self._upload_made = True
                        with _create_excl(sftp, f"{self._upload_dir}/{OWNER_FILE}", 0o644) as f:
                            f.write(self._owner() + "\n")
                    tmp = f"{self._upload_dir}/{tmp_name}"
                    _upload(sftp, local_path, tmp, 0o600)
                else:
                    tmp = f"{os.path.dirname(remote_path) or '.'}/{tmp_name}"
                    _upload(sftp, local_path, tmp, mode)
                    sftp.posix_rename(tmp, remote_path)
                    return
            except (OSError, paramiko.SSHException, EOFError) as e:
                raise self._sftp_error(f"put {local_path} -> {remote_path}", e) from e
        try:
            self.run(["sh", "-c", INSTALL_SH, "sh", tmp, remote_path, f"{os.path.dirname(remote_path) or '.'}/{tmp_name}",
                      f"{mode:o}"], timeout=60)
        finally:
            self.run(["rm", "-f", tmp], check=False, timeout=10)

    def get(self, remote_path, local_path) -> None:
        frame = self._call(f"get {remote_path}", "_ob_run", ["cat", "--", str(remote_path)], timeout=300)
        if frame.rc != 0:
            err = frame.err.decode(errors="replace")
            raise CommandError(self.name, ["cat", str(remote_path)], frame.rc, "", err)
        tmp = f"{local_path}.part"
        with open(tmp, "wb") as f:
            f.write(frame.out)
        os.replace(tmp, local_path)

    def close(self) -> None:
        """Remove the host's remote files, close its shells, SFTP and connection."""
        with self._lock:
            t = self._client.get_transport() if self._client else None
            if t is not None and t.is_active():
                dirs = [self.state_dir] + ([self._upload_dir] if self._upload_made else [])
                try:
                    self.run(["rm", "-rf", *dirs], check=False, timeout=10)
                except SshError as e:
                    log.info("%s: could not remove %s: %s", self.name, dirs, e)
            self._drop()
            self._connected_once = False
            self._upload_made = False

    # helpers -------------------------------------------------------------------------
    def _sftp_client(self) -> paramiko.SFTPClient:
        if self._sftp is not None and self._sftp.get_channel() is not None \
                and not self._sftp.get_channel().closed:
            return self._sftp
        chan = self._channel(self._transport())
        chan.invoke_subsystem("sftp")
        self._sftp = paramiko.SFTPClient(chan)
        return self._sftp

    def _sftp_error(self, what: str, e: Exception) -> SshError:
        t = self._client.get_transport() if self._client else None
        if t is None or not t.is_active():
            return SshConnectionLost(f"{self.name}: connection lost during {what}")
        return SshError(f"{self.name}: {what}: {getattr(e, 'strerror', None) or e}")
