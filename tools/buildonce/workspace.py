"""What the workspace holds: its member packages, read from the pyproject files."""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

_NAME = re.compile(r"^[A-Za-z0-9_.-]+")


@dataclass(frozen=True)
class Member:
    """One workspace package, as the build needs to know it."""

    directory: Path
    distribution: str
    version: str
    dependencies: tuple[str, ...]
    native: bool

    @property
    def short_name(self) -> str:
        """The folder name under packages/, e.g. 'simulator'."""
        return self.directory.name

    @property
    def wheel_stem(self) -> str:
        """The normalised file-name prefix of this package's wheels."""
        return self.distribution.replace("-", "_")


def _requirement_name(requirement: str) -> str:
    match = _NAME.match(requirement.strip())
    if match is None:
        raise ValueError(f"unparsable requirement {requirement!r}")
    return match.group(0).lower()


def read_members(root: Path) -> list[Member]:
    """Members in the order the root pyproject lists them."""
    config = tomllib.loads((root / "pyproject.toml").read_text())
    members = []
    for rel in config["tool"]["uv"]["workspace"]["members"]:
        directory = root / rel
        project_file = tomllib.loads((directory / "pyproject.toml").read_text())
        project = project_file["project"]
        build_requires = project_file.get("build-system", {}).get("requires", [])
        members.append(
            Member(
                directory=directory,
                distribution=project["name"],
                version=project["version"],
                dependencies=tuple(_requirement_name(r) for r in project.get("dependencies", [])),
                # A package whose build needs torch links against it and is built without isolation.
                native=any(_requirement_name(r) == "torch" for r in build_requires),
            )
        )
    return members


def workspace_closure(members: list[Member], distribution: str) -> list[Member]:
    """The member named and every workspace member it depends on, transitively."""
    by_name = {m.distribution: m for m in members}
    seen: dict[str, Member] = {}
    pending = [distribution]
    while pending:
        name = pending.pop()
        if name in seen or name not in by_name:
            continue
        seen[name] = by_name[name]
        pending.extend(by_name[name].dependencies)
    return [m for m in members if m.distribution in seen]
