"""`crcr gc` on a cache of real files (and a real git worktree): what goes, what stays, and how much is freed."""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import time
import zipfile
from pathlib import Path

import pytest
from crcr.ci import envs, history, worktrees
from crcr.ci.gc import human
from crcr.ci.usage import STAMP, last_used, mark_used
from crcr.cli import main

DAY = 86400.0
MB = b"\x5a" * 1_000_000


def ago(days: float) -> float:
    return time.time() - days * DAY


def folder(path: Path, files: dict[str, bytes], used_days_ago: float, stamp: bool = True) -> Path:
    """A folder holding `files`, last used that many days ago (by its stamp, else by its own mtime)."""
    for name, data in files.items():
        (path / name).parent.mkdir(parents=True, exist_ok=True)
        (path / name).write_bytes(data)
    when = ago(used_days_ago)
    if stamp:
        mark_used(path)
        os.utime(path / STAMP, (when, when))
    os.utime(path, (when, when))
    return path


def run_folder(cache: Path, days_ago: float, record: bool = True) -> Path:
    run_id = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(ago(days_ago))) + "-abc123"
    path = cache / "runs" / run_id
    files = {"report.html": b"<html></html>", "shard-0.log": MB}
    return folder(path, {**files, "record.json": b"{}"} if record else files, days_ago, stamp=False)


def du(*paths: Path) -> int:
    """Disk blocks under these paths, each inode once."""
    seen: dict[tuple[int, int], int] = {}
    for top in paths:
        found = [top] + [Path(root) / name for root, dirs, files in os.walk(top) for name in (*dirs, *files)]
        for path in found:
            info = path.lstat()
            seen[(info.st_dev, info.st_ino)] = info.st_blocks * 512
    return sum(seen.values())


def listing(root: Path) -> list[tuple[str, int]]:
    return sorted((str(p.relative_to(root)), p.lstat().st_size) for p in root.rglob("*"))


def gc(cache: Path, *args: str) -> int:
    return main(["gc", "--cache", str(cache), "--repo", str(cache.parent), *args])


def hexname(n: int, width: int) -> str:
    return f"{n:0{width}x}"


@pytest.fixture
def cache(tmp_path: Path) -> Path:
    cache = tmp_path / ".tributary"
    cache.mkdir()
    history.runs(cache / "history.sqlite")  # a real, empty history
    (cache / "durations.json").write_text("{}\n")
    return cache


def test_removes_what_is_beyond_the_count_or_too_old(cache: Path, capsys: pytest.CaptureFixture[str]) -> None:
    builds = [
        folder(cache / "builds" / f"{hexname(i, 12)}-{'b' * 12}", {"w.whl": MB}, d) for i, d in enumerate((30, 1, 2, 3))
    ]
    env_old = folder(cache / "envs" / hexname(1, 16), {"lib/torch.so": MB}, 20)
    env_new = folder(cache / "envs" / hexname(2, 16), {"lib/torch.so": MB}, 1)
    for env in (env_old, env_new):
        (env.parent / f"{env.name}.log").write_text("uv pip install\n")
    buildenvs = cache / "buildenvs"
    buildenv_old = folder(buildenvs / f"{hexname(3, 12)}-{hexname(3, 8)}", {"bin/python": b"x"}, 30, stamp=False)
    buildenv_new = folder(buildenvs / f"{hexname(4, 12)}-{hexname(4, 8)}", {"bin/python": b"x"}, 1, stamp=False)
    runs = [run_folder(cache, days) for days in (40, 3, 2, 1)]
    results = cache / "results"
    results.mkdir()
    entries = {}
    for name, run_id in (("gone", runs[0].name), ("kept", runs[3].name), ("elsewhere", "20200101T000000Z-ffffff")):
        entries[name] = results / f"{name}.json"
        entries[name].write_text(json.dumps({"run_id": run_id, "combination": "primary"}))
    history_bytes = (cache / "history.sqlite").read_bytes()
    removed = [builds[0], builds[3], env_old, buildenv_old, runs[0], runs[1]]
    expected = du(*removed, env_old.parent / f"{env_old.name}.log", entries["gone"])

    assert gc(cache, "--keep-builds", "2", "--keep-runs", "2") == 0

    out = capsys.readouterr().out.splitlines()
    for path in removed:
        assert not path.exists()
        assert any(line.startswith(f"removed {path.parent.name}/{path.name} (") for line in out)
    for path in (builds[1], builds[2], env_new, buildenv_new, runs[2], runs[3], entries["kept"], entries["elsewhere"]):
        assert path.exists()
    assert not (cache / "envs" / f"{env_old.name}.log").exists()
    assert (cache / "envs" / f"{env_new.name}.log").exists()
    assert not entries["gone"].exists()
    assert (cache / "history.sqlite").read_bytes() == history_bytes  # the history keeps every run
    assert out[-1] == f"freed {human(expected)} (2 builds, 1 env, 1 build venv, 2 runs)"


