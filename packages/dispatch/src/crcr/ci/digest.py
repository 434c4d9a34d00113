"""The sha256s that identify what a run used: a file (wheels, artifacts), read in 1 MiB blocks, or a tree of files
(a suite, a config folder) by relative names and bytes."""

from __future__ import annotations

import hashlib
from pathlib import Path


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def tree_sha256(root: Path, pattern: str = "*") -> str:
    """The files under `root` matching `pattern` (or `root` itself, a file), by relative name and bytes; a missing
    `root` is the digest of nothing."""
    digest = hashlib.sha256()
    files = [root] if root.is_file() else sorted(p for p in root.rglob(pattern) if p.is_file()) if root.is_dir() else []
    for path in files:
        if "__pycache__" not in path.parts:
            name = path.name if path == root else path.relative_to(root).as_posix()
            digest.update(name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()
