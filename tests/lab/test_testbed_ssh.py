"""The ssh backend for real: sshd inside each host namespace of a lab, reached over the
management links; one host as root, the other as a user with passwordless sudo. The same
matrix as the lab, the same ratios, and nothing left on either host afterwards."""

from __future__ import annotations

import json
import os
import pathlib
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import numpy as np
import pytest
import sshd as sshd_mod
from sshd import ssh_world  # noqa: F401 - the fixture
from test_sleeve_flood import flood_binary, flood_case  # noqa: F401 - the fixture

from conftest import needs_root
from harness.hosts.local import pid_alive
from harness.net import confine
from harness import results
from harness.sleeve import build as sleeve_build
from harness.testbeds import lab as labmod
from harness.testbeds import lab_state

pytestmark = [needs_root(), pytest.mark.lab]
ROOT = pathlib.Path(__file__).resolve().parents[2]


class SshLab:
    """A lab whose host namespaces (two, or `hosts`) run sshd: "remote machines" for the ssh
    backend, every second one reached as a user with sudo."""

    def __init__(self, tmp: pathlib.Path, hosts: int = 2):
        sshd_mod.require()
        sshd_mod.ensure_user(sshd_mod.SUDO_USER, sudo=True)
        self.tmp = tmp
        # The SSH transport's directories already there are no test's of this lab (another
        # session's, or a killed run's from before); any that appear from now on are.
        self.dirs_before = set(self._host_dirs())
        self.runs: dict[int, str] = {}      # orchestrator pid → the testbed prefix it made
        self.lab = labmod.Lab.create(hosts=hosts)
        self.sshds = []
        try:
            os.chmod(tmp, 0o755)
            self.key = sshd_mod.keygen(tmp / "id_user")
            authorized = {u: [sshd_mod.public_key(self.key)] for u in ("root", sshd_mod.SUDO_USER)}
            for s in self.lab.sides:
                addr = self.lab.mgmt_addrs(s.index)[1]
                self.sshds.append(sshd_mod.start_sshd(s.host.netns, addr, tmp / f"sshd{s.index}", authorized))
            self.known = tmp / "known_hosts"
            self.known.write_text("".join(d.known_hosts_line() for d in self.sshds))
        except BaseException:
            self.close()
            raise

    def inventory(self, name="inventory.toml", extra: dict[int, str] | None = None, known=True) -> str:
        users = ("root", sshd_mod.SUDO_USER)
        body = ""
        for i, d in enumerate(self.sshds):
            body += (f'[[hosts]]\nname = "h{i}"\naddress = "{d.address}"\nuser = "{users[i % 2]}"\n'
                     f'sudo = {"true" if i % 2 else "false"}\nkey_file = "{self.key}"\n'
                     + (f'known_hosts = "{self.known}"\n' if known else "")
                     + 'underlay_interface = "ul0"\n' + (extra or {}).get(i, ""))
        f = self.tmp / name
        f.write_text(body)
        return str(f)

    def bare(self) -> None:
        """Strip the lab's own overlay bridge and container links from the host namespaces,
        so they are plain machines with a NIC (ul0) and a management link (mg0)."""
        for s in self.lab.sides:
            for dev in (s.container_port, s.bridge):
                s.host.run(["ip", "link", "del", dev], check=False)

    def env(self) -> dict:
        return dict(os.environ, HOME=str(self.tmp))      # no ~/.ssh of the machine's user applies

    @staticmethod
    def _host_dirs() -> list[pathlib.Path]:
        """The SSH transport's directories (harness/hosts/ssh/host.py), on either host: the hosts
        are namespaces of this machine, so their /tmp is this one."""
        return sorted(d for pat in ("overlaybench-ssh-*", "overlaybench-up-*")
                      for d in pathlib.Path("/tmp").glob(pat) if d.is_dir())

    def leftovers(self) -> list[str]:
        """Anything a remote testbed made, on either host: prefixed links and namespaces (other
        than the lab's own), their nftables tables, state directories, processes carrying a
        testbed's mark, and the SSH transport's /tmp/overlaybench-ssh-*/-up-* directories
        (made since the lab was, and not held by a live process outside this test: another
        session's)."""
        out = []
        state = pathlib.Path("/run/overlaybench")
        for d in state.glob("ob????"):
            try:
                doc = json.loads((d / "state.json").read_text())
            except (OSError, ValueError):
                continue
            if doc.get("kind") == "remote" and isinstance(doc.get("pid"), int):
                self.runs[doc["pid"]] = d.name
        ours = {os.getpid(), *sshd_mod.descendants(os.getpid())}
        for d in self._host_dirs():
            if d in self.dirs_before:
                continue
            try:
                pid = json.loads((d / "owner.json").read_text()).get("pid")
            except (OSError, ValueError, AttributeError):
                pid = None
            if isinstance(pid, int) and pid not in ours and pid_alive(pid):
                continue
            run = f" of {self.runs[pid]}" if pid in self.runs else ""
            out.append(f"dir {d} (owner pid {pid}{run})")
        for s in self.lab.sides:
            links = s.host.run(["ip", "-o", "link", "show"]).stdout
            out += [f"{s.host.name}: link {ln.split(': ')[1]}" for ln in links.splitlines()
                    if ln.split(": ")[1].startswith("ob") and not ln.split(": ")[1].startswith(self.lab.prefix)]
            out += [f"{s.host.name}: nft table inet {t}" for t in confine.tables(s.host)
                    if not t.startswith(self.lab.prefix)]
        ns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.split()
        out += [f"netns {n}" for n in ns if n.startswith("ob") and n[6:7] == "-" and not n.startswith(self.lab.prefix)
                and not n.startswith("obssh") and n[:6] not in lab_state.leftovers()]
        out += [f"dir {d}" for d in state.glob("ob????") if d.name not in lab_state.leftovers()
                and (d / "state.json").exists() and json.loads((d / "state.json").read_text()).get("kind") == "remote"]
        for e in pathlib.Path("/proc").glob("[0-9]*/environ"):
            try:
                if b"OVERLAYBENCH_PREFIX=" in e.read_bytes():
                    out.append(f"process {e.parent.name}")
            except OSError:
                pass
        return out

    def close(self) -> None:
        for d in self.sshds:
            d.stop()
        self.lab.teardown()


