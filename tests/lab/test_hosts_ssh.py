"""SshHost against a real sshd (Debian's OpenSSH in a namespace, see tests/sshd.py).

The "remote machines" are namespaces of this kernel, so a test can check on the remote
side by looking at this machine's /proc and files directly.

Timing: no test sleeps in place of a handshake. A test that needs the remote command to
have reached a point waits for a sign of it (a marker file, a process) with a deadline of
DEADLINE seconds, about 1000 times what it takes under load; upper bounds on elapsed time
are there to catch a hang (the legitimate time plus shell.GRACE plus 20 s), never to
judge speed. Such waits and bounds fail by chance with a probability of about 0.
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import socket
import stat
import threading
import time

import pytest
from sshd import keygen, kill_connection, public_key, ssh_world, start_sshd  # noqa: F401 - the fixture

from conftest import needs_root
from harness.core.errors import (
    CommandError,
    HarnessError,
    SshAuthError,
    SshConnectError,
    SshConnectionLost,
    SshHostKeyError,
    SshSudoError,
)
from harness.hosts import LocalHost, NetnsHost
from harness.hosts.ssh.host import SshHost
from harness.hosts.ssh.shell import GRACE

pytestmark = [needs_root()]

DEADLINE = 30.0   # seconds for a condition that takes milliseconds: it catches a hang only
HANG = GRACE + 20  # added to the legitimate time of a step to make an upper bound of it


@pytest.fixture(scope="module")
def root_host(ssh_world):
    h = SshHost(ssh_world.root.settings())
    yield h
    h.close()


@pytest.fixture(scope="module")
def sudo_host(ssh_world):
    h = SshHost(ssh_world.sudo.settings())
    yield h
    h.close()


@pytest.fixture(params=["root", "sudo"])
def host(request, root_host, sudo_host):
    return root_host if request.param == "root" else sudo_host


def _procs_with(arg: str) -> list[int]:
    """Pids (on this kernel, so on the "remote" too) whose command line holds `arg`."""
    out = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            argv = open(f"/proc/{pid}/cmdline", "rb").read().split(b"\0")
        except OSError:
            continue
        if arg.encode() in argv:
            out.append(int(pid))
    return out


def _until(cond, what: str, within: float = DEADLINE) -> None:
    """Poll `cond` until it holds; fail naming `what` if it does not within `within` s."""
    deadline = time.monotonic() + within
    while not cond():
        assert time.monotonic() < deadline, f"{what}: not within {within:.0f}s"
        time.sleep(0.02)


def _marker(tmp_path) -> str:
    """A path the remote side (root, or root through sudo) touches to say it got somewhere:
    the "remote machines" share this disk."""
    return str(tmp_path / f"mark-{secrets.token_hex(4)}")


def _gone(pid: int, within: float = DEADLINE) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            state = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0]
        except OSError:
            return True
        if state == "Z":
            return True
        time.sleep(0.02)
    return False


# run -----------------------------------------------------------------------------------

def test_run_keeps_exit_code_stdout_and_stderr_apart(host):
    done = host.run(["sh", "-c", "echo out; echo err >&2; printf tail; exit 3"], check=False)
    assert (done.returncode, done.stdout, done.stderr) == (3, "out\ntail", "err\n")
    with pytest.raises(CommandError) as e:
        host.run(["sh", "-c", "echo nope >&2; exit 4"])
    assert e.value.returncode == 4 and str(e.value).startswith(f"{host.name}: ") and "nope" in str(e.value)
    assert host.run(["no-such-tool-here"], check=False).returncode == 127


def test_argv_is_passed_word_for_word(host):
    words = ["a b", "it's", "$HOME", ";rm -rf /tmp/x", "`id`", "*", "", "\\n", "ünï"]
    done = host.run(["printf", "%s|", *words])
    assert done.stdout == "|".join(words) + "|"


def test_input_and_large_output(host):
    text = "first line\nsecond ünïcode\n\nno newline at the end"
    assert host.run(["cat"], input=text).stdout == text
    assert host.run(["wc", "-c"], input="").stdout.strip() == "0"
    big = host.run(["sh", "-c", "head -c 300000 /dev/zero | tr '\\0' x; echo; head -c 5000 /dev/zero | tr '\\0' y >&2"])
    assert big.stdout == "x" * 300000 + "\n" and big.stderr == "y" * 5000


def test_sudo_runs_everything_as_root(sudo_host, ssh_world, tmp_path):
    """Timing: waits for the started command's marker (written after `id -u` printed) with a
    30 s deadline before stopping it: ~0."""
    assert sudo_host.run(["id", "-u"]).stdout.strip() == "0"
    assert sudo_host.run(["sh", "-c", "echo $SUDO_USER"]).stdout.strip() == ssh_world.sudo.user
    mark = _marker(tmp_path)
    p = sudo_host.start(["sh", "-c", f"id -u; touch {mark}; sleep 30"])
    _until(lambda: os.path.exists(mark), "the command's marker")
    assert os.stat(f"/proc/{p.pid}").st_uid == 0
    assert p.stop().stdout.strip() == "0"


def test_twenty_runs_reuse_one_channel(ssh_world):
    h = SshHost(ssh_world.root.settings())
    try:
        h.connect()
        opened = h.channels_opened
        assert opened == 1
        for i in range(20):
            assert h.run(["echo", str(i)]).stdout == f"{i}\n"
        assert h.channels_opened == opened
    finally:
        h.close()


def test_timeout_kills_the_remote_command_and_the_shell_goes_on(host):
    """Timing: `echo started` must run within the 5 s timeout (it takes milliseconds; a 5 s
    stall of a shell under load: below 1e-6); the upper bound only catches a hang: ~0."""
    mark = f"29.{secrets.randbelow(10**6)}"   # an argument no other sleep has
    t0 = time.monotonic()
    done = host.run(["sh", "-c", f"echo started; sleep {mark}; echo never"], timeout=5, check=False)
    assert done.returncode is None and done.stdout == "started\n" and time.monotonic() - t0 < 5 + HANG
    assert _procs_with(mark) == [] or all(_gone(p) for p in _procs_with(mark))
    with pytest.raises(CommandError, match="timed out"):
        host.run(["sleep", mark], timeout=0.5)
    assert host.run(["echo", "alive"]).stdout == "alive\n"


def test_two_threads_share_a_host(ssh_world):
    h = SshHost(ssh_world.sudo.settings())
    errors, results = [], {}

    def work(tag):
        try:
            results[tag] = [h.run(["sh", "-c", f"sleep 0.0{i % 3}; echo {tag}-{i}"]).stdout for i in range(20)]
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)
    try:
        threads = [threading.Thread(target=work, args=(t,)) for t in ("a", "b")]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert errors == []
        for tag in ("a", "b"):
            assert results[tag] == [f"{tag}-{i}\n" for i in range(20)]
        assert h.channels_opened <= 2
    finally:
        h.close()


# background processes ----------------------------------------------------------------------

def test_start_poll_wait_stop(host):
    """Timing: bounds and waits only catch a hang (30 s and more): ~0."""
    p = host.start(["sleep", "30"])
    assert p.pid and p.pgid == p.pid and p.poll() is None
    assert open(f"/proc/{p.pid}/comm").read().strip() == "sleep"
    with pytest.raises(TimeoutError):
        p.wait(0.3)
    t0 = time.monotonic()
    done = p.stop()
    assert done.returncode == -signal.SIGTERM and time.monotonic() - t0 < 5 + HANG
    assert _gone(p.pid) and p.stop() is done and p.poll() == -signal.SIGTERM

    q = host.start(["sh", "-c", "echo hi; echo oops >&2; exit 4"])
    done = q.wait(DEADLINE)
    assert (done.returncode, done.stdout, done.stderr) == (4, "hi\n", "oops\n")
    assert q.poll() == 4 and q.stop() is done and q.argv == ["sh", "-c", "echo hi; echo oops >&2; exit 4"]
    missing = host.start(["no-such-tool-here"]).wait(DEADLINE)
    assert missing.returncode == 127 and "no-such-tool-here" in missing.stderr


def test_poll_sees_an_exit_without_collecting(host):
    """Timing: one wait for the exit, with a 30 s deadline: ~0."""
    p = host.start(["sh", "-c", "echo done"])
    deadline = time.monotonic() + DEADLINE
    while p.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert p.poll() == 0
    assert p.wait(0).stdout == "done\n"


def test_stop_kills_the_whole_group(host):
    """Timing: waits for both sleeps (30 s deadline) and for their end (30 s each): ~0."""
    a, b = f"31.{secrets.randbelow(10**6)}", f"32.{secrets.randbelow(10**6)}"
    p = host.start(["sh", "-c", f"sleep {a} & sleep {b}; wait"])
    deadline = time.monotonic() + DEADLINE
    while (not _procs_with(a) or not _procs_with(b)) and time.monotonic() < deadline:
        time.sleep(0.05)
    kids = _procs_with(a) + _procs_with(b)
    assert len(kids) == 2
    p.stop()
    assert all(_gone(k) for k in kids)


def test_stop_escalates_to_kill(host, tmp_path):
    """Timing: TERM is sent only once the marker says the trap is installed (30 s deadline);
    the lower bound is the mechanics (the 0.5 s grace is waited), the upper one catches a
    hang only: ~0."""
    mark = _marker(tmp_path)
    p = host.start(["sh", "-c", f"trap '' TERM; echo ready; touch {mark}; while :; do sleep 0.1; done"])
    _until(lambda: os.path.exists(mark), "the TERM trap's marker")
    t0 = time.monotonic()
    done = p.stop(timeout=0.5)
    assert done.returncode == -signal.SIGKILL and 0.4 < time.monotonic() - t0 < 0.5 + HANG
    assert done.stdout == "ready\n"


def test_iperf3_server_stops_on_term_of_its_group(root_host):
    """Timing: waits for the listening socket (30 s deadline); the bound on the stop only
    catches a hang, and SIGKILL is what shows an ignored TERM. iperf3 prints "Server
    listening" a few instructions after listen(): TERM could overtake it only if iperf3 were
    descheduled in that window for longer than the `ss` round trip and the stop call
    (milliseconds over SSH): far below 1e-5."""
    port = str(20000 + secrets.randbelow(20000))
    srv = root_host.start(["iperf3", "-s", "-p", port])
    deadline = time.monotonic() + DEADLINE
    while not root_host.run(["ss", "-Hltn", f"sport = :{port}"]).stdout.strip():
        assert time.monotonic() < deadline and srv.poll() is None
        time.sleep(0.05)
    t0 = time.monotonic()
    done = srv.stop()
    assert time.monotonic() - t0 < 5 + HANG and done.returncode != -signal.SIGKILL
    assert "Server listening" in done.stdout and _gone(srv.pid)
    assert root_host.run(["ss", "-Hltn", f"sport = :{port}"]).stdout.strip() == ""


def test_signal_reaches_the_process(host, tmp_path):
    """Timing: USR1 is sent only once the marker says the trap is installed (30 s deadline): ~0."""
    mark = _marker(tmp_path)
    p = host.start(["sh", "-c", f"trap 'echo usr1; exit 7' USR1; echo ready; touch {mark}; "
                                "while :; do sleep 0.05; done"])
    _until(lambda: os.path.exists(mark), "the USR1 trap's marker")
    p.signal(signal.SIGUSR1)
    done = p.wait(DEADLINE)
    assert done.returncode == 7 and done.stdout == "ready\nusr1\n"
    with pytest.raises(ProcessLookupError):
        p.signal(signal.SIGUSR1)


def test_cpu_seconds_of_a_busy_process(host):
    """Timing: the wall clock is read before each start and after each end, so a process's
    CPU time cannot exceed it; the 0.5 s slack says "at most one CPU" (a count of two CPUs
    would be double the 1.5 s), not a speed. The lower bounds are CPU time, not wall time:
    the counting loop costs 0.09-0.14 s of CPU here, against 0.02; `sleep`'s exec a
    millisecond or two, against 0.15 (its 0.3 s of wall time must not count): ~0."""
    t0 = time.monotonic()
    p = host.start(["sh", "-c", "while :; do :; done"])
    time.sleep(1.5)
    f = open(f"/proc/{p.pid}/stat").read().rsplit(")", 1)[1].split()
    seen = (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")
    p.stop()
    wall = time.monotonic() - t0
    # At least what the kernel had counted just before the stop, at most the wall time (one
    # thread); how much of a CPU it got depends on what else this machine runs.
    assert p.cpu_seconds is not None and max(seen - 0.02, 0.01) <= p.cpu_seconds <= wall + 0.5

    t0 = time.monotonic()
    q = host.start(["sh", "-c", "i=0; while [ $i -lt 100000 ]; do i=$((i+1)); done"])
    q.wait(DEADLINE)
    assert 0.02 < q.cpu_seconds <= time.monotonic() - t0 + 0.5
    r = host.start(["sleep", "0.3"])
    r.wait(DEADLINE)
    assert r.cpu_seconds < 0.15


@pytest.mark.parametrize("missing", [("bash",), ("bash", "setsid")])
def test_a_host_without_bash(ssh_world, tmp_path, missing):
    """A minimal host: sh and coreutils, perhaps not even setsid (here: a PATH without them).
    Timing: waits are conditions with 30 s deadlines; "still there after 0.2 s" is about a
    sleep of 33 s or more: ~0."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    os.chmod(tmp_path, 0o755)
    for name in os.listdir("/usr/bin"):
        if name not in missing:
            os.symlink(f"/usr/bin/{name}", bin_dir / name)

    class Minimal(SshHost):
        def _shell_command(self):
            return f"env PATH={bin_dir} sh"
    h = Minimal(ssh_world.root.settings())
    try:
        assert h.run(["sh", "-c", "command -v bash || echo none"]).stdout == "none\n"
        assert h.grouped == ("setsid" not in missing)
        a, b = f"33.{secrets.randbelow(10**6)}", f"34.{secrets.randbelow(10**6)}"
        p = h.start(["sh", "-c", f"sleep {a} & exec sleep {b}"])
        assert p.pgid == (p.pid if h.grouped else None)
        deadline = time.monotonic() + DEADLINE
        while not (_procs_with(a) and _procs_with(b)):
            assert time.monotonic() < deadline
            time.sleep(0.02)
        (left,), (main,) = _procs_with(a), _procs_with(b)
        assert main == p.pid   # sh exec'd the second sleep
        assert p.stop().returncode == -signal.SIGTERM and _gone(main)
        if h.grouped:
            assert _gone(left)
        else:   # no group to signal: the process itself stops, what it left behind does not
            assert not _gone(left, within=0.2)
            os.kill(left, signal.SIGKILL)
        q = h.start(["sh", "-c", "i=0; while [ $i -lt 100000 ]; do i=$((i+1)); done; echo counted"])
        done = q.wait(DEADLINE)
        assert done.stdout == "counted\n" and q.cpu_seconds > 0.02
        assert h.run(["sleep", "30"], timeout=0.5, check=False).returncode is None
    finally:
        h.close()


