"""One long-lived `sh` on an SSH channel, with commands framed inside it.

A new SSH channel costs sshd a session set-up (~165 ms measured in the lab); a line
written into a shell that is already running costs a few milliseconds. So each host keeps
shells open (`sh`, or `sudo -n sh`) and writes one line per command, calling a function
the bootstrap below defined. The shell answers on both streams with the random token of
the call:

    stdout:  <the command's stdout bytes> "\n" TOKEN " " EXIT "\n"
    stderr:  <the command's stderr bytes> "\n" TOKEN "\n"

so the command's bytes come back exact (a 64-bit random token does not occur in them by
chance), stdout and stderr stay apart, and nothing waits on a length known in advance.
Input is sent as a base64 here-document piped into the command. The remote side needs sh,
coreutils and /proc; `setsid` (util-linux) and `bash` are used where present.
"""

from __future__ import annotations

import base64
import dataclasses
import logging
import secrets
import select
import shlex
import time

log = logging.getLogger(__name__)

# Background processes: a waiter (its own small shell, not a child of the control shell,
# so it outlives a dropped connection) starts the command in a process group of its own,
# prints "WAITER PID", waits, and writes F.t (`times`: the CPU of its waited-for child,
# like wait4's rusage) then F.rc (exit status) next to F.out and F.err. bash's `set -m`
# gives the group inside the SSH session; without bash, setsid gives one in a new session
# (which the scheduler's autogroups then treat as a separate group of tasks). Liveness is
# read from /proc/PID/stat, a zombie counting as gone: an orphaned waiter may stay a zombie
# until init gets round to it, the command itself is reaped by its waiter at once.
BOOTSTRAP = r"""
_ob_d=%(dir)s
mkdir -p -m 700 "$_ob_d" || exit 97
_ob_s=; command -v setsid >/dev/null 2>&1 && _ob_s=setsid
if command -v bash >/dev/null 2>&1; then _ob_w='bash --norc --noprofile -c'; _ob_j='set -m'; _ob_g=; else _ob_w='sh -c'; _ob_j=; _ob_g=$_ob_s; fi
_ob_ws='j=$1 g=$2 f=$3; shift 3; $j; $g "$@" >"$f.out" 2>"$f.err" </dev/null & p=$!; echo "$$ $p"; exec >/dev/null; wait "$p"; r=$?; times >"$f.t"; echo "$r" >"$f.rc"'
_ob_fin() { printf '\n%%s %%s\n' "$2" "$1"; printf '\n%%s\n' "$2" >&2; }
_ob_run() { _t=$1; shift; $_ob_s "$@" </dev/null; _ob_fin $? "$_t"; }
_ob_runin() { _t=$1; shift; base64 -d | $_ob_s "$@"; _ob_fin $? "$_t"; }
_ob_hello() { printf '%%s %%s %%s %%s\n' "$$" "$(id -u)" "$(getconf CLK_TCK 2>/dev/null || echo 100)" "${_ob_w%%%% *}${_ob_g:+-setsid}"; _ob_fin 0 "$1"; }
_ob_start() { _t=$1; shift; _p=$($_ob_w "$_ob_ws" _ob "$_ob_j" "$_ob_g" "$@" </dev/null 2>/dev/null &); printf '%%s' "$_p"; _ob_fin 0 "$_t"; }
_ob_rc() { _r=; [ -s "$1.rc" ] && read -r _r 2>/dev/null <"$1.rc"; }
# (2>/dev/null before <: redirections apply in order, and a file gone meanwhile is no error)
_ob_alive() { _l=; read -r _l 2>/dev/null <"/proc/$1/stat" || return 1; _l=${_l##*) }; [ "${_l%%%% *}" != Z ]; }
_ob_waitpid() { [ "$2" = 0 ] || timeout "$2" tail --pid="$1" -s 0.02 -f /dev/null 2>/dev/null; }
_ob_settle() {
  _i=0; _ob_rc "$2"
  while [ -z "$_r" ] && [ $_i -lt 200 ] && _ob_alive "$1"; do sleep 0.01; _i=$((_i+1)); _ob_rc "$2"; done
  [ -n "$_r" ] || _ob_alive "$1" || _r=lost
}
_ob_out() {
  _c=; [ -s "$2.t" ] && { read -r _c; read -r _c; } 2>/dev/null <"$2.t"
  printf '%%s %%s\n' "${_r:--}" "$_c"
  if [ -n "$_r" ]; then cat "$2.out" 2>/dev/null; cat "$2.err" >&2 2>/dev/null; rm -f "$2".*; fi
  _ob_fin 0 "$1"
}
_ob_poll() { _ob_rc "$2"; [ -n "$_r" ] || _ob_alive "$4" || _ob_settle "$3" "$2"; printf '%%s' "$_r"; _ob_fin 0 "$1"; }
_ob_wait() {
  _ob_rc "$2"
  [ -n "$_r" ] || { _ob_waitpid "$4" "$5"; _ob_alive "$4" || _ob_settle "$3" "$2"; }
  _ob_out "$1" "$2"
}
_ob_stop() {
  _ob_rc "$2"; _st=
  if [ -z "$_r" ] && _ob_alive "$4"; then
    read -r _st 2>/dev/null <"/proc/$4/stat"
    kill -TERM "-$4" 2>/dev/null || kill -TERM "$4" 2>/dev/null
    _ob_waitpid "$4" "$5"
    if _ob_alive "$4"; then
      kill -KILL "-$4" 2>/dev/null || kill -KILL "$4" 2>/dev/null
      _ob_waitpid "$4" 5
    fi
  fi
  [ -n "$_r" ] || _ob_alive "$4" || _ob_settle "$3" "$2"
  printf '%%s\n' "$_st"; _ob_out "$1" "$2"
}
_ob_sig() { kill "-$2" "$3"; _ob_fin $? "$1"; }
"""

