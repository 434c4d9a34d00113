"""Which downstream repositories the relay knows and at what level (L1..L4), as in pytorch/pytorch's allowlist.

Levels matter here in two places: every listed repo (L1+) is dispatched to, and only L2+ callbacks are stored.
The file's shape is upstream's `.github/allowlist.yml`: keys `L1`..`L4`, each a list of `owner/repo`, a mapping
`owner/repo: [oncalls]`, or (L3) a mapping `device: {owner/repo: [oncalls]}`. A repo listed at several levels has
the highest.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

LEVELS = {"L1": 1, "L2": 2, "L3": 3, "L4": 4}


class AllowlistError(Exception):
    """An allowlist that cannot be read: the message names the file and the entry."""


def _is_repo(name: Any) -> bool:
    return isinstance(name, str) and name.count("/") == 1 and all(name.split("/"))


def _repos(entry: Any, where: str) -> list[str]:
    """The repos one level lists, in any of the shapes upstream uses."""
    if entry is None:
        return []
    if isinstance(entry, list):
        names = entry
    elif isinstance(entry, Mapping):
        names = []
        for key, value in entry.items():
            names += [key] if _is_repo(key) else _repos(value, f"{where}.{key}")
    else:
        raise AllowlistError(f"{where}: expected a list or mapping of owner/repo, got {type(entry).__name__}")
    for name in names:
        if not _is_repo(name):
            raise AllowlistError(f"{where}: {name!r} is not owner/repo")
    return list(names)


@dataclass(frozen=True)
class Allowlist:
    """Repo (lower-cased, as GitHub names are case-insensitive) -> level 1..4."""

    levels: Mapping[str, int]

    @classmethod
    def of(cls, levels: Mapping[str, int]) -> Allowlist:
        """From `{"owner/repo": level}`, the form tests and the Python API pass."""
        for repo, level in levels.items():
            if not _is_repo(repo) or level not in LEVELS.values():
                raise AllowlistError(f"{repo!r}: {level!r} is not a level 1..4 for an owner/repo")
        return cls({repo.lower(): level for repo, level in levels.items()})

    @classmethod
    def parse(cls, data: Any, where: str = "allowlist") -> Allowlist:
        """From the YAML document's data."""
        if not isinstance(data, Mapping):
            raise AllowlistError(f"{where}: expected a mapping with keys L1..L4")
        levels: dict[str, int] = {}
        for key, entry in data.items():
            if key not in LEVELS:
                raise AllowlistError(f"{where}: unknown key {key!r} (expected L1..L4)")
            for repo in _repos(entry, f"{where}: {key}"):
                levels[repo.lower()] = max(levels.get(repo.lower(), 0), LEVELS[key])
        return cls(levels)

    @classmethod
    def load(cls, path: Path) -> Allowlist:
        """From a YAML file."""
        try:
            data = yaml.safe_load(path.read_text())
        except (OSError, yaml.YAMLError) as exc:
            raise AllowlistError(f"{path}: {exc}".splitlines()[0]) from None
        return cls.parse(data, str(path))

    def level(self, repo: str) -> int:
        """The repo's level, 0 when it is not listed."""
        return self.levels.get(repo.lower(), 0)

    def downstream(self) -> list[str]:
        """Every listed repo, sorted: each gets the dispatches."""
        return sorted(self.levels)
