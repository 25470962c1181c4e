"""A unix socket on this machine whose every connection is piped to a new command stream on
a host (`Host.stream`): a client that only speaks to local sockets (the Docker SDK) reaches
a program on the host (`docker system dial-stdio`) over a connection the harness already
holds, with its settings, keys and sudo.

The socket lives in a 0700 directory of its own; close() stops accepting, closes every
stream and removes the directory.
"""

from __future__ import annotations

import logging
import os
import shutil
import socket
import tempfile
import threading
from typing import Callable

log = logging.getLogger(__name__)

CHUNK = 65536


class UnixTunnel:
    def __init__(self, opener: Callable[[], object], name: str = "tunnel"):
        self.opener, self.name = opener, name
        self.dir = tempfile.mkdtemp(prefix="overlaybench-tunnel-")
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
            threading.Thread(target=self._serve, args=(conn,), name=f"{self.name}-conn", daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        try:
            stream = self.opener()
        except Exception as e:       # the client sees its connection close; the reason is kept
            log.info("%s: cannot open a stream: %s", self.name, e)
            self.errors.append(str(e))
            conn.close()
            return
        with self._lock:
            if self._closed:
                stream.close()
                conn.close()
                return
            self._open.update((conn, stream))
        up = threading.Thread(target=_pump, args=(conn.recv, stream.sendall, stream.shutdown_write),
                              name=f"{self.name}-up", daemon=True)
        up.start()
        _pump(stream.recv, conn.sendall, lambda: conn.shutdown(socket.SHUT_WR))
        up.join()
        err = _stderr(stream)
        if err:
            log.debug("%s: stream said: %s", self.name, err)
            self.errors.append(err)
        with self._lock:
            self._open.difference_update((conn, stream))
        stream.close()
        conn.close()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            items = list(self._open)
        try:
            self._listener.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._listener.close()
        for item in items:
            try:
                item.close()
            except OSError:
                pass
        shutil.rmtree(self.dir, ignore_errors=True)


def _pump(recv, send, eof) -> None:
    """Copy until end of file or an error on either side, then pass the end on."""
    try:
        while True:
            data = recv(CHUNK)
            if not data:
                break
            send(data)
    except OSError:
        pass
    try:
        eof()
    except OSError:
        pass


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
