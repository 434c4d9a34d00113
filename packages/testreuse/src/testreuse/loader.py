"""Read config files (or directories of them) into one resolved plan, with every rule's position kept."""

from __future__ import annotations

import glob
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import ValidationError

from testreuse.capabilities import ResolvedCapabilities, resolve_capabilities
from testreuse.comments import comment_reasons
from testreuse.dialect import GlobalDialect, global_dialect
from testreuse.errors import ConfigError, Location, Problem, format_path
from testreuse.model import ConfigFile, Mode, Rule
from testreuse.torchversion import installed_torch_version, torch_in_scope
from testreuse.yamlmarks import MarkedDocument, parse_yaml

CONFIG_SUFFIXES = (".yaml", ".yml")
VARIABLE = re.compile(r"\$\{([^}]*)\}")
_NO_ADDED_MODULES = "modules.include adds a module_db ModuleInfo by name only; a module built from a path and inputs "
"needs code torch's @modules cannot take from a config"
# torch-spyre fields with no testreuse meaning, keyed by (enclosing section, field): refused with the reason
UNSUPPORTED = {
    ("ops", "sample_inputs_func"): "ops.include adds an op_db OpInfo with its own sample inputs; other samples "
    "need code (samples.exclude drops some)",
    ("ops", "tags"): "marks go on the entry (`tags`); `-m op__<name>` already selects one op's cases",
    **{
        ("modules", key): _NO_ADDED_MODULES
        for key in ("module_path", "apply_device_layout", "constructor_inputs", "forward_inputs")
    },
}


def default_torch_root() -> Path:
    """The embedded upstream-style tree shipped inside the package."""
    return Path(__file__).parent / "upstream"


def embedded_configs() -> Path:
    """The reference device's configs for the embedded tree, shipped beside it."""
    return default_torch_root() / "configs"


def resolve_torch_root(option: str | None) -> Path:
    """TORCH_ROOT from the option, else the environment, else the embedded tree."""
    chosen = option or os.environ.get("TORCH_ROOT") or str(default_torch_root())
    root = Path(chosen).expanduser().resolve()
    if not root.is_dir():
        raise ConfigError([Problem(Location(chosen), "", "TORCH_ROOT is not a directory")])
    return root


def resolve_device_root(option: str | None) -> Path | None:
    """TORCH_DEVICE_ROOT (the backend's own test tree) from the option, else the environment; None when neither."""
    chosen = option or os.environ.get("TORCH_DEVICE_ROOT")
    if not chosen:
        return None
    root = Path(chosen).expanduser().resolve()
    if not root.is_dir():
        raise ConfigError([Problem(Location(chosen), "", "TORCH_DEVICE_ROOT is not a directory")])
    return root


@dataclass(frozen=True)
class PlacedRule:
    """A rule with where it was written and its place in merge order (later wins ties). `active` is False when
    its `only.torch` excludes the torch the plan was loaded for: it then applies to no case, but is still checked."""

    rule: Rule
    location: Location
    order: int
    doc: MarkedDocument
    path: tuple[str | int, ...]
    active: bool = True

    def locate(self, *sub: str | int) -> Location:
        """Position of a value inside this rule, e.g. `locate("names", 0)`."""
        return self.doc.locate((*self.path, *sub))


@dataclass
class FilePlan:
    """Everything the configs say about one upstream file."""

    path: Path
    unlisted_mode: Mode
    unlisted_origin: Location
    rules: list[PlacedRule] = field(default_factory=list)
    entry_locations: list[Location] = field(default_factory=list)


@dataclass
class Plan:
    """The merged configs: labels, per-file rules and the backend's capabilities, for one torch version."""

    sources: list[Path]
    torch_root: Path
    labels: tuple[str, ...]
    files: dict[Path, FilePlan]
    capabilities: ResolvedCapabilities
    dialect: GlobalDialect
    torch_version: str = ""
    compile: CompileSetting | None = None


@dataclass(frozen=True)
class CompileSetting:
    """The run's compiled mode and where a config set it."""

    mode: str
    backend: str | None  # MODULE[:FUNC], the device compiler backend to import
    location: Location
    dynamic: bool | None = None  # False: recompiles keep static shapes

    def agreed(self) -> tuple[str, str | None, bool | None]:
        """What every config of one run must set alike."""
        return self.mode, self.backend, self.dynamic


def config_files(inputs: Sequence[str | os.PathLike[str]]) -> list[Path]:
    """Expand directories into their `*.yaml`/`*.yml` files, sorted by name; keep argument order."""
    found: list[Path] = []
    for raw in inputs:
        path = Path(raw)
        if path.is_dir():
            found.extend(sorted(p for p in path.iterdir() if p.suffix in CONFIG_SUFFIXES and p.is_file()))
        elif path.is_file():
            found.append(path)
        else:
            raise ConfigError([Problem(Location(str(path)), "", "no such config file or directory")])
    if not found:
        raise ConfigError([Problem(Location(", ".join(map(str, inputs))), "", "no config files found")])
    return found


