"""The candidates of a CI run and the combinations they form: the primary one (the latest of all three), the
backend-version matrix (older backend refs x latest core x latest suite), the core-version matrix (latest
backend x each core), and for each configured variant the primary and core-version ones again under the variant's
config folders (`primary+compile`, `core@2.13.0+compile`; older backend refs get none: their checkouts predate the
variant's configs). Names are stable across runs, so the history can find a combination's last green run."""

from __future__ import annotations

import dataclasses
import subprocess
from collections.abc import Callable
from pathlib import Path

from crcr.ci import cores, worktrees
from crcr.ci.backendsource import BackendSource
from crcr.ci.ciconfig import CIConfig
from crcr.ci.digest import tree_sha256
from crcr.ci.model import Candidate, Combination

#: Where the embedded upstream-style tree lives in a backend checkout.
EMBEDDED_TREE = Path("packages/testreuse/src/testreuse/upstream")


def backend(repo: Path, ref: str) -> Candidate:
    sha = worktrees.resolve_ref(repo, ref)
    return Candidate("backend", ref if ref != sha else sha[:12], sha[:12], sha)


def core(version: str, cache: Path) -> Candidate:
    """The core candidate, its wheel fetched into the cache the first time."""
    wheel = cores.torch_wheel(version, cache)
    git = cores.wheel_git_version(wheel)
    return Candidate("core", version, cores.wheel_version(wheel), cores.wheel_sha256(wheel), git)


def core_unfetched(version: str, cache: Path) -> Candidate:
    """The core candidate as the wheelhouse or pip's resolution knows it, nothing fetched (a dry run)."""
    found, sha, _fetched = cores.peek(version, cache)
    return Candidate("core", version, found, sha)


def suite(root: str, repo: Path, backend_sha: str, at: str = "") -> Candidate:
    """`embedded`: the tree in the latest backend's checkout (it moves only when its files change); else a PyTorch
    checkout's root, identified by its git commit when it is one, else by its content. `at` (a dispatched commit)
    takes a git checkout's suite at that commit, so the tests that run are the ones the change under test has; the
    embedded tree has no upstream commits and stays as it is."""
    if root == "embedded":
        tree = repo / EMBEDDED_TREE
        return Candidate("suite", "embedded", backend_sha, tree_sha256(tree / "test", "*.py"))
    path = Path(root).expanduser().resolve()
    head = subprocess.run(["git", "-C", str(path), "rev-parse", "HEAD"], capture_output=True, text=True, check=False)
    if head.returncode == 0:
        sha = worktrees.resolve_ref(path, at) if at else head.stdout.strip()
        return Candidate("suite", str(path), sha[:12], sha)
    return Candidate("suite", str(path), "tree", tree_sha256(path / "test", "*.py"))


def plan(
    config: CIConfig,
    origin: BackendSource,
    backend_repo: Path,
    repo: Path,
    cache: Path,
    core_of: Callable[[str, Path], Candidate] = core,
    suite_at: str = "",
) -> list[Combination]:
    """Every combination of the run, the primary first and the variants' last; a combination appears once even if
    two matrices hold it. The backend's refs resolve in `backend_repo` (the device profile's `source`), the
    embedded suite is this repository's (`repo`) at HEAD; `suite_at` is the dispatched commit a git suite checkout
    is taken at."""
    latest_backend = backend(backend_repo, origin.ref)
    latest_backend = Candidate("backend", "HEAD", latest_backend.version, latest_backend.sha)
    core_candidates = [core_of(v, cache) for v in config.cores]
    latest_core = core_candidates[-1]
    latest_suite = suite(config.suite, repo, worktrees.resolve_ref(repo, "HEAD"), suite_at)
    found = [Combination("primary", "primary", latest_backend, latest_core, latest_suite)]
    if "backend" in config.matrices:
        for ref in origin.refs:
            old = backend(backend_repo, ref)
            found.append(Combination(f"backend@{old.name}", "backend", old, latest_core, latest_suite))
    if "core" in config.matrices:
        for candidate in core_candidates[:-1]:
            found.append(Combination(f"core@{candidate.name}", "core", latest_backend, candidate, latest_suite))
    latest = [c for c in found if c.matrix != "backend"]
    for variant in config.variants:
        found.extend(dataclasses.replace(c, name=f"{c.name}+{variant}", variant=variant) for c in latest)
    unique: dict[tuple[str, ...], Combination] = {}
    for combination in found:
        unique.setdefault((combination.variant, *(c.sha or c.name for c in combination.candidates())), combination)
    return list(unique.values())


def suite_kind(suite: Candidate) -> str:
    """Which of a device profile's config folders a suite takes: "embedded", or "upstream" for a PyTorch checkout."""
    return "embedded" if suite.name == "embedded" else "upstream"
