"""`testselect truth`'s driver: collect the selected files' cases on the device, then run every case without a
record in `shards` pytest processes under testreuse's plugin, split by case count. A shard whose pytest process dies
inside a case gets that case recorded as crashed and is relaunched without it.

Resumable: cases with a record in DIR/results are not run again, so a rerun after an interrupt runs the rest.
Never imports testreuse or torch: the pytest processes do (`-p testreuse`; the device autoloads with torch).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from testselect.evidence.run import select, split
from testselect.index.build import tree_test_dir
from testselect.refine.records import read_records
from testselect.truth import ledger
from testselect.truth.cases import read_plan, split_cases
from testselect.truth.configs import write_configs

POLL_SECONDS = 0.2
PROGRESS_SECONDS = 10.0
_RAN = {0, 1, 5}  # pytest's ExitCode: ok, tests failed (or collection errors), none collected


class TruthError(Exception):
    """The run cannot go on (pytest refused it, the folder holds another device's truth): one line."""


@dataclass(frozen=True)
class Layout:
    """DIR: configs/ (every case mandatory), results/ (the truth), logs/ (one per pytest process), work/ (case lists,
    started cases, collection plans) and truth.json (the device and tree the results belong to)."""

    out: Path

    @property
    def configs(self) -> Path:
        return self.out / "configs"

    @property
    def results(self) -> Path:
        return self.out / "results"

    @property
    def logs(self) -> Path:
        return self.out / "logs"

    @property
    def work(self) -> Path:
        return self.out / "work"

    def claim(self, root: Path, device: str) -> None:
        """Make the folders; refuse a DIR whose results are another device's or another tree's."""
        meta = self.out / "truth.json"
        owner = {"device": device, "torch_root": str(root)}
        if meta.exists() and (held := json.loads(meta.read_text(encoding="utf-8"))) != owner:
            raise TruthError(
                f"--out {self.out}: holds the truth of {held['device']} on {held['torch_root']}; give another --out"
            )
        for folder in (self.configs, self.results, self.logs, self.work):
            folder.mkdir(parents=True, exist_ok=True)
        meta.write_text(json.dumps(owner, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        (self.work / "pytest.ini").write_text("[pytest]\n", encoding="utf-8")  # not the enclosing project's


@dataclass
class Report:
    """What one truth run did, and the truth as it stands after it."""

    files: int = 0
    collected: int = 0  # cases the selected files make on the device
    already_recorded: int = 0  # of them, with a record before this run
    recorded_now: int = 0  # records this run wrote, the driver's crash records included
    outcomes: Counter[str] = field(default_factory=Counter)  # the last record of every collected case
    missing: int = 0  # collected cases still without a record
    launches: int = 0  # pytest processes, collection included
    problems: list[str] = field(default_factory=list)  # what left cases without a record
    results: list[Path] = field(default_factory=list)  # every results file: the truth
    wall_seconds: float = 0.0


@dataclass
class Shard:
    """One shard's cases; `attempt` counts its pytest processes in this run (relaunches after a crash)."""

    number: int
    cases: list[str]
    attempt: int = 0
    recorded: int = 0  # records of its ended attempts
    process: subprocess.Popen | None = None


def _stop(process: subprocess.Popen) -> None:
    """Kill the process's whole group (testreuse's forked worker, a test's children) and reap it."""
    with contextlib.suppress(ProcessLookupError):  # the group is gone already
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()


class Driver:
    """One run over a claimed DIR: the collected cases' facts, the recorded outcomes, the shards."""

    def __init__(self, root: Path, layout: Layout, device: str, timeout: float, say: Callable[[str], None]) -> None:
        self.root = root
        self.layout = layout
        self.device = device
        self.timeout = timeout
        self.say = say
        self.started = time.monotonic()
        self.run_number = ledger.next_run(layout.results)
        self.done = ledger.recorded(layout.results)  # node id -> outcome
        self.facts: dict[str, dict] = {}  # node id -> testreuse's facts of every collected case
        self.shards: list[Shard] = []
        self.report = Report()

    def _pytest(self, args: list[str], log: Path) -> subprocess.Popen:
        command = [
            sys.executable,
            "-m",
            "pytest",
            *args,
            "-c",
            str(self.layout.work / "pytest.ini"),
            "--rootdir",
            str(self.root),
            "-p",
            "testreuse",  # by its entry-point name: loaded even where plugin autoload is off
            "-p",
            "testselect.truth.plugin",
            "-p",
            "no:cacheprovider",
            "--testreuse-config",
            str(self.layout.configs),
            "--torch-root",
            str(self.root),
            "--testreuse-device",
            self.device,
            "--testreuse-timeout",
            str(self.timeout),
            "--continue-on-collection-errors",
        ]
        with log.open("w", encoding="utf-8") as stream:
            process = subprocess.Popen(
                command, cwd=self.layout.work, stdout=stream, stderr=subprocess.STDOUT, start_new_session=True
            )
        self.report.launches += 1
        return process

    def collect(self, files: list[Path], shards: int) -> None:
        """Every case the files make on the device, with its facts: testreuse's plan of a collect-only run (the ids
        are the device's own), the files split over `shards` processes by size."""
        jobs = []
        try:
            for number, chunk in enumerate(split(files, shards)):
                plan = self.layout.work / f"collect-{number}.jsonl"
                plan.unlink(missing_ok=True)
                log = self.layout.logs / f"run-{self.run_number}-collect-{number}.log"
                ids = [p.relative_to(self.root).as_posix() for p in chunk]
                args = [*ids, "--collect-only", "-qq", "--testreuse-plan", str(plan)]
                jobs.append((self._pytest(args, log), plan, log))
            for process, _, _ in jobs:
                process.wait()
        finally:
            for process, _, _ in jobs:
                _stop(process)
        for process, plan, log in jobs:
            lines = log.read_text(encoding="utf-8", errors="replace").splitlines()
            if process.returncode not in _RAN:
                refused = next((line for line in lines if line.startswith("ERROR: ")), None)
                said = refused.removeprefix("ERROR: ") if refused else f"see {log}"
                raise TruthError(f"collection on {self.device}: pytest exited {process.returncode}: {said}")
            for line in lines:
                if line.startswith("ERROR test"):
                    self.report.problems.append(f"{line.removeprefix('ERROR ')}: not collected (see {log})")
            if plan.exists():
                self.facts.update(read_plan(plan))
        self.report.files = len(files)
        self.report.collected = len(self.facts)
        self.report.already_recorded = sum(nodeid in self.done for nodeid in self.facts)

    def run_shards(self, shards: int) -> None:
        """Run the cases without a record, contiguous and balanced by count; relaunch a shard after a crash."""
        pending = [nodeid for nodeid in sorted(self.facts) if nodeid not in self.done]
        self.shards = [Shard(number, chunk) for number, chunk in enumerate(split_cases(pending, shards))]
        sizes = ", ".join(str(len(s.cases)) for s in self.shards) or "none"
        self.say(
            f"collected {self.report.collected} cases in {self.report.files} files on {self.device} "
            f"({self._elapsed()}); {self.report.already_recorded} already recorded; {len(pending)} to run in "
            f"{len(self.shards)} shards ({sizes})"
        )
        try:
            for shard in self.shards:
                self._launch(shard)
            shown = time.monotonic()
            while any(shard.process for shard in self.shards):
                time.sleep(POLL_SECONDS)
                for shard in self.shards:
                    process = shard.process
                    if process is not None and process.poll() is not None:
                        shard.process = None
                        self._finish(shard, process)
                if time.monotonic() - shown >= PROGRESS_SECONDS:
                    self.progress()
                    shown = time.monotonic()
        finally:
            for shard in self.shards:
                if shard.process is not None:
                    _stop(shard.process)
        if self.shards:
            self.progress()

    def _stem(self, shard: Shard) -> str:
        return f"run-{self.run_number}-shard-{shard.number}-{shard.attempt}"

    def _launch(self, shard: Shard) -> None:
        remaining = [nodeid for nodeid in shard.cases if nodeid not in self.done]
        stem = self._stem(shard)
        cases = self.layout.work / f"{stem}.cases"
        cases.write_text("".join(f"{nodeid}\n" for nodeid in remaining), encoding="utf-8")
        files = sorted({nodeid.split("::", 1)[0] for nodeid in remaining})  # only these files are imported
        args = [
            *files,
            "-q",
            "--testreuse-results",
            str(self.layout.results / f"{stem}.jsonl"),
            "--truth-cases",
            str(cases),
            "--truth-started",
            str(self.layout.work / f"{stem}.started"),
        ]
        shard.process = self._pytest(args, self.layout.logs / f"{stem}.log")

    def _finish(self, shard: Shard, process: subprocess.Popen) -> None:
        """Fold an ended process's records; a death inside a case records it crashed and relaunches the rest."""
        _stop(process)  # a worker the dead process left behind
        stem = self._stem(shard)
        out = self.layout.results / f"{stem}.jsonl"
        records = read_records(out) if out.exists() else []
        for record in records:
            self.done[record.nodeid] = record.outcome
        shard.recorded += len(records)
        self.report.recorded_now += len(records)
        died = process.returncode not in _RAN
        running = ledger.last_started(self.layout.work / f"{stem}.started")
        crashed = died and running is not None and running[0] not in self.done
        if crashed:
            nodeid, since = running
            record = ledger.crash_record(self.facts[nodeid], process.returncode, shard.number, time.time() - since)
            ledger.append(self.layout.results / f"run-{self.run_number}-crashed.jsonl", record)
            self.done[nodeid] = "crashed"
            shard.recorded += 1
            self.report.recorded_now += 1
            self.say(f"shard {shard.number}: {nodeid}: {record['failure']['message']}; relaunching without it")
        remaining = sum(nodeid not in self.done for nodeid in shard.cases)
        if not remaining:
            return
        if crashed or (died and records):  # progress was made: the relaunch cannot loop
            shard.attempt += 1
            self._launch(shard)
        else:
            log = self.layout.logs / f"{stem}.log"
            self.report.problems.append(
                f"shard {shard.number}: pytest exited {process.returncode} with {remaining} of its cases not run "
                f"(see {log})"
            )

    def progress(self) -> None:
        done = self.report.already_recorded
        parts = []
        for shard in self.shards:
            count = shard.recorded
            if shard.process is not None:
                count += ledger.complete_lines(self.layout.results / f"{self._stem(shard)}.jsonl")
            done += count
            parts.append(f"shard {shard.number}: {count}/{len(shard.cases)}")
        self.say(f"progress: {done}/{self.report.collected} cases ({', '.join(parts)}), {self._elapsed()}")

    def _elapsed(self) -> str:
        return f"{time.monotonic() - self.started:.0f} s"


def run_truth(
    torch_root: Path,
    device: str,
    out: Path,
    patterns: list[str] | None,
    shards: int,
    timeout: float,
    say: Callable[[str], None],
) -> Report:
    """Run every case of the selected files on `device` with every rule mandatory, into `out`/results."""
    root = torch_root.resolve()
    test_dir = tree_test_dir(root)
    files = select(test_dir, patterns)
    if not files:
        raise TruthError(f"{test_dir}: no test files (test_*.py, *_test.py)")
    layout = Layout(out.resolve())  # the pytest processes run in its work/ folder
    layout.claim(root, device)
    write_configs([p.relative_to(test_dir).as_posix() for p in files], layout.configs)
    driver = Driver(root, layout, device, timeout, say)
    report = driver.report
    try:
        driver.collect(files, shards)
        driver.run_shards(shards)
    finally:
        report.wall_seconds = round(time.monotonic() - driver.started, 3)
    recorded = ledger.recorded(layout.results)
    report.outcomes = Counter(recorded[nodeid] for nodeid in driver.facts if nodeid in recorded)
    report.missing = report.collected - sum(report.outcomes.values())
    report.results = ledger.results_files(layout.results)
    return report
