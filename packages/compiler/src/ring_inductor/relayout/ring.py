"""The ring scheme: a large transpose cut into bands of source rows, exchanged both ways round the ring.

Each core loads a band of source rows, permutes it on the scratchpad and keeps its own piece (source rows
strided apart, a slice of a wider matrix, are loaded one DMA each); the pieces of the 16
cores ahead go one way round the ring and those of the 15 behind the other, as bundles the cores pass on, each
keeping the piece nearest to it. Every core then permutes its 32 pieces into whole output rows and stores them,
one contiguous band per DMA.
"""

from __future__ import annotations

from typing import Any

from ring_inductor.emit import CORES, SCRATCHPAD, STICK, align, dtype_name
from ring_inductor.plan.emit import Tiles, compute, dma_in, dma_out, recv, send

from .views import NoFit, Relayout, grid_offsets

#: Matrices up to this size are not tried over the ring: one core's transpose is faster (measured with
#: `benchmarks/relayout.py`: a 512x512 fp16 transpose takes 10,656 cycles on one core, 10,923 over the ring).
RING_MIN_BYTES = 512 * 1024


def _on_sticks(what: str, elements: int, itemsize: int) -> None:
    if elements * itemsize % STICK:
        raise NoFit(f"{what} ({elements * itemsize} bytes) is not whole sticks")


def _matrices(layout: Relayout) -> tuple[list[int], int, int, int]:
    """A batched transpose's matrix starts, source rows, row length and row stride (the view is [..., c, r])."""
    if len(layout.dims) < 2 or layout.dims[-2][1] != 1:
        raise NoFit("the view is not a transpose of its last two dims")
    *batch, (c, _), (r, row_stride) = layout.dims
    for _, stride in batch:
        _on_sticks("a matrix stride", stride, layout.itemsize)
    _on_sticks("a source row stride", row_stride, layout.itemsize)
    starts = grid_offsets([size for size, _ in batch], [stride for _, stride in batch])
    if len(starts) > 1:
        _on_sticks("a transposed matrix", r * c, layout.itemsize)
    return starts, r, c, row_stride


