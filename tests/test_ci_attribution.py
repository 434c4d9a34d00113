"""Attribution when two candidates moved: a backend change that breaks one op on the device (a real override of
aten::flip's PrivateUse1 kernel, loaded at start-up) and a new core. The failures are rerun with each moved
candidate pinned back to its last-green version; they pass only with the old backend, so they follow the backend."""

from __future__ import annotations

from pathlib import Path

import pytest
from crcr.ci import history, pipeline, runner
from crcr.ci.ciconfig import CIConfig, DeviceProfile
from crcr.ci.model import Candidate, Classification, Combination, CombinationResult, RunRecord, TestOutcome
from embedded import broken_flip_env, config_folder, ring_suite

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
    clean = ring_suite(configs)
    broken = ring_suite(configs, env=broken_flip_env(tmp_path_factory.mktemp("broken-backend")))
    collected = runner.collect(clean, tmp_path_factory.mktemp("collect"))
    flips = [n for n in collected.selected if "::test_flip_" in n][:4]
    assert flips
    return clean, broken, flips


def test_failures_follow_the_backend_when_backend_and_core_both_moved(suites, tmp_path: Path) -> None:
    clean, broken, flips = suites
    cache = tmp_path / "cache"
    cache.mkdir()
    profile = DeviceProfile("dev", "ring", (), {"embedded": "configs"})
    ctx = pipeline.Context(tmp_path, cache, CIConfig("dev", ("2.13.0", "2.14.1"), "embedded"), profile)
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


XFAIL_ALL = """test_suite_config:
  files:
    - path: ${TORCH_ROOT}/test/test_shape_ops.py
      unlisted_test_mode: xfail
"""


def _moved_both(suites, tmp_path: Path) -> tuple[pipeline.Context, CombinationResult]:
    """A green run of the flip tests on the old backend and core, and a run now, with both moved, where they fail."""
    _, broken, flips = suites
    profile = DeviceProfile("dev", "ring", (), {"embedded": "configs"})
    ctx = pipeline.Context(tmp_path, tmp_path / "cache", CIConfig("dev", ("2.13.0", "2.14.1"), "embedded"), profile)
    ctx.cache.mkdir()
    green = CombinationResult(GREEN, "passed", tests=[TestOutcome(n, "passed") for n in flips])
    history.record_run(ctx.history, RunRecord("r1", "2026-01-01T00:00:00", {}, {}, "dev", [green]), tmp_path)
    now = runner.run_shard(broken, 1, flips, flips, runner.Limits(retries=0), tmp_path / "now")
    tests = [TestOutcome(n, runner.outcome_of(now.records.get(n)), "mandatory_success") for n in flips]
    assert {t.outcome for t in tests} == {"failed"}
    return ctx, CombinationResult(NOW, "failed", tests=tests)


def test_a_test_that_is_xfailed_under_a_probe_is_no_evidence(suites, tmp_path: Path) -> None:
    """The backend probe runs with configs that expect the flips to fail (as an older ref's configs may): they end
    xfailed there, which says nothing about whether the old backend fixes them, so they follow nobody."""
    _, broken, _ = suites
    expecting = config_folder(tmp_path / "xfail-configs")
    (expecting / "test_shape_ops.yaml").write_text(XFAIL_ALL)
    xfailing = runner.Suite(broken.python, expecting, None, "ring", env=broken.env)
    ctx, result = _moved_both(suites, tmp_path)

    def suite_of(probe: Combination) -> runner.Suite:
        return xfailing if probe.backend.sha == GREEN.backend.sha else broken

    pipeline.attribute_failures(ctx, result, tmp_path / "attribution", suite_of)
    probe = tmp_path / "attribution" / "primary_backend@HEAD_aaaaaaaaaaaa" / "shard-1" / "results.jsonl"
    assert {r["outcome"] for r in runner.read_records(probe) if r["outcome"] != "deselected"} == {"xfailed"}
    assert {t.follows for t in result.tests} == {""}


def test_an_inconclusive_probe_keeps_what_the_core_matrix_found(suites, tmp_path: Path) -> None:
    """Both probes fail (the broken backend either way): nothing new, so the earlier upstream finding and its
    reason stand instead of being overwritten with unknown."""
    _, broken, _ = suites
    ctx, result = _moved_both(suites, tmp_path)
    earlier = Classification("upstream", "it fails with the newer torch and passes with the older one", "evidence")
    for test in result.tests:
        test.follows, test.classification = "core", earlier
    pipeline.attribute_failures(ctx, result, tmp_path / "attribution", lambda _probe: broken)
    assert {t.follows for t in result.tests} == {"core"}
    assert {t.classification for t in result.tests} == {earlier}


def test_an_attribution_says_which_probes_it_rests_on(suites, tmp_path: Path) -> None:
    clean, _, _ = suites
    ctx, result = _moved_both(suites, tmp_path)

    def suite_of(probe: Combination) -> runner.Suite | None:
        return clean if probe.backend.sha == GREEN.backend.sha else None  # the core probe cannot be built

    pipeline.attribute_failures(ctx, result, tmp_path / "attribution", suite_of)
    assert {t.follows for t in result.tests} == {"backend"}
    (reason,) = {t.classification.reason for t in result.tests}
    assert reason == (
        "it passes with only the backend pinned back to its last-green version (probes run: primary~backend@HEAD:"
        "aaaaaaaaaaaa; not run: primary~core@2.13.0 (its build failed))"
    )
