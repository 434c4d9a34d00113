"""Event-driven timing of a checked program: per-core in-order issue, a scoreboard on tiles, shared device memory.

Each core issues its instructions in order; an instruction starts when its unit is free (one compute unit, one
DMA engine per direction, one ring link per neighbour) and no in-flight instruction conflicts with it on a tile
(overlapping tiles conflict) or on device memory. A DMA pays a fixed latency, then its whole sticks flow through
device memory, which all cores share: the bandwidth of the moment (150 B/cycle one way, 105 at an even read/write
mix) is split evenly over the transfers in flight, each capped by its DMA engine. A recv starts once the paired send
has arrived; a barrier waits for the core's own instructions, then for every core. The issue order is also a valid
execution order, so the engine runs the data in that order.
"""

from __future__ import annotations

import bisect
import heapq
import itertools
import math
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from .errors import ProgramError
from .model import DeviceModel
from .program import Program, TileSpec
from .validate import Step

_EPSILON = 1e-6


@dataclass(frozen=True, slots=True)
class CoreBusy:
    """Cycles one core spent in each activity; activities can overlap, idle is when it did none."""

    compute: float
    memory: float
    communication: float
    busy: float
    idle: float


@dataclass(frozen=True, slots=True)
class Timing:
    """The modelled schedule of one program: totals, per-core busy time, and the order the engine executes in."""

    total_cycles: float
    compute_cycles: float
    memory_cycles: float
    communication_cycles: float
    per_core: Mapping[int, CoreBusy]
    order: tuple[tuple[int, int], ...]


class _Core:
    __slots__ = (
        "dmas",
        "fenced",
        "in_flight",
        "intervals",
        "pc",
        "pending_reads",
        "pending_writes",
        "position",
        "steps",
        "units",
    )

    def __init__(self, position: int, steps: list[Step]):
        self.position = position
        self.steps = steps
        self.pc = 0
        self.in_flight = 0
        self.fenced = False
        self.units: set[object] = set()
        self.pending_reads: Counter[str] = Counter()
        self.pending_writes: Counter[str] = Counter()
        self.dmas: list[Step] = []
        self.intervals: dict[str, list[tuple[float, float]]] = {"compute": [], "memory": [], "communication": []}


class _Flow:
    __slots__ = ("core", "remaining", "step")

    def __init__(self, core: _Core, step: Step, remaining: float):
        self.core, self.step, self.remaining = core, step, remaining


def _overlaps(tiles: Mapping[str, TileSpec]) -> dict[str, frozenset[str]]:
    """For each tile, the tiles sharing at least one scratchpad byte with it (itself included).

    Tiles sorted by start: a tile overlaps exactly the later ones that start before it ends, found by bisection,
    so a core with thousands of tiles (one per DMA'd run) costs n log n plus the pairs that do overlap."""
    sized = sorted((spec.offset, spec.end, name) for name, spec in tiles.items() if spec.nbytes)
    starts = [start for start, _, _ in sized]
    found: dict[str, set[str]] = {name: {name} for name in tiles}
    for i, (_, end, name) in enumerate(sized):
        for _, _, other in sized[i + 1 : bisect.bisect_left(starts, end)]:
            found[name].add(other)
            found[other].add(name)
    return {name: frozenset(names) for name, names in found.items()}


def _unit(step: Step) -> object:
    if step.kind == "compute":
        return "compute"
    if step.kind in ("dma_in", "dma_out"):
        return step.kind
    if step.kind == "send":
        return ("send", step.peer)
    return None


def _length(intervals: Iterable[tuple[float, float]]) -> float:
    total, end = 0.0, -math.inf
    for low, high in sorted(intervals):
        if high > end:
            total += high - max(low, end)
            end = high
    return total


