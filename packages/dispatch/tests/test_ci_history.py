"""The run history: round trips, last green, concurrent writers, refusing files that are not a history."""

from __future__ import annotations

import multiprocessing
import sqlite3
from pathlib import Path

import pytest
from crcr.ci.history import HistoryError, Scope, last_green, last_outcomes, previous, record_run, runs
from crcr.ci.model import Candidate, Combination, CombinationResult, RunRecord
from crcr.ci.model import TestOutcome as Case

HOSTILE = "test/test_ops.py::TestX::test_<script>alert('x')</script>_\"'&"


def combination(name: str, backend_sha: str, core_version: str, matrix: str = "primary") -> Combination:
    return Combination(
        name=name,
        matrix=matrix,  # type: ignore[arg-type]
        backend=Candidate("backend", "HEAD", "0.1.0", backend_sha),
        core=Candidate("core", core_version, core_version, f"wheel-{core_version}"),
        suite=Candidate("suite", "embedded", "embedded", "suite-1"),
    )


def run_record(
    run_id: str, started: str, backend_sha: str, outcomes: dict[str, str], status: str, device: str = "dev"
) -> RunRecord:
    primary = CombinationResult(
        combination("primary", backend_sha, "2.14.1"),
        status=status,  # type: ignore[arg-type]
        tests=[Case(nodeid, outcome) for nodeid, outcome in outcomes.items()],  # type: ignore[arg-type]
    )
    core_old = CombinationResult(
        combination("core-2.13.0", backend_sha, "2.13.0", matrix="core"),
        status="passed",
        tests=[Case(nodeid, "passed") for nodeid in outcomes],
    )
    broken = CombinationResult(
        combination("backend-v0.1.0", "old-sha", "2.14.1", matrix="backend"), status="build_failed"
    )
    return RunRecord(
        run_id=run_id,
        started=started,
        trigger={"event": "manual"},
        environment={"python": "3.11"},
        device=device,
        combinations=[primary, core_old, broken],
        finished=started,
        verdict="green" if status == "passed" else "red: primary failed",
    )


def test_two_runs_round_trip(tmp_path: Path) -> None:
    db = tmp_path / "history.sqlite"
    green = {"a.py::test_one": "passed", HOSTILE: "passed", "a.py::test_skip": "skipped"}
    record_run(db, run_record("run-1", "2026-01-01T00:00:00Z", "sha-A", green, "passed"), tmp_path / "run-1")
    red = {"a.py::test_one": "passed", HOSTILE: "crashed", "a.py::test_skip": "skipped", "a.py::test_new": "failed"}
    record_run(db, run_record("run-2", "2026-01-02T00:00:00Z", "sha-B", red, "failed"), tmp_path / "run-2")

    found = last_green(db, "primary")
    assert found is not None
    run_id, combo, outcomes = found
    assert run_id == "run-1"
    assert combo == combination("primary", "sha-A", "2.14.1")
    assert outcomes == green

    latest = previous(db, "primary")
    assert latest is not None
    assert (latest.run_id, latest.status, latest.outcomes) == ("run-2", "failed", red)
    assert latest.combination.backend.sha == "sha-B"
    assert latest.run_dir == str(tmp_path / "run-2")
    # asking from run-2's point of view sees only what came before it
    before = previous(db, "primary", before="run-2")
    assert before is not None
    assert before.run_id == "run-1"
    assert last_green(db, "primary", before="run-1") is None
    assert last_green(db, "backend-v0.1.0") is None  # never built, never green
    assert last_green(db, "nowhere") is None
    core_green = last_green(db, "core-2.13.0")
    assert core_green is not None
    assert core_green[2] == dict.fromkeys(red, "passed")
    assert [r[0] for r in runs(db)] == ["run-1", "run-2"]


def test_a_green_run_of_another_device_or_suite_is_not_this_jobs(tmp_path: Path) -> None:
    db = tmp_path / "history.sqlite"
    record_run(db, run_record("run-1", "t1", "sha-A", {"a::x": "passed"}, "passed", device="ring"), tmp_path)
    record_run(db, run_record("run-2", "t2", "sha-B", {"a::x": "failed"}, "failed", device="ring"), tmp_path)
    record_run(db, run_record("run-3", "t3", "sha-C", {"a::x": "passed"}, "passed", device="other"), tmp_path)
    ring = last_green(db, "primary", scope=Scope("ring", "embedded"))
    assert ring is not None
    assert ring[0] == "run-1"
    other = last_green(db, "primary", scope=Scope("other"))
    assert other is not None
    assert other[0] == "run-3"
    assert last_green(db, "primary", scope=Scope("ring", "/src/pytorch")) is None
    assert last_green(db, "primary", scope=Scope("nowhere")) is None
    latest = previous(db, "primary", scope=Scope("ring"))
    assert latest is not None
    assert latest.run_id == "run-2"


