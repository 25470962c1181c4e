"""The one exception family the CLI catches (ARCHITECTURE.md, "One exception family"):
bad input or an environment that cannot run what was asked becomes one line on stderr and
exit 2, never a traceback."""

from __future__ import annotations


class HarnessError(Exception):
    """Bad input or an environment that cannot run what was asked. The CLI prints it, exit 2."""


class ScenarioError(HarnessError):
    """A scenario file or a CLI override that does not make sense; names file and key."""


class UnsupportedError(HarnessError):
    """The kernel or machine lacks a feature ("unsupported here")."""


class CommandError(HarnessError):
    """A command on a host failed where failure was not expected."""

    def __init__(self, host: str, argv: list[str], returncode: int | None, stdout: str, stderr: str):
        self.host = host
        self.argv = list(argv)
        self.returncode = returncode
        self.stdout = stdout
        self.stderr = stderr
        what = "timed out" if returncode is None else f"exited {returncode}"
        detail = (stderr or stdout).strip().splitlines()
        tail = f": {detail[-1]}" if detail else ""
        super().__init__(f"{host}: `{' '.join(argv)}` {what}{tail}")


class SshError(HarnessError):
    """An SSH host could not be reached, logged into or used; the message names the host."""


class SshConnectError(SshError):
    """Unreachable address, connection refused, timeout, or no SSH server answering."""


class SshAuthError(SshError):
    """The server refused the user's key (or the key file cannot be used)."""


class SshHostKeyError(SshError):
    """The server's host key is unknown (and accepting new keys was not asked for) or changed."""


class SshSudoError(SshError):
    """sudo was asked for, but `sudo -n` does not let the user run commands as root."""


class SshConnectionLost(SshError):
    """The connection dropped while a command ran; the next command reconnects."""


def read_text(path, what: str = "") -> str:
    """A text file's contents; HarnessError naming the file when it cannot be read or is
    not UTF-8 text (what: "inventory ", "baseline " … for the message)."""
    try:
        return open(path, encoding="utf-8").read()
    except UnicodeDecodeError as e:
        raise HarnessError(f"{path}: not UTF-8 text (byte {e.start})") from e
    except OSError as e:
        raise HarnessError(f"{path}: cannot read {what}({e.strerror})") from e
