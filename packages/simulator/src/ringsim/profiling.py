"""Cumulative kernel statistics and a profiler context manager over the engine's kernel reports."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from ringsim import replay

if TYPE_CHECKING:
    from .engine.report import KernelReport

_CATEGORIES = ("total", "compute", "memory", "communication")


class _Sums:
    """Running sums over kernel launches."""

    def __init__(self) -> None:
        self.kernels = self.sticks = self.flops = 0
        self.cycles = dict.fromkeys(_CATEGORIES, 0.0)
        self.moved = {"read": 0, "written": 0, "ring": 0}
        self.by_kernel: dict[str, dict[str, float]] = {}

    def add(self, report: KernelReport, count: int) -> None:
        self.kernels += count
        self.cycles["total"] += count * report.total_cycles
        self.cycles["compute"] += count * report.compute_cycles
        self.cycles["memory"] += count * report.memory_cycles
        self.cycles["communication"] += count * report.communication_cycles
        self.moved["read"] += count * report.bytes_read
        self.moved["written"] += count * report.bytes_written
        self.moved["ring"] += count * report.ring_bytes
        self.sticks += count * report.sticks
        self.flops += count * report.flops
        entry = self.by_kernel.setdefault(report.name, {"kernels": 0, "cycles": 0.0, "bytes": 0})
        entry["kernels"] += count
        entry["cycles"] += count * report.total_cycles
        entry["bytes"] += count * report.bytes_moved

    def copy(self) -> _Sums:
        duplicate = _Sums()
        duplicate.kernels, duplicate.sticks, duplicate.flops = self.kernels, self.sticks, self.flops
        duplicate.cycles, duplicate.moved = dict(self.cycles), dict(self.moved)
        duplicate.by_kernel = {name: dict(entry) for name, entry in self.by_kernel.items()}
        return duplicate

    def as_dict(self) -> dict[str, Any]:
        return {
            "kernels": self.kernels,
            "cycles": {name: round(value) for name, value in self.cycles.items()},
            "bytes": dict(self.moved),
            "sticks": self.sticks,
            "flops": self.flops,
            "by_kernel": {
                name: {"kernels": int(entry["kernels"]), "cycles": round(entry["cycles"]), "bytes": int(entry["bytes"])}
                for name, entry in sorted(self.by_kernel.items())
            },
        }


class _Totals:
    """Launch counts per distinct report, so recording a launch is one dict update; summed when asked.

    Every launch of a cached program shares one report. Reports of uncached programs are folded into the sums once
    there are many, so memory stays bounded.
    """

    FOLD_AT = 4096

    def __init__(self) -> None:
        self.launches: dict[int, list[Any]] = {}
        self.folded = _Sums()

    def add(self, report: KernelReport, count: int = 1) -> None:
        entry = self.launches.get(id(report))
        if entry is not None:
            entry[1] += count
            return
        if len(self.launches) >= self.FOLD_AT:
            for folded_report, launched in self.launches.values():
                self.folded.add(folded_report, launched)
            self.launches.clear()
        self.launches[id(report)] = [report, count]

    def as_dict(self) -> dict[str, Any]:
        sums = self.folded.copy()
        for report, count in self.launches.values():
            sums.add(report, count)
        return sums.as_dict()


class Profile:
    """The kernel reports recorded while a `profile()` block was active."""

    def __init__(self) -> None:
        self.reports: list[KernelReport] = []

    def summary(self) -> str:
        """A table with one row per kernel name: launches, cycles by activity, bytes moved."""
        rows: dict[str, list[float]] = {}
        for report in self.reports:
            row = rows.setdefault(report.name, [0, 0.0, 0.0, 0.0, 0.0, 0])
            row[0] += 1
            row[1] += report.total_cycles
            row[2] += report.compute_cycles
            row[3] += report.memory_cycles
            row[4] += report.communication_cycles
            row[5] += report.bytes_moved
        header = ("kernel", "launches", "cycles", "compute", "memory", "comm", "bytes")
        body = [
            (name, *(f"{round(value):,}" for value in row))
            for name, row in sorted(rows.items(), key=lambda kv: -kv[1][1])
        ]
        totals = [sum(row[i] for row in rows.values()) for i in range(6)]
        lines = [header, *body, ("total", *(f"{round(value):,}" for value in totals))]
        widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
        return "\n".join(
            "  ".join(
                cell.ljust(width) if i == 0 else cell.rjust(width)
                for i, (cell, width) in enumerate(zip(line, widths, strict=True))
            )
            for line in lines
        )


_lock = threading.Lock()
_totals = _Totals()
_active: list[Profile] = []
#: Reports of programs the native replay may run, by the id it counts their launches under.
_replayable: dict[int, KernelReport] = {}


def record(report: KernelReport) -> None:
    """Charge one launched kernel to the cumulative stats and to every active profile."""
    with _lock:
        _totals.add(report)
        for active in _active:
            active.reports.append(report)


def replay_id(report: KernelReport) -> int:
    """The id the native replay counts launches of `report`'s program under (kept, so the id stays unique)."""
    with _lock:
        _replayable[id(report)] = report
    return id(report)


def _charge_replays() -> None:
    for report_id, count in replay.drain():
        _totals.add(_replayable[report_id], count)


def stats() -> dict[str, Any]:
    """Totals since the last `reset_stats()`: kernels, cycles by activity, bytes, sticks, FLOPs, per kernel name."""
    with _lock:
        _charge_replays()
        return _totals.as_dict()


def reset_stats() -> None:
    """Start the cumulative totals again from zero."""
    global _totals
    with _lock:
        replay.drain()
        _totals = _Totals()


@contextmanager
def profile() -> Iterator[Profile]:
    """Record the report of every kernel launched inside the block (profiles nest)."""
    active = Profile()
    with _lock:
        _active.append(active)
        replay.block(replay.PROFILING, True)
    try:
        yield active
    finally:
        with _lock:
            _active.remove(active)
            replay.block(replay.PROFILING, bool(_active))
