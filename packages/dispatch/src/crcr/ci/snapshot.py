"""A commit of a working tree as it is now, so a developer's uncommitted work builds the same way a ref does.

The commit holds every tracked file as it is on disk and every untracked file git does not ignore (what `git add
--all` would stage), on top of HEAD; it is made with a scratch index, so the developer's own index, branch and
stash are untouched, and with a fixed author and date, so the same tree on the same HEAD is the same commit (and
its worktree and builds are reused). Nothing refers to it but the worktree made of it.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from pathlib import Path

from crcr.ci.worktrees import WorktreeError, resolve_ref

_IDENTITY = {
    "GIT_AUTHOR_NAME": "tributary",
    "GIT_AUTHOR_EMAIL": "tributary@localhost",
    "GIT_AUTHOR_DATE": "2000-01-01T00:00:00+00:00",
    "GIT_COMMITTER_NAME": "tributary",
    "GIT_COMMITTER_EMAIL": "tributary@localhost",
    "GIT_COMMITTER_DATE": "2000-01-01T00:00:00+00:00",
}


def _git(repo: Path, env: dict[str, str], *args: str) -> str:
    result = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, env=env, check=False)
    if result.returncode != 0:
        detail = (result.stderr.strip() or f"exit status {result.returncode}").splitlines()[-1]
        raise WorktreeError(f"cannot snapshot {repo}: git {args[0]}: {detail}")
    return result.stdout.strip()


def snapshot(repo: Path) -> str:
    """The sha of a commit holding `repo`'s working tree (tracked and untracked, not ignored) on top of HEAD."""
    head = resolve_ref(repo, "HEAD")
    with tempfile.TemporaryDirectory(prefix="tributary-snapshot-") as scratch:
        env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
        env.update(_IDENTITY, GIT_INDEX_FILE=str(Path(scratch) / "index"))
        _git(repo, env, "read-tree", head)
        _git(repo, env, "add", "--all")
        tree = _git(repo, env, "write-tree")
        if tree == _git(repo, env, "rev-parse", f"{head}^{{tree}}"):
            return head  # nothing uncommitted: HEAD itself
        return _git(repo, env, "commit-tree", tree, "-p", head, "-m", "working tree")
