"""`configs/ci.yaml` (what the CI job runs) and the device profiles it selects (`configs/devices/NAME.yaml`).

The pipeline names no device: the profile says which packages make the backend, how pytest loads it, and where its
testreuse configs live, so a second privateuse1 backend is one more profile file.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from crcr.configfile import ConfigError, Fields, located, read_mapping

#: The error every config of the pipeline raises: one line naming the file, the line and the field.
CIConfigError = ConfigError


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


ISOLATIONS = ("process", "docker")
_CI_FIELDS = {"device", "backend", "core", "suite", "shards", "retries", "timeouts", "matrices"}


def load_ci_config(path: Path) -> CIConfig:
    """Read and check `configs/ci.yaml`."""
    return located(path, lambda: _load_ci_config(path))


def _load_ci_config(path: Path) -> CIConfig:
    top = Fields(path, read_mapping(path), _CI_FIELDS)
    backend = Fields(path, top.mapping("backend"), {"refs"}, "backend.")
    core = Fields(path, top.mapping("core"), {"versions"}, "core.")
    suite = Fields(path, top.mapping("suite"), {"root"}, "suite.")
    shards = Fields(path, top.mapping("shards"), {"count", "parallel", "workers", "isolation", "image"}, "shards.")
    isolation = shards.text("isolation", "process")
    if isolation not in ISOLATIONS:
        raise CIConfigError(f"{path}: shards.isolation: {isolation!r} is not one of {', '.join(ISOLATIONS)}")
    timeouts = Fields(path, top.mapping("timeouts"), {"test", "shard"}, "timeouts.")
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
    return located(path, lambda: _load_profile(path, name))


def _load_profile(path: Path, name: str) -> DeviceProfile:
    configs_dir = path.parent.parent
    if not path.is_file():
        known = sorted(p.stem for p in (configs_dir / "devices").glob("*.yaml"))
        raise CIConfigError(f"{path}: no device profile {name!r} (profiles: {', '.join(known) or 'none'})")
    top = Fields(path, read_mapping(path), _PROFILE_FIELDS)
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
