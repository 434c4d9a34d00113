"""crcr's runner under real device faults: the simulator's fault injection crashes, hangs and fails transiently in
two shards (a fault counts kernel launches per process, and a crash or a hang replaces the test worker, so a hang
and a crash cannot both recur in one shard's workers); the healthy shard finishes, no selected test is lost,
retries and classification say what happened."""

from __future__ import annotations

import dataclasses
from collections import Counter
from pathlib import Path

import pytest
from crcr.ci import runner
from crcr.ci.ciconfig import load_profile
from crcr.ci.classify import classify
from embedded import broken_flip_env, config_folder, ring_suite

RING = load_profile(Path(__file__).resolve().parents[1] / "configs", "ring")
SHARD_FAULTS = {1: {"RINGSIM_FAULT": "transient@15,abort@120"}, 2: {"RINGSIM_FAULT": "hang@120"}}


@pytest.fixture(scope="module")
def faulted(tmp_path_factory: pytest.TempPathFactory) -> tuple[list, list[runner.TestOutcome], runner.Collected]:
    configs = config_folder(tmp_path_factory.mktemp("configs"), "test_view_ops.yaml", "test_shape_ops.yaml")
    suite = ring_suite(configs)
    work = tmp_path_factory.mktemp("work")
    collected = runner.collect(suite, work)
    plan = runner.plan_shards(
        suite, collected.selected, work / "durations.json", "ring/embedded", "faults", runner.Planning(3), work
    )
    limits = runner.Limits(parallel=2, retries=1, test_timeout=8, shard_timeout=600)
    shards, tests = runner.run_suite(suite, collected, plan, limits, work, shard_env=SHARD_FAULTS)
    return shards, tests, collected


def _first_attempt(test: runner.TestOutcome) -> runner.TestOutcome:
    """The test as it stood before its retries."""
    return dataclasses.replace(test, outcome=test.attempts[0], attempts=test.attempts[:1])


def test_the_other_shards_finish_and_no_test_is_lost(faulted) -> None:
    shards, tests, collected = faulted
    assert sorted(t.nodeid for t in tests) == sorted(collected.selected)
    assert all(t.outcome != "not_run" for t in tests)
    healthy = [t for t in tests if t.shard not in SHARD_FAULTS]
    assert healthy
    assert {t.outcome for t in healthy} <= {"passed", "xfailed"}
    assert all(s.exit_status == 0 for s in shards if s.index not in SHARD_FAULTS)


def test_each_fault_shows_in_the_first_attempt_and_passes_alone_on_retry(faulted) -> None:
    _, tests, _ = faulted
    first = Counter(t.attempts[0] for t in tests)
    assert first["crashed"] >= 1
    assert first["timeout"] >= 1
    transient = [t for t in tests if "TransientDeviceError" in str(t.failure.get("type", ""))]
    assert transient
    faulted_tests = [t for t in tests if t.attempts[0] in ("crashed", "timeout", "failed")]
    assert all(t.flaky and t.outcome == "passed" for t in faulted_tests)
    assert {classify(t, {"backend"}).klass for t in faulted_tests} == {"flake"}


def test_before_retries_the_faults_are_classified_by_what_the_device_did(faulted) -> None:
    _, tests, _ = faulted
    classes: dict[str, set[str]] = {}
    for test in map(_first_attempt, tests):
        if test.failing:
            classes.setdefault(test.outcome, set()).add(classify(test, set(), device=RING.failures).klass)
    assert classes["crashed"] == {"backend"}
    assert classes["timeout"] == {"backend"}
    assert classes["failed"] == {"infra"}  # the transient device error, as ring's profile names it


def test_a_shard_whose_process_dies_is_rerun_once_for_its_missing_tests(tmp_path: Path) -> None:
    """Without crash isolation a device abort takes the whole shard process down: the tests it finished keep their
    results, the rest run again in one rerun, and what that leaves is retried alone."""
    configs = config_folder(tmp_path / "configs", "test_view_ops.yaml")
    suite = ring_suite(configs)
    collected = runner.collect(suite, tmp_path)
    plan = runner.plan_shards(
        suite, collected.selected, tmp_path / "durations.json", "ring/embedded", "dies", runner.Planning(1), tmp_path
    )
    dies = {1: {"RINGSIM_FAULT": "abort@40", "PYTEST_ADDOPTS": "--testreuse-isolation none"}}
    limits = runner.Limits(parallel=1, retries=1, test_timeout=30, shard_timeout=600)
    shards, tests = runner.run_suite(suite, collected, plan, limits, tmp_path, shard_env=dies)
    assert shards[0].reran
    assert shards[0].exit_status not in runner.FINISHED
    first = Counter(t.attempts[0] for t in tests)
    assert first["passed"] > 0  # finished before the first abort: kept, not rerun
    assert first["not_run"] + first["crashed"] + first["error"] > 0  # the rerun died too, at the same launch count
    assert sorted(t.nodeid for t in tests) == sorted(collected.selected)
    assert {t.outcome for t in tests} <= {"passed", "xfailed"}  # what the shard never finished passed alone


def test_a_neighbour_s_crash_in_the_same_shard_does_not_relabel_an_assertion(tmp_path: Path) -> None:
    """One shard: flip tests that fail on a broken kernel (an assertion), and view tests of which one is hit by a
    device abort. The shard's log holds both; each test is classified from its own failure and captured output."""
    configs = config_folder(tmp_path / "configs", "test_view_ops.yaml", "test_shape_ops.yaml")
    suite = ring_suite(configs, env=broken_flip_env(tmp_path / "broken-backend"))
    collected = runner.collect(suite, tmp_path / "collect")
    flips = [n for n in collected.selected if "::test_flip_" in n][:6]
    views = [n for n in collected.selected if "test_view_ops.py::" in n][:30]
    tests = views + flips
    collected = runner.Collected(
        {n: collected.modes[n] for n in tests}, [r for r in collected.records if r.get("nodeid") in tests]
    )
    plan = runner.plan_shards(
        suite, tests, tmp_path / "durations.json", "ring/embedded", "neighbour", runner.Planning(1), tmp_path
    )
    limits = runner.Limits(parallel=1, retries=0, test_timeout=60, shard_timeout=600)
    _, outcomes = runner.run_suite(
        suite, collected, plan, limits, tmp_path / "run", shard_env={1: {"RINGSIM_FAULT": "abort@40"}}
    )
    log = (tmp_path / "run" / "shard-1" / "pytest.log").read_text(errors="replace")
    crashed = [t for t in outcomes if t.outcome == "crashed"]
    asserted = [t for t in outcomes if t.outcome == "failed" and "::test_flip_" in t.nodeid]
    assert crashed
    assert asserted
    for test in crashed:
        said = classify(test, set(), device=RING.failures)
        assert (said.klass, said.reason) == ("backend", "the test process crashed with SIGABRT (device-fatal)")
    for test in asserted:
        said = classify(test, set(), device=RING.failures)
        assert (said.klass, said.reason) == ("unknown", "no candidate moved since the last green run")
        assert said.evidence.startswith("AssertionError: Tensor-likes are not close!")
        assert test.nodeid.rsplit("::", 1)[-1] in log  # the shard log names it, beside the abort
    assert "SIGABRT" in log or "abort" in log.lower()
