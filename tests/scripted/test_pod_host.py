"""A pod as a Host (harness/hosts/kube/pod.py) on the fake API: the wrappers it puts around
a command (the hard timeout in the pod, stdin through argv, the started command's pid
file), exit codes as LocalHost gives them, stop and signal as `kill` execs, and a pod that
cannot run answering with its reason."""

import base64
import re
import signal

import pytest

from harness.core.errors import CommandError
from harness.hosts.kube.api import PodStatus
from harness.hosts.kube.pod import PodHost
from scripted_kube import FakeApi

NS = "overlaybench-ob12ab"


@pytest.fixture
def api():
    a = FakeApi()
    a.namespaces[NS] = {"name": NS, "labels": {}, "phase": "Active"}
    for name, n in (("h0", "node-a"), ("c0", "node-a")):
        a.pods[(NS, name)] = {"metadata": {"name": name}, "spec": {"nodeName": n}}
    return a


def host(api, pod="h0", **kw):
    return PodHost(api, NS, pod, f"node-a/{pod}", node="node-a", sleep=lambda s: None, **kw)


def _execs(api):
    return [c[3] for c in api.calls if c[0] == "exec"]


def test_run_carries_a_hard_timeout_and_its_input_through_argv(api):
    api.expect_exec("h0", ["sh", "-c", 'i=$0; printf %s "$i" | "$@"', "a b\n", "cat"], stdout="a b\n")
    done = host(api).run(["cat"], input="a b\n", timeout=7)
    assert (done.returncode, done.stdout, done.argv) == (0, "a b\n", ["cat"])
    assert _execs(api)[0][:4] == ("timeout", "-s", "KILL", "7")
    api.assert_clean()


def test_exit_codes_are_localhosts(api):
    api.expect_exec("h0", "false", returncode=1, stderr="no\n")
    api.expect_exec("h0", "sleep 9", returncode=143)
    h = host(api)
    with pytest.raises(CommandError, match=r"node-a/h0: `false` exited 1: no"):
        h.run(["false"])
    assert h.run(["sleep", "9"], check=False).returncode == -signal.SIGTERM


def test_a_command_killed_at_its_timeout_is_a_timeout(api):
    api.expect_exec("h0", "sleep 9", returncode=137)
    done = host(api).run(["sleep", "9"], timeout=0, check=False)
    assert done.returncode is None
    assert _execs(api)[0][:4] == ("timeout", "-s", "KILL", "0.01")      # never `timeout 0` (no limit)


def test_a_started_command_runs_until_stopped_by_a_kill_exec(api):
    api.expect_start("c0", "iperf3 -s -1 -p 5201", stderr="bye\n")
    p = host(api, "c0").start(["iperf3", "-s", "-1", "-p", "5201"])
    assert p.poll() is None and p.pid is None
    with pytest.raises(TimeoutError):
        p.wait(0)
    out = p.stop()
    assert (out.returncode, out.stderr) == (-signal.SIGTERM, "bye\n") and p.poll() == -signal.SIGTERM
    start, kill = _execs(api)
    assert start[:3] == ("sh", "-c", 'echo $$ > "$0"; exec "$@"') and start[4:] == ("iperf3", "-s", "-1", "-p", "5201")
    assert kill[4:] == ("sh", "-c", 'kill -s "$1" "$(cat "$0")"', start[3], "TERM")
    assert p.stop() == out                              # idempotent
    with pytest.raises(ProcessLookupError):
        p.signal(signal.SIGUSR1)
    api.assert_clean()


def test_a_pod_whose_image_cannot_be_pulled_answers_with_its_reason(api):
    api.pod_states["h0"] = [PodStatus("Pending"), PodStatus("Pending", reason="ErrImagePull", message="not found")]
    h = host(api)
    done = h.run(["cat", "/proc/stat"], check=False)
    assert (done.returncode, done.stderr) == (125, "pod h0 on node node-a: ErrImagePull: not found\n")
    p = h.start(["iperf3", "-s"])
    assert p.poll() == 125 and p.wait(0).stderr == done.stderr and p.stop().returncode == 125
    assert not _execs(api)
    assert [c[0] for c in api.calls].count("pod_status") == 2      # asked until stuck, then never again


def test_a_long_pull_error_is_cut_so_that_the_reason_survives_a_cases_tail(api):
    """containerd's pull errors run to hundreds of characters, and a case keeps the last 300
    of what its server said: the pod and its reason come first, the message is cut."""
    long = 'failed to pull and unpack image "r.example/t:x": ' + "x" * 400
    api.pod_states["h0"] = [PodStatus("Pending", reason="ErrImagePull", message=long)]
    h = host(api)
    err = h.run(["iperf3", "-s"], check=False).stderr
    assert err.startswith("pod h0 on node node-a: ErrImagePull: failed to pull and unpack image")
    assert len(err.strip()) <= 300 and err.strip().endswith("…")


def test_a_pod_that_never_runs_is_broken_after_the_deadline(api):
    api.pod_states["h0"] = [PodStatus("Pending", reason="ContainerCreating")]
    h = host(api, ready_timeout=0)
    assert h.run(["true"], check=False).returncode == 125
    assert h.broken == "pod h0 on node node-a: ContainerCreating: not running after 0s"


def test_put_and_get_go_as_base64_through_exec(api, tmp_path):
    src, dst = tmp_path / "a", tmp_path / "b"
    src.write_bytes(b"\x00key\xff")
    got = {}

    def put(argv):
        got.update(data=argv[3], path=argv[4], mode=argv[5])
        return argv[:3] == ["sh", "-c", 'printf %s "$0" | base64 -d > "$1" && chmod "$2" "$1"']
    api.expect_exec("h0", put)
    api.expect_exec("h0", re.compile(r"base64 -w0 /tmp/k"), stdout=base64.b64encode(b"\x00key\xff").decode())
    h = host(api)
    h.put(str(src), "/tmp/k", mode=0o600)
    assert (base64.b64decode(got["data"]), got["path"], got["mode"]) == (b"\x00key\xff", "/tmp/k", "600")
    h.get("/tmp/k", str(dst))
    assert dst.read_bytes() == b"\x00key\xff"
    api.assert_clean()
