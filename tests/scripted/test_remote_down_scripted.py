"""What a remote testbed leaves and how it goes, on ScriptedHosts: the per-side removal
script a teardown runs (unmarked, so it never counts itself among the prefix's
processes), `down` of a killed run's leftovers by their owners, and a remote testbed
whose build fails half way removing what it claimed on both hosts. The script's own
effects are checked over SSH by test_testbed_ssh.py and test_confine.py."""

from __future__ import annotations

import json
import os
import shutil
import socket

import pytest

from harness.bed import Options
from harness.core.errors import CommandError, HarnessError
from harness.hosts.local import boot_id, owner_stamp, pidns_of
from harness.hosts.scripted import ScriptedHost
from harness.run import scenario as S
from harness.testbeds import remote_down
from harness.testbeds.inventory import HostSpec
from harness.testbeds.remote import RemoteTestbed, Tagged
from harness.testbeds.remote_down import CLAIM_SCRIPT, REMOVE_SCRIPT

HERE = socket.gethostname()
GONE = 4194305                  # above any pid the kernel hands out (PID_MAX_LIMIT): never alive
RM_DIRS = 'for d; do [ -d "$d" ] || continue; rm -rf "$d" && echo "dir $d"; done'


def removal(prefix: str, side: str) -> list[str]:
    return ["sh", "-c", REMOVE_SCRIPT, "sh", prefix, side]


# ------------------------------------------------------------------ the removal script

def test_a_sides_removal_runs_unmarked_on_the_host_and_says_what_went():
    raw = ScriptedHost("h1")
    raw.expect(removal("ob12ab", "1"), stdout="netns ob12ab-c1\nlink ob12ab-br0\n\ndir /run/overlaybench/ob12ab/h1\n")
    gone = remote_down.remove_remote(Tagged(raw, "ob12ab"), "ob12ab", 1)
    raw.assert_all_used()
    assert gone == ["h1: netns ob12ab-c1", "h1: link ob12ab-br0", "h1: dir /run/overlaybench/ob12ab/h1"]


def test_a_removal_that_fails_is_an_error_naming_host_and_prefix():
    raw = ScriptedHost("h0")
    raw.expect(removal("ob12ab", ""), returncode=1, stderr="sh: 1: ip: not found\n")
    with pytest.raises(HarnessError, match="^h0: removing ob12ab failed: sh: 1: ip: not found$"):
        remote_down.remove_remote(raw, "ob12ab")


@pytest.mark.parametrize("prefix", ["ob12", "ob12ab-h0", "ob12ab;reboot", "", "OB12AB"])
def test_only_a_testbed_prefix_is_ever_removed(prefix):
    raw = ScriptedHost("h0")
    with pytest.raises(HarnessError, match="is not a testbed prefix"):
        remote_down.remove_remote(raw, prefix)
    assert raw.calls == []


# ------------------------------------------------------------------ down

def scan_line(kind: str, name: str, owner: dict | str | None) -> str:
    body = owner if isinstance(owner, str) else json.dumps(owner) if owner is not None else ""
    return f"{kind}\t{name}\t{body}\n"


def scans(host: ScriptedHost, *lines: str) -> None:
    host.expect(["sh", "-c", remote_down.SCAN_SCRIPT], stdout="".join(lines))


