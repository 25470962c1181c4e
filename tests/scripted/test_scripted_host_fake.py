"""ScriptedHost itself: matching, answers, the messages of a script that does not fit, its
processes; and the scripted testbeds' names against the real testbeds'. No root, no waits."""

from __future__ import annotations

import re
import signal

import pytest
from scripted_fixtures import lab_sides, remote_sides

from harness.bed import Options
from harness.core.errors import CommandError, HarnessError
from harness.hosts.base import Completed
from harness.hosts.scripted import ScriptedHost, ScriptedProcess
from harness.testbeds.inventory import HostSpec
from harness.testbeds.lab import Lab
from harness.testbeds.remote import RemoteTestbed


def test_commands_are_answered_in_order_from_the_script():
    h = ScriptedHost("h0")
    h.expect("ip link add vx0 type vxlan id 42")
    h.expect(["bridge", "fdb", "show", "dev", "vx0"], stdout="00:00:00:00:00:00 dst 10.0.0.2\n")
    h.expect(re.compile(r"ip link del \S+"), returncode=1, stderr="Cannot find device\n")
    assert h.run(["ip", "link", "add", "vx0", "type", "vxlan", "id", "42"]).ok
    assert h.run(["bridge", "fdb", "show", "dev", "vx0"]).stdout.startswith("00:00")
    done = h.run(["ip", "link", "del", "vx0"], check=False)
    assert (done.returncode, done.stderr, done.argv) == (1, "Cannot find device\n", ["ip", "link", "del", "vx0"])
    h.assert_all_used()
    assert h.transcript() == ["run: ip link add vx0 type vxlan id 42", "run: bridge fdb show dev vx0",
                              "run: ip link del vx0"]


def test_a_command_out_of_order_fails_naming_it_what_was_next_and_what_ran():
    h = ScriptedHost("h1")
    h.expect("ip link add vx0 type vxlan id 42")
    h.expect("ip link set vx0 up")
    h.allow(re.compile(r"cat /proc/\d+/stat"))
    with pytest.raises(AssertionError) as e:
        h.run(["ip", "link", "set", "vx0", "up"])
    msg = str(e.value)
    assert msg.splitlines()[0] == "h1: unexpected run: ip link set vx0 up"
    assert "expected next: run: ip link add vx0 type vxlan id 42 -> exit 0" in msg
    assert "then: run: ip link set vx0 up" in msg
    assert "allowed any time: run: /cat /proc/\\d+/stat/" in msg
    # Swallowed by the code under test, it is still the first thing the check reports.
    with pytest.raises(AssertionError, match="unexpected run: ip link set vx0 up"):
        h.assert_all_used()


def test_what_was_expected_but_never_ran_is_named():
    h = ScriptedHost("h0")
    h.expect("ip link add vx0 type vxlan id 42")
    h.expect("ip link set vx0 up")
    h.run(["ip", "link", "add", "vx0", "type", "vxlan", "id", "42"])
    with pytest.raises(AssertionError, match=r"h0: expected but never ran:\n  run: ip link set vx0 up"):
        h.assert_all_used()
    with pytest.raises(AssertionError, match="never ran"):
        with h:
            pass


def test_unordered_scripts_and_standing_answers():
    h = ScriptedHost("h0", ordered=False)
    h.expect("true")
    h.expect("false", returncode=1)
    h.allow(re.compile("cat /proc/stat"), stdout="cpu 1 2 3 4\n", times=2)
    assert h.run(["false"], check=False).returncode == 1
    assert h.run(["cat", "/proc/stat"]).stdout == "cpu 1 2 3 4\n"
    assert h.run(["true"]).ok
    h.run(["cat", "/proc/stat"])
    with pytest.raises(AssertionError, match="unexpected run: cat /proc/stat"):
        h.run(["cat", "/proc/stat"])           # allowed twice, not three times


def test_check_raises_command_error_and_a_timeout_is_returncode_none():
    h = ScriptedHost("h0")
    h.expect("ip link add br0 type bridge", returncode=2, stderr="RTNETLINK answers: File exists\n")
    h.expect("ping -c 1 10.0.0.2", returncode=None)
    with pytest.raises(CommandError, match=r"h0: `ip link add br0 type bridge` exited 2: RTNETLINK answers: File"):
        h.run(["ip", "link", "add", "br0", "type", "bridge"])
    with pytest.raises(CommandError, match="timed out"):
        h.run(["ping", "-c", "1", "10.0.0.2"])


def test_input_is_matched_where_given_and_raises_and_functions_answer():
    h = ScriptedHost("h0")
    h.expect("nft -f -", input="table inet x\n")
    h.expect("true", raises=HarnessError("h0: connection lost"))
    seen = []

    def echo(argv, input):
        seen.append(argv)
        return Completed(argv, 0, "hi\n", "")

    h.expect("echo hi", answer=echo)
    with pytest.raises(AssertionError, match="with input: 'table inet y"):
        h.run(["nft", "-f", "-"], input="table inet y\n")
    h.failures.clear()
    h.run(["nft", "-f", "-"], input="table inet x\n")
    with pytest.raises(HarnessError, match="connection lost"):
        h.run(["true"])
    assert h.run(["echo", "hi"]).stdout == "hi\n" and seen == [["echo", "hi"]]
    h.assert_all_used()


