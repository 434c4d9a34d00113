"""`crcr gc`: give back the disk a Tributary cache (`crcr ci --cache`, default .tributary) has filled.

What goes (an item goes when it is beyond the count OR older than the age):
  builds/, envs/, buildenvs/  each kind: beyond the --keep-builds most recently used, or unused for --older-than days
  runs/                       beyond the --keep-runs newest, or started more than --older-than days ago; the results/
                              index entries naming a removed run go with it (history.sqlite keeps every run's results:
                              attribution and regressions read them)
  worktrees/                  unused for --older-than days, unless a build kept was built from that commit
  wheelhouse/                 only with --wheels: unused for --older-than days and not a torch version the CI config
                              names (gigabytes that take long to fetch again)
  uv-cache/                   only with --uv-cache: `uv cache prune`

Nothing in use goes: gc takes, without waiting, the lock the pipeline holds while it makes a build or venv (or
compiles in a worktree) and skips the item, saying so, when another process holds it; a run without its record.json,
younger than the age, is still being written. gc stays inside the cache: symlinks are removed, never followed; only
folders named as the pipeline names them are candidates; a folder holding none of a cache's entries is refused.

The figure freed is disk blocks released: a hardlinked file (a venv's files are hardlinks into the uv cache) counts
once, and only when every link to it goes; removed files still linked from elsewhere are reported apart.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import math
import os
import re
import shutil
import stat
import subprocess
import time
from collections import defaultdict
from collections.abc import Iterable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from crcr.ci import build, envs, reuse, worktrees
from crcr.ci.ciconfig import load_ci_config
from crcr.ci.usage import last_used

DAY = 86400.0
DEFAULT_CONFIG = Path("configs/ci.yaml")
#: Each kind of folder gc removes, and the names the pipeline gives its entries: nothing else is a candidate.
KINDS = {
    "builds": re.compile(r"[0-9a-f]{12}-([0-9a-f]{12}|any)"),  # against one torch, or any (not native)
    "envs": re.compile(r"[0-9a-f]{16}"),
    "buildenvs": re.compile(r"[0-9a-f]{12}-[0-9a-f]{8}"),
    "worktrees": re.compile(r"[0-9a-f]{12}"),
    "runs": re.compile(r"\d{8}T\d{6}Z-[0-9a-f]+"),
    "wheelhouse": re.compile(r"torch-[0-9][0-9A-Za-z.+!_-]*"),
}
#: What a cache holds; a folder with none of these is not one.
KNOWN = (*KINDS, reuse.RESULTS, envs.UV_CACHE, "history.sqlite", "durations.json")
_LABELS = {"buildenvs": "build venv"}
_RUN_TIME = "%Y%m%dT%H%M%SZ"


class GcError(Exception):
    """The cache cannot be collected (not a cache, a removal failed); the message is one line."""


@dataclass(frozen=True)
class Policy:
    """What goes: see the module's first lines."""

    cutoff: float  # epoch seconds: last used (a run: started) before this is old
    keep_builds: int  # of each of builds, envs, buildenvs: the most recently used kept
    keep_runs: int
    wheels: bool = False
    cores: frozenset[str] = frozenset()  # torch versions whose wheelhouses stay


@dataclass(frozen=True)
class Item:
    """A folder gc may remove, the files that go with it, and what says it is in use."""

    kind: str
    path: Path
    used: float  # last use (a run: its start), epoch seconds
    lock: Path | None = None  # held by the pipeline while it makes or changes the folder
    also: tuple[Path, ...] = ()
    busy: str = ""  # why it is in use though no lock says so

    @property
    def name(self) -> str:
        return f"{self.kind}/{self.path.name}"


class Tally:
    """Disk blocks released by removing trees: a file counts once, when the last of its links is among them."""

    def __init__(self) -> None:
        self._links: dict[tuple[int, int], tuple[int, int]] = {}  # (device, inode) -> (links not yet seen, bytes)

    def count(self, *paths: Path) -> int:
        """The bytes removing `paths` (with everything under them) releases, given every tree counted before."""
        freed = 0
        for info in _lstats(paths):
            key = (info.st_dev, info.st_ino)
            left, size = self._links.pop(key, (info.st_nlink, info.st_blocks * 512))
            if left <= 1 or stat.S_ISDIR(info.st_mode):
                freed += size
            else:
                self._links[key] = (left - 1, size)
        return freed

    @property
    def shared(self) -> int:
        """Bytes of counted files still linked from elsewhere (a venv's files from the uv cache)."""
        return sum(size for _left, size in self._links.values())


