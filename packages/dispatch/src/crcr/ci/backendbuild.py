"""A combination's wheels: the backend built the way its device profile says, and, for a backend from a vendor's
repository, the CI's own packages the profile asks for besides (testreuse runs its tests), built from this
repository's HEAD against the same torch. Both go into the combination's environment as one set."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from crcr.ci import build, worktrees
from crcr.ci.build import Recipe
from crcr.ci.ciconfig import DeviceProfile
from crcr.ci.model import BuildResult


def recipe(profile: DeviceProfile) -> Recipe:
    """How the profile's backend builds."""
    origin = profile.origin
    return Recipe(kind=origin.build, native=origin.native, distributions=origin.distributions)


def own_packages(profile: DeviceProfile, checkout: Path) -> tuple[str, ...]:
    """The profile's requirements that are this repository's workspace members (none for its own backends: their
    build holds them)."""
    if not profile.origin.external:
        return ()
    members = build.workspace_members(checkout)
    theirs = {build.requirement_name(d) for d in profile.origin.distributions}
    names = (build.requirement_name(r) for r in profile.requirements)
    return tuple(dict.fromkeys(n for n in names if n in members and n not in theirs))


def build_for(
    profile: DeviceProfile,
    repo: Path,
    checkout: Path,
    torch_wheel: Path,
    cache: Path,
    say: Callable[[str], None] = lambda _: None,
) -> BuildResult:
    """The backend checkout built against `torch_wheel`, with this repository's (`repo`) packages the profile
    needs; a failure of either is the combination's build failure."""
    built = build.build_backend(checkout, torch_wheel, cache, say, excludes=profile.excludes, recipe=recipe(profile))
    if not built.ok or not profile.origin.external:
        return built
    own = worktrees.checkout(repo, worktrees.resolve_ref(repo, "HEAD"), cache)
    wanted = own_packages(profile, own)
    if not wanted:
        return built
    harness = build.build_backend(own, torch_wheel, cache, say, excludes=profile.excludes, recipe=Recipe(only=wanted))
    return merged(built, harness)


def recorded(
    profile: DeviceProfile, repo: Path, backend_repo: Path, sha: str, torch_sha: str, cache: Path
) -> tuple[Path, BuildResult | None]:
    """The build folder of a backend commit against a torch wheel and its recorded result with the CI's own
    packages, if both are recorded; nothing is built (a dry run asks this)."""
    out, found = build.recorded(backend_repo, sha, torch_sha, cache, recipe(profile))
    if found is None or not found.ok or not profile.origin.external:
        return out, found
    head = worktrees.resolve_ref(repo, "HEAD")
    wanted = own_packages(profile, repo)
    if not wanted:
        return out, found
    _, harness = build.recorded(repo, head, torch_sha, cache, Recipe(only=wanted))
    return out, merged(found, harness) if harness is not None else None


def merged(backend: BuildResult, own: BuildResult) -> BuildResult:
    """One set of wheels; the backend's log (and manifest, which says the torch it was compiled against) leads."""
    if not own.ok:
        return BuildResult(ok=False, first_error=f"this repository's packages: {own.first_error}", log=own.log)
    return BuildResult(
        ok=True,
        wheels={**own.wheels, **backend.wheels},
        wheel_sha256={**own.wheel_sha256, **backend.wheel_sha256},
        log=backend.log,
        cached=backend.cached and own.cached,
    )
