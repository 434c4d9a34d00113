"""Attribution when two candidates moved: a backend change that breaks one op on the device (a real override of
aten::flip's PrivateUse1 kernel, loaded at start-up) and a new core. The failures are rerun with each moved
candidate pinned back to its last-green version; they pass only with the old backend, so they follow the backend."""

from __future__ import annotations

from pathlib import Path

import pytest
from crcr.ci import history, pipeline, runner
from crcr.ci.ciconfig import CIConfig, DeviceProfile
from crcr.ci.model import Candidate, Combination, CombinationResult, RunRecord, TestOutcome
from embedded import config_folder, ring_suite

BREAK_FLIP = """
import torch

_lib = torch.library.Library("aten", "IMPL")
_lib.impl("flip", lambda self, dims: self.clone(), "PrivateUse1")  # forgets to flip
"""

SUITE = Candidate("suite", "embedded", "s" * 12, "s" * 64)
GREEN = Combination(
    "primary",
    "primary",
    Candidate("backend", "HEAD", "a" * 12, "a" * 40),
    Candidate("core", "2.13.0", "2.13.0", "x" * 64),
    SUITE,
)
NOW = Combination(
    "primary",
    "primary",
    Candidate("backend", "HEAD", "b" * 12, "b" * 40),
    Candidate("core", "2.14.1", "2.14.1", "y" * 64),
    SUITE,
)


@pytest.fixture(scope="module")
def suites(tmp_path_factory: pytest.TempPathFactory) -> tuple[runner.Suite, runner.Suite, list[str]]:
    configs = config_folder(tmp_path_factory.mktemp("configs"), "test_shape_ops.yaml")
    broken_path = tmp_path_factory.mktemp("broken-backend")
    (broken_path / "sitecustomize.py").write_text(BREAK_FLIP)
    clean = ring_suite(configs)
    broken = ring_suite(configs, env={"PYTHONPATH": str(broken_path)})
    collected = runner.collect(clean, tmp_path_factory.mktemp("collect"))
    flips = [n for n in collected.selected if "::test_flip_" in n][:4]
    assert flips
    return clean, broken, flips


def test_failures_follow_the_backend_when_backend_and_core_both_moved(suites, tmp_path: Path) -> None:
    clean, broken, flips = suites
    cache = tmp_path / "cache"
    cache.mkdir()
    profile = DeviceProfile("dev", "ring", (), {"embedded": "configs"})
    ctx = pipeline.Context(tmp_path, cache, CIConfig("dev", (), ("2.13.0", "2.14.1"), "embedded"), profile)
    green = CombinationResult(GREEN, "passed", tests=[TestOutcome(n, "passed") for n in flips])
    history.record_run(ctx.history, RunRecord("r1", "2026-01-01T00:00:00", {}, {}, "dev", [green]), tmp_path)

    now = runner.run_shard(broken, 1, flips, flips, runner.Limits(retries=0), tmp_path / "now")
    tests = [TestOutcome(n, runner.outcome_of(now.records.get(n)), "mandatory_success") for n in flips]
    assert {t.outcome for t in tests} == {"failed"}  # the broken flip is seen on the device
    result = CombinationResult(NOW, "failed", tests=tests)

    def suite_of(probe: Combination) -> runner.Suite:
        return clean if probe.backend.sha == GREEN.backend.sha else broken

    pipeline.attribute_failures(ctx, result, tmp_path / "attribution", suite_of)
    assert {t.follows for t in result.tests} == {"backend"}
    assert {t.classification.klass for t in result.tests} == {"backend"}
    assert all("backend pinned back" in t.classification.reason for t in result.tests)
