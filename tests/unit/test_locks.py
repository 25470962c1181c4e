"""The harness's locks, with real processes and real flocks: one writer per run directory
(RunStore.lock, which refuses a `--resume` while the run's owner lives), one run measuring on
this machine at a time (runlock.hold_machine, on a temporary lock file here so that a real run
on this machine is never disturbed), and what two writers leave behind (duplicated lines,
which `results.load` reports). No lab, no traffic: every child is a short Python process
that says what it did on a line, and every wait is bounded."""

from __future__ import annotations

import json
import logging
import os
import pathlib
import queue
import re
import signal
import subprocess
import sys
import threading
import time

import pytest
from flocks import flock_waiters

from harness.core.errors import HarnessError
from harness import results
from harness.run import scenario as S
from harness.hosts.local import pid_alive
from harness.testbeds.lab_state import STATE_ROOT

ROOT = pathlib.Path(__file__).resolve().parents[2]
TIMEOUT = 30            # seconds: the most any step of these tests waits for a child

# Takes a run's lock the way `run --resume` does (RunStore.open, then lock), says so, and
# holds it until its stdin closes (or it is killed).
OWNER = """\
import sys
from harness.results import RunStore
store = RunStore.open(sys.argv[1])
store.lock()
print("locked", flush=True)
sys.stdin.read()
"""

# Takes the machine lock at argv[1] for run argv[2] (quiet when argv[3] == "quiet"), says when
# it holds it, releases it on the first line of stdin and says when it did, then exits on EOF.
MACHINE = """\
import pathlib, sys, time
from harness.run.runlock import hold_machine
m = hold_machine(sys.argv[2], quiet=sys.argv[3] == "quiet", path=pathlib.Path(sys.argv[1]))
print("held", time.monotonic(), flush=True)
if sys.stdin.readline():
    t = time.monotonic()
    m.release()
    print("released", t, flush=True)
sys.stdin.read()
"""


class Child:
    """A child Python process whose stdout and stderr lines are read as they come, so a test
    can wait for one line (a handshake) with a deadline instead of sleeping."""

    def __init__(self, *argv: str):
        self.proc = subprocess.Popen([sys.executable, *argv], cwd=ROOT, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, bufsize=1)
        self.pid = self.proc.pid
        self.lines = {"stdout": [], "stderr": []}
        self._q = {"stdout": queue.Queue(), "stderr": queue.Queue()}
        self._readers = [threading.Thread(target=self._read, args=(name,), daemon=True)
                         for name in ("stdout", "stderr")]
        for t in self._readers:
            t.start()

    def _read(self, name: str) -> None:
        for line in getattr(self.proc, name):
            self._q[name].put(line.rstrip("\n"))
        self._q[name].put(None)                 # EOF

    def expect(self, name: str, timeout: float = TIMEOUT) -> str:
        """The next line on stdout or stderr; fails (never hangs) if none comes in time."""
        try:
            line = self._q[name].get(timeout=timeout)
        except queue.Empty:
            pytest.fail(f"pid {self.pid}: no line on {name} within {timeout} s; so far {self.lines}")
        if line is None:
            self._q[name].put(None)
            pytest.fail(f"pid {self.pid}: {name} closed (exit {self.proc.poll()}); so far {self.lines}")
        self.lines[name].append(line)
        return line

    def pending(self, name: str) -> list[str]:
        """Lines already written but not yet expected, without waiting."""
        out = []
        while True:
            try:
                line = self._q[name].get_nowait()
            except queue.Empty:
                return out
            if line is None:
                self._q[name].put(None)
                return out
            out.append(line)

    def send(self, text: str) -> None:
        self.proc.stdin.write(text)
        self.proc.stdin.flush()

    def finish(self, timeout: float = TIMEOUT) -> int:
        """Close stdin (the child's cue to exit) and wait; the rest of its output is collected."""
        if not self.proc.stdin.closed:
            self.proc.stdin.close()
        rc = self.proc.wait(timeout=timeout)
        for t in self._readers:
            t.join(timeout)
        for name in ("stdout", "stderr"):
            self.lines[name] += self.pending(name)
        return rc

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        try:
            self.proc.wait(timeout=TIMEOUT)
        finally:
            for f in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
                try:
                    f.close()
                except OSError:
                    pass