def test_each_tests_last_outcome_is_from_the_last_run_that_ran_it(tmp_path: Path) -> None:
    db = tmp_path / "history.sqlite"
    record_run(db, run_record("run-1", "t1", "sha-A", {"a::x": "passed", "a::y": "failed"}, "failed"), tmp_path)
    second = {"a::x": "failed", "a::y": "not_run", "a::z": "deselected"}
    record_run(db, run_record("run-2", "t2", "sha-B", second, "failed", device="other"), tmp_path)
    record_run(db, run_record("run-3", "t3", "sha-C", {"a::x": "crashed", "a::y": "not_run"}, "failed"), tmp_path)
    # a test that did not run keeps the outcome of the last run that ran it; another device's runs are not this job's
    assert last_outcomes(db, "primary", scope=Scope("dev")) == {"a::x": "crashed", "a::y": "failed"}
    assert last_outcomes(db, "primary", scope=Scope("other")) == {"a::x": "failed"}
    assert last_outcomes(db, "primary", before="run-3") == {"a::x": "failed", "a::y": "failed"}
    assert last_outcomes(db, "nowhere") == {}


def test_recording_a_run_again_replaces_it(tmp_path: Path) -> None:
    db = tmp_path / "h.sqlite"
    record_run(db, run_record("run-1", "t1", "sha-A", {"a::x": "failed"}, "failed"), tmp_path)
    record_run(db, run_record("run-1", "t1", "sha-A", {"a::y": "passed"}, "passed"), tmp_path)
    found = last_green(db, "primary")
    assert found is not None
    assert found[2] == {"a::y": "passed"}
    assert len(runs(db)) == 1


def test_the_database_is_in_wal_mode(tmp_path: Path) -> None:
    db = tmp_path / "h.sqlite"
    record_run(db, run_record("run-1", "t1", "sha-A", {"a::x": "passed"}, "passed"), tmp_path)
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def _writer(db: str, index: int) -> None:
    outcomes = {f"t.py::test_{i}": "passed" for i in range(50)}
    record_run(Path(db), run_record(f"run-{index}", f"t{index:03d}", f"sha-{index}", outcomes, "passed"), Path(db))


def test_concurrent_writers_lose_nothing(tmp_path: Path) -> None:
    db = tmp_path / "h.sqlite"
    # separate processes, so SQLite's file locking (not a Python lock) is what keeps the writers apart
    context = multiprocessing.get_context("fork")
    processes = [context.Process(target=_writer, args=(str(db), i)) for i in range(6)]
    for p in processes:
        p.start()
    for p in processes:
        p.join(120)
        assert p.exitcode == 0
    assert sorted(r[0] for r in runs(db)) == sorted(f"run-{i}" for i in range(6))
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT COUNT(*) FROM outcomes").fetchone()[0] == 6 * 2 * 50


def test_a_corrupt_file_is_one_line_naming_it(tmp_path: Path) -> None:
    db = tmp_path / "garbage.sqlite"
    db.write_bytes(b"this is not a database at all\n" * 200)
    with pytest.raises(HistoryError) as info:
        last_green(db, "primary")
    message = str(info.value)
    assert str(db) in message
    assert "\n" not in message
    assert db.read_bytes().startswith(b"this is not")  # left as it was


def test_a_foreign_database_is_refused(tmp_path: Path) -> None:
    db = tmp_path / "other.sqlite"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE users (name TEXT)")
    with pytest.raises(HistoryError, match="not a Tributary run history") as info:
        record_run(db, run_record("run-1", "t1", "sha-A", {}, "passed"), tmp_path)
    assert str(db) in str(info.value)
    with sqlite3.connect(db) as conn:  # untouched
        assert {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")} == {"users"}


def test_another_schema_is_refused(tmp_path: Path) -> None:
    db = tmp_path / "h.sqlite"
    record_run(db, run_record("run-1", "t1", "sha-A", {}, "passed"), tmp_path)
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE meta SET value = 'tributary-ci-history/99'")
    with pytest.raises(HistoryError, match="schema"):
        previous(db, "primary")


def test_a_directory_is_refused(tmp_path: Path) -> None:
    with pytest.raises(HistoryError, match="not a file"):
        previous(tmp_path, "primary")
