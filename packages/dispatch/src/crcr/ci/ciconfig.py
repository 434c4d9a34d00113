"""`configs/ci.yaml` (what the CI job runs) and the device profiles it selects (`configs/devices/NAME.yaml`).

The pipeline names no device: the profile says which packages make the backend, how pytest loads it, and where its
testreuse configs live, so a second privateuse1 backend is one more profile file. A profile's variants are more
config folders for the same suite (a compiled run, say): each is its own combination, with its own name and history.
"""

from __future__ import annotations

import datetime
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from crcr.ci import cores, coresource
from crcr.ci.backendsource import BUILD_KINDS, BackendSource
from crcr.ci.classify import DevicePatterns
from crcr.ci.coresource import CoreSource
from crcr.configfile import ConfigError, Fields, located, read_mapping
from crcr.credentials import is_credential

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
    variants: dict[str, dict[str, str]] = field(default_factory=dict)  # variant -> suite kind -> config folder
    environment: tuple[str, ...] = ()  # host variables (names or shell patterns) the shards get besides the base set
    failures: DevicePatterns = field(default_factory=DevicePatterns)  # the device's transient errors and refusals
    excludes: tuple[str, ...] = ()  # torch's dependencies the device never loads: its builds and tests go without
    origin: BackendSource = field(default_factory=BackendSource)  # `source`: where the backend comes from, its build
    source: Path = field(default=Path("configs/devices/NAME.yaml"), compare=False)

    def config_folder(self, kind: str, variant: str = "") -> str:
        """The testreuse config folder for a suite kind ("embedded" or "upstream"), the variant's when one is
        named; a profile without one stops the run with one line instead of running some other folder."""
        field_name = f"variants.{variant}" if variant else "configs"
        folders = self.variants.get(variant) if variant else self.configs
        if folders is None:
            declared = ", ".join(sorted(self.variants)) or "none"
            raise CIConfigError(f"{self.source}: {field_name}: not declared (its variants: {declared})")
        if kind not in folders:
            raise CIConfigError(f"{self.source}: {field_name}.{kind}: required: this run's suite is {kind}")
        return folders[kind]


@dataclass(frozen=True)
class CIConfig:
    device: str
    cores: tuple[str, ...]  # core names (a release's is its version), oldest first; the last is the latest
    suite: str  # "embedded", or a path to a PyTorch checkout's root (holding test/)
    shards: int = 2  # how many shards, unless shard_cap is set
    shard_cap: float | None = None  # else: the fewest shards of at most this many predicted seconds each
    shard_setup: float = 0.0  # fixed seconds each shard costs before its first test (start-up, imports)
    shard_groups: tuple[tuple[str, str], ...] = ()  # (name, node id pattern): tests the planner keeps together
    parallel_shards: int = 2
    workers_per_shard: int = 1
    isolation: str = "process"  # where shards run: "process" or "docker" (a container per shard)
    image: str = "tributary-base:bookworm"  # the container image for docker isolation
    retries: int = 1
    test_timeout: float = 300.0
    shard_timeout: float = 3600.0
    matrices: tuple[str, ...] = ("backend", "core")
    variants: tuple[str, ...] = ()  # the device profile's variants to run besides the plain combinations
    durations: str = ""  # a committed durations store (relative to the repository) that seeds an empty cache's
    core_sources: tuple[CoreSource, ...] = ()  # where each core that is no release comes from, by name
    source: Path = field(default=Path("configs/ci.yaml"), compare=False)

    def core_source(self, name: str) -> CoreSource | None:
        """Where the core `name` comes from, None for a release (a version pip finds)."""
        return next((s for s in self.core_sources if s.name == name), None)


ISOLATIONS = ("process", "docker")
SUITE_KINDS = ("embedded", "upstream")
#: A variant's name goes into combination names (`primary+compile`) and their folders, so it is kept plain.
VARIANT_NAME = re.compile(r"[a-z0-9][a-z0-9_-]*\Z")
_CI_FIELDS = {
    "device", "backend", "core", "suite", "shards", "retries", "timeouts", "matrices", "variants", "durations",
}  # fmt: skip


def load_ci_config(path: Path) -> CIConfig:
    """Read and check `configs/ci.yaml`."""
    return located(path, lambda: _load_ci_config(path))


