"""Backend builds: every workspace member of one worktree built into wheels once per (backend sha, torch wheel).

A native member links against libtorch, so its wheel is only valid for the torch it was compiled against: the
output folder `cache/builds/<source key12>-<torch sha256[:12]>/` is keyed by both (the source key: git's tree
of `packages/` and the workspace pyproject, so commits that touch neither share a build), and its `manifest.json`
records each wheel's sha256 and the torch wheel's version and sha256. Members build without isolation in a build venv
per torch wheel (`cache/buildenvs/<torch sha12>`), so the build sees exactly that torch. A failed build is a result
(`ok=False` with the compiler's first error line), never an exception, and leaves no wheels behind. A compile
failure is remembered too (the same sources against the same torch fail the same way); any other failure is not.
uv runs with `--no-config`: a worktree's `[tool.uv]` settings (its find-links folder, say) are for its developers.
"""

from __future__ import annotations

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
    distribution: str
    build_requires: tuple[str, ...]


def _requirement_name(requirement: str) -> str:
    match = _NAME.match(requirement)
    return normalize_name(match.group(1)) if match else ""


def _toml(path: Path) -> dict:
    try:
        return tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise BuildError(f"cannot read {path}: {exc}") from exc


def members(worktree: Path) -> list[Member]:
    """The worktree's own workspace members, in its pyproject's order (globs expanded, `exclude` honoured)."""
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
            config = _toml(directory / "pyproject.toml")
            name = config.get("project", {}).get("name")
            if not name:
                raise BuildError(f"{directory / 'pyproject.toml'} has no [project] name")
            requires = config.get("build-system", {}).get("requires", ["setuptools"])
            found.append(Member(directory, name, tuple(requires)))
    if not found:
        raise BuildError(f"no workspace member of {worktree} has a pyproject.toml")
    return found


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


def source_key(worktree: Path, rev: str = "HEAD") -> str:
    """What goes into the wheels: git's tree of `packages/` and the workspace's pyproject at this commit. Commits
    that change neither (docs, configs, top-level tests) share one build."""
    parts = []
    for spec in (f"{rev}:packages", f"{rev}:pyproject.toml"):
        result = subprocess.run(["git", "-C", str(worktree), "rev-parse", spec], capture_output=True, text=True)
        parts.append(result.stdout.strip() if result.returncode == 0 else "")
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


def _cached(out: Path, torch_sha: str) -> BuildResult | None:
    """The recorded result, if it is for this torch and every wheel it names still has its recorded hash."""
    try:
        manifest = json.loads((out / MANIFEST).read_text())
    except (OSError, ValueError):
        return None
    if manifest.get("torch", {}).get("sha256") != torch_sha:
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
    """Where the build of one source key against one torch wheel lives."""
    return cache / "builds" / f"{key[:12]}-{torch_sha[:12]}"


def recorded(repo: Path, sha: str, torch_sha: str, cache: Path) -> tuple[Path, BuildResult | None]:
    """The build folder of a commit against a torch wheel and its recorded result, if any; nothing is built (a dry
    run asks this)."""
    out = output_folder(cache, source_key(repo, sha), torch_sha)
    return out, _cached(out, torch_sha)


