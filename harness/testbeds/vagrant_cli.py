"""Vagrant as a source of SSH settings: it brings machines up and says how to reach them.
The vagrant backend's driver of the `vagrant` command (vagrant.py), not a Host transport.

Only `vagrant` runs here (status, up, ssh-config, destroy); every command meant for a
machine goes through the SSH backend with the settings `ssh_config()` returns, as
pyinfra's Vagrant connector does. Vagrant turns host-key checking off for its machines
(`StrictHostKeyChecking no`, `UserKnownHostsFile /dev/null`); `VagrantMachine.verify_host_key`
says what its ssh-config asked for, so a caller that accepts unknown keys does so for
these machines only, and can say so.

Each function takes the directory holding the Vagrantfile (Vagrant is pinned to it with
VAGRANT_CWD, so it never wanders up to a parent's Vagrantfile) and optional extra
environment variables for Vagrant (e.g. VAGRANT_DOTFILE_PATH, OVERLAYBENCH_MTU).
"""

from __future__ import annotations

import collections
import contextlib
import logging
import os
import re
import shutil
import signal
import subprocess
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Mapping

import paramiko

from harness.core.errors import HarnessError

log = logging.getLogger(__name__)

UP_TIMEOUT = 1800.0      # seconds for `vagrant up` (VMs download a box the first time)
COMMAND_TIMEOUT = 300.0  # seconds for status, ssh-config, destroy
# The labels the bundled Vagrantfile gives each docker-provider container: the project's
# Vagrant data directory (as _data_path() expands it) and the machine's name.
DATA_LABEL = "org.overlaybench.vagrant-data"
MACHINE_LABEL = "org.overlaybench.vagrant-machine"


@dataclass(frozen=True)
class VagrantMachine:
    """How to reach one machine over SSH, as `vagrant ssh-config` tells it."""
    name: str
    hostname: str
    port: int
    user: str
    identity_file: str
    verify_host_key: bool = False  # False: Vagrant asked for no host-key checking


# ---- pure parsers -------------------------------------------------------------------

def parse_machine_readable(text: str) -> list[tuple[str, str, list[str]]]:
    """`vagrant --machine-readable` lines → (target, type, data) with Vagrant's escapes undone."""
    out = []
    for line in text.splitlines():
        parts = line.split(",")
        if len(parts) < 3 or not parts[0].isdigit():
            continue
        data = [p.replace("%!(VAGRANT_COMMA)", ",").replace("\\n", "\n") for p in parts[3:]]
        out.append((parts[1], parts[2], data))
    return out


def parse_status(text: str) -> dict[str, tuple[str, str]]:
    """`vagrant status --machine-readable` → {machine: (state, provider)}, in Vagrantfile order."""
    machines: dict[str, list[str]] = {}
    for target, kind, data in parse_machine_readable(text):
        if not target or not data:
            continue
        if kind == "state":
            machines.setdefault(target, ["", ""])[0] = data[0]
        elif kind == "provider-name":
            machines.setdefault(target, ["", ""])[1] = data[0]
    return {name: (state, provider) for name, (state, provider) in machines.items()}


def parse_ssh_config(text: str, names: Iterable[str]) -> dict[str, VagrantMachine]:
    """`vagrant ssh-config` output → {machine: VagrantMachine}, read with paramiko.SSHConfig."""
    config = paramiko.SSHConfig.from_text(text)
    declared = config.get_hostnames()
    machines = {}
    for name in names:
        if name not in declared:
            raise HarnessError(f"vagrant ssh-config says nothing about machine {name}")
        entry = config.lookup(name)
        missing = [k for k in ("hostname", "port", "user", "identityfile") if not entry.get(k)]
        if missing:
            raise HarnessError(f"vagrant ssh-config for {name} lacks {', '.join(missing)}")
        try:
            port = int(entry["port"])
        except ValueError as e:
            raise HarnessError(f"vagrant ssh-config for {name}: port {entry['port']!r} is not a number") from e
        keys = entry["identityfile"]
        key = next((k for k in keys if os.path.isfile(k)), keys[0])
        machines[name] = VagrantMachine(
            name=name, hostname=entry["hostname"], port=port, user=entry["user"],
            identity_file=key,
            verify_host_key=entry.get("stricthostkeychecking", "ask").lower() != "no",
        )
    return machines


