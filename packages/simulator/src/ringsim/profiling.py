"""Cumulative kernel statistics and a profiler context manager over the engine's kernel reports."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .engine.report import KernelReport

_CATEGORIES = ("total", "compute", "memory", "communication")


@dataclass(slots=True)
class _Totals:
    kernels: int = 0
    cycles: dict[str, float] = field(default_factory=lambda: dict.fromkeys(_CATEGORIES, 0.0))
    bytes_read: int = 0
    bytes_written: int = 0
    ring_bytes: int = 0
    sticks: int = 0
    flops: int = 0
    by_kernel: dict[str, dict[str, float]] = field(default_factory=dict)

    def add(self, report: KernelReport) -> None:
        self.kernels += 1
        cycles = self.cycles
        cycles["total"] += report.total_cycles
        cycles["compute"] += report.compute_cycles
        cycles["memory"] += report.memory_cycles
        cycles["communication"] += report.communication_cycles
        self.bytes_read += report.bytes_read
        self.bytes_written += report.bytes_written
        self.ring_bytes += report.ring_bytes
        self.sticks += report.sticks
        self.flops += report.flops
        entry = self.by_kernel.get(report.name)
        if entry is None:
            entry = self.by_kernel[report.name] = {"kernels": 0, "cycles": 0.0, "bytes": 0}
        entry["kernels"] += 1
        entry["cycles"] += report.total_cycles
        entry["bytes"] += report.bytes_read + report.bytes_written

    def as_dict(self) -> dict[str, Any]:
        return {
            "kernels": self.kernels,
            "cycles": {name: round(value) for name, value in self.cycles.items()},
            "bytes": {"read": self.bytes_read, "written": self.bytes_written, "ring": self.ring_bytes},
            "sticks": self.sticks,
            "flops": self.flops,
            "by_kernel": {
                name: {"kernels": int(entry["kernels"]), "cycles": round(entry["cycles"]), "bytes": int(entry["bytes"])}
                for name, entry in sorted(self.by_kernel.items())
            },
        }


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


def record(report: KernelReport) -> None:
    """Charge one launched kernel to the cumulative stats and to every active profile."""
    with _lock:
        _totals.add(report)
        for active in _active:
            active.reports.append(report)


def stats() -> dict[str, Any]:
    """Totals since the last `reset_stats()`: kernels, cycles by activity, bytes, sticks, FLOPs, per kernel name."""
    with _lock:
        return _totals.as_dict()


def reset_stats() -> None:
    """Start the cumulative totals again from zero."""
    global _totals
    with _lock:
        _totals = _Totals()


@contextmanager
def profile() -> Iterator[Profile]:
    """Record the report of every kernel launched inside the block (profiles nest)."""
    active = Profile()
    with _lock:
        _active.append(active)
    try:
        yield active
    finally:
        with _lock:
            _active.remove(active)
