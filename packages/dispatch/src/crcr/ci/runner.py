"""Run one combination's upstream tests through testreuse: collect, plan shards, run them in parallel processes,
rerun a shard that died, retry failed tests alone, and account for every selected test.

Everything runs in the combination's own environment (its Python), through the public command lines of pytest,
the testreuse plugin and `python -m testreuse.shards`; nothing of theirs is imported here.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from crcr.ci.isolation import Completed, DockerIsolation, Mounts, ProcessIsolation
from crcr.ci.model import FAILING, ShardResult, TestOutcome
from crcr.ci.shardenv import shard_environment
from crcr.ci.watch import Report, Watcher, shard_watches

#: A retry's outcomes that end a failure: the test did what its mode asks.
RETRY_PASSES = frozenset({"passed", "xfailed"})
#: pytest's exit statuses for a run that finished (tests passed / some failed / none collected).
FINISHED = (0, 1, 5)
#: The collection's file in a combination's work directory (testreuse's plan JSON lines).
COLLECTED = "collected.jsonl"
#: Seconds a retry's fresh interpreter may take beyond the test's own timeout: start, import torch, collect its file.
RETRY_START = 120.0


class RunnerError(Exception):
    """A step that cannot go on (collection or planning failed): one line saying which and why."""


@dataclass(frozen=True)
class Suite:
    """What the plugin needs to run a suite on one device."""

    python: Path  # the combination environment's interpreter
    configs: Path  # the testreuse config folder
    torch_root: Path | None  # None: the embedded tree
    device: str
    backend: str = ""  # --testreuse-backend MODULE[:FUNC]; "" when the device autoloads
    env: Mapping[str, str] = field(default_factory=dict)  # e.g. PYTHONPATH for a backend module
    isolation: ProcessIsolation | DockerIsolation = field(default_factory=ProcessIsolation)  # where shards run
    reads: tuple[Path, ...] = ()  # more host paths a shard reads (the interpreter's installation, backend modules)
    passed: tuple[str, ...] = ()  # host variables (names or patterns) the device needs, from its profile

    def mounts(self, workdir: Path) -> Mounts:
        """What a shard's container needs: its environment, suite and configs to read, `workdir` to write."""
        roots = (self.python.parent.parent, self.configs, *([self.torch_root] if self.torch_root else []))
        return Mounts(read_only=(*roots, *self.reads), writable=(workdir,))

    def plugin_args(self) -> list[str]:
        args = ["--testreuse-config", str(self.configs), "--testreuse-device", self.device]
        args += ["--torch-root", str(self.torch_root)] if self.torch_root is not None else []
        return args + (["--testreuse-backend", self.backend] if self.backend else [])


@dataclass(frozen=True)
class Limits:
    parallel: int = 2  # shards run at once
    workers: int = 1  # pytest-xdist workers inside a shard (1: none)
    retries: int = 1  # reruns of a failed test, alone, in a fresh process
    test_timeout: float = 300.0
    shard_timeout: float = 3600.0


@dataclass
class Collected:
    """Every case the configs select on this device, with its mode, in collection order."""

    modes: dict[str, str]  # nodeid -> mode, skip included
    records: list[dict[str, Any]]

    @property
    def selected(self) -> list[str]:
        return [n for n, mode in self.modes.items() if mode != "skip"]


