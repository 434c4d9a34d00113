#!/usr/bin/env bash
# Clone the project from the bundle mounted at /mnt/source.bundle, then run the given shell command in the clone
# and report how long it took.
set -euo pipefail
bundle=/mnt/source.bundle
[[ -r "$bundle" ]] || { echo "error: no project bundle at $bundle (use infra/run-in-container.sh)" >&2; exit 2; }
git -c advice.detachedHead=false clone --quiet "$bundle" "$HOME/tributary"
cd "$HOME/tributary"
echo "==> $(git rev-parse --short HEAD): $*"
start=$SECONDS
status=0
bash -c "$*" || status=$?
echo "==> exit ${status} after $((SECONDS - start))s: $*"
exit "$status"
