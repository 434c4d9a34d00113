"""The same job spread over machines: a build-once stage, one leg per planned shard, and a merge.

`prepare` builds every combination once, collects and plans it, and writes a self-contained folder: the run's
header, each combination's prepared state (its build's wheels copied in, paths relative to the folder), the
combinations that ended early (incompatible, build_failed), and `matrix.json`, a GitHub Actions matrix with one
entry per (combination, shard). A CI system uploads the folder once; each leg downloads it, runs its one shard with
its retries (`run_leg`) and uploads its own folder; `merge` puts the legs back into one run directory, accounts for
every selected test, and concludes exactly as a run on one machine does: classification, attribution, history,
record and report. A leg killed part-way keeps the results it streamed; the rest of its tests, and those of a leg
that never reported or whose folder cannot be read, are `not_run` with the reason, and the combination is `error`:
a run missing part of its plan is never green (see crcr.ci.legstate for what a leg folder holds).
"""

from __future__ import annotations

import dataclasses
import functools
import shutil
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from crcr.ci import legstate, pinning, pipeline, runner
from crcr.ci.legstate import LEG, LegError, LegFolder, read_json, write_json
from crcr.ci.model import (
    BuildResult,
    Classification,
    CombinationResult,
    Prepared,
    RunRecord,
    ShardResult,
    TestOutcome,
    from_json,
    to_json,
)

HEADER = "run.json"
MATRIX = "matrix.json"
#: The `failure` type of a test whose leg did not report it (its message says why: leg killed / leg missing).
NOT_RUN = "not_run"

SuiteOf = Callable[[pipeline.Context, Prepared], runner.Suite]


def prepare(ctx: pipeline.Context, trigger: dict[str, object], out: Path) -> dict[str, Any]:
    """Build, collect and plan every combination into `out`; returns the matrix (also written to matrix.json)."""
    record, _run_dir, planned = pipeline.start(ctx, trigger)
    out.mkdir(parents=True, exist_ok=True)
    prepared, ended = [], []
    for combination in planned:
        workdir = out / "prepare" / pipeline.safe_name(combination.name)
        done = pipeline.settled(ctx, combination, functools.partial(pipeline.prepare, ctx, combination, workdir))
        if isinstance(done, CombinationResult):
            ended.append(done)
        else:
            prepared.append(_carry_build(done, out))
    return write_prepared(out, record, prepared, ended, [c.name for c in planned])


def write_prepared(
    out: Path, record: RunRecord, prepared: list[Prepared], ended: list[CombinationResult], order: list[str]
) -> dict[str, Any]:
    """The prepared folder's header (run.json) and its matrix (matrix.json, also returned): one leg per shard."""
    header = {"record": to_json(record), "prepared": to_json(prepared), "ended": to_json(ended), "order": order}
    write_json(out / HEADER, header)
    matrix = {"include": [{"combination": p.combination.name, "shard": i} for p in prepared for i in p.shard_indexes()]}
    write_json(out / MATRIX, matrix)
    return matrix


def run_leg(
    ctx: pipeline.Context, prepared_dir: Path, combination: str, shard: int, out: Path,
    suite_of: SuiteOf | None = None,
) -> int:  # fmt: skip
    """One shard of one prepared combination, with its retries, into `out`: its state file first, then results,
    JUnit and log, and leg.json last; returns how many of its tests end failing."""
    prepared = _find(_load(prepared_dir)[1], combination, prepared_dir)
    owned, _ = runner.shard_subset(runner.Collected(dict(prepared.modes), []), prepared.plan, shard)
    out.mkdir(parents=True, exist_ok=True)
    (out / LEG).unlink(missing_ok=True)  # a reused folder is not complete until this leg says so
    legstate.write_state(out, combination, shard, len(owned.selected))
    suite = (suite_of or pipeline.combination_suite)(ctx, prepared)
    shards, tests = pipeline.execute(ctx, prepared, suite, out, shard=shard)
    leg = {"combination": combination, "shard": shard, "shards": to_json(shards), "tests": to_json(tests)}
    write_json(out / LEG, leg)
    return sum(t.failing for t in tests)


