"""A compiled ring kernel at run time: binds the wrapper's ring tensors to program buffers and launches it.

The generated wrapper module defines one `RingKernel` per kernel and calls it with the Inductor buffers it reads
and writes. Each operand is bound through the strided view its index describes; a view that is not contiguous
and stick-aligned is first made so by a relayout program (`relayout`), and a strided store is written back after
by one.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from ringsim import runtime
from ringsim.engine import launch

from ring_inductor import relayout


@dataclass(frozen=True)
class Binding:
    """How one argument of the kernel call fills one program buffer."""

    buffer: str
    argument: int
    kind: str
    sizes: tuple[int, ...]
    strides: tuple[int, ...]
    offset: int
    elements: int
    is_output: bool


class RingKernel:
    """One program plus its bindings; calling it launches the program on the ring tensors given."""

    def __init__(self, program: dict[str, Any], bindings: Sequence[Binding]) -> None:
        self.program = program
        self.name: str = program["name"]
        self.bindings = tuple(bindings)
        digest = hashlib.sha256(json.dumps(program, sort_keys=True).encode()).hexdigest()
        self.key = ("ring_inductor", self.name, digest)

    @classmethod
    def from_json(cls, program: str, bindings: Sequence[tuple[Any, ...]]) -> RingKernel:
        """The form the generated wrapper uses (a JSON string and tuples keep the wrapper source plain)."""
        return cls(json.loads(program), [Binding(*b) for b in bindings])

    def __call__(self, *arguments: torch.Tensor) -> None:
        buffers: dict[str, torch.Tensor] = {}
        copies: list[tuple[torch.Tensor, torch.Tensor, list[int]]] = []
        for b in self.bindings:
            base = arguments[b.argument]
            flips: list[int] = []
            if b.kind in ("gather", "scatter"):
                view, flips = _positive_view(base, b.sizes, b.strides, b.offset)
            else:
                view = torch.as_strided(base, (b.elements,), (1,), base.storage_offset() + b.offset)
            if b.is_output and (flips or not (b.kind != "scatter" and relayout.readable(view))):
                target, view = view, torch.empty(view.shape, dtype=view.dtype, device=view.device)
                copies.append((target, view, flips))
            elif not b.is_output and flips:
                view = view.flip(flips)  # a new, contiguous tensor in the access's order
            elif not b.is_output and not relayout.readable(view):
                view = relayout.contiguous(view)
            buffers[b.buffer] = runtime.host_view(view)
        launch(self.program, buffers, key=self.key)
        for target, result, flips in copies:
            relayout.store(target, result.flip(flips) if flips else result)


def _positive_view(
    base: torch.Tensor, sizes: Sequence[int], strides: Sequence[int], offset: int
) -> tuple[torch.Tensor, list[int]]:
    """The elements of a strided access as a view with positive strides, and the dims to flip to get the access's
    order: as_strided refuses negative strides, which an index like flip's (`n - 1 - i`) has."""
    flips = [d for d, stride in enumerate(strides) if stride < 0]
    start = offset + sum(stride * (size - 1) for size, stride in zip(sizes, strides, strict=True) if stride < 0)
    view = torch.as_strided(base, tuple(sizes), tuple(abs(s) for s in strides), base.storage_offset() + start)
    return view, flips
