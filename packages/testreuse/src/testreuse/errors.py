"""Errors that name the config file, line, column and field: the only way bad input is reported."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, order=True)
class Location:
    """Where a value sits in a config file (1-based line and column)."""

    file: str
    line: int = 0
    column: int = 0

    def __str__(self) -> str:
        if not self.line:
            return self.file
        return f"{self.file}:{self.line}:{self.column}"


@dataclass(frozen=True)
class Problem:
    """One finding: `file:line:col: path: message`."""

    location: Location
    path: str
    message: str

    def __str__(self) -> str:
        prefix = f"{self.location}: "
        return f"{prefix}{self.path}: {self.message}" if self.path else f"{prefix}{self.message}"


class ConfigError(Exception):
    """One or more problems in the configs; each prints as one line."""

    def __init__(self, problems: list[Problem]) -> None:
        self.problems = sorted(problems, key=lambda p: (p.location, p.path, p.message))
        super().__init__("\n".join(str(p) for p in self.problems))


def format_path(loc: tuple[str | int, ...]) -> str:
    """`('a', 0, 'b')` -> `a[0].b`, the way the error lines spell field paths."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out
