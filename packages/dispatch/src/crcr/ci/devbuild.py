"""`crcr build`: this repository's packages, as they are in the working tree, built into one folder for its own
sessions (`nox -s build`, then `tests`, `bench`, `lint`), by the same build-once the pipeline runs.

The working tree is snapshotted into a commit (`crcr.ci.snapshot`) and built in its worktree against one torch
wheel (`--core`, fetched once into the cache, or `$TRIBUTARY_TORCH_WHEEL`, a wheel file you already have), so a
package whose folder did not change reuses its wheel and a native one is rebuilt when the torch wheel's hash
changes. The folder then holds hard links to the wheels and to the torch wheels, and `manifest.json`: per wheel its
file, sha256 and the workspace packages it needs. It is replaced only after a build succeeds: a failed build leaves
the previous wheels and a manifest that still verifies.
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Callable
from pathlib import Path

from crcr.ci import build, cores, coresource
from crcr.ci.envs import normalize_name
from crcr.ci.memberwheels import link
from crcr.ci.snapshot import snapshot
from crcr.ci.worktrees import checkout, resolve_ref

MANIFEST = "manifest.json"
WHEEL_ENV = "TRIBUTARY_TORCH_WHEEL"


class BuildFailed(Exception):
    """The packages did not build; the message is the failing package and the compiler's first error."""


def torch_for(core: str, cache: Path, env: dict[str, str]) -> Path:
    """The torch wheel to build against: `$TRIBUTARY_TORCH_WHEEL` when set, else the release `core`."""
    if env.get(WHEEL_ENV):
        source = coresource.CoreSource(name="wheel", kind="wheel", spec=env[WHEEL_ENV])
        return coresource.obtain(source, cache, "", env=env)
    return cores.torch_wheel(core, cache, env)


def build_into(repo: Path, cache: Path, out: Path, torch_wheel: Path, force: bool, log: Callable[[str], None]) -> dict:
    """Build the working tree's packages against `torch_wheel` and publish them into `out`; the manifest."""
    sha = snapshot(repo)
    tree = checkout(repo, sha, cache)
    result = build.build_backend(tree, torch_wheel, cache, log, force=force)
    if not result.ok:
        raise BuildFailed(f"{result.first_error} (log: {result.log})")
    members = build.members(tree)
    names = {normalize_name(m.distribution): m.distribution for m in members}
    needs = {m.distribution: sorted(names[d] for d in m.dependencies if d in names) for m in members}
    manifest = {
        "source": sha,
        "torch": {"file": torch_wheel.name, "version": cores.wheel_version(torch_wheel),
                  "sha256": cores.wheel_sha256(torch_wheel)},
        "wheels": {dist: {"file": Path(path).name, "sha256": result.wheel_sha256[dist], "needs": needs.get(dist, [])}
                   for dist, path in sorted(result.wheels.items())},
    }  # fmt: skip
    _publish(out, [Path(p) for p in result.wheels.values()] + sorted(torch_wheel.parent.glob("*.whl")), manifest)
    return manifest


def _publish(out: Path, wheels: list[Path], manifest: dict) -> None:
    """Replace `out`'s wheels and manifest with these: links first, the manifest last (written aside, renamed)."""
    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob("*.whl"):
        old.unlink()
    for wheel in wheels:
        link(wheel, out)
    partial = out / f".{MANIFEST}.part"
    partial.write_text(json.dumps(manifest, indent=2) + "\n")
    os.replace(partial, out / MANIFEST)


def _run(args: argparse.Namespace) -> int:
    cache, repo = Path(args.cache).resolve(), Path(args.repo).resolve()
    resolve_ref(repo, "HEAD")  # a bad --repo is said before any torch is fetched
    torch_wheel = torch_for(args.core, cache, dict(os.environ))

    def say(line: str) -> None:
        print(line, flush=True)

    try:
        manifest = build_into(repo, cache, Path(args.out).resolve(), torch_wheel, args.force, say)
    except BuildFailed as exc:
        print(f"error: build failed: {exc}", flush=True)
        return 1
    print(f"{len(manifest['wheels'])} wheel(s) against torch {manifest['torch']['version']} in {args.out}")
    return 0


def add_build(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("build", help="build this working tree's packages once into a folder (nox -s build)")
    parser.add_argument("--repo", default=".", help="the repository whose working tree is built (default: .)")
    parser.add_argument("--cache", default=".tributary", help="builds, worktrees, torch wheels (default: .tributary)")
    parser.add_argument("--core", default="2.13.0", help=f"the torch release to build against (default: 2.13.0; "
                        f"${WHEEL_ENV} names a wheel file instead)")  # fmt: skip
    parser.add_argument("--out", required=True, help="the folder to publish the wheels and manifest.json into")
    parser.add_argument("--force", action="store_true", help="rebuild every package, reusing no wheel")
    parser.set_defaults(run=_run)