def merge(
    ctx: pipeline.Context, prepared_dir: Path, leg_dirs: Sequence[Path], suite_of: SuiteOf | None = None
) -> tuple[RunRecord, Path]:
    """Every leg folder back into one run directory under the cache, concluded like a run on one machine, whatever
    became of each leg."""
    record, prepared, ended = _load(prepared_dir)
    run_dir = ctx.cache / "runs" / record.run_id
    run_dir.mkdir(parents=True, exist_ok=True)
    planned = {(p.combination.name, i) for p in prepared for i in p.shard_indexes()}
    found = [legstate.read_folder(d) for d in leg_dirs]
    stray = [f for f in found if (f.combination, f.shard) not in planned]
    for folder in stray:
        ctx.progress.note(f"leg unreadable: {_unusable(folder, prepared_dir)}")
    for item in prepared:
        workdir = run_dir / pipeline.safe_name(item.combination.name)
        workdir.mkdir(parents=True, exist_ok=True)
        pins = prepared_dir / "prepare" / pipeline.safe_name(item.combination.name) / pinning.PINNED
        if pins.is_dir():  # what reproduce needs, where a one-machine run keeps it
            shutil.copytree(pins, workdir / pinning.PINNED, dirs_exist_ok=True)
        mine = [f for f in found if f.combination == item.combination.name]
        shards, tests, notes = _gather(item, mine, [f.folder for f in stray], workdir)
        try:
            suite = (suite_of or pipeline.combination_suite)(ctx, item)
            result = pipeline.finish(ctx, item, suite, shards, tests, workdir)
        except pipeline.COMBINATION_ERRORS as exc:  # no environment here to fold durations in: the results stand
            reason = pipeline.error_reason(exc)
            result = CombinationResult(item.combination, "error", item.build, reason=reason, shards=shards,
                                       tests=tests, inputs=item.inputs)  # fmt: skip
        if notes:
            _incomplete(result, notes)
            ctx.progress.note(f"{item.combination.name}: {result.reason}")
        record.combinations.append(result)
    record.combinations.extend(ended)
    order = {name: i for i, name in enumerate(read_json(prepared_dir / HEADER).get("order", []))}
    record.combinations.sort(key=lambda r: order.get(r.combination.name, len(order)))
    pipeline.conclude(ctx, record, run_dir)
    return record, run_dir


def _unusable(folder: LegFolder, prepared_dir: Path) -> str:
    if not folder.combination:
        return folder.problem
    return f"{folder.folder}: {folder.combination} shard {folder.shard} is not planned in {prepared_dir / HEADER}"


def _incomplete(result: CombinationResult, notes: list[str]) -> None:
    """A combination some of whose legs did not report is `error`, never green; the tests they did not run are
    infrastructure's failures, said with their leg's reason, not blamed on a candidate."""
    result.status = "error"
    result.reason = "; ".join([*notes, *([result.reason] if result.reason else [])])
    for test in result.tests:
        if test.failure.get("type") == NOT_RUN:
            test.classification = Classification("infra", str(test.failure.get("message", "")))


def _gather(
    item: Prepared, found: list[LegFolder], unreadable: list[Path], workdir: Path
) -> tuple[list[ShardResult], list[TestOutcome], list[str]]:
    """The legs' shards and tests in plan order, and a note per shard no complete leg reported: a killed leg's
    streamed results stand, and every planned test no leg reported is `not_run` with the reason."""
    selected = runner.Collected(dict(item.modes), []).selected
    owner = runner.owners(selected, item.plan)
    shards: list[ShardResult] = []
    tests: dict[str, TestOutcome] = {}
    notes: list[str] = []
    for index in item.shard_indexes():
        mine = [n for n in selected if owner.get(n) == index]
        leg, ignored = legstate.pick([f for f in found if f.shard == index])
        also = f"also in {', '.join(f.folder.name for f in ignored)}: ignored" if ignored else ""
        if leg is not None:
            _copy_logs(leg.folder, index, workdir)
        if leg is not None and leg.complete:
            shards.extend(dataclasses.replace(s, note=_noted(s.note, also)) for s in leg.shards)
            tests.update((t.nodeid, t) for t in leg.tests)
            continue
        done = {n: _streamed(n, leg.records[n], item.modes[n], index) for n in mine if n in leg.records} if leg else {}
        note, reason = _unfinished(item, index, f"{len(done)} of {len(mine)} tests", leg, unreadable)
        tests.update(done)
        for nodeid in (n for n in mine if n not in done):
            failure = {"type": NOT_RUN, "message": reason}
            tests[nodeid] = TestOutcome(nodeid, "not_run", item.modes[nodeid], 0.0, index, ["not_run"], failure)
        seconds = round(sum(t.duration for t in done.values()), 3)  # the reported tests' own time: all that is known
        shards.append(ShardResult(index, _planned(item, index), seconds, -1, False, len(mine), _noted(note, also)))
        notes.append(f"shard {index}: {note}")
    return shards, [tests[n] for n in selected if n in tests], notes


