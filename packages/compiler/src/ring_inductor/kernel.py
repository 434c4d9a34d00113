"""A compiled ring kernel at run time: binds the wrapper's ring tensors to program buffers and launches it.

The generated wrapper module defines one `RingKernel` per kernel and calls it with the Inductor buffers it reads
and writes. Each operand is bound through the strided view its index describes; a view that is not contiguous
and stick-aligned is first made so by a relayout program (`relayout`), and a strided store is written back after
by one. A kernel that only copies a strided view into a contiguous output (Inductor's `clone` of a permuted view
before a reshape) is that relayout alone, written straight into the output: one copy, not two.
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
        self.copies = _copies(program, self.bindings)
        digest = hashlib.sha256(json.dumps(program, sort_keys=True).encode()).hexdigest()
        self.key = ("ring_inductor", self.name, digest)

    @classmethod
    def from_json(cls, program: str, bindings: Sequence[tuple[Any, ...]]) -> RingKernel:
        """The form the generated wrapper uses (a JSON string and tuples keep the wrapper source plain)."""
        return cls(json.loads(program), [Binding(*b) for b in bindings])

    def __call__(self, *arguments: torch.Tensor) -> None:
        if self.copies is not None and self._relay(*arguments):
            return
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

    def _relay(self, *arguments: torch.Tensor) -> bool:
        """Run a copying kernel as the relayout of its source view into its output, when the source needs one and
        the output is contiguous; False leaves the kernel to run."""
        (src, src_flips), (out, out_flips) = (
            _positive_view(arguments[b.argument], b.sizes, b.strides, b.offset) for b in self.copies
        )
        if src_flips or out_flips or relayout.readable(src) or not relayout.readable(out):
            return False
        relayout.contiguous(src, into=out)
        return True


def _copies(program: dict[str, Any], bindings: Sequence[Binding]) -> tuple[Binding, Binding] | None:
    """The (source, output) bindings of a program that only copies one buffer into another, each DMA out writing
    what the DMA in before it read, at the same offset, into an output bound in order; else None."""
    inputs = [b for b in bindings if not b.is_output]
    outputs = [b for b in bindings if b.is_output]
    if len(inputs) != 1 or len(outputs) != 1 or outputs[0].kind != "full" or inputs[0].kind not in ("full", "gather"):
        return None
    source, target = inputs[0], outputs[0]
    if source.elements != target.elements or source.sizes != target.sizes:
        return None
    for core in program["cores"]:
        code = core["instructions"]
        if len(code) % 2:
            return None
        for load, store in zip(code[::2], code[1::2], strict=True):
            if (load["op"], store["op"]) != ("dma_in", "dma_out") or load["tile"] != store["tile"]:
                return None
            if (load["buffer"], store["buffer"], load["offset"]) != (source.buffer, target.buffer, store["offset"]):
                return None
    return source, target


def _positive_view(
    base: torch.Tensor, sizes: Sequence[int], strides: Sequence[int], offset: int
) -> tuple[torch.Tensor, list[int]]:
    """The elements of a strided access as a view with positive strides, and the dims to flip to get the access's
    order: as_strided refuses negative strides, which an index like flip's (`n - 1 - i`) has."""
    flips = [d for d, stride in enumerate(strides) if stride < 0]
    start = offset + sum(stride * (size - 1) for size, stride in zip(sizes, strides, strict=True) if stride < 0)
    view = torch.as_strided(base, tuple(sizes), tuple(abs(s) for s in strides), base.storage_offset() + start)
    return view, flips
