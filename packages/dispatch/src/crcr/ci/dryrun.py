"""`crcr ci --dry-run`: what a run would do, said in seconds, with nothing fetched, built or installed.

Every fact comes from what exists: the backend candidates from git, the core candidates from the wheelhouse or pip's
resolution, builds and environments from their recorded keys, results and collections from the reuse index. What a
run would still have to make is said as such ("would build", "after collection"), never guessed.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

from crcr.ci import backendbuild, combinations, compat, cores, envs, reuse
from crcr.ci.ciconfig import split_variants
from crcr.ci.model import BuildResult, Candidate, Combination
from crcr.ci.pipeline import Context, combination_inputs, home_of, limits_of, planning_of
from crcr.ci.runner import owners, plan_command, read_records


def describe(ctx: Context) -> Iterator[str]:
    """The run's combinations, candidates, builds, environments, reused results and shard plans, line by line."""
    variants, skipped = split_variants(ctx.config, ctx.profile)
    for name in skipped:
        yield f"variant {name}: not declared by device profile {ctx.profile.name}; skipped"
    config = dataclasses.replace(ctx.config, variants=variants)
    planned = combinations.plan(
        config, ctx.profile.origin, ctx.backend_repo, ctx.repo, ctx.cache, core_of=combinations.core_unfetched
    )
    planned = [c for c in planned if not ctx.only or c.name in ctx.only]
    yield f"device {ctx.profile.name}; {len(planned)} combination(s); cache {ctx.cache}"
    yield "candidates:"
    for candidate in _candidates(planned):
        version = candidate.version if len(candidate.version) <= 14 else candidate.version[:12]
        yield f"  {candidate.kind:<7} {candidate.name:<10} {version:<14} {candidate.sha or '(sha unknown)'}"
    for version in ctx.config.cores:
        if cores.peek(version, ctx.cache)[2]:
            continue
        source = ctx.config.core_source(version)
        folder = cores.wheelhouse(version, ctx.cache)
        if source is None:
            yield f"  torch=={version}: would be fetched into {folder}"
        else:
            yield f"  core {version} ({source.kind}: {source.spec}): would be obtained into {folder}"
    for combination in planned:
        yield f"{combination.name}  ({combination.matrix}{' +' + combination.variant if combination.variant else ''})"
        yield from ("  " + line for line in _combination(ctx, combination))


def _candidates(planned: list[Combination]) -> list[Candidate]:
    seen: dict[tuple[str, str], Candidate] = {}
    for combination in planned:
        for candidate in combination.candidates():
            seen.setdefault((candidate.kind, candidate.sha or candidate.name), candidate)
    return list(seen.values())


def _combination(ctx: Context, combination: Combination) -> Iterator[str]:
    core = combination.core.version or combination.core.name
    kind = ctx.profile.origin.build
    fits, declared = compat.holds(compat.torch_range_at(ctx.backend_repo, combination.backend.sha, kind), core)
    if not fits:
        yield f"incompatible: the backend declares torch {declared}; this core is {combination.core.name}"
        return
    wheel = cores.fetched(combination.core.name, ctx.cache)
    if wheel is None:
        yield f"build: would build {combination.backend.sha[:12]} against torch {core} (not fetched yet)"
        yield _after_collection(ctx)
        return
    out, found = backendbuild.recorded(
        ctx.profile, ctx.repo, ctx.backend_repo, combination.backend.sha, combination.core.sha, ctx.cache
    )
    if found is None:
        yield f"build: would build into {out}"
        yield _after_collection(ctx)
        return
    if not found.ok:
        yield f"build: recorded compile failure in {out}: {found.first_error}"
        return
    yield f"build: reuse {out}"
    yield from _environment_and_plan(ctx, combination, found, wheel)


def _after_collection(ctx: Context) -> str:
    cut = f"shards of at most {ctx.config.shard_cap:g} s" if ctx.config.shard_cap else f"{ctx.config.shards} shards"
    return f"shard plan: after collection ({cut} of the collected tests)"


def _environment_and_plan(ctx: Context, combination: Combination, built: BuildResult, wheel: Path) -> Iterator[str]:
    wanted = list(home_of(ctx, combination).profile.requirements)
    key = envs.environment_key(built, cores.wheel_sha256(wheel), wanted)
    env = ctx.cache / "envs" / key[:16]
    ready = envs.recorded_key(env) == key
    yield f"environment: {'reuse' if ready else 'would make'} {env}"
    parts = combination_inputs(ctx, combination, built, wheel)
    if ctx.reuse and (hit := reuse.cached_result(ctx.cache, reuse.key(parts), combination)) is not None:
        counts = ", ".join(f"{n} {outcome}" for outcome, n in hit.counts().items())
        yield f"results: reuse run {hit.cached} (inputs identical by hash: {counts}); --no-cache runs it"
        return
    collection = reuse.cached_collection(ctx.cache, reuse.key(parts, with_limits=False))
    if collection is None or not ready:
        yield _after_collection(ctx)
        return
    yield from _plan(ctx, combination, envs.python_of(env), collection)


def _plan(ctx: Context, combination: Combination, python: Path, collection: Path) -> Iterator[str]:
    """The shard plan testreuse's planner makes of the stored collection with today's durations."""
    selected = [r["nodeid"] for r in read_records(collection) if r.get("mode") != "skip"]
    with tempfile.TemporaryDirectory() as scratch:
        tests = Path(scratch) / "selected.txt"
        tests.write_text("".join(f"{n}\n" for n in selected), encoding="utf-8")
        argv = plan_command(
            python, ctx.durations, ctx.durations_job(combination), combination.name, tests, planning_of(ctx.config)
        )
        done = subprocess.run(argv, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        yield f"shard plan: the planner failed: {(done.stderr.strip().splitlines() or ['no output'])[-1]}"
        return
    plan = json.loads(done.stdout)
    owned = owners(selected, plan)
    at_once = limits_of(ctx.config).parallel
    yield f"shard plan: {len(selected)} tests (as collected before), {len(plan['shards'])} shards, {at_once} at once"
    for shard in plan["shards"]:
        count = sum(1 for index in owned.values() if index == shard["shard"])
        yield f"  shard {shard['shard']}: {count} tests, predicted {shard['predicted_seconds']:.0f} s"
