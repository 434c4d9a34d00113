"""The same job spread over machines: a build-once stage, one leg per planned shard, and a merge.

`prepare` builds every combination once, collects and plans it, and writes a self-contained folder: the run's
header, each combination's prepared state (its build's wheels copied in, paths relative to the folder), the
combinations that ended early (incompatible, build_failed), and `matrix.json`, a GitHub Actions matrix with one
entry per (combination, shard). A CI system uploads the folder once; each leg downloads it, runs its one shard with
its retries (`run_leg`) and uploads its own folder; `merge` puts the legs back into one run directory, accounts for
every selected test (a leg that never reported leaves its tests `not_run`), and concludes exactly as a run on one
machine does: classification, attribution, history, record and report.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from crcr.ci import legstate, pipeline, runner
from crcr.ci.legstate import LEG, LegError, read_json, write_json
from crcr.ci.model import (
    BuildResult,
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

SuiteOf = Callable[[pipeline.Context, Prepared], runner.Suite]


def prepare(ctx: pipeline.Context, trigger: dict[str, object], out: Path) -> dict[str, Any]:
    """Build, collect and plan every combination into `out`; returns the matrix (also written to matrix.json)."""
    record, _run_dir, planned = pipeline.start(ctx, trigger)
    out.mkdir(parents=True, exist_ok=True)
    prepared, ended = [], []
    for combination in planned:
        done = pipeline.prepare(ctx, combination, out / "prepare" / pipeline.safe_name(combination.name))
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
    """Every leg back into one run directory under the cache, concluded like a run on one machine."""
    record, prepared, ended = _load(prepared_dir)
    run_dir = ctx.cache / "runs" / record.run_id
    run_dir.mkdir(parents=True, exist_ok=True)
    legs = [_read_leg(d) for d in leg_dirs]
    for item in prepared:
        workdir = run_dir / pipeline.safe_name(item.combination.name)
        workdir.mkdir(parents=True, exist_ok=True)
        shards, tests = _gather(item, [leg for leg in legs if leg[0]["combination"] == item.combination.name], workdir)
        suite = (suite_of or pipeline.combination_suite)(ctx, item)
        record.combinations.append(pipeline.finish(ctx, item, suite, shards, tests, workdir))
    record.combinations.extend(ended)
    order = {name: i for i, name in enumerate(read_json(prepared_dir / HEADER).get("order", []))}
    record.combinations.sort(key=lambda r: order.get(r.combination.name, len(order)))
    pipeline.conclude(ctx, record, run_dir)
    return record, run_dir


def _gather(
    item: Prepared, legs: list[tuple[dict[str, Any], Path]], workdir: Path
) -> tuple[list[ShardResult], list[TestOutcome]]:
    """The legs' shards and tests in plan order; a planned shard no leg reported leaves its tests `not_run`."""
    collected = runner.Collected(dict(item.modes), [])
    owner = runner.owners(collected.selected, item.plan)
    reported: dict[int, tuple[dict[str, Any], Path]] = {int(leg["shard"]): (leg, d) for leg, d in legs}
    shards: list[ShardResult] = []
    tests: dict[str, TestOutcome] = {}
    for index in item.shard_indexes():
        if index not in reported:
            mine = [n for n in collected.selected if owner.get(n) == index]
            shards.append(ShardResult(index, _planned(item, index), 0.0, -1, False, len(mine)))
            for nodeid in mine:
                tests[nodeid] = TestOutcome(nodeid, "not_run", item.modes[nodeid], shard=index, attempts=["not_run"])
            continue
        leg, folder = reported[index]
        shards.extend(from_json(ShardResult, s) for s in leg["shards"])
        tests.update((t.nodeid, t) for t in (from_json(TestOutcome, raw) for raw in leg["tests"]))
        for sub in ("shard", "retries"):
            for source in folder.glob(f"{sub}*"):
                target = workdir / (source.name if sub == "shard" else f"retries-shard-{index}")
                shutil.copytree(source, target, dirs_exist_ok=True)
    return shards, [tests[n] for n in collected.selected if n in tests]


def _planned(item: Prepared, index: int) -> float:
    return next(float(s.get("predicted_seconds", 0.0)) for s in item.plan["shards"] if s["shard"] == index)


def _carry_build(item: Prepared, out: Path) -> Prepared:
    """Copy the build's folder (wheels, manifest, log) into `out` and point the build at it, relative to `out`."""
    source = Path(item.build.log).parent
    target = out / "builds" / source.name
    if not target.exists():
        shutil.copytree(source, target)
    rel = target.relative_to(out)
    wheels = {dist: str(rel / Path(path).name) for dist, path in item.build.wheels.items()}
    build = BuildResult(True, wheels, dict(item.build.wheel_sha256), log=str(rel / Path(item.build.log).name))
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


def _read_leg(folder: Path) -> tuple[dict[str, Any], Path]:
    leg = read_json(folder / LEG)
    if not isinstance(leg.get("combination"), str) or not isinstance(leg.get("shard"), int):
        raise LegError(f"{folder / LEG}: not a leg's result (combination and shard missing)")
    return leg, folder
