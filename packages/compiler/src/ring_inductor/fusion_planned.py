"""A planned matmul (B overflows a core) and its pointwise consumers as one kernel, run on each output tile.

The planning layer's divisions accumulate [tm, tn] output tiles over K-chunks in fp32: a grid gives each core a
block of them, the ring scheme a band of columns, one piece of rows at a time. Fused, each accumulator is rounded
once into the product's tile (addmm's bias added on the way) and the consumers' steps run on that tile before
anything is stored; their operands arrive per tile (a [tm, tn] block of a full operand, a tn slice of a column or
a tm slice of a row, repeated onto whole sticks where narrower than one, a scalar), and their results leave per
tile. Every tile-sized operand and output is bound through a blocked view of its tensor in the division's tile
order, which the kernel's relayout programs make contiguous before the launch and write back after, so each DMA
moves one contiguous tile, as the matmul's own blocked operands do.
"""

from __future__ import annotations

import math
from dataclasses import asdict
from typing import Any

from ring_inductor import emit
from ring_inductor.emit import STICK, align, compute_step, dtype_name, kernel_decisions
from ring_inductor.errors import UnsupportedError
from ring_inductor.graph import KernelGraph, Operand
from ring_inductor.indexing import Access
from ring_inductor.plan.divide import MatmulDivision, TensorSplit
from ring_inductor.plan.emit import Tiles, compute, dma_in, dma_out
from ring_inductor.plan.emit_matmul import TileGrid, emit_matmul
from ring_inductor.plan.tiling import EpilogueRoom
from ring_inductor.planned_matmul import layout_decisions, matmul_graph
from ring_inductor.sticks import as_stored, reads_along_k

#: The fused matmul's own operands (`fusion.fused_graph`): they feed the accumulator, not the epilogue.
MATMUL_OPERANDS = ("mm_a", "mm_b")

Dims = list[tuple[int, int]]


def _shape(kind: str, tm: int, tn: int) -> list[int]:
    return {"full": [tm, tn], "row": [tm, 1], "col": [tn], "scalar": [1]}[kind]


def _kind(operand: Operand) -> str:
    return "full" if operand.access.kind in ("gather", "scatter") else operand.access.kind


def _repeats(operand: Operand, tm: int, tn: int) -> int:
    """How many times each tile of a row or column operand is repeated in its buffer so that every tile starts on a
    stick (a 32-column band of fp16 is 64 bytes); 1 for the others."""
    kind = _kind(operand)
    if kind not in ("row", "col"):
        return 1
    nbytes = (tm if kind == "row" else tn) * operand.dtype.itemsize
    return STICK // math.gcd(nbytes, STICK)


def b_along_k(graph: KernelGraph) -> bool:
    """Whether the matmul's right operand is stored along K, which the layout pass keeps (`sticks`)."""
    b = next(op for op in graph.operands if op.name == "mm_b")
    return reads_along_k(b.access.sizes, b.access.strides)


def epilogue_loads(graph: KernelGraph) -> list[Operand]:
    """The operands the consumers read besides the matmul's own (a bias, a residual, a scale)."""
    return [op for op in graph.operands if not op.is_output and op.name not in MATMUL_OPERANDS]


