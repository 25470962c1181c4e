"""The unix socket tunnel (harness/hosts/tunnel.py) over a real SSH connection to a real
sshd: bytes go through both ways, and ending streams from every side at once (the client,
the remote command, the tunnel's own close) never costs the connection they share.

OpenSSH drops a whole connection when an EOF arrives for a channel it has closed; the
tunnel once sent one when a client hung up while the tunnel was closing, and the run's
other commands on that host died with it.
"""

from __future__ import annotations

import socket
import threading
import time

import pytest
from paramiko.common import cMSG_CHANNEL_EOF
from sshd import ssh_world  # noqa: F401 - the fixture

from conftest import needs_root
from harness.hosts.ssh.host import SshHost
from harness.hosts.tunnel import UnixTunnel

pytestmark = [needs_root()]


@pytest.fixture
def thread_errors():
    """Exceptions that escaped any thread while the test ran."""
    seen: list[str] = []
    old = threading.excepthook
    threading.excepthook = lambda a: seen.append(f"{a.thread.name if a.thread else '?'}: {a.exc_type.__name__}")
    yield seen
    threading.excepthook = old


@pytest.fixture(params=["root", "sudo"])
def host(request, ssh_world):
    h = SshHost(getattr(ssh_world, request.param).settings())
    yield h
    h.close()


def _client(path: str) -> socket.socket:
    c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    c.settimeout(20)
    c.connect(path)
    return c


def _echo(c: socket.socket, payload: bytes) -> bytes:
    c.sendall(payload)
    got = b""
    while len(got) < len(payload):
        chunk = c.recv(65536)
        if not chunk:
            break
        got += chunk
    return got


def _same_connection(host: SshHost, transport) -> None:
    assert host.connected and host._transport() is transport, "the SSH connection was lost"
    assert host.run(["echo", "still here"]).stdout == "still here\n"


def test_bytes_go_both_ways_and_a_half_close_reaches_the_command(host, thread_errors):
    t = UnixTunnel(lambda: host.stream(["sh", "-c", "wc -c; echo done"]), name="t")
    try:
        c = _client(t.path)
        c.sendall(b"x" * 300_000)
        c.shutdown(socket.SHUT_WR)          # the command's stdin ends, so wc answers
        out = b""
        while chunk := c.recv(65536):
            out += chunk
        c.close()
        assert out.split() == [b"300000", b"done"]
    finally:
        t.close()
    assert thread_errors == []


def test_clients_hanging_up_while_the_tunnel_closes_never_drop_the_connection(host, thread_errors):
    """Twenty rounds of: eight streams open and echo, then every client hangs up and the
    tunnel closes at once, as a Docker client and its tunnel do at a testbed's teardown."""
    transport = host._transport()
    for _ in range(20):
        t = UnixTunnel(lambda: host.stream(["cat"]), name="t")
        clients = [_client(t.path) for _ in range(8)]
        for i, c in enumerate(clients):
            assert _echo(c, b"ping %d" % i) == b"ping %d" % i
        for c in clients:
            c.close()
        t.close()
    _same_connection(host, transport)
    assert thread_errors == []


def test_commands_ending_as_their_clients_hang_up_never_drop_the_connection(host, thread_errors):
    """The far end finishes (its EOF and close on the way) just as the client hangs up."""
    transport = host._transport()
    t = UnixTunnel(lambda: host.stream(["head", "-c", "4"]), name="t")
    try:
        for _ in range(60):
            c = _client(t.path)
            assert _echo(c, b"ping") == b"ping"
            c.close()
    finally:
        t.close()
    _same_connection(host, transport)
    assert thread_errors == []


def test_close_with_streams_open_leaves_no_socket_and_refuses_new_clients(host):
    t = UnixTunnel(lambda: host.stream(["cat"]), name="t")
    c = _client(t.path)
    assert _echo(c, b"hi") == b"hi"
    t.close()
    assert c.recv(10) == b""                # the stream was ended, the client reads its end
    c.close()
    with pytest.raises(OSError):
        _client(t.path)


CONNECT_AND_SEND = """
import socket, sys
c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
c.settimeout(10)
c.connect(sys.argv[1])
try:
    c.sendall(b"hello")
    got = c.recv(100)
except (BrokenPipeError, ConnectionResetError):
    got = b""                       # closed at once: no stream behind it
print(repr(got))
"""


def test_a_client_of_another_uid_gets_no_stream(tmp_path):
    """The socket's directory opened up to everyone (as a mistake would): a process of
    another uid (nobody) connects, and no stream is opened for it; one of this uid still
    gets one."""
    import os
    import subprocess
    import sys
    opened = []

    def opener():
        opened.append(1)
        raise RuntimeError("no stream here")
    t = UnixTunnel(opener, name="peercred")
    try:
        os.chmod(t.dir, 0o755)
        os.chmod(t.path, 0o777)
        other = subprocess.run(["/usr/bin/python3", "-c", CONNECT_AND_SEND, t.path], user=65534, capture_output=True,
                               text=True, timeout=30)
        assert other.returncode == 0 and other.stdout.strip() == "b''", other.stderr
        assert opened == [] and t.errors == ["refused a connection from uid 65534"], (opened, t.errors)
        mine = subprocess.run([sys.executable, "-c", CONNECT_AND_SEND, t.path], capture_output=True, text=True,
                              timeout=30)
        assert mine.returncode == 0 and opened == [1], (mine.stderr, opened)
    finally:
        t.close()


def test_an_eof_held_up_on_its_way_out_is_never_overtaken_by_the_close(host, thread_errors, monkeypatch):
    """The race itself, made certain rather than likely: every EOF this connection sends
    waits 3 s between being built and going out, while the remote command ends after 1 s
    by itself (its EOF and CLOSE come meanwhile). Sent outside the channel's lock, paramiko's
    answering CLOSE would go out first and OpenSSH would drop the connection; under it the
    CLOSE waits. Deterministic: nothing here depends on timing but the order it forces
    (a pump delayed past the command's end sees its EOF and sends none: a pass either way)."""
    transport = host._transport()
    send = transport._send_user_message

    def held_up(m):
        if m.asbytes()[:1] == cMSG_CHANNEL_EOF:
            time.sleep(3)
        return send(m)

    monkeypatch.setattr(transport, "_send_user_message", held_up)
    t = UnixTunnel(lambda: host.stream(["sleep", "1"]), name="t")
    try:
        c = _client(t.path)
        c.shutdown(socket.SHUT_WR)          # the client is done at once: the tunnel sends EOF
        assert c.recv(10) == b""            # the command ended and its stream with it
        c.close()
    finally:
        t.close()
    monkeypatch.setattr(transport, "_send_user_message", send)
    _same_connection(host, transport)
    assert thread_errors == []
