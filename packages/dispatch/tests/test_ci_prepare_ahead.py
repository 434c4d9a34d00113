"""`crcr ci` prepares the next combination while the current one's tests run: the steps are stood in for (each is
tested on its own and end to end in the workspace tests), so what is checked here is the order of events alone."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from crcr.ci import pipeline
from crcr.ci.model import BuildResult, Candidate, Combination, CombinationResult, Prepared, RunRecord


def combination(name: str, backend: str = "b", core: str = "c") -> Combination:
    def part(kind: str, sha: str) -> Candidate:
        return Candidate(kind, name, "1", sha)  # type: ignore[arg-type]

    return Combination(name, "primary", part("backend", backend), part("core", core), part("suite", "s"))


class Lines:
    """The progress display as the lines it was given, in order, from whichever thread."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.lock = threading.Lock()
        self.ended = {name: threading.Event() for name in ("first", "broken", "third")}

    def say(self, line: str) -> None:
        with self.lock:
            self.lines.append(line)

    def phase(self, combination: str, text: str) -> None:
        self.say(f"[{combination}] {text}")

    def tests(self, combination: str, done: int, total: int, eta: float | None = None) -> None:
        pass

    def done(self, combination: str, text: str) -> None:
        self.say(f"[{combination}] done: {text}")
        self.ended[combination].set()

    def note(self, text: str) -> None:
        self.say(text)


@pytest.fixture
def staged(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[pipeline.Context, Lines, threading.Event]:
    """Three combinations: `first` passes, `broken` (another backend ref) ends in preparation (its build failed),
    `third` (the build of `first`) passes, run right after `first`. The first one's tests do not end until `broken`
    has been said to have failed: a run that prepares nothing ahead would wait for ever, so the wait is bounded and
    its outcome is the test's."""
    planned = [combination("first"), combination("broken", backend="older"), combination("third")]
    lines = Lines()
    said = lines.ended["broken"]
    record = RunRecord("run", "2026-01-01T00:00:00+00:00", {}, {}, "dev")
    monkeypatch.setattr(pipeline, "start", lambda ctx, trigger: (record, tmp_path, planned))
    monkeypatch.setattr(pipeline, "conclude", lambda ctx, record, run_dir: None)

    def prepare(ctx: pipeline.Context, combination: Combination, workdir: Path) -> Prepared | CombinationResult:
        lines.phase(combination.name, "prepared")
        if combination.name == "broken":
            return CombinationResult(combination, "build_failed", BuildResult(False), reason="no compiler")
        return Prepared(combination, BuildResult(True), {}, {"shards": []})

    def run_prepared(ctx: pipeline.Context, prepared: Prepared, workdir: Path) -> CombinationResult:
        if prepared.combination.name == "first":
            said.wait(timeout=20)
        lines.phase(prepared.combination.name, "tests ran")
        return CombinationResult(prepared.combination, "passed")

    monkeypatch.setattr(pipeline, "prepare", prepare)
    monkeypatch.setattr(pipeline, "run_prepared", run_prepared)
    ctx = pipeline.Context(tmp_path, tmp_path / "cache", None, None, progress=lines)  # type: ignore[arg-type]
    return ctx, lines, said


def test_a_combination_that_ends_in_preparation_is_said_while_the_one_before_runs(staged) -> None:
    ctx, lines, said = staged
    pipeline.run(ctx, {})
    assert said.is_set()
    assert lines.lines.index("[broken] done: build_failed: no compiler") < lines.lines.index("[first] tests ran")
    assert lines.lines.index("[third] prepared") < lines.lines.index("[first] done: passed")


def test_results_keep_the_planned_order(staged) -> None:
    ctx, _, _ = staged
    record, _ = pipeline.run(ctx, {})
    assert [(r.combination.name, r.status) for r in record.combinations] == [
        ("first", "passed"),
        ("broken", "build_failed"),
        ("third", "passed"),
    ]


def test_the_combinations_of_one_build_run_one_after_another() -> None:
    """A variant runs right after its plain combination, on the same build, while the next build is made."""
    planned = [
        combination("primary", "head", "new"),
        combination("backend@old", "old", "new"),
        combination("core@old", "head", "old"),
        combination("primary+compile", "head", "new"),
        combination("core@old+compile", "head", "old"),
    ]
    assert [c.name for c in pipeline.by_build(planned)] == [
        "primary", "primary+compile", "backend@old", "core@old", "core@old+compile",
    ]  # fmt: skip
