"""Test environments: one uv venv per (backend wheels, torch wheel, extras), made once and reused by its key.

A combination's tests run in a venv holding exactly the recorded artifacts: the torch wheel (its dependencies from
its find-links folder) and the backend's built wheels, plus their test extras; third-party packages come from the
registries uv reaches. The venv records its key after a complete install; a venv whose key differs (or that has
none: an interrupted install) is made again. uv runs with `--no-config` (a `[tool.uv]` table of whatever project
the caller stands in is not ours); `UV_*` environment variables (an index for users elsewhere) still apply.
`venv` and `install` are also what `build` uses for its build venvs.
"""

from __future__ import annotations

import fcntl
import hashlib
import itertools
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from .model import BuildResult
from .usage import mark_used

KEY_FILE = ".tributary-env.json"
UV_CACHE = "uv-cache"
_EXTRA = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*\[([^\]]*)\]\s*$")
_PLAIN = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*$")


class EnvError(Exception):
    """An environment could not be made; the message is one line."""


def find_uv() -> str:
    """The uv binary: `$UV` (uv sets it for its children), then PATH (how nox's uv backend finds it), then beside
    this interpreter."""
    for candidate in (os.environ.get("UV", ""), shutil.which("uv") or "", str(Path(sys.executable).parent / "uv")):
        if candidate and Path(candidate).is_file() and os.access(candidate, os.X_OK):
            return candidate
    raise EnvError("uv not found: install it (python -m pip install uv) or put it on PATH")


def normalize_name(name: str) -> str:
    """A distribution's name as PEP 503 compares it."""
    return re.sub(r"[-_.]+", "-", name).lower()


def uv(cache: Path, *args: str) -> list[str]:
    """A uv command on the cache's own uv cache (`cache/uv-cache`): beside the environments, on their filesystem,
    so every venv and build venv hardlinks its files from one unpacked copy instead of copying gigabytes of torch."""
    return [find_uv(), *args, "--no-config", "--cache-dir", str(cache / UV_CACHE)]


def python_of(venv: Path) -> Path:
    return venv / "bin" / "python"


def _first_error(output: str) -> str:
    """uv's first error line, with the first sentence of its cause when it gives one (the error alone, "No
    solution found", does not say which requirement)."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    for at, line in enumerate(lines):
        if line.lower().startswith(("error", "\N{MULTIPLICATION SIGN}")):
            rest = lines[at + 1 :]
            if not rest or not rest[0].startswith(("cause:", "\N{BOX DRAWINGS LIGHT UP AND RIGHT}")):
                return line
            cause = " ".join(itertools.takewhile(lambda n: not n.startswith(("And ", "hint:", "error")), rest))
            return f"{line} ({cause.split(', we can conclude')[0]})"
    return lines[-1] if lines else "no output"


def _run(command: Sequence[str], log: Path | None) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(list(command), capture_output=True, text=True, check=False)
    if log is not None:
        with log.open("a") as out:
            out.write("$ " + " ".join(command) + "\n" + result.stdout + result.stderr)
    return result


def venv(path: Path, cache: Path, log: Path | None = None) -> Path:
    """A fresh uv venv at `path` for this interpreter's Python; returns its python."""
    result = _run([*uv(cache, "venv", "--quiet", "--python", sys.executable), str(path)], log)
    if result.returncode != 0:
        raise EnvError(f"could not create a venv at {path}: {_first_error(result.stderr + result.stdout)}")
    return python_of(path)


def install(
    python: Path,
    requirements: Sequence[str],
    cache: Path,
    find_links: Sequence[Path] = (),
    log: Path | None = None,
    bytecode: bool = False,
    excludes: Sequence[str] = (),
) -> None:
    """`uv pip install` into the venv of `python`; the find-links folders are searched besides the registries;
    the `excludes` (distribution names) are left out of the resolution, whoever requires them.

    `bytecode` compiles every installed module once, here: the test processes run with PYTHONDONTWRITEBYTECODE
    (nothing written into the suite or a read-only environment), so without it each one compiles torch's Python
    from source again, several seconds an interpreter and more with Inductor.
    """
    command = uv(cache, "pip", "install", "--python", str(python), *(["--compile-bytecode"] if bytecode else []))
    for folder in find_links:
        command += ["--find-links", str(folder)]
    if not excludes:
        result = _run([*command, *requirements], log)
    else:
        with tempfile.TemporaryDirectory(dir=cache) as scratch:
            listing = Path(scratch) / "excludes.txt"
            listing.write_text("".join(f"{name}\n" for name in excludes))
            result = _run([*command, "--excludes", str(listing), *requirements], log)
    if result.returncode != 0:
        raise EnvError(f"could not install into {python.parent.parent}: {_first_error(result.stderr + result.stdout)}")


