"""The main job from a fresh clone, as a new user runs it: `nox -s ci -- --dry-run` in a `git clone` of this
repository says what the run would do, in seconds, and builds, fetches and installs nothing of the backend's."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def clone(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh clone of this repository's committed history (no .wheelhouse/, dist/, .nox/ or .tributary/)."""
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout: nothing to clone")
    target = tmp_path_factory.mktemp("fresh") / "tributary"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(target)], check=True)
    return target


def test_the_dry_run_works_from_a_fresh_clone_in_under_a_minute_and_makes_nothing(clone: Path) -> None:
    nox = shutil.which("nox")
    if nox is None:
        pytest.skip("nox is not on PATH (the README's bootstrap installs it)")
    started = time.monotonic()
    done = subprocess.run(
        [nox, "-s", "ci", "--", "--dry-run"], cwd=clone, capture_output=True, text=True, timeout=300,
        env={k: v for k, v in os.environ.items() if not k.startswith(("NOX", "VIRTUAL_ENV"))},
    )  # fmt: skip
    seconds = time.monotonic() - started
    assert done.returncode == 0, done.stderr[-2000:]
    out = done.stdout
    head = subprocess.run(["git", "-C", str(clone), "rev-parse", "HEAD"], capture_output=True, text=True).stdout
    assert f"  backend HEAD       {head[:12]}   {head.strip()}" in out
    for version in ("2.13.0", "2.14.1"):
        assert f"  core    {version}" in out
    assert "\nprimary  (primary)\n" in out
    assert "shard plan:" in out
    cache = clone / ".tributary"
    assert not (cache / "builds").exists()
    assert not (cache / "envs").exists()
    assert not list(cache.glob("wheelhouse/*/*.whl"))
    assert seconds < 60, f"the dry run took {seconds:.0f} s"