def test_dry_run_removes_nothing_and_says_so(cache: Path, capsys: pytest.CaptureFixture[str]) -> None:
    old = folder(cache / "builds" / f"{'a' * 12}-{'b' * 12}", {"w.whl": MB}, 30)
    run = run_folder(cache, 40)
    before = listing(cache)

    assert gc(cache, "--dry-run") == 0

    out = capsys.readouterr().out.splitlines()
    assert listing(cache) == before
    assert f"would remove builds/{old.name} ({human(du(old))})" in out
    assert f"would remove runs/{run.name} ({human(du(run))})" in out
    assert out[-1] == f"would free {human(du(old, run))} (1 build, 1 run)"


def test_an_env_whose_lock_is_held_stays(cache: Path, capsys: pytest.CaptureFixture[str]) -> None:
    busy = folder(cache / "envs" / hexname(1, 16), {"lib/torch.so": MB}, 30)
    idle = folder(cache / "envs" / hexname(2, 16), {"lib/torch.so": MB}, 30)
    with (cache / "envs" / f".{busy.name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # as envs.environment holds it while it makes the venv
        assert gc(cache) == 0
    out = capsys.readouterr().out.splitlines()
    assert busy.exists()
    assert not idle.exists()
    assert f"skipped envs/{busy.name} (in use: another process holds its lock)" in out
    assert out[-1] == f"freed {human(du(busy))} (1 env)"  # the idle twin, the same size

    assert gc(cache) == 0  # released: it goes
    assert not busy.exists()


def test_a_run_still_being_written_stays(cache: Path, capsys: pytest.CaptureFixture[str]) -> None:
    writing = run_folder(cache, 0.01, record=False)
    crashed = run_folder(cache, 30, record=False)
    assert gc(cache, "--keep-runs", "0") == 0
    out = capsys.readouterr().out.splitlines()
    assert writing.exists()
    assert not crashed.exists()
    assert f"skipped runs/{writing.name} (no record.json yet: still being written)" in out


def test_hardlinked_files_count_once_and_only_when_every_link_goes(
    cache: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    build = folder(cache / "builds" / f"{'a' * 12}-{'b' * 12}", {"w.whl": MB}, 30)
    env = cache / "envs" / hexname(1, 16)
    (env / "lib").mkdir(parents=True)
    os.link(build / "w.whl", env / "lib" / "w.whl")  # both removed: counted once
    uv_file = cache / "uv-cache" / "archive-v0" / "torch.so"
    uv_file.parent.mkdir(parents=True)
    uv_file.write_bytes(MB * 2)
    os.link(uv_file, env / "lib" / "torch.so")  # the uv cache stays: not freed
    folder(env, {}, 30)
    shared = du(uv_file)
    expected = du(build, env) - shared
    naive = du(build) + du(env) - shared  # what counting every link would say

    assert gc(cache) == 0

    out = capsys.readouterr().out.splitlines()
    assert not build.exists()
    assert not env.exists()
    assert uv_file.read_bytes() == MB * 2
    assert naive >= expected + len(MB)
    assert out[-1] == (
        f"freed {human(expected)} (1 build, 1 env); another {human(shared)} stays on disk, hardlinked from elsewhere "
        "(the uv cache)"
    )


def test_a_folder_that_is_not_a_cache_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    home = tmp_path / "home"
    old = folder(home / "projects" / ("a" * 12), {"notes.txt": b"mine"}, 400)
    before = listing(home)
    assert gc(home, "--older-than", "0", "--keep-runs", "0", "--keep-builds", "0") == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1
    assert err[0].startswith(f"error: {home} does not look like a Tributary cache")
    assert listing(home) == before
    assert old.exists()
    assert gc(tmp_path / "missing") == 2
    assert "no such folder" in capsys.readouterr().err


def test_symlinks_are_never_followed_out_of_the_cache(
    cache: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    outside = tmp_path / "outside"
    precious = folder(outside / hexname(1, 16), {"data.bin": MB}, 400)
    build = folder(cache / "builds" / f"{'a' * 12}-{'b' * 12}", {"w.whl": b"w"}, 30)
    (build / "link").symlink_to(outside)
    (cache / "envs").symlink_to(outside)  # envs elsewhere: not gc's to remove
    (cache / "buildenvs").mkdir()
    (cache / "buildenvs" / f"{'c' * 12}-{'d' * 8}").symlink_to(outside / hexname(1, 16))
    freed = du(build)  # the symlink itself, not what it names

    assert gc(cache, "--older-than", "0") == 0

    out = capsys.readouterr().out.splitlines()
    assert not build.exists()
    assert (precious / "data.bin").read_bytes() == MB
    assert (cache / "buildenvs" / f"{'c' * 12}-{'d' * 8}").is_symlink()
    assert "skipped envs/ (a symlink: gc stays inside the cache)" in out
    assert out[-1] == f"freed {human(freed)} (1 build)"


def test_old_worktrees_go_through_git_unless_a_kept_build_needs_them(
    cache: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    shas = []
    for args in (
        ("init", "-q", "-b", "main"),
        ("config", "user.email", "ci@example.invalid"),
        ("config", "user.name", "ci"),
    ):
        subprocess.run(["git", "-C", str(repo), *args], check=True)
    for n in range(3):
        (repo / "a.txt").write_text(f"{n}\n")
        subprocess.run(["git", "-C", str(repo), "add", "a.txt"], check=True)
        subprocess.run(["git", "-C", str(repo), "commit", "-q", "-m", str(n)], check=True)
        shas.append(worktrees.resolve_ref(repo, "HEAD"))
    unused, built, recent = (worktrees.checkout(repo, sha, cache) for sha in shas)
    for path in (unused, built):
        os.utime(path / STAMP, (ago(30), ago(30)))  # checked out (and so marked used) 30 days ago
    manifest = json.dumps({"backend_sha": shas[1], "ok": True}).encode()
    folder(cache / "builds" / f"{'a' * 12}-{'b' * 12}", {"manifest.json": manifest}, 1)

    assert main(["gc", "--cache", str(cache), "--repo", str(repo)]) == 0

    out = capsys.readouterr().out.splitlines()
    assert not unused.exists()
    assert built.exists()
    assert recent.exists()
    assert any(line.startswith(f"removed worktrees/{unused.name} (") for line in out)
    listed = subprocess.run(["git", "-C", str(repo), "worktree", "list", "--porcelain"], capture_output=True, text=True)
    assert f"worktree {unused.resolve()}\n" not in listed.stdout  # git no longer knows it
    assert f"worktree {built.resolve()}\n" in listed.stdout
    assert out[-1].endswith("(1 worktree)")


def test_wheelhouses_go_only_when_asked_and_not_the_configured_ones(
    cache: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    configured = folder(cache / "wheelhouse" / "torch-2.13.0", {"torch-2.13.0-cp311-linux.whl": MB}, 60)
    dropped = folder(cache / "wheelhouse" / "torch-2.12.0", {"torch-2.12.0-cp311-linux.whl": MB}, 60)
    config = tmp_path / "ci.yaml"
    config.write_text("device: ring\ncore: {versions: ['2.13.0']}\nsuite: {root: embedded}\n")

    assert gc(cache) == 0
    assert configured.exists()
    assert dropped.exists()
    assert gc(cache, "--wheels", "--config", str(config)) == 0
    assert configured.exists()
    assert not dropped.exists()
    assert capsys.readouterr().out.splitlines()[-1].endswith("(1 wheelhouse)")


def _tiny_wheel(folder: Path) -> Path:
    """A pure-Python wheel of one module, for a real install into a real uv cache."""
    wheel = folder / "tiny-1.0-py3-none-any.whl"
    files = {
        "tiny.py": "VALUE = 1\n",
        "tiny-1.0.dist-info/METADATA": "Metadata-Version: 2.1\nName: tiny\nVersion: 1.0\n",
        "tiny-1.0.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    with zipfile.ZipFile(wheel, "w") as archive:
        for name, text in files.items():
            archive.writestr(name, text)
        archive.writestr(
            "tiny-1.0.dist-info/RECORD", "".join(f"{name},,\n" for name in [*files, "tiny-1.0.dist-info/RECORD"])
        )
    return wheel


def test_uv_cache_prune_runs_the_real_uv_on_the_cache_and_counts_what_it_freed(
    cache: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    venv = tmp_path / "venv"
    subprocess.run(envs.uv(cache, "venv", "--quiet", str(venv)), check=True)
    install = envs.uv(cache, "pip", "install", "--quiet", "--python", str(venv / "bin" / "python"))
    subprocess.run([*install, str(_tiny_wheel(tmp_path))], check=True)  # a real entry that uv keeps
    archives = cache / "uv-cache" / "archive-v0"
    installed = sorted(archives.iterdir())
    stale = folder(archives / "staleentry", {"torch.so": MB}, 60)  # an archive no index entry names
    freed = du(stale)

    assert gc(cache, "--uv-cache", "--dry-run") == 0
    assert stale.exists()  # a dry run runs nothing
    assert "would prune uv-cache/ (uv cache prune: what it frees is known once it runs)" in capsys.readouterr().out

    assert gc(cache, "--uv-cache") == 0
    out = capsys.readouterr().out.splitlines()
    assert not stale.exists()
    assert sorted(archives.iterdir()) == installed
    assert f"pruned uv-cache/ ({human(freed)})" in out
    assert out[-1] == f"freed {human(freed)} (uv cache pruned)"


@pytest.mark.parametrize("option", ["--keep-runs", "--keep-builds", "--older-than"])
def test_a_negative_limit_is_a_usage_error(cache: Path, option: str) -> None:
    assert gc(cache, option, "-1") == 2


def test_last_used_is_the_stamp_else_the_folder(tmp_path: Path) -> None:
    os.utime(tmp_path, (ago(10), ago(10)))
    assert last_used(tmp_path) == pytest.approx(ago(10), abs=5)
    mark_used(tmp_path)
    assert last_used(tmp_path) == pytest.approx(time.time(), abs=5)
    os.utime(tmp_path / STAMP, (ago(3), ago(3)))
    os.utime(tmp_path, (ago(10), ago(10)))
    assert last_used(tmp_path) == pytest.approx(ago(3), abs=5)


def test_sizes_read_as_people_write_them() -> None:
    assert human(0) == "0 B"
    assert human(999) == "999 B"
    assert human(412_300_000) == "412.3 MB"
    assert human(6_200_000_000) == "6.2 GB"
