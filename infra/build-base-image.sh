#!/usr/bin/env bash
# Build the local base image for Tributary's containers without pulling from any registry: debootstrap a Debian
# root from the Debian mirror apt already uses on this host, then `docker import` it.
set -euo pipefail

readonly PACKAGES="python3,python3-venv,python3-pip,python3-dev,gcc,g++,git,ca-certificates"

usage() {
    cat <<'EOF'
usage: infra/build-base-image.sh [--force] [--suite NAME] [--mirror URL] [--tag IMAGE]

Builds a Debian root with Python 3, pip, venv, a C/C++ compiler, git and CA certificates by debootstrap and
imports it as a local Docker image. Nothing is pulled from a container registry.

options:
  --force        rebuild even if the image already exists
  --suite NAME   Debian suite (default: bookworm, whose python3 is 3.11)
  --mirror URL   Debian mirror (default: the one apt's sources name for the suite on this host)
  --tag IMAGE    image to create (default: tributary-base:<suite>)
  -h, --help     show this help

exit codes:
  0  built, or already present
  1  a build step failed
  2  bad usage or a missing prerequisite
EOF
}

die() {
    echo "error: $2" >&2
    exit "$1"
}

step() {
    echo "==> [${SECONDS}s] $*"
}

force=0
suite=bookworm
mirror=""
tag=""
while (($#)); do
    case "$1" in
    --force) force=1 ;;
    --suite | --mirror | --tag)
        (($# >= 2)) || die 2 "$1 needs a value"
        case "$1" in
        --suite) suite="$2" ;;
        --mirror) mirror="$2" ;;
        --tag) tag="$2" ;;
        esac
        shift
        ;;
    -h | --help)
        usage
        exit 0
        ;;
    *) die 2 "unknown option: $1 (see --help)" ;;
    esac
    shift
done
tag="${tag:-tributary-base:${suite}}"

for tool in debootstrap docker tar; do
    command -v "$tool" >/dev/null || die 2 "$tool not found on PATH (Debian: apt-get install docker.io debootstrap)"
done
((EUID == 0)) || die 2 "debootstrap needs root; run as root"
docker info >/dev/null 2>&1 || die 2 "the docker daemon is not reachable (is dockerd running?)"

if ((!force)) && docker image inspect "$tag" >/dev/null 2>&1; then
    echo "$tag exists; nothing to do (--force rebuilds it)"
    exit 0
fi

if [[ -z "$mirror" ]]; then
    command -v apt-get >/dev/null || die 2 "no apt on this host to name a mirror; pass --mirror URL"
    # shellcheck disable=SC2016  # $(REPO_URI) is apt's own format field, not a shell expansion
    mirror="$(apt-get indextargets --format '$(REPO_URI)' "Release: ${suite}" 'Target-Of: deb' | head -n 1)"
    [[ -n "$mirror" ]] || die 2 "apt's sources name no mirror for suite '${suite}'; pass --mirror URL"
fi

workdir="$(mktemp -d "${TMPDIR:-/tmp}/tributary-base.XXXXXX")"
trap 'rm -rf --one-file-system "$workdir"' EXIT
rootfs="$workdir/rootfs"

step "debootstrap ${suite} from ${mirror} (packages: ${PACKAGES})"
if ! debootstrap --variant=minbase --include="$PACKAGES" "$suite" "$rootfs" "$mirror"; then
    log="${TMPDIR:-/tmp}/tributary-base-debootstrap.log"
    cp "$rootfs/debootstrap/debootstrap.log" "$log" 2>/dev/null || log="(none written)"
    die 1 "debootstrap of ${suite} from ${mirror} failed; its log: ${log}"
fi

step "trimming package caches"
rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*

step "importing as ${tag}"
tar -C "$rootfs" --numeric-owner -c . \
    | docker import --change 'ENV LANG=C.UTF-8' --change 'CMD ["/bin/bash"]' - "$tag" >/dev/null \
    || die 1 "docker import of ${tag} failed"

step "done: ${tag} ($(docker image inspect --format '{{.Size}}' "$tag") bytes)"
