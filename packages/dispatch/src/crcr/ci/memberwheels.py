"""One workspace member's wheel, reused across builds: a commit that changes only one package rebuilds only it.

A member's key is git's tree of its folder at the commit built and its build requirements. Every build's manifest
records each wheel's key, so a wheel with the same key in any recorded build (still holding its recorded hash) is
the same wheel, linked into the new build instead of being built again; a wheel that is not pure Python
(`*-none-any.whl`) may have linked against torch, so it is reused only from a build against the same torch wheel.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

from .digest import file_sha256


def key(worktree: Path, sha: str, directory: Path, build_requires: Sequence[str]) -> str:
    """What decides a member's wheel; "" when git cannot name its tree (then it is always built)."""
    relative = directory.relative_to(worktree).as_posix()
    spec = f"{sha}^{{tree}}" if relative == "." else f"{sha}:{relative}"
    done = subprocess.run(["git", "-C", str(worktree), "rev-parse", spec], capture_output=True, text=True)
    if done.returncode != 0:
        return ""
    parts = [done.stdout.strip(), sorted(build_requires)]
    return hashlib.sha256(json.dumps(parts).encode()).hexdigest()


def recorded(builds: Path, member_key: str, torch_sha: str) -> tuple[Path, str] | None:
    """A wheel some recorded build made with this key, still intact and, unless pure Python, built against the torch
    wheel `torch_sha`, with its sha256; None when there is none."""
    if not member_key:
        return None
    for manifest in sorted(builds.glob("*/manifest.json")):
        try:
            data = json.loads(manifest.read_text())
        except (OSError, ValueError):
            continue
        if not isinstance(data, dict) or not data.get("ok"):
            continue
        same_torch = isinstance(data.get("torch"), dict) and data["torch"].get("sha256") == torch_sha
        for entry in (data.get("wheels") or {}).values():
            if isinstance(entry, dict) and entry.get("key") == member_key:
                path = manifest.parent / str(entry.get("file", ""))
                if not (same_torch or path.name.endswith("-none-any.whl")):
                    continue
                if path.is_file() and file_sha256(path) == entry.get("sha256"):
                    return path, entry["sha256"]
    return None


def link(wheel: Path, folder: Path) -> Path:
    """The wheel in `folder`: a hard link (one copy on disk), a copy across filesystems."""
    target = folder / wheel.name
    try:
        os.link(wheel, target)
    except OSError:
        shutil.copyfile(wheel, target)
    return target
