"""A unix socket on this machine whose every connection is piped to a new command stream on
a host (`Host.stream`): a client that only speaks to local sockets (the Docker SDK) reaches
a program on the host (`docker system dial-stdio`) over a connection the harness already
holds, with its settings, keys and sudo.

The socket lives in a 0700 directory of its own, and a connection from a process of
another uid (SO_PEERCRED; root excepted) is closed before any stream is opened for it;
close() stops accepting, closes every stream and removes the directory. Closing never raises: a stream whose connection is gone
is simply gone.

An SSH channel is half-closed (EOF) and closed under one lock of the tunnel's, never after
it is closed: OpenSSH answers an EOF on a channel it has already closed by dropping the
whole connection ("ieof packet referred to nonexistent channel"), every other channel of
the run with it. paramiko's own `shutdown_write` builds the EOF under the channel's lock
but sends it after releasing it, so the CLOSE with which paramiko's transport thread
answers the far end's could overtake it; the tunnel therefore builds and sends the EOF
while it holds the channel's lock (the transport thread takes that lock before it
closes the channel), and sends none once the far end has sent its own EOF or the channel
is closed.
"""

from __future__ import annotations

import logging
import os
import shutil
import socket
import struct
import threading
from typing import Callable

from harness.hosts.local import owned_tempdir

log = logging.getLogger(__name__)

CHUNK = 65536


class UnixTunnel:
    def __init__(self, opener: Callable[[], object], name: str = "tunnel"):
        self.opener, self.name = opener, name
        self.dir = str(owned_tempdir("tunnel"))
        self.path = os.path.join(self.dir, "sock")
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._listener.bind(self.path)
        self._listener.listen(16)
        self._lock = threading.Lock()
        self._open: set = set()
        self._closed = False
        self.errors: list[str] = []          # what streams said on stderr before closing
        threading.Thread(target=self._accept, name=f"{name}-accept", daemon=True).start()

    @property
    def url(self) -> str:
        return f"unix://{self.path}"

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return
            uid = peer_uid(conn)
            if uid not in (os.geteuid(), 0):
                log.warning("%s: refused a connection from uid %s", self.name, uid)
                self.errors.append(f"refused a connection from uid {uid}")
                conn.close()
                continue
            threading.Thread(target=self._serve, args=(conn,), name=f"{self.name}-conn", daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        try:
            stream = self.opener()
        except Exception as e:       # the client sees its connection close; the reason is kept
            log.info("%s: cannot open a stream: %s", self.name, e)
            self.errors.append(str(e))
            conn.close()
            return
        pair = _Pair(conn, stream)
        with self._lock:
            if self._closed:
                pair.close()
                return
            self._open.add(pair)
        up = threading.Thread(target=_pump, args=(conn.recv, stream.sendall, pair.end_stream),
                              name=f"{self.name}-up", daemon=True)
        up.start()
        _pump(stream.recv, conn.sendall, pair.end_conn)
        up.join()
        err = _stderr(stream)
        if err:
            log.debug("%s: stream said: %s", self.name, err)
            self.errors.append(err)
        with self._lock:
            self._open.discard(pair)
        pair.close()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            pairs = list(self._open)
        try:
            self._listener.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._listener.close()
        for pair in pairs:
            pair.close()
        shutil.rmtree(self.dir, ignore_errors=True)


def peer_uid(conn: socket.socket) -> int | None:
    """The uid of the process at the other end of a unix socket (None: not known)."""
    try:
        _, uid, _ = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i")))
    except OSError:
        return None
    return uid


class _Pair:
    """One client connection and its stream, ended in an order the SSH server accepts."""

    def __init__(self, conn: socket.socket, stream):
        self.conn, self.stream = conn, stream
        self._lock = threading.Lock()
        self._closed = False

    def end_stream(self) -> None:
        """The client sent everything: pass its end of file on, unless the stream is closed
        or its far end has already ended (then its close is under way, and an EOF sent
        now could arrive after it)."""
        with self._lock:
            if self._closed or getattr(self.stream, "closed", False) or getattr(self.stream, "eof_received", False):
                return
            _quietly(lambda: _shutdown_write(self.stream))

    def end_conn(self) -> None:
        """The stream sent everything: the client reads its end of file."""
        with self._lock:
            if not self._closed:
                _quietly(lambda: self.conn.shutdown(socket.SHUT_WR))

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            _quietly(self.stream.close)
            # shutdown first: a pump blocked in recv on it wakes, and the client reads its end
            _quietly(lambda: self.conn.shutdown(socket.SHUT_RDWR))
            _quietly(self.conn.close)


def _shutdown_write(stream) -> None:
    """Half-close `stream`. A paramiko channel's EOF is built and sent under the channel's
    own lock, so that no CLOSE of the transport thread's can go out between the two; it is
    not sent once the channel has closed or the far end's EOF has come. (A key exchange
    under way only delays the send: paramiko waits for it, 30 s at most.) Any other
    stream: its own shutdown_write."""
    lock, transport = getattr(stream, "lock", None), getattr(stream, "transport", None)
    build = getattr(stream, "_send_eof", None)
    if lock is None or transport is None or build is None:
        stream.shutdown_write()
        return
    with lock:
        if stream.closed or stream.eof_received:
            return
        m = build()
        if m is not None:
            transport._send_user_message(m)


def _quietly(step) -> None:
    """A step of ending a connection that may already be gone: an OSError from the socket,
    EOFError or SSHException from a transport that has closed."""
    try:
        step()
    except Exception as e:           # paramiko's errors too, without importing paramiko here
        log.debug("ending a tunnel stream: %r", e)


def _pump(recv, send, eof) -> None:
    """Copy until end of file or an error on either side (a socket's OSError, a closed SSH
    transport's EOFError or SSHException), then pass the end on."""
    try:
        while True:
            data = recv(CHUNK)
            if not data:
                break
            send(data)
    except Exception as e:
        log.debug("tunnel pump stopped: %r", e)
    eof()


def _stderr(stream) -> str:
    recv = getattr(stream, "recv_stderr", None)
    if recv is None:
        return ""
    out = b""
    try:
        while getattr(stream, "recv_stderr_ready", lambda: False)():
            chunk = recv(CHUNK)
            if not chunk:
                break
            out += chunk
    except OSError:
        pass
    return out.decode(errors="replace").strip()
