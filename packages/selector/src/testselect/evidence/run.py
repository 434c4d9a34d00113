"""`testselect evidence`: run a tree's test files with pytest and the evidence plugin, one pytest process per
shard, restarting a shard that died without the case it died in, and fold the cases into the store.

Resumable: cases recorded against their test's current content hash are deselected; lines a shard wrote before
an interrupt are folded in on the next run. Never imports torch: the pytest processes do.
"""

from __future__ import annotations

import fnmatch
import json
import os
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from testselect.evidence import store as evidence
from testselect.index.build import TreeError, index_tree, test_files, tree_test_dir
from testselect.index.store import Store

POLL_SECONDS = 0.2
PROGRESS_SECONDS = 30.0  # how often a long run says how far it got
_PYTEST_RAN = {0, 1, 5}  # pytest's ExitCode: ok, tests failed, none collected (all recorded already)


@dataclass(frozen=True)
class Recording:
    """The recording device a run's cases run on: the target device's name, how many devices it has, and the aten
    overloads it registers (its export) with the dtypes it runs them for (none listed: any), so torch dispatches
    each call as it would on the device, and a call the device would refuse raises as it would."""

    name: str
    device_count: int
    ops: dict[str, frozenset[str]]


@dataclass
class Report:
    """What one evidence run did."""

    observed: Counter[str] = field(default_factory=Counter)  # outcome -> cases recorded by this run
    already_recorded: int = 0  # cases of the selected files current in the store before this run
    launches: int = 0
    problems: list[str] = field(default_factory=list)  # a pytest process that ended badly, not in a case
    wall_seconds: float = 0.0


def split(files: list[Path], shards: int) -> list[list[Path]]:
    """Files onto `shards` by size, largest first onto the lightest (LPT); size stands in for duration."""
    loads = [(0, index, []) for index in range(shards)]
    for path in sorted(files, key=lambda p: (-p.stat().st_size, p)):
        size, index, chosen = min(loads)
        chosen.append(path)
        loads[index] = (size + path.stat().st_size, index, chosen)
    return [sorted(chosen) for _, _, chosen in sorted(loads, key=lambda load: load[1]) if chosen]


def select(test_dir: Path, patterns: list[str] | None) -> list[Path]:
    """The tree's test files, or those whose path under test/ matches one of `patterns` (fnmatch)."""
    files = test_files(test_dir)
    if patterns:
        files = [p for p in files if any(fnmatch.fnmatch(p.relative_to(test_dir).as_posix(), g) for g in patterns)]
        if not files:
            raise TreeError(f"--files {' '.join(patterns)}: no test file under {test_dir} matches")
    return files


@dataclass
class Shard:
    """One shard's pytest process, relaunched after a crash; `attempt` numbers its output files."""

    number: int
    files: list[Path]
    attempt: int = 0
    process: subprocess.Popen | None = None

    def out(self, workdir: Path) -> Path:
        return workdir / f"shard{self.number}-{self.attempt}.jsonl"


def run_evidence(
    torch_root: Path,
    store: Store,
    shards: int,
    patterns: list[str] | None,
    timeout: float,
    workdir: Path,
    device: Recording | None = None,
    say: Callable[[str], None] = lambda line: None,
) -> Report:
    """Observe every not-yet-recorded case of the selected files, on CPU or on the recording `device`, `shards`
    pytest processes at a time; `say` gets a `progress:` line every PROGRESS_SECONDS."""
    started = time.monotonic()
    workdir = workdir.resolve()  # the pytest processes run in the tree's test/ folder
    test_dir = tree_test_dir(torch_root.resolve())
    files = select(test_dir, patterns)
    index_tree(torch_root, store)  # current content hashes, so edited tests are re-observed
    evidence.ensure(store)
    workdir.mkdir(parents=True, exist_ok=True)
    report = Report()
    for leftover in sorted(workdir.glob("shard*.jsonl")):  # from a driver that was killed: keep finished cases
        _fold(store, leftover, report, timeout, finished=False)
    store.commit()
    names = {p.relative_to(test_dir).as_posix() for p in files}
    report.already_recorded = sum(node.split("::", 1)[0] in names for node in evidence.current(store))
    (workdir / "pytest.ini").write_text("[pytest]\n", encoding="utf-8")  # not the enclosing project's settings
    if device is not None:
        lines = (f"{op}\t{','.join(sorted(dtypes))}\n" for op, dtypes in sorted(device.ops.items()))
        (workdir / "device-ops").write_text("".join(lines), encoding="utf-8")
    pending = [Shard(number, chunk) for number, chunk in enumerate(split(files, shards))]
    try:
        for shard in pending:
            _launch(shard, test_dir, store, workdir, timeout, report, device)
        said = time.monotonic()
        while any(shard.process for shard in pending):
            time.sleep(POLL_SECONDS)
            if time.monotonic() - said >= PROGRESS_SECONDS:
                said = time.monotonic()
                say(_progress(pending, workdir, report, said - started))
            for shard in pending:
                if shard.process is None or shard.process.poll() is None:
                    continue
                crashed = _fold(store, shard.out(workdir), report, timeout)
                if not crashed and shard.process.returncode not in _PYTEST_RAN:
                    log = workdir / f"shard{shard.number}-{shard.attempt}.log"
                    report.problems.append(f"{log}: pytest exited {shard.process.returncode}: {_last_line(log)}")
                store.commit()
                shard.process = None
                if crashed:
                    shard.attempt += 1
                    _launch(shard, test_dir, store, workdir, timeout, report, device)
    finally:
        for shard in pending:
            if shard.process is not None:
                shard.process.kill()
                shard.process.wait()
                _fold(store, shard.out(workdir), report, timeout, finished=False)
        store.commit()
        report.wall_seconds = round(time.monotonic() - started, 3)
    return report