def test_which_and_read_file_go_through_run(tmp_path):
    h = ScriptedHost("h0")
    h.expect(["sh", "-c", 'command -v "$1"', "sh", "wg"], stdout="/usr/bin/wg\n")
    h.expect(["sh", "-c", 'command -v "$1"', "sh", "qperf"], returncode=1)
    h.expect("cat /etc/hostname", stdout="h0\n")
    assert h.which("wg") == "/usr/bin/wg"
    assert h.which("qperf") is None
    assert h.read_file("/etc/hostname") == "h0\n"
    h.assert_all_used()


def test_put_and_get_keep_files(tmp_path):
    h = ScriptedHost("h0")
    src = tmp_path / "key"
    src.write_bytes(b"secret")
    h.put(str(src), "/run/x/key", 0o600)
    assert h.files["/run/x/key"] == (b"secret", 0o600)
    h.get("/run/x/key", str(tmp_path / "back"))
    assert (tmp_path / "back").read_bytes() == b"secret"
    with pytest.raises(CommandError, match="No such file"):
        h.get("/run/x/other", str(tmp_path / "other"))
    assert h.transcript() == ["put: /run/x/key (mode 0600)", "get: /run/x/key", "get: /run/x/other"]
    assert h.commands == []


def test_processes_exit_run_until_stopped_die_and_time_out_without_waiting():
    h = ScriptedHost("h0")
    done = ScriptedProcess.exits(0, stdout="{}", cpu_seconds=1.5)
    server = ScriptedProcess.runs(stderr="bye\n")
    daemon = ScriptedProcess.runs()
    crashed = ScriptedProcess.dies(signal.SIGSEGV, stderr="Segmentation fault\n")
    for p, argv in ((done, ["iperf3", "-c", "x"]), (server, ["qperf", "-lp", "1"]), (daemon, ["sleeve"]),
                    (crashed, ["sleeve", "--basic"])):
        h.expect_start(argv, p)
        assert h.start(argv) is p
    assert done.poll() == 0 and done.wait(5).stdout == "{}" and done.cpu_seconds == 1.5
    assert server.poll() is None
    with pytest.raises(TimeoutError):
        server.wait(17)
    with pytest.raises(AssertionError, match="would never end"):
        server.wait()
    assert server.waits == [17, None]
    out = server.stop()
    assert (out.returncode, out.stderr, server.stopped) == (-signal.SIGTERM, "bye\n", True)
    assert server.stop().returncode == -signal.SIGTERM       # idempotent
    daemon.signal(signal.SIGUSR1)
    daemon.die(signal.SIGKILL)
    assert daemon.poll() == -signal.SIGKILL and daemon.stop().returncode == -signal.SIGKILL
    assert not daemon.stopped
    with pytest.raises(ProcessLookupError):
        daemon.signal(signal.SIGUSR1)
    assert crashed.poll() == -signal.SIGSEGV
    assert len({p.pid for p in (done, server, daemon, crashed)}) == 4
    assert h.transcript()[-2:] == ["stop: qperf -lp 1 (exited -15)", "signal: sleeve (SIGUSR1)"]


def test_a_process_is_answered_once_and_start_needs_a_process():
    h = ScriptedHost("h0")
    p = ScriptedProcess.runs()
    h.expect_start("sleeve", p)
    with pytest.raises(ValueError, match="scripted twice"):
        h.expect_start("sleeve", p)
    with pytest.raises(TypeError):
        h.expect_start("sleeve")


def test_a_shared_journal_keeps_the_order_across_hosts():
    journal = []
    a, b = ScriptedHost("h0", journal=journal), ScriptedHost("h1", journal=journal)
    a.expect("true")
    b.expect("true")
    b.run(["true"])
    a.run(["true"])
    assert [name for name, _ in journal] == ["h1", "h0"]


# ------------------------------------------------------------------ the scripted testbeds

def _names(side) -> dict:
    d = dict(vars(side))
    del d["host"], d["container"]
    return d


def test_the_lab_sides_are_the_labs():
    lab = Lab("ob12ab", 0)
    for mine, real in zip(lab_sides("ob12ab"), lab.sides):
        assert _names(mine) == _names(real)
        assert (mine.host.name, mine.container.name) == (real.host.name, real.container.name)


def test_the_remote_sides_are_a_remote_testbeds(tmp_path):
    specs = tuple(HostSpec(name=f"h{i}", address=f"10.1.0.{i + 1}", underlay_interface="eth1",
                           underlay_address=f"10.1.0.{i + 1}") for i in (0, 1))
    tb = RemoteTestbed(specs, (ScriptedHost("h0"), ScriptedHost("h1")), Options())
    try:
        for mine, real in zip(remote_sides(tb.prefix), tb.sides):
            assert _names(mine) == _names(real)
            assert mine.host.name == real.host.name
    finally:
        tb.teardown()        # nothing was claimed: it only closes the hosts and its directory
    assert all(h.closed and h.calls == [] for h in tb.raw_hosts)