@pytest.fixture
def ssh_lab():
    # Not under pytest's tmp_path: its parent is 0700, and sshd reads a user's authorized
    # keys with that user's rights.
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="obsshlab-"))
    sl = SshLab(tmp)
    try:
        yield sl
    finally:
        sl.close()
        shutil.rmtree(tmp, ignore_errors=True)


@pytest.fixture
def ssh_lab3():
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="obsshlab-"))
    sl = SshLab(tmp, hosts=3)
    try:
        yield sl
    finally:
        sl.close()
        shutil.rmtree(tmp, ignore_errors=True)


def ob(*args, env=None, timeout=900):
    return subprocess.run([sys.executable, "-m", "harness.cli", *args], cwd=ROOT, capture_output=True, text=True,
                          env=env, timeout=timeout)


# The quick scenario at its standard MTU: both placements, the three modes, TCP throughput
# (the ratios compared; qperf over SSH runs in tests/lab/test_docker_containers.py).
QUICK = [str(ROOT / "scenarios" / "quick.toml"), "--underlay-mtu", "1500", "--tests", "iperf3.tcp",
         "--repeats", "6", "--duration", "1", "-q"]


def _paired_ratios(recs: list[dict]) -> dict[str, list[float]]:
    """fastdp/native and sleeve/fastdp throughput, one ratio per (placement, repeat); native
    runs host to host only, so it is the reference of both fastdp placements."""
    tput = {(r["mode"], r["placement"], r["repeat"]): r["value"] for r in recs
            if r["ok"] and r["metric"] == "throughput_bps"}
    out: dict[str, list[float]] = {}
    for (mode, pl, rep), v in sorted(tput.items()):
        if mode == "native":
            continue
        ref = "native" if mode == "fastdp" else "fastdp"
        out.setdefault(f"{mode}/{ref}", []).append(v / tput[(ref, "host-host" if ref == "native" else pl, rep)])
    return out


