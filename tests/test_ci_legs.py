"""The distributed form of the job: a prepared folder with a two-shard plan, each shard run as its own leg (as two
GitHub matrix legs would, in separate folders), then merged into one run. Every selected test is accounted for,
the merged run says the same as the legs did, and a leg that never reported leaves its tests `not_run`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from crcr.ci import legs, legstate, pipeline, runner
from crcr.ci.ciconfig import CIConfig, DeviceProfile
from crcr.ci.model import BuildResult, Prepared, RunRecord
from embedded import COMBINATION, config_folder, ring_suite


@pytest.fixture(scope="module")
def prepared(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, runner.Suite, list[str]]:
    configs = config_folder(tmp_path_factory.mktemp("configs"), "test_view_ops.yaml")
    suite = ring_suite(configs)
    out = tmp_path_factory.mktemp("prepared")
    collected = runner.collect(suite, out / "collect")
    plan = runner.plan_shards(suite, collected.selected, out / "durations.json", "legs", 2, out / "collect")
    builds = out / "builds" / "b1"
    builds.mkdir(parents=True)
    (builds / "build.log").write_text("")
    item = Prepared(COMBINATION, BuildResult(True, {}, {}, log="builds/b1/build.log"), collected.modes, plan)
    record = RunRecord("20260101T000000Z-legs", "2026-01-01T00:00:00+00:00", {"event": "test"}, {}, "dev")
    matrix = legs.write_prepared(out, record, [item], [], ["primary"])
    assert matrix == {"include": [{"combination": "primary", "shard": 1}, {"combination": "primary", "shard": 2}]}
    return out, suite, collected.selected


def _context(tmp_path: Path) -> pipeline.Context:
    profile = DeviceProfile("dev", "ring", (), {"embedded": "configs"})
    return pipeline.Context(tmp_path, tmp_path / "cache", CIConfig("dev", (), ("2.13.0",), "embedded"), profile)


def test_two_legs_merge_into_one_run_that_accounts_for_every_test(prepared, tmp_path: Path) -> None:
    out, suite, selected = prepared
    ctx = _context(tmp_path)
    leg_dirs = [tmp_path / f"leg-{shard}" for shard in (1, 2)]
    for shard, folder in zip((1, 2), leg_dirs, strict=True):
        assert legs.run_leg(ctx, out, "primary", shard, folder, suite_of=lambda _c, _p: suite) == 0  # none failing
    halves = [json.loads((d / legs.LEG).read_text())["tests"] for d in leg_dirs]
    assert all(halves)
    assert not {t["nodeid"] for t in halves[0]} & {t["nodeid"] for t in halves[1]}  # each test in one leg only
    state = json.loads((leg_dirs[0] / legstate.STATE).read_text())
    assert (state["combination"], state["shard"], state["tests"]) == ("primary", 1, len(halves[0]))
    assert state["started"]
    assert state["host"]

    record, run_dir = legs.merge(ctx, out, leg_dirs, suite_of=lambda _c, _p: suite)
    (result,) = record.combinations
    assert sorted(t.nodeid for t in result.tests) == sorted(selected)
    assert {t.outcome for t in result.tests} <= {"passed", "xfailed"}
    assert [s.index for s in result.shards] == [1, 2]
    assert record.verdict.startswith("green")
    for shard in (1, 2):
        assert (run_dir / "primary" / f"shard-{shard}" / "results.jsonl").stat().st_size > 0
    assert json.loads((run_dir / "record.json").read_text())["run_id"] == "20260101T000000Z-legs"
    assert (run_dir / "report.html").is_file()


def test_a_leg_that_never_reported_leaves_its_tests_not_run(prepared, tmp_path: Path) -> None:
    out, suite, selected = prepared
    ctx = _context(tmp_path)
    legs.run_leg(ctx, out, "primary", 1, tmp_path / "leg-1", suite_of=lambda _c, _p: suite)
    record, _ = legs.merge(ctx, out, [tmp_path / "leg-1"], suite_of=lambda _c, _p: suite)
    (result,) = record.combinations
    assert sorted(t.nodeid for t in result.tests) == sorted(selected)
    lost = [t for t in result.tests if t.outcome == "not_run"]
    assert lost
    assert {t.shard for t in lost} == {2}
    assert record.verdict.startswith("red")


def test_bad_folders_are_one_line_naming_them(prepared, tmp_path: Path) -> None:
    out, suite, _ = prepared
    ctx = _context(tmp_path)
    with pytest.raises(legs.LegError, match="no prepared combination 'nope'"):
        legs.run_leg(ctx, out, "nope", 1, tmp_path / "x", suite_of=lambda _c, _p: suite)
    with pytest.raises(runner.RunnerError, match="the plan has no shard 9"):
        legs.run_leg(ctx, out, "primary", 9, tmp_path / "y", suite_of=lambda _c, _p: suite)
    assert not (tmp_path / "y").exists()  # a leg that cannot start leaves no state claiming a shard
    broken = tmp_path / "broken-leg"
    broken.mkdir()
    (broken / legs.LEG).write_text("{not json")
    with pytest.raises(legs.LegError, match=r"leg\.json: not JSON"):
        legs.merge(ctx, out, [broken], suite_of=lambda _c, _p: suite)
    with pytest.raises(legs.LegError, match=r"run\.json: cannot read"):
        legs.merge(ctx, tmp_path / "nowhere", [], suite_of=lambda _c, _p: suite)