def test_down_removes_what_a_dead_owner_left_and_keeps_what_a_live_or_unknown_one_holds():
    h = ScriptedHost("h0")
    scans(h,
          scan_line("state", "ob1111", {"owner_host": HERE, "pid": GONE}),
          scan_line("state", "ob2222", {"owner_host": HERE, "pid": os.getpid()}),
          scan_line("state", "ob3333", {"owner_host": "ci-runner-7", "pid": 12}),
          scan_line("state", "ob4444", "{not json"),
          scan_line("state", "obzzzz", {"owner_host": HERE, "pid": GONE}),         # not a prefix: not ours
          scan_line("dir", "/tmp/overlaybench-ssh-0123abcd", {"owner_host": HERE, "pid": GONE}),
          scan_line("dir", "/tmp/overlaybench-up-89abcdef", None),
          scan_line("dir", "/tmp/overlaybench-ssh-feedf00d", {"owner_host": HERE, "pid": os.getpid()}),
          scan_line("dir", "/tmp/overlaybench-ssh-../../etc", {"owner_host": HERE, "pid": GONE}),
          "garbage line\n")
    h.expect(removal("ob1111", ""), stdout="dir /run/overlaybench/ob1111\n")
    h.expect(["sh", "-c", RM_DIRS, "sh", "/tmp/overlaybench-ssh-0123abcd"],
             stdout="dir /tmp/overlaybench-ssh-0123abcd\n")
    removed, kept = remote_down.down([("h0", h)])
    h.assert_all_used()
    assert removed == ["h0: dir /run/overlaybench/ob1111", "h0: dir /tmp/overlaybench-ssh-0123abcd"]
    assert kept == [f"h0: ob2222 (owned by running pid {os.getpid()})",
                    "h0: ob3333 (owned by ci-runner-7, which this machine cannot check)",
                    "h0: ob4444 (owned by an unknown machine, which this machine cannot check)",
                    "h0: /tmp/overlaybench-up-89abcdef (no owner recorded)"]


def test_down_with_force_removes_every_leftover_but_its_own_connections_directory():
    h = ScriptedHost("h0")
    scans(h,
          scan_line("state", "ob2222", {"owner_host": HERE, "pid": os.getpid()}),
          scan_line("state", "ob3333", {"owner_host": "ci-runner-7", "pid": 12}),
          scan_line("dir", "/tmp/overlaybench-up-89abcdef", None),
          scan_line("dir", "/tmp/overlaybench-ssh-feedf00d", {"owner_host": HERE, "pid": os.getpid()}))
    h.expect(removal("ob2222", ""))
    h.expect(removal("ob3333", ""))
    h.expect(["sh", "-c", RM_DIRS, "sh", "/tmp/overlaybench-up-89abcdef"])
    removed, kept = remote_down.down([("h0", h)], force=True)
    h.assert_all_used()
    assert kept == []


def test_down_scans_every_host_before_removing_anything():
    """Hosts that are namespaces of one machine share /run/overlaybench: the first host's
    removal takes the others' state directories with its own, so each must be found first."""
    journal = []
    a, b = ScriptedHost("h0", journal=journal), ScriptedHost("h1", journal=journal)
    for h in (a, b):
        scans(h, scan_line("state", "ob1111", {"owner_host": HERE, "pid": GONE}))
        h.expect(removal("ob1111", ""))
    remote_down.down([("h0", a), ("h1", b)])
    assert [(name, c.argv[2] == remote_down.SCAN_SCRIPT) for name, c in journal] == [
        ("h0", True), ("h1", True), ("h0", False), ("h1", False)]


# ------------------------------------------------------------------ a remote testbed's teardown