def _ring_band(r: int, c: int, size: int) -> int:
    """The most source rows per core and wave whose four band tiles fit and whose pieces are whole sticks."""
    if c % CORES or r % CORES:
        raise NoFit(f"a {r}x{c} matrix does not cut into {CORES} bands each way")
    for rows in sorted((d for d in range(1, r // CORES + 1) if r // CORES % d == 0), reverse=True):
        pieces_ok = (c // CORES) * rows * size % STICK == 0 and rows * c * size % STICK == 0
        single = rows * CORES == r
        rows_ok = single or (rows * CORES * size % STICK == 0 and r * size % STICK == 0)
        if 4 * align(rows * c * size) <= SCRATCHPAD and pieces_ok and rows_ok:
            return rows
    raise NoFit(f"no band of a {r}x{c} matrix fits a core in whole sticks")


def ring_program(layout: Relayout) -> list[dict[str, Any]]:
    """Every core takes a band of each matrix's source rows and ends with a band of its output rows. Each permuted
    band's pieces travel round the ring as bundles, ordered by the cores they meet: each core keeps the piece meant
    for it and forwards the rest, so a link carries each piece once per hop it still has to go."""
    starts, r, c, row_stride = _matrices(layout)
    size, dtype = layout.itemsize, dtype_name(layout.dtype)
    if row_stride != c:  # rows of a wider matrix (a slice of a fused product): one DMA per source row
        _on_sticks("a source row", c, size)
    if r * c * size <= RING_MIN_BYTES:
        raise NoFit(f"a matrix of {r * c * size} bytes is transposed faster by one core")
    rows = _ring_band(r, c, size)
    cc = c // CORES
    band = align(rows * c * size)
    piece = cc * rows * size
    programs = []
    for core in range(CORES):
        tiles = Tiles()
        x = tiles.add("x", dtype, [rows, c], 0)
        tiles.add("z", dtype, [CORES, cc, rows], 0)  # reuses x's bytes once x is permuted
        tiles.add("xt", dtype, [c, rows], band)
        result = tiles.add("yt", dtype, [cc, CORES * rows], band)  # reuses xt's bytes once the bundle is made
        lines = [tiles.add(f"yt{i}", dtype, [CORES * rows], band + i * CORES * rows * size) for i in range(cc)]
        x_rows = [tiles.add(f"x{i}", dtype, [c], i * c * size) for i in range(rows)] if row_stride != c else []
        code: list[dict[str, Any]] = []
        for m, start in enumerate(starts):
            for first in range(0, r, CORES * rows):
                source = start + (first + core * rows) * row_stride
                if x_rows:
                    code += [dma_in("src", (source + i * row_stride) * size, row) for i, row in enumerate(x_rows)]
                else:
                    code.append(dma_in("src", source * size, x))
                code.append(compute("permute", [x], "xt", dims=[1, 0]))
                code += _exchange(tiles, core, dtype, cc, rows, band, piece)
                code.append(compute("permute", ["z"], result, dims=[1, 0, 2]))
                if CORES * rows == r:  # the band of output rows is whole rows: one DMA
                    code.append(dma_out(result, "out", (m * r * c + core * cc * r) * size))
                else:
                    code += [dma_out(line, "out", (m * r * c + (core * cc + i) * r + first) * size)
                             for i, line in enumerate(lines)]  # fmt: skip
        programs.append({"core": core, "tiles": tiles.specs, "instructions": code})
    return programs


def _exchange(tiles: Tiles, core: int, dtype: str, cc: int, rows: int, band: int, piece: int) -> list[dict[str, Any]]:
    """From `xt` (this core's permuted band, pieces in core order) to `z` (every core's piece for this core, in
    core order): the own piece copied, the pieces of the 16 cores ahead sent one way round the ring and those of
    the 15 behind the other way, so both directions of every link carry a share."""

    def part(name: str, base: int, first: int, count: int) -> str:
        return tiles.add(name, dtype, [count * cc, rows], base + first * piece)

    slots = [part(f"z{k}", 0, k, 1) for k in range(CORES)]
    code = [compute("copy", [part("xt_own", band, core, 1)], slots[core])]
    half = align(CORES // 2 * piece)
    chains = [(1, CORES // 2, (2 * band, 2 * band + half)), (-1, CORES - 1 - CORES // 2, (3 * band, 3 * band + half))]
    steps: list[list[dict[str, Any]]] = [[] for _ in range(CORES // 2 + 1)]
    for direction, count, buffers in chains:
        # the bundle lists its pieces in core order; the nearest core is first going up the ring, last going down
        hops = range(1, count + 1) if direction == 1 else range(count, 0, -1)
        at = 0
        for run in _runs_of([(core + direction * h) % CORES for h in hops]):
            source = part(f"xt_{run[0]}", band, run[0], len(run))
            code.append(compute("copy", [source], part(f"b{direction}_{at}", buffers[0], at, len(run))))
            at += len(run)
        for step in range(1, count + 1):
            sent = count + 1 - step
            first = 0 if step == 1 or direction == -1 else 1  # going up, the piece kept last hop leads the bundle
            bundle = part(f"send{direction}_{step}", buffers[(step - 1) % 2], first, sent)
            arrived = part(f"recv{direction}_{step}", buffers[step % 2], 0, sent)
            kept = part(f"kept{direction}_{step}", buffers[step % 2], 0 if direction == 1 else sent - 1, 1)
            steps[step] += [
                send((core + direction) % CORES, bundle),
                recv((core - direction) % CORES, arrived),
                compute("copy", [kept], slots[(core - direction * step) % CORES]),
            ]
    return code + [instruction for step in steps for instruction in step]


def _runs_of(cores: list[int]) -> list[list[int]]:
    """`cores` cut where the next is not the one after: each run is one contiguous range of pieces."""
    runs: list[list[int]] = []
    for c in cores:
        if runs and c == runs[-1][-1] + 1:
            runs[-1].append(c)
        else:
            runs.append([c])
    return runs
