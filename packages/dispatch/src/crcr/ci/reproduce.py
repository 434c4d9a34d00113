"""`crcr reproduce RUN_DIR`: the same combinations again from the run directory alone (the wheels the run recorded,
checked by sha256, and each combination's pins: crcr.ci.pinning), every recorded test rerun, every outcome that
differs said."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

from crcr.ci import cores, envs, isolation, runner, worktrees
from crcr.ci.ciconfig import CIConfig, load_profile
from crcr.ci.digest import tree_sha256
from crcr.ci.isolation import DEFAULT_IMAGE
from crcr.ci.model import Combination, CombinationResult, RunRecord, from_json
from crcr.ci.pinning import PinError, Pins, read_pins
from crcr.ci.pipeline import Context, safe_name, suite_root


class ReproduceError(Exception):
    """The run cannot be reproduced as recorded (no record, a wheel gone or changed): one line saying which."""


def load_record(run_dir: Path) -> RunRecord:
    path = run_dir / "record.json"
    try:
        return from_json(RunRecord, json.loads(path.read_text(encoding="utf-8")))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, TypeError, KeyError) as exc:
        raise ReproduceError(f"{path}: not a run record: {exc}") from None


def reproduce(run_dir: Path, repo: Path, say: Callable[[str], None]) -> list[str]:
    """Differences as `combination: nodeid: recorded -> now` lines (empty when everything is the same).

    Everything comes from the run directory: the recorded wheels (checked by sha256) and each combination's pins
    (its config folder and device profile as they ran, checked by the digests the run recorded, its limits and its
    third-party versions); the repository gives only the recorded commits' trees. What was not pinned is said."""
    record = load_record(run_dir)
    cache = run_dir.resolve().parents[1]
    differences = []
    for result in record.combinations:
        if result.cached:
            say(f"{result.combination.name}: its results are run {result.cached}'s; reproduce that run")
        elif result.build is not None and result.build.ok and result.tests:
            differences += _again(run_dir, repo, cache, record.device, result, say)
    return differences


def _again(
    run_dir: Path, repo: Path, cache: Path, device: str, result: CombinationResult, say: Callable[[str], None]
) -> list[str]:
    """One combination rerun from its pins: every recorded test again, each outcome that differs."""
    combination = result.combination
    assert result.build is not None
    try:
        pins = read_pins(run_dir / safe_name(combination.name))
    except PinError as exc:
        raise ReproduceError(f"{combination.name}: {exc}") from None
    for dist, path in result.build.wheels.items():
        wheel = Path(path)
        if not wheel.is_file() or cores.wheel_sha256(wheel) != result.build.wheel_sha256.get(dist):
            raise ReproduceError(f"{combination.name}: recorded wheel {wheel.name} is missing or changed")
    torch = cores.torch_wheel(combination.core.name, cache)
    if cores.wheel_sha256(torch) != combination.core.sha:
        raise ReproduceError(f"{combination.name}: torch {combination.core.name} is no longer the recorded wheel")
    for line in pins.unpinned:
        say(f"{combination.name}: not pinned by version: {line}")
    profile = load_profile(pins.profile.parent.parent, pins.profile.stem)
    python = envs.environment(
        result.build, torch, list(profile.requirements), cache, pins.requirements, profile.excludes
    )
    ctx = Context(repo, cache, CIConfig(device, (combination.core.name,), combination.suite.name), profile)
    paths = _import_paths(ctx, combination, pins, say)
    limits = pins.inputs.get("limits", {})
    where = isolation.isolation(str(limits.get("isolation", "process")), str(limits.get("image", DEFAULT_IMAGE)))
    reads = (*paths, isolation.interpreter_prefix(python)) if where.name == "docker" else tuple(paths)
    env = {"PYTHONPATH": os.pathsep.join(map(str, paths))} if paths else {}
    suite = runner.Suite(
        python, pins.configs, suite_root(ctx, combination.suite), pins.device, pins.backend, env, where, reads,
        pins.passed,
    )  # fmt: skip
    say(f"{combination.name}: rerunning {len(result.tests)} tests")
    nodeids = [t.nodeid for t in result.tests]
    workdir = run_dir / "reproduce" / safe_name(combination.name)
    rerun = runner.run_shard(suite, 1, nodeids, nodeids, pins.limits, workdir)
    differences = []
    for test in result.tests:
        now = runner.outcome_of(rerun.records.get(test.nodeid))
        recorded = test.attempts[0] if test.attempts else test.outcome
        if now != recorded:
            differences.append(f"{combination.name}: {test.nodeid}: {recorded} -> {now}")
    return differences


def _import_paths(ctx: Context, combination: Combination, pins: Pins, say: Callable[[str], None]) -> list[Path]:
    """The profile's backend import paths with the bytes the run had: in the repository or the backend commit's
    tree, whichever matches the recorded digest; said when neither does."""
    recorded = pins.inputs.get("import_paths", [])
    homes = [ctx.repo, worktrees.checkout(ctx.backend_repo, combination.backend.sha, ctx.cache)]
    paths = []
    for index, relative in enumerate(ctx.profile.pythonpath):
        digest = recorded[index] if index < len(recorded) else None
        found = next((home / relative for home in homes if tree_sha256(home / relative) == digest), None)
        if found is None:
            say(f"{combination.name}: not pinned: import path {relative} differs from the run's; today's is used")
            found = ctx.repo / relative
        paths.append(found)
    return paths
