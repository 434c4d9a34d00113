"""What the core that ran is to the dispatched commit, asked of a real git history: built from it, containing it
(a later nightly), lacking it (an older release), or unknown (no checkout, or a commit the checkout lacks)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from crcr.ci import ancestry
from crcr.ci.model import Candidate, Combination
from crcr.ci.pipeline import dispatched


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout.strip()


@pytest.fixture
def history(tmp_path: Path) -> tuple[Path, list[str]]:
    """A checkout of three commits in a line, and one on a side branch: their shas, oldest first, the side last."""
    repo = tmp_path / "pytorch"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "main")
    shas = []
    for n in range(3):
        (repo / "f").write_text(str(n))
        _git(repo, "add", "f")
        _git(repo, "-c", "user.email=a@b.invalid", "-c", "user.name=a", "commit", "-q", "-m", f"c{n}")
        shas.append(_git(repo, "rev-parse", "HEAD"))
    _git(repo, "checkout", "-q", "-b", "side", shas[0])
    (repo / "g").write_text("side")
    _git(repo, "add", "g")
    _git(repo, "-c", "user.email=a@b.invalid", "-c", "user.name=a", "commit", "-q", "-m", "side")
    shas.append(_git(repo, "rev-parse", "HEAD"))
    return repo, shas


def test_each_relation_is_git_s_answer(history) -> None:
    repo, (first, middle, last, side) = history
    assert ancestry.relation(middle, middle, repo)[0] == ancestry.BUILT_FROM
    state, said = ancestry.relation(last, middle, repo)
    assert state == ancestry.CONTAINS
    assert said == f"the core (git {last[:12]}) contains the dispatched commit {middle[:12]} but was not built from it"
    assert ancestry.relation(first, middle, repo)[0] == ancestry.LACKS
    assert ancestry.relation(side, middle, repo)[0] == ancestry.LACKS  # a branch that never merged it
    assert ancestry.relation("f" * 40, middle, repo)[0] == ancestry.UNKNOWN  # a build from a commit not fetched
    assert ancestry.relation(last, middle, None)[0] == ancestry.UNKNOWN
    assert ancestry.relation("", middle, repo)[0] == ancestry.UNKNOWN
    assert ancestry.relation(last, middle, repo.parent)[0] == ancestry.UNKNOWN  # not a git checkout


def test_a_combination_says_what_its_core_and_suite_are_to_the_commit(history) -> None:
    repo, (first, middle, last, _side) = history
    backend = Candidate("backend", "HEAD", "b" * 12, "b" * 40)
    suite = Candidate("suite", str(repo), middle[:12], middle)
    combination = Combination("primary", "primary", backend, Candidate("core", "2.14.1", "2.14.1", "w", last), suite)
    said = dispatched(combination, middle)
    assert said.startswith(f"the core (git {last[:12]}) contains the dispatched commit {middle[:12]}")
    assert said.endswith("; the suite was taken at it")
    embedded = Candidate("suite", "embedded", "e" * 12, "e" * 64)
    older = Combination("core@2.13.0", "core", backend, Candidate("core", "2.13.0", "2.13.0", "v", first), embedded)
    said = dispatched(older, middle)
    assert "with no upstream checkout" in said
    assert said.endswith("the suite is the embedded tree, not upstream's at it")