def read_config(path: Path) -> tuple[ConfigFile, MarkedDocument]:
    """Parse and type-check one config file; errors carry `file:line:col: path: message`."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError([Problem(Location(str(path)), "", f"cannot read: {exc}")]) from None
    doc = parse_yaml(text, str(path))
    comment_reasons(doc, text)
    try:
        return ConfigFile.model_validate(doc.data), doc
    except ValidationError as exc:
        raise ConfigError([_problem(doc, err) for err in exc.errors()]) from None


def _problem(doc: MarkedDocument, err: dict) -> Problem:
    loc = tuple(err["loc"])
    message = err["msg"]
    if err["type"] == "extra_forbidden":
        why = UNSUPPORTED.get((str(loc[-4]), str(loc[-1]))) if len(loc) >= 4 else None
        message = f"unsupported field {loc[-1]}: {why}" if why else "unknown key"
    elif message.startswith("Value error, "):
        message = message.removeprefix("Value error, ")
    elif err["type"] == "missing":
        message = "required key missing"
    return Problem(doc.locate(loc, key=err["type"] == "extra_forbidden"), format_path(loc), message)


def expand_path(pattern: str, torch_root: Path, config_dir: Path, device_root: Path | None = None) -> list[Path]:
    """`${TORCH_ROOT}` and `${TORCH_DEVICE_ROOT}` substitution, then globbing; relative paths are relative to the
    config file."""
    unknown = [name for name in VARIABLE.findall(pattern) if name not in ("TORCH_ROOT", "TORCH_DEVICE_ROOT")]
    if unknown:
        raise ValueError(f"unknown variable ${{{unknown[0]}}} (only ${{TORCH_ROOT}} and ${{TORCH_DEVICE_ROOT}})")
    if "${TORCH_DEVICE_ROOT}" in pattern:
        if device_root is None:
            raise ValueError("${TORCH_DEVICE_ROOT} is not set: pass --torch-device-root or set TORCH_DEVICE_ROOT")
        pattern = pattern.replace("${TORCH_DEVICE_ROOT}", str(device_root))
    expanded = Path(pattern.replace("${TORCH_ROOT}", str(torch_root)))
    if not expanded.is_absolute():
        expanded = config_dir / expanded
    # absolute, symlinks kept: a file linked into the tree from elsewhere still lives under TORCH_ROOT
    matches = sorted(Path(os.path.abspath(m)) for m in glob.glob(str(expanded), recursive=True) if m.endswith(".py"))
    if not matches:
        raise ValueError(f"matches no .py file (TORCH_ROOT={torch_root})")
    return matches


def load_plan(
    inputs: Sequence[str | os.PathLike[str]],
    torch_root: Path,
    *,
    run_commands: bool = True,
    device_root: Path | None = None,
    torch_version: str | None = None,
) -> Plan:
    """Merge configs in order: rules concatenate (later wins ties), later `unlisted_test_mode` and capability keys win,
    labels unite. `run_commands=False` leaves capability export commands unrun (see resolve_capabilities); without
    `device_root`, `$TORCH_DEVICE_ROOT` is used. Rules whose `only.torch` excludes `torch_version` (default: the
    installed torch's) are kept but inactive."""
    sources = config_files(inputs)
    torch_version = torch_version or installed_torch_version()
    device_root = device_root or resolve_device_root(None)
    problems: list[Problem] = []
    labels: list[str] = []
    files: dict[Path, FilePlan] = {}
    capability_layers = []
    compiled: CompileSetting | None = None
    order = 0
    for source in sources:
        try:
            config, doc = read_config(source)
        except ConfigError as exc:
            problems.extend(exc.problems)
            continue
        suite = config.test_suite_config
        labels.extend(label for label in suite.labels if label not in labels)
        if suite.compile is not None:
            key = ("test_suite_config", "compile")
            here = CompileSetting(suite.compile.mode, suite.compile.backend, doc.locate(key), suite.compile.dynamic)
            if compiled is not None and compiled.agreed() != here.agreed():
                problems.append(Problem(here.location, format_path(key), f"differs from {compiled.location}"))
            compiled = compiled or here
        if suite.global_ is not None:
            capability_layers.append((suite.global_, doc, source.parent))
        for index, entry in enumerate(suite.files):
            base = ("test_suite_config", "files", index)
            try:
                paths = expand_path(entry.path, torch_root, source.parent, device_root)
            except ValueError as exc:
                problems.append(Problem(doc.locate((*base, "path")), format_path((*base, "path")), str(exc)))
                continue
            for upstream in paths:
                plan = files.setdefault(
                    upstream, FilePlan(upstream, entry.unlisted_test_mode, doc.locate((*base, "path")))
                )
                plan.entry_locations.append(doc.locate(base))
                if "unlisted_test_mode" in entry.model_fields_set:
                    plan.unlisted_mode = entry.unlisted_test_mode
                    plan.unlisted_origin = doc.locate((*base, "unlisted_test_mode"))
                for rule_index, rule in enumerate(entry.tests):
                    rule_path = (*base, "tests", rule_index)
                    order_of_rule = order + rule_index
                    active = torch_in_scope(rule.only.torch if rule.only else None, torch_version)
                    placed = PlacedRule(rule, doc.locate(rule_path), order_of_rule, doc, rule_path, active)
                    plan.rules.append(placed)
            order += len(entry.tests)
    capabilities = None
    try:
        capabilities = resolve_capabilities(capability_layers, run_commands=run_commands)
    except ConfigError as exc:
        problems.extend(exc.problems)
    if problems:
        raise ConfigError(problems)
    dialect = global_dialect(capability_layers)
    return Plan(sources, torch_root, tuple(labels), files, capabilities, dialect, torch_version, compiled)
