"""Turn a kernel's expression DAG into one `ringsim-program/1` program, rows split across cores in whole sticks.

Each core: DMA in its whole (broadcast) operands and compute the steps that depend only on them, then for each
chunk of its rows: DMA in the split operands, run every row step on scratchpad tiles, DMA out the stored tiles.
Every value has a tile (intermediates never round-trip through device memory); a scratchpad solver (`placement`)
places the chunk's tiles by lifetime, so a dead tile's bytes are reused, and the chunk is the largest it places.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import torch
from ringsim.engine import DEFAULT_MODEL, FORMAT

from ring_inductor import config
from ring_inductor.errors import UnsupportedError
from ring_inductor.graph import KernelGraph, Operand, Value
from ring_inductor.placement import SOLVER_NAMES, ChunkPlan, lifetimes, needed, place

STICK = DEFAULT_MODEL.stick_bytes
SCRATCHPAD = DEFAULT_MODEL.usable_scratchpad_bytes
CORES = DEFAULT_MODEL.cores
#: Below this many bytes of operands per core, another core costs more in DMA latency than it saves.
MIN_BYTES_PER_CORE = 32 * 1024
#: Reductions whose aten form takes one int dim rather than a dim list.
_INT_DIM = frozenset({"prod", "argmax", "argmin"})


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def align(nbytes: int) -> int:
    """`nbytes` rounded up to whole sticks."""
    return -(-nbytes // STICK) * STICK


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def _split(kind: str) -> bool:
    return kind in ("full", "row", "gather", "scatter")


@dataclass(frozen=True)
class Split:
    """The work division of one kernel, dumped with its program for review."""

    rows: int
    cols: int
    cores: int
    rows_per_core: int
    chunk: int
    granularity: int
    scratchpad_bytes: int
    solver: str


class Tiles:
    """Names the tile of every value and operand, and gives each tile kind its shape and row bytes."""

    def __init__(self, graph: KernelGraph) -> None:
        self.cols = graph.cols
        self.widths = {op.name: op.cols for op in graph.operands if op.cols is not None}
        self.matrices = {op.name: list(op.whole) for op in graph.operands if op.whole is not None}
        self.names: dict[int, str] = {}
        self.kinds: dict[str, tuple[str, torch.dtype]] = {}
        for n, value in enumerate(graph.steps):
            self._add(value, f"t{n}")
        for operand in graph.operands:
            self.kinds.setdefault(operand.name, (_tile_kind(operand), operand.dtype))

    def _add(self, value: Value, name: str) -> None:
        self.names[id(value)] = name
        self.kinds[name] = (value.kind, value.dtype)

    def of(self, value: Value) -> str:
        return value.operand.name if value.operand is not None else self.names[id(value)]

    def shape(self, name: str, rows: int) -> list[int]:
        kind = self.kinds[name][0]
        if kind == "matrix":
            return self.matrices[name]
        cols = self.widths.get(name, self.cols)
        return {"full": [rows, cols], "row": [rows, 1], "col": [self.cols], "scalar": [1]}[kind]

    def row_bytes(self, name: str) -> int:
        kind, dtype = self.kinds[name]
        return (self.widths.get(name, self.cols) if kind == "full" else 1) * dtype.itemsize


def _tile_kind(operand: Operand) -> str:
    if operand.whole is not None:
        return "matrix"
    kind = operand.access.kind
    return "full" if kind in ("gather", "scatter") else kind


class RowOverflow(UnsupportedError):
    """The smallest chunk of whole rows overflows a core's scratchpad (a looped kernel may still fit)."""


def _chunk_steps(graph: KernelGraph, tiles: Tiles, split: set[str]) -> list[tuple[list[str], list[str]]]:
    """What each step of one chunk reads and writes, in program order: DMAs in, compute steps, DMAs out."""
    steps: list[tuple[list[str], list[str]]] = [([], [op.name]) for op in graph.operands if op.name in split
                                                 and not op.is_output]  # fmt: skip
    steps += [([tiles.of(v) for v in value.inputs], [tiles.of(value)]) for value in graph.steps if _split(value.kind)]
    steps += [([tiles.of(value)], []) for _, value in graph.stores]
    return steps


