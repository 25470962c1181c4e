#!/usr/bin/env bash
# Install Debian packages so that none of them leaves a service enabled or running: every
# apt-get install of the Makefile goes through here (tests/unit/test_makefile.py holds it so).
#
#   scripts/apt-install.sh [--no-install-recommends] [--quiet PKG]... PKG...
#
# 1. The PKGs not installed yet are installed (apt-get update first, and only then), with a
#    /usr/sbin/policy-rc.d that exits 101 in place so that no maintainer script starts a
#    daemon; it is put there only when none exists, and removed afterwards, on failure too.
# 2. Quieted: the systemd units (service, socket, timer; a SysV init script as its service)
#    of every package this install brought, the PKGs' dependencies and recommendations
#    among them; of every PKG already installed (what an earlier Makefile installed without
#    this script); and of each `--quiet PKG` that is installed (a daemon a PKG pulled in:
#    only quieted, never installed).
#    An enabled unit is disabled (`systemctl disable` works offline, without systemd as
#    PID 1); where systemd runs, an active one is also stopped.
#    A PKG that was installed before, and is in KEEP (default openssh-server), keeps its
#    units as they were: its sshd may be how this machine is reached. Installed here, it is
#    quieted like any other (the tests start sshd themselves).
#
# As root. Environment: APT_INSTALL_KEEP (the KEEP list), and, for tests,
# APT_INSTALL_POLICY (the policy-rc.d path) and APT_INSTALL_SYSTEMD (systemd's run directory).
set -euo pipefail

POLICY=${APT_INSTALL_POLICY:-/usr/sbin/policy-rc.d}
SYSTEMD=${APT_INSTALL_SYSTEMD:-/run/systemd/system}
KEEP=" ${APT_INSTALL_KEEP-openssh-server} "

apt_opts=()
quiet=()
pkgs=()
while [ $# -gt 0 ]; do
    case "$1" in
        --no-install-recommends) apt_opts+=("$1") ;;
        --quiet) [ $# -ge 2 ] || { echo "apt-install: --quiet needs a package" >&2; exit 2; }
                 quiet+=("$2"); shift ;;
        -*) echo "apt-install: unknown option $1" >&2; exit 2 ;;
        *) pkgs+=("$1") ;;
    esac
    shift
done

installed() {  # the installed packages, one a line, sorted (no architecture suffix)
    dpkg-query -W -f '${db:Status-Status} ${Package}\n' 2>/dev/null | sed -n 's/^installed //p' | sort -u
}

before=$(installed)
is_installed() { grep -qxF -- "$1" <<<"$before"; }

missing=()
for p in ${pkgs[@]+"${pkgs[@]}"}; do
    is_installed "$p" || missing+=("$p")
done

brought=()
if [ ${#missing[@]} -gt 0 ]; then
    echo "installing: ${missing[*]}"
    held=
    cleanup() { if [ -n "$held" ]; then rm -f "$POLICY"; held=; fi; }
    trap cleanup EXIT
    trap 'cleanup; exit 130' INT TERM
    if [ ! -e "$POLICY" ] && [ ! -L "$POLICY" ]; then
        printf '#!/bin/sh\n# scripts/apt-install.sh: no service starts while it installs\nexit 101\n' >"$POLICY"
        chmod 0755 "$POLICY"
        held=1
    fi
    rc=0
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq ${apt_opts[@]+"${apt_opts[@]}"} \
        "${missing[@]}"; } || rc=$?
    cleanup
    # what the install brought, failed or not (a half-done install may have unpacked units)
    mapfile -t brought < <(comm -13 <(printf '%s\n' "$before") <(installed))
    status=$rc     # returned once what it brought is quieted
fi

# The packages whose units are quieted: as the header says.
targets=(${brought[@]+"${brought[@]}"})
for p in ${pkgs[@]+"${pkgs[@]}"}; do
    if is_installed "$p"; then
        case "$KEEP" in *" $p "*) continue ;; esac
        targets+=("$p")
    fi
done
for p in ${quiet[@]+"${quiet[@]}"}; do
    if is_installed "$p" || printf '%s\n' ${brought[@]+"${brought[@]}"} | grep -qxF -- "$p"; then
        targets+=("$p")
    fi
done

# Their units: systemd's own (not templates), and a service for each SysV init script
# (systemctl hands those to update-rc.d); timers and sockets first, so that nothing starts a
# stopped service again.
units=()
if [ ${#targets[@]} -gt 0 ]; then
    files=$(dpkg -L "${targets[@]}" 2>/dev/null || true)
    names=$( { grep -E '/lib/systemd/system/[^/@]+\.(socket|timer|service)$' <<<"$files" || true
               grep -E '^/etc/init\.d/[^/.]+$' <<<"$files" | sed 's/$/.service/' || true; } \
             | sed 's|.*/||' | sort -u)
    mapfile -t units < <(for kind in timer socket service; do grep "\.$kind\$" <<<"$names" || true; done)
fi
for u in ${units[@]+"${units[@]}"}; do
    if [ "$(systemctl is-enabled "$u" 2>/dev/null || true)" = enabled ]; then
        if systemctl disable -q "$u" >/dev/null 2>&1; then
            echo "apt-install: disabled $u"
        else
            echo "apt-install: could not disable $u" >&2
        fi
    fi
    if [ -d "$SYSTEMD" ] && systemctl is-active -q "$u" 2>/dev/null; then
        systemctl stop "$u" && echo "apt-install: stopped $u"
    fi
done
exit "${status:-0}"
