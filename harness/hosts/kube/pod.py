"""A pod as a Host: commands through the API's exec stream (harness/hosts/kube/api.py).

The pod runs `sleep infinity` from the tools image; every command is an exec in it.

- run: a command with a hard timeout on both ends: `timeout -s KILL` in the pod, and the
  stream given up a little later here. Its stdin, where given, goes in through argv
  (exec streams cannot close stdin), which suits the small inputs the harness sends.
- start: an exec held open by a thread of its own; the command first writes its pid to a
  file in the pod, so stop and signal are `kill` execs, and the stream ends with it.
- Before its first command a host waits for its pod to run. A pod that cannot (its image
  not pulled, a container that cannot be made) answers every command with exit 125 and
  the pod's reason (`ImagePullBackOff: …`), and every start with a process that has
  exited so: what fails is the case that needed the pod, with why, and the run goes on.

Exit codes as LocalHost gives them: death by signal n (a shell's 128+n) is -n.
"""

from __future__ import annotations

import base64
import itertools
import logging
import shlex
import signal as _signal
import threading
import time

from harness.core.errors import CommandError, HarnessError
from harness.hosts.base import Completed, Host, Process
from harness.hosts.kube.api import PodStatus

log = logging.getLogger(__name__)

READY_TIMEOUT = 300.0    # an image pull of the tools image (~60 MB) on a slow link
READY_POLL = 0.5
GRACE = 10.0             # the stream waits this much past a command's own timeout
WHY_CHARS = 160         # of a stuck pod's message in its error line
STUCK = ("ErrImagePull", "ImagePullBackOff", "ErrImageNeverPull", "InvalidImageName",
         "CreateContainerConfigError", "CreateContainerError", "RunContainerError")
BROKEN = 125             # the exit code of a command on a pod that cannot run
_ids = itertools.count(1)


def exit_code(rc: int | None) -> int | None:
    return -(rc - 128) if rc is not None and 128 < rc <= 128 + 64 else rc


class PodHost(Host):
    """One pod of the run's namespace (module doc). `sleep` is how it waits (tests pass
    one that does not)."""

    def __init__(self, api, namespace: str, pod: str, name: str, node: str = "",
                 ready_timeout: float = READY_TIMEOUT, sleep=time.sleep):
        self.api, self.namespace, self.pod, self.name, self.node = api, namespace, pod, name, node
        self.ready_timeout, self._sleep = ready_timeout, sleep
        self.status: PodStatus | None = None
        self.broken: str | None = None          # why the pod cannot run, once known
        self._lock = threading.Lock()

    # ------------------------------------------------------------ readiness
    def wait_running(self) -> PodStatus | None:
        """Wait until the pod runs (once); None and `broken` set where it cannot."""
        with self._lock:
            if self.status is not None or self.broken is not None:
                return self.status
            deadline = time.monotonic() + self.ready_timeout
            while True:
                st = self.api.pod_status(self.namespace, self.pod)
                if st.phase == "Running":
                    self.status = st
                    return st
                if st.reason in STUCK or st.phase in ("Failed", "Succeeded"):
                    self.broken = self._why(st.reason or st.phase, st.message)
                    return None
                if time.monotonic() >= deadline:
                    self.broken = self._why(st.reason or st.phase, f"not running after {self.ready_timeout:.0f}s")
                    return None
                self._sleep(READY_POLL)

    def _why(self, reason: str, message: str) -> str:
        """The pod and its reason first, the message after it cut to WHY_CHARS: a case's error
        keeps the tail of what a command said, and the reason must survive that."""
        where = f" on node {self.node}" if self.node else ""
        msg = message.strip()
        msg = msg if len(msg) <= WHY_CHARS else msg[:WHY_CHARS - 1] + "…"
        return f"pod {self.pod}{where}: {reason}" + (f": {msg}" if msg else "")

    # ------------------------------------------------------------ commands
    def exec(self, argv: list[str], timeout: float | None) -> tuple[int | None, str, str]:
        if self.wait_running() is None:
            return BROKEN, "", self.broken + "\n"
        return self.api.exec(self.namespace, self.pod, argv, timeout)

    def run(self, argv, *, timeout=60, check=True, input=None) -> Completed:
        argv = [str(a) for a in argv]
        cmd = argv if input is None else ["sh", "-c", 'i=$0; printf %s "$i" | "$@"', input, *argv]
        if timeout is not None:
            cmd = ["timeout", "-s", "KILL", f"{max(timeout, 0.01):g}", *cmd]     # 0 would mean "never"
        t0 = time.monotonic()
        rc, out, err = self.exec(cmd, None if timeout is None else timeout + GRACE)
        if rc == 128 + _signal.SIGKILL and timeout is not None and time.monotonic() - t0 >= timeout:
            rc = None                           # `timeout` killed it
        done = Completed(argv, exit_code(rc), out, err)
        if check and not done.ok:
            raise CommandError(self.name, argv, done.returncode, out, err)
        return done

    def start(self, argv) -> Process:
        argv = [str(a) for a in argv]
        if self.wait_running() is None:
            return PodProcess.exited(argv, BROKEN, self.broken + "\n")
        return PodProcess(self, argv, f"/tmp/overlaybench-{next(_ids)}.pid")

    def put(self, local_path, remote_path, mode=0o644) -> None:
        with open(local_path, "rb") as f:
            data = base64.b64encode(f.read()).decode()
        self.run(["sh", "-c", 'printf %s "$0" | base64 -d > "$1" && chmod "$2" "$1"', data, remote_path,
                  f"{mode:o}"])

    def get(self, remote_path, local_path) -> None:
        data = self.run(["base64", "-w0", remote_path]).stdout
        with open(local_path, "wb") as f:
            f.write(base64.b64decode(data))

    def __repr__(self) -> str:
        return f"<PodHost {self.namespace}/{self.pod}>"


