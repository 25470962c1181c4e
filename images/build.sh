#!/usr/bin/env bash
# overlaybench's local images, built without any image registry: Debian bookworm minbase
# is debootstrapped once into a cached rootfs, and each image is that rootfs (plus, for
# the host image, packages and set-up applied in a chroot of a copy) fed to `docker import`.
#
#   images/build.sh vagrant-host   the host image for Vagrant's docker provider (sshd, sudo,
#                                  user vagrant with Vagrant's insecure key, build tools)
#   images/build.sh tools          the image of container endpoints (the tools, sleep infinity)
#                                  by docker import, for hosts with only docker: without blast.
#                                  make tools-image builds it from tools.Containerfile instead
#                                  (images/tools.sh) and copies that into dockerd; each replaces
#                                  the other's image under the same name (their recipes differ)
#   images/build.sh tools-archive [FILE]
#                                  the tools image (built if needed) written as an image archive
#                                  (`docker save`: an OCI image layout, with Docker's manifest.json
#                                  beside it) for a cluster: `ctr -n k8s.io images import FILE` on
#                                  each node, `docker load -i FILE`, or pushed to a registry
#                                  (`skopeo copy docker-archive:FILE docker://REGISTRY/NAME:TAG`);
#                                  default FILE: $OVERLAYBENCH_IMAGE_CACHE/overlaybench-tools.tar
#   images/build.sh rootfs         only the cached rootfs
#   images/build.sh key IMAGE      the recipe hash IMAGE (vagrant-host|tools) would carry
#   images/build.sh rootfs-key     the cached rootfs's recipe hash (images/tools.sh reads it)
#   images/build.sh name IMAGE     the image name and tag
#
# Cached: each image carries the hash of its recipe in the label org.overlaybench.recipe;
# building is a no-op while the image under that name carries the current hash. The
# rootfs's recipe is the suite, the architecture and rootfs.packages; an image's recipe is
# the rootfs's plus this script, and for the host image host/ and Vagrant's public key.
# A rebuild removes the image it replaced unless something still uses it.
#
# Environment: OVERLAYBENCH_HOST_IMAGE, OVERLAYBENCH_TOOLS_IMAGE (names),
# OVERLAYBENCH_IMAGE_CACHE (rootfs cache, default /var/cache/overlaybench),
# OVERLAYBENCH_VAGRANT_PUBKEY (the key file, when Vagrant's own cannot be found),
# DEBIAN_MIRROR (default http://deb.debian.org/debian). Needs root, debootstrap, and a
# dockerd that answers (`make dockerd-up`).
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
SUITE=bookworm
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
CACHE=${OVERLAYBENCH_IMAGE_CACHE:-/var/cache/overlaybench}
HOST_IMAGE=${OVERLAYBENCH_HOST_IMAGE:-overlaybench/vagrant-host:$SUITE}
TOOLS_IMAGE=${OVERLAYBENCH_TOOLS_IMAGE:-localhost/overlaybench/tools:$SUITE}
LABEL=org.overlaybench.recipe

HOST_CMD='["/usr/local/sbin/overlaybench-sshd"]'   # host keys of its own, then sshd -D -e
TOOLS_CMD='["sleep", "infinity"]'

die() { echo "images: $*" >&2; exit 1; }
say() { echo "images: $*"; }

packages() { grep -v '^[[:space:]]*\(#\|$\)' "$1" | xargs; }
hash16() { sha256sum | cut -c1-16; }

rootfs_key() {
    { echo "suite=$SUITE variant=minbase arch=$(dpkg --print-architecture)"
      packages "$HERE/rootfs.packages"; } | hash16
}

