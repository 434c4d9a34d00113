"""The backend's capabilities (dtypes, ops with their dtypes, modules), declared once or taken from its own export."""

from __future__ import annotations

import importlib.metadata
import shlex
import shutil
import subprocess
import sys
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
    unrun_commands: tuple[str, ...] = ()

    def op_dtypes(self, op: str) -> frozenset[str] | None:
        """Dtypes declared for `op` (its own list, else supported_dtypes); None when nothing is declared."""
        own = self.ops.get(op) if self.ops is not None else None
        return own if own is not None else self.dtypes


# Runs a console script through the running interpreter: sys.argv[1] is its name, the rest its arguments.
_RUN_ENTRY_POINT = (
    "import importlib.metadata as m, sys; (ep,) = m.entry_points(group='console_scripts', name=sys.argv[1]); "
    "sys.argv = sys.argv[1:]; sys.exit(ep.load()())"
)


def export_argv(command: str) -> list[str]:
    """The argv that runs `command`: as written when its program is on PATH, else the console script of that name
    installed beside the running interpreter, run by it (a backend installed in this environment is found even when
    the environment's scripts folder is not on PATH)."""
    argv = shlex.split(command)
    if not argv:
        raise ValueError("empty command")
    if shutil.which(argv[0]) is not None:
        return argv
    if not any(ep.name == argv[0] for ep in importlib.metadata.entry_points(group="console_scripts")):
        raise ValueError(
            f"{argv[0]!r} is not on PATH and no console script of that name is installed for {sys.executable}"
        )
    return [sys.executable, "-c", _RUN_ENTRY_POINT, *argv]


def _read_export(source: CapabilitySource, config_dir: Path, where: Location) -> MarkedDocument:
    if source.file is not None:
        path = Path(source.file)
        path = path if path.is_absolute() else config_dir / path
        try:
            return parse_yaml(path.read_text(encoding="utf-8"), str(path))
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError([Problem(where, f"{DOTTED}.capabilities.file", f"cannot read {path}: {exc}")]) from None
    command = source.command or ""
    try:
        argv = export_argv(command)
        done = subprocess.run(argv, capture_output=True, timeout=EXPORT_TIMEOUT_S, cwd=config_dir)
    except (OSError, ValueError, subprocess.TimeoutExpired) as exc:
        raise ConfigError([Problem(where, f"{DOTTED}.capabilities.command", f"cannot run: {exc}")]) from None
    stdout, stderr = (stream.decode("utf-8", errors="replace") for stream in (done.stdout, done.stderr))
    if done.returncode != 0:
        first = (stderr.strip().splitlines() or ["no output"])[-1]
        message = f"exited with {done.returncode}: {first}"
        raise ConfigError([Problem(where, f"{DOTTED}.capabilities.command", message)])
    return parse_yaml(stdout, f"<{command}>")


def _validate_export(doc: MarkedDocument) -> Capabilities:
    try:
        return CapabilityExport.model_validate(doc.data)
    except ValidationError as exc:
        problems = [
            Problem(doc.locate(tuple(e["loc"])), format_path(tuple(e["loc"])), e["msg"].removeprefix("Value error, "))
            for e in exc.errors()
        ]
        raise ConfigError(problems) from None


def resolve_capabilities(
    layers: Iterable[tuple[GlobalConfig, MarkedDocument, Path]], *, run_commands: bool = True
) -> ResolvedCapabilities:
    """Apply `global` sections in order; within one, keys written inline override the export.

    With `run_commands` false an export command is not run (checking a config must not execute it unasked): only the
    inline keys count, and the command is listed in `unrun_commands`."""
    chosen: dict[str, tuple[Capabilities, Location]] = {}
    op_locations: dict[str, tuple[Location, str]] = {}
    module_locations: dict[str, tuple[Location, str]] = {}
    exported_ops: frozenset[str] = frozenset()
    unrun: list[str] = []
    for config, doc, config_dir in layers:
        source = config.capabilities
        if source is not None and source.command is not None and not run_commands:
            unrun.append(source.command)
        elif source is not None:
            where = doc.locate((*GLOBAL, "capabilities"))
            export = _validate_export(_read_export(source, config_dir, where))
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
    return ResolvedCapabilities(
        dtypes, ops, modules, origins, exported_ops, op_locations, module_locations, tuple(unrun)
    )


def _name_locations(doc: MarkedDocument, key: str, entries: Iterable[Any]) -> dict[str, tuple[Location, str]]:
    """Where each inline op or module name was written, for errors that point at the exact entry."""
    return {
        entry.name: (doc.locate((*GLOBAL, key, i, "name")), f"{DOTTED}.{key}[{i}].name")
        for i, entry in enumerate(entries)
    }