def test_a_remote_build_that_fails_half_way_removes_what_it_claimed_on_both_hosts():
    specs = tuple(HostSpec(name=f"h{i}", address=f"10.1.0.{i + 1}", underlay_interface="eth1",
                           underlay_address=f"10.1.0.{i + 1}") for i in (0, 1))
    raw = (ScriptedHost("h0"), ScriptedHost("h1"))
    tb = RemoteTestbed(specs, raw, Options(run_id="run-1"))
    p = tb.prefix
    mark = ["env", f"OVERLAYBENCH_PREFIX={p}"]

    def marked(line: str) -> list[str]:
        return [*mark, *line.split()]

    for h in raw:                                            # preflight
        h.expect(lambda argv: argv[:3] == [*mark, "env"])
        h.expect(marked("ip -o -4 route show root 198.18.64.0/24"))
    for i, h in enumerate(raw):
        h.expect(marked("ip -o -4 addr show dev eth1"),
                 stdout=f"2: eth1    inet 10.1.0.{i + 1}/24 brd 10.1.0.255 scope global eth1\n")
    for h in raw:
        h.expect(marked("cat /sys/class/net/eth1/mtu"), stdout="1500\n")
    for i, h in enumerate(raw):
        h.expect(marked(f"ping -c 2 -i 0.2 -W 2 -I 10.1.0.{i + 1} 10.1.0.{2 - i}"))
    for h in raw:                                            # build: both hosts' state directories claimed
        h.expect(lambda argv: argv[:5] == ["sh", "-c", CLAIM_SCRIPT, "sh", "/run/overlaybench"] and argv[5] == p)
    for i, h in enumerate(raw):                              # every host's owner, before either is built
        h.expect(marked(f"mkdir -m 0700 /run/overlaybench/{p}/h{i}"))
        for path in (f"/run/overlaybench/{p}/state.json", f"/run/overlaybench/{p}/h{i}/underlay.json"):
            h.expect([*mark, "sh", "-c", 'cat > "$1.tmp" && mv "$1.tmp" "$1"', "sh", path])
    h0 = raw[0]
    h0.expect([*mark, "nft", "-f", "-"])
    h0.expect(marked(f"ip link add {p}-br0 type bridge stp_state 0 forward_delay 0"),
              returncode=2, stderr="RTNETLINK answers: File exists\n")
    for i, h in enumerate(raw):                              # teardown, side by side
        h.expect(marked(f"ip netns del {p}-c{i}"))
        h.expect(removal(p, str(i)), stdout=f"dir /run/overlaybench/{p}/h{i}\n")

    try:
        tb.preflight(S.build({"matrix": {"modes": ["native"]}}))
        with pytest.raises(CommandError, match=f"h0: `ip link add {p}-br0 .*` exited 2: RTNETLINK answers: File exists"):
            tb.build(1500, None)
        artifacts_left = tb.artifact_dir.exists()
    finally:
        shutil.rmtree(tb.artifact_dir, ignore_errors=True)     # where the teardown itself did not get that far
    for h in raw:
        h.assert_all_used()
        assert h.closed
    assert not artifacts_left, "the teardown left the testbed's own directory here"
    state = json.loads(next(c.input for c in h0.calls if c.argv[-1].endswith("/state.json")))
    assert (state["prefix"], state["pid"], state["owner_host"], state["run_id"]) == (p, os.getpid(), HERE, "run-1")
    underlay = json.loads(next(c.input for c in h0.calls if c.argv[-1].endswith("/underlay.json")))
    assert underlay == {"host": "h0", "dev": "eth1", "mtu": 1500, "managed": False}


# ------------------------------------------------------------------ whose owner record

def test_an_owner_is_this_machines_by_its_kernels_boot_id_else_by_its_host_name():
    me, other = boot_id(), "00000000-0000-4000-8000-000000000000"
    assert me
    live, dead = {"pid": os.getpid()}, {"pid": 1 << 30}
    assert remote_down.owner_alive({**live, "owner_host": HERE, "boot_id": me}) is True
    assert remote_down.owner_alive({**dead, "owner_host": HERE, "boot_id": me}) is False
    # a machine that shares this one's host name: its pids are not this machine's to look up
    assert remote_down.owner_alive({**live, "owner_host": HERE, "boot_id": other}) is None
    # this kernel under another host name (renamed since, or a container's): judged here
    assert remote_down.owner_alive({**live, "owner_host": "elsewhere.invalid", "boot_id": me}) is True
    # a record without a boot id (written before they had one): by host name
    assert remote_down.owner_alive({**live, "owner_host": HERE}) is True
    assert remote_down.owner_alive({**live, "owner_host": "elsewhere.invalid"}) is None
    assert remote_down.owner_alive({**live}) is None


def test_an_owner_record_names_this_kernel():
    assert owner_stamp() == {"pid": os.getpid(), "pidns": pidns_of(), "boot_id": boot_id()}
