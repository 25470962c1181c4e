"""Checks on a host before anything is made there: root, tools, kernel features.

One shell script per host answers all of them in one round trip; each problem comes
back as one line naming the host and what to install. `run` and `doctor --inventory`
both use it.
"""

from __future__ import annotations

from harness import tools
from harness.facts import PACKAGES
from harness.hosts.base import Host

BASE_BINARIES = ["ip", "tc", "ss", "bridge", "ethtool", "ping", "sysctl"]

# What a mode kind needs of the kernel, probed for real on the host.
FEATURES = {
    "vxlan": "ip link add obchk$$ type vxlan id 1 dstport 0 && ip link del obchk$$",
    "tun": "test -c /dev/net/tun",
}
MODE_FEATURES = {"fastdp": ("vxlan",), "auto": ("vxlan", "tun"), "sleeve": ("tun",)}

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
"""


def needed_binaries(sc, base: list[str] = BASE_BINARIES) -> list[str]:
    need = list(base)
    for t in sc.tests:
        b = tools.get(t).binary
        if b not in need:
            need.append(b)
    return need


def needed_features(sc) -> list[str]:
    from harness import modes
    out: list[str] = []
    for name in sc.modes:
        mode = modes.get(name)
        for f in MODE_FEATURES.get(mode.name, MODE_FEATURES.get(mode.kind, ())):
            if f not in out:
                out.append(f)
    return out


def host_problems(host: Host, name: str, sc) -> list[str]:
    """One line per problem on `host` for scenario `sc` (empty: ready)."""
    feats = needed_features(sc)
    env = [f"TOOLS={' '.join(needed_binaries(sc))}", f"FEATURES={' '.join(feats)}",
           *(f"probe_{f}={FEATURES[f]}" for f in feats)]
    done = host.run(["env", *env, "sh", "-c", SCRIPT], check=False, timeout=30)
    problems = []
    missing = []
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
        elif word == "missing":
            missing.append(rest)
        elif word == "nofeature":
            f, _, why = rest.partition(" ")
            problems.append(f"{name}: kernel {f} unsupported here ({why.strip() or 'probe failed'})")
    if missing:
        pkgs = sorted({PACKAGES.get(b, b) for b in missing})
        problems.append(f"{name}: {', '.join(missing)} not found: apt-get install -y {' '.join(pkgs)}")
    if not done.ok and not problems:
        problems.append(f"{name}: the checks did not run ({(done.stderr.strip() or 'no output')[-200:]})")
    return problems
