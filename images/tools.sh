#!/usr/bin/env bash
# The tools image from images/tools.Containerfile, with the OCI builder this machine has:
# buildah (preferred: no daemon), else podman, else docker (its daemon must answer).
#
#   images/tools.sh [build]        build it unless the image already carries the current recipe
#   images/tools.sh archive FILE   build it if needed, then write it as an image archive
#                                  (docker-archive: `ctr -n k8s.io images import FILE`,
#                                  `docker load -i FILE`, `skopeo copy docker-archive:FILE …`)
#   images/tools.sh key            the recipe hash the image would carry
#   images/tools.sh name           the image reference
#   images/tools.sh builder        the builder that would be used
#   images/tools.sh platforms      the platforms a build would make (and why only one, if so)
#
# Base: BASE of the Containerfile. With OVERLAYBENCH_BASE unset, the cached debootstrap
# rootfs of Debian bookworm minbase (images/build.sh rootfs) is imported into the builder's
# storage as localhost/overlaybench/debian:bookworm and used as BASE: no registry is asked
# for anything. OVERLAYBENCH_BASE=docker.io/library/debian:bookworm (or a mirror's) pulls
# the real one instead.
#
# Multi-arch: with buildah or podman, a base from a registry (OVERLAYBENCH_BASE) and qemu-user
# binfmt handlers registered for the other architectures, OVERLAYBENCH_PLATFORMS (default
# linux/amd64,linux/arm64) are built as one manifest list under the image's name; otherwise
# one line says why that is unsupported here and the native architecture alone is built.
#
# Cached: the image carries the hash of its recipe (the Containerfile, rootfs.packages,
# overlay/blast's sources, this script, the base, the platforms) in the label
# org.overlaybench.recipe; building is a no-op while it carries the current one. A rebuild
# removes the image it replaced.
#
# Docker: when the builder is not docker and a dockerd answers, the image is also copied
# into it (skopeo, else the builder's push to docker-daemon:) under the same name, unless it
# already holds the current recipe there: the docker backend's containers use it.
#
# Environment: OVERLAYBENCH_TOOLS_IMAGE (the name, default localhost/overlaybench/tools:bookworm),
# OVERLAYBENCH_BUILDER (buildah|podman|docker), OVERLAYBENCH_BASE, OVERLAYBENCH_PLATFORMS,
# OVERLAYBENCH_IMAGE_CACHE (the rootfs cache, as images/build.sh), OVERLAYBENCH_BINFMT (where
# binfmt_misc is mounted; tests). As root, but key, name, builder and platforms.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
SUITE=bookworm
NAME=${OVERLAYBENCH_TOOLS_IMAGE:-localhost/overlaybench/tools:$SUITE}
LOCAL_BASE=localhost/overlaybench/debian:$SUITE
CONTAINERFILE=$HERE/tools.Containerfile
CONTEXT=$ROOT/overlay/blast
LABEL=org.overlaybench.recipe
ARCH=$(dpkg --print-architecture 2>/dev/null || uname -m)

die() { echo "tools-image: $*" >&2; exit 1; }
say() { echo "tools-image: $*"; }
hash16() { sha256sum | cut -c1-16; }

builder() {
    local b=${OVERLAYBENCH_BUILDER:-}
    if [ -n "$b" ]; then
        case "$b" in buildah|podman|docker) ;; *) die "OVERLAYBENCH_BUILDER=$b: not buildah, podman or docker" ;; esac
        command -v "$b" >/dev/null || die "OVERLAYBENCH_BUILDER=$b is not installed"
        echo "$b"; return
    fi
    for b in buildah podman docker; do
        if command -v "$b" >/dev/null; then echo "$b"; return; fi
    done
    die "no image builder here (apt-get install buildah, or podman, or docker.io)"
}

base_spec() {  # what BASE is, as it enters the recipe
    if [ -n "${OVERLAYBENCH_BASE:-}" ]; then echo "$OVERLAYBENCH_BASE"
    else echo "$LOCAL_BASE rootfs=$("$HERE/build.sh" rootfs-key)"; fi
}

# The platforms to build, and (on stderr, once) why only the native one where so.
platforms() {
    local want=${OVERLAYBENCH_PLATFORMS:-linux/amd64,linux/arm64} why= p a
    if [ "$1" = docker ]; then why="docker's legacy builder makes one architecture"
    elif [ -z "${OVERLAYBENCH_BASE:-}" ]; then why="the base is the local $ARCH rootfs (set OVERLAYBENCH_BASE to a registry's Debian)"
    else
        for p in ${want//,/ }; do
            a=${p#linux/}
            [ "$a" = "$ARCH" ] && continue
            case "$a" in arm64) q=aarch64 ;; amd64) q=x86_64 ;; arm) q=arm ;; *) q=$a ;; esac
            if ! grep -qx enabled "${OVERLAYBENCH_BINFMT:-/proc/sys/fs/binfmt_misc}/qemu-$q" 2>/dev/null; then
                why="no qemu-$q binfmt handler is registered (apt-get install qemu-user-static binfmt-support)"
                break
            fi
        done
    fi
    if [ -n "$why" ]; then
        [ "${2:-}" = quiet ] || say "multi-arch: unsupported here: $why; building linux/$ARCH only" >&2
        echo "linux/$ARCH"
    else
        echo "$want"
    fi
}

