"""A fix after a red run: the flip tests fail on the device in one run (a real override of aten::flip's PrivateUse1
kernel that forgets to flip) and pass in the next. No green run ever held their failure, yet the second run's record
and report name them as fixes, because the history keeps each test's last outcome."""

from __future__ import annotations

import json
from pathlib import Path

from crcr.ci import pipeline, runner
from crcr.ci.ciconfig import CIConfig, DeviceProfile
from crcr.ci.model import CombinationResult, RunRecord, TestOutcome
from embedded import COMBINATION, broken_flip_env, config_folder, ring_suite


def _run(ctx: pipeline.Context, suite: runner.Suite, flips: list[str], run_id: str, tmp_path: Path) -> RunRecord:
    """One real shard of the flip tests, concluded as a run of its own (record, history, report)."""
    shard = runner.run_shard(suite, 1, flips, flips, runner.Limits(retries=0), tmp_path / run_id / "shard")
    tests = [TestOutcome(n, runner.outcome_of(shard.records.get(n)), "mandatory_success") for n in flips]
    status = "passed" if all(t.outcome == "passed" for t in tests) else "failed"
    result = CombinationResult(COMBINATION, status, tests=tests)
    record = RunRecord(run_id, f"2026-01-0{run_id[-1]}T00:00:00", {}, {}, "dev", [result])
    pipeline.conclude(ctx, record, tmp_path / run_id)
    return record


def test_a_fix_after_a_red_run_is_named_in_the_record_and_the_report(tmp_path: Path) -> None:
    configs = config_folder(tmp_path / "configs", "test_shape_ops.yaml")
    clean = ring_suite(configs)
    broken = ring_suite(configs, env=broken_flip_env(tmp_path / "broken-backend"))
    flips = [n for n in runner.collect(clean, tmp_path / "collect").selected if "::test_flip_" in n][:3]
    assert flips
    ctx = pipeline.Context(
        tmp_path,
        tmp_path / "cache",
        CIConfig("dev", ("2.13.0",), "embedded"),
        DeviceProfile("dev", "ring", (), {"embedded": "configs"}),
    )
    ctx.cache.mkdir()

    red = _run(ctx, broken, flips, "run-1", tmp_path)
    assert red.combinations[0].status == "failed"
    assert red.combinations[0].fixes == []

    green = _run(ctx, clean, flips, "run-2", tmp_path)
    assert green.combinations[0].status == "passed"
    assert green.combinations[0].fixes == sorted(flips)
    assert green.combinations[0].regressions == []
    summary = json.loads((tmp_path / "run-2" / "summary.json").read_text())
    assert summary["combinations"][0]["fixes"] == sorted(flips)
    html = (tmp_path / "run-2" / "report.html").read_text()
    assert all(f">{nodeid}<" in html for nodeid in flips)
