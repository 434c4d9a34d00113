"""The expression DAG of one ring kernel: loads, compute steps and stores over the kernel's [rows, cols] space."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import torch

from ring_inductor.indexing import Access

#: How the kind of a result follows from its inputs' kinds (full > row/col > scalar; row with col is full).
_RANK = {"scalar": 0, "row": 1, "col": 1, "full": 2}


def broadcast_kind(kinds: list[str]) -> str:
    """The kind of an elementwise result over inputs of these kinds."""
    present = set(kinds)
    if "full" in present or {"row", "col"} <= present:
        return "full"
    return max(present, key=_RANK.__getitem__, default="scalar")


@dataclass(frozen=True)
class Operand:
    """A kernel argument: an Inductor buffer bound to one program buffer through a strided view."""

    name: str  # program buffer name
    buffer: str  # Inductor buffer name (the wrapper's variable)
    dtype: torch.dtype
    access: Access
    is_output: bool
    #: the columns of its tile when not the kernel's (a fused matmul's left operand has K)
    cols: int | None = None
    #: the shape of a matrix tile loaded whole once per core (a fused matmul's right operand)
    whole: tuple[int, ...] | None = None


@dataclass(eq=False)
class Value:
    """A node of the DAG: one tile's worth of data, produced by a load (`operand`) or a compute step (`fn`)."""

    kind: str
    dtype: torch.dtype
    fn: str | None = None
    inputs: tuple[Value, ...] = ()
    attrs: dict[str, Any] = field(default_factory=dict)
    operand: Operand | None = None
    #: `attrs["size"]` is filled with the tile's shape when emitted (creation fns such as `full`).
    sized: bool = False


@dataclass
class KernelGraph:
    """Everything one kernel computes, in program order."""

    rows: int
    cols: int
    operands: list[Operand] = field(default_factory=list)
    steps: list[Value] = field(default_factory=list)
    stores: list[tuple[Operand, Value]] = field(default_factory=list)
    origins: list[str] = field(default_factory=list)

    def drop_stores(self, buffers: set[str]) -> None:
        """Stop writing `buffers` to device memory (values only this kernel reads)."""
        self.stores = [(op, value) for op, value in self.stores if op.buffer not in buffers]
        self.operands = [op for op in self.operands if not (op.is_output and op.buffer in buffers)]

    def fold_casts(self) -> None:
        """A float compute step whose only reader is a cast to another float dtype writes that dtype itself.

        The device rounds each result once to its output tile's dtype, so this saves a step, a tile and a rounding.
        """
        readers: Counter[int] = Counter(id(v) for step in self.steps for v in step.inputs)
        readers.update(id(v) for _, v in self.stores)
        folded: dict[int, Value] = {}
        for value in self.steps:
            value.inputs = tuple(folded.get(id(v), v) for v in value.inputs)
            source = value.inputs[0] if value.fn == "cast" else None
            if (
                source is not None
                and source.fn not in (None, "cast")
                and not source.sized
                and readers[id(source)] == 1
                and source.dtype.is_floating_point
                and value.dtype.is_floating_point
            ):
                source.dtype = value.dtype
                folded[id(value)] = source
        self.steps = [v for v in self.steps if id(v) not in folded]
        self.stores = [(op, folded.get(id(v), v)) for op, v in self.stores]
