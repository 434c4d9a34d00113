"""Program emission: a planned graph becomes one `ringsim-program/1` document for all cores.

An emitted kernel carries its program and the device layout of each buffer: `pack` lays host tensors out as the
plan stores them in device memory (a tensor split by the mandatory pass becomes one buffer per part), `unpack`
reads the outputs back in host layout, so the simulator measures the plan and tests check its numerics.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import torch

FORMAT = "ringsim-program/1"

TORCH_DTYPES = {"float16": torch.float16, "bfloat16": torch.bfloat16, "float32": torch.float32}

#: host tensor -> its device-layout bytes, as a flat tensor of the buffer's dtype
Packer = Callable[[torch.Tensor], torch.Tensor]


@dataclass
class Emitted:
    program: dict[str, Any]
    #: graph tensor -> [(buffer name, packer)]: how a host input lands in device memory
    layouts: dict[str, list[tuple[str, Packer]]] = field(default_factory=dict)
    #: graph output -> function from the bound buffers to the host tensor
    readers: dict[str, Callable[[Mapping[str, torch.Tensor]], torch.Tensor]] = field(default_factory=dict)
    #: graph output -> the same elements as a strided view of its buffer, before any copy (where a reader copies)
    views: dict[str, Callable[[Mapping[str, torch.Tensor]], torch.Tensor]] = field(default_factory=dict)

    def pack(self, inputs: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """Device memory for a launch: the inputs in the plan's layout, every other buffer zeroed."""
        buffers = {
            name: torch.zeros(spec["shape"], dtype=TORCH_DTYPES[spec["dtype"]])
            for name, spec in self.program["buffers"].items()
        }
        for tensor, parts in self.layouts.items():
            for buffer, packer in parts:
                buffers[buffer].view(-1).copy_(packer(inputs[tensor]).reshape(-1))
        return buffers

    def unpack(self, buffers: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        return {name: read(buffers) for name, read in self.readers.items()}


def dma_in(buffer: str, offset: int, tile: str) -> dict[str, Any]:
    return {"op": "dma_in", "buffer": buffer, "offset": offset, "tile": tile}


def dma_out(tile: str, buffer: str, offset: int) -> dict[str, Any]:
    return {"op": "dma_out", "tile": tile, "buffer": buffer, "offset": offset}


def compute(fn: str, inputs: list[str], output: str, **attrs: Any) -> dict[str, Any]:
    return {"op": "compute", "fn": fn, "inputs": inputs, "output": output, "attrs": attrs}


def send(to: int, tile: str) -> dict[str, Any]:
    return {"op": "send", "to": to, "tile": tile}


def recv(source: int, tile: str) -> dict[str, Any]:
    return {"op": "recv", "from": source, "tile": tile}


BARRIER: dict[str, Any] = {"op": "barrier"}


class Tiles:
    """A core's tile table, laid out one after another on stick boundaries unless an offset is given."""

    def __init__(self, stick: int = 128):
        self.stick, self.end, self.specs = stick, 0, {}

    def add(self, name: str, dtype: str, shape: list[int], offset: int | None = None) -> str:
        nbytes = torch.Size(shape).numel() * getattr(torch, dtype).itemsize
        start = self.end if offset is None else offset
        self.specs[name] = {"offset": start, "dtype": dtype, "shape": shape}
        self.end = max(self.end, start + -(-nbytes // self.stick) * self.stick)
        return name


def document(name: str, buffers: dict[str, Any], cores: list[dict[str, Any]]) -> dict[str, Any]:
    return {"format": FORMAT, "name": name, "buffers": buffers, "cores": cores}


def flat(tensor: torch.Tensor) -> torch.Tensor:
    """The identity layout: the host's row-major bytes (stick on the last dim)."""
    return tensor.contiguous()
