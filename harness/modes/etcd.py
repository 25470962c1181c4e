"""An etcd for a deployment of the real Flannel: started on a host for it, or one the
testbed names; spoken to through etcd's v3 JSON gateway with curl on that host.

flanneld takes its network's config and its hosts' subnet leases from etcd. By default a
deployment starts its own (Debian's etcd-server) on the first host, its data in that side's
work directory, listening on the underlay address only, and stops it at teardown; where
the testbed names an existing etcd (`etcd_endpoints` in an SSH inventory) the deployment
writes only under its own key prefix and deletes that prefix at teardown.

No etcdctl is needed: `POST /v3/kv/put` and `/v3/kv/deleterange` take base64 keys and
values. Every request is one curl argv (never a shell line), bounded in time. Preflight has
found etcd and curl on every host (the flannel modes' `binaries`) before this module runs.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import time

from harness.bed import Side
from harness.core.errors import HarnessError
from harness.hosts.base import Host, Process

CLIENT_PORT = 42379       # not etcd's 2379/2380: a host may run an etcd of its own
PEER_PORT = 42380
READY_TIMEOUT = 30.0      # a hang, not a speed: etcd answers within a second


def b64(s: str) -> str:
    return base64.b64encode(s.encode()).decode()


def prefix_end(prefix: str) -> str:
    """The range end that covers every key starting with `prefix` (etcd's "prefix + 1")."""
    raw = prefix.encode()
    return base64.b64encode(raw[:-1] + bytes([raw[-1] + 1])).decode()


def put_body(key: str, value: str) -> str:
    return json.dumps({"key": b64(key), "value": b64(value)})


def delete_body(prefix: str) -> str:
    return json.dumps({"key": b64(prefix), "range_end": prefix_end(prefix)})


def range_body(prefix: str) -> str:
    return json.dumps({"key": b64(prefix), "range_end": prefix_end(prefix), "keys_only": True})


def keys_of(range_reply: str) -> list[str]:
    """The keys a `/v3/kv/range` reply lists (none: an empty list)."""
    try:
        kvs = json.loads(range_reply).get("kvs", [])
        return [base64.b64decode(kv["key"]).decode() for kv in kvs]
    except (ValueError, KeyError, TypeError, AttributeError) as e:
        raise HarnessError(f"etcd: not a range reply ({e}): {range_reply[:200]!r}") from None


@dataclasses.dataclass
class Etcd:
    """An etcd a deployment uses: its client URL, the host that speaks to it, and the
    process when the deployment started it."""

    url: str
    host: Host
    process: Process | None = None
    data_dir: str = ""

    @property
    def own(self) -> bool:
        return self.process is not None

    def describe(self) -> dict:
        return {"endpoints": self.url, "started_by_overlaybench": self.own}

    def request(self, path: str, body: str) -> str:
        done = self.host.run(["curl", "-sS", "--fail-with-body", "--max-time", "10", "-X", "POST",
                              "-H", "Content-Type: application/json", "-d", body, f"{self.url}{path}"],
                             check=False, timeout=20)
        if not done.ok:
            why = (done.stderr.strip() or done.stdout.strip() or f"curl exit {done.returncode}").splitlines()[-1]
            raise HarnessError(f"{self.host.name}: etcd at {self.url} {path}: {why}")
        return done.stdout

    def put(self, key: str, value: str) -> None:
        self.request("/v3/kv/put", put_body(key, value))

    def keys(self, prefix: str) -> list[str]:
        return keys_of(self.request("/v3/kv/range", range_body(prefix)))

    def delete_prefix(self, prefix: str) -> None:
        self.request("/v3/kv/deleterange", delete_body(prefix))

    def healthy(self) -> bool:
        done = self.host.run(["curl", "-sS", "--max-time", "2", f"{self.url}/health"], check=False, timeout=10)
        try:
            return done.ok and json.loads(done.stdout).get("health") == "true"
        except ValueError:
            return False

    def stop(self) -> None:
        """Stop an etcd the deployment started and remove its data."""
        if self.process is None:
            return
        self.process.stop()
        if self.data_dir:
            self.host.run(["rm", "-rf", self.data_dir], check=False)


def start(side: Side, name: str) -> Etcd:
    """An etcd of the deployment's own on `side`'s host, on its underlay address, its data in
    the side's work directory; waited for until it answers."""
    h = side.host
    host = f"[{side.underlay_ip}]" if ":" in side.underlay_ip else side.underlay_ip
    url = f"http://{host}:{CLIENT_PORT}"
    peer = f"http://127.0.0.1:{PEER_PORT}"
    data = f"{side.workdir}/etcd"
    h.run(["rm", "-rf", data])
    h.run(["mkdir", "-p", "-m", "0700", data])
    proc = h.start(["etcd", "--name", name, "--data-dir", data,
                    "--listen-client-urls", url, "--advertise-client-urls", url,
                    "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
                    "--initial-cluster", f"{name}={peer}", "--initial-cluster-state", "new",
                    "--log-level", "warn"])
    etcd = Etcd(url, h, proc, data)
    deadline = time.monotonic() + READY_TIMEOUT
    while not etcd.healthy():
        if proc.poll() is not None:
            out = proc.wait(0)
            why = (out.stderr.strip() or out.stdout.strip() or f"exit {out.returncode}").splitlines()[-1]
            etcd.stop()
            raise HarnessError(f"{h.name}: etcd exited before it answered on {url}: {why[-300:]}")
        if time.monotonic() > deadline:
            etcd.stop()
            raise HarnessError(f"{h.name}: etcd did not answer on {url} within {READY_TIMEOUT:.0f}s")
        time.sleep(0.1)
    return etcd


def existing(side: Side, endpoints: str) -> Etcd:
    """An etcd the testbed names, spoken to from `side`'s host (its first endpoint)."""
    url = endpoints.split(",")[0].strip().rstrip("/")
    etcd = Etcd(url, side.host)
    if not etcd.healthy():
        raise HarnessError(f"{side.host.name}: the etcd at {url} (etcd_endpoints) does not answer /health")
    return etcd
