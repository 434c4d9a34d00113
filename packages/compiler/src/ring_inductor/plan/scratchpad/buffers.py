"""What the solvers place (buffers with a live interval) and what they return (a placement with its bounds)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

STICK = 128


@dataclass(frozen=True, slots=True)
class Buffer:
    """A tile live over op steps [start, end); spilling it costs `traffic` device-memory bytes (out and back in)."""

    name: str
    size: int
    start: int
    end: int
    traffic: int = 0

    @property
    def span(self) -> int:
        """Bytes it occupies: tiles start on stick boundaries, so a partial stick takes a whole one."""
        return -(-self.size // STICK) * STICK

    def meets(self, other: Buffer) -> bool:
        """Live at a common step (an op's output may take the space of an input it reads last)."""
        return self.start < other.end and other.start < self.end


@dataclass(frozen=True, slots=True)
class Placement:
    solver: str
    offsets: Mapping[str, int]
    spilled: tuple[str, ...]
    peak: int
    load: int
    spill_bytes: int
    capacity: int
    seconds: float
    #: LOAD of the tiles it kept: the floor for its peak (the rest is fragmentation)
    resident_load: int = 0
    #: CP-SAT proved optimality (None for the heuristics)
    optimal: bool | None = None


def load(buffers: Iterable[Buffer]) -> int:
    """The most bytes live at one step: a lower bound on any placement's peak."""
    items = list(buffers)
    steps = {b.start for b in items}
    return max((sum(b.span for b in items if b.start <= step < b.end) for step in steps), default=0)


def finish(
    solver: str, buffers: Sequence[Buffer], offsets: Mapping[str, int], capacity: int, seconds: float, optimal=None
) -> Placement:
    """Assemble a placement, checking no two placed buffers live at once share a byte and all fit."""
    placed = [b for b in buffers if b.name in offsets]
    for index, first in enumerate(placed):
        low = offsets[first.name]
        if low < 0 or low % STICK or low + first.span > capacity:
            raise AssertionError(f"{solver}: {first.name} placed at {low} outside the scratchpad")
        for second in placed[index + 1 :]:
            other = offsets[second.name]
            if first.meets(second) and low < other + second.span and other < low + first.span:
                raise AssertionError(f"{solver}: {first.name} and {second.name} overlap")
    spilled = tuple(b.name for b in buffers if b.name not in offsets)
    return Placement(
        solver=solver,
        offsets=dict(offsets),
        spilled=spilled,
        peak=max((offsets[b.name] + b.span for b in placed), default=0),
        load=load(buffers),
        spill_bytes=sum(b.traffic for b in buffers if b.name in spilled),
        capacity=capacity,
        seconds=seconds,
        resident_load=load(placed),
        optimal=optimal,
    )
