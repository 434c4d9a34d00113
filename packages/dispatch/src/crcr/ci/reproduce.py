"""`crcr reproduce RUN_DIR`: the same combinations again, from the wheels the run recorded (checked by sha256),
every recorded test rerun, and every outcome that differs said."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from crcr.ci import cores, envs, runner
from crcr.ci.ciconfig import load_ci_config, load_profile
from crcr.ci.model import RunRecord, from_json
from crcr.ci.pipeline import Context, home_of, limits_of, suite_for


class ReproduceError(Exception):
    """The run cannot be reproduced as recorded (no record, a wheel gone or changed): one line saying which."""


def load_record(run_dir: Path) -> RunRecord:
    path = run_dir / "record.json"
    try:
        return from_json(RunRecord, json.loads(path.read_text(encoding="utf-8")))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, TypeError, KeyError) as exc:
        raise ReproduceError(f"{path}: not a run record: {exc}") from None


def reproduce(run_dir: Path, repo: Path, say: Callable[[str], None]) -> list[str]:
    """Differences as `combination: nodeid: recorded -> now` lines (empty when everything is the same)."""
    record = load_record(run_dir)
    cache = run_dir.resolve().parents[1]
    config = load_ci_config(repo / "configs" / "ci.yaml")
    ctx = Context(repo, cache, config, load_profile(repo / "configs", record.device))
    differences = []
    for result in record.combinations:
        if result.build is None or not result.build.ok or not result.tests:
            continue
        combination = result.combination
        for dist, path in result.build.wheels.items():
            wheel = Path(path)
            if not wheel.is_file() or cores.wheel_sha256(wheel) != result.build.wheel_sha256.get(dist):
                raise ReproduceError(f"{combination.name}: recorded wheel {wheel.name} is missing or changed")
        torch = cores.torch_wheel(combination.core.name, cache)
        if cores.wheel_sha256(torch) != combination.core.sha:
            raise ReproduceError(f"{combination.name}: torch {combination.core.name} is no longer the recorded wheel")
        say(f"{combination.name}: rerunning {len(result.tests)} tests")
        python = envs.environment(result.build, torch, list(home_of(ctx, combination).profile.requirements), cache)
        suite = suite_for(ctx, combination, python)
        nodeids = [t.nodeid for t in result.tests]
        workdir = run_dir / "reproduce" / combination.name.replace("/", "_")
        rerun = runner.run_shard(suite, 1, nodeids, nodeids, limits_of(config), workdir)
        for test in result.tests:
            now = runner.outcome_of(rerun.records.get(test.nodeid))
            recorded = test.attempts[0] if test.attempts else test.outcome
            if now != recorded:
                differences.append(f"{combination.name}: {test.nodeid}: {recorded} -> {now}")
    return differences
