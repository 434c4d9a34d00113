"""When a cached folder (a build, a build venv, a test venv) was last used, for `crcr gc`.

A folder's own mtime only moves when an entry is added or removed in it, so a venv reused every day for a month
looks a month old. Whoever uses one marks it: a stamp file whose mtime is the last use.
"""

from __future__ import annotations

from pathlib import Path

STAMP = ".tributary-last-used"


def mark_used(folder: Path) -> None:
    """Record that `folder` is used now (its stamp is created or touched)."""
    (folder / STAMP).touch()


def last_used(folder: Path) -> float:
    """The time `folder` was last marked used, else its own mtime (made, or last changed, then), in epoch seconds."""
    try:
        return (folder / STAMP).stat(follow_symlinks=False).st_mtime
    except FileNotFoundError:
        return folder.stat(follow_symlinks=False).st_mtime