_IMAGE_MISSING = re.compile(r"Unable to find image '([^']+)' locally")
_NO_DOCKERD = re.compile(r"Cannot connect to the Docker daemon at (\S+?)\.? Is the docker daemon running")
_PROGRESS = re.compile(r"^(?:==> |    )([\w.-]+): ")
_ON_MACHINE = re.compile(r"^An error occurred while executing the action on the '([\w.-]+)'")


def _paragraphs(lines: list[str]) -> list[str]:
    paras, cur = [], []
    for ln in lines + [""]:
        if ln.strip():
            cur.append(ln.strip())
        elif cur:
            paras.append(" ".join(cur))
            cur = []
    return paras


# Vagrant's heading when machines came up in parallel; each machine's error follows it.
_PARALLEL = "An error occurred while executing multiple actions in parallel."


def explain_failure(what: str, lines: list[str]) -> str:
    """One line for a failed vagrant command: a known cause, else the first paragraph of
    Vagrant's error message (what follows its last progress line), else its last lines."""
    text = "\n".join(lines)
    m = _IMAGE_MISSING.search(text)
    if m:
        return (f"{what}: docker image {m.group(1)} is missing and no registry has it "
                f"(overlaybench's host image: make vagrant-image)")
    m = _NO_DOCKERD.search(text)
    if m:
        return f"{what}: dockerd does not answer at {m.group(1)} (start one: make dockerd-up)"
    machine, start = None, 0
    for i, ln in enumerate(lines):
        p = _PROGRESS.match(ln)
        if p:
            machine, start = p.group(1), i + 1
    paras = _paragraphs(lines[start:])
    if len(paras) > 1 and paras[0].startswith(_PARALLEL):   # machines came up side by side:
        paras = paras[1:]                                     # the first machine's own error
    if paras:
        m = _ON_MACHINE.match(paras[0])
        if m and len(paras) > 1:
            machine, paras = m.group(1), paras[1:]
        message = paras[0]
        for more in paras[1:]:  # a paragraph ending in ':' announces the next one
            if not message.endswith(":"):
                break
            message += " " + more
        message = message if len(message) <= 400 else message[:397] + "..."
        return f"{what}: " + (f"{machine}: " if machine else "") + message
    tail = [ln.strip() for ln in lines if ln.strip()][-3:]
    return f"{what}: " + (" | ".join(tail) if tail else "no output")


# ---- running vagrant ----------------------------------------------------------------

def _environment(vagrant_dir: str | os.PathLike, env: Mapping[str, str] | None) -> dict[str, str]:
    directory = Path(vagrant_dir)
    merged = dict(os.environ)
    merged.update(env or {})
    if shutil.which("vagrant", path=merged.get("PATH", os.defpath)) is None:
        raise HarnessError("vagrant is not installed (apt-get install vagrant)")
    if not directory.is_dir():
        raise HarnessError(f"no Vagrantfile in {directory}: no such directory")
    if not any((directory / n).is_file() for n in ("Vagrantfile", "vagrantfile")):
        raise HarnessError(f"no Vagrantfile in {directory}")
    merged["VAGRANT_CWD"] = str(directory.resolve())
    merged.setdefault("VAGRANT_CHECKPOINT_DISABLE", "1")  # no version check over the network
    return merged


