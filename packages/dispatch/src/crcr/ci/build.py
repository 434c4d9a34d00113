"""Backend builds: every workspace member of one worktree built into wheels once per (backend sha, torch wheel).

A native member links against libtorch, so its wheel is only valid for the torch it was compiled against: the
output folder `cache/builds/<source key12>-<torch sha256[:12]>/` is keyed by both (the source key: git's tree
of `packages/` and the workspace pyproject, so commits that touch neither share a build), and its `manifest.json`
records each wheel's sha256 and the torch wheel's version and sha256. Members build without isolation in a build venv
per torch wheel and set of build requirements (`cache/buildenvs/<torch sha12>-<set sha8>`), so the build sees
exactly that torch. A member whose folder and build requirements equal those of a wheel some recorded build made
(against the same torch, unless pure Python) reuses that wheel (`crcr.ci.memberwheels`): a commit touching one
package rebuilds that package only. A failed build is a result
(`ok=False` with the compiler's first error line), never an exception, and leaves no wheels behind. A compile
failure is remembered too (the same sources against the same torch fail the same way); any other failure is not.
uv runs with `--no-config`: a worktree's `[tool.uv]` settings (its find-links folder, say) are for its developers.
"""

from __future__ import annotations

import dataclasses
import glob
import hashlib
import json
import os
import re
import shutil
import subprocess
import time
import tomllib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from . import memberwheels
from .cores import wheel_sha256, wheel_version
from .digest import file_sha256
from .envs import EnvError, install, locked, normalize_name, python_of, uv, venv
from .model import BuildResult
from .usage import mark_used

MANIFEST = "manifest.json"
BUILDENV_KEY = ".tributary-buildenv.json"
ALWAYS = ("setuptools", "wheel", "ninja", "uv_build")
_DIRECTIVE = re.compile(r"#error\b")
_COMPILER_ERROR = re.compile(r":\d+(:\d+)?: (fatal )?error:|#error")
_ANY_ERROR = re.compile(r"\berror\b[:\s]", re.IGNORECASE)
_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")


class BuildError(Exception):
    """Bad input to a build (no worktree, no torch wheel, not a workspace); the message is one line.

    A build that runs and fails is not an error: it is `BuildResult(ok=False)`.
    """


@dataclass(frozen=True)
class Member:
    directory: Path
    distribution: str  # "" for a setup.py package that does not say it statically: its wheel's name tells
    build_requires: tuple[str, ...]
    dependencies: tuple[str, ...] = ()  # normalised names of what it requires


@dataclass(frozen=True)
class Recipe:
    """How one backend checkout builds: a uv workspace's members (`only` those named and what they need, when
    given) or the checkout's root as one package; native wheels are valid for one torch, others for any; the
    distributions the build must yield (empty: whatever it yields)."""

    kind: str = "workspace"
    native: bool = True
    only: tuple[str, ...] = ()
    distributions: tuple[str, ...] = ()

    def describe(self) -> dict:
        """What besides the sources decides the wheels, for the build's key ("" for the plain workspace build)."""
        return {k: v for k, v in dataclasses.asdict(self).items() if v != getattr(Recipe(), k)}


def requirement_name(requirement: str) -> str:
    """The normalised distribution name a requirement names ("" when it names none)."""
    match = _NAME.match(requirement)
    return normalize_name(match.group(1)) if match else ""


def _toml(path: Path) -> dict:
    try:
        return tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise BuildError(f"cannot read {path}: {exc}") from exc


def _member(directory: Path, config: dict, required: bool) -> Member:
    project = config.get("project", {})
    name = project.get("name", "")
    if required and not name:
        raise BuildError(f"{directory / 'pyproject.toml'} has no [project] name")
    requires = config.get("build-system", {}).get("requires", ["setuptools", "wheel"])
    dependencies = tuple(filter(None, (requirement_name(r) for r in project.get("dependencies", []))))
    return Member(directory, name, tuple(requires), dependencies)