def _load_ci_config(path: Path) -> CIConfig:
    top = Fields(path, read_mapping(path), _CI_FIELDS)
    if "backend" in top.data:  # the refs are one backend's history, and one ci.yaml serves every device
        raise top.fail("backend", "older backend refs are the device profile's: give them as source.refs there")
    core = Fields(path, top.mapping("core"), {"versions"}, "core.")
    suite = Fields(path, top.mapping("suite"), {"root"}, "suite.")
    shards = Fields(
        path, top.mapping("shards"), {"count", "cap", "setup", "groups", "parallel", "workers", "isolation", "image"},
        "shards.",
    )  # fmt: skip
    if "count" in shards.data and "cap" in shards.data:
        raise shards.fail("cap", "give count or cap, not both")
    isolation = shards.text("isolation", "process")
    if isolation not in ISOLATIONS:
        raise CIConfigError(f"{path}: shards.isolation: {isolation!r} is not one of {', '.join(ISOLATIONS)}")
    timeouts = Fields(path, top.mapping("timeouts"), {"test", "shard"}, "timeouts.")
    cores, sources = _cores(core)
    matrices = top.texts("matrices", ("backend", "core"))
    for index, name in enumerate(matrices):
        if name not in ("backend", "core"):
            raise CIConfigError(f"{path}: matrices[{index}]: {name!r} is not a matrix (backend, core)")
    variants = top.texts("variants")
    for index, name in enumerate(variants):
        if name in variants[:index]:
            raise CIConfigError(f"{path}: variants[{index}]: {name!r} is listed twice")
    return CIConfig(
        device=top.text("device"),
        cores=cores,
        suite=suite.text("root", "embedded"),
        shards=int(shards.number("count", 2, integer=True)),
        shard_cap=float(shards.number("cap", 0, minimum=0.001)) if "cap" in shards.data else None,
        shard_setup=float(shards.number("setup", 0, minimum=0)),
        shard_groups=_groups(shards),
        parallel_shards=int(shards.number("parallel", 2, integer=True)),
        workers_per_shard=int(shards.number("workers", 1, integer=True)),
        isolation=isolation,
        image=shards.text("image", "tributary-base:bookworm"),
        retries=int(top.number("retries", 1, integer=True, minimum=0)),
        test_timeout=float(timeouts.number("test", 300.0, minimum=0.001)),
        shard_timeout=float(timeouts.number("shard", 3600.0, minimum=0.001)),
        matrices=matrices,
        variants=variants,
        durations=top.text("durations") if "durations" in top.data else "",
        core_sources=sources,
        source=path,
    )


def _cores(core: Fields) -> tuple[tuple[str, ...], tuple[CoreSource, ...]]:
    """`core.versions`: each a release version, or a mapping naming one other source (nightly, wheel, build)."""
    entries = core.data.get("versions")
    if not isinstance(entries, list) or not entries:
        raise core.fail("versions", "required (a list of torch versions or core sources, oldest first)")
    names: list[str] = []
    sources = []
    for index, entry in enumerate(entries):
        where = f"versions[{index}]"
        if isinstance(entry, str | int | float) and not isinstance(entry, bool) and str(entry).strip():
            name = str(entry)
        elif isinstance(entry, dict):
            found = _core_source(Fields(core.path, entry, _SOURCE_FIELDS, f"core.{where}."))
            name = found.name
            sources.append(found)
        else:
            raise core.fail(where, "expected a torch version or a mapping with one of nightly, wheel, build")
        if name in names:
            raise core.fail(where, f"the core {name!r} is listed twice")
        names.append(name)
    return tuple(names), tuple(sources)


_SOURCE_FIELDS = {*coresource.KINDS, "name", "index", "checkout", "ref"}
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}\Z")


def _core_source(entry: Fields) -> CoreSource:
    kinds = [kind for kind in coresource.KINDS if kind in entry.data]
    if len(kinds) != 1:
        raise entry.fail(kinds[1] if kinds else "nightly", "give exactly one of nightly, wheel, build")
    kind = kinds[0]
    spec = entry.text(kind)
    for unused, needs in (("index", "nightly"), ("checkout", "build"), ("ref", "build")):
        if unused in entry.data and kind != needs:
            raise entry.fail(unused, f"only a {needs} source takes it")
    if kind == "nightly" and spec != coresource.DISPATCHED and not _valid_date(spec):
        raise entry.fail("nightly", f"{spec!r} is neither a date (YYYY-MM-DD) nor {coresource.DISPATCHED!r}")
    default = {"nightly": "nightly" if spec == coresource.DISPATCHED else f"nightly-{spec}", "wheel": "wheel"}
    name = entry.text("name", default.get(kind, "source"))
    if not cores.CORE_NAME.match(name):
        raise entry.fail("name", f"{name!r}: a core's name starts with a letter (a release's is its version)")
    index = entry.text("index") if "index" in entry.data else ""
    ref = entry.text("ref") if "ref" in entry.data else ""
    checkout = entry.text("checkout") if kind == "build" else ""
    return CoreSource(name, kind, spec, index=index, checkout=checkout, ref=ref)


def _valid_date(text: str) -> bool:
    try:
        return bool(_DATE.match(text)) and bool(datetime.date.fromisoformat(text))
    except ValueError:
        return False


