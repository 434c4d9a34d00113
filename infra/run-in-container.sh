#!/usr/bin/env bash
# The fresh-machine check: run one command in a fresh clone of this checkout's HEAD, inside a new test-runner
# container that sees only this host's pip configuration (read-only), never the host's .wheelhouse, dist or .nox.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
readonly CONTAINER_HOME=/home/runner
readonly CONTAINER_PREFIX=/opt/python

usage() {
    cat <<'EOF'
usage: infra/run-in-container.sh [--image IMAGE] [--base IMAGE] [--rebuild] [--] [COMMAND...]

Runs COMMAND (a shell command; default: .ci/run, the README's test command) in a fresh clone of this checkout's
HEAD inside a new container from the test-runner image, which is built from infra/Dockerfile when missing.
The host's pip config files, the wheel folders, indexes, constraints and CA bundle they name are mounted
read-only, and PIP_*, UV_*, CA-bundle and proxy variables are passed, so pip inside behaves as it does here.

options:
  --image IMAGE  test-runner image (default: tributary-runner:bookworm)
  --base IMAGE   base image it is built on (default: tributary-base:bookworm; see infra/build-base-image.sh)
  --rebuild      rebuild the test-runner image first
  -h, --help     show this help

exit codes:
  the command's own exit code, or
  2  bad usage or a missing prerequisite
  125  docker could not start the container
EOF
}

die() {
    echo "error: $2" >&2
    exit "$1"
}

image=tributary-runner:bookworm
base=tributary-base:bookworm
rebuild=0
while (($#)); do
    case "$1" in
    --image | --base)
        (($# >= 2)) || die 2 "$1 needs a value"
        if [[ "$1" == --image ]]; then image="$2"; else base="$2"; fi
        shift
        ;;
    --rebuild) rebuild=1 ;;
    -h | --help)
        usage
        exit 0
        ;;
    --)
        shift
        break
        ;;
    -*) die 2 "unknown option: $1 (see --help)" ;;
    *) break ;;
    esac
    shift
done
command_line="${*:-.ci/run}"

for tool in docker git python3; do
    command -v "$tool" >/dev/null || die 2 "$tool not found on PATH"
done
repo="$(git -C "$here" rev-parse --show-toplevel 2>/dev/null)" || die 2 "$here is not inside a git checkout"
docker info >/dev/null 2>&1 || die 2 "the docker daemon is not reachable (is dockerd running?)"

workdir="$(mktemp -d "${TMPDIR:-/tmp}/tributary-run.XXXXXX")"
trap 'rm -rf "$workdir"' EXIT

if ((rebuild)) || ! docker image inspect "$image" >/dev/null 2>&1; then
    docker image inspect "$base" >/dev/null 2>&1 || die 2 "base image $base is missing; build it with infra/build-base-image.sh"
    echo "==> building $image on $base"
    if ! docker build --build-arg "BASE_IMAGE=$base" --tag "$image" --file "$here/Dockerfile" "$here" \
        >"$workdir/build.log" 2>&1; then
        tail -n 20 "$workdir/build.log" >&2
        die 2 "building $image from $here/Dockerfile failed (its output is above)"
    fi
fi

context="$(python3 "$here/pip_context.py" --container-home "$CONTAINER_HOME" --container-prefix "$CONTAINER_PREFIX")" \
    || exit 2
context_args=()
[[ -z "$context" ]] || mapfile -t context_args <<<"$context"
git -C "$repo" bundle create "$workdir/source.bundle" HEAD 2>/dev/null || die 2 "cannot bundle HEAD of $repo"
echo "==> $(git -C "$repo" rev-parse --short HEAD) in a fresh $image container: $command_line"

status=0
docker run --rm --init \
    --mount "type=bind,source=$workdir/source.bundle,target=/mnt/source.bundle,readonly" \
    "${context_args[@]}" "$image" "$command_line" || status=$?
exit "$status"
