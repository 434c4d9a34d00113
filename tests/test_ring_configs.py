"""The shipped configs match reality: upstream-style tests run on ring through testreuse, every bucket holds."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import testreuse

CONFIGS = Path(__file__).resolve().parents[1] / "configs"
TREE = Path(testreuse.__file__).parent / "upstream"


def _tree_digest() -> str:
    digest = hashlib.sha256()
    for path in sorted(TREE.rglob("*")):
        digest.update(path.relative_to(TREE).as_posix().encode())
        if path.is_file():
            digest.update(path.read_bytes())
    return digest.hexdigest()


def test_configs_hold_on_ring(tmp_path: Path) -> None:
    before = _tree_digest()
    results = tmp_path / "results.jsonl"
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-n", "2",
         "--testreuse-config", str(CONFIGS), "--testreuse-device", "ring",
         "--testreuse-results", str(results)],
        cwd=tmp_path, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout[-3000:]
    records = [json.loads(line) for line in results.read_text().splitlines()]
    outcomes = Counter((r["mode"], r["outcome"]) for r in records if "mode" in r)
    assert outcomes[("mandatory_success", "passed")] > 1000
    assert outcomes[("xfail_strict", "xfailed")] > 0
    assert not [k for k in outcomes if k[0] == "mandatory_success" and k[1] != "passed"]
    assert outcomes[("skip", "deselected")] > 0
    assert _tree_digest() == before