def test_clk_tck_is_the_hosts(host):
    host.connect()
    assert host.clk_tck == os.sysconf("SC_CLK_TCK")


# files ---------------------------------------------------------------------------------

def test_put_get_round_trip(root_host, tmp_path):
    data = secrets.token_bytes(200_000) + b"\n\0\xff end"
    src, back = tmp_path / "src.bin", tmp_path / "back.bin"
    src.write_bytes(data)
    remote_dir = root_host.run(["mktemp", "-d", "/tmp/obssh-put-XXXXXX"]).stdout.strip()
    try:
        remote = f"{remote_dir}/file.bin"
        root_host.put(str(src), remote, 0o640)
        assert stat.S_IMODE(os.stat(remote).st_mode) == 0o640
        root_host.get(remote, str(back))
        assert back.read_bytes() == data
        root_host.put(str(src), remote, 0o755)   # over an existing file
        assert stat.S_IMODE(os.stat(remote).st_mode) == 0o755
        with pytest.raises(CommandError, match=f"^{root_host.name}: .*No such file"):
            root_host.get(f"{remote_dir}/missing", str(back))
    finally:
        root_host.run(["rm", "-rf", remote_dir])


def test_put_get_root_owned_paths_through_sudo(sudo_host, ssh_world, tmp_path):
    src, back = tmp_path / "src", tmp_path / "back"
    src.write_text("for root only\n")
    remote_dir = f"/run/obssh-put-{secrets.token_hex(3)}"
    sudo_host.run(["mkdir", "-m", "700", remote_dir])
    try:
        assert os.stat(remote_dir).st_uid == 0
        remote = f"{remote_dir}/secret"
        sudo_host.put(str(src), remote, 0o600)
        st = os.stat(remote)
        assert (st.st_uid, stat.S_IMODE(st.st_mode)) == (0, 0o600)
        sudo_host.get(remote, str(back))
        assert back.read_text() == "for root only\n"
        sudo_host.run(["sh", "-c", f"echo made by root > {remote_dir}/r; chmod 600 {remote_dir}/r"])
        sudo_host.get(f"{remote_dir}/r", str(back))
        assert back.read_text() == "made by root\n"
    finally:
        sudo_host.run(["rm", "-rf", remote_dir])