key() {  # BUILDER
    { sha256sum "$CONTAINERFILE" "$HERE/rootfs.packages" "$0" "$CONTEXT/Makefile" "$CONTEXT"/src/* | cut -d' ' -f1
      base_spec
      platforms "$1" quiet; } | hash16
}

# ---- the builder's storage ---------------------------------------------------------------

label_of() {  # BUILDER NAME LABEL: the label's value on the image (or a list's first instance)
    local b=$1 name=$2 l=$3
    case "$b" in
        buildah) buildah inspect --type image -f "{{index .OCIv1.Config.Labels \"$l\"}}" "$name" 2>/dev/null \
                 || buildah manifest inspect "$name" 2>/dev/null \
                    | python3 -c 'import json,sys; print((json.load(sys.stdin)["manifests"][0].get("annotations") or {}).get(sys.argv[1], ""))' "$l" 2>/dev/null \
                 || true ;;
        podman|docker) "$b" image inspect -f "{{index .Config.Labels \"$l\"}}" "$name" 2>/dev/null || true ;;
    esac
}

image_id() {  # BUILDER NAME
    case "$1" in
        buildah) buildah inspect --type image -f '{{.FromImageID}}' "$2" 2>/dev/null || true ;;
        *) "$1" image inspect -f '{{.Id}}' "$2" 2>/dev/null || true ;;
    esac
}

remove_image() {  # BUILDER ID: the image a rebuild replaced, unless something still uses it
    [ -n "$2" ] || return 0
    case "$1" in
        buildah) buildah rmi "$2" >/dev/null 2>&1 || true ;;
        *) "$1" rmi "$2" >/dev/null 2>&1 || true ;;
    esac
}

import_base() {  # BUILDER: the cached rootfs as $LOCAL_BASE, unless it is there with the same rootfs
    local b=$1 rootfs rkey ctr mnt
    rkey=$("$HERE/build.sh" rootfs-key)
    if [ "$(label_of "$b" "$LOCAL_BASE" org.overlaybench.rootfs)" = "$rkey" ]; then
        return
    fi
    rootfs=$("$HERE/build.sh" rootfs | tail -n 1)
    [ -d "$rootfs" ] || die "no rootfs from images/build.sh rootfs"
    say "importing $rootfs as $LOCAL_BASE"
    local old; old=$(image_id "$b" "$LOCAL_BASE")
    case "$b" in
        buildah)
            ctr=$(buildah from --name "overlaybench-base-$$" scratch)
            CLEAN_CTR=$ctr
            mnt=$(buildah mount "$ctr")
            tar -C "$rootfs" --numeric-owner -c . | tar -C "$mnt" --numeric-owner -xp
            buildah umount "$ctr" >/dev/null
            buildah config --label "org.overlaybench.rootfs=$rkey" --cmd bash --os linux --arch "$ARCH" "$ctr"
            buildah commit -q --rm "$ctr" "$LOCAL_BASE" >/dev/null
            CLEAN_CTR= ;;
        podman|docker)
            tar -C "$rootfs" --numeric-owner -c . | "$b" import -c "LABEL org.overlaybench.rootfs=$rkey" \
                -c 'CMD ["bash"]' - "$LOCAL_BASE" >/dev/null ;;
    esac
    [ "$old" = "$(image_id "$b" "$LOCAL_BASE")" ] || remove_image "$b" "$old"
}

CLEAN_CTR=
cleanup() {
    if [ -n "$CLEAN_CTR" ]; then buildah rm "$CLEAN_CTR" >/dev/null 2>&1 || true; fi
}
trap cleanup EXIT
trap 'cleanup; exit 130' INT TERM

build() {
    local b k base plats old start=$SECONDS
    b=$(builder)
    if [ "$b" = docker ]; then docker info >/dev/null 2>&1 || die "dockerd does not answer (make dockerd-up), and no buildah or podman is here"; fi
    k=$(key "$b")
    if [ "$(label_of "$b" "$NAME" "$LABEL")" = "$k" ]; then
        say "$NAME is up to date (recipe $k, $b)"
        to_dockerd "$b" "$k"
        return
    fi
    local cache=${OVERLAYBENCH_IMAGE_CACHE:-/var/cache/overlaybench}
    mkdir -p "$cache"
    exec 9>"$cache/.tools-lock"
    flock 9   # one build at a time on this machine
    plats=$(platforms "$b")
    if [ -n "${OVERLAYBENCH_BASE:-}" ]; then base=$OVERLAYBENCH_BASE
    else import_base "$b"; base=$LOCAL_BASE; fi
    old=$(image_id "$b" "$NAME")
    local args=(-f "$CONTAINERFILE" --build-arg "BASE=$base" --label "$LABEL=$k")
    say "building $NAME with $b ($plats) from $base"
    case "$b" in
        buildah|podman)
            # chroot isolation and the host's network: no OCI runtime, cgroup or CNI set-up needed
            args+=(--isolation chroot --network host)
            [ -n "${OVERLAYBENCH_BASE:-}" ] || args+=(--pull=false)   # the local base: never asked of a registry
            if [ "$plats" = "linux/$ARCH" ]; then
                "$b" build -q "${args[@]}" -t "$NAME" "$CONTEXT" >/dev/null
            else
                "$b" manifest rm "$NAME" >/dev/null 2>&1 || true
                "$b" build -q "${args[@]}" --platform "$plats" --manifest "$NAME" "$CONTEXT" >/dev/null
                local d
                for d in $("$b" manifest inspect "$NAME" | python3 -c 'import json,sys; print(*[m["digest"] for m in json.load(sys.stdin)["manifests"]])'); do
                    "$b" manifest annotate --annotation "$LABEL=$k" "$NAME" "$d" >/dev/null
                done
            fi ;;
        docker)
            # the host's network: the lab's dockerd forwards nothing (--ip-forward=false)
            DOCKER_BUILDKIT=${DOCKER_BUILDKIT:-0} docker build -q --force-rm --network host "${args[@]}" -t "$NAME" "$CONTEXT" >/dev/null ;;
    esac || die "$b build failed (run it again without -q to see why: $b build ${args[*]} -t $NAME $CONTEXT)"
    [ "$old" = "$(image_id "$b" "$NAME")" ] || remove_image "$b" "$old"
    if [ "$b" = docker ]; then   # the legacy builder keeps the blast stage as an untagged image
        docker image prune -f --filter label=org.overlaybench.stage=blast >/dev/null || true
    fi
    say "built $NAME (recipe $k) with $b in $((SECONDS - start)) s"
    to_dockerd "$b" "$k"
}

to_dockerd() {  # BUILDER KEY: a copy in the dockerd that answers, for the docker backend
    local b=$1 k=$2 old
    [ "$b" != docker ] || return 0
    command -v docker >/dev/null && docker info >/dev/null 2>&1 || return 0
    if [ "$(docker image inspect -f "{{index .Config.Labels \"$LABEL\"}}" "$NAME" 2>/dev/null)" = "$k" ]; then
        return
    fi
    old=$(docker image inspect -f '{{.Id}}' "$NAME" 2>/dev/null || true)
    local err; err=$(mktemp)
    if command -v skopeo >/dev/null; then   # (containers/storage logs its driver at info level)
        skopeo copy -q "containers-storage:$NAME" "docker-daemon:$NAME" >/dev/null 2>"$err"
    else
        "$b" push -q "$NAME" "docker-daemon:$NAME" >/dev/null 2>"$err"
    fi || { cat "$err" >&2; rm -f "$err"; die "copying $NAME into dockerd failed"; }
    if [ -n "$old" ] && [ "$old" != "$(docker image inspect -f '{{.Id}}' "$NAME")" ]; then
        # the image it replaced, unless a container still uses it (asked twice: the daemon
        # may still be settling the load)
        docker rmi "$old" >/dev/null 2>&1 || { sleep 1; docker rmi "$old" >/dev/null 2>"$err"; } \
            || say "left the image it replaced in dockerd, $old: $(tail -n 1 "$err")"
    fi
    rm -f "$err"
    say "copied $NAME into dockerd"
}

archive() {  # FILE
    local out=$1 b
    [ -n "$out" ] || die "archive needs a FILE"
    build
    b=$(builder)
    mkdir -p "$(dirname "$out")"
    rm -f "$out.tmp"
    case "$b" in
        buildah|podman) "$b" push -q "$NAME" "docker-archive:$out.tmp:$NAME" >/dev/null ;;
        docker) docker save -o "$out.tmp" "$NAME" ;;
    esac || die "writing $NAME to $out failed"
    mv "$out.tmp" "$out"
    say "wrote $NAME to $out ($(du -h "$out" | cut -f1)); on a node: ctr -n k8s.io images import $out"
}

case "${1:-build}" in
    build) build ;;
    archive) archive "${2:-}" ;;
    key) key "$(builder)" ;;
    name) echo "$NAME" ;;
    builder) builder ;;
    platforms) platforms "$(builder)" ;;
    *) echo "usage: $0 [build] | archive FILE | key | name | builder | platforms" >&2; exit 2 ;;
esac
