"""Where a core comes from besides a release: a nightly (by date, or the one built from the dispatched commit), a
wheel file or URL (a CI-built wheel, `{sha}` standing for the dispatched commit), or a source build at a commit by
a configured command (PyTorch's `pip wheel --no-build-isolation .`, or a vendor's script).

Each source has a name (`nightly`, `ci-wheel`, `source`...), which names its combinations (`core@nightly`) so their
history follows the source while its wheel moves; the wheel it yields lies in `cache/wheelhouse/torch-NAME/` with
the same completion marker a release's folder has, so everything after this step treats it as any core.
"""

from __future__ import annotations

import datetime
import fcntl
import hashlib
import os
import re
import shlex
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from crcr.ci import cores, remote_wheels, worktrees

#: The sources a `core.versions` mapping names, one each.
KINDS = ("nightly", "wheel", "build")
NIGHTLY_INDEX = "https://download.pytorch.org/whl/nightly/cpu"
NIGHTLY_INDEX_ENV = "TRIBUTARY_TORCH_NIGHTLY_INDEX"
DISPATCHED = "dispatched"
#: How many of the newest nightlies are asked for their commit before giving up on the dispatched one.
NIGHTLY_SEARCH = 14
_DEV_DATE = re.compile(r"dev(\d{8})")


@dataclass(frozen=True)
class CoreSource:
    """One entry of `core.versions` that is not a release version."""

    name: str  # what its combinations are called after: core@NAME
    kind: str  # nightly, wheel or build
    spec: str  # nightly: a date (YYYY-MM-DD) or "dispatched"; wheel: a path or URL; build: the command
    index: str = ""  # nightly: the index (default $TRIBUTARY_TORCH_NIGHTLY_INDEX, else PyTorch's nightly CPU index)
    checkout: str = ""  # build: the PyTorch checkout it builds in (a worktree at the commit)
    ref: str = ""  # build: the commit or ref to build ("" = the dispatched commit)


