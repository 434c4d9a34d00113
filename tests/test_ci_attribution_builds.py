"""Attribution from refs the pipeline really builds: a clone of this workspace whose later commit ships a ring
simulator that breaks aten::flip (an override registered when ringsim loads), and an upstream checkout whose suite
moves at the same time. `crcr ci` builds each backend ref's wheels (the simulator's C++ extension included) against
torch 2.13.0, runs the flip tests green on the first pair, red on the second, and reruns the failures with each
moved candidate pinned back: they pass only with the older backend build, so they follow the backend."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from crcr.ci import combinations
from crcr.ci.model import RunRecord, from_json
from crcr.cli import main
from embedded import DEVICE_CONFIG, config_folder

REPO = Path(__file__).resolve().parents[1]
FLIPS = """test_suite_config:
  files:
    - path: ${TORCH_ROOT}/test/test_shape_ops.py
      unlisted_test_mode: skip
      tests:
        - names: [TestShapeOps::test_flip, TestShapeOps::test_flip_numpy]
          mode: mandatory_success
"""
BREAK_FLIP = """
import torch as _torch

_BROKEN_FLIP = _torch.library.Library("aten", "IMPL")  # a faster flip that forgets to flip
_BROKEN_FLIP.impl("flip", lambda self, dims: self.clone(), "PrivateUse1")
"""


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout.strip()


def _commit(repo: Path, message: str) -> str:
    _git(repo, "add", "-A")
    _git(repo, "-c", "user.email=ci@example.invalid", "-c", "user.name=ci", "commit", "-q", "-m", message)
    return _git(repo, "rev-parse", "HEAD")


def test_failures_follow_the_backend_build_that_broke_flip_while_the_suite_moved_too(tmp_path: Path) -> None:
    if _git(REPO, "status", "--porcelain", "--untracked-files=no", "--", "packages"):
        pytest.skip("the workspace's packages have uncommitted changes: a clone would build other sources")
    repo = tmp_path / "backend"
    subprocess.run(["git", "clone", "-q", str(REPO), str(repo)], check=True)
    flips = config_folder(repo / "configs" / "ring-flips")
    assert (flips / DEVICE_CONFIG).is_file()
    (flips / "test_shape_ops.yaml").write_text(FLIPS)
    profile = (repo / "configs" / "devices" / "ring.yaml").read_text()
    (repo / "configs" / "devices" / "ring.yaml").write_text(
        profile.replace("upstream: configs/ring\n", "upstream: configs/ring-flips\n")
    )
    upstream = tmp_path / "pytorch"
    (upstream / "test").mkdir(parents=True)
    shutil.copy(REPO / combinations.EMBEDDED_TREE / "test" / "test_shape_ops.py", upstream / "test")
    _git(upstream, "init", "-q", "-b", "main")
    first_suite = _commit(upstream, "upstream's shape ops tests")
    (repo / "configs" / "ci.yaml").write_text(
        f"device: ring\ncore: {{versions: ['2.13.0']}}\nsuite: {{root: '{upstream}'}}\n"
        "shards: {count: 1, parallel: 1}\nretries: 0\nmatrices: []\n"
    )
    good = _commit(repo, "run the flip tests of an upstream checkout")
    cache = tmp_path / "cache"
    argv = ["ci", "--config", str(repo / "configs" / "ci.yaml"), "--repo", str(repo), "--cache", str(cache)]
    assert main(argv) == 0

    init = repo / "packages" / "simulator" / "src" / "ringsim" / "__init__.py"
    init.write_text(init.read_text() + BREAK_FLIP)
    head = _commit(repo, "ringsim: a faster flip")
    with (upstream / "test" / "test_shape_ops.py").open("a") as tests:
        tests.write("\n# upstream moved on\n")
    moved_suite = _commit(upstream, "the suite moves too")
    assert main(argv) == 1
    run_dir = max((cache / "runs").iterdir())
    record = from_json(RunRecord, json.loads((run_dir / "record.json").read_text()))
    (result,) = record.combinations
    assert (result.combination.backend.sha, result.combination.suite.sha) == (head, moved_suite)
    failing = [t for t in result.tests if t.failing]
    assert failing
    assert all("::test_flip" in t.nodeid for t in failing)
    assert {t.follows for t in failing} == {"backend"}
    reasons = {t.classification.reason for t in failing if t.classification}
    assert reasons == {
        "it passes with only the backend pinned back to its last-green version "
        f"(probes run: primary~backend@HEAD:{good[:12]}, primary~suite@{upstream.resolve()}:"
        f"{first_suite[:12]})"
    }, reasons
    built = {json.loads(m.read_text())["backend_sha"] for m in (cache / "builds").glob("*/manifest.json")}
    assert built == {good, head}  # each ref built from its own sources (the probe reused the older ref's build)
