"""The wheelhouse that uv takes torch from, filled from a wheel, an index, or pip's own configuration."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from .errors import BuildError
from .manifest import file_sha256

TORCH_PIN = "torch==2.13.0"
WHEEL_ENV = "TRIBUTARY_TORCH_WHEEL"
INDEX_ENV = "TRIBUTARY_TORCH_INDEX"


def _torch_wheels(wheelhouse: Path) -> list[Path]:
    return sorted(wheelhouse.glob("torch-*.whl"))


def wheel_version(wheel: Path) -> str:
    """The version part of a wheel file name, e.g. '2.13.0+cpu'."""
    return wheel.name.split("-")[1]


@dataclass(frozen=True)
class TorchWheel:
    """The torch a native package links against: two builds can share a version (a nightly, a local rebuild), so
    the wheel's hash is what identifies it; the version is for people."""

    version: str
    sha256: str

    @classmethod
    def of(cls, wheel: Path) -> TorchWheel:
        """Identify a wheel file by its name's version and its bytes."""
        return cls(wheel_version(wheel), file_sha256(wheel))


def ensure_torch_wheel(wheelhouse: Path, env: os._Environ[str] | dict[str, str] = os.environ) -> Path:
    """The torch wheel uv will install, fetching it once if the wheelhouse has none.

    Sources, first match wins: $TRIBUTARY_TORCH_WHEEL (a wheel file), $TRIBUTARY_TORCH_INDEX (an index URL such
    as PyTorch's CPU index), else `pip download` with pip's own configuration (its find-links and indexes).
    """
    wheelhouse.mkdir(exist_ok=True)
    explicit = env.get(WHEEL_ENV)
    if explicit:
        source = Path(explicit)
        if not source.is_file() or source.suffix != ".whl":
            raise BuildError(f"{WHEEL_ENV}={explicit}: not a wheel file")
        for old in _torch_wheels(wheelhouse):
            if old.name != source.name:
                old.unlink()
        target = wheelhouse / source.name
        if not target.exists():
            shutil.copyfile(source, target)
        return target
    existing = _torch_wheels(wheelhouse)
    if existing:
        return existing[-1]
    command = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--only-binary=:all:",
        "--dest",
        str(wheelhouse),
    ]
    index = env.get(INDEX_ENV)
    if index:
        command += ["--index-url", index]
    command.append(TORCH_PIN)
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    wheels = _torch_wheels(wheelhouse)
    if result.returncode != 0 or not wheels:
        last = (result.stderr.strip().splitlines() or ["no output"])[-1]
        raise BuildError(f"could not fetch {TORCH_PIN} into {wheelhouse}: {last} (set {WHEEL_ENV} or {INDEX_ENV})")
    return wheels[-1]