def members(worktree: Path, recipe: Recipe = Recipe()) -> list[Member]:
    """What a checkout builds: its root as one package, or its own workspace members in its pyproject's order
    (globs expanded, `exclude` honoured), `only` the named ones and the members they depend on."""
    if recipe.kind == "package":
        if not (worktree / "pyproject.toml").is_file() and not (worktree / "setup.py").is_file():
            raise BuildError(f"{worktree} has neither pyproject.toml nor setup.py: not a package to build")
        pyproject = worktree / "pyproject.toml"
        return [_member(worktree, _toml(pyproject) if pyproject.is_file() else {}, False)]
    workspace = _toml(worktree / "pyproject.toml").get("tool", {}).get("uv", {}).get("workspace", {})
    if not workspace.get("members"):
        raise BuildError(f"{worktree / 'pyproject.toml'} lists no [tool.uv.workspace] members")
    excluded = {
        Path(p).resolve() for pattern in workspace.get("exclude", []) for p in glob.glob(str(worktree / pattern))
    }
    found: list[Member] = []
    for pattern in workspace["members"]:
        for directory in sorted(Path(p) for p in glob.glob(str(worktree / pattern))):
            if directory.resolve() in excluded or not (directory / "pyproject.toml").is_file():
                continue
            found.append(_member(directory, _toml(directory / "pyproject.toml"), True))
    if not found:
        raise BuildError(f"no workspace member of {worktree} has a pyproject.toml")
    return _closure(found, recipe.only) if recipe.only else found


def _closure(found: list[Member], only: Sequence[str]) -> list[Member]:
    """The named members and every member they depend on, in workspace order."""
    by_name = {normalize_name(m.distribution): m for m in found}
    wanted: set[str] = set()
    pending = [normalize_name(name) for name in only]
    while pending:
        name = pending.pop()
        if name in by_name and name not in wanted:
            wanted.add(name)
            pending.extend(by_name[name].dependencies)
    return [m for m in found if normalize_name(m.distribution) in wanted]


def workspace_members(worktree: Path) -> set[str]:
    """The normalised names of a checkout's workspace members (none when it is no uv workspace)."""
    try:
        return {normalize_name(m.distribution) for m in members(worktree)}
    except BuildError:
        return set()


def first_error(log: str) -> str:
    """The compiler's first error line, else the first line that says error, else the last line.

    An `#error` directive comes first wherever it is: it is a header's own statement of why (torch 2.14's
    `#error C++20 or later compatible compiler is required to use PyTorch.`), while the errors a parallel build
    printed before it (`'strong_ordering' in namespace 'std' does not name a type`) are its consequences.
    """
    lines = [line.strip() for line in log.splitlines() if line.strip()]
    for pattern in (_DIRECTIVE, _COMPILER_ERROR, _ANY_ERROR):
        for line in lines:
            if pattern.search(line):
                return line
    return lines[-1] if lines else "the build failed with no output"


def _git_sha(worktree: Path) -> str:
    result = subprocess.run(["git", "-C", str(worktree), "rev-parse", "HEAD"], capture_output=True, text=True)
    if result.returncode != 0:
        raise BuildError(f"{worktree} is not a git checkout (a backend is built from a worktree of its sha)")
    return result.stdout.strip()


def source_key(worktree: Path, rev: str = "HEAD", recipe: Recipe = Recipe()) -> str:
    """What goes into the wheels: for a workspace, git's tree of `packages/` and the workspace's pyproject at this
    commit (commits that change neither, docs, configs, top-level tests, share one build); for a package, the
    commit's whole tree; and how it is built."""
    specs = (f"{rev}:packages", f"{rev}:pyproject.toml") if recipe.kind == "workspace" else (f"{rev}^{{tree}}",)
    parts = []
    for spec in specs:
        result = subprocess.run(["git", "-C", str(worktree), "rev-parse", spec], capture_output=True, text=True)
        parts.append(result.stdout.strip() if result.returncode == 0 else "")
    if recipe.describe():
        parts.append(json.dumps(recipe.describe(), sort_keys=True))
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


def _cached(out: Path, torch_sha: str) -> BuildResult | None:
    """The recorded result, if it is for this torch ("" for wheels that are not native: any torch) and every wheel
    it names still has its recorded hash."""
    try:
        manifest = json.loads((out / MANIFEST).read_text())
    except (OSError, ValueError):
        return None
    if torch_sha and manifest.get("torch", {}).get("sha256") != torch_sha:
        return None
    log = str(out / "build.log")
    if not manifest.get("ok"):
        if not manifest.get("compile_error"):
            return None  # a failure that was not the compiler's may not recur: build again
        return BuildResult(ok=False, first_error=manifest.get("first_error", ""), log=log, cached=True)
    wheels, hashes = {}, {}
    for dist, entry in manifest.get("wheels", {}).items():
        path = out / entry["file"]
        if not path.is_file() or file_sha256(path) != entry["sha256"]:
            return None
        wheels[dist], hashes[dist] = str(path), entry["sha256"]
    return BuildResult(ok=True, wheels=wheels, wheel_sha256=hashes, log=log, cached=True)


def output_folder(cache: Path, key: str, torch_sha: str) -> Path:
    """Where the build of one source key against one torch wheel ("" for any torch) lives."""
    return cache / "builds" / f"{key[:12]}-{torch_sha[:12] or 'any'}"


