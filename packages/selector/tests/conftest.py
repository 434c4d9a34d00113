"""Copies of the embedded upstream-style tree, so tests may edit and break them."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # the tests' shared modules (toytree) import by name
import toytree

REPO = Path(__file__).resolve().parents[3]
EMBEDDED = REPO / "packages" / "testreuse" / "src" / "testreuse" / "upstream"
REAL = REPO.parent / "shared" / "data" / "upstream-tests"


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A torch root whose test/ folder is a copy of the embedded tree's."""
    root = tmp_path / "torch"
    shutil.copytree(EMBEDDED / "test", root / "test")
    return root


@pytest.fixture
def toy(tmp_path: Path) -> dict[str, Path]:
    """A store over a toy tree (test_toy.py, test_dist.py, an excluded file) with CPU cases for three tests."""
    return toytree.build(tmp_path)
