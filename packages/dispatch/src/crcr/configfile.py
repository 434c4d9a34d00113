"""Typed reads of crcr's YAML files (`configs/ci.yaml`, the device profiles, `configs/crcr.yaml`), with errors that
name the file, the line and the dotted field: `configs/ci.yaml:7: shards.count: must be at least 1`.

A duplicate key is an error citing both lines (YAML itself keeps the last one silently), and a field error gets
the line of the deepest node of its path that exists, so a mistyped nested key points at its parent mapping.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar, TypeVar

import yaml

T = TypeVar("T")
_FIELD = re.compile(r"([^.\[\]]+)|\[(\d+)\]")


class ConfigError(Exception):
    """A config that cannot be used: one line naming the file (and line) and the field."""


class _UniqueKeyLoader(yaml.SafeLoader):
    """SafeLoader that refuses a key repeated in one mapping, and reads an unquoted date as the text it is (YAML's
    own timestamps make `2026-02-30` an exception, and no field of ours wants a date object)."""

    yaml_implicit_resolvers: ClassVar[dict[Any, list[tuple[str, Any]]]] = {
        first: [(tag, pattern) for tag, pattern in resolvers if tag != "tag:yaml.org,2002:timestamp"]
        for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
    }

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)  # type: ignore[no-untyped-call]
            line = key_node.start_mark.line + 1
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key {key!r} (first at line {seen[key]})", key_node.start_mark
                )
            seen[key] = line
        return super().construct_mapping(node, deep=deep)


def read_mapping(path: Path) -> dict[str, Any]:
    """The YAML mapping in `path`; ConfigError for an unreadable file, bad YAML, a duplicate key or a non-mapping."""
    try:
        data = yaml.load(path.read_text(encoding="utf-8"), Loader=_UniqueKeyLoader)
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not UTF-8 text") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f":{mark.line + 1}:{mark.column + 1}" if mark is not None else ""
        raise ConfigError(f"{path}{where}: not YAML: {getattr(exc, 'problem', None) or exc}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: top level: expected a mapping")
    return data


class Fields:
    """Typed reads of one mapping, each error naming the file and the dotted field."""

    def __init__(self, path: Path, data: dict[str, Any], known: set[str], prefix: str = "") -> None:
        self.path, self.data, self.prefix = path, data, prefix
        unknown = sorted(set(map(str, data)) - known)
        if unknown:
            raise self.fail(unknown[0], f"unknown field (known: {', '.join(sorted(known))})")

    def fail(self, name: str, why: str) -> ConfigError:
        """The error for field `name` of this mapping."""
        return ConfigError(f"{self.path}: {self.prefix}{name}: {why}")

    def text(self, name: str, default: str | None = None) -> str:
        value = self.data.get(name, default)
        if not isinstance(value, str) or not value.strip():
            raise self.fail(name, "expected a non-empty string" if name in self.data else "required")
        return value

    def texts(self, name: str, default: tuple[str, ...] = ()) -> tuple[str, ...]:
        value = self.data.get(name, list(default))
        if isinstance(value, str) or not isinstance(value, list):
            raise self.fail(name, "expected a list of strings")
        for index, item in enumerate(value):
            if not isinstance(item, str | int | float) or isinstance(item, bool) or not str(item).strip():
                raise self.fail(f"{name}[{index}]", "expected a non-empty string")
        return tuple(str(v) for v in value)

    def number(self, name: str, default: float, *, integer: bool = False, minimum: float = 1) -> float:
        value = self.data.get(name, default)
        if isinstance(value, bool) or not isinstance(value, int | float) or (integer and not isinstance(value, int)):
            raise self.fail(name, f"expected {'an integer' if integer else 'a number'}")
        if value < minimum:
            raise self.fail(name, f"must be at least {minimum:g}")
        return value

    def mapping(self, name: str) -> dict[str, Any]:
        value = self.data.get(name, {})
        if not isinstance(value, dict):
            raise self.fail(name, "expected a mapping")
        return value


def located(path: Path, load: Callable[[], T]) -> T:
    """`load()`, its `file: field: why` errors turned into `file:LINE: field: why`."""
    try:
        return load()
    except ConfigError as exc:
        raise ConfigError(_with_line(path, str(exc))) from None


def _with_line(path: Path, message: str) -> str:
    """`file: a.b[1].c: why` -> `file:LINE: a.b[1].c: why`, LINE that of the deepest node of the path that exists."""
    prefix = f"{path}: "
    if not message.startswith(prefix):
        return message  # already located (a YAML syntax error) or about another file (a device profile)
    field = message[len(prefix) :].partition(": ")[0]
    try:
        node = yaml.compose(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return message
    line = node.start_mark.line + 1 if node is not None else 1
    for key, index in _FIELD.findall(field):
        if isinstance(node, yaml.MappingNode) and key:
            found = [(k, v) for k, v in node.value if isinstance(k, yaml.ScalarNode) and k.value == key]
            if not found:
                break
            line, node = found[-1][0].start_mark.line + 1, found[-1][1]
        elif isinstance(node, yaml.SequenceNode) and index and int(index) < len(node.value):
            node = node.value[int(index)]
            line = node.start_mark.line + 1
        else:
            break
    return f"{path}:{line}: {message[len(prefix) :]}"