def recorded(
    repo: Path, sha: str, torch_sha: str, cache: Path, recipe: Recipe = Recipe()
) -> tuple[Path, BuildResult | None]:
    """The build folder of a commit against a torch wheel and its recorded result, if any; nothing is built (a dry
    run asks this)."""
    torch_key = torch_sha if recipe.native else ""
    out = output_folder(cache, source_key(repo, sha, recipe), torch_key)
    return out, _cached(out, torch_key)


def build_env(torch_wheel: Path, requires: list[str], cache: Path, log: Path, excludes: Sequence[str] = ()) -> Path:
    """The build venv holding this torch wheel and these build requirements (torch's own pin dropped: the wheel given
    is the torch to build against), without the `excludes`; returns its python. One venv per such set
    (`cache/buildenvs/<torch sha12>-<set sha8>`), made once and never changed after: a build compiling in it is never
    disturbed by another build that needs other requirements against the same torch."""
    torch_sha = wheel_sha256(torch_wheel)
    wanted = sorted({*ALWAYS, *(r for r in requires if requirement_name(r) != "torch")})
    record = {"torch": torch_sha, "requires": wanted, **({"excludes": sorted(excludes)} if excludes else {})}
    name = f"{torch_sha[:12]}-{hashlib.sha256(json.dumps(record, sort_keys=True).encode()).hexdigest()[:8]}"
    path = cache / "buildenvs" / name
    with locked(cache / "buildenvs" / f".{name}.lock"):
        python = python_of(path)
        try:
            current = json.loads((path / BUILDENV_KEY).read_text())
        except (OSError, ValueError):
            current = {}
        if current == record and python.exists():
            mark_used(path)
            return python
        if path.exists():
            shutil.rmtree(path)  # ours: an interrupted set-up
        python = venv(path, cache, log)
        install(python, [str(torch_wheel), *wanted], cache, [torch_wheel.parent], log, excludes=excludes)
        (path / BUILDENV_KEY).write_text(json.dumps(record, indent=1) + "\n")
        mark_used(path)
    return python


def _clean(worktree: Path, directory: Path) -> None:
    """Drop a member's untracked `build/` folder: objects compiled against another torch must not be reused."""
    stale = directory / "build"
    if not stale.is_dir():
        return
    tracked = subprocess.run(["git", "-C", str(worktree), "ls-files", "--", str(stale)], capture_output=True, text=True)
    if tracked.returncode == 0 and not tracked.stdout.strip():
        shutil.rmtree(stale)


def _write_manifest(out: Path, data: dict) -> None:
    scratch = out / f".{MANIFEST}.tmp"
    scratch.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    scratch.replace(out / MANIFEST)


def build_backend(
    worktree: Path,
    torch_wheel: Path,
    cache: Path,
    log: Callable[[str], None] = lambda _: None,
    force: bool = False,
    excludes: Sequence[str] = (),
    recipe: Recipe = Recipe(),
) -> BuildResult:
    """Build what `worktree` holds (the `recipe` says what and how) against `torch_wheel`, once; later calls return
    the recorded result (`cached=True`) after checking the wheels' hashes. `log` gets one line per step; the tools'
    output goes to `build.log` in the output folder. The build venv leaves out the `excludes` (the device
    profile's)."""
    if not worktree.is_dir():
        raise BuildError(f"worktree not found: {worktree}")
    if not torch_wheel.is_file():
        raise BuildError(f"torch wheel not found: {torch_wheel}")
    wanted = members(worktree, recipe)
    sha = _git_sha(worktree)
    torch_sha = wheel_sha256(torch_wheel)
    torch_key = torch_sha if recipe.native else ""
    out = output_folder(cache, source_key(worktree, recipe=recipe), torch_key)
    with locked(cache / "builds" / f".{out.name}.lock"):
        if not force and (found := _cached(out, torch_key)) is not None:
            mark_used(out)
            log(f"build {out.name}: cached ({'ok' if found.ok else 'failed: ' + found.first_error})")
            return found
        # members build in place (setuptools' build/ folders): one build per worktree at a time, whatever the torch
        with locked(cache / "builds" / f".{sha[:12]}.worktree.lock"):
            return _build(wanted, worktree, sha, torch_wheel, out, cache, log, excludes, recipe, force)


