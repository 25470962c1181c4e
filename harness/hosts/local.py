"""Commands on this machine, through subprocess."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import pathlib
import secrets
import shutil
import signal
import socket
import stat
import subprocess
import tempfile
import time

from harness.core.errors import CommandError
from harness.hosts.base import Completed, Host, Process

log = logging.getLogger(__name__)


class LocalProcess(Process):
    def __init__(self, argv: list[str], popen: subprocess.Popen, out, err):
        self.argv = argv
        self.pgid = popen.pid   # started with process_group=0: it leads its own group
        self._popen = popen
        self._out = out
        self._err = err
        self._result: Completed | None = None

    @property
    def pid(self) -> int | None:
        return self._popen.pid

    def poll(self) -> int | None:
        if self._popen.returncode is None:
            self._reap(os.WNOHANG)
        return self._popen.returncode

    def _reap(self, flags: int) -> None:
        """wait4 instead of Popen.wait, for the child's own rusage (its CPU seconds)."""
        try:
            pid, status, ru = os.wait4(self._popen.pid, flags)
        except ChildProcessError:
            self._popen.returncode = self._popen.returncode if self._popen.returncode is not None else -1
            return
        if pid:
            self._popen.returncode = os.waitstatus_to_exitcode(status)
            self.cpu_seconds = ru.ru_utime + ru.ru_stime

    def _collect(self) -> Completed:
        if self._result is None:
            self._out.seek(0)
            self._err.seek(0)
            self._result = Completed(self.argv, self._popen.returncode,
                                     self._out.read().decode(errors="replace"),
                                     self._err.read().decode(errors="replace"))
            self._out.close()
            self._err.close()
        return self._result

    def wait(self, timeout: float | None = None) -> Completed:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is not None and time.monotonic() >= deadline:
                raise TimeoutError(f"{self.argv[0]} still running after {timeout}s")
            time.sleep(0.02)
        return self._collect()

    def signal(self, sig: int) -> None:
        if self.poll() is not None:
            raise ProcessLookupError(f"{self.argv[0]} (pid {self._popen.pid}) has exited")
        os.kill(self._popen.pid, sig)

    def stop(self, timeout: float = 5.0) -> Completed:
        if self.poll() is None:
            # The process leads its own group, so `ip netns exec` and its child die together.
            try:
                os.killpg(self._popen.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                self.wait(timeout)
            except TimeoutError:
                try:
                    os.killpg(self._popen.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                self.wait(None)
        return self._collect()


class LocalHost(Host):
    """This machine's root namespace."""

    def __init__(self, name: str = "local"):
        self.name = name

    def run(self, argv, *, timeout=60, check=True, input=None) -> Completed:
        full = list(argv)
        try:
            p = subprocess.run(full, input=input, capture_output=True, text=True,
                               timeout=timeout, start_new_session=True)
            done = Completed(list(argv), p.returncode, p.stdout, p.stderr)
        except subprocess.TimeoutExpired as e:
            out = e.stdout.decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
            err = e.stderr.decode(errors="replace") if isinstance(e.stderr, bytes) else (e.stderr or "")
            done = Completed(list(argv), None, out, err)
        except FileNotFoundError as e:
            done = Completed(list(argv), 127, "", str(e))
        if check and not done.ok:
            log.debug("%s: %s failed rc=%s stdout=%r stderr=%r", self.name, full,
                      done.returncode, done.stdout, done.stderr)
            raise CommandError(self.name, list(argv), done.returncode, done.stdout, done.stderr)
        return done

    def start(self, argv) -> Process:
        full = list(argv)
        out = tempfile.TemporaryFile()
        err = tempfile.TemporaryFile()
        log.debug("%s: start %s", self.name, full)
        # Its own process group, so stop() can signal the whole tree (ip netns exec and
        # what it runs) and a Ctrl-C at the terminal reaches only the harness. Not its
        # own session: every session is a scheduler autogroup, and the kernel would then
        # share the CPUs out per process instead of per thread, which on a lab where both
        # "hosts" share the CPUs cost the two-thread sleeve 6-12% against the iperf3s
        # (the fastdp figures moved by 4%, within noise). A shell-run benchmark does not
        # do that to its processes either.
        try:
            popen = subprocess.Popen(full, stdout=out, stderr=err, stdin=subprocess.DEVNULL,
                                     process_group=0)
        except FileNotFoundError as e:
            out.close()
            err.close()
            raise CommandError(self.name, list(argv), 127, "", str(e)) from e
        return LocalProcess(list(argv), popen, out, err)

    def put(self, local_path, remote_path, mode=0o644) -> None:
        """Copy into a new file beside the destination, made with O_EXCL and mode 0600 (a
        key is never readable by others, nor is a file someone else made reused), given
        `mode` once written, and renamed over the destination."""
        if os.path.abspath(local_path) == os.path.abspath(remote_path):
            os.chmod(remote_path, mode)
            return
        tmp = os.path.join(os.path.dirname(os.path.abspath(remote_path)), f".overlaybench-{secrets.token_hex(6)}")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            with os.fdopen(fd, "wb") as dst, open(local_path, "rb") as src:
                shutil.copyfileobj(src, dst, 1 << 20)
                os.fchmod(dst.fileno(), mode)
            os.replace(tmp, remote_path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise

    def get(self, remote_path, local_path) -> None:
        if os.path.abspath(local_path) == os.path.abspath(remote_path):
            return
        try:
            shutil.copyfile(remote_path, local_path)
        except OSError as e:
            raise CommandError(self.name, ["cp", str(remote_path), str(local_path)], 1, "", str(e)) from e


def pid_alive(pid: int | None) -> bool:
    """Whether a process of this machine with that pid lives (one of another user counts)."""
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


INIT_PIDNS = 0xEFFFFFFC          # the initial pid namespace's inode (the kernel's PROC_PID_INIT_INO)


def ns_of(pid: int | str, kind: str) -> int | None:
    """The inode of a process's namespace of `kind` ("pid", "net"); None: gone, a zombie or
    unreadable. Every namespace lives on the one nsfs, so the inode alone names it."""
    try:
        return os.stat(f"/proc/{pid}/ns/{kind}").st_ino
    except OSError:
        return None


def pidns_of(pid: int | str = "self") -> int | None:
    """The inode of a process's pid namespace (None: gone or unreadable)."""
    return ns_of(pid, "pid")


def owner_alive(pid: int | None, pidns: int | None = None) -> bool:
    """Whether the owner a run recorded (its pid, and the pid namespace that pid is in)
    may still live. A pid of another pid namespace is not ours to look up: from the initial
    namespace, the owner counts as alive while any process is in its namespace; from any
    other, it cannot be seen and counts as alive (--force removes what it owns)."""
    mine = pidns_of()
    if pidns is None or pidns == mine:
        return pid_alive(pid)
    if mine != INIT_PIDNS:
        return True
    return any(pidns_of(p) == pidns for p in _pids())


def _pids() -> list[str]:
    """Every process this pid namespace sees."""
    return [p for p in os.listdir("/proc") if p.isdigit()]


def boot_id() -> str | None:
    """This kernel's boot id: one for every process and container on it until it reboots, and
    another on any other machine, whatever its host name."""
    try:
        return pathlib.Path("/proc/sys/kernel/random/boot_id").read_text().strip() or None
    except OSError:
        return None


def owner_stamp() -> dict:
    """What an owner file records of this process: its pid, its pid namespace, its kernel's boot id."""
    return {"pid": os.getpid(), "pidns": pidns_of(), "boot_id": boot_id()}


# This machine's temporary directories a run makes (a remote testbed's artifacts, a tunnel's
# socket) carry an owner file, as the SSH transport's directories on a host do, so that
# `overlaybench down` can remove those of a run that was killed.
TEMP_PREFIX = "overlaybench-"
OWNER_FILE = "owner.json"           # {"owner_host", "pid", "pidns", "created"}


def owned_tempdir(what: str) -> pathlib.Path:
    """A new private directory, /tmp/overlaybench-<what>-<random>, owned by this process."""
    d = pathlib.Path(tempfile.mkdtemp(prefix=f"{TEMP_PREFIX}{what}-"))
    (d / OWNER_FILE).write_text(json.dumps({"owner_host": socket.gethostname(), **owner_stamp(),
                                            "created": round(time.time())}))
    return d


def owned_tempdirs() -> dict[pathlib.Path, tuple[int | None, int | None]]:
    """overlaybench's owned temporary directories on this machine → their owner's pid and
    pid namespace (None: unreadable, or not recorded); those another machine owns (a host
    that is also an SSH target) are left out."""
    out: dict[pathlib.Path, tuple[int | None, int | None]] = {}
    for d in pathlib.Path(tempfile.gettempdir()).glob(TEMP_PREFIX + "*"):
        try:
            st = d.lstat()
        except OSError:
            continue
        if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid():
            continue                                # a link, or another user's: never ours
        owner = _read_owner(d / OWNER_FILE)
        if not isinstance(owner, dict) or owner.get("owner_host") != socket.gethostname():
            continue                                # no owner file: not one we know to be ours
        pid, ns = owner.get("pid"), owner.get("pidns")
        out[d] = (pid if isinstance(pid, int) and pid > 0 else None, ns if isinstance(ns, int) else None)
    return out


def _read_owner(path: pathlib.Path):
    """An owner file read as /tmp deserves: no link followed, no FIFO waited on, 4 kB at most,
    only a regular file of this user's."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.getuid():
            return None
        return json.loads(os.read(fd, 4096))
    except (OSError, ValueError):
        return None
    finally:
        os.close(fd)


def remove_stale_tempdirs(force: bool = False) -> list[str]:
    """Remove the owned temporary directories whose owner is gone (all of them with force)."""
    removed = []
    for d, (pid, ns) in owned_tempdirs().items():
        if force or not owner_alive(pid, ns):
            shutil.rmtree(d, ignore_errors=True)
            removed.append(f"temporary directory {d}")
    return removed
