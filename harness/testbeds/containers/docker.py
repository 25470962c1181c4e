"""Container endpoints as real Docker containers, through the Docker SDK for Python.

Each container comes from the locally built tools image (`make tools-image`;
OVERLAYBENCH_TOOLS_IMAGE names another) with network_mode "none", the labels
overlaybench.prefix and overlaybench.run, and `sleep infinity` as its entrypoint. Its
network namespace (/proc/<State.Pid>/ns/net) is attached on the host under the name the
testbed gave (`ip netns attach`), as `weave attach` did; from then on the testbed wires
the veth and runs the tools through `ip netns exec`, exactly as for a bare namespace, so
per-process CPU and hard timeouts are the same. The tools come from the host, so the
container needs no capabilities of its own.

Which daemon: on this machine the SDK's own environment (DOCKER_HOST, else the local
socket); on an SSH host the daemon there, through a unix socket here whose every
connection is a `docker system dial-stdio` on the host over the harness's own SSH
connection (hosts/tunnel.py), so the inventory's key, known_hosts and sudo apply.
"""

from __future__ import annotations

import logging
import os
import time

from harness.core.errors import HarnessError
from harness.hosts.base import Host
from harness.hosts.local import LocalHost
from harness.hosts.tunnel import UnixTunnel
from harness.testbeds.containers.base import Containers

log = logging.getLogger(__name__)

DEFAULT_IMAGE = "localhost/overlaybench/tools:bookworm"
ENTRYPOINT = ["sleep", "infinity"]
PREFIX_LABEL = "overlaybench.prefix"
RUN_LABEL = "overlaybench.run"
API_TIMEOUT = 30
LOCAL_SOCKET = "/var/run/docker.sock"


def image_name() -> str:
    return os.environ.get("OVERLAYBENCH_TOOLS_IMAGE") or DEFAULT_IMAGE


class DockerContainers(Containers):
    kind = "docker"

    def __init__(self):
        self.image = image_name()
        self._clients: dict[str, tuple[object, object | None]] = {}   # host name → (client, tunnel)
        self._facts: dict[str, dict] = {}

    # ------------------------------------------------------------------ the daemon
    def _client(self, host: Host):
        got = self._clients.get(host.name)
        if got is None:
            got = self._clients[host.name] = connect(host)
        return got[0]

    def close(self) -> None:
        for client, tunnel in self._clients.values():
            try:
                client.close()
            except Exception as e:       # closing must not hide what the caller is doing
                log.debug("closing a docker client: %s", e)
            if tunnel is not None:
                tunnel.close()
        self._clients.clear()

    # ------------------------------------------------------------------ the seam
    def check(self, host: Host, name: str) -> list[str]:
        try:
            import docker  # noqa: F401 - only whether it imports
        except ImportError:
            return [f"{name}: the Docker SDK for Python is not installed (make setup)"]
        if not isinstance(host, LocalHost) and host.which("docker") is None:
            return [f"{name}: no `docker` command, through which its dockerd is reached (apt-get install -y docker.io)"]
        try:
            client = self._client(host)
        except HarnessError as e:
            return [f"{name}: {e}"]
        import docker.errors
        try:
            img = client.images.get(self.image)
        except docker.errors.ImageNotFound:
            return [f"{name}: the tools image {self.image} is missing (make tools-image)"]
        except docker.errors.DockerException as e:
            return [f"{name}: dockerd: {_why(e)}"]
        self._note(host, client, img.id)
        return []

    def create(self, host: Host, netns: str, labels: dict[str, str]) -> None:
        import docker.errors
        client = self._client(host)
        try:
            c = client.containers.run(self.image, entrypoint=ENTRYPOINT, name=netns,
                                      network_mode="none", labels=dict(labels), detach=True)
        except docker.errors.ImageNotFound as e:
            raise HarnessError(f"{_who(host)}: the tools image {self.image} is missing (make tools-image)") from e
        except docker.errors.DockerException as e:
            self._remove_container(client, netns)
            raise HarnessError(f"{_who(host)}: container {netns} could not start: {_why(e)}") from e
        try:
            pid = self._running_pid(c, host)
            done = host.run(["ip", "netns", "attach", netns, str(pid)], check=False, timeout=20)
            if not done.ok:
                self._gone(c, host)          # it exited meanwhile: say so, rather than ip's words
                raise HarnessError(f"{_who(host)}: ip netns attach {netns} {pid}: "
                                   f"{done.stderr.strip() or 'failed'}")
            self._running_pid(c, host)
        except BaseException:
            self.remove(host, netns)
            raise
        self._note(host, client, c.attrs.get("Image", ""))
        log.info("%s: container %s (%s) pid %d as netns %s", host.name, netns, c.short_id, pid, netns)

    def verify(self, host: Host, netns: str) -> None:
        """A container that stopped while the testbed was built is the error `create` gives
        (one that exits at once can still be starting when `create` looks; by the end of
        the build it has long exited). The kernel says at once whether its process lives;
        dockerd registers an exit a moment later, so it is waited for before it is asked."""
        import docker.errors
        try:
            c = self._client(host).containers.get(netns)
        except docker.errors.DockerException as e:
            raise HarnessError(f"{_who(host)}: container {netns}: {_why(e)}") from e
        pid = (c.attrs.get("State") or {}).get("Pid") or 0
        if pid > 0 and host.run(["kill", "-0", str(pid)], check=False, timeout=20).ok:
            return
        try:
            c.wait(timeout=30)
        except Exception as e:          # a timeout or a vanished container: the state says which
            log.debug("waiting for container %s to stop: %r", netns, e)
        self._running_pid(c, host)

    def _gone(self, c, host: Host, wait: float = 3.0) -> None:
        """Raise the exited-at-once error if dockerd sees the container stop within `wait`
        seconds (its state lags the process by a moment)."""
        deadline = time.monotonic() + wait
        while True:
            self._running_pid(c, host)
            if time.monotonic() > deadline:
                return
            time.sleep(0.1)

    def _running_pid(self, c, host: Host) -> int:
        """The container's pid on the host; a container that is no longer running is an error
        with its exit code and the last thing it said."""
        c.reload()
        state = c.attrs.get("State", {})
        pid = state.get("Pid") or 0
        if state.get("Running") and pid > 0:
            return pid
        try:
            said = c.logs(tail=3).decode(errors="replace").strip().splitlines()
        except Exception:             # the container may be gone by now
            said = []
        why = f": {said[-1]}" if said else ""
        raise HarnessError(f"{_who(host)}: container {c.name} from {self.image} exited at once "
                           f"(exit code {state.get('ExitCode')}{why})")

    def remove(self, host: Host, netns: str) -> None:
        try:
            self._remove_container(self._client(host), netns)
        except HarnessError as e:
            log.warning("%s: container %s not removed: %s", host.name, netns, e)
        host.run(["ip", "netns", "del", netns], check=False, timeout=20)

    @staticmethod
    def _remove_container(client, name: str) -> bool:
        import docker.errors
        try:
            client.containers.get(name).remove(force=True)
            return True
        except docker.errors.NotFound:
            return False
        except docker.errors.APIError as e:
            if e.status_code == 409 or "already in progress" in str(e):   # being removed already
                return False
            log.warning("container %s not removed: %s", name, _why(e))
            return False

    def _note(self, host: Host, client, image_id: str) -> None:
        f = self._facts.get(_key(host))
        if f is None:
            v = client.version()
            f = self._facts[_key(host)] = {"version": v.get("Version"), "api_version": v.get("ApiVersion"),
                                          "image": self.image}
        if image_id:
            f["image_id"] = image_id

    def facts(self) -> dict:
        return {"containers": self.kind, "docker": dict(self._facts)}

    @classmethod
    def remove_prefix(cls, host: Host, prefix: str) -> list[str]:
        """Every container labelled with `prefix`; nothing, quietly, where no dockerd answers.
        Their attached namespaces are left to the testbed's sweep, which first ends the
        processes it started in them."""
        if isinstance(host, LocalHost) and not os.environ.get("DOCKER_HOST") and not os.path.exists(LOCAL_SOCKET):
            return []
        try:
            client, tunnel = connect(host)
        except HarnessError as e:
            log.info("%s: no container of %s removed: %s", host.name, prefix, e)
            return []
        import docker.errors
        out = []
        try:
            found = client.containers.list(all=True, filters={"label": f"{PREFIX_LABEL}={prefix}"})
            for c in found:
                if cls._remove_container(client, c.name):
                    out.append(f"container {c.name}")
        except docker.errors.DockerException as e:
            log.warning("%s: containers of %s not listed: %s", host.name, prefix, _why(e))
        finally:
            client.close()
            if tunnel is not None:
                tunnel.close()
        return out


