"""A Host that answers from a script of expected commands, for tests that need no root.

As httpx's MockTransport does for HTTP, the code under test runs unchanged and every
command it sends a host is matched against the script and answered from it, so the
commands themselves are the assertion:

    h = ScriptedHost("h0")
    h.expect("ip link add vx0 type vxlan id 42")               # exit 0, no output
    h.expect(["bridge", "fdb", "show", "dev", "vx0"], stdout="00:00:00:00:00:00 dst 10.0.0.2\\n")
    h.expect("ip link del vx0", returncode=2, stderr="Cannot find device\\n")
    h.expect_start("iperf3 -s -1 -p 5201", ScriptedProcess.runs())
    h.allow(re.compile(r"cat /proc/\\d+/stat"), stdout=STAT)    # any time, any number of times
    ...                                                        # the code under test
    h.assert_all_used()

A command is matched by an argv (a list, or a string split as a shell would), a regular
expression that must match the whole command as `shlex.join` prints it, or a predicate
on the argv. `expect` and `expect_start` are taken in order (any order with
`ordered=False`); `allow` answers whenever nothing expected next matches. A command
nothing matches raises AssertionError naming it, what was expected next and what ran
before; `assert_all_used` raises it again (in case the code swallowed it) and names
what was expected but never ran.

Every call is kept in `calls` (run, start, put, get, and the stop and signal of started
processes), `transcript()` prints them; hosts given one `journal` list also keep their
calls there in the order made across hosts. Files put on the host are kept in `files`.
Nothing here waits: a process runs until the test or the code stops it, and a wait
with a timeout on a running process raises TimeoutError at once, as if that time had
passed. A command that timed out is scripted as `returncode=None`.
"""

from __future__ import annotations

import dataclasses
import re
import shlex
import signal as signals
from typing import Any, Callable

from harness.core.errors import CommandError
from harness.hosts.base import Completed, Host, Process

Matcher = list | tuple | str | re.Pattern | Callable[[list[str]], bool]


def command_matches(m: Matcher, argv: list[str]) -> bool:
    """Whether `argv` is the command `m` names: a command line (split as a shell would), an
    argv, a pattern the whole quoted line must match, or a predicate."""
    if isinstance(m, str):
        return argv == shlex.split(m)
    if isinstance(m, (list, tuple)):
        return argv == list(m)
    if isinstance(m, re.Pattern):
        return m.fullmatch(shlex.join(argv)) is not None
    return bool(m(argv))
ANY_INPUT = object()


@dataclasses.dataclass(frozen=True)
class Call:
    """One thing the code did to a host: `kind` is run, start, put, get, stop or signal."""

    kind: str
    argv: tuple[str, ...]
    input: str | None = None
    note: str = ""

    def __str__(self) -> str:
        return f"{self.kind}: {shlex.join(self.argv)}" + (f" ({self.note})" if self.note else "")


@dataclasses.dataclass
class Expectation:
    """One scripted command and its answer: a Completed (run), a ScriptedProcess (start),
    an exception to raise, or a callable (argv, input) returning either."""

    kind: str
    match: Matcher
    answer: Any
    times: int | None = 1           # None: any number of times
    input: Any = ANY_INPUT          # the stdin it must get, where given
    used: int = 0

    def matches(self, kind: str, argv: list[str], input: str | None) -> bool:
        if kind != self.kind or (self.input is not ANY_INPUT and input != self.input):
            return False
        return command_matches(self.match, argv)

    @property
    def left(self) -> bool:
        return self.times is None or self.used < self.times

    def __str__(self) -> str:
        m = self.match
        what = (m if isinstance(m, str) else shlex.join(m) if isinstance(m, (list, tuple))
                else f"/{m.pattern}/" if isinstance(m, re.Pattern) else getattr(m, "__name__", repr(m)))
        a = self.answer
        said = (f"exit {a.returncode}" if isinstance(a, Completed) else f"raises {a!r}" if isinstance(a, BaseException)
                else str(a) if isinstance(a, ScriptedProcess) else "answered by a function")
        times = "" if self.times == 1 else " (any number of times)" if self.times is None else f" (x{self.times})"
        return f"{self.kind}: {what} -> {said}{times}"