def _run(argv: list[str], environ: dict[str, str], what: str,
         timeout: float = COMMAND_TIMEOUT) -> str:
    """Run a short vagrant command; its stdout, or a HarnessError naming the cause."""
    try:
        done = subprocess.run(argv, env=environ, cwd=environ["VAGRANT_CWD"], capture_output=True,
                              text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired as e:
        raise HarnessError(f"{what}: `{' '.join(argv)}` still running after {timeout:.0f} s") from e
    if done.returncode != 0:
        log.debug("%s exited %d\nstdout:\n%s\nstderr:\n%s", argv, done.returncode, done.stdout, done.stderr)
        errors = [d[-1] for _, kind, d in parse_machine_readable(done.stdout) if kind == "error-exit" and d]
        text = errors[-1] if errors else (done.stderr.strip() or done.stdout)
        raise HarnessError(explain_failure(what, text.splitlines()))
    return done.stdout


def _stream(argv: list[str], environ: dict[str, str], what: str,
            progress: Callable[[str], None] | None, timeout: float) -> None:
    """Run a long vagrant command, passing each line of its output to progress."""
    tail: collections.deque[str] = collections.deque(maxlen=200)
    proc = subprocess.Popen(argv, env=environ, cwd=environ["VAGRANT_CWD"], stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            bufsize=1, start_new_session=True)
    expired = threading.Event()

    def expire() -> None:
        expired.set()
        _stop(proc)

    watchdog = threading.Timer(timeout, expire)
    watchdog.daemon = True
    watchdog.start()
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            line = line.rstrip("\n")
            tail.append(line)
            if progress:
                progress(line)
        proc.wait()
    except BaseException:
        _stop(proc)
        raise
    finally:
        watchdog.cancel()
    if expired.is_set():
        log.debug("%s still running after %.0f s; output:\n%s", argv, timeout, "\n".join(tail))
        raise HarnessError(f"{what}: still running after {timeout:.0f} s; stopped it")
    if proc.returncode != 0:
        log.debug("%s exited %d; output:\n%s", argv, proc.returncode, "\n".join(tail))
        raise HarnessError(explain_failure(what, list(tail)))


def _stop(proc: subprocess.Popen) -> None:
    """Vagrant handles SIGINT by stopping cleanly; then TERM, then KILL, the whole group."""
    for sig, grace in ((signal.SIGINT, 30.0), (signal.SIGTERM, 10.0), (signal.SIGKILL, 5.0)):
        if proc.poll() is not None:
            return
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            continue


@contextlib.contextmanager
def _docker_client(environ: Mapping[str, str], timeout: int):
    """A Docker SDK client for the dockerd `environ` names, closed afterwards."""
    import docker  # the Docker SDK; only the docker provider needs it
    client = docker.from_env(environment=environ, timeout=timeout)
    try:
        yield client
    finally:
        client.close()


def _dockerd_answers(environ: Mapping[str, str]) -> bool:
    import docker
    try:
        with _docker_client(environ, 10) as client:
            client.ping()
        return True
    except docker.errors.DockerException as e:
        log.info("docker ping at %s failed: %s", _docker_host(environ), e)
        return False


def _docker_host(environ: Mapping[str, str]) -> str:
    return environ.get("DOCKER_HOST") or "unix:///var/run/docker.sock"


def _check_dockerd(environ: dict[str, str], what: str) -> None:
    """The docker provider needs a dockerd that answers, where DOCKER_HOST (or the default) says."""
    if not _dockerd_answers(environ):
        raise HarnessError(f"{what}: dockerd does not answer at {_docker_host(environ)} (start one: make dockerd-up)")


# ---- the API ------------------------------------------------------------------------

def machines(vagrant_dir: str | os.PathLike, env: Mapping[str, str] | None = None) -> dict[str, tuple[str, str]]:
    """{machine: (state, provider)} from `vagrant status --machine-readable`."""
    environ = _environment(vagrant_dir, env)
    out = _run(["vagrant", "status", "--machine-readable"], environ, "vagrant status")
    found = parse_status(out)
    if not found:
        raise HarnessError(f"vagrant status: no machine defined in {environ['VAGRANT_CWD']}")
    return found


def status(vagrant_dir: str | os.PathLike, env: Mapping[str, str] | None = None) -> dict[str, str]:
    """{machine: state}: "running", "not_created", "stopped", "preparing", …"""
    return {name: state for name, (state, _) in machines(vagrant_dir, env).items()}


def up(vagrant_dir: str | os.PathLike, provider: str | None = None,
       progress: Callable[[str], None] | None = None, env: Mapping[str, str] | None = None,
       timeout: float = UP_TIMEOUT) -> None:
    """Bring every machine up (`vagrant up`), passing Vagrant's output lines to progress.

    Nothing runs when every machine already runs. When it fails (a machine that does not
    come up, a timeout, an interruption), the machines this call was creating are destroyed
    again and a HarnessError says why in one line; machines that existed before are kept.
    """
    environ = _environment(vagrant_dir, env)
    before = machines(vagrant_dir, env)
    if all(state == "running" and (provider is None or prov == provider)
           for state, prov in before.values()):
        log.info("vagrant machines %s already running", ", ".join(before))
        return
    effective = {provider or prov for _, prov in before.values()}
    if "docker" in effective:
        _check_dockerd(environ, "vagrant up")
    argv = ["vagrant", "up", "--no-color", "--no-tty"] + ([f"--provider={provider}"] if provider else [])
    # What a failure undoes: machines that did not exist before (a halted one is kept).
    new = [name for name, (state, _) in before.items() if state in ("not_created", "preparing")]
    try:
        _stream(argv, environ, "vagrant up", progress, timeout)
        after = status(vagrant_dir, env)
        down = {name: state for name, state in after.items() if state != "running"}
        if down:
            raise HarnessError("vagrant up: " + ", ".join(f"{n} did not come up (state {s})"
                                                          for n, s in down.items()))
    except BaseException:
        _undo(environ, new, progress, docker_provider="docker" in effective)
        raise


def _undo(environ: dict[str, str], names: list[str], progress: Callable[[str], None] | None,
          docker_provider: bool) -> None:
    """Destroy what a failed `up` was creating; a failure here is logged, the first error wins.

    With the docker provider, an `up` stopped between `docker create` and Vagrant writing the
    machine's id leaves a container Vagrant no longer knows (`not_created`, so `destroy`
    skips it): the containers labelled with this project's data directory and one of these
    machines are removed after Vagrant's destroy.
    """
    if not names:
        return
    try:
        _stream(["vagrant", "destroy", "-f", "--no-color", "--no-tty", *names], environ,
                "vagrant destroy", progress, COMMAND_TIMEOUT)
    except HarnessError as e:
        log.error("after a failed vagrant up, destroying %s failed too: %s", names, e)
    if docker_provider:
        _remove_lost_containers(environ, names, "after a failed vagrant up")


def _data_path(environ: Mapping[str, str]) -> str:
    """The project's Vagrant data directory, expanded as the bundled Vagrantfile expands it
    (relative to the Vagrantfile's directory, symlinks kept)."""
    return os.path.abspath(os.path.join(environ["VAGRANT_CWD"], environ.get("VAGRANT_DOTFILE_PATH") or ".vagrant"))


def _remove_lost_containers(environ: dict[str, str], names: list[str] | None, what: str) -> list[str]:
    """Remove the containers labelled with this project's data directory and one of `names`
    (None: any machine); "CONTAINER (MACHINE)" for each removed."""
    import docker
    removed = []
    try:
        with _docker_client(environ, 60) as client:
            for c in client.containers.list(all=True, filters={"label": f"{DATA_LABEL}={_data_path(environ)}"}):
                machine = c.labels.get(MACHINE_LABEL)
                if names is None or machine in names:
                    log.info("removing container %s: machine %s, which vagrant lost track of", c.name, machine)
                    c.remove(force=True)
                    removed.append(f"{c.name} ({machine})")
    except docker.errors.DockerException as e:
        log.error("%s: removing the containers vagrant lost track of failed: %s", what, e)
    return removed


def ssh_config(vagrant_dir: str | os.PathLike, env: Mapping[str, str] | None = None) -> dict[str, VagrantMachine]:
    """{machine: VagrantMachine} for every machine of the Vagrantfile; each must be running."""
    environ = _environment(vagrant_dir, env)
    states = status(vagrant_dir, env)
    down = {name: state for name, state in states.items() if state != "running"}
    if down:
        raise HarnessError("vagrant ssh-config: " + ", ".join(f"{n} is not running (state {s})"
                                                             for n, s in down.items())
                           + "; bring the machines up first")
    out = _run(["vagrant", "ssh-config", *states], environ, "vagrant ssh-config")
    return parse_ssh_config(out, states)


def validate(vagrant_dir: str | os.PathLike, provider: str | None = None,
             env: Mapping[str, str] | None = None) -> None:
    """`vagrant validate` with the provider's own settings checked (VAGRANT_DEFAULT_PROVIDER);
    parses the Vagrantfile, boots nothing."""
    environ = _environment(vagrant_dir, env)
    if provider:
        environ["VAGRANT_DEFAULT_PROVIDER"] = provider
    _run(["vagrant", "validate", "--no-color"], environ, "vagrant validate")


def destroy(vagrant_dir: str | os.PathLike, env: Mapping[str, str] | None = None,
            progress: Callable[[str], None] | None = None, timeout: float = COMMAND_TIMEOUT) -> list[str]:
    """`vagrant destroy -f`: every machine of the Vagrantfile, and what Vagrant made for them
    (the docker provider's network included); then the docker-provider containers of this
    project that Vagrant lost track of (an `up` killed between `docker create` and Vagrant
    writing the id), "CONTAINER (MACHINE)" for each."""
    environ = _environment(vagrant_dir, env)
    _stream(["vagrant", "destroy", "-f", "--no-color", "--no-tty"], environ, "vagrant destroy",
            progress, timeout)
    if not _dockerd_answers(environ):   # another provider's machines, or none left to find
        return []
    return _remove_lost_containers(environ, None, "vagrant destroy")