def _lstats(paths: Iterable[Path]) -> Iterator[os.stat_result]:
    """Every entry of these trees, symlinks listed and never followed."""
    for path in paths:
        if not os.path.lexists(path):
            continue
        top = os.lstat(path)
        yield top
        if stat.S_ISDIR(top.st_mode):
            for root, folders, files in os.walk(path):
                yield from (os.lstat(os.path.join(root, name)) for name in (*folders, *files))


def human(size: float) -> str:
    """412.3 MB: decimal units, as `df -H` shows them."""
    units = ("B", "KB", "MB", "GB", "TB")
    unit = units[0]
    for unit in units:
        if size < 1000 or unit == units[-1]:
            break
        size /= 1000
    return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"


def _real_dir(path: Path) -> bool:
    return path.is_dir() and not path.is_symlink()


def check_cache(path: Path) -> Path:
    """The cache, resolved; a folder holding none of a cache's entries is refused, so a typo (or `/`) is never
    collected."""
    if not path.is_dir():
        raise GcError(f"{path}: no such folder (--cache names a Tributary cache, e.g. .tributary)")
    cache = path.resolve()
    if not any(os.path.lexists(cache / name) for name in KNOWN):
        raise GcError(f"{path} does not look like a Tributary cache (it holds none of {', '.join(KNOWN)})")
    return cache


def _folders(cache: Path, kind: str) -> list[Path]:
    """The real sub-folders of `cache/kind` named as the pipeline names them (none when `kind` is a symlink)."""
    root = cache / kind
    if not _real_dir(root):
        return []
    return sorted(path for path in root.iterdir() if KINDS[kind].fullmatch(path.name) and _real_dir(path))


def _items(cache: Path, kind: str) -> list[Item]:
    """The folders of one kind, each with its last use and the lock the pipeline holds over it."""
    found = []
    for path in _folders(cache, kind):
        try:
            used = last_used(path)
        except FileNotFoundError:
            continue  # removed meanwhile: the pipeline makes a stale venv again
        if kind == "worktrees":  # held while a build compiles in it
            lock = cache / "builds" / f".{path.name}.worktree.lock"
        else:
            lock = path.parent / f".{path.name}.lock"
        log = (path.parent / f"{path.name}.log",) if kind == "envs" else ()
        found.append(Item(kind, path, used, lock, log))
    return found


def _runs(cache: Path, cutoff: float) -> list[Item]:
    """The run folders, each with its start (from its id) and the results index entries naming it."""
    index = _results_by_run(cache)
    found = []
    for path in _folders(cache, "runs"):
        try:
            started = datetime.strptime(path.name.split("-")[0], _RUN_TIME).replace(tzinfo=UTC).timestamp()
        except ValueError:
            continue  # not a time: not a run id
        writing = started >= cutoff and not (path / "record.json").exists()
        busy = "no record.json yet: still being written" if writing else ""
        found.append(Item("runs", path, started, also=tuple(index.get(path.name, ())), busy=busy))
    return found


def _results_by_run(cache: Path) -> dict[str, list[Path]]:
    """The results index's entries (`results/<key>.json`, each naming a run), by run id."""
    folder = cache / reuse.RESULTS
    found: dict[str, list[Path]] = defaultdict(list)
    if not _real_dir(folder):
        return found
    for entry in sorted(folder.glob("*.json")):
        if entry.is_symlink() or not entry.is_file():
            continue
        try:
            run_id = json.loads(entry.read_text(encoding="utf-8")).get("run_id")
        except (OSError, ValueError, AttributeError):
            continue
        if isinstance(run_id, str):
            found[run_id].append(entry)
    return found


def _built_from(build_folder: Path) -> str:
    """The sha12 of the commit a build's manifest says it was built from ("" when unknown)."""
    try:
        manifest = json.loads((build_folder / build.MANIFEST).read_text())
        return str(manifest["backend_sha"])[:12]
    except (OSError, ValueError, KeyError, TypeError):
        return ""


