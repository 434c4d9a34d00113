"""dist/manifest.json: which wheel holds which package, its hash, and the sources it was built from."""

from __future__ import annotations

import hashlib
import json
import subprocess
from dataclasses import asdict, dataclass
from pathlib import Path

from .errors import BuildError
from .workspace import Member

MANIFEST_NAME = "manifest.json"
# What a wheel is built from: the package's top-level files (pyproject.toml, setup.py, README.md: build
# configuration and metadata) and its src/ tree. tests/, benchmarks/, docs/ and examples/ never reach a wheel.
WHEEL_SOURCE_DIR = "src"


@dataclass(frozen=True)
class WheelRecord:
    """One built wheel as the manifest lists it."""

    distribution: str
    version: str
    file: str
    sha256: str
    source_sha256: str
    torch_sha256: str = ""  # the torch wheel a native package was built against; empty for pure-Python ones


@dataclass(frozen=True)
class Manifest:
    """The whole of dist/manifest.json."""

    git_sha: str
    torch_version: str
    wheels: tuple[WheelRecord, ...]

    def record_for(self, distribution: str) -> WheelRecord | None:
        """The wheel built for a distribution, if the manifest holds one."""
        return next((w for w in self.wheels if w.distribution == distribution), None)


def file_sha256(path: Path) -> str:
    """Hex sha256 of a file's bytes, read in chunks so large wheels stay cheap."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def wheel_sources(member: Member) -> list[Path]:
    """The git-tracked files that go into the member's wheel (untracked files are not part of any build)."""
    done = subprocess.run(
        ["git", "ls-files", "-z", "--", "."], cwd=member.directory, capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise BuildError(f"{member.directory}: cannot list tracked sources with git: {last}")
    files = []
    for name in sorted(filter(None, done.stdout.split("\0"))):
        parts = Path(name).parts
        if (len(parts) == 1 or parts[0] == WHEEL_SOURCE_DIR) and (member.directory / name).is_file():
            files.append(member.directory / name)
    return files


def source_sha256(member: Member) -> str:
    """A fingerprint of what goes into a package's wheel: a change to any of it means the wheel is stale."""
    digest = hashlib.sha256()
    for path in wheel_sources(member):
        digest.update(path.relative_to(member.directory).as_posix().encode())
        digest.update(b"\0")
        digest.update(file_sha256(path).encode())
    return digest.hexdigest()


def read_manifest(dist: Path) -> Manifest | None:
    """The manifest in dist/, or None when nothing has been built yet."""
    path = dist / MANIFEST_NAME
    if not path.exists():
        return None
    try:
        data = json.loads(path.read_text())
        return Manifest(
            git_sha=data["git_sha"],
            torch_version=data["torch_version"],
            wheels=tuple(WheelRecord(**w) for w in data["wheels"]),
        )
    except (ValueError, KeyError, TypeError) as exc:
        raise BuildError(f"{path}: unreadable manifest ({exc}); remove dist/ and run nox -s build") from None


def write_manifest(dist: Path, manifest: Manifest) -> Path:
    """Write the manifest with sorted keys so identical builds give identical files."""
    path = dist / MANIFEST_NAME
    data = asdict(manifest)
    data["wheels"] = sorted(data["wheels"], key=lambda w: w["distribution"])
    path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    return path


def verify_wheel(dist: Path, record: WheelRecord) -> Path:
    """The wheel's path, after checking it exists and still has the hash the manifest recorded."""
    path = dist / record.file
    if not path.is_file():
        raise BuildError(f"{path}: wheel listed in {dist / MANIFEST_NAME} is missing; run nox -s build -- --force")
    actual = file_sha256(path)
    if actual != record.sha256:
        raise BuildError(
            f"{path}: sha256 {actual[:12]}... does not match {record.sha256[:12]}... in "
            f"{dist / MANIFEST_NAME} (corrupted or replaced); run nox -s build -- --force"
        )
    return path
