"""Build each workspace package once: rebuild only what changed, never paper over a damaged dist/."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

from .errors import BuildError
from .manifest import (
    Manifest,
    WheelRecord,
    file_sha256,
    read_manifest,
    source_sha256,
    verify_wheel,
    write_manifest,
)
from .torch_source import TorchWheel
from .workspace import Member

Runner = Callable[..., object]


def git_sha(root: Path) -> str:
    """The checkout's commit, or 'unknown' outside git; recorded so a dist/ can be traced to its source."""
    result = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, check=False)
    return result.stdout.strip() if result.returncode == 0 else "unknown"


def _is_current(record: WheelRecord | None, member: Member, torch: TorchWheel) -> bool:
    if record is None:
        return False
    if record.source_sha256 != source_sha256(member):
        return False
    return not member.native or record.torch_sha256 == torch.sha256


def plan_builds(members: Sequence[Member], dist: Path, torch: TorchWheel, force: bool) -> list[Member]:
    """The members whose wheel must be (re)built; a current wheel is verified instead, and must be intact. A native
    member is stale when the torch wheel differs from the one it was built against, by hash."""
    manifest = read_manifest(dist)
    stale = []
    for member in members:
        record = manifest.record_for(member.distribution) if manifest else None
        if not force and _is_current(record, member, torch):
            assert record is not None
            verify_wheel(dist, record)
        else:
            stale.append(member)
    return stale


def _built_wheel(out: Path, member: Member) -> Path:
    wheels = sorted(out.glob(f"{member.wheel_stem}-{member.version}-*.whl"))
    if len(wheels) != 1:
        raise BuildError(f"{out}: expected one wheel for {member.distribution}, found {len(wheels)}")
    return wheels[0]


def build_members(
    root: Path,
    dist: Path,
    members: Sequence[Member],
    stale: Sequence[Member],
    torch: TorchWheel,
    run: Runner,
) -> None:
    """Build the stale members with uv into dist/ and rewrite the manifest for all members.

    Each wheel is built in a scratch folder and replaces the previous one only once built, and the manifest is
    rewritten after each member: a failed build leaves the previous wheel and a manifest that still verifies."""
    dist.mkdir(exist_ok=True)
    previous = read_manifest(dist)
    records = {w.distribution: w for w in previous.wheels} if previous else {}
    for member in stale:
        fingerprint = source_sha256(member)  # taken before building, so an edit made meanwhile leaves it stale
        with tempfile.TemporaryDirectory(prefix=".building-", dir=dist) as scratch:
            command = ["uv", "build", "--package", member.distribution, "--wheel", "--out-dir", scratch]
            if member.native:
                command += ["--no-build-isolation"]
            run(*command)
            built = _built_wheel(Path(scratch), member)
            for old in dist.glob(f"{member.wheel_stem}-*.whl"):
                old.unlink()
            wheel = Path(shutil.move(built, dist / built.name))
        records[member.distribution] = WheelRecord(
            distribution=member.distribution,
            version=member.version,
            file=wheel.name,
            sha256=file_sha256(wheel),
            source_sha256=fingerprint,
            torch_sha256=torch.sha256 if member.native else "",
        )
        listed = tuple(records[m.distribution] for m in members if m.distribution in records)
        write_manifest(dist, Manifest(git_sha=git_sha(root), torch_version=torch.version, wheels=listed))


def verified_wheels(dist: Path, members: Sequence[Member]) -> list[Path]:
    """The manifest's wheels for these members, each checked against its recorded hash."""
    manifest = read_manifest(dist)
    if manifest is None:
        raise BuildError(f"{dist}/manifest.json: missing; run nox -s build")
    paths = []
    for member in members:
        record = manifest.record_for(member.distribution)
        if record is None:
            raise BuildError(f"{dist}/manifest.json: no wheel for {member.distribution}; run nox -s build")
        paths.append(verify_wheel(dist, record))
    return paths
