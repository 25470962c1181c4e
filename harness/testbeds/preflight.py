"""Checks on a host before anything is made there: root, tools, kernel features,
whether the sleeve can be had there, and the CPUs its processes are to be pinned to.

One shell script per host answers all of them in one round trip; each problem comes
back as one line naming the host and what to install. `run` and `doctor --inventory`
both use it.

The sleeve is built on each host (sleeve_build.install_remote); a host that cannot build
it gets this machine's binary instead, which works only where `uname -m` is this
machine's. blast is always this machine's binary, shipped (remote.py): a host of another
architecture is one line for its tests. So a scenario with a mode that may deploy the sleeve (its kind "sleeve", or
"auto", which falls back to it) fails here, not after the testbed is up, when a host
lacks what the build needs and is of another architecture.
"""

from __future__ import annotations

import platform

from harness import tools
from harness.core.errors import HarnessError
from harness.hosts.base import Host
from harness.hosts.pinned import ranges
from harness.sleeve import build as sleeve_build
from harness.testbeds import cpusets
from harness.tools.packages import install_hint

BASE_BINARIES = ["ip", "tc", "ss", "bridge", "ethtool", "ping", "sysctl", "nft"]

# How each kernel feature a mode may declare (Mode.features) is probed for real on the host.
FEATURES = {
    "vxlan": "ip link add obchk$$ type vxlan id 1 dstport 0 && ip link del obchk$$",
    "tun": "test -c /dev/net/tun",
}

SCRIPT = r"""
[ "$(id -u)" = 0 ] || echo "notroot $(id -un)"
ip netns list >/dev/null 2>&1 || echo "nonetns"
ip netns add "obchk$$" >/dev/null 2>&1 && ip netns del "obchk$$" || echo "nonetnsadd"
[ -w /proc/sys/net/ipv4/conf/all/forwarding ] || echo "nosysctl"
for t in $TOOLS; do command -v "$t" >/dev/null 2>&1 || echo "missing $t"; done
for f in $FEATURES; do
  eval "probe=\$probe_$f"
  out=$(sh -c "$probe" 2>&1) || echo "nofeature $f ${out##*:}"
done
[ -z "$PINNED" ] || echo "allowed $(sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' /proc/self/status)"
echo "arch $(uname -m)"
if [ -n "$BUILD_NEEDS" ]; then
  miss=$(sh -c "$MISSING_SH" sh $BUILD_NEEDS | tr '\n' ' ')
  [ -z "$miss" ] || echo "nobuild $miss"
fi
"""


def needed_binaries(sc, base: list[str] = BASE_BINARIES, without: tuple[str, ...] = ()) -> list[str]:
    """The commands every host needs for `sc`: `base`, its tests' tools (not one the harness
    builds: this machine's binary is shipped, remote.py), its modes' binaries."""
    need = list(base)
    tool_bins = [b for t in map(tools.get, sc.tests) for b in (() if t.builds else (t.binary,)) + t.also_needs]
    for b in tool_bins + [b for m in sc.modes for b in sc.mode(m).binaries]:
        if b not in need and b not in without:
            need.append(b)
    return need


def needed_features(sc) -> list[str]:
    out: list[str] = []
    for name in sc.modes:
        mode = sc.mode(name)
        for f in mode.features:
            if f not in FEATURES:
                raise HarnessError(f"mode {mode.name}: kernel feature {f!r} has no probe "
                                   f"(harness/testbeds/preflight.py)")
            if f not in out:
                out.append(f)
    return out


def sleeve_modes(sc) -> list:
    """The modes of `sc` that may deploy the sleeve."""
    return [m for m in map(sc.mode, sc.modes) if m.ships_sleeve]


def sleeve_problem(name: str, arch: str, missing: list[str]) -> str | None:
    """The line for a host that lacks `missing` (of the sleeve's build needs) and whose
    `uname -m` is `arch`; None where this machine's binary can stand in for a build."""
    if not missing or not arch or arch == platform.machine():
        return None
    return sleeve_build.cannot_build(name, arch, missing)


