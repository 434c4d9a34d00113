"""The core move: dump each interpreter's OpInfo/ModuleInfo databases (in that interpreter) and compare the dumps."""

from __future__ import annotations

import json
import os
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from testselect.upgrade import dump_core

DUMP_SCRIPT = Path(dump_core.__file__)
OP_FIELDS = {
    "name": str,
    "variant_test_name": str,
    "dtypes_cpu": list,
    "dtypes_cuda": list,
    "supports_autograd": bool,
    "supports_forward_ad": bool,
    "supports_out": bool,
    "decorators": int,
    "skips": int,
    "decorations": list,
}
MODULE_FIELDS = {"name": str, "dtypes": list, "module_cls": str, "decorators": int, "decorations": list}
# What a changed op field is, for the report: a dtype change adds or removes cases, the others change them.
KINDS = {
    "dtypes_cpu": "dtypes",
    "dtypes_cuda": "cuda dtypes",
    "supports_autograd": "flags",
    "supports_forward_ad": "flags",
    "supports_out": "flags",
    "decorators": "decorators",
    "skips": "decorators",
    "decorations": "decorators",
    "variant_test_name": "flags",
    "name": "flags",
}
# The fields whose change makes all of an op's existing cases different; decorations are compared per case (a
# decorator targets a class, test, device and dtypes), and a case on the device runs CPU's dtypes, not CUDA's.
CASE_FIELDS = frozenset(KINDS) - {"dtypes_cpu", "dtypes_cuda", "decorators", "skips", "decorations"} | {
    "samples",
    "samples_hash",
    "samples_error",
    "sample_dtype",
}


class UpgradeError(Exception):
    """Bad input to `testselect upgrade`: one `error:` line naming the interpreter, file or field."""


@dataclass(frozen=True)
class CoreDump:
    """One interpreter's databases: ops by full test name, the named op lists, the modules by full test name."""

    torch: str
    ops: dict[str, dict[str, Any]]
    lists: dict[str, list[str]]
    modules: dict[str, dict[str, Any]]
    seconds: float = 0.0  # wall time of the dump subprocess


@dataclass(frozen=True)
class CoreDelta:
    """Entries added and removed, and per changed entry the fields that differ (old, new)."""

    added: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    changed: dict[str, dict[str, list[Any]]] = field(default_factory=dict)


def run_dump(python: Path, ops: list[str] | None = None, max_samples: int = 8, timeout: float = 900) -> CoreDump:
    """Run the dump script by path in `python` and read its JSON; UpgradeError with its one line on failure."""
    command = [str(python), str(DUMP_SCRIPT), f"--max-samples={max_samples}"]
    if ops:
        command.append("--ops=" + ",".join(ops))
    started = time.monotonic()
    try:
        env = os.environ | {"PYTHONHASHSEED": "0"}  # sample functions iterate sets of strings: fix their order
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False, env=env)
    except OSError as exc:
        raise UpgradeError(f"{python}: cannot run it as a Python interpreter ({exc.strerror or exc})") from None
    except subprocess.TimeoutExpired:
        raise UpgradeError(f"{python}: the op_db dump took longer than {timeout:.0f} s") from None
    if done.returncode != 0:
        said = [line for line in done.stderr.splitlines() if line.startswith("error:")]
        last = said[-1].removeprefix("error: ") if said else (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise UpgradeError(f"{python}: the op_db dump failed (exit {done.returncode}): {last}")
    return parse_dump(done.stdout, str(python), time.monotonic() - started)


def parse_dump(text: str, where: str, seconds: float = 0.0) -> CoreDump:
    """Check a dump's JSON field by field: a dump that prints anything else is one error naming the field."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UpgradeError(f"{where}: the dump is not JSON (line {exc.lineno} column {exc.colno}: {exc.msg})") from None
    if not isinstance(data, dict) or data.get("format") != dump_core.FORMAT:
        raise UpgradeError(f"{where}: the dump is not a {dump_core.FORMAT} object (field format)")
    if not isinstance(data.get("torch"), str):
        raise UpgradeError(f"{where}: the dump's field torch: expected a version string")
    ops = _entries(data, "ops", OP_FIELDS, where)
    modules = _entries(data, "modules", MODULE_FIELDS, where)
    lists = data.get("lists")
    if not isinstance(lists, dict) or not all(
        isinstance(v, list) and all(isinstance(n, str) and n in ops for n in v) for v in lists.values()
    ):
        raise UpgradeError(f"{where}: the dump's field lists: expected list name -> names of dumped ops")
    return CoreDump(data["torch"], ops, lists, modules, seconds)


def _entries(data: dict, key: str, fields: dict[str, type], where: str) -> dict[str, dict[str, Any]]:
    entries = data.get(key)
    if not isinstance(entries, dict):
        raise UpgradeError(f"{where}: the dump's field {key}: expected an object")
    for name, entry in entries.items():
        for field_name, kind in fields.items():
            value = entry.get(field_name) if isinstance(entry, dict) else None
            bad = f"{where}: the dump's field {key}.{name}.{field_name}: expected"
            if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
                raise UpgradeError(f"{bad} {kind.__name__}")
            item = dict if field_name == "decorations" else str
            if kind is list and not all(isinstance(v, item) for v in value):
                raise UpgradeError(f"{bad} a list of {item.__name__}")
    return entries


def compare(old: dict[str, dict[str, Any]], new: dict[str, dict[str, Any]]) -> CoreDelta:
    """Entries by full name: added, removed, and changed with each differing field as [old, new]."""
    changed = {}
    for name in sorted(set(old) & set(new)):
        fields = sorted(set(old[name]) | set(new[name]))
        differ = {f: [old[name].get(f), new[name].get(f)] for f in fields if old[name].get(f) != new[name].get(f)}
        if differ:
            changed[name] = differ
    return CoreDelta(sorted(set(new) - set(old)), sorted(set(old) - set(new)), changed)


def change_kinds(delta: CoreDelta) -> dict[str, int]:
    """How many changed entries differ in each kind of field (dtypes, samples, flags, decorators)."""
    kinds: dict[str, int] = {}
    for fields in delta.changed.values():
        for kind in sorted({KINDS.get(f, "samples") for f in fields}):
            kinds[kind] = kinds.get(kind, 0) + 1
    return kinds


def full_name(op: dict[str, Any]) -> str:
    """An OpInfo's full name as configs name it (`div.floor_rounding`), not as test names (`div_floor_rounding`)."""
    return f"{op['name']}.{op['variant_test_name']}" if op["variant_test_name"] else op["name"]


def release(version: str) -> str:
    """A torch version without its local label (`2.14.1+cu130` -> `2.14.1`), as `only.torch` specifiers compare it."""
    return version.split("+", 1)[0]
