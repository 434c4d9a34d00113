"""ci.yaml's `shards:` reaches testreuse's real planner: a cap with set-up seconds and feature groups, and each
device's and suite's own durations."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from crcr.ci import runner
from crcr.ci.ciconfig import load_ci_config
from crcr.ci.pipeline import planning_of
from embedded import config_folder, ring_suite

TESTS = [f"test/test_{f}.py::T::test_{i}" for f in ("a", "b") for i in range(3)]


def _store(path: Path, job: str, seconds: float) -> Path:
    """A durations store (PyTorch's test-times shape: file, class, test) timing every test at `seconds`."""
    files: dict[str, dict[str, dict[str, float]]] = {}
    for nodeid in TESTS:
        file, cls, test = nodeid.split("::")
        files.setdefault(file, {}).setdefault(cls, {})[test] = seconds
    path.write_text(json.dumps({job: {"primary": files}}))
    return path


def _plan(tmp_path: Path, ci_yaml: str, store: Path, job: str = "ring/embedded") -> dict:
    config = tmp_path / "ci.yaml"
    config.write_text("device: ring\ncore: {versions: ['2.13.0']}\n" + ci_yaml)
    suite = ring_suite(config_folder(tmp_path / "configs"))
    assert suite.python == Path(sys.executable)
    work = tmp_path / "plan"
    work.mkdir(exist_ok=True)
    return runner.plan_shards(suite, TESTS, store, job, "primary", planning_of(load_ci_config(config)), work)


def test_a_cap_with_set_up_seconds_makes_as_many_shards_as_it_needs(tmp_path: Path) -> None:
    store = _store(tmp_path / "durations.json", "ring/embedded", 100.0)
    plan = _plan(tmp_path, "shards: {cap: 250, setup: 50}\n", store)
    assert len(plan["shards"]) == 3  # 600 s of tests, at most 200 s of them under each 250 s shard
    assert all(s["predicted_seconds"] <= 250 for s in plan["shards"])


def test_groups_never_share_a_shard(tmp_path: Path) -> None:
    store = _store(tmp_path / "durations.json", "ring/embedded", 100.0)
    plan = _plan(tmp_path, "shards:\n  count: 2\n  groups: {bees: 'test/test_b.py'}\n", store)
    units = {s["group"]: {u["id"] for u in s["units"]} for s in plan["shards"]}
    assert set(units) == {"bees", "default"}
    assert all(u.startswith("test/test_b.py") for u in units["bees"])
    assert not any(u.startswith("test/test_b.py") for u in units["default"])


def test_another_device_s_times_do_not_plan_this_one(tmp_path: Path) -> None:
    store = _store(tmp_path / "durations.json", "other/embedded", 1000.0)
    plan = _plan(tmp_path, "shards: {count: 2}\n", store)
    assert max(s["predicted_seconds"] for s in plan["shards"]) < 1000  # estimated, not the other device's times
    known = _plan(tmp_path, "shards: {count: 2}\n", store, job="other/embedded")
    assert max(s["predicted_seconds"] for s in known["shards"]) >= 3000
