"""scripts/apt-install.sh, every install of the Makefile, run rootless against stand-ins for
apt-get, dpkg, dpkg-query and systemctl: nothing it installs starts (policy-rc.d in place
while apt-get runs, removed after, a failed install too), and every unit of what it brought,
or of what an earlier Makefile installed, ends disabled (and stopped where systemd runs)."""

import os
import pathlib
import stat
import subprocess
import textwrap

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
HELPER = ROOT / "scripts" / "apt-install.sh"


def test_the_helper_is_an_executable_bash_script():
    assert HELPER.stat().st_mode & stat.S_IXUSR
    assert subprocess.run(["bash", "-n", str(HELPER)]).returncode == 0


STUBS = {
    "dpkg-query": """
        while read -r p; do echo "installed $p"; done < "$FAKE/installed"
    """,
    "dpkg": """
        [ "$1" = -L ] || exit 2; shift
        for p in "$@"; do cat "$FAKE/files/$p" 2>/dev/null; done
    """,
    "apt-get": """
        echo "apt-get $*" >> "$FAKE/log"
        [ "$1" = update ] && exit 0
        if [ -x "$APT_INSTALL_POLICY" ]; then "$APT_INSTALL_POLICY"; echo "policy $?" >> "$FAKE/log"; \
        else echo "policy none" >> "$FAKE/log"; fi
        for a in "$@"; do case "$a" in -*|install) ;; *) echo "$a" >> "$FAKE/installed";; esac; done
        for d in ${FAKE_DEPS:-}; do echo "$d" >> "$FAKE/installed"; done
        exit "${FAKE_APT_RC:-0}"
    """,
    "systemctl": """
        case "$1" in
          is-enabled) grep -qxF "$2" "$FAKE/enabled" && echo enabled || echo disabled ;;
          disable) u="$3"; grep -vxF "$u" "$FAKE/enabled" > "$FAKE/e.tmp"; mv "$FAKE/e.tmp" "$FAKE/enabled"
                   echo "disable $u" >> "$FAKE/log" ;;
          is-active) grep -qxF "$3" "$FAKE/active" ;;
          stop) echo "stop $2" >> "$FAKE/log" ;;
          *) exit 2 ;;
        esac
    """,
}

FILES = {
    "etcd-server": ["/usr/bin/etcd", "/lib/systemd/system/etcd.service", "/etc/init.d/etcd"],
    "docker.io": ["/usr/sbin/dockerd", "/lib/systemd/system/docker.service", "/lib/systemd/system/docker.socket"],
    "containerd": ["/usr/lib/systemd/system/containerd.service"],
    "openssh-server": ["/lib/systemd/system/ssh.service", "/lib/systemd/system/ssh@.service"],
    "exim4-base": ["/etc/init.d/exim4", "/lib/systemd/system/exim4-base.timer"],
    "iperf3": ["/usr/bin/iperf3"],
}
UNITS = ["etcd.service", "docker.service", "docker.socket", "containerd.service", "ssh.service", "exim4.service",
         "exim4-base.timer"]


@pytest.fixture
def fake(tmp_path):
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    for name, body in STUBS.items():
        f = bin_ / name
        f.write_text("#!/bin/bash\n" + textwrap.dedent(body))
        f.chmod(0o755)
    (tmp_path / "files").mkdir()
    for pkg, paths in FILES.items():
        (tmp_path / "files" / pkg).write_text("\n".join(paths) + "\n")
    (tmp_path / "installed").write_text("")
    (tmp_path / "enabled").write_text("\n".join(UNITS) + "\n")
    (tmp_path / "active").write_text("\n".join(UNITS) + "\n")
    (tmp_path / "log").write_text("")
    return tmp_path


def helper(fake, *args, installed=(), deps=(), rc=0, systemd=False, policy=None):
    (fake / "installed").write_text("".join(f"{p}\n" for p in installed))
    policy = policy or fake / "policy-rc.d"
    env = dict(os.environ, PATH=f"{fake / 'bin'}:{os.environ['PATH']}", FAKE=str(fake), FAKE_DEPS=" ".join(deps),
               FAKE_APT_RC=str(rc), APT_INSTALL_POLICY=str(policy),
               APT_INSTALL_SYSTEMD=str(fake if systemd else fake / "no-systemd"))
    env.pop("APT_INSTALL_KEEP", None)
    p = subprocess.run(["bash", str(HELPER), *args], capture_output=True, text=True, env=env, timeout=60)
    return p, (fake / "log").read_text().splitlines(), set((fake / "enabled").read_text().split())


def test_a_fresh_install_starts_nothing_and_leaves_nothing_enabled(fake):
    p, log, enabled = helper(fake, "etcd-server", "docker.io", "iperf3", deps=["containerd"])
    assert p.returncode == 0, p.stderr
    assert "apt-get update -qq" in log
    assert "apt-get install -y -qq etcd-server docker.io iperf3" in log
    assert "policy 101" in log                               # in place while apt-get ran
    assert not (fake / "policy-rc.d").exists()               # and gone afterwards
    disabled = [ln.split()[1] for ln in log if ln.startswith("disable ")]
    assert set(disabled) == {"etcd.service", "docker.service", "docker.socket", "containerd.service"}
    assert disabled.index("docker.socket") < disabled.index("docker.service")
    assert not any(ln.startswith("stop ") for ln in log)     # no systemd running: nothing to stop
    assert enabled == {"ssh.service", "exim4.service", "exim4-base.timer"}


def test_where_systemd_runs_what_was_brought_is_stopped_too(fake):
    p, log, _ = helper(fake, "etcd-server", systemd=True)
    assert p.returncode == 0, p.stderr
    assert "stop etcd.service" in log and "disable etcd.service" in log


def test_a_policy_already_there_is_left_as_it_was(fake):
    mine = fake / "policy-rc.d"
    mine.write_text("#!/bin/sh\nexit 101\n# the admin's\n")
    mine.chmod(0o755)
    p, log, _ = helper(fake, "iperf3")
    assert p.returncode == 0 and "policy 101" in log
    assert mine.read_text().endswith("# the admin's\n")


def test_a_failed_install_removes_the_policy_and_still_quiets_what_it_brought(fake):
    p, log, enabled = helper(fake, "docker.io", deps=["containerd"], rc=100)
    assert p.returncode == 100
    assert not (fake / "policy-rc.d").exists()
    assert {"docker.service", "docker.socket", "containerd.service"}.isdisjoint(enabled)


def test_installed_packages_are_quieted_without_apt_get(fake):
    p, log, enabled = helper(fake, "--quiet", "containerd", "--quiet", "exim4-base", "etcd-server", "docker.io",
                             "openssh-server", installed=["etcd-server", "docker.io", "openssh-server", "containerd"])
    assert p.returncode == 0, p.stderr
    assert not any(ln.startswith("apt-get") for ln in log)
    assert enabled == {"ssh.service", "exim4.service", "exim4-base.timer"}    # kept; exim4 not installed


def test_sshd_installed_here_is_quieted_like_the_rest(fake):
    p, log, enabled = helper(fake, "openssh-server")
    assert p.returncode == 0 and "disable ssh.service" in log
    assert "ssh.service" not in enabled


def test_a_sysv_init_script_is_quieted_as_its_service(fake):
    p, log, enabled = helper(fake, "exim4-base")
    assert p.returncode == 0, p.stderr
    assert {"exim4.service", "exim4-base.timer"}.isdisjoint(enabled)


def test_no_recommends_is_passed_on(fake):
    p, log, _ = helper(fake, "--no-install-recommends", "iperf3")
    assert "apt-get install -y -qq --no-install-recommends iperf3" in log