def test_close_removes_the_hosts_remote_files_and_reconnects_later(ssh_world):
    """Timing: one wait, with a 30 s deadline: ~0."""
    h = SshHost(ssh_world.sudo.settings())
    tmp = f"/tmp/obssh-src-{secrets.token_hex(3)}"
    open(tmp, "w").write("x")
    try:
        h.start(["true"]).wait(DEADLINE)
        h.put(tmp, f"{tmp}.copy")
        assert os.path.isdir(h.state_dir)
        h.close()
        assert not os.path.exists(h.state_dir) and not os.path.exists(h._upload_dir)
        assert h.run(["echo", "again"]).stdout == "again\n"
    finally:
        h.close()
        for f in (tmp, f"{tmp}.copy"):
            if os.path.exists(f):
                os.unlink(f)


# a namespace on the remote host ----------------------------------------------------------

def test_netns_host_over_ssh(sudo_host, ssh_world, tmp_path):
    """Timing: one wait, for `ip netns exec` to exec, with a 30 s deadline: ~0."""
    ns = f"{ssh_world.prefix}-7"   # made on the "remote machine": this kernel, our prefix
    sudo_host.run(["ip", "netns", "add", ns])
    try:
        inner = NetnsHost(ns, name="c9", host=sudo_host)
        links = inner.run(["ip", "-o", "link", "show"]).stdout
        assert [ln.split(":")[1].strip() for ln in links.splitlines()] == ["lo"]
        inner.run(["ip", "link", "set", "lo", "up"])
        inner.run(["ping", "-c", "1", "-W", "30", "127.0.0.1"])
        with pytest.raises(CommandError) as e:
            inner.run(["ip", "link", "show", "nosuchdev"])
        assert str(e.value).startswith("c9: `ip link show nosuchdev`")
        p = inner.start(["sleep", "30"])
        assert p.argv == ["sleep", "30"]
        deadline = time.monotonic() + DEADLINE   # `ip netns exec` enters the namespace, then execs sleep
        while str(p.pid) not in sudo_host.run(["ip", "netns", "pids", ns]).stdout.split():
            assert time.monotonic() < deadline
            time.sleep(0.02)
        assert p.stop().returncode == -signal.SIGTERM
        src = tmp_path / "f"
        src.write_text("via netns\n")
        inner.put(str(src), f"/run/{ns}.f", 0o600)
        inner.get(f"/run/{ns}.f", str(tmp_path / "g"))
        assert (tmp_path / "g").read_text() == "via netns\n"
        assert inner.which("ip") and inner.which("no-such-tool") is None
    finally:
        sudo_host.run(["rm", "-f", f"/run/{ns}.f"], check=False)
        sudo_host.run(["ip", "netns", "del", ns], check=False)
    assert ns not in sudo_host.run(["ip", "netns", "list"]).stdout