def connect(host: Host):
    """(client, tunnel or None) for the dockerd that serves `host`; HarnessError with the fix
    when it does not answer."""
    import docker
    import requests
    tunnel = None
    if isinstance(host, LocalHost):
        where = os.environ.get("DOCKER_HOST") or f"unix://{LOCAL_SOCKET}"
        fix = "start one: make dockerd-up"
        make = lambda: docker.from_env(timeout=API_TIMEOUT)    # noqa: E731
    else:
        tunnel = UnixTunnel(lambda: host.stream(["docker", "system", "dial-stdio"]), name=f"{host.name}-docker")
        where, fix = "its docker socket (docker system dial-stdio over SSH)", "start dockerd there"
        make = lambda: docker.DockerClient(base_url=tunnel.url, version="auto", timeout=API_TIMEOUT)  # noqa: E731
    try:
        client = make()
        client.ping()
    except (docker.errors.DockerException, requests.RequestException) as e:
        said = tunnel.errors[-1] if tunnel is not None and tunnel.errors else _why(e)
        if tunnel is not None:
            tunnel.close()
        raise HarnessError(f"dockerd does not answer at {where} ({said}; {fix})") from e
    return client, tunnel


def _why(e: BaseException) -> str:
    """The root of an SDK error's chain, in one short line."""
    root = e
    while root.__cause__ is not None or root.__context__ is not None:
        root = root.__cause__ or root.__context__
    explanation = getattr(root, "explanation", None)
    text = str(explanation or getattr(root, "strerror", None) or root).strip()
    return (text.splitlines() or [type(root).__name__])[-1][:200]


def _key(host: Host) -> str:
    """How run.json names the daemon's host: "local" for this machine."""
    return "local" if isinstance(host, LocalHost) else host.name


def _who(host: Host) -> str:
    return "this machine" if isinstance(host, LocalHost) else host.name
