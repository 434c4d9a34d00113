"""`configs/ci.yaml` (what the CI job runs) and the device profiles it selects (`configs/devices/NAME.yaml`).

The pipeline names no device: the profile says which packages make the backend, how pytest loads it, and where its
testreuse configs live, so a second privateuse1 backend is one more profile file.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml


class CIConfigError(Exception):
    """A config that cannot be used: one line naming the file and the field."""


@dataclass(frozen=True)
class DeviceProfile:
    """How to run one privateuse1 backend; every path is relative to the backend's checkout."""

    name: str  # the profile's file name
    device: str  # the privateuse1 backend name torch registers
    requirements: tuple[str, ...]  # what the combination environment installs from the backend's wheels
    configs: dict[str, str]  # suite kind ("embedded" or "upstream") -> testreuse config folder
    backend: str = ""  # --testreuse-backend MODULE[:FUNC]; "" when the backend autoloads
    pythonpath: tuple[str, ...] = ()  # folders the backend module is imported from


@dataclass(frozen=True)
class CIConfig:
    device: str
    backend_refs: tuple[str, ...]  # older backend refs for the backend-version matrix (HEAD is always the latest)
    cores: tuple[str, ...]  # torch versions, oldest first; the last is the latest
    suite: str  # "embedded", or a path to a PyTorch checkout's root (holding test/)
    shards: int = 2
    parallel_shards: int = 2
    workers_per_shard: int = 1
    isolation: str = "process"  # where shards run: "process" or "docker" (a container per shard)
    image: str = "tributary-base:bookworm"  # the container image for docker isolation
    retries: int = 1
    test_timeout: float = 300.0
    shard_timeout: float = 3600.0
    matrices: tuple[str, ...] = ("backend", "core")
    source: Path = field(default=Path("configs/ci.yaml"), compare=False)


def _read(path: Path) -> dict[str, Any]:
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise CIConfigError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise CIConfigError(f"{path}: not UTF-8 text") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f":{mark.line + 1}:{mark.column + 1}" if mark is not None else ""
        raise CIConfigError(f"{path}{where}: not YAML: {getattr(exc, 'problem', None) or exc}") from None
    if not isinstance(data, dict):
        raise CIConfigError(f"{path}: top level: expected a mapping")
    return data


class _Fields:
    """Typed reads of one mapping, each error naming the file and the dotted field."""

    def __init__(self, path: Path, data: dict[str, Any], known: set[str], prefix: str = "") -> None:
        self.path, self.data, self.prefix = path, data, prefix
        unknown = sorted(set(map(str, data)) - known)
        if unknown:
            raise CIConfigError(f"{path}: {prefix}{unknown[0]}: unknown field (known: {', '.join(sorted(known))})")

    def _fail(self, name: str, why: str) -> CIConfigError:
        return CIConfigError(f"{self.path}: {self.prefix}{name}: {why}")

    def text(self, name: str, default: str | None = None) -> str:
        value = self.data.get(name, default)
        if not isinstance(value, str) or not value.strip():
            raise self._fail(name, "expected a non-empty string" if name in self.data else "required")
        return value

    def texts(self, name: str, default: tuple[str, ...] = ()) -> tuple[str, ...]:
        value = self.data.get(name, list(default))
        if isinstance(value, str) or not isinstance(value, list):
            raise self._fail(name, "expected a list of strings")
        for index, item in enumerate(value):
            if not isinstance(item, str | int | float) or isinstance(item, bool) or not str(item).strip():
                raise self._fail(f"{name}[{index}]", "expected a non-empty string")
        return tuple(str(v) for v in value)

    def number(self, name: str, default: float, *, integer: bool = False, minimum: float = 1) -> float:
        value = self.data.get(name, default)
        if isinstance(value, bool) or not isinstance(value, int | float) or (integer and not isinstance(value, int)):
            raise self._fail(name, f"expected {'an integer' if integer else 'a number'}")
        if value < minimum:
            raise self._fail(name, f"must be at least {minimum:g}")
        return value

    def mapping(self, name: str) -> dict[str, Any]:
        value = self.data.get(name, {})
        if not isinstance(value, dict):
            raise self._fail(name, "expected a mapping")
        return value


ISOLATIONS = ("process", "docker")
_CI_FIELDS = {"device", "backend", "core", "suite", "shards", "retries", "timeouts", "matrices"}


def load_ci_config(path: Path) -> CIConfig:
    """Read and check `configs/ci.yaml`."""
    top = _Fields(path, _read(path), _CI_FIELDS)
    backend = _Fields(path, top.mapping("backend"), {"refs"}, "backend.")
    core = _Fields(path, top.mapping("core"), {"versions"}, "core.")
    suite = _Fields(path, top.mapping("suite"), {"root"}, "suite.")
    shards = _Fields(path, top.mapping("shards"), {"count", "parallel", "workers", "isolation", "image"}, "shards.")
    isolation = shards.text("isolation", "process")
    if isolation not in ISOLATIONS:
        raise CIConfigError(f"{path}: shards.isolation: {isolation!r} is not one of {', '.join(ISOLATIONS)}")
    timeouts = _Fields(path, top.mapping("timeouts"), {"test", "shard"}, "timeouts.")
    cores = core.texts("versions")
    if not cores:
        raise CIConfigError(f"{path}: core.versions: required (at least one torch version)")
    matrices = top.texts("matrices", ("backend", "core"))
    for index, name in enumerate(matrices):
        if name not in ("backend", "core"):
            raise CIConfigError(f"{path}: matrices[{index}]: {name!r} is not a matrix (backend, core)")
    return CIConfig(
        device=top.text("device"),
        backend_refs=backend.texts("refs"),
        cores=cores,
        suite=suite.text("root", "embedded"),
        shards=int(shards.number("count", 2, integer=True)),
        parallel_shards=int(shards.number("parallel", 2, integer=True)),
        workers_per_shard=int(shards.number("workers", 1, integer=True)),
        isolation=isolation,
        image=shards.text("image", "tributary-base:bookworm"),
        retries=int(top.number("retries", 1, integer=True, minimum=0)),
        test_timeout=float(timeouts.number("test", 300.0, minimum=0.001)),
        shard_timeout=float(timeouts.number("shard", 3600.0, minimum=0.001)),
        matrices=matrices,
        source=path,
    )


_PROFILE_FIELDS = {"device", "requirements", "configs", "backend", "pythonpath"}


def load_profile(configs_dir: Path, name: str) -> DeviceProfile:
    """`configs_dir/devices/NAME.yaml`; an unknown name lists the profiles there."""
    path = configs_dir / "devices" / f"{name}.yaml"
    if not path.is_file():
        known = sorted(p.stem for p in (configs_dir / "devices").glob("*.yaml"))
        raise CIConfigError(f"{path}: no device profile {name!r} (profiles: {', '.join(known) or 'none'})")
    top = _Fields(path, _read(path), _PROFILE_FIELDS)
    suites = top.mapping("configs")
    for kind, folder in suites.items():
        if kind not in ("embedded", "upstream") or not isinstance(folder, str) or not folder.strip():
            raise CIConfigError(f"{path}: configs.{kind}: expected embedded/upstream: FOLDER")
    if not suites:
        raise CIConfigError(f"{path}: configs: required (embedded and/or upstream config folders)")
    return DeviceProfile(
        name=name,
        device=top.text("device"),
        requirements=top.texts("requirements"),
        configs=dict(suites),
        backend=str(top.data.get("backend", "") or ""),
        pythonpath=top.texts("pythonpath"),
    )