@pytest.fixture
def one_scheduler():
    """Both "machines" share this kernel's scheduler. With autogroups on, the CPU is shared
    per session: on the lab every tool and sleeve is in the orchestrator's session (one
    group), over SSH each host's are in that host's SSH sessions (a group per host), so the
    split between the sleeve and the tools, and with it the ratios, would differ for a
    reason real machines (a scheduler each) do not have. Both runs therefore go without
    autogroups; the setting is restored after."""
    knob = pathlib.Path("/proc/sys/kernel/sched_autogroup_enabled")
    if not knob.exists():
        yield
        return
    was = knob.read_text().strip()
    knob.write_text("0")
    try:
        yield
    finally:
        knob.write_text(was)


def test_quick_scenario_over_ssh_matches_the_lab_and_leaves_nothing(ssh_lab, tmp_path, one_scheduler):
    inv = ssh_lab.inventory(extra={0: "manage_underlay = true\n", 1: "manage_underlay = true\n"})
    # A real host forwards nothing between its interfaces unless told: run as one.
    for s in ssh_lab.lab.sides:
        s.host.run(["sysctl", "-q", "-w", "net.ipv4.ip_forward=0"])
    t0 = time.monotonic()
    lab_run = ob("run", *QUICK, "--results", str(tmp_path / "netns"))
    t_lab = time.monotonic() - t0
    assert lab_run.returncode == 0, lab_run.stderr[-3000:]
    ssh_lab.bare()
    t0 = time.monotonic()
    ssh_run = ob("run", *QUICK, "--inventory", inv, "--results", str(tmp_path / "ssh"), env=ssh_lab.env())
    t_ssh = time.monotonic() - t0
    assert ssh_run.returncode == 0, ssh_run.stderr[-3000:]
    a = pathlib.Path(lab_run.stdout.splitlines()[0])
    b = pathlib.Path(ssh_run.stdout.splitlines()[0])
    ra, rb = results.read_records(a), results.read_records(b)
    assert all(r["ok"] for r in rb), [r for r in rb if not r["ok"]][:3]
    assert {(r["case"], r["repeat"]) for r in ra} == {(r["case"], r["repeat"]) for r in rb}
    # Each mode's throughput over its reference's, repeat by repeat (within a repeat the
    # modes run back to back, so the machine's drift cancels), both placements pooled,
    # compared as medians of 12 ratios. The two runs follow each other, so whatever load
    # changes between them moves the ratios of one only. Beside two CPU hogs, 18 repeats of
    # each run resampled as this test's statistic (tests/README.md) gave SSH over lab
    # 0.55-1.21 for the sleeve (a normal fit to the logs: mean -0.14, sd 0.10 within the
    # runs), and the two runs' own offset (-14 % here, up to 17 % in quiet runs) adds as
    # much again. The bar is what a defect of the backend does and chance does not: a
    # sleeve that lost its offloads over SSH runs at about an eighth of its lab ratio. A
    # factor of 3 both ways is 7.8 standard deviations of both together; a chance failure
    # is designed out (under 1 in 10^6). (A factor of 2 was 1.2 times the worst resample.)
    fa, fb = _paired_ratios(ra), _paired_ratios(rb)
    assert sorted(fa) == sorted(fb) == ["fastdp/native", "sleeve/fastdp"], (fa, fb)
    for name in fa:
        lab_ratio, ssh_ratio = float(np.median(fa[name])), float(np.median(fb[name]))
        assert len(fa[name]) == len(fb[name]) == 12, (name, fa[name], fb[name])
        assert 1 / 3 <= ssh_ratio / lab_ratio <= 3.0, (name, lab_ratio, ssh_ratio, fa[name], fb[name])
    meta = results.read_meta(b)
    assert meta["backend"] == "ssh" and meta["cpu_accounting"].startswith("per-host")
    for h in ("h0", "h1"):
        facts = meta["hosts"][h]
        assert facts["kernel"] and facts["cpus"] and facts["nic_mtu"] and facts["tools"]["iperf3"]
        # the sleeve each host runs was built from the source this run names
        assert meta["sleeve_source"] and facts["sleeve_source"] == {"shipped": meta["sleeve_source"]}, facts
    cpu = [r for r in rb if r["metric"] in ("cpu_client_pct", "cpu_server_pct")]
    assert cpu and all(0 < r["value"] <= 100 for r in cpu)
    print(f"\nwall: netns {t_lab:.0f} s, ssh {t_ssh:.0f} s (ssh/netns {t_ssh / t_lab:.2f})")
    assert ssh_lab.leftovers() == []
    for s in ssh_lab.lab.sides:                           # the managed underlay is back as it was
        assert "mtu 1500" in s.host.run(["ip", "link", "show", "ul0"]).stdout