def build_env(torch_wheel: Path, requires: list[str], cache: Path, log: Path, excludes: Sequence[str] = ()) -> Path:
    """The build venv for this torch wheel (`cache/buildenvs/<torch sha12>`), holding torch and the members' build
    requirements (torch's own pin dropped: the wheel given is the torch to build against), without the `excludes`;
    returns its python."""
    torch_sha = wheel_sha256(torch_wheel)
    path = cache / "buildenvs" / torch_sha[:12]
    wanted = sorted({*ALWAYS, *(r for r in requires if _requirement_name(r) != "torch")})
    record = {"torch": torch_sha, "requires": wanted, **({"excludes": sorted(excludes)} if excludes else {})}
    with locked(cache / "buildenvs" / f".{torch_sha[:12]}.lock"):
        python = python_of(path)
        try:
            current = json.loads((path / BUILDENV_KEY).read_text())
        except (OSError, ValueError):
            current = {}
        if current == record and python.exists():
            mark_used(path)
            return python
        if (
            current.get("torch") != torch_sha
            or current.get("excludes") != record.get("excludes")
            or not python.exists()
        ):
            if path.exists():
                shutil.rmtree(path)  # ours: an interrupted set-up, or one holding what is now excluded
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
) -> BuildResult:
    """Build every workspace member of `worktree` against `torch_wheel`, once; later calls return the recorded
    result (`cached=True`) after checking the wheels' hashes. `log` gets one line per step; the tools' output goes
    to `build.log` in the output folder. The build venv leaves out the `excludes` (the device profile's)."""
    if not worktree.is_dir():
        raise BuildError(f"worktree not found: {worktree}")
    if not torch_wheel.is_file():
        raise BuildError(f"torch wheel not found: {torch_wheel}")
    wanted = members(worktree)
    sha = _git_sha(worktree)
    torch_sha = wheel_sha256(torch_wheel)
    out = output_folder(cache, source_key(worktree), torch_sha)
    with locked(cache / "builds" / f".{out.name}.lock"):
        if not force and (found := _cached(out, torch_sha)) is not None:
            mark_used(out)
            log(f"build {out.name}: cached ({'ok' if found.ok else 'failed: ' + found.first_error})")
            return found
        # members build in place (setuptools' build/ folders): one build per worktree at a time, whatever the torch
        with locked(cache / "builds" / f".{sha[:12]}.worktree.lock"):
            return _build(wanted, worktree, sha, torch_wheel, torch_sha, out, cache, log, excludes)


def _build(
    wanted: list[Member],
    worktree: Path,
    sha: str,
    torch_wheel: Path,
    torch_sha: str,
    out: Path,
    cache: Path,
    log: Callable[[str], None],
    excludes: Sequence[str],
) -> BuildResult:
    """Build the members into a scratch folder; only a complete set of wheels is moved into `out`."""
    if out.exists():
        shutil.rmtree(out)  # ours: a stale or forced build
    out.mkdir(parents=True)
    logfile = out / "build.log"
    scratch = out / ".scratch"
    scratch.mkdir()
    started = time.monotonic()
    manifest = {
        "backend_sha": sha,
        "torch": {"version": wheel_version(torch_wheel), "sha256": torch_sha, "wheel": torch_wheel.name},
        "started": datetime.now(UTC).isoformat(timespec="seconds"),
    }
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
        log(f"build {out.name}: {member.distribution}")
        command = uv(cache, "build", "--wheel", "--no-build-isolation", "--python", str(python))
        command += ["--out-dir", str(scratch), str(member.directory)]
        _clean(worktree, member.directory)
        before = set(scratch.glob("*.whl"))
        with logfile.open("a") as handle:
            handle.write(f"\n=== {member.distribution} ({member.directory.relative_to(worktree)})\n")
            handle.write("$ " + " ".join(command) + "\n")
            handle.flush()
            result = subprocess.run(command, cwd=worktree, stdout=handle, stderr=subprocess.STDOUT, env=environ)
            handle.write(f"=== {member.distribution}: exit {result.returncode} in {time.monotonic() - begun:.1f}s\n")
        new = sorted(set(scratch.glob("*.whl")) - before)
        if result.returncode != 0 or len(new) != 1:
            text = logfile.read_text(errors="replace")
            section = text[text.rfind(f"\n=== {member.distribution} (") :]
            error = first_error(section) if result.returncode != 0 else f"{member.distribution}: no single wheel"
            shutil.rmtree(scratch)  # no half-built wheels
            manifest.update(ok=False, failed=member.distribution, first_error=error, wheels={})
            manifest["compile_error"] = bool(_COMPILER_ERROR.search(error))
            manifest["seconds"] = round(time.monotonic() - started, 1)
            _write_manifest(out, manifest)
            log(f"build {out.name}: {member.distribution} failed: {error}")
            return BuildResult(ok=False, first_error=error, log=str(logfile))
        wheels[member.distribution] = {"file": new[0].name, "sha256": file_sha256(new[0])}
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