# reconnect -----------------------------------------------------------------------------

def test_reconnect_after_the_connection_is_killed(ssh_world):
    """Timing: the connection is killed only once the running command is seen on the remote
    side (so it is on the wire, not a command the retry may resend), and it has 30 s left to
    run then; "noticed the drop" and the other waits have 30 s deadlines: ~0."""
    h = SshHost(ssh_world.root.settings())
    running: list[int] = []
    try:
        shell = int(h.run(["sh", "-c", "echo $PPID"]).stdout)   # the control shell
        bg = h.start(["sleep", "30"])
        assert h.connected
        chain = kill_connection(ssh_world.root.sshd, shell)
        assert chain and all(_gone(p) for p in chain)
        _until(lambda: not h.connected, "the drop noticed")
        # The next command reconnects.
        assert h.run(["echo", "back"]).stdout == "back\n" and h.connected
        assert h.channels_opened >= 2
        # A background process started before the drop is still known and can be stopped.
        assert bg.poll() is None and bg.stop().returncode == -signal.SIGTERM

        # A command that is running when the connection drops fails, naming the host.
        shell = int(h.run(["sh", "-c", "echo $PPID"]).stdout)
        mark = f"35.{secrets.randbelow(10**6)}"   # an argument no other sleep has
        failure = []

        def long():
            try:
                h.run(["sleep", mark])
            except HarnessError as e:
                failure.append(e)
        t = threading.Thread(target=long)
        t.start()
        def on_the_remote() -> bool:
            running[:] = _procs_with(mark)
            return bool(running)
        _until(on_the_remote, "the remote sleep")
        kill_connection(ssh_world.root.sshd, shell)
        t.join(DEADLINE)
        assert not t.is_alive() and len(failure) == 1 and isinstance(failure[0], SshConnectionLost)
        assert str(failure[0]) == f"{h.name}: connection lost while running `sleep {mark}`"
        assert h.run(["echo", "again"]).stdout == "again\n"
    finally:
        h.close()
        for pid in set(running) & set(_procs_with(mark)):   # it outlives the dropped connection
            os.kill(pid, signal.SIGKILL)