# --------------------------------------------------------------------------- bad input

def _one_line(p) -> str:
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert p.returncode == 2, (p.returncode, p.stdout[-300:], p.stderr[-1500:])
    assert len(lines) == 1 and "Traceback" not in p.stderr, p.stderr
    return lines[0]


def _set(text: str, host: int, key: str, value: str) -> str:
    """The inventory text with one host's key set (replaced or added)."""
    blocks = text.split("[[hosts]]\n")[1:]
    lines = [ln for ln in blocks[host].splitlines() if not ln.startswith(f"{key} =")] + [f"{key} = {value}"]
    blocks[host] = "\n".join(lines) + "\n"
    return "".join("[[hosts]]\n" + b for b in blocks)


BAD = [
    ("unreachable-address", lambda sl, t: _set(t, 1, "address", f'"{sl.dark}"'), [], lambda sl: sl.dark),
    ("connection-refused", lambda sl, t: _set(t, 1, "port", "2222"), [], "refused"),
    ("wrong-key", lambda sl, t: _set(t, 0, "key_file", f'"{sl.other_key}"'), [], "authentication failed"),
    ("unknown-host-key", lambda sl, t: "\n".join(ln for ln in t.splitlines() if not ln.startswith("known_hosts"))
     + "\n", [], "--accept-new-host-keys"),
    ("changed-host-key", lambda sl, t: _set(t, 0, "known_hosts", f'"{sl.changed_known}"'), ["--accept-new-host-keys"],
     "CHANGED"),
    ("no-sudo-right", lambda sl, t: _set(t, 1, "user", f'"{sshd_mod.PLAIN_USER}"'), [], "sudo"),
    ("no-such-interface", lambda sl, t: _set(t, 1, "underlay_interface", '"eth9"'), [], "eth9"),
    ("underlays-cannot-reach", lambda sl, t: _set(t, 1, "underlay_interface", '"mg0"'), [], "cannot reach"),
    ("mtu-of-an-unmanaged-nic", lambda sl, t: t, ["--underlay-mtu", "9000"], "has MTU 1500"),
    ("rate-on-an-unmanaged-nic", lambda sl, t: t, ["--rate", "1gbit"], "tbf"),
    ("pair-not-in-inventory", lambda sl, t: t, ["--pair", "h0,h7"], "no host 'h7'"),
]


def _dark_address(lab: labmod.Lab) -> str:
    """An address nothing answers, on a link of the lab's own: the host side of the lab's
    spare management /30 (the slot after its hosts'), on a veth whose far end, in h1's
    namespace, has no address. A connection to it fails once ARP gives up, and its packets
    stay on that link; an address routed nowhere in the lab would leave through this
    machine's default route. The root end carries the lab's link name, so its teardown
    removes the pair."""
    spare = len(lab.sides)
    assert spare < labmod.MAX_HOSTS, "no spare management /30 in a lab of MAX_HOSTS hosts"
    root_ip, dark = lab.mgmt_addrs(spare)
    link, far = lab.ns(f"m{spare}"), lab.sides[1].host.netns
    for argv in (["link", "add", link, "type", "veth", "peer", "name", "dk0", "netns", far],
                 ["addr", "add", f"{root_ip}/30", "dev", link], ["link", "set", link, "up"],
                 ["-n", far, "link", "set", "dk0", "up"]):
        subprocess.run(["ip", *argv], check=True)
    return dark


@pytest.fixture(scope="module")
def ssh_lab_bare():
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="obsshlab-"))
    sl = SshLab(tmp)
    try:
        sshd_mod.ensure_user(sshd_mod.PLAIN_USER, sudo=False)
        authorized = sshd_mod.public_key(sl.key)
        for d in sl.sshds:
            (d.workdir / "auth" / f"{sshd_mod.PLAIN_USER}.keys").write_text(authorized + "\n")
        sl.other_key = sshd_mod.keygen(tmp / "id_other")
        other_host = sshd_mod.keygen(tmp / "host_other")
        sl.changed_known = tmp / "changed_known_hosts"
        sl.changed_known.write_text(sl.sshds[0].known_hosts_line(other_host) + sl.sshds[1].known_hosts_line())
        sl.bare()
        sl.dark = _dark_address(sl.lab)
        yield sl
    finally:
        sl.close()
        shutil.rmtree(tmp, ignore_errors=True)


