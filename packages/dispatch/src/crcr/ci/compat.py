"""Which torch versions a backend checkout declares it works with: the intersection of its packages' torch
requirements. A core outside it is an incompatible combination, reported as such, never built."""

from __future__ import annotations

import tomllib
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import SpecifierSet
from packaging.version import InvalidVersion, Version


def torch_range(checkout: Path) -> SpecifierSet:
    """Every workspace member's `torch` requirement, intersected (empty: any torch)."""
    found = SpecifierSet()
    for pyproject in sorted(checkout.glob("packages/*/pyproject.toml")):
        try:
            project = tomllib.loads(pyproject.read_text(encoding="utf-8")).get("project", {})
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
            continue  # the build reports a broken package; this only reads declared ranges
        for text in project.get("dependencies", []):
            try:
                requirement = Requirement(text)
            except InvalidRequirement:
                continue
            if requirement.name == "torch":
                found &= requirement.specifier
    return found


def admits(checkout: Path, torch_version: str) -> tuple[bool, str]:
    """Whether the checkout's declared range holds this torch version, and the range as text."""
    declared = torch_range(checkout)
    try:
        version = Version(torch_version)
    except InvalidVersion:
        return True, str(declared)
    return declared.contains(Version(version.public), prereleases=True), str(declared) or "any"