def test_reconnect_gives_up_after_its_attempts(ssh_world, tmp_path):
    """Timing: the lower bound is the mechanics (both delays are waited); the upper one only
    catches a hang (the number of attempts is in the message): ~0."""
    target = ssh_world.root
    own = start_sshd(target.space.netns, target.space.addr, tmp_path / "sshd",
                     {"root": [public_key(ssh_world.user_key)]}, port=2222)
    known = tmp_path / "known_hosts"
    known.write_text(own.known_hosts_line())
    h = SshHost(target.settings(port=2222, known_hosts=str(known)))
    h.reconnect_delays = (0.1, 0.2)
    try:
        assert h.run(["echo", "up"]).stdout == "up\n"
        own.stop()   # the listener and the connection: nothing to come back to
        # The first command may go out before the drop is noticed (then it fails as lost
        # while running); at the latest the next one tries to reconnect, and gives up.
        with pytest.raises(SshConnectionLost) as e:
            h.run(["echo", "again"])
        if "while running" in str(e.value):
            with pytest.raises(SshConnectionLost) as e:
                h.run(["echo", "again"])
        t0 = time.monotonic()
        with pytest.raises(SshConnectionLost):
            h.run(["echo", "and again"])
        assert 0.3 <= time.monotonic() - t0 < 0.3 + HANG   # the two delays, and no hang
        assert str(e.value) == (f"{h.name}: connection lost, and 3 attempts to reconnect failed: connection "
                                f"refused by {target.space.addr}:2222 (no SSH server on that port)")
    finally:
        h.close()
        own.stop()
        shutil.rmtree(h.state_dir, ignore_errors=True)   # close() could not reach it: the server is gone