class _Epilogue:
    """The consumers' steps on one output tile: the `TileEpilogue` a fused division runs."""

    def __init__(self, graph: KernelGraph) -> None:
        self.graph = graph
        self.names = emit.Tiles(graph)
        self.loads = epilogue_loads(graph)
        self.root, self.steps = graph.steps[0], graph.steps[1:]

    def tiles(self, tm: int, tn: int) -> list[tuple[str, Any, list[int]]]:
        """Every tile of one output tile's epilogue: its loaded operands and each step's result."""
        loaded = [(op.name, op.dtype, _shape(_kind(op), tm, tn)) for op in self.loads]
        results = [(self.names.of(v), v.dtype, _shape(v.kind, tm, tn)) for v in self.graph.steps]
        return loaded + results

    def buffers(self) -> dict[str, dict[str, Any]]:
        rows, cols, grid = self.graph.rows, self.graph.cols, self.grid
        elements = {"full": rows * cols, "row": rows, "col": cols, "scalar": 1}
        return {
            op.name: {"dtype": dtype_name(op.dtype), "shape": [elements[_kind(op)] * _repeats(op, grid.tm, grid.tn)]}
            for op in self.graph.operands
            if op.name not in MATMUL_OPERANDS
        }

    def place(self, tiles: Tiles, grid: TileGrid) -> None:
        self.grid = grid
        #: the offset each operand tile of this core last loaded: a column band or a scalar is loaded once
        self.held: dict[str, int] = {}
        for name, dtype, shape in self.tiles(grid.tm, grid.tn):
            tiles.add(name, dtype_name(dtype), shape)
        if grid.banded:  # whole rows of every full operand and output, loaded and stored once per band
            for op in self.banded():
                tiles.add(f"{op.name}.rows", dtype_name(op.dtype), [grid.tm, self.graph.cols])

    def banded(self) -> list[Operand]:
        """The operands a banded grid moves in whole rows: the full loads and the outputs."""
        return [op for op in self.loads if _kind(op) == "full"] + [op for op, _ in self.graph.stores]

    def _offset(self, operand: Operand, row_tile: int, col_tile: int) -> int:
        grid = self.grid
        tm, tn = grid.tm, grid.tn
        size = operand.dtype.itemsize * _repeats(operand, tm, tn)
        return {
            "full": grid.index(row_tile, col_tile) * tm * tn * size,
            "row": row_tile * tm * size,
            "col": col_tile * tn * size,
            "scalar": 0,
        }[_kind(operand)]

    def code(self, row_tile: int, col_tile: int, acc: str) -> list[dict[str, Any]]:
        code, grid = [], self.grid
        for op in self.loads:
            rows = grid.banded and _kind(op) == "full"
            offset = self._offset(op, row_tile, 0 if rows else col_tile)
            if self.held.get(op.name) != offset:
                code.append(dma_in(op.name, offset, f"{op.name}.rows" if rows else op.name))
                self.held[op.name] = offset
            if rows:
                start = col_tile * grid.tn
                code.append(compute("slice", [f"{op.name}.rows"], op.name, dim=1, start=start, end=start + grid.tn))
        product = self.names.of(self.root)
        if self.root.fn == "addmm":
            code.append(compute("add", [acc, self.names.of(self.root.inputs[0])], product))
        else:
            code.append(compute("cast", [acc], product))
        for value in self.steps:
            shape = _shape(value.kind, self.grid.tm, self.grid.tn)
            code.append(compute_step(value, self.names.of, row_tile * self.grid.tm, self.grid.tm, shape))
        for operand, value in self.graph.stores:
            if not grid.banded:
                code.append(dma_out(self.names.of(value), operand.name, self._offset(operand, row_tile, col_tile)))
                continue
            code.append(grid.assemble(self.names.of(value), f"{operand.name}.rows", col_tile))
            if grid.last(col_tile):
                code.append(dma_out(f"{operand.name}.rows", operand.name, self._offset(operand, row_tile, 0)))
        return code


def check(graph: KernelGraph) -> None:
    """Refuse what an output tile cannot run: index arithmetic (a tile does not carry its position) and stores that
    are not over the whole product."""
    if any(v.fn == "arange" for v in graph.steps):
        raise UnsupportedError("a consumer computes from its index, which a planned matmul's tile does not carry")
    if any(_kind(op) != "full" or value.kind != "full" for op, value in graph.stores):
        raise UnsupportedError("a consumer stores less than the whole product")