# Run on a separate channel when a command overstays its deadline: every child of the
# control shell (pid %(pid)s) is killed, with its process group where it leads one.
KILL_CHILDREN = r"""for f in /proc/[0-9]*/stat; do
  read -r l 2>/dev/null <"$f" || continue; r=${l##*) }; set -- $r
  [ "$2" = %(pid)s ] || continue
  p=${f#/proc/}; p=${p%%/stat}
  if [ "$3" = "$p" ]; then kill -KILL "-$p"; else kill -KILL "$p"; fi
done 2>/dev/null; exit 0"""

GRACE = 10.0  # after a deadline's kill, how long the frame may take to end


class ShellClosed(Exception):
    """The channel ended before the frame did (sent: whether the command had gone out)."""

    def __init__(self, message: str, sent: bool, err: bytes = b""):
        super().__init__(message)
        self.sent = sent
        self.err = err   # what the shell wrote to stderr before it ended (e.g. sudo's refusal)


@dataclasses.dataclass
class Frame:
    rc: int | None          # the shell's exit status of the command; None: frame never ended
    out: bytes
    err: bytes
    timed_out: bool = False


class Shell:
    """A control shell on one channel. Not thread-safe: one caller at a time (the pool)."""

    def __init__(self, channel, command: str, state_dir: str, timeout: float):
        self.chan = channel
        self.generation = 0   # the host's connection generation it belongs to
        channel.exec_command(command)
        channel.sendall(BOOTSTRAP % {"dir": shlex.quote(state_dir)})
        frame = self.call("_ob_hello", [], deadline=time.monotonic() + timeout)
        lines = frame.out.decode(errors="replace").strip().splitlines()
        fields = lines[-1].split() if lines else []
        if frame.rc != 0 or len(fields) != 4:
            raise ShellClosed(f"unexpected answer from the remote shell: {frame.out[-200:]!r}", True)
        self.pid, self.uid, self.clk_tck = int(fields[0]), int(fields[1]), int(fields[2])
        self.mode = fields[3]   # bash | sh-setsid | sh: how background process groups are made

    @property
    def grouped(self) -> bool:
        return self.mode in ("bash", "sh-setsid")

    def alive(self) -> bool:
        c = self.chan
        return not (c.closed or c.eof_received) and c.get_transport() is not None \
            and c.get_transport().is_active()

    def close(self) -> None:
        try:
            self.chan.close()
        except Exception:  # noqa: BLE001 - a dead channel may fail to close; nothing to do
            pass

    def call(self, func: str, args: list[str], data: bytes | None = None,
             deadline: float | None = None, on_deadline=None) -> Frame:
        """Run `func args…` in the shell and read its frame. At the deadline, on_deadline()
        is called once (it should kill the command) and the frame gets GRACE more seconds."""
        tok = "OB" + secrets.token_hex(8)
        line = shlex.join([func, tok, *args])
        if data is not None:
            body = base64.encodebytes(data).decode()
            line = f"{line} <<'{tok}IN'\n{body}{tok}IN"
        try:
            self.chan.sendall((line + "\n").encode())
        except OSError as e:
            raise ShellClosed(f"cannot send to the remote shell: {e}", False) from e
        return self._read(tok.encode(), deadline, on_deadline)

    def _read(self, tok: bytes, deadline: float | None, on_deadline) -> Frame:
        out, err = bytearray(), bytearray()
        end_out, end_err = b"\n" + tok + b" ", b"\n" + tok + b"\n"
        rc: int | None = None
        out_at = err_at = -1
        scan = 0   # where the stdout marker may start (kept at a marker whose exit code is incomplete)
        timed_out = False
        chan = self.chan
        while rc is None or err_at < 0:
            if chan.recv_ready():
                out += chan.recv(65536)
                if rc is None:
                    i = out.find(end_out, scan)
                    if i < 0:
                        scan = max(0, len(out) - len(end_out))
                        continue
                    scan = i
                    j = out.find(b"\n", i + len(end_out))
                    if j >= 0:
                        out_at, rc = i, int(out[i + len(end_out):j])
                continue
            if chan.recv_stderr_ready():
                n = len(err)
                err += chan.recv_stderr(65536)
                if err_at < 0:
                    err_at = err.find(end_err, max(0, n - len(end_err)))
                continue
            if chan.eof_received or chan.closed:
                raise ShellClosed("the remote shell's channel closed", True, bytes(err))
            now = time.monotonic()
            if deadline is not None and now >= deadline:
                if timed_out:   # the kill did not end the frame: give this shell up
                    return Frame(None, bytes(out), bytes(err), True)
                timed_out = True
                if on_deadline is not None:
                    on_deadline()
                deadline = time.monotonic() + GRACE
                continue
            wait = 1.0 if deadline is None else min(1.0, deadline - now)
            select.select([chan], [], [], max(wait, 0.0))
        return Frame(rc, bytes(out[:out_at]), bytes(err[:err_at]), timed_out)