def _environ(suite: Suite, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """What a child that imports the suite's test files gets: the allow-list (crcr.ci.shardenv), not the host's."""
    fixed = {**suite.env, **(extra or {}), "PYTHONDONTWRITEBYTECODE": "1"}
    return shard_environment(os.environ, suite.passed, fixed)


def _pytest(suite: Suite, *args: str) -> list[str]:
    return [str(suite.python), "-m", "pytest", "-p", "no:cacheprovider", "-q", *suite.plugin_args(), *args]


def collect(suite: Suite, workdir: Path) -> Collected:
    """A collect-only run with the plugin: the cases and their modes, exactly as the shards will see them."""
    workdir = workdir.resolve()  # the children run elsewhere (cwd): every path they get is absolute
    workdir.mkdir(parents=True, exist_ok=True)
    plan = workdir / COLLECTED
    plan.unlink(missing_ok=True)
    done = _run(_pytest(suite, "--collect-only", "--testreuse-plan", str(plan)), workdir, _environ(suite), None)
    if done.returncode not in FINISHED or not plan.exists():
        raise RunnerError(f"collection failed (exit {done.returncode}): {_last_line(done.output)}")
    return collected_from(plan)


def collected_from(path: Path) -> Collected:
    """A collection (testreuse's plan JSON lines) read back; a record without a mode is not a case."""
    records = [r for r in read_records(path) if isinstance(r.get("mode"), str)]
    return Collected({r["nodeid"]: r["mode"] for r in records}, records)


@dataclass(frozen=True)
class Planning:
    """How testreuse's planner cuts a combination's tests into shards (ci.yaml's `shards:`)."""

    count: int = 2
    cap: float | None = None  # else: the fewest shards of at most this many predicted seconds each
    setup: float = 0.0  # seconds each shard costs before its first test
    groups: tuple[tuple[str, str], ...] = ()  # (name, pattern): tests that share a shard, never another group's

    def arguments(self) -> list[str]:
        mode = ["--cap", f"{self.cap:g}"] if self.cap is not None else ["--shards", str(self.count)]
        return [*mode, "--setup", f"{self.setup:g}", *(f"--group={name}={pattern}" for name, pattern in self.groups)]


def durations_job(device: str, suite_kind: str) -> str:
    """The durations store's job key for one device's runs of one suite (`DEVICE/embedded`): another device's, or
    another suite's, times for a same-named test and combination say nothing about these."""
    return f"{device}/{suite_kind}"


def plan_command(python: Path, durations: Path, job: str, key: str, tests: Path, planning: Planning) -> list[str]:
    """`python -m testreuse.shards plan` of the node ids in `tests` for combination `key`; a combination never run is
    estimated from the combinations of the same variant that have run."""
    argv = [str(python), "-m", "testreuse.shards", "plan", "--durations", str(durations), "--job", job,
            "--config", key, "--tests", str(tests), *planning.arguments()]  # fmt: skip
    for name in alike(durations, job, key):
        argv += ["--fallback", name]
    return argv


def plan_shards(
    suite: Suite, selected: Sequence[str], durations: Path, job: str, key: str, planning: Planning, workdir: Path
) -> dict:
    """testreuse's planner on the durations of earlier runs (tests it has never seen are estimated)."""
    workdir, durations = workdir.resolve(), durations.resolve()
    tests = workdir / "selected.txt"
    tests.write_text("".join(f"{n}\n" for n in selected), encoding="utf-8")
    output = workdir / "plan.json"
    argv = [*plan_command(suite.python, durations, job, key, tests, planning), "--output", str(output)]
    done = _run(argv, workdir, _environ(suite), None)
    if done.returncode != 0:
        raise RunnerError(f"shard planning failed: {_last_line(done.output)}")
    return json.loads(output.read_text(encoding="utf-8"))


def alike(durations: Path, job: str, key: str) -> list[str]:
    """The combinations of `job` in the durations store of the same variant as `key` (`primary+compile` is like
    `core@2.13.0+compile`, not like `primary`): their times are the best estimate for a first run of `key`."""
    try:
        known = json.loads(durations.read_text(encoding="utf-8")).get(job, {})
    except (OSError, ValueError, AttributeError):
        return []
    variant = key.partition("+")[2]
    return sorted(n for n in known if n != key and n.partition("+")[2] == variant) if isinstance(known, dict) else []


def merge_durations(suite: Suite, durations: Path, job: str, key: str, results: Sequence[Path], workdir: Path) -> None:
    """Fold this run's per-test times into the durations store the next plan reads."""
    present = [str(p.resolve()) for p in results if p.exists() and p.stat().st_size]
    durations = durations.resolve()
    if not present:
        return
    argv = [str(suite.python), "-m", "testreuse.shards", "merge", "--store", str(durations), "--job", job,
            "--config", key, *present]  # fmt: skip
    done = _run(argv, workdir, _environ(suite), None)
    if done.returncode != 0:
        raise RunnerError(f"durations merge failed: {_last_line(done.output)}")


def in_unit(nodeid: str, unit: str) -> bool:
    """A plan unit is a file, a class or a test: the node id is it or below it."""
    return nodeid == unit or nodeid.startswith(f"{unit}::")


@dataclass
class ShardRun:
    """What one shard did: its result line and the last record of every test it reported."""

    result: ShardResult
    records: dict[str, dict[str, Any]]
    log: Path


def run_shard(
    suite: Suite,
    index: int,
    units: Sequence[str],
    tests: Sequence[str],
    limits: Limits,
    workdir: Path,
    planned_seconds: float = 0.0,
    extra_env: Mapping[str, str] | None = None,
) -> ShardRun:
    """Run one shard; if the process dies before every test reported, rerun only the tests still missing, once."""
    shard_dir = workdir.resolve() / f"shard-{index}"
    shard_dir.mkdir(parents=True, exist_ok=True)
    results, log = shard_dir / "results.jsonl", shard_dir / "pytest.log"
    started = time.monotonic()
    done = _shard_pass(suite, list(units), limits, shard_dir, "run", extra_env)
    records = _last_by_nodeid(results)
    missing = [t for t in tests if t not in records]
    reran = False
    if missing and done.returncode not in FINISHED:
        reran = True
        done = _shard_pass(suite, missing, limits, shard_dir, "rerun", extra_env)
        records = _last_by_nodeid(results)
    seconds = time.monotonic() - started
    result = ShardResult(index, planned_seconds, round(seconds, 3), done.returncode, reran, len(tests))
    return ShardRun(result, records, log)


def _shard_pass(
    suite: Suite, ids: list[str], limits: Limits, shard_dir: Path, label: str, extra_env: Mapping[str, str] | None
) -> Completed:
    args = [*ids, "--testreuse-results", str(shard_dir / "results.jsonl"),
            "--junitxml", str(shard_dir / f"junit-{label}.xml"),
            "--testreuse-timeout", str(limits.test_timeout)]  # fmt: skip
    if limits.workers > 1:
        args += ["-n", str(limits.workers)]
    done = suite.isolation.run(
        _pytest(suite, *args), shard_dir, _environ(suite, extra_env), limits.shard_timeout, suite.mounts(shard_dir)
    )
    with (shard_dir / "pytest.log").open("a", encoding="utf-8") as log:
        log.write(f"==== {label}: exit {done.returncode}{' (killed: shard timeout)' if done.timed_out else ''}\n")
        log.write(done.output)
    return done


def retry(suite: Suite, nodeids: Sequence[str], limits: Limits, workdir: Path, attempt: int) -> dict[str, dict]:
    """Failed tests again, each alone in a fresh interpreter (its own pytest process, `limits.parallel` at a time):
    nothing a previous test, the collection or an earlier import did to the process or the device carries over."""
    retry_dir = workdir.resolve() / "retries" / f"attempt-{attempt}"
    retry_dir.mkdir(parents=True, exist_ok=True)

    def alone(numbered: tuple[int, str]) -> dict[str, dict]:
        index, nodeid = numbered
        stem = f"{index:04d}-{_safe(nodeid)}"  # the number keeps two long ids with one tail apart
        results = retry_dir / f"{stem}.jsonl"
        args = [nodeid, "--testreuse-results", str(results), "--testreuse-timeout", str(limits.test_timeout)]
        timeout = limits.test_timeout + RETRY_START
        done = suite.isolation.run(_pytest(suite, *args), retry_dir, _environ(suite), timeout, suite.mounts(retry_dir))
        (retry_dir / f"{stem}.log").write_text(done.output, encoding="utf-8")
        return _last_by_nodeid(results)

    with ThreadPoolExecutor(max_workers=max(1, limits.parallel)) as pool:
        return {n: r for found in pool.map(alone, enumerate(nodeids)) for n, r in found.items()}


def owners(selected: Sequence[str], plan: dict) -> dict[str, int]:
    """Which shard of the plan runs each selected test (a test in no shard's units is absent)."""
    found: dict[str, int] = {}
    for shard in plan["shards"]:
        for unit in (u["id"] for u in shard["units"]):
            for nodeid in selected:
                if nodeid not in found and in_unit(nodeid, unit):
                    found[nodeid] = shard["shard"]
    return found


def shard_subset(collected: Collected, plan: dict, index: int) -> tuple[Collected, dict]:
    """One shard of a plan as a plan of its own, with only the tests it owns: a leg of a distributed run."""
    chosen = [s for s in plan["shards"] if s["shard"] == index]
    if not chosen:
        raise RunnerError(f"the plan has no shard {index} (it has {len(plan['shards'])})")
    owned = {n for n, i in owners(collected.selected, plan).items() if i == index}
    modes = {n: m for n, m in collected.modes.items() if n in owned}
    return Collected(modes, [r for r in collected.records if r.get("nodeid") in owned]), {**plan, "shards": chosen}


def run_suite(
    suite: Suite,
    collected: Collected,
    plan: dict,
    limits: Limits,
    workdir: Path,
    progress: Report = lambda *_: None,
    shard_env: Mapping[int, Mapping[str, str]] | None = None,
) -> tuple[list[ShardResult], list[TestOutcome]]:
    """Every shard of the plan, in parallel, reporting each test as it finishes; then retries; every selected test
    ends with an outcome."""
    selected = collected.selected
    shards = plan["shards"]
    owner = owners(selected, plan)
    owned: dict[int, list[str]] = {}
    for nodeid in selected:
        owned.setdefault(owner.get(nodeid, 0), []).append(nodeid)
    watcher = Watcher(shard_watches(shards, owned, workdir), limits.parallel, progress).start()

    def one(position: int) -> ShardRun:
        shard = shards[position]
        index = shard["shard"]
        units = [u["id"] for u in shard["units"]]
        env = (shard_env or {}).get(index)
        watcher.started(position)
        return run_shard(suite, index, units, owned.get(index, []), limits, workdir, shard["predicted_seconds"], env)

    try:
        with ThreadPoolExecutor(max_workers=max(1, limits.parallel)) as pool:
            runs = list(pool.map(one, range(len(shards))))
    finally:
        watcher.stop()
    records = {n: r for run in runs for n, r in run.records.items()}
    outcomes = []
    for nodeid in selected:
        record = records.get(nodeid)
        outcome = outcome_of(record)
        test = TestOutcome(nodeid, outcome, collected.modes[nodeid], _duration(record), owner.get(nodeid, 0))
        test.attempts.append(outcome)
        test.failure = dict(record.get("failure") or {}) if record else {}
        if record and "signal" in record:
            test.failure.setdefault("signal", record["signal"])
        if record and record.get("output"):  # the test's own captured output: what classification reads
            test.failure["output"] = str(record["output"])
        outcomes.append(test)
    for attempt in range(1, limits.retries + 1):
        failing = [t for t in outcomes if t.outcome in FAILING]
        if not failing:
            break
        progress(0, len(failing), None)  # the retries: alone, each in a fresh process
        again = retry(suite, [t.nodeid for t in failing], limits, workdir, attempt)
        for test in failing:
            outcome = outcome_of(again.get(test.nodeid))
            test.attempts.append(outcome)
            if outcome in RETRY_PASSES:  # a retry that skipped or was deselected did not pass: the failure stands
                test.outcome = outcome
    return [run.result for run in runs], outcomes


def outcome_of(record: dict[str, Any] | None) -> str:
    """A record's outcome; `not_run` for a test that reported nothing, `promotable` for a non-strict xfail that
    passed (testreuse records both kinds of unexpected pass as `xpassed`, with the rule's mode)."""
    if record is None:
        return "not_run"
    outcome = str(record.get("outcome", ""))
    if outcome == "xpassed" and record.get("mode") == "xfail":
        return "promotable"
    return outcome if outcome else "error"


def _duration(record: dict[str, Any] | None) -> float:
    return float(record.get("duration", 0.0)) if record else 0.0


def _safe(nodeid: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in nodeid)[-120:]


def read_records(path: Path) -> list[dict[str, Any]]:
    """A testreuse JSON-lines file; a torn last line (its writer was killed mid-write) is dropped."""
    if not path.exists():
        return []
    records = []
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(record, dict) and "nodeid" in record:
            records.append(record)
    return records


def _last_by_nodeid(path: Path) -> dict[str, dict[str, Any]]:
    return {r["nodeid"]: r for r in read_records(path) if r.get("outcome") != "deselected"}


def _run(argv: list[str], cwd: Path, env: Mapping[str, str], timeout: float | None) -> Completed:
    """A step on the host (collection, planning, merging durations), whatever isolation the shards use."""
    return ProcessIsolation().run(argv, cwd, env, timeout)


def _last_line(output: str) -> str:
    lines = [line for line in output.strip().splitlines() if line.strip()]
    return lines[-1][:300] if lines else "no output"
