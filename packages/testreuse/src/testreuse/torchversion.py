"""Which torch is running, and whether a rule's `only.torch` admits it: plain functions, torch never imported."""

from __future__ import annotations

import importlib.metadata

from packaging.specifiers import SpecifierSet
from packaging.version import InvalidVersion, Version


def installed_torch_version() -> str:
    """The running interpreter's torch version, from its distribution metadata (`2.13.0+cpu`), as pip reports it."""
    try:
        return importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:  # a source build on sys.path without metadata
        import torch

        return str(torch.__version__)


def torch_in_scope(specifier: str | None, version: str) -> bool:
    """Whether torch `version` satisfies a rule's `only.torch`. Its public version is compared (`2.13.0+cpu` is
    2.13.0); pre-releases and nightlies by PEP 440 order (`2.15.0.dev20260101` satisfies `>=2.14`, a 2.14.0
    pre-release does not). No specifier admits every version; a version that is not PEP 440 satisfies none."""
    if specifier is None:
        return True
    try:
        public = Version(version).public
    except InvalidVersion:
        return False
    return SpecifierSet(specifier).contains(public, prereleases=True)
