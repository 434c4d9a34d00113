"""Retries: each failing test again alone in a fresh interpreter, and only a pass (or the expected failure its mode
asks for) ends the failure. Here two flip tests are strict expected failures; the first attempt runs the real flip,
so they pass unexpectedly (xpassed), and the retry loads a build whose flip skips: a skip is not a pass, so the
unexpected pass stands."""

from __future__ import annotations

import sys
from pathlib import Path

from crcr.ci import runner
from embedded import config_folder

SKIP_FLIP = """
import unittest

import torch


def _skip(self, dims):
    raise unittest.SkipTest("flip is not there in this build")


_lib = torch.library.Library("aten", "IMPL")
_lib.impl("flip", _skip, "PrivateUse1")
"""
STRICT_XFAIL_FLIPS = """test_suite_config:
  files:
    - path: ${TORCH_ROOT}/test/test_shape_ops.py
      unlisted_test_mode: skip
      tests:
        - names: ["TestShapeOps::test_flip_numpy", "TestShapeOps::test_flip"]
          mode: xfail_strict
          reason: expected to fail here
"""


def test_a_retry_that_skips_keeps_the_failure(tmp_path: Path) -> None:
    configs = config_folder(tmp_path / "configs")
    (configs / "test_shape_ops.yaml").write_text(STRICT_XFAIL_FLIPS)
    skipping = tmp_path / "skipping-build"
    skipping.mkdir()
    (skipping / "sitecustomize.py").write_text(SKIP_FLIP)
    suite = runner.Suite(Path(sys.executable), configs, None, "ring", env={"PYTHONPATH": str(skipping)})
    collected = runner.collect(suite, tmp_path / "collect")
    flips = [n for n in collected.selected if n.endswith(("test_flip_ring_float32", "test_flip_numpy_ring_float32"))]
    assert len(flips) == 2, collected.selected
    chosen = runner.Collected({n: collected.modes[n] for n in flips}, [])
    plan = {"shards": [{"shard": 1, "units": [{"id": n} for n in flips], "predicted_seconds": 1.0}]}
    real_flip = {1: {"PYTHONPATH": str(tmp_path / "plain")}}  # the first attempt: no override, the device's flip
    _, tests = runner.run_suite(suite, chosen, plan, runner.Limits(retries=1), tmp_path / "run", shard_env=real_flip)
    assert [t.attempts for t in tests] == [["xpassed", "skipped"], ["xpassed", "skipped"]]
    assert {t.outcome for t in tests} == {"xpassed"}
    retried = sorted(p.name for p in (tmp_path / "run" / "retries" / "attempt-1").glob("*.log"))
    assert len(retried) == 2  # one fresh interpreter each
