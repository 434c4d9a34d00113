"""Backend refs check out as detached worktrees under the cache, against a real temporary git repository."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from crcr.ci.worktrees import WorktreeError, checkout, prune, resolve_ref


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout.strip()


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    git(repo, "config", "user.email", "ci@example.invalid")
    git(repo, "config", "user.name", "ci")
    (repo / "a.txt").write_text("one\n")
    git(repo, "add", "a.txt")
    git(repo, "commit", "-q", "-m", "one")
    git(repo, "tag", "v1")
    (repo / "a.txt").write_text("two\n")
    git(repo, "commit", "-q", "-am", "two")
    return repo


def test_resolve_ref_gives_full_sha(repo: Path) -> None:
    head = git(repo, "rev-parse", "HEAD")
    assert resolve_ref(repo, "HEAD") == head
    assert resolve_ref(repo, "main") == head
    assert resolve_ref(repo, head[:7]) == head
    assert resolve_ref(repo, "v1") == git(repo, "rev-parse", "v1^{commit}")
    assert resolve_ref(repo, "HEAD~1") == resolve_ref(repo, "v1")


def test_unknown_ref_names_it(repo: Path) -> None:
    with pytest.raises(WorktreeError, match=r"'v9\.9' does not resolve"):
        resolve_ref(repo, "v9.9")
    with pytest.raises(WorktreeError, match="not a git ref"):
        resolve_ref(repo, "--all")


def test_not_a_repository(tmp_path: Path) -> None:
    with pytest.raises(WorktreeError, match="not a git repository"):
        resolve_ref(tmp_path, "HEAD")


def test_shallow_clone_says_so(repo: Path, tmp_path: Path) -> None:
    shallow = tmp_path / "shallow"
    subprocess.run(["git", "clone", "-q", "--depth", "1", f"file://{repo}", str(shallow)], check=True)
    with pytest.raises(WorktreeError, match="shallow clone") as info:
        resolve_ref(shallow, "v1")
    assert "\n" not in str(info.value)


def test_checkout_is_a_detached_worktree_and_reused(repo: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    old = resolve_ref(repo, "v1")
    path = checkout(repo, old, cache)
    assert path == cache / "worktrees" / old[:12]
    assert (path / "a.txt").read_text() == "one\n"
    assert git(path, "rev-parse", "HEAD") == old
    assert (repo / "a.txt").read_text() == "two\n"  # the working tree is untouched
    marker = path / "untracked-build-output"
    marker.write_text("kept")
    assert checkout(repo, old, cache) == path
    assert marker.exists()  # reused, not recreated


def test_detached(repo: Path, tmp_path: Path) -> None:
    path = checkout(repo, resolve_ref(repo, "HEAD"), tmp_path / "cache")
    result = subprocess.run(["git", "-C", str(path), "symbolic-ref", "-q", "HEAD"], capture_output=True, check=False)
    assert result.returncode != 0  # no branch: detached


def test_damaged_worktree_is_recreated(repo: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    old = resolve_ref(repo, "v1")
    path = checkout(repo, old, cache)
    (path / "a.txt").write_text("edited\n")
    assert checkout(repo, old, cache) == path
    assert (path / "a.txt").read_text() == "one\n"


def test_deleted_worktree_folder_is_recreated(repo: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    old = resolve_ref(repo, "v1")
    path = checkout(repo, old, cache)
    shutil.rmtree(path)
    assert checkout(repo, old, cache) == path
    assert (path / "a.txt").read_text() == "one\n"


def test_prune_keeps_the_named_and_forgets_the_rest(repo: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    old, new = resolve_ref(repo, "v1"), resolve_ref(repo, "HEAD")
    kept, dropped = checkout(repo, new, cache), checkout(repo, old, cache)
    assert prune(repo, cache) == []
    assert prune(repo, cache, keep=[new]) == [dropped]
    assert kept.exists()
    assert not dropped.exists()
    listed = git(repo, "worktree", "list", "--porcelain")
    assert str(dropped) not in listed
    assert str(kept) in listed
    assert (repo / "a.txt").read_text() == "two\n"
