"""A testbed of ScriptedHosts (harness/hosts/scripted.py) for tests that run without root.

`lab_testbed` has the lab's names (no device prefix: its hosts are namespaces of their
own), `remote_testbed` a remote testbed's (every device carries the prefix);
tests/scripted/test_scripted_host_fake.py checks both against harness.testbeds.lab.Lab and
harness.testbeds.remote.RemoteTestbed. Each side's host is ScriptedHost "h<i>" and its container
ScriptedHost "c<i>".
"""

from __future__ import annotations

import pathlib
import re
import shlex
import sys
import time

from harness.bed import CpuMeter, Side, Testbed
from harness.core.samples import Sample
from harness.hosts.scripted import ScriptedHost

PREFIX = "ob12ab"


def lab_sides(prefix: str = PREFIX, journal: list | None = None, hosts: int = 2) -> tuple[Side, ...]:
    return tuple(Side(index=i, host=ScriptedHost(f"h{i}", journal=journal), underlay_dev="ul0",
                      underlay_ip=f"198.18.0.{i + 1}", overlay_ip=f"198.18.64.{i + 1}", bridge="br0",
                      container=ScriptedHost(f"c{i}", journal=journal), container_ip=f"198.18.64.{11 + i}",
                      container_dev="eth0", container_port="vc0", workdir=f"/run/overlaybench/{prefix}/h{i}",
                      table=f"{prefix}-h{i}")
                 for i in range(hosts))


def remote_sides(prefix: str = PREFIX, journal: list | None = None) -> tuple[Side, Side]:
    return tuple(Side(index=i, host=ScriptedHost(f"h{i}", journal=journal), underlay_dev="eth1",
                      underlay_ip=f"10.1.0.{i + 1}", overlay_ip=f"198.18.64.{i + 1}", bridge=f"{prefix}-br0",
                      container=ScriptedHost(f"c{i}", journal=journal), container_ip=f"198.18.64.{11 + i}",
                      container_dev="eth0", container_port=f"{prefix}-vc{i}",
                      workdir=f"/run/overlaybench/{prefix}/h{i}", prefix=prefix, table=f"{prefix}-h{i}")
                 for i in (0, 1))


class FixedMeter(CpuMeter):
    """One cpu_total_pct of 42 per case; remembers what it was asked."""

    description = "scripted: a fixed figure"

    def __init__(self):
        self.cases: list[tuple[str, str]] = []

    def begin(self, client, server):
        return (client.name, server.name)

    def end(self, begun, client, server, wall):
        self.cases.append(begun)
        return [Sample("cpu_total_pct", 42.0, "pct")]


class ScriptedTestbed(Testbed):
    """Two sides of ScriptedHosts. build, set_underlay and teardown only say they were
    called (in `events`); `refuse` maps an underlay MTU to the reason set_underlay gives."""

    backend = "scripted"

    def __init__(self, sides: tuple[Side, Side], artifacts: pathlib.Path, underlay_mtu: int = 1500,
                 refuse: dict[int, str] | None = None):
        self.sides = sides
        self.underlay_mtu = underlay_mtu
        self.rate = None
        self.meter = FixedMeter()
        self.refuse = refuse or {}
        self.events: list[str] = []
        self._artifacts = pathlib.Path(artifacts)
        self._artifacts.mkdir(parents=True, exist_ok=True)

    @property
    def artifact_dir(self) -> pathlib.Path:
        return self._artifacts

    def build(self, underlay_mtu, rate):
        self.events.append(f"build {underlay_mtu}")

    def set_underlay(self, mtu, rate):
        from harness.core.errors import HarnessError
        self.events.append(f"set_underlay {mtu}")
        if mtu in self.refuse:
            raise HarnessError(self.refuse[mtu])
        self.underlay_mtu = mtu

    def teardown(self):
        self.events.append("teardown")

    def install_sleeve(self, side, source=None):
        label = source.label if source else "shipped"
        self.events.append(f"install_sleeve h{side.index} {label}")
        return f"{side.workdir}/sleeve-{label}"

    # the scripted hosts ------------------------------------------------------------
    @property
    def hosts(self) -> list[ScriptedHost]:
        return [h for s in self.sides for h in (s.host, s.container)]

    def assert_all_used(self) -> None:
        for h in self.hosts:
            h.assert_all_used()


def lab_testbed(tmp_path, hosts: int = 2, **kw) -> ScriptedTestbed:
    return ScriptedTestbed(lab_sides(journal=kw.pop("journal", None), hosts=hosts), tmp_path / "artifacts", **kw)


def remote_testbed(tmp_path, **kw) -> ScriptedTestbed:
    return ScriptedTestbed(remote_sides(journal=kw.pop("journal", None)), tmp_path / "artifacts", **kw)


def cmd(line: str) -> list[str]:
    """A command line written as a shell would split it."""
    return shlex.split(line)


def any_of(*patterns: str) -> re.Pattern:
    """One regular expression matching any of `patterns` (each matched whole)."""
    return re.compile("|".join(f"(?:{p})" for p in patterns))


def no_sleep(seconds: float) -> None:
    """Stands in for time.sleep in the harness's modules: a scripted answer is there at
    once, so a loop that sleeps waits for something the script never gives."""
    raise AssertionError(f"the harness slept {seconds}s waiting for something the script did not answer")


class _TimeWithoutSleep:
    sleep = staticmethod(no_sleep)

    def __getattr__(self, name):
        return getattr(time, name)


def forbid_sleep(monkeypatch) -> None:
    """time.sleep fails in every harness module imported so far (not in the standard
    library's own modules, subprocess's waits included)."""
    for name, mod in list(sys.modules.items()):
        if name.startswith("harness.") and getattr(mod, "time", None) is time:
            monkeypatch.setattr(mod, "time", _TimeWithoutSleep())


def runner_testbed(tmp_path, monkeypatch) -> ScriptedTestbed:
    """A two-host lab testbed for runs through the runner: no harness module may sleep, and
    each deployment's reading of its devices' offloads is answered whenever it comes."""
    forbid_sleep(monkeypatch)
    bed = lab_testbed(tmp_path)
    for h in bed.hosts:
        h.allow(re.compile(r"ethtool -k \S+"), stdout="Features for dev:\ngeneric-segmentation-offload: on\n")
    return bed
