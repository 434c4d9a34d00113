"""Run a checked program on real bytes: per-core scratchpads, tiles as typed views, DMA as byte copies.

Each core's scratchpad is one 2 MiB uint8 tensor kept for the life of the process (its contents between kernels are
undefined, as on hardware); a tile is a dtype view of its bytes, so overlapping tiles really alias. Bound buffers are
CPU tensors whose bytes are the device memory; DMA copies whole byte ranges between them and tiles.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
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
    buffer: str | None = None
    start: int = 0
    end: int = 0
    link: tuple[int, int] | None = None
    fn: compute.ComputeFn | None = None
    inputs: tuple[torch.Tensor, ...] = ()
    outputs: tuple[torch.Tensor, ...] = ()
    attrs: Mapping[str, Any] | None = None


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
            actions.append(Action(step.kind, views[(core, tile)][0], step.buffer, step.start, step.start + step.nbytes))
        elif step.kind == "compute":
            actions.append(
                Action(
                    "compute",
                    fn=step.fn,
                    inputs=tuple(views[(core, name)][1] for name in step.reads),
                    outputs=tuple(views[(core, name)][1] for name in step.writes),
                    attrs=step.attrs,
                )
            )
        elif step.kind == "send":
            actions.append(Action("send", views[(core, step.reads[0])][0], link=(core, step.peer)))
        elif step.kind == "recv":
            actions.append(Action("recv", views[(core, step.writes[0])][0], link=(step.peer, core)))
    return tuple(actions)


def buffer_bytes(program: Program, buffers: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Check the bound tensors against the declared buffers and view each as its raw bytes."""
    declared = program.buffers
    if len(buffers) != len(declared) or any(name not in buffers for name in declared):
        missing = sorted(declared.keys() - buffers.keys())
        extra = sorted(buffers.keys() - declared.keys())
        detail = f"buffer {missing[0]!r} is not bound" if missing else f"buffer {extra[0]!r} is not declared"
        raise ProgramError(f"launch of {program.name!r}: {detail}")
    raw = {}
    for name, tensor in buffers.items():
        if tensor.nbytes != declared[name].nbytes or tensor.device.type != "cpu" or not tensor.is_contiguous():
            raise ProgramError(
                f"launch of {program.name!r}: buffer {name!r} must be a contiguous CPU alias of device memory of "
                f"{declared[name].nbytes} bytes, got {tensor.nbytes} bytes on {tensor.device} "
                f"({'contiguous' if tensor.is_contiguous() else 'not contiguous'})"
            )
        raw[name] = tensor.view(-1).view(torch.uint8)
    return raw


def run(actions: tuple[Action, ...], raw: Mapping[str, torch.Tensor]) -> None:
    """Execute the actions in order; ring transfers travel through per-link FIFOs."""
    links: dict[tuple[int, int], deque[torch.Tensor]] = {}
    for action in actions:
        kind = action.kind
        if kind == "dma_in":
            action.tile_bytes.copy_(raw[action.buffer][action.start : action.end])
        elif kind == "dma_out":
            raw[action.buffer][action.start : action.end].copy_(action.tile_bytes)
        elif kind == "compute":
            results = compute.call(action.fn, action.inputs, action.attrs)
            for output, result in zip(action.outputs, results, strict=True):
                output.copy_(result if result.shape == output.shape else result.reshape(output.shape))
        elif kind == "send":
            links.setdefault(action.link, deque()).append(action.tile_bytes.clone())
        else:
            action.tile_bytes.copy_(links[action.link].popleft())