class PodProcess(Process):
    """A command held open in a pod by an exec stream (PodHost.start)."""

    def __init__(self, host: PodHost | None, argv: list[str], pidfile: str):
        self.argv, self._host, self._pidfile = argv, host, pidfile
        self._result: Completed | None = None
        self._done = threading.Event()
        self._stopped = False
        if host is not None:
            cmd = ["sh", "-c", 'echo $$ > "$0"; exec "$@"', pidfile, *argv]
            self._thread = threading.Thread(target=self._hold, args=(cmd,), daemon=True,
                                            name=f"exec {host.pod} {argv[0]}")
            self._thread.start()

    @classmethod
    def exited(cls, argv: list[str], rc: int, stderr: str) -> "PodProcess":
        p = cls(None, argv, "")
        p._result = Completed(argv, rc, "", stderr)
        p._done.set()
        return p

    def _hold(self, cmd: list[str]) -> None:
        try:
            rc, out, err = self._host.api.exec(self._host.namespace, self._host.pod, cmd, None)
            self._result = Completed(self.argv, exit_code(rc), out, err)
        except HarnessError as e:
            self._result = Completed(self.argv, BROKEN, "", f"{e}\n")
        finally:
            self._done.set()

    @property
    def pid(self) -> int | None:
        return None             # a pid of the pod's namespace: nothing on the node reads it

    def poll(self) -> int | None:
        return self._result.returncode if self._done.is_set() else None

    def wait(self, timeout: float | None = None) -> Completed:
        if not self._done.wait(timeout):
            raise TimeoutError(f"{shlex.join(self.argv)} still running after {timeout}s")
        return self._result

    def _kill(self, sig: int) -> None:
        self._host.run(["sh", "-c", 'kill -s "$1" "$(cat "$0")"', self._pidfile, _signal.Signals(sig).name[3:]],
                       check=False, timeout=10)

    def stop(self, timeout: float = 5.0) -> Completed:
        if not self._done.is_set() and not self._stopped:
            self._stopped = True
            self._kill(_signal.SIGTERM)
            if not self._done.wait(timeout):
                self._kill(_signal.SIGKILL)
                if not self._done.wait(timeout + GRACE):
                    log.warning("%s: %s: the exec stream did not end after SIGKILL", self._host.name,
                                shlex.join(self.argv))
                    return Completed(self.argv, None, "", "the exec stream did not end after SIGKILL\n")
        if not self._done.wait(timeout + GRACE):     # stopped before, and its stream never ended
            return Completed(self.argv, None, "", "the exec stream did not end after SIGKILL\n")
        return self._result

    def signal(self, sig: int) -> None:
        if self._done.is_set():
            raise ProcessLookupError(shlex.join(self.argv))
        self._kill(sig)