def simulate(program: Program, steps: list[list[Step]], model: DeviceModel) -> Timing:
    """Run the event-driven model; raise ProgramError if the cores deadlock."""
    cores = [_Core(position, core_steps) for position, core_steps in enumerate(steps)]
    closures = {}
    for core, spec in zip(cores, program.cores, strict=True):
        overlap = _overlaps(spec.tiles)
        for step in core.steps:
            reads = frozenset().union(*(overlap[name] for name in step.reads))
            writes = frozenset().union(*(overlap[name] for name in step.writes))
            closures[id(step)] = (reads | writes, writes)
    sends_arrived: Counter[tuple[int, int]] = Counter()
    recvs_issued: Counter[tuple[int, int]] = Counter()
    barrier_waiting: list[_Core] = []
    events: list[tuple[float, int, str, _Core, Step]] = []
    sequence = itertools.count()
    flows: list[_Flow] = []
    order: list[tuple[int, int]] = []
    step_starts: dict[int, float] = {}
    now = 0.0

    def blocked(core: _Core, step: Step) -> bool:
        if core.fenced or (_unit(step) is not None and _unit(step) in core.units):
            return True
        if step.kind == "barrier":
            return core.in_flight > 0
        touched, written = closures[id(step)]
        if any(core.pending_writes[name] for name in touched) or any(core.pending_reads[name] for name in written):
            return True
        if step.kind == "recv":
            link = (step.peer, step.core)
            return sends_arrived[link] <= recvs_issued[link]
        if step.buffer is not None:
            for other in core.dmas:
                if (
                    other.buffer == step.buffer
                    and other.kind != step.kind
                    and (other.start < step.start + step.nbytes and step.start < other.start + other.nbytes)
                ):
                    return True
        return False

    def schedule(at: float, kind: str, core: _Core, step: Step) -> None:
        heapq.heappush(events, (at, next(sequence), kind, core, step))

    def issue(core: _Core, step: Step) -> None:
        core.pc += 1
        core.in_flight += 1
        order.append((core.position, step.index))
        unit = _unit(step)
        if unit is not None:
            core.units.add(unit)
        core.pending_reads.update(step.reads)
        core.pending_writes.update(step.writes)
        if step.kind == "barrier":
            core.fenced = True
            barrier_waiting.append(core)
            if len(barrier_waiting) == len(cores):
                for waiting in barrier_waiting:
                    schedule(now + model.barrier_cycles, "done", waiting, waiting.steps[waiting.pc - 1])
                barrier_waiting.clear()
        elif step.kind in ("dma_in", "dma_out"):
            core.dmas.append(step)
            schedule(now + model.dma_latency_cycles, "flow", core, step)
        elif step.kind == "compute":
            work = step.work
            assert work is not None
            cycles = (
                model.compute_issue_cycles
                + work.vector_elements / model.vector_elements_per_cycle
                + work.reduced_elements / model.reduction_elements_per_cycle
                + work.macs / model.macs_per_cycle
            )
            schedule(now + cycles, "done", core, step)
        elif step.kind == "send":
            schedule(
                now + model.ring_hop_latency_cycles + step.nbytes / model.ring_link_bytes_per_cycle, "done", core, step
            )
        else:
            recvs_issued[(step.peer, step.core)] += 1
            schedule(now + model.ring_recv_cycles, "done", core, step)
        step_starts[id(step)] = now

    def complete(core: _Core, step: Step) -> None:
        core.in_flight -= 1
        unit = _unit(step)
        if unit is not None:
            core.units.discard(unit)
        core.pending_reads.subtract(step.reads)
        core.pending_writes.subtract(step.writes)
        start = step_starts[id(step)]
        if step.kind in ("dma_in", "dma_out"):
            core.dmas.remove(step)
            core.intervals["memory"].append((start, now))
        elif step.kind == "compute":
            core.intervals["compute"].append((start, now))
        elif step.kind == "barrier":
            core.fenced = False
            core.intervals["communication"].append((now - model.barrier_cycles, now))
        else:
            core.intervals["communication"].append((start, now))
            if step.kind == "send":
                sends_arrived[(step.core, step.peer)] += 1

    def issue_ready() -> None:
        for core in cores:
            while core.pc < len(core.steps) and not blocked(core, core.steps[core.pc]):
                issue(core, core.steps[core.pc])

    issue_ready()
    while events or flows:
        next_event = events[0][0] if events else math.inf
        rate = 0.0
        if flows:
            writes = sum(flow.step.kind == "dma_out" for flow in flows)
            capacity = model.memory_capacity(len(flows) - writes, writes)
            rate = min(model.dma_engine_bytes_per_cycle, capacity / len(flows))
            next_event = min(next_event, now + min(flow.remaining for flow in flows) / rate)
        for flow in flows:
            flow.remaining -= rate * (next_event - now)
        now = next_event
        finished = [flow for flow in flows if flow.remaining <= _EPSILON]
        flows = [flow for flow in flows if flow.remaining > _EPSILON]
        for flow in finished:
            complete(flow.core, flow.step)
        while events and events[0][0] <= now + _EPSILON:
            _, _, kind, core, step = heapq.heappop(events)
            if kind == "flow" and step.sticks:
                flows.append(_Flow(core, step, float(step.sticks * model.stick_bytes)))
            else:
                complete(core, step)
        issue_ready()
    for core in cores:
        if core.pc < len(core.steps):
            raise _deadlock(program, cores, core)
    return _summarise(program, cores, now, tuple(order))


def _deadlock(program: Program, cores: list[_Core], core: _Core) -> ProgramError:
    step = core.steps[core.pc]
    if step.kind == "recv":
        reason = f"deadlock: waits forever for core {step.peer} to send"
    elif step.kind == "barrier":
        missing = next(other for other in cores if not other.fenced)
        reason = f"deadlock: waits forever at a barrier that core {program.cores[missing.position].core} never reaches"
    else:
        reason = "deadlock: the core can never issue this instruction"
    return ProgramError(reason, core=step.core, index=step.index, op=step.kind)


def _summarise(program: Program, cores: list[_Core], total: float, order: tuple[tuple[int, int], ...]) -> Timing:
    per_core = {}
    for core in cores:
        spans = core.intervals
        busy = _length(itertools.chain(*spans.values()))
        per_core[program.cores[core.position].core] = CoreBusy(
            compute=_length(spans["compute"]),
            memory=_length(spans["memory"]),
            communication=_length(spans["communication"]),
            busy=busy,
            idle=total - busy,
        )
    return Timing(
        total_cycles=total,
        compute_cycles=_length(itertools.chain(*(core.intervals["compute"] for core in cores))),
        memory_cycles=_length(itertools.chain(*(core.intervals["memory"] for core in cores))),
        communication_cycles=_length(itertools.chain(*(core.intervals["communication"] for core in cores))),
        per_core=per_core,
        order=order,
    )
