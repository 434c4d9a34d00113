"""Per-test progress while shards run: the shards' result files are read as the plugin appends to them (one record
a finished test), and the time left is estimated from the plan's predicted seconds, corrected by how fast each
shard has actually gone so far."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from pathlib import Path

#: (tests done, tests in all, seconds left or None while nothing is known)
Report = Callable[[int, int, float | None], None]


@dataclass
class ShardWatch:
    """One shard as the watcher sees it: its results file, its tests and the plan's prediction."""

    results: Path
    tests: frozenset[str]
    predicted: float
    guessed: float = 0.0  # the share of its tests the planner had no duration for (their time is a constant)
    started: float | None = None  # monotonic seconds; None while the shard waits for a free slot
    done: set[str] = field(default_factory=set)
    _offset: int = 0

    def read(self) -> None:
        """Take in the records appended since the last read (a torn last line waits for the next read)."""
        try:
            with self.results.open("rb") as handle:
                handle.seek(self._offset)
                chunk = handle.read()
        except OSError:
            return
        whole = chunk[: chunk.rfind(b"\n") + 1]
        self._offset += len(whole)
        for line in whole.decode("utf-8", errors="replace").splitlines():
            nodeid = _nodeid(line)
            if nodeid in self.tests:
                self.done.add(nodeid)

    def left(self, now: float) -> float:
        """Predicted seconds left, scaled by the shard's observed pace in proportion to how much of it is done (the
        first tests, a compile's warm-up say, tell little of the rest) or to how much of the prediction was a guess."""
        if not self.tests:
            return 0.0
        fraction = len(self.done) / len(self.tests)
        remaining = self.predicted * (1 - fraction)
        expected = self.predicted * fraction
        if self.started is None or expected <= 0:
            return remaining
        pace = (now - self.started) / expected
        return remaining * (1 + (pace - 1) * max(fraction, self.guessed))


def _nodeid(line: str) -> str:
    """The node id of a finished test's record ("" for a deselection or a line that is not a record)."""
    try:
        record = json.loads(line)
    except ValueError:
        return ""
    if not isinstance(record, dict) or record.get("outcome") in (None, "", "deselected"):
        return ""
    return str(record.get("nodeid", ""))


class Watcher:
    """A thread that reports tests done and time left every `interval` seconds until stopped."""

    def __init__(self, shards: list[ShardWatch], parallel: int, report: Report, interval: float = 1.0) -> None:
        self.shards = shards
        self.parallel = max(1, parallel)
        self.report = report
        self.interval = interval
        self.total = sum(len(s.tests) for s in shards)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="crcr-progress", daemon=True)

    def start(self) -> Watcher:
        self._thread.start()
        return self

    def started(self, index: int) -> None:
        """A shard got its slot: its pace is measured from now."""
        self.shards[index].started = time.monotonic()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()
        self.tick()

    def tick(self) -> None:
        now = time.monotonic()
        for shard in self.shards:
            if shard.started is not None:
                shard.read()
        self.report(sum(len(s.done) for s in self.shards), self.total, self.eta(now))

    def eta(self, now: float) -> float | None:
        """The slowest running shard's time left, plus the waiting shards' predictions spread over the free slots."""
        running = [s.left(now) for s in self.shards if s.started is not None]
        waiting = sum(s.predicted for s in self.shards if s.started is None)
        if not running and not waiting:
            return None
        return max(running, default=0.0) + waiting / self.parallel

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            self.tick()


def shard_watches(shards: list[dict], owned: dict[int, Collection[str]], workdir: Path) -> list[ShardWatch]:
    """A watch per planned shard, reading `workdir/shard-N/results.jsonl`."""
    return [
        ShardWatch(
            workdir.resolve() / f"shard-{s['shard']}" / "results.jsonl",
            frozenset(owned.get(s["shard"], ())),
            float(s.get("predicted_seconds", 0.0)),
            min(1.0, int(s.get("estimated_tests", 0)) / max(1, len(owned.get(s["shard"], ())))),
        )
        for s in shards
    ]
