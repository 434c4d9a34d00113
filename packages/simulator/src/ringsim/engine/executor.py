"""Run a checked program on real bytes: per-core scratchpads, tiles as typed views, DMA as byte copies.

Each core's scratchpad is one 2 MiB uint8 tensor kept for the life of the process (its contents between kernels are
undefined, as on hardware); a tile is a dtype view of its bytes, so overlapping tiles really alias. Bound buffers are
CPU tensors whose bytes are the device memory; DMA copies whole byte ranges between them and tiles.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import torch

from . import compute
from .errors import ProgramError
from .model import DeviceModel
from .program import Program, TileSpec
from .validate import Step

_SCRATCHPADS: dict[int, torch.Tensor] = {}


def scratchpad(core: int, model: DeviceModel) -> torch.Tensor:
    """The scratchpad of `core`, allocated on first use."""
    pad = _SCRATCHPADS.get(core)
    if pad is None or pad.numel() != model.scratchpad_bytes:
        pad = _SCRATCHPADS[core] = torch.zeros(model.scratchpad_bytes, dtype=torch.uint8)
    return pad


def _tile_views(core: int, tile: TileSpec, model: DeviceModel) -> tuple[torch.Tensor, torch.Tensor]:
    raw = scratchpad(core, model)[tile.offset : tile.end]
    return raw, raw.view(tile.dtype).view(tile.shape)


@dataclass(frozen=True, slots=True)
class Action:
    """One step ready to run: the views it touches are bound once per program."""

    kind: str
    tile_bytes: torch.Tensor | None = None
    #: For a DMA of a whole buffer into a tile of its dtype and shape: the typed tile, copied without byte views.
    whole: torch.Tensor | None = None
    buffer: str | None = None
    start: int = 0
    end: int = 0
    link: tuple[int, int] | None = None
    fn: compute.ComputeFn | None = None
    name: str = ""
    inputs: tuple[torch.Tensor, ...] = ()
    outputs: tuple[torch.Tensor, ...] = ()
    attrs: Mapping[str, Any] | None = None
    #: The fn may return views of its inputs, which the output tile may overlap: copy results before storing.
    copy_results: bool = False
    #: `whole` viewed under the shapes callers bind the buffer with (the same bytes), made once per shape.
    shaped: dict[Any, torch.Tensor] = field(default_factory=dict)


def bind(
    program: Program, steps: list[list[Step]], order: tuple[tuple[int, int], ...], model: DeviceModel
) -> tuple[Action, ...]:
    """Turn the modelled issue order into actions on this process's scratchpads."""
    views = {}
    for core in program.cores:
        for name, tile in core.tiles.items():
            views[(core.core, name)] = _tile_views(core.core, tile, model)
    actions = []
    for position, index in order:
        step = steps[position][index]
        core = step.core
        if step.kind in ("dma_in", "dma_out"):
            tile = (step.writes or step.reads)[0]
            raw, typed = views[(core, tile)]
            spec = program.buffers[step.buffer]
            whole = typed if (spec.dtype, spec.shape, step.start) == (typed.dtype, tuple(typed.shape), 0) else None
            actions.append(Action(step.kind, raw, whole, step.buffer, step.start, step.start + step.nbytes))
        elif step.kind == "compute":
            actions.append(
                Action(
                    "compute",
                    fn=step.fn,
                    name=step.name,
                    inputs=tuple(views[(core, name)][1] for name in step.reads),
                    outputs=tuple(views[(core, name)][1] for name in step.writes),
                    attrs=step.attrs,
                    copy_results=step.copy_results,
                )
            )
        elif step.kind == "send":
            actions.append(Action("send", views[(core, step.reads[0])][0], link=(core, step.peer)))
        elif step.kind == "recv":
            actions.append(Action("recv", views[(core, step.writes[0])][0], link=(step.peer, core)))
    return tuple(actions)


def check_buffers(program: Program, buffers: Mapping[str, torch.Tensor]) -> None:
    """Check the bound tensors against the declared buffers: same names, contiguous CPU memory of the same size."""
    declared = program.buffers
    if buffers.keys() != declared.keys():
        missing = sorted(declared.keys() - buffers.keys())
        extra = sorted(buffers.keys() - declared.keys())
        detail = f"buffer {missing[0]!r} is not bound" if missing else f"buffer {extra[0]!r} is not declared"
        raise ProgramError(f"launch of {program.name!r}: {detail}")
    for name, tensor in buffers.items():
        if tensor.nbytes != declared[name].nbytes or not tensor.is_cpu or not tensor.is_contiguous():
            raise ProgramError(
                f"launch of {program.name!r}: buffer {name!r} must be a contiguous CPU alias of device memory of "
                f"{declared[name].nbytes} bytes, got {tensor.nbytes} bytes on {tensor.device} "
                f"({'contiguous' if tensor.is_contiguous() else 'not contiguous'})"
            )


def byte_view(tensor: torch.Tensor) -> torch.Tensor:
    """A bound buffer as its raw bytes (the engine reinterprets whatever dtype the caller bound)."""
    return tensor.view(-1).view(torch.uint8)


def run(actions: tuple[Action, ...], buffers: Mapping[str, torch.Tensor]) -> None:
    """Execute the actions in order; ring transfers travel through per-link FIFOs."""
    links: dict[tuple[int, int], deque[torch.Tensor]] = {}
    raw: dict[str, torch.Tensor] = {}
    for action in actions:
        kind = action.kind
        if kind == "compute":
            results = compute.call(action.fn, action.inputs, action.attrs)
            for output, result in zip(action.outputs, results, strict=True):
                if action.copy_results:
                    result = result.clone()
                output.copy_(result if result.shape == output.shape else result.reshape(output.shape))
        elif kind == "dma_in" or kind == "dma_out":
            tensor = buffers[action.buffer]
            whole = action.whole
            if whole is not None and tensor.dtype == whole.dtype:
                shape = tensor.shape
                if shape != whole.shape:  # the same contiguous bytes, bound under the caller's shape
                    shaped = action.shaped.get(shape)
                    whole = action.shaped[shape] = whole.view(shape) if shaped is None else shaped
                whole.copy_(tensor) if kind == "dma_in" else tensor.copy_(whole)
                continue
            memory = raw.get(action.buffer)
            if memory is None:
                memory = raw[action.buffer] = byte_view(tensor)
            if kind == "dma_in":
                action.tile_bytes.copy_(memory[action.start : action.end])
            else:
                memory[action.start : action.end].copy_(action.tile_bytes)
        elif kind == "send":
            links.setdefault(action.link, deque()).append(action.tile_bytes.clone())
        else:
            action.tile_bytes.copy_(links[action.link].popleft())
