"""Config changes as unified diffs: the reviewable form of every re-bucketing (enable-op, refine, upgrade)."""

from __future__ import annotations

import difflib
from collections.abc import Mapping


def unified(before: Mapping[str, str], after: Mapping[str, str]) -> str:
    """A `diff -u`-style patch turning the `before` configs into the `after` ones (name -> YAML text), by name.

    A name only in `after` is a new file (`--- /dev/null`); one only in `before` is deleted.
    """
    chunks = []
    for name in sorted(set(before) | set(after)):
        old, new = before.get(name), after.get(name)
        if old == new:
            continue
        chunks.extend(
            difflib.unified_diff(
                (old or "").splitlines(keepends=True),
                (new or "").splitlines(keepends=True),
                fromfile=f"a/{name}" if old is not None else "/dev/null",
                tofile=f"b/{name}" if new is not None else "/dev/null",
            )
        )
    return "".join(chunks)


def changed_lines(patch: str) -> tuple[int, int]:
    """(lines added, lines removed) of a unified diff, headers excluded."""
    added = sum(1 for line in patch.splitlines() if line.startswith("+") and not line.startswith("+++"))
    removed = sum(1 for line in patch.splitlines() if line.startswith("-") and not line.startswith("---"))
    return added, removed