class ScriptedProcess(Process):
    """A started process as the script has it: exited already, or running until it is
    stopped, or until the test makes it exit or die (`exit`, `die`)."""

    def __init__(self, returncode: int = 0, stdout: str = "", stderr: str = "", *, running: bool = False,
                 stop_returncode: int = -signals.SIGTERM, cpu_seconds: float | None = None,
                 pid: int | None = None):
        self.argv: list[str] = []
        self.host: ScriptedHost | None = None
        self._rc: int | None = None if running else returncode
        self._stdout, self._stderr = stdout, stderr
        self._stop_rc = stop_returncode
        self._cpu = cpu_seconds
        self._pid = pid
        self.waits: list[float | None] = []     # the timeouts it was waited for with
        self.signals: list[int] = []            # what signal() sent it
        self.stopped = False                    # stop() found it running and ended it
        if not running:
            self.cpu_seconds = cpu_seconds

    @classmethod
    def exits(cls, returncode: int = 0, stdout: str = "", stderr: str = "", **kw) -> "ScriptedProcess":
        """Has exited with `returncode` by the time anyone looks (negative: killed by that signal)."""
        return cls(returncode, stdout, stderr, **kw)

    @classmethod
    def dies(cls, sig: int, stdout: str = "", stderr: str = "", **kw) -> "ScriptedProcess":
        """Was killed by signal `sig` by the time anyone looks."""
        return cls(-sig, stdout, stderr, **kw)

    @classmethod
    def runs(cls, stdout: str = "", stderr: str = "", stop_returncode: int = -signals.SIGTERM,
             **kw) -> "ScriptedProcess":
        """Runs (a server, a daemon, a hung client) until stopped; stop() ends it with
        `stop_returncode` (-SIGKILL: one that ignored SIGTERM)."""
        return cls(0, stdout, stderr, running=True, stop_returncode=stop_returncode, **kw)

    # what the test does to it --------------------------------------------------
    def exit(self, returncode: int, stdout: str | None = None, stderr: str | None = None) -> None:
        """End it now with `returncode` (and the output given, else what it had)."""
        assert self._rc is None, f"{self}: exit() on a process that has already exited"
        self._rc = returncode
        self._stdout = self._stdout if stdout is None else stdout
        self._stderr = self._stderr if stderr is None else stderr
        self.cpu_seconds = self._cpu

    def die(self, sig: int, stderr: str | None = None) -> None:
        """Killed now by signal `sig`."""
        self.exit(-sig, stderr=stderr)

    # the Process contract --------------------------------------------------------
    @property
    def pid(self) -> int | None:
        return self._pid

    def poll(self) -> int | None:
        return self._rc

    def _completed(self) -> Completed:
        return Completed(list(self.argv), self._rc, self._stdout, self._stderr)

    def wait(self, timeout: float | None = None) -> Completed:
        self.waits.append(timeout)
        if self._rc is not None:
            return self._completed()
        if timeout is None:
            raise AssertionError(f"{self}: waited for without a timeout, but the script has it "
                                 f"running until it is stopped: that wait would never end")
        raise TimeoutError(f"{self.argv[0] if self.argv else 'process'} still running after {timeout}s")

    def stop(self, timeout: float = 5.0) -> Completed:
        if self._rc is None:
            self.stopped = True
            self.exit(self._stop_rc)
            self._record("stop", f"exited {self._stop_rc}")
        return self._completed()

    def signal(self, sig: int) -> None:
        if self._rc is not None:
            raise ProcessLookupError(f"{self}: has exited")
        self.signals.append(sig)
        self._record("signal", signals.Signals(sig).name)

    def _record(self, kind: str, note: str) -> None:
        if self.host is not None:
            self.host._record(Call(kind, tuple(self.argv), note=note))

    def __str__(self) -> str:
        state = "running" if self._rc is None else f"exited {self._rc}"
        return f"process {shlex.join(self.argv)} [{state}]" if self.argv else f"process [{state}]"


def _reply(returncode: int | None, stdout: str, stderr: str, raises: BaseException | None,
           answer: Callable | None) -> Any:
    """What a run is answered with: the exception, the function, or the exit and output."""
    if raises is not None and answer is not None:
        raise TypeError("an expectation takes raises or answer, not both")
    return raises or answer or Completed([], returncode, stdout, stderr)


