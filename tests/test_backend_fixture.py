"""The vendor backend fixture (`tests/fixtures/backends/`) and the git bundle its device profile builds from are one
history: `make_repo.py` turns the fixture tree and its older-version patch into the same two commits, so a change
to the fixture that is not bundled again (or a profile ref that is no commit of it) fails here."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "tests" / "fixtures" / "backends"
MAKE_REPO = FIXTURES / "make_repo.py"


def _git(*args: str) -> str:
    return subprocess.run(["git", *args], check=True, capture_output=True, text=True).stdout.strip()


def _make_repo(dest: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(MAKE_REPO), str(dest)], capture_output=True, text=True, check=False)


def _profile_source() -> dict:
    """The `source` of the device profile that builds from the fixture's bundle."""
    for path in sorted((REPO / "configs" / "devices").glob("*.yaml")):
        source = yaml.safe_load(path.read_text()).get("source", {})
        if str(source.get("repo", "")).startswith("tests/fixtures/backends/"):
            return source
    raise AssertionError("no device profile builds from tests/fixtures/backends/")


def test_the_bundle_holds_the_history_make_repo_makes(tmp_path: Path) -> None:
    made = _make_repo(tmp_path / "made")
    assert made.returncode == 0, made.stderr
    older, tip = made.stdout.split()
    source = _profile_source()
    bundle = REPO / source["repo"]
    heads = dict(reversed(line.split()) for line in _git("bundle", "list-heads", str(bundle)).splitlines())
    assert heads["refs/heads/main"] == tip
    clone = tmp_path / "clone"
    _git("clone", "--quiet", str(bundle), str(clone))
    assert _git("-C", str(clone), "rev-list", "main").split() == [tip, older]
    assert source["refs"] == [older]  # the backend matrix's older ref is the fixture's older commit


def test_make_repo_is_reproducible(tmp_path: Path) -> None:
    first, second = _make_repo(tmp_path / "a"), _make_repo(tmp_path / "b")
    assert first.returncode == second.returncode == 0
    assert first.stdout == second.stdout


def test_make_repo_refuses_a_folder_in_use_in_one_line(tmp_path: Path) -> None:
    (tmp_path / "keep.txt").write_text("data\n")
    refused = _make_repo(tmp_path)
    assert refused.returncode == 2
    assert refused.stderr.strip() == f"error: {tmp_path} exists and is not an empty directory"
    assert (tmp_path / "keep.txt").read_text() == "data\n"  # nothing lost