def _progress(shards: list[Shard], workdir: Path, report: Report, elapsed: float) -> str:
    """Cases recorded so far: folded into the store, plus those the running shards have finished."""
    running = [
        shard.out(workdir).read_bytes().count(b'"event": "case"') if shard.out(workdir).exists() else 0
        for shard in shards
    ]
    done = sum(report.observed.values()) + sum(running)
    parts = ", ".join(f"shard {s.number}: {n} in attempt {s.attempt}" for s, n in zip(shards, running, strict=True))
    return f"progress: {done} cases observed by this run ({parts}), {report.already_recorded} already; {elapsed:.0f} s"


def compiling_tests(store: Store) -> list[str]:
    """The indexed tests that call torch.compile or Inductor (features dynamo/inductor): their graphs are recorded."""
    query = (
        "SELECT DISTINCT t.node_id FROM tests t, json_each(t.features) f "
        "WHERE f.value IN ('dynamo', 'inductor') ORDER BY t.node_id"
    )
    return [row[0] for row in store.db.execute(query)]


def _launch(
    shard: Shard,
    test_dir: Path,
    store: Store,
    workdir: Path,
    timeout: float,
    report: Report,
    device: Recording | None,
) -> None:
    done = evidence.current(store)
    skip = workdir / f"shard{shard.number}.skip"
    skip.write_text("".join(f"{node}\n" for node in sorted(done)), encoding="utf-8")
    compiled = workdir / f"shard{shard.number}.compiled"
    compiled.write_text("".join(f"{node}\n" for node in compiling_tests(store)), encoding="utf-8")
    command = [
        sys.executable,
        "-m",
        "pytest",
        *(p.relative_to(test_dir).as_posix() for p in shard.files),
        "-c",
        str(workdir / "pytest.ini"),
        "--rootdir",
        str(test_dir),
        "-p",
        "testselect.evidence.plugin",
        "-p",
        "no:cacheprovider",
        "--evidence-out",
        str(shard.out(workdir)),
        "--evidence-skip",
        str(skip),
        "--evidence-compiled",
        str(compiled),
        "--evidence-timeout",
        str(timeout),
        "--continue-on-collection-errors",
        "-q",
    ]
    env = os.environ | {"PYTORCH_TESTING_DEVICE_ONLY_FOR": "cpu"}
    if device is not None:  # the device's own backend must not load: the recorder takes its name
        env |= {"PYTORCH_TESTING_DEVICE_ONLY_FOR": device.name, "TORCH_DEVICE_BACKEND_AUTOLOAD": "0"}
        command += [
            "--evidence-device",
            device.name,
            "--evidence-device-ops",
            str(workdir / "device-ops"),
            "--evidence-device-count",
            str(device.device_count),
        ]
    log = (workdir / f"shard{shard.number}-{shard.attempt}.log").open("w", encoding="utf-8")
    with log:
        shard.process = subprocess.Popen(command, cwd=test_dir, env=env, stdout=log, stderr=subprocess.STDOUT)
    report.launches += 1


def _last_line(log: Path) -> str:
    """The last error line of a pytest process that ended badly (its usage error, its internal error), else its last
    line."""
    lines = [line.strip() for line in log.read_text(encoding="utf-8", errors="replace").splitlines() if line.strip()]
    errors = [line for line in lines if "error" in line.lower()]
    return (errors or lines or ["no output"])[-1]


def _fold(store: Store, out: Path, report: Report, timeout: float, finished: bool = True) -> bool:
    """Record a shard output's cases, then delete it; True when the process died inside a case (recorded as
    crashed, or timeout when the plugin's watchdog fired). With `finished` False (we killed it) that case is left
    for the next run.
    """
    if not out.exists():
        return False
    running: dict | None = None
    for line in out.read_text(encoding="utf-8").splitlines():
        try:
            entry = json.loads(line)
        except json.JSONDecodeError:  # a torn last line: the process died while writing it
            continue
        if entry["event"] == "start":
            running = entry
        elif entry["event"] == "case":
            running = None
            case = evidence.Case(
                entry["nodeid"],
                entry["generic"],
                entry["outcome"],
                entry["duration"],
                entry["ops"],
                entry["dtypes"],
                entry.get("recorder", "eager"),
                entry.get("opinfo"),
                entry.get("module"),
                tuple(entry.get("case_dtypes", ())),
                entry.get("raised", {}),
                entry.get("case_params", {}),
            )
            evidence.record(store, case)
            report.observed[case.outcome] += 1
    fault = out.with_suffix(".fault")
    timed_out = fault.exists() and "Timeout (" in fault.read_text(encoding="utf-8", errors="replace")
    if running is not None and finished:
        outcome = "timeout" if timed_out else "crashed"
        evidence.record(store, evidence.Case(running["nodeid"], running["generic"], outcome, timeout * timed_out))
        report.observed[outcome] += 1
    out.unlink()
    fault.unlink(missing_ok=True)
    return running is not None and finished