def _build(
    wanted: list[Member],
    worktree: Path,
    sha: str,
    torch_wheel: Path,
    out: Path,
    cache: Path,
    log: Callable[[str], None],
    excludes: Sequence[str],
    recipe: Recipe,
    force: bool = False,
) -> BuildResult:
    """Build the members into a scratch folder, each reusing the same member's wheel from a recorded build (unless
    `force`); only a complete set of wheels is moved into `out`."""
    if out.exists():
        shutil.rmtree(out)  # ours: a stale or forced build
    out.mkdir(parents=True)
    logfile = out / "build.log"
    scratch = out / ".scratch"
    scratch.mkdir()
    started = time.monotonic()
    torch_sha = wheel_sha256(torch_wheel)
    manifest = {
        "backend_sha": sha,
        "torch": {"version": wheel_version(torch_wheel), "sha256": torch_sha, "wheel": torch_wheel.name},
        "native": recipe.native,
        "started": datetime.now(UTC).isoformat(timespec="seconds"),
    }

    def failed(label: str, error: str) -> BuildResult:
        shutil.rmtree(scratch)  # no half-built wheels
        manifest.update(ok=False, failed=label, first_error=error, wheels={})
        manifest["compile_error"] = bool(_COMPILER_ERROR.search(error))
        manifest["seconds"] = round(time.monotonic() - started, 1)
        _write_manifest(out, manifest)
        log(f"build {out.name}: {label} failed: {error}")
        return BuildResult(ok=False, first_error=error, log=str(logfile))

    log(f"build {out.name}: build venv for torch {wheel_version(torch_wheel)}")
    try:
        python = build_env(torch_wheel, [r for m in wanted for r in m.build_requires], cache, logfile, excludes)
    except EnvError as exc:
        shutil.rmtree(scratch)
        log(f"build {out.name}: set-up failed: {exc}")
        return BuildResult(ok=False, first_error=str(exc), log=str(logfile))  # not recorded: may be transient
    environ = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH", "CONDA_PREFIX")}
    environ["PATH"] = f"{python.parent}{os.pathsep}{environ.get('PATH', '')}"  # ninja for torch's cpp_extension
    environ["VIRTUAL_ENV"] = str(python.parent.parent)
    # torch's cpp_extension runs ninja with cores + 2 jobs: the longest source then shares a core and holds up the link
    environ.setdefault("MAX_JOBS", str(os.cpu_count() or 1))
    wheels: dict[str, dict[str, str]] = {}
    for member in wanted:
        begun = time.monotonic()
        label = member.distribution or worktree.name
        key = memberwheels.key(worktree, sha, member.directory, member.build_requires)
        if not force and (found := memberwheels.recorded(cache / "builds", key, torch_sha)) is not None:
            reused, digest = found
            log(f"build {out.name}: {label}: reused from {reused.parent.name}")
            wheel = memberwheels.link(reused, scratch)
            wheels[member.distribution or wheel.name.split("-")[0]] = {"file": wheel.name, "sha256": digest, "key": key}
            continue
        log(f"build {out.name}: {label}")
        command = uv(cache, "build", "--wheel", "--no-build-isolation", "--python", str(python))
        command += ["--out-dir", str(scratch), str(member.directory)]
        _clean(worktree, member.directory)
        before = set(scratch.glob("*.whl"))
        with logfile.open("a") as handle:
            handle.write(f"\n=== {label} ({member.directory.relative_to(worktree)})\n")
            handle.write("$ " + " ".join(command) + "\n")
            handle.flush()
            result = subprocess.run(command, cwd=worktree, stdout=handle, stderr=subprocess.STDOUT, env=environ)
            handle.write(f"=== {label}: exit {result.returncode} in {time.monotonic() - begun:.1f}s\n")
        new = sorted(set(scratch.glob("*.whl")) - before)
        if result.returncode != 0 or len(new) != 1:
            text = logfile.read_text(errors="replace")
            section = text[text.rfind(f"\n=== {label} (") :]
            return failed(label, first_error(section) if result.returncode != 0 else f"{label}: no single wheel")
        wheels[member.distribution or new[0].name.split("-")[0]] = {
            "file": new[0].name, "sha256": file_sha256(new[0]), "key": key,
        }  # fmt: skip
    missing = sorted({normalize_name(d) for d in recipe.distributions} - {normalize_name(d) for d in wheels})
    if missing:
        made = ", ".join(sorted(wheels)) or "nothing"
        return failed(worktree.name, f"the build made {made}, not the profile's {', '.join(missing)}")
    for entry in wheels.values():
        (scratch / entry["file"]).replace(out / entry["file"])
    shutil.rmtree(scratch)
    manifest.update(ok=True, wheels=wheels, seconds=round(time.monotonic() - started, 1))
    _write_manifest(out, manifest)
    mark_used(out)
    log(f"build {out.name}: ok in {manifest['seconds']}s")
    return BuildResult(
        ok=True,
        wheels={dist: str(out / entry["file"]) for dist, entry in wheels.items()},
        wheel_sha256={dist: entry["sha256"] for dist, entry in wheels.items()},
        log=str(logfile),
    )