# one line for every bad input --------------------------------------------------------------

def _fails(settings, kind, *fragments, within: float = HANG):
    """The connection fails with one line; `within` only catches a hang (it is the
    connect timeout plus 20 s and more): these tests fail by chance with probability ~0."""
    h = SshHost(settings)
    t0 = time.monotonic()
    try:
        with pytest.raises(kind) as e:
            h.connect()
    finally:
        h.close()
    msg = str(e.value)
    assert isinstance(e.value, HarnessError) and time.monotonic() - t0 < within
    assert "\n" not in msg and msg.startswith(f"{settings.name}: ")
    for f in fragments:
        assert f in msg, msg
    return msg


def test_unreachable_address_times_out(ssh_world):
    """Timing: nobody answers for the address, so the 1 s connect timeout is what ends it
    (the kernel's own ARP failure takes 3 s); the bound only catches a hang: ~0."""
    target = ssh_world.root
    _fails(target.settings(hostname=target.space.silent_addr, connect_timeout=1), SshConnectError,
           "no answer from", "within 1s", within=1 + 20)


@pytest.mark.slow
def test_unreachable_address_no_route(ssh_world):
    """Timing: the kernel's ARP failure (~3 s) against a 30 s connect timeout; the bound only
    catches a hang: ~0."""
    target = ssh_world.root   # nobody answers ARP for it: the kernel gives up after ~3 s
    # The connect timeout is ten times that, so the kernel's answer always comes first.
    _fails(target.settings(hostname=target.space.silent_addr, connect_timeout=30), SshConnectError,
           "cannot reach", "No route to host", within=30 + 20)


