"""The scratchpad solvers: greedy first-fit, best-fit, and the exact CP-SAT model."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from .buffers import STICK, Buffer, Placement, finish

Solver = Callable[[Sequence[Buffer], int], Placement]


def _gaps(buffer: Buffer, placed: Sequence[tuple[Buffer, int]], capacity: int) -> list[tuple[int, int]]:
    """Free (offset, length) address ranges during `buffer`'s live interval."""
    busy = sorted((offset, offset + other.span) for other, offset in placed if other.meets(buffer))
    gaps, cursor = [], 0
    for low, high in busy:
        if low > cursor:
            gaps.append((cursor, low - cursor))
        cursor = max(cursor, high)
    if capacity > cursor:
        gaps.append((cursor, capacity - cursor))
    return gaps


def _fit(order: Sequence[Buffer], capacity: int, choose: Callable[[list[tuple[int, int]], int], int | None]):
    placed: list[tuple[Buffer, int]] = []
    for buffer in order:
        fitting = [gap for gap in _gaps(buffer, placed, capacity) if gap[1] >= buffer.span]
        offset = choose(fitting, buffer.span) if fitting else None
        if offset is not None:
            placed.append((buffer, offset))
    return {buffer.name: offset for buffer, offset in placed}


def greedy(buffers: Sequence[Buffer], capacity: int) -> Placement:
    """First-fit in the order tiles come alive: the lowest free address; a tile that does not fit spills."""
    begin = time.perf_counter()
    order = sorted(buffers, key=lambda b: (b.start, -b.span))
    offsets = _fit(order, capacity, lambda gaps, size: gaps[0][0])
    return finish("greedy", buffers, offsets, capacity, time.perf_counter() - begin)


def best_fit(buffers: Sequence[Buffer], capacity: int) -> Placement:
    """Largest tiles first (the hardest to fit), each into the tightest free range that holds it."""
    begin = time.perf_counter()
    order = sorted(buffers, key=lambda b: (-b.span, b.start))
    offsets = _fit(order, capacity, lambda gaps, size: min(gaps, key=lambda gap: (gap[1], gap[0]))[0])
    return finish("best-fit", buffers, offsets, capacity, time.perf_counter() - begin)


def cp_sat(buffers: Sequence[Buffer], capacity: int, time_limit: float = 10.0) -> Placement:
    """Exact: optional rectangles [live interval] x [address range] with 2-D no-overlap, minimising spilled traffic
    (then the peak address). Addresses in sticks; seeded with the best-fit placement; single worker."""
    from ortools.sat.python import cp_model  # imported when used: OR-Tools adds 1.5 s to a compiler import

    begin = time.perf_counter()
    model = cp_model.CpModel()
    slots = capacity // STICK
    hint = best_fit(buffers, capacity).offsets
    placed, offsets, times, spaces = {}, {}, [], []
    peak = model.NewIntVar(0, slots, "peak")
    for buffer in buffers:
        size = buffer.span // STICK
        if size > slots:
            continue
        flag = model.NewBoolVar(f"placed[{buffer.name}]")
        offset = model.NewIntVar(0, slots - size, f"offset[{buffer.name}]")
        times.append(model.NewOptionalFixedSizeIntervalVar(buffer.start, buffer.end - buffer.start, flag, "t"))
        spaces.append(model.NewOptionalFixedSizeIntervalVar(offset, size, flag, "a"))
        model.Add(peak >= offset + size).OnlyEnforceIf(flag)
        placed[buffer.name], offsets[buffer.name] = flag, offset
        if buffer.name in hint:
            model.AddHint(flag, 1)
            model.AddHint(offset, hint[buffer.name] // STICK)
        else:
            model.AddHint(flag, 0)
    model.AddNoOverlap2D(times, spaces)
    # a spill always costs something, so a tile that moves no bytes is still placed when it can be
    spill = sum(max(b.traffic, 1) * (1 - placed[b.name]) for b in buffers if b.name in placed)
    model.Minimize((slots + 1) * spill + peak)
    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = time_limit
    solver.parameters.num_workers = 1
    status = solver.Solve(model)
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        raise RuntimeError(f"cp-sat found no placement within {time_limit} s (status {solver.StatusName(status)})")
    result = {name: solver.Value(offsets[name]) * STICK for name, flag in placed.items() if solver.Value(flag)}
    return finish("cp-sat", buffers, result, capacity, time.perf_counter() - begin, status == cp_model.OPTIMAL)


SOLVERS: dict[str, Solver] = {"greedy": greedy, "best-fit": best_fit, "cp-sat": cp_sat}


def allocate(
    buffers: Sequence[Buffer], capacity: int, solver: str = "best-fit", time_limit: float | None = None
) -> Placement:
    """Place `buffers` in `capacity` bytes with the named solver (`time_limit` bounds CP-SAT, in seconds)."""
    if solver not in SOLVERS:
        raise ValueError(f"unknown scratchpad solver {solver!r} (one of {', '.join(SOLVERS)})")
    names = [b.name for b in buffers]
    if len(set(names)) != len(names):
        raise ValueError("scratchpad buffers need distinct names")
    if solver == "cp-sat" and time_limit is not None:
        return cp_sat(buffers, capacity, time_limit)
    return SOLVERS[solver](buffers, capacity)