def plan_split(graph: KernelGraph, tiles: Tiles, solver: str | None = None) -> tuple[Split, ChunkPlan]:
    """How many cores, rows per core and rows per chunk, and where each chunk tile lives: the largest chunk whose
    tiles `solver` places in the scratchpad left by the whole tiles; refuses a row that cannot fit."""
    solver = solver or config.scratchpad_solver
    if solver not in SOLVER_NAMES:
        raise ValueError(f"ring_inductor.config.scratchpad_solver: unknown solver {solver!r} (one of "
                         f"{', '.join(SOLVER_NAMES)})")  # fmt: skip
    split = {name for name, (kind, _) in tiles.kinds.items() if _split(kind)}
    whole = [name for name in tiles.kinds if name not in split]
    g, per_core = row_division(graph, tiles)
    whole_bytes = sum(align(math.prod(tiles.shape(n, 1)) * tiles.kinds[n][1].itemsize) for n in whole)
    chunk_tiles = lifetimes(_chunk_steps(graph, tiles, split), {n: tiles.row_bytes(n) for n in split})
    room = SCRATCHPAD - whole_bytes
    span = min(graph.rows, per_core)
    fits = lambda rows: needed(chunk_tiles, rows, solver) <= room  # noqa: E731
    if room < 0 or not fits(min(g, span)):
        rows = min(g, span)
        raise RowOverflow(
            f"the smallest chunk of this kernel ({rows} row{'s' * (rows > 1)} of {graph.cols} columns, "
            f"{needed(chunk_tiles, rows, solver)} bytes of tiles as the {solver} solver places them) overflows the "
            f"{room} bytes of a core's scratchpad left by its whole tiles"
        )
    chunk = span if fits(span) else _largest(lambda k: fits(k * g), span // g) * g
    while (placement := place(chunk_tiles, chunk, room, solver)).spilled:
        if chunk <= g:
            raise UnsupportedError(f"the {solver} scratchpad solver cannot place one chunk of this kernel's tiles")
        chunk = max(g, chunk * 7 // 8 // g * g)
    used = whole_bytes + placement.peak
    split_plan = Split(graph.rows, graph.cols, ceil_div(graph.rows, per_core), per_core, chunk, g, used, solver)
    return split_plan, ChunkPlan(tuple(chunk_tiles), chunk, placement)


def row_division(graph: KernelGraph, tiles: Tiles) -> tuple[int, int]:
    """The row granularity (rows whose split operands' DMAs are whole sticks) and the rows per core: as many
    cores as have MIN_BYTES_PER_CORE of operands each, up to CORES."""
    io = [op.name for op in graph.operands if _split(_tile_kind(op))]
    g = 1
    for name in io:
        g = math.lcm(g, STICK // math.gcd(tiles.row_bytes(name), STICK))
    io_row = sum(tiles.row_bytes(n) for n in io)
    cores = max(1, min(CORES, graph.rows * io_row // MIN_BYTES_PER_CORE, ceil_div(graph.rows, g)))
    return g, ceil_div(ceil_div(graph.rows, cores), g) * g


def _largest(ok: Callable[[int], bool], high: int) -> int:
    """The largest k in [1, high] with ok(k), for ok true at 1 and monotone (true, then false)."""
    low = 1
    while low < high:
        middle = (low + high + 1) // 2
        low, high = (middle, high) if ok(middle) else (low, middle - 1)
    return low


def _attr(value: Any, row: int, size: int) -> Any:
    """A JSON attr; a callable one is given the chunk's first row and row count (a row index's arange)."""
    if callable(value):
        return value(row, size)
    return dtype_name(value) if isinstance(value, torch.dtype) else value


def compute_step(
    value: Value, name_of: Callable[[Value], str], row: int, size: int, shape: list[int]
) -> dict[str, Any]:
    """The compute instruction of `value` for a chunk of `size` rows from `row`, its tiles named by `name_of` and
    its output `shape` given to creation fns."""
    attrs = {k: _attr(v, row, size) for k, v in value.attrs.items()}
    if value.fn in _INT_DIM:
        attrs["dim"] = -1
    if value.sized:
        attrs["size"] = shape
    return {
        "op": "compute",
        "fn": value.fn,
        "inputs": [name_of(v) for v in value.inputs],
        "output": name_of(value),
        "attrs": attrs,
    }


def _compute(value: Value, tiles: Tiles, tag: str, row: int, size: int, split: set[str]) -> dict[str, Any]:
    name_of = lambda v: tiles.of(v) + tag if tiles.of(v) in split else tiles.of(v)  # noqa: E731 - chunk's tile
    return compute_step(value, name_of, row, size, tiles.shape(tiles.of(value), size))


def build_program(name: str, graph: KernelGraph) -> tuple[dict[str, Any], dict[str, Any]]:
    """The program for `graph` and the decisions behind it (split, tiles), for the dump; RowOverflow when the
    smallest chunk of whole rows does not fit (`emit_looped` then walks the rows in column chunks)."""
    tiles = Tiles(graph)
    plan, chunk_plan = plan_split(graph, tiles)
    placement = chunk_plan.placement
    split = {n for n, (kind, _) in tiles.kinds.items() if _split(kind)}
    hoisted = [v for v in graph.steps if not _split(v.kind)]
    per_chunk = [v for v in graph.steps if _split(v.kind)]
    loads = [op for op in graph.operands if not op.is_output]
    cores = []
    for core, start in enumerate(range(0, graph.rows, plan.rows_per_core)):
        end = min(graph.rows, start + plan.rows_per_core)
        starts = range(start, end, plan.chunk)
        sizes = sorted({min(plan.chunk, end - row) for row in starts}, reverse=True)
        suffix = {size: "" if i == 0 else f"_{size}" for i, size in enumerate(sizes)}
        core_tiles: dict[str, Any] = {}
        offset = 0
        for tile in sorted(set(tiles.kinds) - split):
            core_tiles[tile] = {
                "offset": offset,
                "dtype": dtype_name(tiles.kinds[tile][1]),
                "shape": tiles.shape(tile, 1),
            }
            offset += align(math.prod(tiles.shape(tile, 1)) * tiles.kinds[tile][1].itemsize)
        for tile in sorted(placement.offsets):
            for size in sizes:
                core_tiles[tile + suffix[size]] = {
                    "offset": offset + placement.offsets[tile],
                    "dtype": dtype_name(tiles.kinds[tile][1]),
                    "shape": tiles.shape(tile, size),
                }
        instructions: list[dict[str, Any]] = [
            {"op": "dma_in", "buffer": op.name, "offset": 0, "tile": op.name} for op in loads if op.name not in split
        ]
        instructions += [_compute(v, tiles, "", 0, 1, split) for v in hoisted]
        for row in starts:
            size = min(plan.chunk, end - row)
            tag = suffix[size]
            instructions += [
                {"op": "dma_in", "buffer": op.name, "offset": row * tiles.row_bytes(op.name), "tile": op.name + tag}
                for op in loads
                if op.name in split
            ]
            instructions += [_compute(v, tiles, tag, row, size, split) for v in per_chunk]
            instructions += [
                {
                    "op": "dma_out",
                    "tile": tiles.of(value) + tag,
                    "buffer": operand.name,
                    "offset": row * tiles.row_bytes(operand.name),
                }
                for operand, value in graph.stores
            ]
        cores.append({"core": core, "tiles": core_tiles, "instructions": instructions})
    decisions = kernel_decisions(name, graph, cores, split=asdict(plan), scratchpad=chunk_plan.decisions())
    return document(name, graph, tiles, cores), decisions


def document(name: str, graph: KernelGraph, tiles: Tiles, cores: list[dict[str, Any]]) -> dict[str, Any]:
    """The program: one buffer per operand over the kernel's whole extent, and each core's tiles and code."""
    buffers = {
        op.name: {"dtype": dtype_name(op.dtype), "shape": tiles.shape(op.name, graph.rows)} for op in graph.operands
    }
    return {"format": FORMAT, "name": name, "buffers": buffers, "cores": cores}


def kernel_decisions(name: str, graph: KernelGraph, cores: list[dict[str, Any]], **planned: Any) -> dict[str, Any]:
    """For the dump: the kernel, its origins, the `planned` decisions, its operands and core 0's tiles."""
    return {"kernel": name, "origins": graph.origins, **planned, "operands": operand_decisions(graph),
            "tiles": cores[0]["tiles"]}  # fmt: skip


def operand_decisions(graph: KernelGraph) -> list[dict[str, Any]]:
    """Each operand's buffer, dtype and strided view, for the dump."""
    return [
        {
            "name": op.name,
            "buffer": op.buffer,
            "dtype": dtype_name(op.dtype),
            "kind": op.access.kind,
            "sizes": list(op.access.sizes),
            "strides": list(op.access.strides),
            "offset": op.access.offset,
        }
        for op in graph.operands
    ]