def _stale(items: list[Item], keep: int | None, cutoff: float) -> list[Item]:
    """Those used (started) before `cutoff` and those beyond the `keep` most recent, oldest first."""
    newest = sorted(items, key=lambda item: item.used, reverse=True)
    chosen = [item for rank, item in enumerate(newest) if item.used < cutoff or (keep is not None and rank >= keep)]
    return chosen[::-1]


def plan(cache: Path, policy: Policy) -> dict[str, list[Item]]:
    """What goes, by kind, in the order gc removes it."""
    builds = _items(cache, "builds")
    chosen = {"builds": _stale(builds, policy.keep_builds, policy.cutoff)}
    for kind in ("envs", "buildenvs"):
        chosen[kind] = _stale(_items(cache, kind), policy.keep_builds, policy.cutoff)
    kept = {_built_from(item.path) for item in builds if item not in chosen["builds"]}
    old = _stale(_items(cache, "worktrees"), None, policy.cutoff)
    chosen["worktrees"] = [item for item in old if item.path.name not in kept]
    chosen["runs"] = _stale(_runs(cache, policy.cutoff), policy.keep_runs, policy.cutoff)
    if policy.wheels:
        old = _stale(_items(cache, "wheelhouse"), None, policy.cutoff)
        chosen["wheelhouse"] = [item for item in old if item.path.name.removeprefix("torch-") not in policy.cores]
    return chosen


@contextmanager
def _unless_locked(lock: Path | None, create: bool) -> Iterator[bool]:
    """Hold `lock` exclusively, as the pipeline does, if no other process holds it; yields whether it is held here.

    Only a lock file that exists can be held; to remove, gc creates it, so a process that comes to make the folder
    meanwhile waits for gc to finish."""
    if lock is None or not (create or lock.exists()):
        yield True
        return
    lock.parent.mkdir(parents=True, exist_ok=True)
    handle = os.open(lock, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW, 0o644)
    try:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            free = True
        except BlockingIOError:
            free = False
        yield free
    finally:
        os.close(handle)  # releases the lock


def _remove(item: Item, tally: Tally, dry_run: bool) -> int | None:
    """Remove one item (dry: only measure it); its size, or None when it is in use and stays."""
    if item.busy:
        print(f"skipped {item.name} ({item.busy})")
        return None
    with _unless_locked(item.lock, create=not dry_run) as free:
        if not free:
            print(f"skipped {item.name} (in use: another process holds its lock)")
            return None
        size = tally.count(item.path, *item.also)
        if not dry_run:
            shutil.rmtree(item.path)
            for path in item.also:
                path.unlink(missing_ok=True)
    print(f"{'would remove' if dry_run else 'removed'} {item.name} ({human(size)})")
    return size


def _guard(cache: Path, items: list[Item], dry_run: bool) -> AbstractContextManager[object]:
    """Worktrees go while no checkout runs (a checkout holds `worktrees/.lock` while it adds or checks one)."""
    if items and items[0].kind == "worktrees" and not dry_run:
        return envs.locked(cache / "worktrees" / ".lock")
    return nullcontext()


def prune_uv_cache(cache: Path, dry_run: bool) -> int | None:
    """`uv cache prune` on the cache's uv cache; the bytes it released, or None when nothing ran."""
    folder = cache / envs.UV_CACHE
    if not _real_dir(folder):
        print(f"skipped {envs.UV_CACHE}/ (there is none)")
        return None
    if dry_run:
        print(f"would prune {envs.UV_CACHE}/ (uv cache prune: what it frees is known once it runs)")
        return None
    before = Tally().count(folder)
    result = subprocess.run(envs.uv(cache, "cache", "prune"), capture_output=True, text=True, check=False)
    if result.returncode != 0:
        lines = (result.stderr + result.stdout).strip().splitlines() or [f"exit status {result.returncode}"]
        raise GcError(f"uv cache prune failed: {lines[-1].strip()}")
    freed = max(0, before - Tally().count(folder))
    print(f"pruned {envs.UV_CACHE}/ ({human(freed)})")
    return freed


def _label(kind: str, count: int) -> str:
    singular = _LABELS.get(kind, kind.removesuffix("s"))
    return f"{count} {singular}{'' if count == 1 else 's'}"