def test_no_ssh_server_behind_an_open_port(ssh_world):
    """Timing: the silent server never sends a banner, so the 1 s timeout always ends it; the
    bound only catches a hang: ~0."""
    target = ssh_world.root
    with socket.socket() as silent:   # accepts connections and never says a word
        silent.bind((target.space.root_addr, 0))
        silent.listen()
        _fails(target.settings(hostname=target.space.root_addr, port=silent.getsockname()[1],
                               connect_timeout=1), SshConnectError, "no SSH server answered", within=1 + 20)


def test_connection_refused(ssh_world):
    _fails(ssh_world.root.settings(port=2), SshConnectError, "connection refused", ":2")


def test_wrong_key(ssh_world):
    _fails(ssh_world.root.settings(key_file=ssh_world.other_key), SshAuthError, "refused the login",
           ssh_world.other_key)
    _fails(ssh_world.root.settings(key_file="/nonexistent/key"), SshAuthError, "does not exist")


def test_unknown_host_key_needs_the_flag(ssh_world, tmp_path):
    known = tmp_path / "known_hosts"
    known.write_text("")
    target = ssh_world.root
    _fails(target.settings(known_hosts=str(known)), SshHostKeyError, "is not in", "--accept-new-host-keys",
           "SHA256:")
    assert known.read_text() == ""
    h = SshHost(target.settings(known_hosts=str(known), accept_new_host_keys=True))
    try:
        assert h.run(["echo", "ok"]).stdout == "ok\n"
    finally:
        h.close()
    assert known.read_text().split() == target.sshd.known_hosts_line().split()[:3]   # no comment
    h = SshHost(target.settings(known_hosts=str(known)))   # now known: no flag needed
    try:
        h.connect()
    finally:
        h.close()


def test_changed_host_key_is_refused_even_with_the_flag(ssh_world, tmp_path):
    target = ssh_world.root
    impostor = keygen(tmp_path / "other_host_key")
    known = tmp_path / "known_hosts"
    known.write_text(target.sshd.known_hosts_line(impostor))
    for flag in (False, True):
        _fails(target.settings(known_hosts=str(known), accept_new_host_keys=flag), SshHostKeyError,
               "CHANGED", "ssh-keygen -R")
    assert known.read_text() == f"{target.space.addr} {public_key(impostor)}\n"


def test_no_sudo_right(ssh_world):
    _fails(ssh_world.nosudo.settings(), SshSudoError, ssh_world.nosudo.user, "sudo -n true")


def test_ssh_config_is_honoured(ssh_world, tmp_path):
    target = ssh_world.sudo
    config = tmp_path / "config"
    config.write_text(f"Host obssh-alias\n  HostName {target.space.addr}\n  Port {target.sshd.port}\n"
                      f"  User {target.user}\n  IdentityFile {ssh_world.user_key}\n")
    h = SshHost(target.settings(hostname="obssh-alias", port=None, user=None, key_file=None, sudo=False,
                                ssh_config=str(config)))
    try:
        assert h.run(["id", "-un"]).stdout.strip() == target.user
    finally:
        h.close()
    # Its Port is used too (explicit settings would win over it).
    config.write_text(f"Host obssh-alias\n  HostName {target.space.addr}\n  Port 2\n")
    _fails(target.settings(hostname="obssh-alias", port=None, ssh_config=str(config)), SshConnectError,
           f"connection refused by {target.space.addr}:2")


# the local side of the contract -------------------------------------------------------------

def test_local_process_signal_and_local_get(tmp_path):
    """Timing: USR1 is sent only once the marker says the trap is installed (30 s deadline): ~0."""
    h = LocalHost()
    mark = _marker(tmp_path)
    p = h.start(["sh", "-c", f"trap 'echo usr1; exit 7' USR1; touch {mark}; while :; do sleep 0.05; done"])
    _until(lambda: os.path.exists(mark), "the USR1 trap's marker")
    assert p.pgid == p.pid
    p.signal(signal.SIGUSR1)
    assert p.wait(DEADLINE).stdout == "usr1\n" and p.cpu_seconds is not None
    with pytest.raises(ProcessLookupError):
        p.signal(signal.SIGUSR1)
    (tmp_path / "a").write_text("x")
    h.get(str(tmp_path / "a"), str(tmp_path / "b"))
    assert (tmp_path / "b").read_text() == "x"
    with pytest.raises(CommandError):
        h.get(str(tmp_path / "missing"), str(tmp_path / "c"))
