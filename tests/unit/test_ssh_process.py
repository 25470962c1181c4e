"""SshProcess without a host: it reaches its host through the one call handed in at start,
so a fake call answering with frames stands in for the pooled shells (the real thing is
tests/lab/test_hosts_ssh.py's)."""

from __future__ import annotations

import signal

import pytest

from harness.core.errors import SshError
from harness.hosts.ssh.process import SshProcess
from harness.hosts.ssh.shell import Frame


class FakeCall:
    """Answers each call with the next frame, keeping what was asked."""

    def __init__(self, *frames: Frame):
        self.frames = list(frames)
        self.calls: list[tuple[str, str, list[str], float]] = []

    def __call__(self, what: str, func: str, args: list[str], *, timeout: float) -> Frame:
        self.calls.append((what, func, args, timeout))
        return self.frames.pop(0)


def process(call: FakeCall, clk_tck: int | None = 100) -> SshProcess:
    return SshProcess(call, "h1", clk_tck, ["iperf3", "-s"], "/tmp/ob-x/0", 41, 42, 42)


def test_poll_says_running_then_the_exit_code():
    call = FakeCall(Frame(0, b"", b""), Frame(0, b"137\n", b""))
    p = process(call)
    assert p.poll() is None
    assert p.poll() == -9                   # the shell's 128+9: killed by SIGKILL
    assert p.poll() == -9                   # known now: no further call
    assert [(c[0], c[1], c[2]) for c in call.calls] == [("poll iperf3", "_ob_poll", ["/tmp/ob-x/0", "41", "42"])] * 2


def test_wait_returns_the_output_and_the_cpu_of_the_waited_for_child():
    call = FakeCall(Frame(0, b"- \n", b""), Frame(0, b"0 0m0.500s 0m0.250s\nlistening\n", b"warn\n"))
    p = process(call)
    done = p.wait()
    assert (done.returncode, done.stdout, done.stderr) == (0, "listening\n", "warn\n")
    assert p.cpu_seconds == pytest.approx(0.75)
    assert [c[1] for c in call.calls] == ["_ob_wait", "_ob_wait"]


def test_stop_takes_the_cpu_from_proc_stat_when_times_is_missing():
    stat = "42 (iperf3) S " + " ".join(["0"] * 10 + ["50", "25", "20", "5"] + ["0"] * 5)
    call = FakeCall(Frame(0, f"{stat}\n143 \nbye\n".encode(), b""))
    p = process(call)
    done = p.stop(timeout=2.0)
    assert done.returncode == -15 and done.stdout == "bye\n"
    assert p.cpu_seconds == pytest.approx(1.0)          # (50+25+20+5) ticks at 100 a second
    assert call.calls[0][1] == "_ob_stop" and call.calls[0][3] == pytest.approx(42.0)
    assert p.stop() is done                             # stopped once


def test_stop_without_clk_tck_leaves_the_cpu_unknown():
    stat = "42 (iperf3) S " + " ".join(["0"] * 20)
    p = process(FakeCall(Frame(0, f"{stat}\n143 \n".encode(), b"")), clk_tck=None)
    p.stop()
    assert p.cpu_seconds is None


def test_a_process_that_survives_sigkill_names_its_host():
    p = process(FakeCall(Frame(0, b"\n- \n", b"")))
    with pytest.raises(SshError, match=r"^h1: iperf3 \(pid 42\) survived SIGKILL"):
        p.stop()


def test_signal_to_a_gone_process_names_host_and_pid():
    call = FakeCall(Frame(0, b"", b""), Frame(1, b"", b"kill: No such process\n"))
    p = process(call)
    p.signal(signal.SIGTERM)
    with pytest.raises(ProcessLookupError, match=r"^h1: kill -TERM 42: kill: No such process"):
        p.signal(signal.SIGTERM)
    assert call.calls[0][:3] == ("kill -TERM 42", "_ob_sig", ["TERM", "42"])