@pytest.mark.parametrize("edit, flags, needle", [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_bad_ssh_input_is_one_line_exit_2_and_leaves_nothing(ssh_lab_bare, tmp_path, edit, flags, needle):
    sl = ssh_lab_bare
    inv = tmp_path / "inv.toml"
    inv.write_text(edit(sl, pathlib.Path(sl.inventory()).read_text()))
    p = ob("run", "--modes", "native,fastdp", "--tests", "iperf3.tcp", "--repeats", "1", "--duration", "1",
           "--inventory", str(inv), *flags, "--results", str(tmp_path / "results"), env=sl.env(), timeout=120)
    line = _one_line(p)
    assert (needle(sl) if callable(needle) else needle) in line, line
    assert not (tmp_path / "results").exists()
    assert sl.leftovers() == []


def test_an_unknown_host_key_is_accepted_only_with_the_flag_and_then_remembered(ssh_lab_bare, tmp_path):
    sl = ssh_lab_bare
    text = "\n".join(ln for ln in pathlib.Path(sl.inventory()).read_text().splitlines()
                     if not ln.startswith("known_hosts")) + "\n"
    inv = tmp_path / "inv.toml"
    inv.write_text(text)
    env = dict(sl.env(), HOME=str(tmp_path))
    refused = ob("doctor", "--inventory", str(inv), env=env, timeout=120)
    assert refused.returncode == 1 and "--accept-new-host-keys" in refused.stdout, refused.stdout[-1000:]
    ok = ob("doctor", "--inventory", str(inv), "--accept-new-host-keys", env=env, timeout=120)
    assert "reachable, root, tools and kernel features present" in ok.stdout, ok.stdout[-1500:]
    known = (tmp_path / ".ssh" / "known_hosts").read_text()
    assert all(d.address in known for d in sl.sshds)
    again = ob("doctor", "--inventory", str(inv), env=env, timeout=120)       # remembered: no flag needed
    assert again.stdout.count("reachable, root, tools and kernel features present") == 2, again.stdout[-1500:]


# --------------------------------------------------------------------------- faults

def _testbed_of(pid: int) -> str | None:
    """The prefix of the remote testbed the orchestrator `pid` made (its state.json on the
    hosts, which share this machine's /run), or None while there is none yet."""
    for d in pathlib.Path("/run/overlaybench").glob("ob????"):
        try:
            doc = json.loads((d / "state.json").read_text())
        except (OSError, ValueError):
            continue
        if doc.get("kind") == "remote" and doc.get("pid") == pid:
            return d.name
    return None


def _iperf3_clients(prefix: str) -> list[int]:
    """iperf3 clients that testbed `prefix` started: it marks its every process with
    OVERLAYBENCH_PREFIX=<prefix>; other sessions' clients are not counted."""
    out = []
    for d in pathlib.Path("/proc").glob("[0-9]*"):
        try:
            if (d / "comm").read_text().strip() == "iperf3" \
                    and b"-c" in (d / "cmdline").read_bytes().split(b"\0") \
                    and f"OVERLAYBENCH_PREFIX={prefix}".encode() in (d / "environ").read_bytes().split(b"\0"):
                out.append(int(d.name))
        except OSError:     # it ended while we looked
            pass
    return out


def _sshd_children(listener: int) -> list[int]:
    out = []
    for pid in sshd_mod.descendants(listener):
        try:
            if pathlib.Path(f"/proc/{pid}/comm").read_text().strip() == "sshd":
                out.append(pid)
        except OSError:
            pass
    return out


def test_a_connection_dropped_mid_case_loses_nothing_and_the_run_reconnects(ssh_lab, tmp_path):
    """The sshd processes serving h0's connection are killed while a client runs there.

    Timing: the drop comes once one of this run's own iperf3 clients (4 s each) of its
    second case or later has been seen for a second by a poll of 50 ms, so it lands inside
    that case unless this test's thread stalls for 3 s; the waits have deadlines of 300 s
    and more: below 1e-6."""
    ssh_lab.bare()
    inv = ssh_lab.inventory()
    run = subprocess.Popen([sys.executable, "-m", "harness.cli", "run", "--modes", "native,fastdp", "--tests",
                            "iperf3.tcp", "--repeats", "2", "--duration", "4", "--inventory", inv,
                            "--results", str(tmp_path), "-q"], cwd=ROOT, env=ssh_lab.env(),
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    killed = None
    deadline = time.monotonic() + 300
    listener = ssh_lab.sshds[0].pid
    seen: dict[int, float] = {}
    prefix = None
    try:
        while killed is None and time.monotonic() < deadline and run.poll() is None:
            prefix = prefix or _testbed_of(run.pid)
            jsonl = next(tmp_path.glob("*/measurements.jsonl"), None)
            clients = _iperf3_clients(prefix) if prefix else []
            for pid in clients:
                seen.setdefault(pid, time.monotonic())
            # a client of the second case or later that has run for a second: mid-test
            if any(time.monotonic() - seen[pid] > 1.0 for pid in clients) and jsonl is not None \
                    and jsonl.read_text().count("\n") >= 2:
                # Every sshd process serving a connection to h0 (the orchestrator's only one).
                killed = _sshd_children(listener)
                for pid in killed:
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
            time.sleep(0.05)
        out, err = run.communicate(timeout=600)
    finally:
        if run.poll() is None:
            run.kill()
    assert killed, "no client was seen running under h0's connection"
    # What the drop interrupted decides the outcome: a client the orchestrator was waiting on
    # keeps running on h0 and its result is collected after the reconnect (the case is
    # measured); a command whose fate the drop hid fails its case (or its deployment's
    # cases) with a reason naming h0. Either way the run reconnects and goes on, and
    # nothing is left on the hosts.
    assert "h0: reconnected" in err, err[-2000:]
    recs = results.read_records(next(tmp_path.iterdir()))
    failed = {(r["case"], r["repeat"]) for r in recs if not r["ok"]}
    for r in recs:
        if not r["ok"]:
            assert "h0: connection lost" in r["error"], r["error"]
    assert len(failed) <= 2, failed                      # one case, or one deployment's two
    measured = {(r["case"], r["repeat"]) for r in recs if r["metric"] == "throughput_bps" and r["ok"]}
    assert len(measured) + len(failed) == 6 and measured.isdisjoint(failed)
    assert run.returncode == (3 if failed else 0), (run.returncode, err[-2000:])
    assert ssh_lab.leftovers() == []


# A killed orchestrator: its hosts made their remote directories (a background process's
# files; the sudo host's upload directory too), then it dies without closing them.
KILLED = """
import json, os, signal, sys
from harness.hosts.ssh.host import SshHost
from harness.hosts.ssh.connect import SshSettings
dirs = []
for kw in json.loads(sys.argv[1]):
    h = SshHost(SshSettings(**kw))
    h.start(["true"]).wait(10)
    h.put(sys.argv[2], f"{sys.argv[2]}.{h.name}")
    dirs += [h.state_dir] + ([h._upload_dir] if h.settings.sudo else [])
print(json.dumps(dirs), flush=True)
os.kill(os.getpid(), signal.SIGKILL)
"""


def test_down_inventory_removes_the_ssh_directories_of_a_killed_orchestrator_and_no_live_ones(ssh_world, tmp_path):
    import dataclasses

    from harness.hosts.ssh.host import SshHost
    targets = (ssh_world.root, ssh_world.sudo)
    inv = tmp_path / "inventory.toml"
    inv.write_text("".join(f'[[hosts]]\nname = "{t.name}"\naddress = "{t.space.addr}"\nuser = "{t.user}"\n'
                           f'sudo = {str(t.sudo).lower()}\nkey_file = "{t.key_file}"\n'
                           f'known_hosts = "{t.known_hosts}"\n' for t in targets))
    payload = tmp_path / "payload"
    payload.write_text("x")
    settings = json.dumps([dataclasses.asdict(t.settings()) for t in targets])
    killed = subprocess.run([sys.executable, "-c", KILLED, settings, str(payload)], cwd=ROOT, capture_output=True,
                            text=True, timeout=120)
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    dead = json.loads(killed.stdout)
    live = SshHost(ssh_world.sudo.settings())
    try:
        assert len(dead) == 3
        for d in dead:
            owner = json.loads(pathlib.Path(d, "owner.json").read_text())
            assert owner["owner_host"] == os.uname().nodename and not pid_alive(owner["pid"]), owner
        live.put(str(payload), f"{payload}.live")
        mine = [live.state_dir, live._upload_dir]
        assert all(os.path.isdir(d) for d in mine)
        d = ob("down", "--inventory", str(inv), env=dict(os.environ, HOME=str(tmp_path)), timeout=120)
        assert d.returncode == 0, d.stderr
        for gone in dead:
            assert f": dir {gone}\n" in d.stdout and not os.path.exists(gone), (gone, d.stdout)
        for kept in mine:
            assert f"{kept} (owned by running pid {os.getpid()}); --force" in d.stdout, d.stdout
            assert os.path.isdir(kept)
        # never the down's own connection's: every live owner named is still alive
        for ln in d.stdout.splitlines():
            if "owned by running pid" in ln:
                assert pid_alive(int(ln.split("running pid ")[1].split(")")[0])), ln
        assert live.run(["echo", "still"]).stdout == "still\n"   # its connection untouched
    finally:
        live.close()
        for x in dead:
            shutil.rmtree(x, ignore_errors=True)
    assert not any(os.path.exists(x) for x in mine)


# --------------------------------------------------------------------------- hostile traffic

# What the backend does differently by mode: an L3 sleeve (a TUN device and routes) and a
# keyed L2 one (a TAP on the bridge, its key put over SFTP). How each of the six sleeves
# counts what arrives is the daemon's, the same whoever deployed it: tests/lab/test_sleeve_flood.py
# floods all six on the lab.
SSH_SLEEVES = ["sleeve-l3", "sleeve-crypto"]


@pytest.mark.parametrize("name", SSH_SLEEVES)
def test_a_flood_against_a_sleeve_deployed_over_ssh_is_dropped_and_counted(ssh_lab, name, flood_binary,
                                                                            monkeypatch):
    """The sleeve's flood test, on a sleeve the ssh backend deployed on its hosts."""
    from harness.run import scenario as S
    from harness.testbeds import registry as backends
    from harness.bed import Options
    ssh_lab.bare()
    monkeypatch.setenv("HOME", str(ssh_lab.tmp))
    sc = S.build({"matrix": {"modes": [name]}, "testbed": {"backend": "ssh", "inventory": ssh_lab.inventory()}})
    tb = backends.open_testbed(sc, Options())
    try:
        tb.preflight(sc)
        tb.build(1500, None)
        flood_case(tb, name, flood_binary)
        shipped = sleeve_build.Source.shipped().hash     # what each host's sleeve was built from
        assert {h: f["sleeve_source"] for h, f in tb.host_facts().items()} == \
            {"h0": {"shipped": shipped}, "h1": {"shipped": shipped}}
    finally:
        tb.teardown()
    assert ssh_lab.leftovers() == []


def test_an_underlay_mtu_the_path_does_not_carry_fails_its_cases_and_the_others_are_measured(ssh_lab, tmp_path):
    """The NICs take MTU 9000 (managed), but what lies between the hosts carries 1500 (as a
    switch would: here h1 drops every arriving packet over 1500 bytes before its stack
    sees it): 9000's cases fail with the reason, 1500's are measured, nothing is left."""
    h1 = ssh_lab.lab.sides[1].host
    for argv in (["nft", "add", "table", "inet", "obswitch"],
                 ["nft", "add", "chain", "inet", "obswitch", "pre", "{ type filter hook prerouting priority -300 ; }"],
                 ["nft", "add", "rule", "inet", "obswitch", "pre", "iifname", "ul0", "meta", "length", "gt", "1500",
                  "drop"]):
        h1.run(argv)
    inv = ssh_lab.inventory(extra={0: "manage_underlay = true\n", 1: "manage_underlay = true\n"})
    ssh_lab.bare()
    p = ob("run", "--modes", "native", "--tests", "iperf3.tcp", "--underlay-mtu", "1500,9000", "--repeats", "1",
           "--duration", "1", "-q", "--inventory", inv, "--results", str(tmp_path), env=ssh_lab.env())
    assert p.returncode == 3, (p.returncode, p.stderr[-2000:])
    recs = results.read_records(next(tmp_path.iterdir()))
    by_mtu = {u: [r for r in recs if r["underlay_mtu"] == u] for u in (1500, 9000)}
    assert by_mtu[1500] and all(r["ok"] for r in by_mtu[1500])
    assert by_mtu[9000] and not any(r["ok"] for r in by_mtu[9000])
    assert all("a 9000-byte packet with DF set does not reach" in r["error"] for r in by_mtu[9000]), by_mtu[9000]
    assert ssh_lab.leftovers() == []


def test_blast_is_shipped_to_ssh_hosts_and_removed_with_the_testbed(ssh_lab, tmp_path):
    """udp.pps64 and packet.pps64 between two SSH hosts: this machine's blast is put in each
    host's state directory (no compiler asked of them), both ends run it from there, every
    figure comes back, and it leaves with the testbed. One user of the two logs in with sudo."""
    inv = ssh_lab.inventory()
    ssh_lab.bare()
    p = ob("run", "--modes", "native,fastdp", "--placements", "host-host", "--tests", "udp.pps64,packet.pps64",
           "--repeats", "1", "--duration", "1", "-q", "--inventory", inv, "--results", str(tmp_path),
           env=ssh_lab.env())
    assert p.returncode == 0, (p.returncode, p.stderr[-2000:])
    run = next(tmp_path.iterdir())
    recs = results.read_records(run)
    assert recs and all(r["ok"] for r in recs), [r for r in recs if not r["ok"]][:3]
    argv0 = {json.loads(f.read_text())["argv"][0] for f in (run / "raw").glob("*pps64*.cmd.json")}
    assert len(argv0) == 1 and re.fullmatch(r"/run/overlaybench/ob[0-9a-f]{4}/blast", argv0.pop())   # the shipped copy
    by = {(r["mode"], r["test"], r["metric"]): r["value"] for r in recs}
    for mode in ("native", "fastdp"):
        for test in ("udp.pps64", "packet.pps64"):
            assert 0 < by[(mode, test, "pps")] <= by[(mode, test, "sent_pps")], (mode, test)
    assert ssh_lab.leftovers() == []


# --------------------------------------------------------------------------- three hosts

def test_three_ssh_hosts_every_pair_and_a_mesh_and_nothing_left(ssh_lab3, tmp_path):
    """Every host of a three-host inventory (--pair all): native, fastdp and a keyed sleeve
    between every pair one at a time, then every pair at once; nothing left on any host.
    Nothing measured is judged: only that each pair was measured and named."""
    ssh_lab3.bare()
    for s in ssh_lab3.lab.sides:
        s.host.run(["sysctl", "-q", "-w", "net.ipv4.ip_forward=0"])
    inv = ssh_lab3.inventory()
    every = ["h0→h1", "h0→h2", "h1→h2"]
    for schedule in ("sequential", "mesh"):
        p = ob("run", "--inventory", inv, "--pair", "all", "--modes", "native,fastdp,sleeve-crypto", "--tests",
               "iperf3.tcp", "--placements", "host-host,container-container", "--schedule", schedule,
               "--repeats", "1", "--duration", "1", "--results", str(tmp_path / schedule), "-q", "--format", "json",
               env=ssh_lab3.env())
        assert p.returncode == 0, p.stderr[-3000:]
        run = pathlib.Path(json.loads(p.stdout)["run_dir"])
        recs = [r for r in results.RunStore.open(run).records() if r["metric"] == "throughput_bps"]
        assert all(r["ok"] for r in recs), [r["error"] for r in recs if not r["ok"]]
        got = {}
        for r in recs:
            got.setdefault((r["mode"], r["placement"]), []).append(r["pair"])
        assert {k: sorted(v) for k, v in got.items()} == {k: every for k in [("native", "host-host")] + [
            (m, pl) for m in ("fastdp", "sleeve-crypto") for pl in ("host-host", "container-container")]}
        meta = results.read_meta(run)
        assert sorted(meta["hosts"]) == ["h0", "h1", "h2"]
    assert ssh_lab3.leftovers() == []