vagrant_pubkeys() {  # Vagrant's insecure public key(s), from the installed vagrant
    if [ -n "${OVERLAYBENCH_VAGRANT_PUBKEY:-}" ]; then
        cat "$OVERLAYBENCH_VAGRANT_PUBKEY"
        return
    fi
    local dir f found=
    for dir in /usr/share/rubygems-integration/all/gems/vagrant-*/keys \
               /opt/vagrant/embedded/gems/gems/vagrant-*/keys \
               /opt/vagrant/embedded/gems/*/gems/vagrant-*/keys; do
        for f in "$dir"/vagrant.pub*; do
            [ -f "$f" ] && { cat "$f"; found=1; }
        done
        [ -n "$found" ] && return
    done
    die "Vagrant's insecure public key not found (install vagrant, or set OVERLAYBENCH_VAGRANT_PUBKEY)"
}

image_key() {
    case "$1" in
        tools) { rootfs_key; hash16 <"$0"; } | hash16 ;;
        vagrant-host)
            { rootfs_key; hash16 <"$0"; cat "$HERE/host/packages" "$HERE/host/setup.sh";
              vagrant_pubkeys | sort -u; } | hash16 ;;
        *) die "unknown image '$1' (vagrant-host or tools)" ;;
    esac
}

image_name() {
    case "$1" in
        tools) echo "$TOOLS_IMAGE" ;;
        vagrant-host) echo "$HOST_IMAGE" ;;
        *) die "unknown image '$1' (vagrant-host or tools)" ;;
    esac
}

in_root() {  # ROOT CMD...: CMD chrooted in ROOT with /proc, in a mount namespace that dies with it
    local root=$1; shift
    unshare --mount --propagation private -- /bin/sh -c \
        'r=$1; shift; mount -t proc proc "$r/proc" && exec chroot "$r" "$@"' sh "$root" \
        env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin LC_ALL=C DEBIAN_FRONTEND=noninteractive "$@"
}

