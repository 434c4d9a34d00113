"""What a rerun need not redo (results and collections by input hash), the dry run that says so, and the per-test
progress that shows where a run is."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from crcr.ci import build, combinations, cores, reuse
from crcr.ci.digest import file_sha256
from crcr.ci.model import BuildResult, Candidate, Combination, CombinationResult, TestOutcome, to_json
from crcr.ci.progress import RichProgress, clock
from crcr.ci.watch import ShardWatch, Watcher
from crcr.cli import main
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rich.console import Console

CORE = Candidate("core", "2.13.0", "2.13.0", "a" * 64)


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout.strip()


def _combination(name: str = "primary") -> Combination:
    backend = Candidate("backend", "HEAD", "1" * 12, "1" * 40)
    return Combination(name, "primary", backend, CORE, Candidate("suite", "embedded", "x", "b" * 64))


def _parts(tmp_path: Path, retries: int = 1, config: str = "x: 1\n") -> dict:
    configs = tmp_path / "configs"
    configs.mkdir(exist_ok=True)
    (configs / "a.yaml").write_text(config)
    profile = tmp_path / "dev.yaml"
    profile.write_text("device: dev\n")
    built = BuildResult(ok=True, wheel_sha256={"backend": "c" * 64})
    return reuse.inputs(_combination(), built, CORE.sha, configs, profile, [], {"retries": retries})


def _record(cache: Path, run_id: str, result: CombinationResult) -> None:
    run_dir = cache / "runs" / run_id
    run_dir.mkdir(parents=True)
    (run_dir / "record.json").write_text(json.dumps({"combinations": [to_json(result)]}))
    reuse.remember_results(cache, run_id, [result])


def test_a_passed_result_is_reused_by_identical_inputs_and_names_its_run(tmp_path: Path) -> None:
    key = reuse.key(_parts(tmp_path))
    ran = CombinationResult(_combination(), "passed", tests=[TestOutcome("t::a", "passed")], inputs=key)
    _record(tmp_path / "cache", "run-1", ran)
    hit = reuse.cached_result(tmp_path / "cache", key, _combination("core@2.14.1"))
    assert hit is not None
    assert hit.cached == "run-1"
    assert hit.combination.name == "core@2.14.1"
    assert [t.outcome for t in hit.tests] == ["passed"]


def test_any_changed_input_is_a_miss(tmp_path: Path) -> None:
    assert reuse.key(_parts(tmp_path, config="x: 2\n")) != reuse.key(_parts(tmp_path))
    assert reuse.key(_parts(tmp_path, retries=2)) != reuse.key(_parts(tmp_path))
    assert reuse.key(_parts(tmp_path, retries=2), with_limits=False) == reuse.key(_parts(tmp_path), with_limits=False)


def test_a_red_result_or_a_removed_run_is_never_reused(tmp_path: Path) -> None:
    key = reuse.key(_parts(tmp_path))
    failed = CombinationResult(_combination(), "failed", tests=[TestOutcome("t::a", "failed")], inputs=key)
    _record(tmp_path / "cache", "run-1", failed)
    assert reuse.cached_result(tmp_path / "cache", key, _combination()) is None
    (tmp_path / "cache" / "results").mkdir(exist_ok=True)
    (tmp_path / "cache" / "results" / f"{key}.json").write_text(json.dumps({"run_id": "run-gone"}))
    assert reuse.cached_result(tmp_path / "cache", key, _combination()) is None
    (tmp_path / "cache" / "results" / f"{key}.json").write_text(json.dumps({"run_id": "../runs/run-1"}))
    assert reuse.cached_result(tmp_path / "cache", key, _combination()) is None


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(record=st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(
        ["combinations", "inputs", "status", "tests", "combination", "name", "outcome"]), inner, max_size=4),
    max_leaves=12,
))  # fmt: skip
def test_a_damaged_record_is_a_miss_never_a_crash(tmp_path: Path, record: object) -> None:
    key = reuse.key(_parts(tmp_path))
    run_dir = tmp_path / "cache" / "runs" / "run-x"
    run_dir.mkdir(parents=True, exist_ok=True)
    if isinstance(record, dict) and isinstance(record.get("combinations"), list):
        record["combinations"] = [{**c, "inputs": key} if isinstance(c, dict) else c for c in record["combinations"]]
    (run_dir / "record.json").write_text(json.dumps(record))
    (tmp_path / "cache" / "results").mkdir(exist_ok=True)
    (tmp_path / "cache" / "results" / f"{key}.json").write_text(json.dumps({"run_id": "run-x"}))
    hit = reuse.cached_result(tmp_path / "cache", key, _combination())
    assert hit is None or hit.status == "passed"


def test_the_watcher_counts_tests_as_they_finish_and_scales_the_time_left_by_pace(tmp_path: Path) -> None:
    results = tmp_path / "results.jsonl"
    watch = ShardWatch(results, frozenset({"t::a", "t::b", "t::c", "t::d"}), predicted=40.0)
    seen: list[tuple[int, int, float | None]] = []
    watcher = Watcher([watch], parallel=1, report=lambda *a: seen.append(a), interval=3600)
    watcher.tick()
    assert seen[-1] == (0, 4, 40.0)  # nothing started: the prediction
    watch.started = 100.0
    results.write_text('{"nodeid": "t::a", "outcome": "passed"}\n{"nodeid": "t::x", "outcome": "deselected"}\n{"node')
    watch.read()
    assert watch.done == {"t::a"}
    # a quarter took 20 s, twice the predicted 10 s: the 30 s left are scaled by a quarter of that pace
    assert watch.left(now=120.0) == pytest.approx(30.0 * (1 + (2 - 1) * 0.25))
    watch.guessed = 1.0  # every prediction a constant: the pace alone says how long the rest takes
    assert watch.left(now=120.0) == pytest.approx(60.0)
    with results.open("a") as handle:
        handle.write('id": "t::b", "outcome": "failed"}\n')  # the torn line, completed
    watch.read()
    assert watch.done == {"t::a", "t::b"}


def test_plain_progress_prints_test_counts_at_most_every_interval_and_the_end(tmp_path: Path) -> None:
    console = Console(file=(tmp_path / "out.txt").open("w"), force_terminal=False, width=200)
    progress = RichProgress(console)
    for done in range(0, 101):
        progress.tests("primary", done, 100, eta=100 - done)
    progress.done("primary", "passed; 100 passed")
    progress.close()
    console.file.close()
    lines = (tmp_path / "out.txt").read_text().splitlines()
    assert lines == [
        "[primary] tests 0/100, about 1:40 left",
        "[primary] tests 100/100, about 0:00 left",
        "[primary] passed; 100 passed",
    ]
    assert clock(3725) == "1:02:05"
    assert clock(None) == "-:--"


def test_a_first_run_is_planned_from_the_combinations_of_its_own_variant(tmp_path: Path) -> None:
    from crcr.ci.runner import alike

    store = tmp_path / "durations.json"
    job = {"primary": {}, "core@2.13.0": {}, "primary+compile": {}, "x+other": {}}
    store.write_text(json.dumps({"ring/embedded": job, "other/embedded": {"core@2.12.0": {}}}))
    assert alike(store, "ring/embedded", "core@2.14.1+compile") == ["primary+compile"]
    assert alike(store, "ring/embedded", "primary") == ["core@2.13.0"]  # another device's runs are not alike
    assert alike(store, "ring/upstream", "primary") == []
    assert alike(tmp_path / "missing.json", "ring/embedded", "primary") == []


# --- the dry run ------------------------------------------------------------------------------------------------------


@pytest.fixture
def backend_repo(tmp_path: Path) -> Path:
    """A backend repository with one workspace member declaring torch<2.14, a device profile and ci.yaml."""
    repo = tmp_path / "backend"
    member = repo / "packages" / "dev"
    member.mkdir(parents=True)
    (member / "pyproject.toml").write_text('[project]\nname = "dev"\ndependencies = ["torch>=2.13,<2.14"]\n')
    (repo / "pyproject.toml").write_text('[tool.uv.workspace]\nmembers = ["packages/dev"]\n')
    (repo / combinations.EMBEDDED_TREE / "test").mkdir(parents=True)
    (repo / combinations.EMBEDDED_TREE / "test" / "test_a.py").write_text("def test_a():\n    pass\n")
    (repo / "configs" / "devices").mkdir(parents=True)
    (repo / "configs" / "devices" / "dev.yaml").write_text("device: dev\nconfigs: {embedded: configs/dev}\n")
    (repo / "configs" / "ci.yaml").write_text("device: dev\ncore: {versions: ['2.13.0', '2.14.1']}\n")
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "-c", "user.email=ci@example.invalid", "-c", "user.name=ci", "commit", "-q", "-m", "one")
    return repo


def _fetched(cache: Path, version: str) -> str:
    """A wheelhouse that holds torch==VERSION with its completion marker, as a finished fetch leaves it."""
    folder = cores.wheelhouse(version, cache)
    folder.mkdir(parents=True)
    wheel = folder / f"torch-{version}-cp311-cp311-linux_x86_64.whl"
    wheel.write_bytes(version.encode())
    stat = wheel.stat()
    sha = file_sha256(wheel)
    marker = {"wheel": wheel.name, "sha256": sha, "size": stat.st_size, "mtime_ns": stat.st_mtime_ns}
    (folder / cores.MARKER).write_text(json.dumps(marker))
    return sha


def test_the_dry_run_says_what_would_be_built_and_reused_and_makes_nothing(
    backend_repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cache = tmp_path / "cache"
    torch_13 = _fetched(cache, "2.13.0")
    torch_14 = _fetched(cache, "2.14.1")
    sha = git(backend_repo, "rev-parse", "HEAD")
    out = build.output_folder(cache, build.source_key(backend_repo, sha), torch_13)
    out.mkdir(parents=True)
    (out / "dev-0.1-py3-none-any.whl").write_bytes(b"wheel")
    manifest = {"ok": True, "torch": {"sha256": torch_13}, "wheels": {"dev": {"file": "dev-0.1-py3-none-any.whl",
                "sha256": file_sha256(out / "dev-0.1-py3-none-any.whl")}}}  # fmt: skip
    (out / "manifest.json").write_text(json.dumps(manifest))
    before = sorted(p.relative_to(cache) for p in cache.rglob("*"))
    config = str(backend_repo / "configs" / "ci.yaml")
    code = main(["ci", "--dry-run", "--config", config, "--repo", str(backend_repo), "--cache", str(cache)])
    printed = capsys.readouterr().out
    assert code == 0
    assert f"  core    2.14.1     2.14.1         {torch_14}" in printed
    assert f"  backend HEAD       {sha[:12]}   {sha}" in printed
    assert "primary  (primary)\n  incompatible: the backend declares torch <2.14,>=2.13; this core is 2.14.1" in printed
    assert f"core@2.13.0  (core)\n  build: reuse {out}\n  environment: would make {cache / 'envs'}" in printed
    assert "shard plan: after collection (2 shards of the collected tests)" in printed
    assert sorted(p.relative_to(cache) for p in cache.rglob("*")) == before  # nothing made, nothing fetched