def obtain(
    source: CoreSource, cache: Path, commit: str, say: Callable[[str], None] = lambda _: None, env: dict | None = None
) -> Path:
    """The source's torch wheel for the dispatched `commit` ("" when nothing was dispatched), in its wheelhouse
    folder; reused when the folder already holds what the source resolves to."""
    env = dict(os.environ if env is None else env)
    folder = cores.wheelhouse(source.name, cache)
    folder.mkdir(parents=True, exist_ok=True)
    with (folder.parent / f".torch-{source.name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            if source.kind == "nightly":
                return _nightly(source, folder, commit, say, env)
            if source.kind == "wheel":
                return _wheel(source, folder, commit, say)
            return _build(source, folder, commit, cache, say, env)
        except remote_wheels.RemoteError as exc:
            raise cores.CoreError(f"core {source.name}: {exc}") from None
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _nightly(source: CoreSource, folder: Path, commit: str, say: Callable[[str], None], env: dict) -> Path:
    index = source.index or env.get(NIGHTLY_INDEX_ENV) or NIGHTLY_INDEX
    facts = {"source": "nightly", "index": index, "asked": source.spec}
    if source.spec != DISPATCHED:
        return _keep(folder, _dated(remote_wheels.compatible(index), source, index).url, facts, say)
    if not commit:
        raise cores.CoreError(f"core {source.name}: nightly: dispatched, but this run names no dispatched commit")
    recorded = cores.marker(folder)
    kept = folder / str(recorded.get("wheel", ""))
    if recorded.get("git_version") == commit and recorded.get("index") == index and kept.is_file():
        return kept  # the build of this commit is here already: the index need not be asked again
    chosen = _built_from(remote_wheels.compatible(index)[:NIGHTLY_SEARCH], commit, index, source.name, say)
    return _keep(folder, chosen.url, facts, say)


def _dated(wheels: list[remote_wheels.RemoteWheel], source: CoreSource, index: str) -> remote_wheels.RemoteWheel:
    """The newest of `wheels` versioned as the nightly of the source's date (2.N.0.devYYYYMMDD)."""
    day = source.spec.replace("-", "")
    dated = [w for w in wheels if (m := _DEV_DATE.search(str(w.version))) and m.group(1) == day]
    if not dated:
        newest = wheels[0].filename if wheels else "none"
        raise cores.CoreError(f"core {source.name}: {index} has no nightly of {source.spec} for this Python "
                              f"(newest: {newest})")  # fmt: skip
    return dated[0]


def _built_from(
    wheels: list[remote_wheels.RemoteWheel], commit: str, index: str, name: str, say: Callable[[str], None]
) -> remote_wheels.RemoteWheel:
    """The newest of `wheels` built from `commit`, each asked for its git_version without downloading it."""
    seen = []
    for wheel in wheels:
        built = remote_wheels.git_version(wheel.url)
        say(f"core {name}: {wheel.filename} was built from {built[:12] or 'an unrecorded commit'}")
        if built == commit:
            return wheel
        seen.append(f"{wheel.version} ({built[:12] or '?'})")
    listed = ", ".join(seen[:4]) or "none"
    raise cores.CoreError(f"core {name}: none of the {len(seen)} newest builds on {index} was built from "
                          f"{commit[:12]} (they are: {listed}); a PR's head is in no nightly, build it")  # fmt: skip


def _wheel(source: CoreSource, folder: Path, commit: str, say: Callable[[str], None]) -> Path:
    if "{sha}" in source.spec and not commit:
        raise cores.CoreError(f"core {source.name}: wheel: {source.spec} needs a dispatched commit for {{sha}}")
    where = source.spec.replace("{sha}", commit)
    return _keep(folder, where, {"source": "wheel", "asked": where}, say)


def _keep(folder: Path, where: str, facts: dict, say: Callable[[str], None]) -> Path:
    """The wheel at `where` in `folder`, downloaded unless the folder's marker says it already came from there."""
    recorded = cores.marker(folder)
    kept = folder / str(recorded.get("wheel", ""))
    if recorded.get("from") == where and kept.is_file():
        return kept
    say(f"fetching {where}")
    return _mark(folder, remote_wheels.download(where, folder), {**facts, "from": where})


def _build(source: CoreSource, folder: Path, commit: str, cache: Path, say: Callable[[str], None], env: dict) -> Path:
    ref = source.ref or commit
    if not ref:
        raise cores.CoreError(f"core {source.name}: build: no ref given and this run names no dispatched commit")
    checkout = Path(source.checkout).expanduser()
    try:
        sha = worktrees.resolve_ref(checkout, ref)
        tree = worktrees.checkout(checkout, sha, cache, folder="sources")
    except worktrees.WorktreeError as exc:
        raise cores.CoreError(f"core {source.name}: {exc}") from None
    key = hashlib.sha256(f"{sha}\0{source.spec}".encode()).hexdigest()
    recorded = cores.marker(folder)
    if recorded.get("from") == key and (folder / str(recorded.get("wheel", ""))).is_file():
        return folder / str(recorded["wheel"])
    out = folder / f"build-{sha[:12]}"
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    command = [part.replace("{out}", str(out)).replace("{source}", str(tree)) for part in shlex.split(source.spec)]
    log = folder / f"build-{sha[:12]}.log"
    say(f"core {source.name}: building {sha[:12]} ({shlex.join(command)}; log {log})")
    with log.open("w") as handle:
        done = subprocess.run(command, cwd=tree, stdout=handle, stderr=subprocess.STDOUT, env=env, check=False)
    built = sorted(out.glob("torch-*.whl"))
    if done.returncode != 0 or len(built) != 1:
        lines = [line.strip() for line in log.read_text(errors="replace").splitlines() if line.strip()]
        why = f"exit {done.returncode}: {lines[-1] if lines else 'no output'}" if done.returncode else (
            f"it left {len(built)} torch wheels in {out}, not one")  # fmt: skip
        raise cores.CoreError(f"core {source.name}: the build of {sha[:12]} failed ({why}; log {log})")
    wheel = folder / built[0].name
    built[0].replace(wheel)
    return _mark(folder, wheel, {"source": "build", "commit": sha, "command": source.spec, "from": key})


def _mark(folder: Path, wheel: Path, facts: dict) -> Path:
    """Record `wheel` as the folder's core, with its commit, and drop the wheels of earlier resolutions."""
    for old in folder.glob("torch-*.whl"):
        if old != wheel:
            old.unlink()
    obtained = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    return cores.mark(folder, wheel, {**facts, "git_version": cores.wheel_git_version(wheel), "obtained": obtained})