ROOTFS=
ensure_rootfs() {
    local key; key=$(rootfs_key)
    ROOTFS=$CACHE/rootfs-$key
    if [ -f "$ROOTFS.done" ]; then
        return
    fi
    command -v debootstrap >/dev/null || die "debootstrap is not installed (apt-get install debootstrap)"
    local partial=$ROOTFS.partial start=$SECONDS
    rm -rf "$partial"
    trap 'rm -rf "$partial"' EXIT
    say "debootstrap $SUITE minbase into $ROOTFS (once; a minute or two)"
    debootstrap --variant=minbase --include="$(packages "$HERE/rootfs.packages" | tr ' ' ,)" \
        "$SUITE" "$partial" "$MIRROR" >"$CACHE/debootstrap.log" 2>&1 \
        || die "debootstrap failed: $(tail -n 1 "$CACHE/debootstrap.log") (log: $CACHE/debootstrap.log)"
    rm -rf "$partial"/var/cache/apt/archives/*.deb "$partial"/var/lib/apt/lists/*
    rm -rf "$ROOTFS"
    mv "$partial" "$ROOTFS"
    trap - EXIT
    # Rootfs trees of older recipes go; this one is complete.
    for old in "$CACHE"/rootfs-*; do
        [ "$old" = "$ROOTFS" ] || rm -rf "$old"
    done
    touch "$ROOTFS.done"
    say "rootfs ready in $((SECONDS - start)) s ($(du -sh "$ROOTFS" | cut -f1))"
}

current_key() {
    docker image inspect -f "{{with .Config.Labels}}{{index . \"$LABEL\"}}{{end}}" "$1" 2>/dev/null || true
}

docker_import() {  # DIR NAME KEY KIND CMD
    local dir=$1 name=$2 key=$3 kind=$4 cmd=$5 old new
    old=$(docker image inspect -f '{{.Id}}' "$name" 2>/dev/null || true)
    tar -C "$dir" --numeric-owner -c . | docker import \
        -c "CMD $cmd" -c "LABEL $LABEL=$key" -c "LABEL org.overlaybench.image=$kind" \
        -c "LABEL org.overlaybench.suite=$SUITE" -m "overlaybench $kind ($SUITE)" - "$name" >/dev/null
    new=$(docker image inspect -f '{{.Id}}' "$name")
    if [ -n "$old" ] && [ "$old" != "$new" ]; then
        docker rmi "$old" >/dev/null 2>&1 || true
    fi
}

build() {
    local kind=$1 name key start=$SECONDS
    name=$(image_name "$kind")
    key=$(image_key "$kind")
    docker info >/dev/null 2>&1 || die "dockerd does not answer (start one with: make dockerd-up)"
    if [ "$(current_key "$name")" = "$key" ]; then
        say "$name is up to date (recipe $key)"
        return
    fi
    mkdir -p "$CACHE"
    exec 9>"$CACHE/.lock"
    flock 9   # one build at a time on this machine
    if [ "$(current_key "$name")" = "$key" ]; then
        say "$name is up to date (recipe $key)"
        return
    fi
    ensure_rootfs
    case "$kind" in
        tools)
            docker_import "$ROOTFS" "$name" "$key" tools "$TOOLS_CMD" ;;
        vagrant-host)
            local work
            work=$(mktemp -d "$CACHE/host.XXXXXX")
            trap 'rm -rf "$work"' EXIT
            cp -a "$ROOTFS/." "$work/"
            cp /etc/resolv.conf "$work/etc/resolv.conf"
            printf '#!/bin/sh\nexit 101\n' >"$work/usr/sbin/policy-rc.d"   # start no service
            chmod 0755 "$work/usr/sbin/policy-rc.d"
            in_root "$work" apt-get update -qq >"$CACHE/host-apt.log" 2>&1 \
                && in_root "$work" apt-get install -y -q --no-install-recommends \
                    $(packages "$HERE/host/packages") >>"$CACHE/host-apt.log" 2>&1 \
                || die "apt-get in the host image failed: $(tail -n 1 "$CACHE/host-apt.log") (log: $CACHE/host-apt.log)"
            in_root "$work" apt-get clean
            rm -rf "$work"/var/lib/apt/lists/*
            vagrant_pubkeys | sort -u >"$work/tmp/vagrant.pub"
            cp "$HERE/host/setup.sh" "$work/tmp/setup.sh"
            in_root "$work" /bin/sh /tmp/setup.sh /tmp/vagrant.pub
            rm -f "$work/tmp/setup.sh" "$work/tmp/vagrant.pub" "$work/usr/sbin/policy-rc.d"
            rm -f "$work/etc/resolv.conf"
            if [ -e "$ROOTFS/etc/resolv.conf" ]; then cp -a "$ROOTFS/etc/resolv.conf" "$work/etc/"; fi
            docker_import "$work" "$name" "$key" vagrant-host "$HOST_CMD"
            rm -rf "$work"
            trap - EXIT ;;
    esac
    say "built $name (recipe $key) in $((SECONDS - start)) s"
}

archive() {  # FILE: the tools image as docker save writes it, replaced atomically
    local out=${1:-$CACHE/overlaybench-tools.tar}
    build tools
    mkdir -p "$(dirname "$out")"
    docker save -o "$out.tmp" "$TOOLS_IMAGE" || die "docker save $TOOLS_IMAGE failed"
    mv "$out.tmp" "$out"
    say "wrote $TOOLS_IMAGE to $out ($(du -h "$out" | cut -f1)); on a node: ctr -n k8s.io images import $out"
}

case "${1:-}" in
    vagrant-host|tools) build "$1" ;;
    tools-archive) archive "${2:-}" ;;
    rootfs) mkdir -p "$CACHE"; exec 9>"$CACHE/.lock"; flock 9; ensure_rootfs; echo "$ROOTFS" ;;
    key) image_key "${2:-}" ;;
    rootfs-key) rootfs_key ;;
    name) image_name "${2:-}" ;;
    *) echo "usage: $0 vagrant-host|tools|tools-archive [FILE]|rootfs|rootfs-key|key IMAGE|name IMAGE" >&2; exit 2 ;;
esac
