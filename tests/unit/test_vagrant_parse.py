"""harness.testbeds.vagrant_cli without Vagrant: its parsers on Vagrant 2.3.4's captured output,
its one-line failures, and the message when Vagrant is not installed
(tests/lab/test_vagrant_hosts.py: Vagrant, dockerd and the images for real)."""

from __future__ import annotations

import pathlib

import pytest

from harness.core.errors import HarnessError
from harness.testbeds import vagrant_cli

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _one_line(excinfo) -> str:
    msg = str(excinfo.value)
    assert "\n" not in msg and msg
    return msg


# ---- captured from Vagrant 2.3.4 (Debian) with the docker provider on this machine ----

STATUS_RUNNING = """\
1795392564,h1,metadata,provider,docker
1795392564,h2,metadata,provider,docker
1795392565,h1,provider-name,docker
1795392565,h1,state,running
1795392565,h1,state-human-short,running
1795392565,h1,state-human-long,The container is created and running. You can stop it using\\n`vagrant halt`%!(VAGRANT_COMMA) see logs with `vagrant docker-logs`%!(VAGRANT_COMMA) and\\nkill/destroy it with `vagrant destroy`.
1795392565,h2,provider-name,docker
1795392565,h2,state,running
1795392565,h2,state-human-short,running
1795392565,,ui,info,Current machine states:\\n\\nh1                        running (docker)\\nh2                        running (docker)\\n
"""

STATUS_NOT_CREATED = """\
1795392627,h1,metadata,provider,libvirt
1795392627,h1,provider-name,libvirt
1795392627,h1,state,not_created
1795392627,h2,provider-name,libvirt
1795392627,h2,state,not_created
1795392627,h2,state-human-short,not created
"""

SSH_CONFIG = """\
Host h1
  HostName 127.0.0.1
  User vagrant
  Port 2222
  UserKnownHostsFile /dev/null
  StrictHostKeyChecking no
  PasswordAuthentication no
  IdentityFile /tmp/vdot1/machines/h1/docker/private_key
  IdentitiesOnly yes
  LogLevel FATAL

Host h2
  HostName 127.0.0.1
  User vagrant
  Port 2200
  UserKnownHostsFile /dev/null
  StrictHostKeyChecking no
  PasswordAuthentication no
  IdentityFile /tmp/vdot1/machines/h2/docker/private_key
  IdentitiesOnly yes
  LogLevel FATAL

"""

EXITED_EARLY = """\
==> h1: Creating the container...
    h1:   Name: vfail_h1_1795392979
    h1: Container created: 13b1d61d034ddc57
==> h1: Waiting for container to enter "running" state...
The container started either never left the "stopped" state or
very quickly reverted to the "stopped" state. This is usually
because the container didn't execute a command that kept it running,
and usually indicates a misconfiguration.

If you meant for this container to not remain running, please
set the Docker provider configuration "remains_running" to "false":
"""

IMAGE_MISSING = """\
An error occurred while executing the action on the 'h2'
machine. Please handle this error then try again:

A Docker command executed by Vagrant didn't complete successfully!
Stderr: Unable to find image 'overlaybench/nope:x' locally
docker: Error response from daemon: Get "https://registry-1.docker.io/v2/": dial tcp: lookup registry-1.docker.io: no such host
"""


def test_parse_status():
    assert vagrant_cli.parse_status(STATUS_RUNNING) == {"h1": ("running", "docker"), "h2": ("running", "docker")}
    assert vagrant_cli.parse_status(STATUS_NOT_CREATED) == {"h1": ("not_created", "libvirt"),
                                                            "h2": ("not_created", "libvirt")}
    assert vagrant_cli.parse_status("") == {}


def test_parse_machine_readable_undoes_vagrants_escapes():
    rows = vagrant_cli.parse_machine_readable(STATUS_RUNNING)
    long = next(d for t, k, d in rows if t == "h1" and k == "state-human-long")
    assert "`vagrant halt`, see logs" in long[0] and "\n" in long[0]


def test_parse_ssh_config():
    ms = vagrant_cli.parse_ssh_config(SSH_CONFIG, ["h1", "h2"])
    assert ms["h1"] == vagrant_cli.VagrantMachine("h1", "127.0.0.1", 2222, "vagrant",
                                                  "/tmp/vdot1/machines/h1/docker/private_key", False)
    assert ms["h2"].port == 2200 and ms["h2"].identity_file.endswith("h2/docker/private_key")
    with pytest.raises(HarnessError, match="says nothing about machine h3"):
        vagrant_cli.parse_ssh_config(SSH_CONFIG, ["h3"])
    with pytest.raises(HarnessError, match="h1 lacks identityfile"):
        vagrant_cli.parse_ssh_config("Host h1\n  HostName 127.0.0.1\n  User v\n  Port 22\n", ["h1"])
    checked = SSH_CONFIG.replace("StrictHostKeyChecking no", "StrictHostKeyChecking yes")
    assert vagrant_cli.parse_ssh_config(checked, ["h1"])["h1"].verify_host_key is True


def test_explain_failure_is_one_line_with_the_cause():
    assert vagrant_cli.explain_failure("vagrant up", EXITED_EARLY.splitlines()) == (
        'vagrant up: h1: The container started either never left the "stopped" state or very '
        'quickly reverted to the "stopped" state. This is usually because the container didn\'t '
        "execute a command that kept it running, and usually indicates a misconfiguration.")
    assert vagrant_cli.explain_failure("vagrant up", IMAGE_MISSING.splitlines()) == (
        "vagrant up: docker image overlaybench/nope:x is missing and no registry has it "
        "(overlaybench's host image: make vagrant-image)")
    dead = ["Stderr: Cannot connect to the Docker daemon at unix:///tmp/dead.sock. Is the docker daemon running?"]
    assert vagrant_cli.explain_failure("vagrant up", dead) == (
        "vagrant up: dockerd does not answer at unix:///tmp/dead.sock (start one: make dockerd-up)")
    assert vagrant_cli.explain_failure("x", []) == "x: no output"
    # two machines up side by side (Vagrant 2.3.4's words, as it printed them here)
    parallel = ["==> h2: Waiting for machine to boot. This may take a few minutes...", "",
                "An error occurred while executing multiple actions in parallel.",
                "Any errors that occurred are shown below.", "",
                "An error occurred while executing the action on the 'h1'",
                "machine. Please handle this error then try again:", "",
                "Timed out while waiting for the machine to boot. This means that",
                "Vagrant was unable to communicate with the guest machine within",
                'the configured ("config.vm.boot_timeout" value) time period.', "",
                "If you look above, you should be able to see the error(s) that"]
    assert vagrant_cli.explain_failure("vagrant up", parallel) == (
        "vagrant up: h1: Timed out while waiting for the machine to boot. This means that Vagrant was unable "
        'to communicate with the guest machine within the configured ("config.vm.boot_timeout" value) time period.')


def test_vagrant_not_installed(tmp_path):
    env = {"PATH": str(tmp_path)}  # a PATH without vagrant
    for call in (lambda: vagrant_cli.status(ROOT, env), lambda: vagrant_cli.up(ROOT, "docker", env=env),
                 lambda: vagrant_cli.ssh_config(ROOT, env), lambda: vagrant_cli.destroy(ROOT, env)):
        with pytest.raises(HarnessError) as e:
            call()
        assert _one_line(e) == "vagrant is not installed (apt-get install vagrant)"