def summary(freed: int, parts: list[str], shared: int, dry_run: bool) -> str:
    """`freed 6.2 GB (3 builds, 2 envs, 10 runs)`, and what stays on disk because it is linked from elsewhere."""
    what = ", ".join(parts) or "nothing removed"
    line = f"{'would free' if dry_run else 'freed'} {human(freed)} ({what})"
    if shared:
        line += f"; another {human(shared)} stays on disk, hardlinked from elsewhere (the uv cache)"
    return line


def _cores(config: str | None) -> frozenset[str]:
    """The torch versions the CI config names; none when no config was named and the default is absent."""
    path = Path(config) if config else DEFAULT_CONFIG
    if config is None and not path.is_file():
        return frozenset()
    return frozenset(load_ci_config(path).cores)


def collect(cache: Path, repo: Path, policy: Policy, dry_run: bool = False, uv_cache: bool = False) -> str:
    """Remove what `policy` says goes (dry: only say it), one line each; returns the summary line."""
    for kind in KINDS:
        if (cache / kind).is_symlink():
            print(f"skipped {kind}/ (a symlink: gc stays inside the cache)")
    tally, parts, freed = Tally(), [], 0
    for kind, items in plan(cache, policy).items():
        with _guard(cache, items, dry_run):
            sizes = [size for item in items if (size := _remove(item, tally, dry_run)) is not None]
        if sizes:
            parts.append(_label(kind, len(sizes)))
            freed += sum(sizes)
            if kind == "worktrees" and not dry_run:
                worktrees.prune(repo, cache)  # git forgets the worktrees whose folders are gone
    if uv_cache and (pruned := prune_uv_cache(cache, dry_run)) is not None:
        parts.append("uv cache pruned")
        freed += pruned
    return summary(freed, parts, tally.shared, dry_run)


def _gc(args: argparse.Namespace) -> int:
    cache = check_cache(Path(args.cache))
    cores = _cores(args.config) if args.wheels else frozenset()
    policy = Policy(time.time() - args.older_than * DAY, args.keep_builds, args.keep_runs, args.wheels, cores)
    try:
        print(collect(cache, Path(args.repo).resolve(), policy, args.dry_run, args.uv_cache))
    except OSError as exc:
        raise GcError(f"{exc.filename or cache}: {exc.strerror or exc}") from None
    return 0


def _count(text: str) -> int:
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"expected a whole number of 0 or more, not {text!r}")
    return int(text)


def _days(text: str) -> float:
    try:
        days = float(text)
    except ValueError:
        days = math.nan
    if not days >= 0:
        raise argparse.ArgumentTypeError(f"expected a number of days of 0 or more, not {text!r}")
    return days


def add_gc(sub: argparse._SubParsersAction) -> None:
    gc = sub.add_parser(
        "gc",
        help="free disk: remove old builds, venvs, worktrees and runs from the cache (--dry-run says what would go)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    gc.add_argument(
        "--cache", default=".tributary", metavar="DIR", help="the cache `crcr ci` fills (default: .tributary)"
    )
    gc.add_argument(
        "--repo", default=".", metavar="PATH", help="the backend repository, for git's worktree records (default: .)"
    )
    gc.add_argument(
        "--config",
        metavar="FILE",
        help="the CI config: with --wheels, its torch versions' wheelhouses stay (default: configs/ci.yaml)",
    )
    gc.add_argument(
        "--older-than",
        type=_days,
        default=14.0,
        metavar="DAYS",
        help="what was last used (a run: started) this many days ago goes (default: 14)",
    )
    gc.add_argument("--keep-runs", type=_count, default=20, metavar="N", help="newest runs kept (default: 20)")
    gc.add_argument(
        "--keep-builds",
        type=_count,
        default=6,
        metavar="N",
        help="most recently used builds kept, and as many envs and build venvs (default: 6)",
    )
    gc.add_argument("--wheels", action="store_true", help="also remove torch wheelhouses (see above)")
    gc.add_argument("--uv-cache", action="store_true", help="also `uv cache prune` the cache's uv-cache/")
    gc.add_argument("--dry-run", action="store_true", help="say what would go and how much; remove nothing")
    gc.set_defaults(run=_gc)


__all__ = ["GcError", "Item", "Policy", "Tally", "add_gc", "check_cache", "collect", "human", "plan"]