class ScriptedHost(Host):
    """A Host whose every command is answered from its script (module docstring)."""

    def __init__(self, name: str = "scripted", *, ordered: bool = True, journal: list | None = None):
        self.name = name
        self.ordered = ordered
        self.calls: list[Call] = []
        self.journal = journal          # a list shared by hosts: (host name, Call) in the order made
        self.files: dict[str, tuple[bytes, int]] = {}   # path → (content, mode), what put() copied
        self.closed = False
        self.failures: list[AssertionError] = []
        self._script: list[Expectation] = []
        self._standing: list[Expectation] = []
        self._last_pid = 1000           # pids given to processes started without one

    # scripting -----------------------------------------------------------------------
    def expect(self, command: Matcher, *, returncode: int | None = 0, stdout: str = "", stderr: str = "",
               raises: BaseException | None = None, answer: Callable | None = None, input: Any = ANY_INPUT,
               times: int = 1) -> Expectation:
        """The next command run (`returncode=None`: it timed out)."""
        return self._add(self._script, "run", command, _reply(returncode, stdout, stderr, raises, answer), times, input)

    def expect_start(self, command: Matcher, process: "ScriptedProcess | None" = None, *,
                     raises: BaseException | None = None, answer: Callable | None = None) -> Expectation:
        """The next command started in the background, answered with `process`."""
        if sum(x is not None for x in (process, raises, answer)) != 1:
            raise TypeError("expect_start takes one of process, raises, answer")
        return self._add(self._script, "start", command, process or raises or answer, 1, ANY_INPUT)

    def allow(self, command: Matcher, *, returncode: int | None = 0, stdout: str = "", stderr: str = "",
              raises: BaseException | None = None, answer: Callable | None = None,
              times: int | None = None) -> Expectation:
        """A command that may run whenever nothing expected next matches it (never required)."""
        return self._add(self._standing, "run", command, _reply(returncode, stdout, stderr, raises, answer), times,
                         ANY_INPUT)

    def _add(self, into: list, kind: str, command: Matcher, answer: Any, times: int | None, input: Any) -> Expectation:
        if isinstance(answer, ScriptedProcess) and any(e.answer is answer for e in self._script):
            raise ValueError(f"{self.name}: the same ScriptedProcess is scripted twice")
        e = Expectation(kind, command, answer, times, input)
        into.append(e)
        return e

    # checking --------------------------------------------------------------------------
    def pending(self) -> list[Expectation]:
        """What the script still expects."""
        return [e for e in self._script if e.left]

    def assert_all_used(self) -> None:
        """The first unexpected command, if any; else that every expectation was met."""
        if self.failures:
            raise self.failures[0]
        left = self.pending()
        if left:
            raise AssertionError(f"{self.name}: expected but never ran:\n" + "\n".join(f"  {e}" for e in left)
                                 + self._ran_before(self.calls))

    def __enter__(self) -> "ScriptedHost":
        return self

    def __exit__(self, exc_type, *exc) -> None:
        if exc_type is None:
            self.assert_all_used()

    @property
    def commands(self) -> list[list[str]]:
        """The argv of every command run or started, in order."""
        return [list(c.argv) for c in self.calls if c.kind in ("run", "start")]

    def transcript(self) -> list[str]:
        return [str(c) for c in self.calls]

    # the Host contract --------------------------------------------------------------------
    def run(self, argv, *, timeout=60, check=True, input=None) -> Completed:
        argv = list(argv)
        answer = self._answer("run", argv, input)
        if not isinstance(answer, Completed):
            raise AssertionError(f"{self.name}: the script answers `{shlex.join(argv)}` with {answer!r}, "
                                 f"not a Completed")
        done = Completed(argv, answer.returncode, answer.stdout, answer.stderr)
        if check and not done.ok:
            raise CommandError(self.name, argv, done.returncode, done.stdout, done.stderr)
        return done

    def start(self, argv) -> Process:
        argv = list(argv)
        proc = self._answer("start", argv, None)
        if not isinstance(proc, ScriptedProcess) or proc.host is not None:
            raise AssertionError(f"{self.name}: the script answers start `{shlex.join(argv)}` with {proc!r}, "
                                 f"not a ScriptedProcess of its own")
        proc.argv, proc.host = argv, self
        if proc._pid is None:
            self._last_pid += 1
            proc._pid = self._last_pid
        proc.pgid = proc._pid
        return proc

    def put(self, local_path, remote_path, mode=0o644) -> None:
        with open(local_path, "rb") as f:
            self.files[str(remote_path)] = (f.read(), mode)
        self._record(Call("put", (str(remote_path),), note=f"mode {mode:04o}"))

    def get(self, remote_path, local_path) -> None:
        self._record(Call("get", (str(remote_path),)))
        if str(remote_path) not in self.files:
            raise CommandError(self.name, ["cat", str(remote_path)], 1, "", f"{remote_path}: No such file")
        with open(local_path, "wb") as f:
            f.write(self.files[str(remote_path)][0])

    def close(self) -> None:
        self.closed = True

    # answering -----------------------------------------------------------------------------
    def _record(self, call: Call) -> None:
        self.calls.append(call)
        if self.journal is not None:
            self.journal.append((self.name, call))

    def _answer(self, kind: str, argv: list[str], input: str | None) -> Any:
        self._record(Call(kind, tuple(argv), input))
        e = self._find(kind, argv, input)
        if e is None:
            self._unexpected(kind, argv, input)
        e.used += 1
        a = e.answer
        if isinstance(a, BaseException):
            raise a
        return a(argv, input) if callable(a) else a

    def _find(self, kind: str, argv: list[str], input: str | None) -> Expectation | None:
        pending = self.pending()
        candidates = pending[:1] if self.ordered else pending
        for e in candidates + [e for e in self._standing if e.left]:
            if e.matches(kind, argv, input):
                return e
        return None

    def _unexpected(self, kind: str, argv: list[str], input: str | None) -> None:
        lines = [f"{self.name}: unexpected {kind}: {shlex.join(argv)}"]
        if input is not None:
            lines.append(f"  with input: {input[:300]!r}")
        pending = self.pending()
        if pending:
            lines.append(f"  expected {'next' if self.ordered else 'one of'}: {pending[0]}")
            lines += [f"    then: {e}" for e in pending[1:8]]
            lines += [f"    … and {len(pending) - 8} more"] if len(pending) > 8 else []
        else:
            lines.append("  the script expects nothing more")
        standing = [e for e in self._standing if e.left]
        lines += [f"  allowed any time: {e}" for e in standing]
        err = AssertionError("\n".join(lines) + self._ran_before(self.calls[:-1]))
        self.failures.append(err)
        raise err

    @staticmethod
    def _ran_before(calls: list[Call], n: int = 6) -> str:
        return ("\n  the last calls before:\n" + "\n".join(f"    {c}" for c in calls[-n:])) if calls else ""
