"""Core candidates: torch wheels, each fetched once into its own find-links folder under the cache.

A core candidate is a torch wheel, identified by its bytes (two builds can share a version). Each version gets
`cache/wheelhouse/torch-VERSION/`, filled by `pip download torch==VERSION` *with* its dependencies, so the folder is a
complete find-links source for uv (a CUDA build's nvidia wheels are ~3 GB: fetched once, never again). The folder
counts as complete only once a marker is written after a successful download; an interrupted download is resumed
(pip skips files already there). Nothing is ever deleted.
"""

from __future__ import annotations

import fcntl
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import urllib.parse
import urllib.request
import zipfile
from pathlib import Path

from . import remote_wheels
from .digest import file_sha256

INDEX_ENV = "TRIBUTARY_TORCH_INDEX"
MARKER = ".tributary-complete.json"
_VERSION = re.compile(r"[0-9][0-9A-Za-z.+!_-]*")
#: A core that is no release goes by a name of its own (`nightly`, `ci-wheel`): a folder name, never a path.
CORE_NAME = re.compile(r"[a-z][a-z0-9_-]*(\.[a-z0-9_-]+)*\Z")
_HASHES: dict[tuple[str, int, int], str] = {}
_RESOLVED: dict[tuple[str, str], tuple[str, str]] = {}  # (version, index) -> pip's (version, sha256), per process


class CoreError(Exception):
    """A torch wheel could not be found or fetched; the message is one line."""


def wheelhouse(version: str, cache: Path) -> Path:
    """The find-links folder for one torch version."""
    return cache / "wheelhouse" / f"torch-{version}"


def wheel_version(wheel: Path) -> str:
    """The version part of a wheel's file name, e.g. '2.13.0+cpu'."""
    return wheel.name.split("-")[1]


def wheel_git_version(wheel: Path) -> str:
    """The commit a torch wheel was built from (`torch.version.git_version`, read from the wheel's
    `torch/version.py`), "" when it does not say: what tells a release or a nightly from the dispatched commit."""
    try:
        with zipfile.ZipFile(wheel) as archive:
            text = archive.read("torch/version.py").decode("utf-8", "replace")
    except (OSError, KeyError, zipfile.BadZipFile):
        return ""
    return remote_wheels.commit_in(text)


def _matches(wheel: Path, version: str) -> bool:
    found = wheel_version(wheel)
    return found == version or found.split("+")[0] == version


def _find(folder: Path, version: str) -> Path | None:
    wheels = [w for w in sorted(folder.glob("torch-*.whl")) if _matches(w, version)]
    return wheels[-1] if wheels else None


def pip_python() -> str:
    """An interpreter that has pip: uv-made venvs (nox's, ours) have none, their base interpreter usually does."""
    if importlib.util.find_spec("pip") is not None:
        return sys.executable
    for candidate in (getattr(sys, "_base_executable", ""), shutil.which("python3") or ""):
        if not candidate:
            continue
        probe = subprocess.run([candidate, "-m", "pip", "--version"], capture_output=True, check=False)
        if probe.returncode == 0:
            return candidate
    raise CoreError("no Python with pip found to download torch (install pip for this interpreter)")


