"""Work a rerun need not redo: a combination's results and its collection, found by the hash of their inputs.

A combination's inputs are its backend wheels, its torch wheel, its suite tree, its config folder, the device
profile, the backend's import path and the limits it ran under, each by hash. A passed combination whose inputs equal
a recorded run's reuses that run's results (marked `cached` with the run that ran them); a red one runs again, as
Bazel reruns a failed test. The index (`cache/results/<key>.json`) names the run; its `record.json` holds the
results, so a run removed by `crcr gc` is simply a miss. A collection (`cache/collections/<key>.jsonl`) is reused by
the same inputs less the limits, so a dry run can plan shards without starting pytest.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

from crcr.ci.digest import tree_sha256
from crcr.ci.model import BuildResult, Combination, CombinationResult, from_json

RESULTS = "results"
COLLECTIONS = "collections"


def inputs(
    combination: Combination, build: BuildResult, torch_sha256: str, configs: Path, profile: Path,
    import_paths: list[Path], limits: dict[str, Any],
) -> dict[str, Any]:  # fmt: skip
    """What decides a combination's outcomes, each part by hash."""
    return {
        "wheels": dict(sorted(build.wheel_sha256.items())),
        "torch": torch_sha256,
        "suite": combination.suite.sha,
        "variant": combination.variant,
        "configs": tree_sha256(configs),
        "profile": tree_sha256(profile),
        "import_paths": [tree_sha256(path) for path in import_paths],
        "limits": dict(sorted(limits.items())),
    }


def key(parts: dict[str, Any], with_limits: bool = True) -> str:
    """The hash of the inputs (without the limits: the collection's key)."""
    chosen = parts if with_limits else {k: v for k, v in parts.items() if k != "limits"}
    return hashlib.sha256(json.dumps(chosen, sort_keys=True).encode()).hexdigest()


def cached_result(cache: Path, inputs_key: str, combination: Combination) -> CombinationResult | None:
    """The recorded passed result with these inputs, as this combination's, or None (no entry, run gone, or not
    passed)."""
    entry = _read_json(cache / RESULTS / f"{inputs_key}.json")
    run_id = str(entry.get("run_id", "")) if isinstance(entry, dict) else ""
    if not run_id or Path(run_id).name != run_id:
        return None
    record = _read_json(cache / "runs" / run_id / "record.json")
    listed = record.get("combinations") if isinstance(record, dict) else None
    listed = listed if isinstance(listed, list) else []
    found = [c for c in listed if isinstance(c, dict) and c.get("inputs") == inputs_key]
    try:
        result = from_json(CombinationResult, found[0])
    except (IndexError, TypeError, KeyError, ValueError, AttributeError):
        return None  # no such combination, or a record this version cannot read: run it
    if result.status != "passed" or not isinstance(result.tests, list):
        return None
    result.combination = combination
    result.cached = result.cached or run_id
    result.regressions, result.fixes = [], []
    return result


def remember_results(cache: Path, run_id: str, results: list[CombinationResult]) -> None:
    """Index every passed combination of a recorded run by its inputs, so an identical rerun reuses it."""
    folder = cache / RESULTS
    folder.mkdir(parents=True, exist_ok=True)
    for result in results:
        if result.status == "passed" and result.inputs:
            _write_json(folder / f"{result.inputs}.json", {"run_id": run_id, "combination": result.combination.name})


def cached_collection(cache: Path, collection_key: str) -> Path | None:
    """A stored collection (testreuse's plan JSON lines) for these inputs, or None."""
    path = cache / COLLECTIONS / f"{collection_key}.jsonl"
    return path if path.is_file() else None


def remember_collection(cache: Path, collection_key: str, collected: Path) -> None:
    """Keep a collection for these inputs (written whole, then renamed: a reader never sees half of it)."""
    folder = cache / COLLECTIONS
    folder.mkdir(parents=True, exist_ok=True)
    scratch = folder / f".{collection_key}.tmp"
    shutil.copyfile(collected, scratch)
    scratch.replace(folder / f"{collection_key}.jsonl")


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _write_json(path: Path, data: Any) -> None:
    scratch = path.with_name(f".{path.name}.tmp")
    scratch.write_text(json.dumps(data, sort_keys=True) + "\n", encoding="utf-8")
    scratch.replace(path)