@pytest.fixture
def children():
    """Start children with children(argv...); every one still running afterwards is killed."""
    started: list[Child] = []

    def start(*argv: str) -> Child:
        c = Child(*argv)
        started.append(c)
        return c

    yield start
    for c in started:
        c.kill()


def _measurement(case: str, repeat: int, metric: str = "throughput_bps", value: float = 1e9) -> results.Measurement:
    return results.Measurement(case=case, mode="native", datapath="native", underlay_mtu=1500, overlay_mtu=1500,
                               placement="host-host", test="iperf3.tcp", streams=1, repeat=repeat, metric=metric,
                               value=value, unit="bps" if metric == "throughput_bps" else "count")


def _make_run(root: pathlib.Path) -> results.RunStore:
    """A small valid run, written by the harness's own writer: run.json with a real scenario
    (native, iperf3.tcp, 2 repeats) and repeat 0 measured. The writer's lock is released."""
    sc = S.build({"matrix": {"modes": ["native"], "tests": ["iperf3.tcp"], "repeats": 2, "duration": 1}})
    store = results.RunStore.create(root, {"scenario": sc.to_dict(), "cases_planned": 2})
    case = S.expand(sc)[0].key
    store.append([_measurement(case, 0), _measurement(case, 0, "retransmits", 0)])
    store.update_meta(end=results.now_iso(), status="interrupted")
    store.unlock()
    return store


@pytest.fixture
def locked_run(tmp_path, children):
    """A run directory and a live child process that holds its lock (the run's writer)."""
    store = _make_run(tmp_path / "results")
    owner = children("-c", OWNER, str(store.path))
    assert owner.expect("stdout") == "locked", owner.lines
    assert (store.path / ".lock").read_text().strip() == str(owner.pid)
    return store.path, owner


# ------------------------------------------------------------------ labs this command made

def _lab_namespaces() -> set[str]:
    if os.geteuid() != 0:
        return set()
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, timeout=TIMEOUT).stdout
    return {ln.split()[0] for ln in out.splitlines() if re.match(r"^ob[0-9a-f]{4}-", ln)}


def _lab_dirs() -> set[str]:
    if not STATE_ROOT.is_dir():
        return set()
    return {d.name for d in STATE_ROOT.iterdir() if re.fullmatch(r"ob[0-9a-f]{4}", d.name)}


def _made_by(prefix: str, pid: int, run_id: str) -> bool:
    """Whether a lab that appeared during the command is the command's: its state names the
    command's pid or run, or no live owner (a lab of another run going on beside the tests,
    made in the same second, is that run's)."""
    try:
        state = json.loads((STATE_ROOT / prefix / "state.json").read_text())
    except (OSError, ValueError):
        return True
    return state.get("pid") == pid or state.get("run_id") == run_id or not pid_alive(state.get("pid"))


# ------------------------------------------------------------------ one writer per run

