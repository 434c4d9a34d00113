"""The distributed form of the job: a prepared folder with a two-shard plan, each shard run as its own leg (as two
GitHub matrix legs would, in separate folders), then merged into one run. Every selected test is accounted for,
the merged run says the same as the legs did, and a leg that did not finish (killed by SIGKILL part-way, never
uploaded, uploaded unreadable or twice) costs the run its green, never its record, report or history."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from crcr import cli
from crcr.ci import legs, legstate, pipeline, runner
from crcr.ci.ciconfig import CIConfig, DeviceProfile
from crcr.ci.model import BuildResult, Prepared, RunRecord
from embedded import COMBINATION, config_folder, ring_suite

ROOT = Path(__file__).resolve().parents[1]
#: The shard the killed leg runs; the simulator hangs its worker at this kernel launch, so the leg is surely still
#: running (some tests reported, the rest not) when it is killed.
KILLED = 1
HANG = {"RINGSIM_FAULT": "hang@60"}
#: One leg in a process of its own: `run_leg` on the ring suite, as `crcr leg` runs it minus the backend build.
LEG_PROCESS = """
import dataclasses, sys
from pathlib import Path
from crcr.ci import legs
from embedded import ring_suite
from test_ci_legs import HANG, context
prepared, configs, shard, out, work = sys.argv[1:]
ctx = dataclasses.replace(context(Path(work)), shard_env={int(shard): HANG})
legs.run_leg(ctx, Path(prepared), "primary", int(shard), Path(out), suite_of=lambda _c, _p: ring_suite(Path(configs)))
"""


@pytest.fixture(scope="module")
def prepared(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, runner.Suite, list[str]]:
    configs = config_folder(tmp_path_factory.mktemp("configs"), "test_view_ops.yaml")
    suite = ring_suite(configs)
    out = tmp_path_factory.mktemp("prepared")
    collected = runner.collect(suite, out / "collect")
    plan = runner.plan_shards(
        suite, collected.selected, out / "durations.json", "ring/embedded", "legs", runner.Planning(2), out / "collect"
    )
    builds = out / "builds" / "b1"
    builds.mkdir(parents=True)
    (builds / "build.log").write_text("")
    item = Prepared(COMBINATION, BuildResult(True, {}, {}, log="builds/b1/build.log"), collected.modes, plan)
    record = RunRecord("20260101T000000Z-legs", "2026-01-01T00:00:00+00:00", {"event": "test"}, {}, "dev")
    matrix = legs.write_prepared(out, record, [item], [], ["primary"])
    assert matrix == {"include": [{"combination": "primary", "shard": 1}, {"combination": "primary", "shard": 2}]}
    return out, suite, collected.selected


def context(tmp_path: Path) -> pipeline.Context:
    profile = DeviceProfile("dev", "ring", (), {"embedded": "configs"})
    return pipeline.Context(tmp_path, tmp_path / "cache", CIConfig("dev", ("2.13.0",), "embedded"), profile)


@pytest.fixture(scope="module")
def finished(prepared, tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """Both legs run to the end, each into its own folder."""
    out, suite, _ = prepared
    root = tmp_path_factory.mktemp("finished")
    folders = [root / f"leg-{shard}" for shard in (1, 2)]
    for shard, folder in zip((1, 2), folders, strict=True):
        assert legs.run_leg(context(root), out, "primary", shard, folder, suite_of=lambda _c, _p: suite) == 0
    return folders


@pytest.fixture(scope="module")
def killed(prepared, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, set[str]]:
    """A leg killed with SIGKILL, with its shard's pytest, once it has streamed some results; the folder it leaves
    and the tests it had reported."""
    out, suite, _ = prepared
    root = tmp_path_factory.mktemp("killed")
    folder = root / "leg-killed"
    argv = [sys.executable, "-c", LEG_PROCESS, str(out), str(suite.configs), str(KILLED), str(folder), str(root)]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "tests"), os.environ.get("PYTHONPATH", "")])}
    leg = subprocess.Popen(argv, env=env, start_new_session=True)
    results = folder / f"shard-{KILLED}" / "results.jsonl"
    deadline = time.monotonic() + 300
    try:
        while not runner.read_records(results):
            assert leg.poll() is None, "the leg ended before it was killed"
            assert time.monotonic() < deadline, "the leg reported no test in 300 s"
            time.sleep(0.2)
    finally:
        _kill_tree(leg.pid)
        leg.wait()
    assert leg.returncode == -signal.SIGKILL
    return folder, {r["nodeid"] for r in runner.read_records(results)}


def _kill_tree(pid: int) -> None:
    """SIGKILL every process group under `pid` (a shard's pytest runs in a group of its own), as a lost runner
    takes the whole job with it."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            parent = int(stat.read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(parent, []).append(int(stat.parent.name))
    tree, todo = [], [pid]
    while todo:
        tree.append(todo.pop())
        todo.extend(children.get(tree[-1], []))
    groups = set()
    for member in tree:
        try:
            groups.add(os.getpgid(member))
        except ProcessLookupError:
            continue
    for group in groups - {os.getpgrp()}:
        try:
            os.killpg(group, signal.SIGKILL)
        except ProcessLookupError:
            continue


def _merge(prepared, tmp_path: Path, folders: list[Path]) -> tuple[RunRecord, Path]:
    out, suite, _ = prepared
    return legs.merge(context(tmp_path), out, folders, suite_of=lambda _c, _p: suite)


def test_two_legs_merge_into_one_run_that_accounts_for_every_test(prepared, finished, tmp_path: Path) -> None:
    _, _, selected = prepared
    halves = [json.loads((d / legs.LEG).read_text())["tests"] for d in finished]
    assert all(halves)
    assert not {t["nodeid"] for t in halves[0]} & {t["nodeid"] for t in halves[1]}  # each test in one leg only
    state = json.loads((finished[0] / legstate.STATE).read_text())
    assert state["combination"] == "primary"
    assert state["shard"] == 1
    assert state["tests"] == len(halves[0])
    assert state["started"]
    assert state["host"]

    pins = prepared[0] / "prepare" / "primary" / "pinned"  # what prepare pinned for reproduce
    pins.mkdir(parents=True, exist_ok=True)
    (pins / "pins.json").write_text("{}")
    record, run_dir = _merge(prepared, tmp_path, finished)
    assert (run_dir / "primary" / "pinned" / "pins.json").read_text() == "{}"  # kept where reproduce looks
    (result,) = record.combinations
    assert sorted(t.nodeid for t in result.tests) == sorted(selected)
    assert {t.outcome for t in result.tests} <= {"passed", "xfailed"}
    assert [(s.index, s.note) for s in result.shards] == [(1, ""), (2, "")]
    assert record.verdict.startswith("green")
    for shard in (1, 2):
        assert (run_dir / "primary" / f"shard-{shard}" / "results.jsonl").stat().st_size > 0
    assert json.loads((run_dir / "record.json").read_text())["run_id"] == "20260101T000000Z-legs"
    assert (run_dir / "report.html").is_file()


def test_a_leg_that_never_reported_leaves_its_tests_not_run(prepared, finished, tmp_path: Path) -> None:
    _, _, selected = prepared
    record, _ = _merge(prepared, tmp_path, finished[:1])
    (result,) = record.combinations
    assert sorted(t.nodeid for t in result.tests) == sorted(selected)
    lost = [t for t in result.tests if t.outcome == "not_run"]
    assert lost
    assert {t.shard for t in lost} == {2}
    assert {t.failure["message"] for t in lost} == {"leg missing: no leg folder reported shard 2 of primary"}
    assert (result.status, result.reason) == ("error", "shard 2: leg missing")
    assert record.verdict.startswith("red")


def test_a_killed_leg_keeps_what_it_finished_beside_a_missing_and_an_unreadable_leg(
    prepared, killed, tmp_path: Path
) -> None:
    """Shard 1's leg was killed part-way, shard 2's never uploaded, and one folder holds only a torn leg.json: the
    run concludes red with a record, a report and history; every planned test is there, with its reason."""
    _, _, selected = prepared
    folder, reported = killed
    assert not (folder / legs.LEG).exists()
    junk = tmp_path / "leg-junk"
    junk.mkdir()
    (junk / legs.LEG).write_text('{"combination": "primary", "sha')

    record, run_dir = _merge(prepared, tmp_path / "merge", [folder, junk])
    (result,) = record.combinations
    assert sorted(t.nodeid for t in result.tests) == sorted(selected)
    by_shard = {i: [t for t in result.tests if t.shard == i] for i in (1, 2)}
    ran = {t.nodeid for t in by_shard[KILLED] if t.outcome != "not_run"}
    assert ran == reported
    assert 0 < len(ran) < len(by_shard[KILLED])
    assert all(t.outcome in ("passed", "xfailed") for t in by_shard[KILLED] if t.nodeid in ran)
    killed_reasons = {t.failure["message"] for t in by_shard[KILLED] if t.nodeid not in ran}
    assert killed_reasons == {
        f"leg killed: {folder}: no leg.json; {len(ran)} of {len(by_shard[KILLED])} tests reported before it stopped"
    }
    assert {t.outcome for t in by_shard[2]} == {"not_run"}
    assert {t.failure["message"] for t in by_shard[2]} == {
        f"leg missing: no leg folder reported shard 2 of primary (unreadable: {junk})"
    }
    assert {t.classification.klass for t in result.tests if t.outcome == "not_run"} == {"infra"}
    notes = [(s.index, s.exit_status, s.note) for s in result.shards]
    assert notes == [
        (1, -1, f"leg killed after {len(ran)} of {len(by_shard[KILLED])} tests (leg-killed)"),
        (2, -1, "leg missing (unreadable: leg-junk)"),
    ]
    assert result.status == "error"
    assert result.reason == "; ".join(f"shard {i}: {note}" for i, _, note in notes)
    assert record.verdict.startswith("red: primary error")
    saved = json.loads((run_dir / "record.json").read_text())
    assert saved["combinations"][0]["shards"][0]["note"] == notes[0][2]
    assert (run_dir / "report.html").is_file()
    assert (run_dir / "primary" / f"shard-{KILLED}" / "results.jsonl").is_file()
    assert (tmp_path / "merge" / "cache" / "history.sqlite").is_file()


def test_a_torn_leg_json_beside_a_readable_state_counts_as_killed(prepared, killed, finished, tmp_path) -> None:
    folder, reported = killed
    torn = tmp_path / "leg-torn"
    shutil.copytree(folder, torn)
    (torn / legs.LEG).write_text("{not json")
    record, _ = _merge(prepared, tmp_path / "merge", [torn, finished[1]])
    (result,) = record.combinations
    assert {t.nodeid for t in result.tests if t.shard == KILLED and t.outcome != "not_run"} == reported
    (message,) = {t.failure["message"] for t in result.tests if t.outcome == "not_run"}
    assert message.startswith(f"leg killed: {torn / legs.LEG}: not JSON")
    assert [s.note for s in result.shards][1] == ""
    assert record.verdict.startswith("red")


@pytest.mark.parametrize("order", [1, -1], ids=["killed-first", "killed-last"])
def test_a_shard_uploaded_twice_is_told_by_its_complete_leg(prepared, killed, finished, tmp_path, order) -> None:
    """A re-run attempt's folder beside the killed attempt's: the complete one speaks for the shard, in any order."""
    record, _ = _merge(prepared, tmp_path, [killed[0], finished[0], finished[1]][::order])
    (result,) = record.combinations
    assert {t.outcome for t in result.tests} <= {"passed", "xfailed"}
    assert [s.note for s in result.shards] == ["also in leg-killed: ignored", ""]
    assert record.verdict.startswith("green")


def test_crcr_merge_of_a_killed_run_is_red_without_a_traceback(
    prepared, killed, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`crcr merge` concludes a run with a killed, a missing and an unreadable leg and exits 1 like any red run;
    only a prepared folder it cannot use is an error (exit 2, one line)."""
    out, suite, _ = prepared
    monkeypatch.setattr(pipeline, "combination_suite", lambda _c, _p: suite)  # the environment minus the build
    options = ["--config", str(ROOT / "configs" / "ci.yaml"), "--repo", str(tmp_path), "--cache", str(tmp_path / "c")]
    empty = tmp_path / "empty-leg"
    empty.mkdir()
    assert cli.main(["merge", *options, "--prepared", str(out), str(killed[0]), str(empty)]) == 1
    printed = capsys.readouterr()
    assert "Traceback" not in printed.out + printed.err
    assert f"leg unreadable: {empty}: no leg.json; {empty / legstate.STATE}: cannot read" in printed.err
    assert "red: primary error" in printed.out
    assert (tmp_path / "c" / "runs" / "20260101T000000Z-legs" / "report.html").is_file()

    assert cli.main(["merge", *options, "--prepared", str(tmp_path / "nowhere"), str(killed[0])]) == 2
    printed = capsys.readouterr()
    assert printed.err.splitlines() == [
        f"error: {tmp_path / 'nowhere' / legs.HEADER}: cannot read: No such file or directory"
    ]


def test_bad_folders_are_one_line_naming_them(prepared, tmp_path: Path) -> None:
    out, suite, _ = prepared
    ctx = context(tmp_path)
    with pytest.raises(legs.LegError, match="no prepared combination 'nope'"):
        legs.run_leg(ctx, out, "nope", 1, tmp_path / "x", suite_of=lambda _c, _p: suite)
    with pytest.raises(runner.RunnerError, match="the plan has no shard 9"):
        legs.run_leg(ctx, out, "primary", 9, tmp_path / "y", suite_of=lambda _c, _p: suite)
    assert not (tmp_path / "y").exists()  # a leg that cannot start leaves no state claiming a shard
    with pytest.raises(legs.LegError, match=r"run\.json: cannot read"):
        legs.merge(ctx, tmp_path / "nowhere", [], suite_of=lambda _c, _p: suite)
    torn = tmp_path / "torn-prepared"
    torn.mkdir()
    (torn / legs.HEADER).write_text('{"record": ')
    with pytest.raises(legs.LegError, match=r"run\.json: not JSON"):
        legs.merge(ctx, torn, [], suite_of=lambda _c, _p: suite)


def test_a_leg_folder_says_what_became_of_its_leg(tmp_path: Path) -> None:
    """The folder reader on its own: complete, killed (state only), unreadable, and another run's leg."""
    legstate.write_state(tmp_path, "primary", 2, 5)
    assert not list(tmp_path.glob(".*.tmp"))  # written whole, then renamed
    shard = tmp_path / "shard-2"
    shard.mkdir()
    line = {"nodeid": "t.py::a", "outcome": "passed", "duration": 0.5}
    (shard / "results.jsonl").write_text(json.dumps(line) + '\n{"nodeid": "t.py::b", "outc')
    folder = legstate.read_folder(tmp_path)
    assert (folder.combination, folder.shard, folder.complete) == ("primary", 2, False)
    assert list(folder.records) == ["t.py::a"]  # the torn last line is dropped
    assert folder.problem == f"{tmp_path}: no leg.json"
    legstate.write_json(tmp_path / legs.LEG, {"combination": "primary", "shard": 2, "shards": [], "tests": []})
    complete = legstate.read_folder(tmp_path)
    assert (complete.combination, complete.shard, complete.complete) == ("primary", 2, True)
    nothing = legstate.read_folder(tmp_path / "nowhere")
    assert nothing.combination == ""
    assert nothing.problem.startswith(f"{tmp_path / 'nowhere'}: no leg.json; ")