@contextmanager
def locked(path: Path) -> Iterator[None]:
    """Hold an exclusive lock on `path` (a lock file) while making what it guards; parallel legs share caches."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def requirements(build: BuildResult, extras: Sequence[str]) -> list[str]:
    """The named backend wheels as `dist[extras] @ file://...` requirements, then every other extra as it is.

    An extra naming a built wheel (`tributary-testreuse[test]`) installs that wheel with those extras; wheels no
    extra names are not installed (a device profile picks its backend's packages; another backend's package could
    register a second privateuse1 device), unless a named one depends on them (they resolve from the build folder).
    Anything else (`pytest-split>=0.10`) is a requirement installed from the registries.
    """
    wheels = {normalize_name(dist): (dist, Path(path)) for dist, path in build.wheels.items()}
    chosen: dict[str, set[str]] = {}
    also: list[str] = []
    for item in extras:
        match = _EXTRA.match(item) or _PLAIN.match(item)
        name = normalize_name(match.group(1)) if match else ""
        if name in wheels:
            chosen.setdefault(name, set())
            if match and match.lastindex == 2:
                chosen[name] |= {e.strip() for e in match.group(2).split(",") if e.strip()}
        elif item.strip():
            also.append(item.strip())
    found = []
    for key, (dist, path) in sorted((k, wheels[k]) for k in chosen):
        suffix = f"[{','.join(sorted(chosen[key]))}]" if chosen[key] else ""
        found.append(f"{dist}{suffix} @ {path.resolve().as_uri()}")
    return found + also


def environment_key(
    build: BuildResult, torch_sha256: str, extras: Sequence[str], pins: str = "", excludes: Sequence[str] = ()
) -> str:
    """What makes two environments the same: the wheels' bytes, torch's bytes, the extras, the Python, what is
    left out, and that its modules are compiled (an environment made before that is made again)."""
    data = {
        **({"excludes": sorted(normalize_name(n) for n in excludes)} if excludes else {}),
        "wheels": dict(sorted(build.wheel_sha256.items())),
        "torch": torch_sha256,
        "extras": sorted(extras),
        "python": "{}.{}".format(*sys.version_info[:2]),
        "bytecode": True,
        **({"pins": hashlib.sha256(pins.encode()).hexdigest()} if pins else {}),
    }
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()


def environment(
    build: BuildResult,
    torch_wheel: Path,
    extras: list[str],
    cache: Path,
    pins: Path | None = None,
    excludes: Sequence[str] = (),
) -> Path:
    """The python of a venv under `cache/envs/` holding torch, the backend wheels and their test extras; with
    `pins` (a constraints file of `name==version` lines), the third-party packages at exactly those versions;
    without the `excludes` (torch's triton, for a device that never loads it).

    Reused when its recorded key matches; made again otherwise. Raises EnvError for a failed build, for a torch
    wheel other than the one the build's manifest says it was compiled against, and for an install that does not
    resolve (a backend that pins another torch, say), with uv's first error line.
    """
    from .cores import wheel_sha256

    if not build.ok:
        raise EnvError(f"no environment for a failed build: {build.first_error or 'see ' + build.log}")
    if not torch_wheel.is_file():
        raise EnvError(f"torch wheel not found: {torch_wheel}")
    for dist, path in build.wheels.items():
        if not Path(path).is_file():
            raise EnvError(f"wheel of {dist} not found: {path}")
    torch_sha = wheel_sha256(torch_wheel)
    built_against = _built_against(build)
    if built_against and built_against != torch_sha:
        raise EnvError(
            f"the backend wheels were built against torch {built_against[:12]}, not {torch_wheel.name} "
            f"({torch_sha[:12]}): a native extension only loads with the torch it was compiled against"
        )
    pinned = pins.read_text(encoding="utf-8") if pins is not None else ""
    key = environment_key(build, torch_sha, extras, pinned, excludes)
    root = cache / "envs"
    path = root / key[:16]
    record = {"key": key, "torch": torch_wheel.name, "wheels": build.wheel_sha256, "extras": sorted(extras)}
    with locked(root / f".{key[:16]}.lock"):
        python = python_of(path)
        if recorded_key(path) == key and python.exists():
            mark_used(path)
            return python
        if path.exists():
            shutil.rmtree(path)  # ours: an interrupted or stale install under cache/envs
        log = root / f"{key[:16]}.log"
        log.write_text("")
        python = venv(path, cache, log)
        built = list(dict.fromkeys(Path(p).parent for p in build.wheels.values()))  # a backend's and the CI's own
        wanted = [str(torch_wheel), *requirements(build, extras)]
        constraint = ["--constraint", str(pins)] if pins is not None else []
        install(python, [*constraint, *wanted], cache, [torch_wheel.parent, *built], log, True, excludes)
        (path / KEY_FILE).write_text(json.dumps(record, indent=1, sort_keys=True) + "\n")
        mark_used(path)
    return python


def _built_against(build: BuildResult) -> str:
    """The torch sha256 the build's manifest (beside its log) records for native wheels, or "" when there is none
    (no manifest, or wheels that are not native: they load with any torch)."""
    if not build.log:
        return ""
    try:
        manifest = json.loads((Path(build.log).parent / "manifest.json").read_text())
    except (OSError, ValueError):
        return ""
    if isinstance(manifest, dict) and manifest.get("native") is False:
        return ""
    torch = manifest.get("torch") if isinstance(manifest, dict) else None
    return str(torch.get("sha256", "")) if isinstance(torch, dict) else ""


def recorded_key(path: Path) -> str:
    """The key an environment recorded after its complete install ("" for none: missing or interrupted)."""
    try:
        return str(json.loads((path / KEY_FILE).read_text()).get("key", ""))
    except (OSError, ValueError, AttributeError):
        return ""
