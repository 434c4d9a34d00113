"""The typed records one parsed test file yields: what the store keeps and the queries read."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class TestRecord:
    """One test method of a TestCase-like class, by its generic (not device-instantiated) name."""

    node_id: str  # "<path under test/>::<Class>::<method>"
    file: str
    class_name: str
    name: str
    lineno: int
    end_lineno: int
    content_hash: str  # sha256 of the method's source, decorators included
    summary: str
    docstring: str
    decorators: list[str]
    params: dict[str, Any]  # ops, modules, dtypes, dtypes_if, parametrize, restrictions
    features: list[str]
    calls: list[str]


@dataclass(frozen=True)
class ClassRecord:
    """A TestCase-like class; `instantiations` are the module-level calls that generate its concrete classes."""

    file: str
    name: str
    lineno: int
    bases: list[str]
    device_generic: bool
    instantiations: list[dict[str, Any]] = field(default_factory=list)


@dataclass(frozen=True)
class FileRecord:
    path: str
    classes: list[ClassRecord]
    tests: list[TestRecord]


class ParseError(Exception):
    """A test file the indexer cannot read: reported as `file:line: message` and skipped."""

    def __init__(self, path: str, line: int, message: str) -> None:
        super().__init__(f"{path}:{line}: {message}")
        self.path = path
        self.line = line