def test_resume_while_the_owner_lives_is_refused_in_one_line_and_touches_nothing(locked_run):
    run_dir, owner = locked_run
    run_id = run_dir.name
    jsonl, meta = run_dir / "measurements.jsonl", run_dir / "run.json"
    before = {p: p.read_bytes() for p in (jsonl, meta)}
    ns_before, dirs_before = _lab_namespaces(), _lab_dirs()

    p = subprocess.Popen([sys.executable, "-m", "harness.cli", "run", "--resume", str(run_dir)],
                         cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        out, err = p.communicate(timeout=TIMEOUT)
    finally:
        if p.poll() is None:            # it went on to a testbed: SIGTERM lets it remove what it made
            p.terminate()
            try:
                p.wait(TIMEOUT)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(TIMEOUT)

    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert p.returncode == 2, (p.returncode, out[-500:], err[-2000:])
    assert "Traceback" not in err and len(lines) == 1, err
    assert lines[0] == (f"overlaybench: {run_dir}: run is being written by pid {owner.pid}, which is still "
                        f"running; wait for it to end (or stop it) before resuming"), lines[0]
    assert out == ""
    # Nothing appended, run.json not rewritten (no status, no testbed facts), no lock taken over.
    assert {p_: p_.read_bytes() for p_ in before} == before
    assert (run_dir / ".lock").read_text().strip() == str(owner.pid)
    assert owner.proc.poll() is None, "the owner died"
    # Refused before any testbed: no lab namespace and no lab state directory of its own.
    new_ns = {n[:6] for n in _lab_namespaces() - ns_before}
    new_dirs = _lab_dirs() - dirs_before
    mine = {pfx for pfx in new_ns | new_dirs if _made_by(pfx, p.pid, run_id)}
    assert mine == set(), f"the refused resume made labs {mine} (namespaces {new_ns}, dirs {new_dirs})"


def test_the_run_lock_is_free_once_its_owner_is_killed(locked_run):
    run_dir, owner = locked_run
    other = results.RunStore(run_dir)
    with pytest.raises(HarnessError, match=rf"run is being written by pid {owner.pid}, which is still running"):
        other.lock()
    assert other._lock_fd is None              # a refused lock keeps nothing open

    owner.proc.send_signal(signal.SIGKILL)     # no clean-up of its own: the kernel drops the flock
    assert owner.proc.wait(timeout=TIMEOUT) == -signal.SIGKILL

    store = results.RunStore(run_dir)
    try:
        store.lock()
        assert (run_dir / ".lock").read_text() == f"{os.getpid()}\n"
    finally:
        store.unlock()
    # Released: the next writer (another process) takes it.
    p = subprocess.run([sys.executable, "-c", "import sys; from harness.results import RunStore; "
                        "RunStore.open(sys.argv[1]).lock(); print('locked')", str(run_dir)],
                       cwd=ROOT, capture_output=True, text=True, timeout=TIMEOUT)
    assert p.returncode == 0 and p.stdout.strip() == "locked", p.stderr


# ------------------------------------------------------------------ one run measuring per machine

def _until(cond, what: str, timeout: float = TIMEOUT):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = cond()
        if v:
            return v
        time.sleep(0.02)
    pytest.fail(f"{what}: not within {timeout} s")


def _holder(path: pathlib.Path) -> dict:
    return json.loads(path.read_text())


@pytest.mark.parametrize("quiet", [False, True], ids=["says-whom-it-waits-for", "quiet"])
def test_a_second_run_waits_for_the_machine_lock_until_the_first_releases_it(tmp_path, children, quiet):
    lock = tmp_path / "overlaybench" / "measure.lock"      # not /run/overlaybench: real runs go on there
    first = children("-c", MACHINE, str(lock), "run-first", "loud")
    held = first.expect("stdout")
    assert held.startswith("held "), held
    assert _holder(lock) == {"run_id": "run-first", "pid": first.pid}

    second = children("-c", MACHINE, str(lock), "run-second", "quiet" if quiet else "loud")
    if not quiet:
        waiting = second.expect("stderr")
        assert waiting == (f"waiting: run run-first (pid {first.pid}) is measuring on this machine; two runs at "
                           f"once would spoil both runs' ratios (--concurrent runs anyway)"), waiting
    # The kernel has it waiting on this very lock, and it has not returned.
    _until(lambda: second.pid in flock_waiters(lock), "the second process blocked in flock on the lock")
    assert second.proc.poll() is None and second.pending("stdout") == []
    assert _holder(lock) == {"run_id": "run-first", "pid": first.pid}

    first.send("release\n")
    released = first.expect("stdout")
    assert released.startswith("released "), released
    took = second.expect("stdout")
    assert took.startswith("held "), took
    assert float(took.split()[1]) >= float(released.split()[1]), (released, took)   # one clock: CLOCK_MONOTONIC
    assert _holder(lock) == {"run_id": "run-second", "pid": second.pid}
    assert second.pid not in flock_waiters(lock)

    assert first.finish() == 0 and second.finish() == 0
    assert first.lines["stderr"] == []                      # it never waited
    if quiet:
        assert second.lines["stderr"] == []
    else:
        assert len(second.lines["stderr"]) == 2 and re.fullmatch(r"waited \d+ s", second.lines["stderr"][1]), \
            second.lines["stderr"]


# ------------------------------------------------------------------ what two writers leave

def _run_with_lines(root: pathlib.Path, extra: list[int]) -> pathlib.Path:
    """A run whose writer wrote 4 distinct (case, repeat, metric) lines: one case twice (two
    repeats), one case with two metrics in a repeat; then the lines at `extra` again, as a
    second writer of the same run would have."""
    store = results.RunStore.create(root, {"scenario": {}})
    try:
        store.append([_measurement("a", 0), _measurement("a", 0, "retransmits", 2)])
        store.append([_measurement("a", 1)])
        store.append([_measurement("b", 0)])
    finally:
        store.unlock()
    p = store.path / "measurements.jsonl"
    lines = p.read_text().splitlines(keepends=True)
    assert len(lines) == 4
    with open(p, "a") as f:
        f.writelines(lines[i] for i in extra)
    return store.path


def test_duplicated_lines_are_counted_and_reported_by_load(tmp_path, caplog):
    clean = _run_with_lines(tmp_path / "clean", [])
    dup = _run_with_lines(tmp_path / "dup", [0, 0, 2])      # 3 lines repeat an earlier key

    caplog.set_level(logging.WARNING, logger="harness.results")
    assert results.duplicates(results.read_records(clean)) == 0
    df = results.load(clean)
    assert df.attrs["duplicates"] == 0 and len(df) == 4
    assert "repeat an earlier" not in caplog.text

    assert results.duplicates(results.read_records(dup)) == 3
    df = results.load(dup)
    assert df.attrs["duplicates"] == 3
    assert len(df) == 7                                      # every copy is kept
    warnings = [r.getMessage() for r in caplog.records if "repeat an earlier" in r.getMessage()]
    assert warnings == [f"{dup}: 3 measurement line(s) repeat an earlier (case, repeat, metric): two writers "
                        f"wrote this run; every copy is kept in the data"], caplog.text

    # The user sees it too: `show` warns on stderr and still shows the run.
    p = subprocess.run([sys.executable, "-m", "harness.cli", "show", str(dup), "--raw"], cwd=ROOT,
                       capture_output=True, text=True, timeout=TIMEOUT)
    assert p.returncode == 0, p.stderr
    assert "3 measurement line(s) repeat an earlier" in p.stderr
    assert len(p.stdout.strip().splitlines()) == 1 + 7      # header and every line
    p = subprocess.run([sys.executable, "-m", "harness.cli", "show", str(clean), "--raw"], cwd=ROOT,
                       capture_output=True, text=True, timeout=TIMEOUT)
    assert p.returncode == 0 and "repeat an earlier" not in p.stderr, p.stderr


# ------------------------------------------------------------------ --concurrent is documented

def test_run_help_documents_concurrent():
    p = subprocess.run([sys.executable, "-m", "harness.cli", "run", "--help"], cwd=ROOT, capture_output=True,
                       text=True, timeout=TIMEOUT)
    assert p.returncode == 0, p.stderr
    text = " ".join(p.stdout.split())                        # argparse wraps the help
    assert "--concurrent" in text
    assert "measure even while another run measures on this machine" in text
    assert "default: wait for it" in text
