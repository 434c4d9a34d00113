"""Copies of the embedded upstream-style tree, so tests may edit and break them."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
EMBEDDED = REPO / "packages" / "testreuse" / "src" / "testreuse" / "upstream"
REAL = REPO.parent / "shared" / "data" / "upstream-tests"


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A torch root whose test/ folder is a copy of the embedded tree's."""
    root = tmp_path / "torch"
    shutil.copytree(EMBEDDED / "test", root / "test")
    return root
