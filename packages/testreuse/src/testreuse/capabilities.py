"""The backend's capabilities (dtypes, ops with their dtypes, modules), declared once or taken from its own export."""

from __future__ import annotations

import shlex
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from testreuse.errors import ConfigError, Location, Problem, format_path
from testreuse.model import Capabilities, CapabilityExport, CapabilitySource, GlobalConfig
from testreuse.yamlmarks import MarkedDocument, parse_yaml

EXPORT_TIMEOUT_S = 120
KEYS = ("supported_dtypes", "supported_ops", "supported_modules")
GLOBAL = ("test_suite_config", "global")
DOTTED = "test_suite_config.global"


@dataclass(frozen=True)
class ResolvedCapabilities:
    """None means "not declared": nothing is narrowed on that axis."""

    dtypes: frozenset[str] | None = None
    ops: dict[str, frozenset[str] | None] | None = None
    modules: frozenset[str] | None = None
    origins: dict[str, Location] = field(default_factory=dict)
    exported_ops: frozenset[str] = frozenset()
    op_locations: dict[str, tuple[Location, str]] = field(default_factory=dict)
    module_locations: dict[str, tuple[Location, str]] = field(default_factory=dict)

    def op_dtypes(self, op: str) -> frozenset[str] | None:
        """Dtypes declared for `op` (its own list, else supported_dtypes); None when nothing is declared."""
        own = self.ops.get(op) if self.ops is not None else None
        return own if own is not None else self.dtypes


def _read_export(source: CapabilitySource, config_dir: Path, where: Location) -> MarkedDocument:
    if source.file is not None:
        path = Path(source.file)
        path = path if path.is_absolute() else config_dir / path
        try:
            return parse_yaml(path.read_text(encoding="utf-8"), str(path))
        except OSError as exc:
            raise ConfigError([Problem(where, f"{DOTTED}.capabilities.file", f"cannot read {path}: {exc}")]) from None
    command = source.command or ""
    try:
        argv = shlex.split(command)
        done = subprocess.run(argv, capture_output=True, text=True, timeout=EXPORT_TIMEOUT_S, cwd=config_dir)
    except (OSError, ValueError, subprocess.TimeoutExpired) as exc:
        raise ConfigError([Problem(where, f"{DOTTED}.capabilities.command", f"cannot run: {exc}")]) from None
    if done.returncode != 0:
        first = (done.stderr.strip().splitlines() or ["no output"])[-1]
        message = f"exited with {done.returncode}: {first}"
        raise ConfigError([Problem(where, f"{DOTTED}.capabilities.command", message)])
    return parse_yaml(done.stdout, f"<{command}>")


def _validate_export(doc: MarkedDocument) -> Capabilities:
    try:
        return CapabilityExport.model_validate(doc.data)
    except ValidationError as exc:
        problems = [
            Problem(doc.locate(tuple(e["loc"])), format_path(tuple(e["loc"])), e["msg"].removeprefix("Value error, "))
            for e in exc.errors()
        ]
        raise ConfigError(problems) from None


def resolve_capabilities(layers: Iterable[tuple[GlobalConfig, MarkedDocument, Path]]) -> ResolvedCapabilities:
    """Apply `global` sections in order; within one, keys written inline override the export."""
    chosen: dict[str, tuple[Capabilities, Location]] = {}
    op_locations: dict[str, tuple[Location, str]] = {}
    module_locations: dict[str, tuple[Location, str]] = {}
    exported_ops: frozenset[str] = frozenset()
    for config, doc, config_dir in layers:
        if config.capabilities is not None:
            where = doc.locate((*GLOBAL, "capabilities"))
            export = _validate_export(_read_export(config.capabilities, config_dir, where))
            for key in KEYS:
                if key in export.model_fields_set and getattr(export, key) is not None:
                    chosen[key] = (export, where)
            if export.supported_ops is not None:
                exported_ops = frozenset(op.name for op in export.supported_ops)
        for key in KEYS:
            if key in config.model_fields_set:
                chosen[key] = (config, doc.locate((*GLOBAL, key)))
        if "supported_ops" in config.model_fields_set:
            op_locations = _name_locations(doc, "supported_ops", config.supported_ops or ())
        if "supported_modules" in config.model_fields_set:
            module_locations = _name_locations(doc, "supported_modules", config.supported_modules or ())
    origins = {key: where for key, (_, where) in chosen.items()}
    dtypes = modules = ops = None
    if "supported_dtypes" in chosen:
        dtypes = frozenset(d.name for d in chosen["supported_dtypes"][0].supported_dtypes or ())
    if "supported_modules" in chosen:
        modules = frozenset(m.name for m in chosen["supported_modules"][0].supported_modules or ())
    if "supported_ops" in chosen:
        declared = chosen["supported_ops"][0].supported_ops or ()
        ops = {op.name: None if op.dtypes is None else frozenset(d.name for d in op.dtypes) for op in declared}
        if not isinstance(chosen["supported_ops"][0], CapabilityExport):
            exported_ops = frozenset()
    return ResolvedCapabilities(dtypes, ops, modules, origins, exported_ops, op_locations, module_locations)


def _name_locations(doc: MarkedDocument, key: str, entries: Iterable[Any]) -> dict[str, tuple[Location, str]]:
    """Where each inline op or module name was written, for errors that point at the exact entry."""
    return {
        entry.name: (doc.locate((*GLOBAL, key, i, "name")), f"{DOTTED}.{key}[{i}].name")
        for i, entry in enumerate(entries)
    }
