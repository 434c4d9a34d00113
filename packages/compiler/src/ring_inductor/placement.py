"""Where a compiled kernel's per-chunk tiles live in a core's scratchpad, placed by the planning layer's solvers.

Within one chunk of rows each tile is live from the DMA in or compute step that writes it to the last step or DMA
out that reads it. A tile dead before another is written can give that one its bytes, so a chunk needs LOAD (the
most bytes live at once) rather than the sum of its tiles, and more rows fit in a chunk. A step's output never
shares bytes with its own inputs. `stacked`, the baseline, gives every tile its own range (nothing reused).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ring_inductor.plan.scratchpad import SOLVERS, Buffer, Placement, allocate, load
from ring_inductor.plan.scratchpad.buffers import finish

#: Every placement the compiled path can use: the baseline first, then the planning layer's solvers.
SOLVER_NAMES = ("stacked", *SOLVERS)
#: Seconds CP-SAT may spend on one kernel's tiles when it places a compiled kernel.
CP_SAT_LIMIT = 2.0


@dataclass(frozen=True)
class Lifetime:
    """One per-chunk tile: bytes per row of the chunk, its live interval [start, end) in the chunk's steps, and how
    many steps read it (a spilled tile goes out once and comes back for each)."""

    tile: str
    row_bytes: int
    start: int
    end: int
    reads: int = 1


def lifetimes(steps: Sequence[tuple[Sequence[str], Sequence[str]]], row_bytes: dict[str, int]) -> list[Lifetime]:
    """The live interval of each tile in `row_bytes`, from a chunk's steps in order, each as (reads, writes)."""
    start: dict[str, int] = {}
    end: dict[str, int] = {}
    readers: dict[str, int] = {}
    for index, (reads, writes) in enumerate(steps):
        for tile in reads:
            if tile in row_bytes:
                end[tile] = index + 1
                readers[tile] = readers.get(tile, 0) + 1
        for tile in writes:
            if tile in row_bytes:
                start.setdefault(tile, index)
                end[tile] = max(end.get(tile, 0), index + 1)
    return [Lifetime(t, row_bytes[t], start[t], end[t], readers.get(t, 0)) for t in row_bytes if t in start]


def buffers(tiles: Sequence[Lifetime], rows: int) -> list[Buffer]:
    """The tiles of a chunk of `rows` rows as the solvers' buffers, each with the device-memory bytes its spill
    would move (out once, back in for every read): what CP-SAT minimises when a chunk's tiles cannot all stay."""
    return [Buffer(t.tile, t.row_bytes * rows, t.start, t.end, t.row_bytes * rows * (1 + t.reads)) for t in tiles]


def needed(tiles: Sequence[Lifetime], rows: int, solver: str) -> int:
    """The bytes a chunk of `rows` rows needs at least: LOAD, or every tile's span for the stacked baseline."""
    placed = buffers(tiles, rows)
    return sum(b.span for b in placed) if solver == "stacked" else load(placed)


def stacked(placed: Sequence[Buffer], capacity: int) -> Placement:
    """The baseline: each tile at the end of the one before, whatever their lifetimes."""
    begin = time.perf_counter()
    offsets, cursor = {}, 0
    for buffer in placed:
        if cursor + buffer.span > capacity:
            break
        offsets[buffer.name] = cursor
        cursor += buffer.span
    return finish("stacked", placed, offsets, capacity, time.perf_counter() - begin)


def place(tiles: Sequence[Lifetime], rows: int, capacity: int, solver: str) -> Placement:
    """The tiles of a chunk of `rows` rows placed in `capacity` bytes by `solver` (spilled tiles are listed)."""
    placed = buffers(tiles, rows)
    if solver == "stacked":
        return stacked(placed, capacity)
    return allocate(placed, capacity, solver, time_limit=CP_SAT_LIMIT if solver == "cp-sat" else None)


@dataclass(frozen=True)
class ChunkPlan:
    """The tiles of one chunk of `rows` rows and where a solver put them."""

    tiles: tuple[Lifetime, ...]
    rows: int
    placement: Placement

    def decisions(self) -> dict[str, Any]:
        """For the dump: the placement against its bound (LOAD), and every tile's bytes, interval and offset, so
        a review can place the same tiles with another solver."""
        placement = self.placement
        return {
            "solver": placement.solver,
            "chunk_rows": self.rows,
            "peak": placement.peak,
            "load": placement.load,
            "stacked": sum(b.span for b in buffers(self.tiles, self.rows)),
            "seconds": round(placement.seconds, 4),
            "optimal": placement.optimal,
            "tiles": [
                {
                    "tile": t.tile,
                    "bytes": t.row_bytes * self.rows,
                    "start": t.start,
                    "end": t.end,
                    "offset": placement.offsets[t.tile],
                }
                for t in self.tiles
            ],
        }