def _ships_prebuilt(sc) -> bool:
    """Whether the shipped sleeve goes out as OVERLAYBENCH_SLEEVE_BINARY (this machine's
    binary, built nowhere else) for a mode of `sc`; A/B arms always build their source."""
    return (any(getattr(m, "sleeve_build", None) is None for m in sleeve_modes(sc))
            and sleeve_build.prebuilt() is not None)


def host_problems(host: Host, name: str, sc, without: tuple[str, ...] = (), cpus: str | None = None,
                  cpus_from: str = "") -> list[str]:
    """One line per problem on `host` for scenario `sc` (empty: ready); `without`: commands
    it need not have after all (an etcd the inventory names elsewhere). With `cpus` (the
    CPU list the host's processes are to run on, as `cpus_from` gives it) the host must
    have taskset and may use each of those CPUs; `host` itself must be unpinned."""
    feats = needed_features(sc)
    binaries = needed_binaries(sc, without=without) + (["taskset"] if cpus else [])
    env = [f"TOOLS={' '.join(binaries)}", f"FEATURES={' '.join(feats)}",
           f"BUILD_NEEDS={' '.join(sleeve_build.build_needs()) if sleeve_modes(sc) else ''}",
           f"MISSING_SH={sleeve_build.MISSING_SH}",
           *(f"probe_{f}={FEATURES[f]}" for f in feats), *(["PINNED=1"] if cpus else [])]
    done = host.run(["env", *env, "sh", "-c", SCRIPT], check=False, timeout=30)
    problems = []
    missing = []
    arch, unbuildable = "", []
    for line in done.stdout.splitlines():
        word, _, rest = line.partition(" ")
        if word == "notroot":
            problems.append(f"{name}: runs commands as {rest}, not root: log in as root or set sudo = true "
                            f"(with passwordless sudo)")
        elif word == "nonetns":
            problems.append(f"{name}: `ip netns` does not work (iproute2 missing or not root): "
                            f"apt-get install -y iproute2")
        elif word == "nonetnsadd":
            problems.append(f"{name}: cannot make network namespaces (`ip netns add` mounts: it needs "
                            f"CAP_SYS_ADMIN; in a container, --cap-add SYS_ADMIN)")
        elif word == "nosysctl":
            problems.append(f"{name}: /proc/sys is read-only (per-device sysctls such as forwarding cannot "
                            f"be set; in a container, --security-opt systempaths=unconfined)")
        elif word == "missing" and rest == "taskset" and cpus:
            problems.append(f"{name}: taskset not found, which cpus = \"{cpus}\" ({cpus_from}) needs: "
                            f"{install_hint(['taskset'])}")
        elif word == "missing":
            missing.append(rest)
        elif word == "allowed" and cpus:
            lack = cpusets.lacking(cpus, rest.strip())
            if lack:
                problems.append(f"{name}: cpus = \"{cpus}\" ({cpus_from}) names CPU {ranges(lack)}, which it "
                                f"cannot run on (its CPUs: {rest.strip() or 'unknown'})")
        elif word == "nofeature":
            f, _, why = rest.partition(" ")
            problems.append(f"{name}: kernel {f} unsupported here ({why.strip() or 'probe failed'})")
        elif word == "arch":
            arch = rest.strip()
        elif word == "nobuild":
            unbuildable = rest.split()
    sleeve = sleeve_problem(name, arch, unbuildable)
    if sleeve:
        problems.append(sleeve)
    elif arch and arch != platform.machine() and _ships_prebuilt(sc):
        problems.append(f"{name}: OVERLAYBENCH_SLEEVE_BINARY is shipped instead of a build, and it is for "
                        f"{platform.machine()}, the host is {arch}: unset it to build the sleeve there")
    if missing:
        problems.append(f"{name}: {', '.join(missing)} not found: {install_hint(missing)}")
    if not done.ok and not problems:
        problems.append(f"{name}: the checks did not run ({(done.stderr.strip() or 'no output')[-200:]})")
    built_here = [t for t in sc.tests if tools.get(t).builds]
    if built_here and arch and arch != platform.machine():    # blast: this machine's binary is shipped
        problems.append(f"{name}: {', '.join(built_here)} run blast, which is built on this machine "
                        f"({platform.machine()}) and shipped; {name} is {arch}: leave these tests out there")
    return problems
