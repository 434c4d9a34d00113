"""Program builders: turn one kernel's operands and compute steps into a multi-core `ringsim-program/1` document.

Every eager kernel is a "row kernel": its operands are contiguous device buffers, each either *split* (its leading
dimension is the kernel's row dimension: rows are divided across cores and tiled through the scratchpad) or *whole*
(every core loads it once, e.g. a broadcast operand or a matmul's right-hand side). Each core then runs

    dma_in whole operands; for each chunk of its rows: dma_in split inputs -> compute steps -> dma_out outputs

Row boundaries fall on whole sticks of every split operand (a core never starts mid-stick), small kernels run on one
core, and the chunk size is the largest that keeps all tiles inside the usable scratchpad.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from ringsim.engine import DEFAULT_MODEL
from ringsim.engine.dtypes import DTYPE_NAMES

STICK = DEFAULT_MODEL.stick_bytes
SCRATCHPAD = DEFAULT_MODEL.usable_scratchpad_bytes
CORES = DEFAULT_MODEL.cores
#: Below this many bytes per core, more cores cost more in DMA latency than they save.
MIN_BYTES_PER_CORE = 64 * 1024


class TooLargeError(NotImplementedError):
    """The operands of one row do not fit a core's scratchpad (the kernel would need a different split)."""


@dataclass(frozen=True)
class Operand:
    """A tile family: `shape` is the per-row shape of a split operand, or the full shape of a whole one."""

    name: str
    dtype: torch.dtype
    shape: tuple[int, ...]
    split: bool = True
    role: str = "in"  # "in", "out" or "temp" (scratchpad only)

    def row_bytes(self) -> int:
        return math.prod(self.shape) * self.dtype.itemsize

    def tile_shape(self, rows: int) -> list[int]:
        return [rows, *self.shape] if self.split else list(self.shape)


@dataclass(frozen=True)
class Step:
    """One compute instruction on tiles named after operands (temps are split tiles that never leave the core)."""

    fn: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    attrs: Mapping[str, Any] = field(default_factory=dict)


def _align(nbytes: int) -> int:
    return -(-nbytes // STICK) * STICK


def _granularity(operands: Sequence[Operand]) -> int:
    """Fewest rows whose bytes are whole sticks in every split buffer."""
    g = 1
    for op in operands:
        if op.split and op.role != "temp" and op.row_bytes():
            g = math.lcm(g, STICK // math.gcd(op.row_bytes(), STICK))
    return g


def _attrs(attrs: Mapping[str, Any], row: int, size: int) -> dict[str, Any]:
    """JSON attrs; a callable attr is given the chunk's first row and row count (e.g. arange's start)."""
    out = {}
    for k, v in attrs.items():
        v = v(row, size) if callable(v) else v
        if v is None:  # absent optional argument: the function's default
            continue
        out[k] = DTYPE_NAMES[v] if isinstance(v, torch.dtype) else v
    return out


@dataclass(frozen=True)
class RowSplit:
    """How `row_program` divides its rows: cores used, rows per core and rows per scratchpad chunk."""

    cores: int
    per_core: int
    chunk: int


def row_split(name: str, rows: int, operands: Sequence[Operand]) -> RowSplit:
    """The row kernel's division of `rows` (>= 1), or TooLargeError if one row's operands overflow a scratchpad."""
    splits = [op for op in operands if op.split]
    wholes = [op for op in operands if not op.split]
    whole_bytes = sum(_align(op.row_bytes()) for op in wholes)
    per_row = sum(op.row_bytes() for op in splits)
    g = _granularity(operands)
    room = SCRATCHPAD - whole_bytes - STICK * len(splits)  # each split tile may end in a padded stick
    cores = 1
    if not any(op.role == "out" for op in wholes):
        cores = max(1, min(CORES, (per_row * rows) // MIN_BYTES_PER_CORE, -(-rows // g)))
    per_core = -(-rows // cores)
    per_core = -(-per_core // g) * g
    span = min(rows, per_core)
    fit = room // per_row if per_row else span
    # One chunk per core starts only where a core starts (stick aligned); more chunks need aligned boundaries.
    chunk = span if fit >= span else (fit // g) * g
    if room < 0 or chunk < 1:
        raise TooLargeError(
            f"ring: aten::{name}: the operands of one row need more than a core's {SCRATCHPAD}-byte scratchpad "
            "(rows are not split further on this device)"
        )
    return RowSplit(cores, per_core, chunk)


def row_program(name: str, rows: int, operands: Sequence[Operand], steps: Sequence[Step]) -> dict[str, Any]:
    """Build the program that runs `steps` over `rows` (>= 1) rows of `operands` on as many cores as pay off."""
    split = row_split(name, rows, operands)
    splits = [op for op in operands if op.split]
    wholes = [op for op in operands if not op.split]
    buffers = {
        op.name: {"dtype": DTYPE_NAMES[op.dtype], "shape": op.tile_shape(rows)} for op in operands if op.role != "temp"
    }
    cores_json = [
        _core_program(core, start, min(rows, start + split.per_core), split.chunk, splits, wholes, steps)
        for core, start in enumerate(range(0, rows, split.per_core))
    ]
    return {"format": "ringsim-program/1", "name": name, "buffers": buffers, "cores": cores_json}


def _core_program(
    core: int, start: int, end: int, chunk: int, splits: list[Operand], wholes: list[Operand], steps: Sequence[Step]
) -> dict[str, Any]:
    tiles: dict[str, dict[str, Any]] = {}
    offset = 0
    for op in wholes:
        tiles[op.name] = {"offset": offset, "dtype": DTYPE_NAMES[op.dtype], "shape": list(op.shape)}
        offset += _align(op.row_bytes())
    starts = range(start, end, chunk)
    sizes = sorted({min(chunk, end - row) for row in starts}, reverse=True)
    suffix = {size: "" if i == 0 else f"_{size}" for i, size in enumerate(sizes)}
    split_offsets = {}
    for op in splits:
        split_offsets[op.name] = offset
        offset += _align(op.row_bytes() * sizes[0])
        for size in sizes:
            tiles[op.name + suffix[size]] = {
                "offset": split_offsets[op.name],
                "dtype": DTYPE_NAMES[op.dtype],
                "shape": op.tile_shape(size),
            }
    instructions: list[dict[str, Any]] = [
        {"op": "dma_in", "buffer": op.name, "offset": 0, "tile": op.name} for op in wholes if op.role == "in"
    ]
    for row in starts:
        size = min(chunk, end - row)
        tag = suffix[size]
        instructions += [
            {"op": "dma_in", "buffer": op.name, "offset": row * op.row_bytes(), "tile": op.name + tag}
            for op in splits
            if op.role == "in"
        ]
        instructions += [
            {
                "op": "compute",
                "fn": step.fn,
                "inputs": [n + tag if n in split_offsets else n for n in step.inputs],
                "output": [n + tag if n in split_offsets else n for n in step.outputs],
                "attrs": _attrs(step.attrs, row, size),
            }
            for step in steps
        ]
        instructions += [
            {"op": "dma_out", "tile": op.name + tag, "buffer": op.name, "offset": row * op.row_bytes()}
            for op in splits
            if op.role == "out"
        ]
    instructions += [
        {"op": "dma_out", "tile": op.name, "buffer": op.name, "offset": 0} for op in wholes if op.role == "out"
    ]
    return {"core": core, "tiles": tiles, "instructions": instructions}
