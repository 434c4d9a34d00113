"""Check a parsed program against what the hardware would refuse, and lower it to steps the engine runs and times.

Each check raises ProgramError naming the core and instruction index (and the JSON path when it helps).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import torch

from .compute import ComputeFn, ComputeWork, FnError, Signature, decode_attrs, infer, resolve_fn, work_of
from .errors import ProgramError
from .model import DeviceModel
from .program import Barrier, Compute, CoreProgram, DmaIn, DmaOut, Instruction, Program, Recv, Send, TileSpec


@dataclass(slots=True)
class Step:
    """One checked instruction with everything timing and execution need, computed once per program."""

    core: int
    index: int
    kind: str
    reads: tuple[str, ...] = ()
    writes: tuple[str, ...] = ()
    buffer: str | None = None
    start: int = 0
    nbytes: int = 0
    sticks: int = 0
    peer: int | None = None
    fn: ComputeFn | None = None
    #: The program's fn name (`add`, `sum.dim_IntList`, `copy`): `fn` may be a bound twin of what it names.
    name: str = ""
    attrs: Mapping[str, Any] = field(default_factory=dict)
    work: ComputeWork | None = None
    copy_results: bool = False


def _path(core_pos: int, index: int, leaf: str | None = None) -> str:
    path = f"$.cores[{core_pos}].instructions[{index}]"
    return f"{path}.{leaf}" if leaf else path


def validate(program: Program, model: DeviceModel) -> list[list[Step]]:
    """Check every rule the program format documents; return the steps of each listed core, in program order."""
    listed = {core.core for core in program.cores}
    steps = []
    for position, core in enumerate(program.cores):
        _check_tiles(core, position, model)
        core_steps = [
            _lower(program, core, position, index, instruction, listed, model)
            for index, instruction in enumerate(core.instructions)
        ]
        _check_span(core, position, core_steps, model)
        steps.append(core_steps)
    _check_pairing(program, steps)
    _check_barriers(program, steps)
    return steps


def _check_tiles(core: CoreProgram, position: int, model: DeviceModel) -> None:
    for name, tile in core.tiles.items():
        path = f"$.cores[{position}].tiles.{name}"
        if tile.offset % model.stick_bytes:
            raise ProgramError(
                f"tile {name!r} offset {tile.offset} is not aligned to the {model.stick_bytes}-byte stick",
                core=core.core,
                path=path,
            )
        if tile.end > model.usable_scratchpad_bytes:
            raise ProgramError(
                f"tile {name!r} ends at byte {tile.end}, past the usable scratchpad "
                f"({model.usable_scratchpad_bytes} bytes): scratchpad overflow",
                core=core.core,
                path=path,
            )


def _lower(
    program: Program,
    core: CoreProgram,
    position: int,
    index: int,
    instruction: Instruction,
    listed: set[int],
    model: DeviceModel,
) -> Step:
    def fail(message: str, leaf: str | None = None) -> ProgramError:
        return ProgramError(message, core=core.core, index=index, op=instruction.op, path=_path(position, index, leaf))

    def tile(name: str, leaf: str) -> TileSpec:
        if name not in core.tiles:
            raise fail(f"unknown tile {name!r} (core {core.core} declares {', '.join(core.tiles) or 'no tiles'})", leaf)
        return core.tiles[name]

    step = Step(core=core.core, index=index, kind=instruction.op)
    if isinstance(instruction, (DmaIn, DmaOut)):
        spec = tile(instruction.tile, "tile")
        if instruction.buffer not in program.buffers:
            raise fail(f"unknown buffer {instruction.buffer!r}", "buffer")
        buffer = program.buffers[instruction.buffer]
        if instruction.offset % model.stick_bytes:
            raise fail(
                f"buffer offset {instruction.offset} is not aligned to the {model.stick_bytes}-byte stick", "offset"
            )
        end = instruction.offset + spec.nbytes
        if end > buffer.nbytes:
            raise fail(
                f"bytes {instruction.offset}..{end} run past the end of buffer {instruction.buffer!r} "
                f"({buffer.nbytes} bytes): out of span",
                "offset",
            )
        step.buffer, step.start, step.nbytes, step.sticks = (
            instruction.buffer,
            instruction.offset,
            spec.nbytes,
            model.sticks(spec.nbytes),
        )
        if isinstance(instruction, DmaIn):
            step.writes = (instruction.tile,)
        else:
            step.reads = (instruction.tile,)
    elif isinstance(instruction, Compute):
        inputs = [tile(name, f"inputs[{i}]") for i, name in enumerate(instruction.inputs)]
        outputs = [tile(name, "output") for name in instruction.outputs]
        try:
            step.fn = resolve_fn(instruction.fn)
            step.name = instruction.fn
            step.attrs = decode_attrs(instruction.attrs)
            signature = _signature(instruction.fn, step.fn, [(spec.shape, spec.dtype) for spec in inputs], step.attrs)
        except FnError as error:
            raise fail(str(error), "fn") from None
        except Exception as error:  # an aten op refusing its arguments may raise any error type
            first_line = (str(error).strip().splitlines() or [type(error).__name__])[0][:200]
            raise fail(f"fn {instruction.fn!r} refused its input tiles or attrs: {first_line}", "fn") from error
        if len(signature.shapes) != len(outputs):
            raise fail(
                f"fn {instruction.fn!r} returns {len(signature.shapes)} tensors, but {len(outputs)} output tiles",
                "output",
            )
        for shape, spec in zip(signature.shapes, outputs, strict=True):
            if math.prod(shape) != spec.numel:
                raise fail(
                    f"fn {instruction.fn!r} produces shape {list(shape)} but output tile {spec.name!r} "
                    f"has shape {list(spec.shape)}",
                    "output",
                )
        step.reads, step.writes = instruction.inputs, instruction.outputs
        step.copy_results = signature.returns_views
        step.fn = signature.fn or step.fn
        step.work = work_of(
            instruction.fn, [torch.Size(s.shape) for s in inputs], [torch.Size(s.shape) for s in outputs]
        )
    elif isinstance(instruction, (Send, Recv)):
        peer, leaf = (instruction.to, "to") if isinstance(instruction, Send) else (instruction.source, "from")
        if peer not in {(core.core + 1) % model.cores, (core.core - 1) % model.cores} or peer == core.core:
            raise fail(f"core {peer} is not a ring neighbour of core {core.core}", leaf)
        if peer not in listed:
            raise fail(f"core {peer} has no work, so nothing can pair with this {instruction.op}", leaf)
        spec = tile(instruction.tile, "tile")
        step.peer, step.nbytes = peer, spec.nbytes
        if isinstance(instruction, Send):
            step.reads = (instruction.tile,)
        else:
            step.writes = (instruction.tile,)
    elif not isinstance(instruction, Barrier):  # pragma: no cover - the parser only builds the six kinds
        raise fail(f"unknown op {instruction.op!r}")
    return step


_SIGNATURES: dict[str, Signature] = {}


def _signature(
    name: str, fn: ComputeFn, inputs: list[tuple[tuple[int, ...], torch.dtype]], attrs: Mapping[str, Any]
) -> Signature:
    """What one compute produces, remembered per (fn, input tiles, attrs): blocked programs repeat them."""
    key = repr((name, inputs, sorted(attrs.items())))
    signature = _SIGNATURES.get(key)
    if signature is None:
        signature = _SIGNATURES[key] = infer(fn, inputs, attrs)
        if len(_SIGNATURES) > 65536:
            _SIGNATURES.pop(next(iter(_SIGNATURES)))
    return signature


def _check_span(core: CoreProgram, position: int, steps: list[Step], model: DeviceModel) -> None:
    """A core may touch at most its addressable span of device memory (summed over the buffers it reaches)."""
    extents: dict[str, tuple[int, int]] = {}
    for step in steps:
        if step.buffer is None:
            continue
        low, high = extents.get(step.buffer, (step.start, step.start + step.nbytes))
        extents[step.buffer] = (min(low, step.start), max(high, step.start + step.nbytes))
        touched = sum(high - low for low, high in extents.values())
        if touched > model.addressable_span_bytes:
            raise ProgramError(
                f"the core's DMAs now span {touched} bytes of device memory, more than its addressable span "
                f"({model.addressable_span_bytes} bytes): split the tensor across cores",
                core=core.core,
                index=step.index,
                op=step.kind,
                path=_path(position, step.index),
            )


def _check_pairing(program: Program, steps: list[list[Step]]) -> None:
    """The k-th send from core a to core b pairs with the k-th recv on b from a, with the same byte size."""
    sends: dict[tuple[int, int], list[Step]] = defaultdict(list)
    recvs: dict[tuple[int, int], list[Step]] = defaultdict(list)
    for core_steps in steps:
        for step in core_steps:
            if step.kind == "send":
                sends[(step.core, step.peer)].append(step)
            elif step.kind == "recv":
                recvs[(step.peer, step.core)].append(step)
    for link in sorted(set(sends) | set(recvs)):
        sent, received = sends.get(link, []), recvs.get(link, [])
        for send, recv in zip(sent, received, strict=False):
            if send.nbytes != recv.nbytes:
                raise ProgramError(
                    f"recv of {recv.nbytes} bytes pairs with core {send.core} instruction {send.index}, "
                    f"which sends {send.nbytes} bytes",
                    core=recv.core,
                    index=recv.index,
                    op="recv",
                )
        if len(sent) != len(received):
            extra = (sent if len(sent) > len(received) else received)[min(len(sent), len(received))]
            other = (
                f"core {link[1]} has only {len(received)} matching recv"
                if extra.kind == "send"
                else (f"core {link[0]} has only {len(sent)} matching send")
            )
            raise ProgramError(f"unpaired {extra.kind}: {other}", core=extra.core, index=extra.index, op=extra.kind)


def _check_barriers(program: Program, steps: list[list[Step]]) -> None:
    """Every core with work must reach the same number of barriers, or the ones with more wait forever."""
    barriers = [[step for step in core_steps if step.kind == "barrier"] for core_steps in steps]
    most = max(range(len(steps)), key=lambda position: len(barriers[position]))
    fewest = min(range(len(steps)), key=lambda position: len(barriers[position]))
    reached = len(barriers[fewest])
    if reached != len(barriers[most]):
        extra = barriers[most][reached]
        raise ProgramError(
            f"barrier {reached + 1} is never reached by core {program.cores[fewest].core}, which has {reached} "
            f"barriers: the cores would deadlock",
            core=extra.core,
            index=extra.index,
            op="barrier",
        )