def room(graph: KernelGraph) -> EpilogueRoom:
    """The scratchpad bytes the epilogue adds to a [tm, tn] output tile (None where its DMAs would leave the
    stick), for the tiling pass, and per row of the bands a row ring moves whole; the rounded product replaces the
    matmul's own output tile."""
    itemsize = next(op.dtype.itemsize for op in graph.operands if op.name == "mm_a")
    epilogue = _Epilogue(graph)
    moved = [*epilogue.loads, *(op for op, _ in graph.stores)]

    def extra(tm: int, tn: int) -> int | None:
        if any(math.prod(_shape(_kind(op), tm, tn)) * op.dtype.itemsize * _repeats(op, tm, tn) % STICK for op in moved):
            return None
        tiles = sum(align(math.prod(shape) * dtype.itemsize) for _, dtype, shape in epilogue.tiles(tm, tn))
        return tiles - align(tm * tn * itemsize)

    # the product may be stored too (`fusion.keep_product`, decided after the division): its rows are counted
    product = [] if any(value is epilogue.root for _, value in graph.stores) else [epilogue.root.dtype.itemsize]
    return EpilogueRoom(extra, graph.cols * sum([*(op.dtype.itemsize for op in epilogue.banded()), *product]))


def _cut(dims: Dims, inner: int) -> tuple[Dims, Dims]:
    """Dims (outer to inner, as (size, stride)) cut into outer dims and inner dims of `inner` elements."""
    outer, kept, need = list(dims), [], inner
    while need > 1:
        if not outer:
            raise UnsupportedError(f"a tile of {inner} elements does not fit the view's dims {dims}")
        size, stride = outer.pop()
        if need % size == 0:
            kept.insert(0, (size, stride))
            need //= size
        elif size % need == 0:
            kept.insert(0, (need, stride))
            outer.append((size // need, stride * need))
            need = 1
        else:
            raise UnsupportedError(f"a tile of {inner} elements cuts the view's dims {dims} across a stride")
    return outer, kept


def _rows_and_cols(access: Access, cols: int) -> tuple[Dims, Dims]:
    dims = list(zip(access.sizes, access.strides, strict=True))
    for at in range(len(dims) + 1):
        if math.prod(access.sizes[at:]) == cols:
            return dims[:at], dims[at:]
    raise UnsupportedError(f"a view {list(access.sizes)} has no trailing dims of {cols} columns")


def blocked(
    access: Access,
    cols: int,
    tile: tuple[int, int],
    cols_first: bool = False,
    store: bool = False,
    row_groups: int = 1,
) -> Access:
    """The same elements of an access over [rows, cols] as a blocked view: (row tiles, column tiles, tile rows,
    tile cols), or column tiles first; with `row_groups`, the row tiles' innermost `row_groups` go first (the ring
    scheme's cores, each holding one piece of every block of rows)."""
    rows, columns = _rows_and_cols(access, cols)
    row_tiles, tile_rows = _cut(rows, tile[0])
    row_tiles, groups = _cut(row_tiles, row_groups)
    col_tiles, tile_cols = _cut(columns, tile[1])
    order = col_tiles + row_tiles if cols_first else row_tiles + col_tiles
    dims = groups + order + tile_rows + tile_cols
    kind = "scatter" if store else "gather"
    return Access(kind, tuple(s for s, _ in dims), tuple(st for _, st in dims), access.offset)


def _own_dims(access: Access, rows: int, cols: int) -> Dims:
    """A row or column operand's own dims, without the broadcast (stride-0) dims of the kernel's other axis."""
    dims = list(zip(access.sizes, access.strides, strict=True))
    if math.prod(access.sizes) == (cols if access.kind == "col" else rows):
        return dims
    row_dims, col_dims = _rows_and_cols(access, cols)
    return col_dims if access.kind == "col" else row_dims


def _repeated(access: Access, space: tuple[int, int], tile: int, repeats: int) -> Access:
    """A row or column operand's view with each `tile` elements repeated `repeats` times (a stride-0 dim)."""
    tiles, inner = _cut(_own_dims(access, *space), tile)
    dims = [*tiles, (repeats, 0), *inner]
    return Access("gather", tuple(s for s, _ in dims), tuple(st for _, st in dims), access.offset)


def _part(access: Access, parts: int, part: int) -> Access:
    """Rows part `part` of `parts` of a 2-D access."""
    (rows, cols), (row_stride, col_stride) = access.sizes, access.strides
    step = rows // parts
    return Access(access.kind, (step, cols), (row_stride, col_stride), access.offset + part * step * row_stride)


def _bound(graph: KernelGraph, division: MatmulDivision, parts: int) -> list[Operand]:
    """The kernel's operands as its program reads them: every tile-sized one through its blocked view (the ring
    scheme's left operand blocked by cores, each core's 1/32 of a block of rows)."""
    tile, n = division.tile, graph.cols
    ring, banded = division.scheme == "ring", division.scheme == "row_ring"
    by_name = {op.name: op for op in graph.operands}
    a, b = by_name["mm_a"], by_name["mm_b"]
    k = a.access.sizes[1]
    # the ring scheme's left pieces are blocked core-major, unless K is one chunk: then whole rows, as stored; the
    # sliced row ring reads whole rows of both operands as stored too and cuts their K-chunks on chip
    chunk = k if division.sliced else tile.k
    groups = division.n_parts if ring and chunk != k else 1
    lefts = [blocked(_part(a.access, parts, p), k, (tile.m, chunk), row_groups=groups) for p in range(parts)]
    operands = [Operand(f"a.{p}", a.buffer, a.dtype, left, False) for p, left in enumerate(lefts)]
    if b_along_k(graph):  # blocks of B's transpose, [n, k] as stored: [column tiles, K-chunks, tn, tk]
        right = blocked(as_stored(b.access), k, (tile.n, chunk))
    else:
        right = blocked(b.access, n, (tile.k, tile.n), cols_first=True)
    operands.append(Operand("b", b.buffer, b.dtype, right, False))
    for op in graph.operands:
        if op.name in MATMUL_OPERANDS:
            continue
        access, repeats = op.access, _repeats(op, tile.m, tile.n)
        if _kind(op) == "full" and not (banded and access.kind == "full"):  # the row ring's rows are as stored
            access = blocked(access, n, (tile.m, n if banded else tile.n), cols_first=ring, store=op.is_output)
        elif repeats > 1:
            access = _repeated(access, (graph.rows, n), tile.m if _kind(op) == "row" else tile.n, repeats)
        operands.append(Operand(op.name, op.buffer, op.dtype, access, op.is_output))
    return operands


def build(
    name: str, graph: KernelGraph, division: MatmulDivision, split: TensorSplit | None
) -> tuple[dict[str, Any], dict[str, Any], KernelGraph]:
    """The fused kernel's program, its decisions for the dump, and its graph with the operands bound as the
    program reads them."""
    check(graph)
    a = next(op for op in graph.operands if op.name == "mm_a")
    (m, k), n = a.access.sizes, graph.cols
    epilogue = _Epilogue(graph)
    plan = matmul_graph(m, k, n, dtype_name(a.dtype), b_along_k(graph))
    along_k, layout_plan = layout_decisions(plan)
    emitted = emit_matmul(plan, plan.ops[0], division, split, epilogue=epilogue, b_along_k=along_k)
    program = {**emitted.program, "name": name}
    bound = KernelGraph(graph.rows, graph.cols, _bound(graph, division, split.parts if split else 1))
    bound.steps, bound.stores, bound.origins = graph.steps, graph.stores, graph.origins
    decisions = kernel_decisions(
        name,
        bound,
        program["cores"],
        division=asdict(division),
        split=asdict(split) if split else None,
        layout=layout_plan,
    )
    return program, decisions, bound
