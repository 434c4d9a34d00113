"""Kernels whose smallest chunk of whole rows overflows a core: each row walked in column chunks, one pass per
reduction level.

Reductions are grouped by level: one reading another's result is a level higher (layer_norm's variance reads
its mean). Each level is one pass over the row's column chunks. A pass loads the chunk of each input its
reductions need and recomputes their elementwise steps. It reduces the chunk and combines the partial result into
the row's accumulator (add, maximum, minimum, mul; argmax/argmin also keep the best value and take a chunk's index
where it is strictly better). A final pass recomputes and stores the full-row results. Row
values (accumulators, and steps on them such as 1/sum) stay resident while the rows are walked. Inputs are read
once per pass, as a looped GPU reduction reads them.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import torch

from ring_inductor import config
from ring_inductor.emit import (
    SCRATCHPAD,
    STICK,
    RowOverflow,
    Tiles,
    align,
    ceil_div,
    compute_step,
    document,
    dtype_name,
    kernel_decisions,
    row_division,
)
from ring_inductor.errors import UnsupportedError
from ring_inductor.graph import KernelGraph, Operand, Value
from ring_inductor.placement import Lifetime, lifetimes, needed, place
from ring_inductor.plan.scratchpad import Placement

#: How a chunk's partial result joins the row's accumulator, per reduction fn (mean: the sum, divided at the end).
COMBINE = {"sum": "add", "mean": "add", "amax": "maximum", "amin": "minimum", "prod": "mul"}
#: argmax/argmin keep the row's best value beside its index: per chunk, the value reduction and the comparison that
#: takes a chunk's index (strictly better, so the first occurrence wins; a NaN beats any number, as on CPU).
ARG = {"argmax": ("amax", "gt"), "argmin": ("amin", "lt")}
#: The row tiles an arg reduction adds to its index accumulator and partial, with their dtypes.
ARG_TILES = {".val": torch.float32, ".pval": torch.float32, ".take": torch.bool, ".nan": torch.bool,
             ".other": torch.bool}  # fmt: skip


@dataclass(frozen=True)
class Loop:
    """The work division of a looped kernel, dumped with its program for review."""

    rows: int
    cols: int
    cores: int
    rows_per_core: int
    row_chunk: int
    col_chunk: int
    passes: int
    scratchpad_bytes: int
    solver: str


@dataclass
class Pass:
    """One walk over the column chunks: what it loads, the elementwise steps it recomputes, the reductions it
    accumulates (`level` 1, 2, ...), or, in the final pass (`level` 0), the full results it stores."""

    level: int
    loads: list[tuple[Operand, Value]] = field(default_factory=list)  # each input and a value that reads it
    steps: list[Value] = field(default_factory=list)
    reductions: list[Value] = field(default_factory=list)
    stores: list[tuple[Operand, Value]] = field(default_factory=list)


def _levels(graph: KernelGraph) -> dict[int, int]:
    """Per value, the highest reduction level it depends on (a reduction's own level for a reduction)."""
    level: dict[int, int] = {}
    for value in graph.steps:
        below = max((level.get(id(v), 0) for v in value.inputs), default=0)
        if value.kind == "col":
            raise UnsupportedError("a column-indexed step (an iota over the columns) in a kernel looped over columns")
        if _is_reduction(value):
            if value.fn not in COMBINE and value.fn not in ARG:
                raise UnsupportedError(f"reduction {value.fn} over column chunks (no partial result to combine)")
            below += 1
        level[id(value)] = below
    return level


def _is_reduction(value: Value) -> bool:
    """A row value computed from a full one: nothing but a reduction over the columns makes one."""
    return value.kind == "row" and any(v.kind == "full" for v in value.inputs)


def _cone(graph: KernelGraph, targets: Sequence[Value]) -> tuple[list[tuple[Operand, Value]], list[Value]]:
    """The full and column inputs (each with one of its load values) and the elementwise steps that compute
    `targets`, in program order."""
    seen: set[int] = set()
    stack = list(targets)
    while stack:
        value = stack.pop()
        if id(value) in seen or value.kind not in ("full", "col"):
            continue
        seen.add(id(value))
        stack.extend(value.inputs)
    readers = [v for step in graph.steps for v in step.inputs] + [v for _, v in graph.stores]
    loaded = {id(v.operand): v for v in readers if v.operand is not None and id(v) in seen}
    loads = [(op, loaded[id(op)]) for op in graph.operands if not op.is_output and id(op) in loaded]
    return loads, [v for v in graph.steps if id(v) in seen and not _is_reduction(v)]


def passes(graph: KernelGraph) -> tuple[list[Pass], dict[int, int]]:
    """The passes over the columns (reduction levels in order, then the storing pass) and each value's level."""
    level = _levels(graph)
    reductions = [v for v in graph.steps if _is_reduction(v)]
    out = []
    for k in range(1, max((level[id(r)] for r in reductions), default=0) + 1):
        chosen = [r for r in reductions if level[id(r)] == k]
        loads, steps = _cone(graph, [v for r in chosen for v in r.inputs])
        out.append(Pass(k, loads, steps, chosen))
    stored = [(op, v) for op, v in graph.stores if v.kind == "full"]
    if stored:
        loads, steps = _cone(graph, [v for _, v in stored])
        out.append(Pass(0, loads, steps, [], stored))
    return out, level


class LoopTiles:
    """Tile names of a looped kernel: a full or column tile has one per pass, a row tile one per row-chunk size."""

    def __init__(self, tiles: Tiles) -> None:
        self.tiles = tiles

    def name(self, value: Value, level: int, tag: str) -> str:
        tile = self.tiles.of(value)
        kind = self.tiles.kinds[tile][0]
        if kind in ("full", "col"):
            return f"{tile}@{level}{tag}"
        return tile + tag if kind == "row" else tile

    def namer(self, level: int, tag: str) -> Callable[[Value], str]:
        return lambda value: self.name(value, level, tag)


def _pass_tiles(step: Pass, tiles: Tiles, col_chunk: int, rows: int) -> list[Lifetime]:
    """A pass's full and column tiles with their bytes and lifetimes over one column chunk's steps."""
    names = LoopTiles(tiles)
    sequence: list[tuple[list[str], list[str]]] = []
    nbytes: dict[str, int] = {}

    def add(value: Value) -> str:
        tile = tiles.of(value)
        kind, dtype = tiles.kinds[tile]
        name = names.name(value, step.level, "")
        if kind in ("full", "col"):
            nbytes[name] = col_chunk * dtype.itemsize * (rows if kind == "full" else 1)
        return name

    for _, value in step.loads:
        sequence.append(([], [add(value)]))
    for value in step.steps:
        sequence.append(([add(v) for v in value.inputs], [add(value)]))
    for value in step.reductions:
        sequence.append(([add(v) for v in value.inputs], []))
    for _, value in step.stores:
        sequence.append(([add(value)], []))
    return lifetimes(sequence, nbytes)


def _col_chunks(graph: KernelGraph, tiles: Tiles) -> list[int]:
    """Column chunk sizes whose operand chunks are whole sticks, largest first."""
    itemsizes = {op.dtype.itemsize for op in graph.operands if tiles.kinds[op.name][0] in ("full", "col")}
    if graph.rows > 1 and any(graph.cols * size % STICK for size in itemsizes):
        raise UnsupportedError(f"rows of {graph.cols} elements are not whole sticks, so column chunks cannot be")
    grain = max((STICK // math.gcd(size, STICK) for size in itemsizes), default=1)
    return [c for c in range(graph.cols, 0, -1) if graph.cols % c == 0 and c % grain == 0]


def plan_loop(graph: KernelGraph, tiles: Tiles) -> tuple[Loop, list[Pass], dict[int, int], list[Placement]]:
    """The rows per core and chunk, the largest column chunk every pass's tiles fit, and their placements."""
    solver = config.scratchpad_solver
    steps, level = passes(graph)
    g, per_core = row_division(graph, tiles)
    rows = min(g, graph.rows)
    fixed = _whole_bytes(graph, tiles) + _row_bytes(graph, tiles, rows)
    room = SCRATCHPAD - fixed
    for col_chunk in _col_chunks(graph, tiles):
        placements = []
        for step in steps:
            chunk_tiles = _pass_tiles(step, tiles, col_chunk, rows)
            if needed(chunk_tiles, 1, solver) > room:
                break
            placement = place(chunk_tiles, 1, room, solver)
            if placement.spilled:
                break
            placements.append(placement)
        else:
            used = fixed + max((p.peak for p in placements), default=0)
            loop = Loop(graph.rows, graph.cols, ceil_div(graph.rows, per_core), per_core, rows, col_chunk,
                        len(steps), used, solver)  # fmt: skip
            return loop, steps, level, placements
    raise UnsupportedError(f"no column chunk of {graph.cols} columns fits a core's scratchpad in every pass")


def _whole(graph: KernelGraph, tiles: Tiles) -> list[str]:
    return sorted(name for name, (kind, _) in tiles.kinds.items() if kind == "scalar")


def _means(graph: KernelGraph) -> list[Value]:
    """The mean reductions: each is summed over the chunks, then divided by a count tile of its own."""
    return [v for v in graph.steps if _is_reduction(v) and v.fn == "mean"]


def _whole_bytes(graph: KernelGraph, tiles: Tiles) -> int:
    return sum(align(tiles.kinds[n][1].itemsize) for n in _whole(graph, tiles)) + len(_means(graph)) * STICK


def _row_tiles(graph: KernelGraph, tiles: Tiles) -> dict[str, torch.dtype]:
    """Every row tile with its dtype: the kernel's row values, each reduction's partial, an arg reduction's extras."""
    rows = {name: dtype for name, (kind, dtype) in sorted(tiles.kinds.items()) if kind == "row"}
    for value in (v for v in graph.steps if _is_reduction(v)):
        rows[f"{tiles.of(value)}.part"] = value.dtype
        if value.fn in ARG:
            rows.update({f"{tiles.of(value)}{suffix}": dtype for suffix, dtype in ARG_TILES.items()})
    return rows


def _row_bytes(graph: KernelGraph, tiles: Tiles, rows: int) -> int:
    return sum(align(dtype.itemsize * rows) for dtype in _row_tiles(graph, tiles).values())


def fits_looped(graph: KernelGraph) -> bool:
    """Whether `graph` can be walked in column chunks with every pass fitting a core."""
    try:
        plan_loop(graph, Tiles(graph))
    except UnsupportedError:
        return False
    return True


def build_looped(name: str, graph: KernelGraph, overflow: RowOverflow) -> tuple[dict[str, Any], dict[str, Any]]:
    """The looped program for `graph` (whose whole rows `overflow` refused) and its decisions, for the dump."""
    tiles = Tiles(graph)
    try:
        return _build(name, graph, tiles)
    except UnsupportedError as error:
        raise UnsupportedError(f"{overflow}; walking its rows in column chunks: {error}") from None


def _build(name: str, graph: KernelGraph, tiles: Tiles) -> tuple[dict[str, Any], dict[str, Any]]:
    loop, steps, level, placements = plan_loop(graph, tiles)
    names = LoopTiles(tiles)
    means = _means(graph)
    cores = []
    for core, start in enumerate(range(0, graph.rows, loop.rows_per_core)):
        end = min(graph.rows, start + loop.rows_per_core)
        sizes = sorted({min(loop.row_chunk, end - row) for row in range(start, end, loop.row_chunk)}, reverse=True)
        suffix = {size: "" if i == 0 else f"_{size}" for i, size in enumerate(sizes)}
        core_tiles = _declare(graph, tiles, loop, steps, placements, sizes, suffix)
        code: list[dict[str, Any]] = [
            {"op": "dma_in", "buffer": op.name, "offset": 0, "tile": op.name}
            for op in graph.operands
            if not op.is_output and tiles.kinds[op.name][0] == "scalar"
        ]
        code += [compute_step(v, names.namer(0, ""), 0, 1, [1]) for v in graph.steps if v.kind == "scalar"]
        code += [
            {
                "op": "compute",
                "fn": "full",
                "inputs": [],
                "output": f"count{n}",
                "attrs": {"fill_value": float(graph.cols), "size": [1], "dtype": "float32"},
            }
            for n in range(len(means))
        ]
        for row in range(start, end, loop.row_chunk):
            size = min(loop.row_chunk, end - row)
            code += _row_chunk(graph, tiles, loop, steps, level, row, size, suffix[size], means)
        cores.append({"core": core, "tiles": core_tiles, "instructions": code})
    passes = [_pass_decisions(s, p, tiles) for s, p in zip(steps, placements, strict=True)]
    return document(name, graph, tiles, cores), kernel_decisions(name, graph, cores, loop=asdict(loop), passes=passes)


def _pass_decisions(step: Pass, placement: Placement, tiles: Tiles) -> dict[str, Any]:
    return {
        "level": step.level,
        "loads": [op.name for op, _ in step.loads],
        "steps": len(step.steps),
        "reductions": [tiles.of(r) for r in step.reductions],
        "stores": [op.name for op, _ in step.stores],
        "peak": placement.peak,
        "load": placement.load,
        "solver": placement.solver,
    }


def _declare(
    graph: KernelGraph,
    tiles: Tiles,
    loop: Loop,
    steps: list[Pass],
    placements: list[Placement],
    sizes: list[int],
    suffix: dict[int, str],
) -> dict[str, Any]:
    """Every tile of one core: whole tiles, then row tiles per row-chunk size, then each pass's column-chunk tiles
    at the offsets its placement chose (with one-row views of the loaded and stored ones for their DMAs)."""
    declared: dict[str, Any] = {}
    offset = 0
    for name in _whole(graph, tiles):
        declared[name] = {"offset": offset, "dtype": dtype_name(tiles.kinds[name][1]), "shape": [1]}
        offset += align(tiles.kinds[name][1].itemsize)
    for n in range(len(_means(graph))):
        declared[f"count{n}"] = {"offset": offset, "dtype": "float32", "shape": [1]}
        offset += STICK
    for name, dtype in _row_tiles(graph, tiles).items():
        for size in sizes:
            declared[name + suffix[size]] = {"offset": offset, "dtype": dtype_name(dtype), "shape": [size, 1]}
        offset += align(dtype.itemsize * sizes[0])
    names = LoopTiles(tiles)
    for step, placement in zip(steps, placements, strict=True):
        dma = {names.name(v, step.level, "") for _, v in step.loads}
        dma |= {names.name(v, step.level, "") for _, v in step.stores}
        for value in _pass_values(step):
            tile = names.name(value, step.level, "")
            kind, dtype = tiles.kinds[tiles.of(value)]
            base = offset + placement.offsets[tile]
            for size in sizes:
                shape = [size, loop.col_chunk] if kind == "full" else [loop.col_chunk]
                declared[tile + suffix[size]] = {"offset": base, "dtype": dtype_name(dtype), "shape": shape}
                if tile in dma and kind == "full" and size > 1:
                    for r in range(size):
                        declared[f"{tile}{suffix[size]}.r{r}"] = {
                            "offset": base + r * loop.col_chunk * dtype.itemsize,
                            "dtype": dtype_name(dtype),
                            "shape": [1, loop.col_chunk],
                        }
    return declared


def _pass_values(step: Pass) -> list[Value]:
    """The distinct full and column values a pass holds tiles for."""
    values: dict[int, Value] = {}
    for value in [*step.steps, *(v for s in (*step.steps, *step.reductions) for v in s.inputs),
                  *(v for _, v in step.stores)]:  # fmt: skip
        if value.kind in ("full", "col"):
            values.setdefault(id(value), value)
    return list(values.values())


def _row_chunk(
    graph: KernelGraph,
    tiles: Tiles,
    loop: Loop,
    steps: list[Pass],
    level: dict[int, int],
    row: int,
    size: int,
    tag: str,
    means: list[Value],
) -> list[dict[str, Any]]:
    """The instructions for rows [row, row + size): row inputs, then each pass over the column chunks, then the
    row results."""
    names = LoopTiles(tiles)
    code: list[dict[str, Any]] = [
        {"op": "dma_in", "buffer": op.name, "offset": row * tiles.row_bytes(op.name), "tile": op.name + tag}
        for op in graph.operands
        if not op.is_output and tiles.kinds[op.name][0] == "row"
    ]
    row_steps = [v for v in graph.steps if v.kind == "row" and not _is_reduction(v)]
    code += [compute_step(v, names.namer(0, tag), row, size, [size, 1]) for v in row_steps if level[id(v)] == 0]
    for step in steps:
        name_of = names.namer(step.level, tag)
        for col in range(0, graph.cols, loop.col_chunk):
            for op, value in step.loads:
                code += _dma(op, name_of(value), row, size, col, loop, graph.cols, tiles, "dma_in")
            code += [compute_step(v, name_of, row, size, [size, loop.col_chunk]) for v in step.steps]
            for reduction in step.reductions:
                code += _accumulate(reduction, name_of, tiles, row, size, tag, col)
            for op, value in step.stores:
                code += _dma(op, name_of(value), row, size, col, loop, graph.cols, tiles, "dma_out")
        for reduction in step.reductions:
            if reduction.fn == "mean":
                acc = name_of(reduction)
                code.append({"op": "compute", "fn": "div", "inputs": [acc, f"count{means.index(reduction)}"],
                             "output": acc, "attrs": {}})  # fmt: skip
        if step.level:  # the row steps this level's results complete
            code += [compute_step(v, name_of, row, size, [size, 1]) for v in row_steps if level[id(v)] == step.level]
    code += [
        {
            "op": "dma_out",
            "tile": names.name(value, 0, tag),
            "buffer": op.name,
            "offset": row * tiles.row_bytes(op.name),
        }
        for op, value in graph.stores
        if value.kind == "row"
    ]
    return code


def _accumulate(
    reduction: Value, name_of: Callable[[Value], str], tiles: Tiles, row: int, size: int, tag: str, col: int
) -> list[dict[str, Any]]:
    """Reduce the column chunk from `col`: into the accumulator for the first chunk, else into a partial tile
    combined in."""
    step = compute_step(reduction, name_of, row, size, [size, 1])
    step["fn"] = "sum" if reduction.fn == "mean" else reduction.fn
    if reduction.fn in ARG:
        return _accumulate_arg(reduction, step, tiles, tag, col)
    if col == 0:
        return [step]
    acc = step["output"]
    step["output"] = f"{tiles.of(reduction)}.part{tag}"
    return [step, _op(COMBINE[reduction.fn], [acc, step["output"]], acc)]


def _accumulate_arg(reduction: Value, step: dict[str, Any], tiles: Tiles, tag: str, col: int) -> list[dict]:
    """argmax/argmin of a chunk: its index and best value; a later chunk's index (offset by `col`) replaces the
    row's where its value is strictly better or NaN where the row's is not."""
    value_fn, better = ARG[reduction.fn]
    tile = lambda suffix: f"{tiles.of(reduction)}{suffix}{tag}"  # noqa: E731
    chunk = step["inputs"][0]
    best = {"op": "compute", "fn": value_fn, "inputs": [chunk], "output": tile(".val"),
            "attrs": {"dim": [-1], "keepdim": True}}  # fmt: skip
    if col == 0:
        return [step, best]
    index, step["output"], best["output"] = step["output"], tile(".part"), tile(".pval")
    return [
        step,
        best,
        _op(better, [tile(".pval"), tile(".val")], tile(".take")),
        _op("isnan", [tile(".pval")], tile(".nan")),
        _op("isnan", [tile(".val")], tile(".other")),
        _op("logical_not", [tile(".other")], tile(".other")),
        _op("logical_and", [tile(".nan"), tile(".other")], tile(".nan")),
        _op("logical_or", [tile(".take"), tile(".nan")], tile(".take")),
        _op("add", [tile(".part")], tile(".part"), other=col),
        _op("where", [tile(".take"), tile(".part"), index], index),
        _op("where", [tile(".take"), tile(".pval"), tile(".val")], tile(".val")),
    ]


def _op(fn: str, inputs: list[str], output: str, **attrs: Any) -> dict[str, Any]:
    return {"op": "compute", "fn": fn, "inputs": inputs, "output": output, "attrs": attrs}


def _dma(
    op: Operand, tile: str, row: int, size: int, col: int, loop: Loop, cols: int, tiles: Tiles, direction: str
) -> list[dict[str, Any]]:
    """The DMAs of one operand's column chunk: one per row of a full tile (rows are apart in memory), one for a
    column tile."""
    itemsize = op.dtype.itemsize
    if tiles.kinds[op.name][0] == "col":
        spans = [(col * itemsize, tile)]
    elif size == 1:
        spans = [((row * cols + col) * itemsize, tile)]
    else:
        spans = [(((row + r) * cols + col) * itemsize, f"{tile}.r{r}") for r in range(size)]
    if direction == "dma_in":
        return [{"op": "dma_in", "buffer": op.name, "offset": offset, "tile": t} for offset, t in spans]
    return [{"op": "dma_out", "tile": t, "buffer": op.name, "offset": offset} for offset, t in spans]