def torch_wheel(version: str, cache: Path, env: dict[str, str] | None = None) -> Path:
    """The torch==VERSION wheel, fetched with its dependencies into `cache/wheelhouse/torch-VERSION/` the first time.

    pip's own configuration decides where it comes from (its indexes and find-links); `$TRIBUTARY_TORCH_INDEX`
    (e.g. https://download.pytorch.org/whl/cpu) replaces the index for users elsewhere. A core that is no release
    (a nightly, a CI-built wheel, a source build: `crcr.ci.coresource`) is found by its name once it was obtained.
    """
    if not _VERSION.fullmatch(version):
        found = fetched(version, cache) if CORE_NAME.match(version) else None
        if found is None:
            where = wheelhouse(version, cache)
            raise CoreError(f"core {version!r}: not a torch version, and no core of that name was obtained into "
                            f"{where} (ci.yaml's core.versions says where it comes from)")  # fmt: skip
        return found
    env = dict(os.environ if env is None else env)
    folder = wheelhouse(version, cache)
    folder.mkdir(parents=True, exist_ok=True)
    with (folder.parent / f".torch-{version}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # parallel legs asking for one version download it once
        try:
            return _fetch(version, folder, env)
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _fetch(version: str, folder: Path, env: dict[str, str]) -> Path:
    marker = folder / MARKER
    if marker.is_file():
        found = _find(folder, version)
        if found is not None:
            return found
    command = [pip_python(), "-m", "pip", "download", "--only-binary=:all:", "--dest", str(folder)]
    index = env.get(INDEX_ENV, "")
    if index:
        command += ["--index-url", index]
    command.append(f"torch=={version}")
    log = folder / "download.log"
    with log.open("a") as out:
        result = subprocess.run(command, stdout=out, stderr=subprocess.STDOUT, text=True, check=False, env=env)
    found = _find(folder, version)
    if result.returncode != 0 or found is None:
        lines = [line.strip() for line in log.read_text(errors="replace").splitlines() if line.strip()]
        errors = [line for line in lines if line.startswith("ERROR")]
        last = (errors or lines or ["no output"])[-1]
        raise CoreError(f"could not fetch torch=={version} into {folder}: {last} (set {INDEX_ENV} to an index URL)")
    return mark(folder, found, {"index": index, "files": sorted(p.name for p in folder.glob("*.whl"))})


def mark(folder: Path, wheel: Path, facts: dict[str, object]) -> Path:
    """Record `wheel` as the folder's complete core: the marker everything after the fetch trusts (the wheel's name,
    version, sha256 and file state), with `facts` about where it came from."""
    stat = wheel.stat()
    record = {
        **facts,
        "version": wheel_version(wheel),
        "wheel": wheel.name,
        "sha256": wheel_sha256(wheel),
        "size": stat.st_size,
        "mtime_ns": stat.st_mtime_ns,
    }
    (folder / MARKER).write_text(json.dumps(record, indent=1) + "\n")
    return wheel


def marker(folder: Path) -> dict[str, object]:
    """The folder's completion marker, {} when there is none (an interrupted or never-started fetch)."""
    try:
        data = json.loads((folder / MARKER).read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def fetched(version: str, cache: Path) -> Path | None:
    """The torch==VERSION wheel (or the named core's) if a complete fetch left it in the wheelhouse (nothing is
    locked or made)."""
    folder = wheelhouse(version, cache)
    if _VERSION.fullmatch(version):
        found = _find(folder, version)
    elif CORE_NAME.match(version):
        found = folder / str(marker(folder).get("wheel"))
    else:
        return None
    return found if found is not None and found.is_file() and marker(found.parent).get("wheel") == found.name else None


def peek(version: str, cache: Path, env: dict[str, str] | None = None) -> tuple[str, str, bool]:
    """(the wheel's version, its sha256 or "", whether it is fetched) for torch==VERSION, without fetching it: from
    the wheelhouse's marker when it was fetched, else from pip's resolution (`pip install --dry-run --report`), whose
    hash comes from the index (or pip's hashing of a local file); "" when the index gives none."""
    found = fetched(version, cache)
    if found is not None:
        return wheel_version(found), str(marker(found.parent).get("sha256", "")), True
    if not _VERSION.fullmatch(version):
        return "", "", False  # a named core (a nightly, a CI wheel, a source build) is known once obtained
    env = dict(os.environ if env is None else env)
    asked = (version, env.get(INDEX_ENV, ""))
    if asked not in _RESOLVED:
        _RESOLVED[asked] = _resolve(version, env)
    return (*_RESOLVED[asked], False)


def _resolve(version: str, env: dict[str, str]) -> tuple[str, str]:
    """pip's choice for torch==VERSION: (its version, its sha256 or "")."""
    with tempfile.TemporaryDirectory() as scratch:
        report = Path(scratch) / "report.json"
        command = [pip_python(), "-m", "pip", "install", "--dry-run", "--no-deps", "--ignore-installed", "--quiet",
                   "--only-binary=:all:", "--report", str(report)]  # fmt: skip
        if env.get(INDEX_ENV):
            command += ["--index-url", env[INDEX_ENV]]
        result = subprocess.run([*command, f"torch=={version}"], capture_output=True, text=True, env=env)
        try:
            chosen = json.loads(report.read_text())["install"][0]
        except (OSError, ValueError, KeyError, IndexError) as exc:
            last = [line for line in result.stderr.splitlines() if line.startswith("ERROR")] or [str(exc)]
            raise CoreError(f"torch=={version} does not resolve: {last[-1]} (set {INDEX_ENV} to an index URL)") from exc
    info = chosen.get("download_info", {})
    sha = str(info.get("archive_info", {}).get("hashes", {}).get("sha256", ""))
    local = Path(urllib.request.url2pathname(urllib.parse.urlparse(info.get("url", "")).path))
    if not sha and str(info.get("url", "")).startswith("file:") and local.is_file():
        sha = wheel_sha256(local)  # a local find-links file pip did not hash: reading it is no download
    return str(chosen.get("metadata", {}).get("version", version)), sha


def wheel_sha256(path: Path) -> str:
    """The wheel's sha256: what identifies a core (the version is for people).

    Remembered per file state (path, size, mtime), in this process and in the marker of a folder we filled, so a
    600 MB wheel is not read again on every run.
    """
    stat = path.stat()
    key = (str(path.resolve()), stat.st_size, stat.st_mtime_ns)
    if key not in _HASHES:
        recorded = marker(path.parent)
        if recorded.get("wheel") == path.name and (recorded.get("size"), recorded.get("mtime_ns")) == key[1:]:
            _HASHES[key] = str(recorded["sha256"])
            return _HASHES[key]
        _HASHES[key] = file_sha256(path)
    return _HASHES[key]
