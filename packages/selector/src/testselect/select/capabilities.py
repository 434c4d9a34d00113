"""The device's capability export (`ringsim capabilities --format yaml`, or any file of that shape), read as data."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import yaml


class CapabilitiesError(Exception):
    """A capabilities file that is unreadable or not of the export's shape."""


@dataclass(frozen=True)
class Capabilities:
    """Dtypes the device computes in, and each aten overload it registers with its dtypes (empty: any)."""

    device: str
    dtypes: frozenset[str]
    aten_ops: dict[str, frozenset[str]]


def _names(items: object, where: str) -> frozenset[str]:
    if not isinstance(items, list):
        raise CapabilitiesError(f"{where}: expected a list")
    names = [item.get("name") if isinstance(item, dict) else item for item in items]
    if not all(isinstance(name, str) for name in names):
        raise CapabilitiesError(f"{where}: every entry is a name or {{name: ...}}")
    return frozenset(names)


def load_capabilities(path: Path) -> Capabilities:
    """Read `supported_dtypes` and `aten_ops` (what op evidence is checked against) from a YAML or JSON export."""
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise CapabilitiesError(f"{path}: cannot read capabilities ({exc})") from None
    if not isinstance(data, dict):
        raise CapabilitiesError(f"{path}: expected a mapping with supported_dtypes and aten_ops")
    dtypes = _names(data.get("supported_dtypes", []), f"{path}: supported_dtypes")
    ops: dict[str, frozenset[str]] = {}
    for i, entry in enumerate(data.get("aten_ops", [])):
        if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
            raise CapabilitiesError(f"{path}: aten_ops[{i}]: expected {{name, dtypes}}")
        ops[entry["name"]] = _names(entry.get("dtypes", []), f"{path}: aten_ops[{i}].dtypes")
    return Capabilities(str(data.get("device", "device")), dtypes, ops)
