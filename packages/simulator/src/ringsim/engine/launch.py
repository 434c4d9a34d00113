"""Launch a program: check and time it once (cached), then execute it on bound device memory and charge it."""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch

from .. import faults, profiling, replay
from . import executor
from .model import DEFAULT_MODEL, DeviceModel
from .program import Program, parse_program
from .replay import export
from .report import KernelReport
from .timing import simulate
from .validate import Step, validate

#: Keyed programs kept for later launches; eager kernels use one key per (op, shapes, dtypes).
CACHE_SIZE = 4096


@dataclass(frozen=True, slots=True)
class Plan:
    """Everything about a program that does not depend on the data: checked, timed, bound to scratchpads."""

    actions: tuple[executor.Action, ...]
    report: KernelReport
    #: (buffer, start, end, dtype) of the program's last DMA out: where an injected wrong result lands.
    last_write: tuple[str, int, int, torch.dtype] | None


_cache: dict[Hashable, Program] = {}
_lock = threading.RLock()
replay.set_lock(_lock)
#: Open `recording()` blocks, innermost last; each sees every launch made while it is open.
_recordings: list[list[tuple[dict[str, torch.Tensor], list[Any] | None, int]]] = []


@contextmanager
def recording() -> Iterator[list[tuple[dict[str, torch.Tensor], list[Any] | None, int]]]:
    """Collect the launches made inside the block: bound buffers, replay actions (or None) and report id.

    What a kernel call launched is what the native replay needs to run the call again without Python.
    """
    launches: list[tuple[dict[str, torch.Tensor], list[Any] | None, int]] = []
    _recordings.append(launches)
    try:
        yield launches
    finally:
        _recordings.remove(launches)


def plan(program: Program, model: DeviceModel = DEFAULT_MODEL) -> Plan:
    """Check, time and bind `program` (once: the plan is kept on the program object)."""
    cached = program.plan
    if cached is not None and cached.report.model == model:
        return cached
    steps = validate(program, model)
    timing = simulate(program, steps, model)
    report = _report(program, steps, timing, model)
    with _lock:
        actions = executor.bind(program, steps, timing.order, model)
    program.plan = Plan(actions=actions, report=report, last_write=_last_write(program, steps, timing.order))
    return program.plan


def _report(program: Program, steps: list[list[Step]], timing: Any, model: DeviceModel) -> KernelReport:
    flat = [step for core_steps in steps for step in core_steps]
    read = sum(step.nbytes for step in flat if step.kind == "dma_in")
    written = sum(step.nbytes for step in flat if step.kind == "dma_out")
    flops = sum(step.work.flops for step in flat if step.work is not None)
    return KernelReport(
        name=program.name,
        total_cycles=timing.total_cycles,
        compute_cycles=timing.compute_cycles,
        memory_cycles=timing.memory_cycles,
        communication_cycles=timing.communication_cycles,
        per_core=timing.per_core,
        bytes_read=read,
        bytes_written=written,
        ring_bytes=sum(step.nbytes for step in flat if step.kind == "send"),
        sticks=sum(step.sticks for step in flat),
        flops=flops,
        roofline_cycles=max(flops / model.peak_flops_per_cycle, (read + written) / model.memory_peak_bytes_per_cycle),
        model=model,
    )


def _last_write(
    program: Program, steps: list[list[Step]], order: tuple[tuple[int, int], ...]
) -> tuple[str, int, int, torch.dtype] | None:
    for position, index in reversed(order):
        step = steps[position][index]
        if step.kind == "dma_out" and step.nbytes:
            dtype = program.cores[position].tiles[step.reads[0]].dtype
            return step.buffer, step.start, step.start + step.nbytes, dtype
    return None


def _corrupt(target: tuple[str, int, int, torch.dtype], buffers: Mapping[str, torch.Tensor]) -> None:
    """Deterministically change the first element the kernel wrote (the injected 'wrong' fault)."""
    buffer, start, end, dtype = target
    values = executor.byte_view(buffers[buffer])[start:end].view(dtype)
    if dtype == torch.bool:
        values[0] = ~values[0]
    elif dtype.is_floating_point:
        values[0] = values[0] + 1 if bool(torch.isfinite(values[0])) else 0
    else:
        values[0] = values[0] + 1


def _program(program: Program | Mapping[str, Any], key: Hashable | None) -> Program:
    if key is None:
        return parse_program(program)
    cached = _cache.get(key)
    if cached is None:
        cached = parse_program(program)
        with _lock:
            if len(_cache) >= CACHE_SIZE:
                del _cache[next(iter(_cache))]
            _cache[key] = cached
    return cached


def launch(
    program: Program | Mapping[str, Any], buffers: Mapping[str, torch.Tensor], *, key: Hashable | None = None
) -> KernelReport:
    """Run one kernel on the device and charge it.

    `buffers` maps each declared buffer to a contiguous CPU tensor whose bytes are the device memory (any dtype:
    the engine reinterprets bytes). With `key`, the parsed, checked and timed program is cached under it, so later
    launches with the same key pay only for execution. Raises ProgramError for a program the hardware would refuse.
    """
    parsed = _program(program, key)
    planned = parsed.plan or plan(parsed)
    executor.check_buffers(parsed, buffers)
    with _lock:
        fault = faults.on_launch()
        executor.run(planned.actions, buffers)
        if fault == "wrong" and planned.last_write is not None:
            _corrupt(planned.last_write, buffers)
    profiling.record(planned.report)
    if _recordings:
        entry = (dict(buffers), export(planned.actions), profiling.replay_id(planned.report))
        for launches in _recordings:
            launches.append(entry)
    return planned.report


def launch_cached(
    key: Hashable, build: Callable[[], Mapping[str, Any]], buffers: Mapping[str, torch.Tensor]
) -> KernelReport:
    """Like `launch`, but `build()` makes the program only the first time `key` is seen."""
    cached = _cache.get(key)
    return launch(cached if cached is not None else build(), buffers, key=key)


def clear_cache() -> None:
    """Forget every keyed program, and the native replays built on them."""
    with _lock:
        _cache.clear()
        replay.clear()
