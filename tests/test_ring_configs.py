"""The shipped configs match reality on ring: the embedded tree's configs, and configs/ on PyTorch's real test files
(a representative slice; the full run is `nox -s ci`'s), every bucket holds."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from testreuse.loader import default_torch_root, embedded_configs

ROOT = Path(__file__).resolve().parents[1]
REAL_CONFIGS = ROOT / "configs" / "ring"
#: A PyTorch checkout's root (holding test/): TORCH_ROOT, else the copies of real upstream files beside this repo.
REAL_TREE = Path(os.environ.get("TORCH_ROOT") or ROOT.parent / "shared" / "data" / "upstream-tests")
REAL_SLICE = "float32"


def _tree_digest(tree: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(tree.rglob("*")):
        digest.update(path.relative_to(tree).as_posix().encode())
        if path.is_file():
            digest.update(path.read_bytes())
    return digest.hexdigest()


def _run(tmp_path: Path, configs: Path, *extra: str) -> tuple[subprocess.CompletedProcess[str], Counter]:
    results = tmp_path / "results.jsonl"
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-n", "2",
         "--testreuse-config", str(configs), "--testreuse-device", "ring",
         "--testreuse-results", str(results), *extra],
        cwd=tmp_path, capture_output=True, text=True, check=False,
    )  # fmt: skip
    records = [json.loads(line) for line in results.read_text().splitlines()] if results.exists() else []
    return run, Counter((r["mode"], r["outcome"]) for r in records if "mode" in r)


def test_embedded_configs_hold_on_ring(tmp_path: Path) -> None:
    before = _tree_digest(default_torch_root())
    run, outcomes = _run(tmp_path, embedded_configs())
    assert run.returncode == 0, run.stdout[-3000:]
    assert outcomes[("mandatory_success", "passed")] > 1000
    assert outcomes[("xfail_strict", "xfailed")] > 0
    assert not [k for k in outcomes if k[0] == "mandatory_success" and k[1] != "passed"]
    assert outcomes[("skip", "deselected")] > 0
    assert _tree_digest(default_torch_root()) == before


@pytest.mark.skipif(not (REAL_TREE / "test").is_dir(), reason=f"no real upstream tree at {REAL_TREE} (set TORCH_ROOT)")
def test_real_configs_hold_on_ring_for_a_slice_of_pytorchs_own_test_files(tmp_path: Path) -> None:
    run, outcomes = _run(tmp_path, REAL_CONFIGS, "--torch-root", str(REAL_TREE), "-k", REAL_SLICE)
    assert run.returncode == 0, run.stdout[-3000:]
    assert outcomes[("mandatory_success", "passed")] > 500
    assert not [k for k in outcomes if k[0] == "mandatory_success" and k[1] != "passed"]