def _unfinished(
    item: Prepared, index: int, reported: str, leg: LegFolder | None, unreadable: list[Path]
) -> tuple[str, str]:
    """A shard's note and its unreported tests' reason: its leg was killed, or no folder reported it."""
    if leg is not None:
        return (
            f"leg killed after {reported} ({leg.folder.name})",
            f"leg killed: {leg.problem}; {reported} reported before it stopped",
        )
    if not unreadable:
        return "leg missing", f"leg missing: no leg folder reported shard {index} of {item.combination.name}"
    return (
        f"leg missing (unreadable: {', '.join(p.name for p in unreadable)})",
        f"leg missing: no leg folder reported shard {index} of {item.combination.name} "
        f"(unreadable: {', '.join(map(str, unreadable))})",
    )


def _noted(note: str, more: str) -> str:
    return f"{note} ({more})" if note and more else note or more


def _streamed(nodeid: str, record: dict[str, Any], mode: str, shard: int) -> TestOutcome:
    """A test a killed leg reported before it stopped, as its first (and only) attempt."""
    outcome = runner.outcome_of(record)
    failure = dict(record.get("failure") or {})
    if "signal" in record:
        failure.setdefault("signal", record["signal"])
    return TestOutcome(nodeid, outcome, mode, float(record.get("duration", 0.0)), shard, [outcome], failure)


def _copy_logs(folder: Path, index: int, workdir: Path) -> None:
    """The leg's shard folder (results, JUnit, log) and its retries, where a one-machine run keeps them."""
    for sub in ("shard", "retries"):
        for source in folder.glob(f"{sub}*"):
            target = workdir / (source.name if sub == "shard" else f"retries-shard-{index}")
            shutil.copytree(source, target, dirs_exist_ok=True)


def _planned(item: Prepared, index: int) -> float:
    return next(float(s.get("predicted_seconds", 0.0)) for s in item.plan["shards"] if s["shard"] == index)


def _carry_build(item: Prepared, out: Path) -> Prepared:
    """Copy the build's folders (wheels, manifest, log: the backend's, and this repository's packages it runs with
    when they were built apart) into `out` and point the build at them, relative to `out`."""
    folders = dict.fromkeys(Path(p).parent for p in (item.build.log, *item.build.wheels.values()))
    for source in folders:
        if not (out / "builds" / source.name).exists():
            shutil.copytree(source, out / "builds" / source.name)

    def moved(path: str) -> str:
        return str(Path("builds") / Path(path).parent.name / Path(path).name)

    wheels = {dist: moved(path) for dist, path in item.build.wheels.items()}
    build = BuildResult(True, wheels, dict(item.build.wheel_sha256), log=moved(item.build.log))
    return Prepared(item.combination, build, item.modes, item.plan)


def _load(folder: Path) -> tuple[RunRecord, list[Prepared], list[CombinationResult]]:
    header = read_json(folder / HEADER)
    try:
        record = from_json(RunRecord, header["record"])
        prepared = [_rooted(from_json(Prepared, p), folder) for p in header["prepared"]]
        ended = [from_json(CombinationResult, r) for r in header["ended"]]
    except (KeyError, TypeError, AttributeError) as exc:
        raise LegError(f"{folder / HEADER}: not a prepared run ({exc})") from None
    return record, prepared, ended


def _rooted(item: Prepared, folder: Path) -> Prepared:
    """A prepared combination whose build paths, relative to its folder, are made absolute where it now lies."""
    build = item.build
    wheels = {dist: str((folder / path).resolve()) for dist, path in build.wheels.items()}
    rooted = BuildResult(True, wheels, dict(build.wheel_sha256), log=str((folder / build.log).resolve()))
    return Prepared(item.combination, rooted, item.modes, item.plan)


def _find(prepared: list[Prepared], name: str, folder: Path) -> Prepared:
    for item in prepared:
        if item.combination.name == name:
            return item
    known = ", ".join(p.combination.name for p in prepared) or "none"
    raise LegError(f"{folder / HEADER}: no prepared combination {name!r} (prepared: {known})")
