"""The plan JSON, the GitHub Actions matrix it fans out to, and the node ids one shard runs.

Both documents are deterministic (sorted keys, shards in plan order, units sorted), so a re-plan from the same
durations is byte-identical and a changed plan shows as a diff.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from testreuse.shards.planner import Plan

VERSION = 1


class PlanError(ValueError):
    """A plan document that cannot be used: the one-line message names the source and the field."""


def plan_document(plan: Plan) -> dict[str, object]:
    """The plan as JSON data: per shard its units (node ids), predicted seconds and how many tests are estimates."""
    shards = []
    for index, shard in enumerate(plan.shards, 1):
        shards.append(
            {
                "shard": index,
                "group": shard.group,
                "test_seconds": round(shard.seconds, 3),
                "predicted_seconds": round(shard.seconds + plan.setup_seconds, 3),
                "over_cap": plan.cap_seconds is not None and shard.seconds + plan.setup_seconds > plan.cap_seconds,
                "estimated_tests": sum(u.estimated for u in shard.units),
                "units": [
                    {"id": u.nodeid, "seconds": round(u.seconds, 3), "estimated": u.estimated > 0} for u in shard.units
                ],
            }
        )
    return {
        "version": VERSION,
        "shards": shards,
        "setup_seconds": plan.setup_seconds,
        "cap_seconds": plan.cap_seconds,
        "lower_bound_seconds": round(plan.lower_bound, 3),
        "predicted_makespan_seconds": round(plan.makespan, 3),
        "fewest_shards": plan.fewest_shards,
    }


def matrix_document(plan: Mapping[str, object]) -> dict[str, object]:
    """`{"include": [...]}` for `strategy.matrix`: one leg per shard, carrying its index, count and group."""
    shards = _shards(plan, "plan")
    legs = [
        {"shard": s["shard"], "shards": len(shards), "group": s["group"], "predicted_seconds": s["predicted_seconds"]}
        for s in shards
    ]
    return {"include": legs}


def dumps(document: Mapping[str, object]) -> str:
    """Deterministic JSON text."""
    return json.dumps(document, indent=1, sort_keys=True) + "\n"


def _shards(plan: Mapping[str, object], source: str) -> list[dict[str, object]]:
    shards = plan.get("shards") if isinstance(plan, Mapping) else None
    if not isinstance(shards, list) or not all(isinstance(s, dict) for s in shards):
        raise PlanError(f"{source}: shards: expected a list of shard objects")
    for number, shard in enumerate(shards, 1):
        if shard.get("shard") != number:
            raise PlanError(f"{source}: shards[{number - 1}].shard: expected {number}, got {shard.get('shard')!r}")
    return shards


def shard_selection(plan: Mapping[str, object], shard: int, source: str = "plan") -> list[str]:
    """The node ids (`file`, `file::Class` or `file::Class::test`) that shard `shard` (1-based) passes to pytest."""
    shards = _shards(plan, source)
    if not 1 <= shard <= len(shards):
        raise PlanError(f"{source}: shard: {shard} is not in 1..{len(shards)}")
    units = shards[shard - 1].get("units")
    ids = [u.get("id") for u in units] if isinstance(units, list) and all(isinstance(u, dict) for u in units) else None
    if ids is None or not all(isinstance(i, str) and i for i in ids):
        raise PlanError(f"{source}: shards[{shard - 1}].units: expected a list of {{id: node id}} objects")
    return ids
