"""Where a device's backend comes from and how it is built: this repository's own workspace, or a vendor's git
repository (a path, a URL or a bundle file) mirrored once into the cache and fetched again at each run.

A vendor backend is its own repository with its own build (a setup.py compiling against the installed torch, a
pyproject with any backend): the pipeline builds it as one package, without isolation, against each core. The CI's
own packages that the device profile asks for besides (testreuse, which runs the tests) come from this repository.
"""

from __future__ import annotations

import hashlib
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

from crcr.ci import worktrees

#: `workspace`: every member of the checkout's uv workspace (this repository's layout); `package`: the checkout's
#: root is one package (setup.py or pyproject), built as `pip wheel --no-build-isolation .` would.
BUILD_KINDS = ("workspace", "package")
_SLUG = re.compile(r"[^A-Za-z0-9._-]+")


class SourceError(Exception):
    """A backend repository could not be mirrored or fetched; the message is one line."""


@dataclass(frozen=True)
class BackendSource:
    """The profile's `source`: a repository ("" is the CI's own), the ref that is the latest backend, older refs
    for the backend-version matrix, the build kind, the distributions the build must yield, and whether they are
    native (compiled against torch: one build per core) or not (one build serves every core)."""

    repo: str = ""
    ref: str = "HEAD"
    refs: tuple[str, ...] = ()
    build: str = "workspace"
    distributions: tuple[str, ...] = ()
    native: bool = True

    @property
    def external(self) -> bool:
        return bool(self.repo)


def location(source: BackendSource, ci_repo: Path) -> str:
    """The repository as git takes it: a URL as written, a path relative to the CI repository made absolute."""
    if "://" in source.repo or source.repo.startswith("git@"):
        return source.repo
    path = Path(source.repo).expanduser()
    return str(path if path.is_absolute() else (ci_repo / path).resolve())


def repository(source: BackendSource, ci_repo: Path, cache: Path) -> Path:
    """The git repository backend refs resolve in: the CI repository itself, or the cache's bare mirror of the
    vendor's, brought up to date (every branch and tag, forced: the vendor's history is theirs to rewrite)."""
    if not source.external:
        return ci_repo
    where = location(source, ci_repo)
    name = _SLUG.sub("-", Path(where.rstrip("/")).name).strip("-") or "backend"
    mirror = cache / "backends" / f"{name}-{hashlib.sha256(where.encode()).hexdigest()[:8]}.git"
    if not (mirror / "HEAD").is_file():
        mirror.parent.mkdir(parents=True, exist_ok=True)
        _git(mirror.parent, "clone", "--bare", "--quiet", "--", where, str(mirror))
    _git(mirror, "fetch", "--quiet", "--force", "--prune", "--tags", "--", where, "+refs/heads/*:refs/heads/*")
    return mirror


def _git(cwd: Path, *args: str) -> None:
    done = subprocess.run(["git", "-C", str(cwd), *args], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        lines = [line.strip() for line in (done.stderr + done.stdout).splitlines() if line.strip()]
        raise SourceError(f"git {args[0]} of the backend repository failed: {lines[-1] if lines else done.returncode}")


def latest(source: BackendSource, repo: Path) -> str:
    """The full sha of the ref that is the latest backend."""
    return worktrees.resolve_ref(repo, source.ref)