def _groups(shards: Fields) -> tuple[tuple[str, str], ...]:
    """`shards.groups`, NAME: PATTERN in order (an fnmatch pattern over node ids or files; the first match wins, and
    groups never share a shard: tests that need the same scarce set-up run together)."""
    data = shards.mapping("groups")
    groups = Fields(shards.path, data, set(map(str, data)), "shards.groups.")
    for name in map(str, data):
        if "=" in name or not name.strip():
            raise groups.fail(name, "a group name is a non-empty word without '='")
    return tuple((str(name), groups.text(str(name))) for name in data)


def split_variants(config: CIConfig, profile: DeviceProfile) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(the variants `config` asks for that the device profile declares, those it does not), each in ci.yaml's order.

    One ci.yaml serves every profile `--device` selects, and a variant's config folders are a profile's own (one
    device has a compiled run, another none), so a variant this profile does not declare is skipped for it, not an
    error."""
    declared = tuple(name for name in config.variants if name in profile.variants)
    return declared, tuple(name for name in config.variants if name not in profile.variants)


_PROFILE_FIELDS = {
    "device", "requirements", "configs", "backend", "pythonpath", "variants", "environment", "failures", "excludes",
    "source",
}  # fmt: skip
_ORIGIN_FIELDS = {"repo", "ref", "refs", "build", "distributions", "native"}
#: A distribution name (PEP 508), which is all `excludes` takes: a version or marker there would exclude nothing.
DISTRIBUTION_NAME = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?$")


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
    configs = _folders(path, "configs", top.mapping("configs"))
    variants = {}
    for variant, folders in top.mapping("variants").items():
        if not isinstance(variant, str) or not VARIANT_NAME.match(variant):
            raise CIConfigError(f"{path}: variants.{variant}: a variant's name is lower-case letters, digits, - and _")
        if not isinstance(folders, dict):
            raise CIConfigError(f"{path}: variants.{variant}: expected a mapping (embedded/upstream: FOLDER)")
        variants[variant] = _folders(path, f"variants.{variant}", folders)
    environment = top.texts("environment")
    for index, variable in enumerate(environment):
        if is_credential(variable):
            raise top.fail(f"environment[{index}]", f"{variable!r} looks like a credential: shards never get one")
    excludes = top.texts("excludes")
    for index, excluded in enumerate(excludes):
        if not DISTRIBUTION_NAME.match(excluded):
            raise top.fail(f"excludes[{index}]", f"{excluded!r} is not a distribution name (triton, say)")
    failures = Fields(path, top.mapping("failures"), {"transient", "refusal"}, prefix="failures.")
    patterns = {kind: failures.texts(kind) for kind in ("transient", "refusal")}
    for kind, texts in patterns.items():
        for index, text in enumerate(texts):
            try:
                re.compile(text)
            except re.error as exc:
                raise failures.fail(f"{kind}[{index}]", f"not a regular expression ({exc})") from None
    return DeviceProfile(
        name=name,
        device=top.text("device"),
        requirements=top.texts("requirements"),
        configs=configs,
        backend=str(top.data.get("backend", "") or ""),
        pythonpath=top.texts("pythonpath"),
        variants=variants,
        environment=environment,
        failures=DevicePatterns(**patterns),
        excludes=excludes,
        origin=_origin(Fields(path, top.mapping("source"), _ORIGIN_FIELDS, "source.")),
        source=path,
    )


def _origin(source: Fields) -> BackendSource:
    """`source`: where the backend's repository is and how it builds; absent, this repository's own workspace."""
    build = source.text("build", "workspace")
    if build not in BUILD_KINDS:
        raise source.fail("build", f"{build!r} is not one of {', '.join(BUILD_KINDS)}")
    native = source.data.get("native", True)
    if not isinstance(native, bool):
        raise source.fail("native", "expected true or false")
    distributions = source.texts("distributions")
    for index, name in enumerate(distributions):
        if not DISTRIBUTION_NAME.match(name):
            raise source.fail(f"distributions[{index}]", f"{name!r} is not a distribution name")
    return BackendSource(
        repo=source.text("repo") if "repo" in source.data else "",
        ref=source.text("ref", "HEAD"),
        refs=source.texts("refs"),
        build=build,
        distributions=distributions,
        native=native,
    )


def _folders(path: Path, where: str, suites: dict[Any, Any]) -> dict[str, str]:
    """A `{embedded: FOLDER, upstream: FOLDER}` mapping (one or both): the config folders for each kind of suite."""
    for kind, folder in suites.items():
        if kind not in SUITE_KINDS or not isinstance(folder, str) or not folder.strip():
            raise CIConfigError(f"{path}: {where}.{kind}: expected embedded/upstream: FOLDER")
    if not suites:
        raise CIConfigError(f"{path}: {where}: required (embedded and/or upstream config folders)")
    return dict(suites)
