#!/usr/bin/env bash
# Make a Docker engine and the project's base image available on this machine (root only): install docker.io and
# debootstrap from Debian's packages when missing, start dockerd when no engine answers, and build
# tributary-base:bookworm (infra/build-base-image.sh skips that when it exists). `crcr ci --isolation docker` and the
# container tests need both; nothing is pulled from a registry.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
readonly WAIT_SECONDS=30

die() {
    echo "error: $1" >&2
    exit 2
}

[[ "$(id -u)" -eq 0 ]] || die "installing and starting a Docker engine needs root"
if ! command -v dockerd >/dev/null || ! command -v debootstrap >/dev/null; then
    if ! { apt-get update -qq && apt-get install -y -qq docker.io debootstrap >/dev/null; }; then
        die "apt-get could not install docker.io and debootstrap"
    fi
fi
if ! docker info >/dev/null 2>&1; then
    log="${TMPDIR:-/tmp}/dockerd.log"
    nohup dockerd >"$log" 2>&1 &
    for _ in $(seq "$WAIT_SECONDS"); do
        docker info >/dev/null 2>&1 && break
        sleep 1
    done
    docker info >/dev/null 2>&1 || die "dockerd did not answer within ${WAIT_SECONDS} s (its log: $log)"
fi
"$here/build-base-image.sh"
