"""Backend candidates: git refs of this repository, each checked out once as a detached `git worktree`.

A backend ref is built from its own worktree under `cache/worktrees/<sha12>`, never from the working tree, so a
run never sees (or disturbs) what a developer has uncommitted. A worktree is reused while it is intact (registered
with the repository, at its commit, with no tracked file changed); otherwise it is made again.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from crcr.ci.usage import mark_used

_GIT_ENV_DROP = ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_COMMON_DIR", "GIT_OBJECT_DIRECTORY")


class WorktreeError(Exception):
    """A ref did not resolve or a worktree could not be made; the message is one line."""


def _git(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in _GIT_ENV_DROP}
    try:
        return subprocess.run(["git", "-C", str(cwd), *args], capture_output=True, text=True, check=False, env=env)
    except FileNotFoundError as exc:
        raise WorktreeError("git is not installed") from exc


def _last_line(result: subprocess.CompletedProcess[str]) -> str:
    lines = [line.strip() for line in (result.stderr + result.stdout).splitlines() if line.strip()]
    return lines[-1] if lines else f"exit status {result.returncode}"


def resolve_ref(repo: Path, ref: str) -> str:
    """The full commit sha a ref (branch, tag, sha, `HEAD~2`) names in `repo`."""
    if not ref or ref.startswith("-"):
        raise WorktreeError(f"not a git ref: {ref!r}")
    if _git(repo, "rev-parse", "--git-dir").returncode != 0:
        raise WorktreeError(f"{repo} is not a git repository")
    result = _git(repo, "rev-parse", "--verify", "--quiet", "--end-of-options", f"{ref}^{{commit}}")
    if result.returncode == 0:
        return result.stdout.strip()
    hint = ""
    if _git(repo, "rev-parse", "--is-shallow-repository").stdout.strip() == "true":
        hint = " (this is a shallow clone: `git fetch --unshallow --tags` brings the history)"
    raise WorktreeError(f"git ref {ref!r} does not resolve to a commit in {repo}{hint}")


def _toplevel(path: Path) -> Path | None:
    result = _git(path, "rev-parse", "--show-toplevel")
    return Path(result.stdout.strip()).resolve() if result.returncode == 0 else None


def _common_dir(path: Path) -> Path | None:
    result = _git(path, "rev-parse", "--path-format=absolute", "--git-common-dir")
    return Path(result.stdout.strip()).resolve() if result.returncode == 0 else None


def _intact(repo: Path, path: Path, sha: str) -> bool:
    """Registered with `repo`, rooted at `path`, at `sha`, with no tracked file changed."""
    if not (path / ".git").is_file() or _toplevel(path) != path.resolve():
        return False
    if _common_dir(path) != _common_dir(repo):
        return False
    if _git(path, "rev-parse", "HEAD").stdout.strip() != sha:
        return False
    status = _git(path, "status", "--porcelain", "--untracked-files=no")
    return status.returncode == 0 and not status.stdout.strip()


@contextmanager
def _locked(folder: Path) -> Iterator[None]:
    """One process at a time adds or removes worktrees in this cache (parallel legs may share a ref)."""
    folder.mkdir(parents=True, exist_ok=True)
    with (folder / ".lock").open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _remove(repo: Path, path: Path, root: Path) -> None:
    """Remove one of our worktrees; refuses anything outside `cache/worktrees` or the repository's own tree."""
    resolved = path.resolve()
    if resolved.parent != root.resolve() or resolved == _toplevel(repo):
        raise WorktreeError(f"refusing to remove {path}: not a worktree of this cache")
    _git(repo, "worktree", "remove", "--force", str(path))
    if path.exists():
        shutil.rmtree(path)
    _git(repo, "worktree", "prune")


def checkout(repo: Path, sha: str, cache: Path, folder: str = "worktrees") -> Path:
    """A detached worktree of `sha` at `cache/FOLDER/<sha12>`, reused when present and intact."""
    full = resolve_ref(repo, sha)
    root = cache / folder
    path = root / full[:12]
    with _locked(root):
        if _intact(repo, path, full):
            mark_used(path)
            return path
        if path.exists() or path.is_symlink():
            _remove(repo, path, root)
        _git(repo, "worktree", "prune")
        result = _git(repo, "worktree", "add", "--detach", "--force", str(path), full)
        if result.returncode != 0:
            raise WorktreeError(f"could not check out {full[:12]} into {path}: {_last_line(result)}")
        if not _intact(repo, path, full):
            raise WorktreeError(f"worktree {path} is not at {full[:12]} after checkout")
        mark_used(path)
    return path


def prune(repo: Path, cache: Path, keep: Iterable[str] | None = None) -> list[Path]:
    """Forget worktrees whose folders are gone; with `keep` (shas), also remove our worktrees of any other commit.

    Returns the worktree folders removed. Only folders under `cache/worktrees` are ever touched.
    """
    root = cache / "worktrees"
    removed: list[Path] = []
    with _locked(root):
        _git(repo, "worktree", "prune")
        if keep is None:
            return removed
        wanted = {sha[:12] for sha in keep}
        for path in sorted(root.iterdir()):
            if path.name.startswith(".") or path.name in wanted or not path.is_dir():
                continue
            _remove(repo, path, root)
            removed.append(path)
    return removed
