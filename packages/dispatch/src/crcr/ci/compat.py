"""Which torch versions a backend checkout declares it works with: the intersection of its packages' torch
requirements. A core outside it is an incompatible combination, reported as such, never built."""

from __future__ import annotations

import subprocess
import tomllib
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import SpecifierSet
from packaging.version import InvalidVersion, Version


def torch_range(checkout: Path, kind: str = "workspace") -> SpecifierSet:
    """Every workspace member's `torch` requirement, intersected, or the one package's (empty: any torch; a
    setup.py says nothing before it runs)."""
    texts = []
    pattern = "packages/*/pyproject.toml" if kind == "workspace" else "pyproject.toml"
    for pyproject in sorted(checkout.glob(pattern)):
        try:
            texts.append(pyproject.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError):
            continue  # the build reports a broken package; this only reads declared ranges
    return _intersection(texts)


def torch_range_at(repo: Path, sha: str, kind: str = "workspace") -> SpecifierSet:
    """`torch_range` of a commit read from git's objects, with no checkout (a dry run)."""
    if kind != "workspace":
        return _intersection([_git(repo, "show", f"{sha}:pyproject.toml")])
    listed = _git(repo, "ls-tree", "--name-only", f"{sha}:packages")
    texts = [_git(repo, "show", f"{sha}:packages/{name}/pyproject.toml") for name in listed.splitlines() if name]
    return _intersection(texts)


def _git(repo: Path, *args: str) -> str:
    result = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=False)
    return result.stdout if result.returncode == 0 else ""


def _intersection(pyprojects: list[str]) -> SpecifierSet:
    found = SpecifierSet()
    for text in pyprojects:
        try:
            project = tomllib.loads(text).get("project", {})
        except tomllib.TOMLDecodeError:
            continue
        for dependency in project.get("dependencies", []):
            try:
                requirement = Requirement(dependency)
            except InvalidRequirement:
                continue
            if requirement.name == "torch":
                found &= requirement.specifier
    return found


def admits(checkout: Path, torch_version: str, kind: str = "workspace") -> tuple[bool, str]:
    """Whether the checkout's declared range holds this torch version, and the range as text."""
    return holds(torch_range(checkout, kind), torch_version)


def holds(declared: SpecifierSet, torch_version: str) -> tuple[bool, str]:
    """Whether a declared range holds this torch version (its public part), and the range as text."""
    try:
        version = Version(torch_version)
    except InvalidVersion:
        return True, str(declared)
    return declared.contains(Version(version.public), prereleases=True), str(declared) or "any"
