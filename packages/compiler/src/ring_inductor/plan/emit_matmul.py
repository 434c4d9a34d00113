"""Emission of one [M, K] x [K, N] matmul by its work division: a ring scheme or a grid of output blocks.

Operands are stored blocked so that every DMA reads one contiguous chunk: the left operand as [core or row tile,
K-chunk, rows, k], the right one as [column block, K-chunk, k, columns], or, when the layout pass keeps it along
K (its transpose stored row-major: a linear layer's weight), as [column block, K-chunk, columns, k] multiplied by
`linear`: blocks of whole rows, no restickify. The row ring stores the output in rows as the host holds it; the
other divisions store it in tiles. The packers and `views` give those layouts as strided views of the
host-order tensors, for the caller to make contiguous as it can. A left operand
split by the mandatory pass is one buffer per part. Accumulation is in fp32 tiles (`mm`, then `addmm` per
K-chunk; along K, `linear` with the accumulator as its bias), cast once to fp16.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol

import torch

from .divide import MatmulDivision, TensorSplit
from .emit import Emitted, Tiles, compute, dma_in, dma_out, document, recv, send
from .graph import Graph, Op


@dataclass(frozen=True)
class TileGrid:
    """How a division stores its output: [tm, tn] tiles, one contiguous tile each, in row-tile-major order (grid)
    or column-tile-major (column ring: each core's band of columns); `banded`, the tiles of a row tile are copied
    into that whole band of rows and it is stored once, after its last tile (row ring: the output's own rows)."""

    tm: int
    tn: int
    row_tiles: int
    col_tiles: int
    cols_first: bool
    #: output tiles the division's footprint leaves for rounding and storing (two: one stores while one fills)
    out_slots: int
    banded: bool = False

    def index(self, row_tile: int, col_tile: int) -> int:
        """The tile's place among the output's tiles in device memory."""
        if self.cols_first:
            return col_tile * self.row_tiles + row_tile
        return row_tile * self.col_tiles + col_tile

    def assemble(self, tile: str, band: str, col_tile: int) -> dict[str, Any]:
        """Copy a finished tile into its columns of the row band."""
        start = col_tile * self.tn
        return compute("slice_scatter", [band, tile], band, dim=1, start=start, end=start + self.tn)

    def last(self, col_tile: int) -> bool:
        """Whether this tile completes its row band (banded: the band is stored after it)."""
        return col_tile == self.col_tiles - 1


class TileEpilogue(Protocol):
    """What a division does with each output tile's fp32 accumulator: round it and store it, or run fused
    consumers on it first, with operands and outputs of their own."""

    def buffers(self) -> dict[str, dict[str, Any]]:
        """The program buffers the epilogue reads and writes besides the matmul's operands."""
        ...

    def place(self, tiles: Tiles, grid: TileGrid) -> None:
        """Add the epilogue's tiles (the rounded product among them) to a core's tile table."""
        ...

    def code(self, row_tile: int, col_tile: int, acc: str) -> list[dict[str, Any]]:
        """The instructions that finish output tile (`row_tile`, `col_tile`) from the accumulator `acc`."""
        ...


class Unary:
    """The product rounded once, the unary `fns` applied in place, and the result stored as the matmul's output,
    the division's output tiles taken in turn."""

    def __init__(self, fns: Sequence[str], out: str, dtype: str, itemsize: int) -> None:
        self.fns, self.out, self.dtype, self.itemsize = fns, out, dtype, itemsize
        self.turn = 0

    def buffers(self) -> dict[str, dict[str, Any]]:
        return {}

    def place(self, tiles: Tiles, grid: TileGrid) -> None:
        self.grid = grid
        for slot in range(grid.out_slots):
            tiles.add(f"o{slot}", self.dtype, [grid.tm, grid.tn])
        if grid.banded:
            tiles.add("rows", self.dtype, [grid.tm, grid.tn * grid.col_tiles])

    def code(self, row_tile: int, col_tile: int, acc: str) -> list[dict[str, Any]]:
        out, grid = f"o{self.turn % self.grid.out_slots}", self.grid
        self.turn += 1
        code = [compute("cast", [acc], out), *(compute(fn, [out], out) for fn in self.fns)]
        if not grid.banded:
            return [*code, dma_out(out, self.out, grid.index(row_tile, col_tile) * grid.tm * grid.tn * self.itemsize)]
        code.append(grid.assemble(out, "rows", col_tile))
        if grid.last(col_tile):
            code.append(dma_out("rows", self.out, grid.index(row_tile, 0) * grid.tm * grid.tn * self.itemsize))
        return code


class _Job(NamedTuple):
    """What either scheme's emitter needs: the shapes, the division, the left operand's parts, the buffers."""

    m: int
    n: int
    k_total: int
    division: MatmulDivision
    parts: int
    dtype: str
    cores: int
    a: str
    b: str
    epilogue: TileEpilogue
    b_along_k: bool


def emit_matmul(
    graph: Graph,
    op: Op,
    division: MatmulDivision,
    split: TensorSplit | None,
    cores: int = 32,
    epilogue: Sequence[str] | TileEpilogue = (),
    b_along_k: bool = False,
) -> Emitted:
    """The program for `op` as `division` says, with the left operand in `split.parts` buffers; either scheme
    applies the unary `epilogue` fns (or a whole `TileEpilogue`) to each output tile (a fused consumer). With
    `b_along_k` (the layout pass's stick for the right operand), B's tiles are [columns, k] and its packer takes
    B's transpose."""
    left, right, out = (graph.tensors[name] for name in (*op.inputs, op.output))
    (m, k_total), n = left.shape, right.shape[1]
    parts = split.parts if split is not None else 1
    dtype = left.dtype
    names = (left.name, right.name, out.name)
    unary = isinstance(epilogue, Sequence)
    if unary:
        epilogue = Unary(tuple(epilogue), out.name, out.dtype, torch.empty(0, dtype=getattr(torch, out.dtype)).itemsize)
    job = _Job(m, n, k_total, division, parts, dtype, cores, *names[:2], epilogue, b_along_k)
    programs, a_pack, b_pack, c_read = {"ring": _ring, "row_ring": _row_ring, "grid": _grid}[division.scheme](job)
    part_rows = m // parts
    buffers: dict[str, Any] = {
        f"{left.name}.{p}": {"dtype": dtype, "shape": [part_rows * k_total]} for p in range(parts)
    }
    buffers[right.name] = {"dtype": dtype, "shape": [k_total * n]}
    if unary:
        buffers[out.name] = {"dtype": out.dtype, "shape": [m * n]}
    else:
        buffers.update(epilogue.buffers())
    emitted = Emitted(document(f"{op.name}_{division.scheme}", buffers, programs))
    emitted.layouts[left.name] = [
        (f"{left.name}.{p}", lambda t, p=p: a_pack(t[p * part_rows : (p + 1) * part_rows])) for p in range(parts)
    ]
    emitted.layouts[right.name] = [(right.name, (lambda t: b_pack(t.transpose(0, 1))) if b_along_k else b_pack)]
    emitted.views[out.name] = lambda buffers: c_read(buffers[out.name])
    emitted.readers[out.name] = lambda buffers: c_read(buffers[out.name]).reshape(m, n)
    return emitted


def _accumulate(job: _Job, chunk: int, left: str, right: str, acc: str) -> dict[str, Any]:
    """acc = left @ right (the first K-chunk) or acc += left @ right, with right along N (`mm`, `addmm`) or along
    K (`linear`, the accumulator as its bias)."""
    if job.b_along_k:
        return compute("linear", [left, right] if chunk == 0 else [left, right, acc], acc)
    return compute("mm", [left, right], acc) if chunk == 0 else compute("addmm", [acc, left, right], acc)


def _piece_offset(core: int, local: int, chunk: int, job: _Job) -> int:
    """Where the ring scheme's left piece (`core`'s, of row block `local` of its part, K-chunk `chunk`) starts, in
    pieces: K in one chunk, pieces are whole rows of A in its stored order; else A is blocked core-major."""
    cores, chunks = job.cores, job.k_total // job.division.tile.k
    per_part = job.division.m_parts // job.parts
    if chunks == 1:
        return local * cores + core
    return (core * per_part + local) * chunks + chunk


def _right_tile(job: _Job, k: int, cols: int) -> list[int]:
    return [cols, k] if job.b_along_k else [k, cols]


class _RingShape(NamedTuple):
    """Either ring's figures: a piece's rows, the K-chunk, a band's columns, chunks and blocks per part of A, the
    element size, the (block, chunk) steps and a right chunk's tile shape."""

    piece: int
    k: int
    cols: int
    chunks: int
    per_part: int
    itemsize: int
    steps: list[tuple[int, int]]
    lead: int
    inner: int


def _ring_shape(job: _Job) -> _RingShape:
    tile, blocks = job.division.tile, job.division.m_parts
    chunks = job.k_total // tile.k
    itemsize = torch.empty(0, dtype=getattr(torch, job.dtype)).element_size()
    steps = [(block, chunk) for block in range(blocks) for chunk in range(chunks)]
    return _RingShape(tile.m, tile.k, tile.n, chunks, blocks // job.parts, itemsize, steps,
                      *_right_tile(job, tile.k, tile.n))  # fmt: skip


def _accumulators(cores: int, piece: int, cols: int) -> tuple[Tiles, list[str]]:
    """A ring core's tile table, starting with its 32 fp32 accumulators (one per piece or band)."""
    tiles = Tiles()
    return tiles, [tiles.add(f"acc{i}", "float32", [piece, cols]) for i in range(cores)]


def _band_chunk(job: _Job, shape: _RingShape, core: int, chunk: int, tile: str) -> list[dict[str, Any]]:
    """The two DMAs (one per half, into `tile`.0 and `tile`.1) of K-chunk `chunk` of this core's band of B."""
    start = (core * shape.chunks + chunk) * shape.k * shape.cols * shape.itemsize
    half = shape.lead // 2 * shape.inner * shape.itemsize
    return [dma_in(job.b, start, f"{tile}.0"), dma_in(job.b, start + half, f"{tile}.1")]


def _ring(job: _Job):
    m, cores, a, epilogue, dtype = job.m, job.cores, job.a, job.epilogue, job.dtype
    shape = _ring_shape(job)
    piece, k, cols, chunks, per_part, itemsize, steps, _, _ = shape
    programs = []
    for core in range(cores):
        tiles, acc = _accumulators(cores, piece, cols)
        rotating = [tiles.add(f"a{s}", dtype, [piece, k]) for s in range(2)]
        own = tiles.add("own", dtype, [piece, k])
        rhs = [_right_halves(tiles, f"b{s}", job, k, cols, itemsize) for s in range(2)]
        epilogue.place(tiles, TileGrid(piece, cols, m // piece, cores, cols_first=True, out_slots=2))

        def loads(index: int, core: int = core, own: str = own) -> list[dict[str, Any]]:
            """The DMAs of step `index`: this core's own piece, then the two halves of its right-operand chunk."""
            block, chunk = steps[index]
            part, local = divmod(block, per_part)
            left = _piece_offset(core, local, chunk, job) * piece * k * itemsize
            return [dma_in(f"{a}.{part}", left, own), *_band_chunk(job, shape, core, chunk, f"b{index % 2}")]

        def accumulate(index: int, owner: int, slot: str, acc: list[str] = acc, rhs: list[str] = rhs) -> dict:
            return _accumulate(job, steps[index][1], slot, rhs[index % 2], acc[owner])

        def finish(index: int, core: int = core, acc: list[str] = acc) -> list[dict[str, Any]]:
            block, chunk = steps[index]
            if chunk < chunks - 1:
                return []
            return [i for p in range(cores) for i in epilogue.code(block * cores + p, core, acc[p])]

        code = _rounds(core, cores, len(steps), loads, own, rotating, accumulate, finish)
        programs.append({"core": core, "tiles": tiles.specs, "instructions": code})

    def pack_a(t: torch.Tensor) -> torch.Tensor:
        if chunks == 1:  # each piece is whole rows of A, contiguous as stored
            return t.reshape(per_part, cores, piece, k)
        return t.reshape(per_part, cores, piece, chunks, k).permute(1, 0, 3, 2, 4)

    def read_c(buffer: torch.Tensor) -> torch.Tensor:
        return buffer.view(cores, m, cols).permute(1, 0, 2)

    return programs, pack_a, _band_packer(job, chunks, k, cols), read_c


def _rounds(
    core: int,
    cores: int,
    steps: int,
    loads: Callable[[int], list[dict[str, Any]]],
    travelling: str,
    rotating: list[str],
    accumulate: Callable[[int, int, str], dict[str, Any]],
    finish: Callable[[int], list[dict[str, Any]]],
) -> list[dict[str, Any]]:
    """One core's instructions in either ring: each step is 32 rounds. In round r the tile that travels (the core's
    own at round 0, loaded by `loads`; then the one the previous core passed on) goes on to the next core while
    this core accumulates it into the accumulator of the core it came from, r cores back. The next step's DMAs are
    spread over the rounds from round 1 (its own tile is free once round 0 has sent it), so each finds its DMA
    engine free and never stalls issue; `finish` ends a step (a block's last step stores its outputs)."""
    code = loads(0)
    prefetch_rounds = {0: 1, 1: cores // 3, 2: 2 * cores // 3, 3: 5 * cores // 6}
    for index in range(steps):
        slot = travelling
        upcoming = loads(index + 1) if index + 1 < steps else []
        for step in range(cores):
            if step < cores - 1:
                code.append(send((core + 1) % cores, slot))
            code.append(accumulate(index, (core - step) % cores, slot))
            code += [upcoming[i] for i, at in prefetch_rounds.items() if at == step and i < len(upcoming)]
            if step < cores - 1:
                slot = rotating[step % 2]
                code.append(recv((core - 1) % cores, slot))
        code += finish(index)
    return code


def _band_packer(job: _Job, chunks: int, k: int, cols: int):
    """Either ring's right operand as [core, K-chunk, ...] blocks of each core's band of columns."""
    cores = job.cores

    def pack_b(t: torch.Tensor) -> torch.Tensor:
        if job.b_along_k:
            return t.reshape(cores, cols, chunks, k).permute(0, 2, 1, 3)
        return t.reshape(chunks, k, cores, cols).permute(2, 0, 1, 3)

    return pack_b


def _right_halves(tiles: Tiles, name: str, job: _Job, k: int, cols: int, itemsize: int) -> str:
    """A right-operand chunk tile and its two halves (two DMAs, each half the chunk's rows)."""
    lead, inner = _right_tile(job, k, cols)
    whole = tiles.add(name, job.dtype, [lead, inner])
    offset = tiles.specs[whole]["offset"]
    tiles.add(f"{name}.0", job.dtype, [lead // 2, inner], offset)
    tiles.add(f"{name}.1", job.dtype, [lead // 2, inner], offset + lead // 2 * inner * itemsize)
    return whole


def _row_ring(job: _Job):
    """Each core keeps its piece of a block's rows of A (and of the output, over every column band); the chunks of
    B's column bands rotate round the ring, so after a block each core holds whole rows of the output and stores
    them with one DMA where the host reads them. A core's pieces of successive blocks are successive rows, so its
    DMAs stay within 1/32 of A and of the output. A `sliced` division reads its piece of A's rows whole, as
    stored (one DMA a block), and with B along K its band of B's rows too (one DMA in all), and cuts each step's
    K-chunks out of them on chip: neither operand is relaid into K-chunk blocks."""
    m, n, cores, a, epilogue, dtype = job.m, job.n, job.cores, job.a, job.epilogue, job.dtype
    shape = _ring_shape(job)
    piece, k, cols, chunks, per_part, itemsize, steps, lead, inner = shape
    sliced, k_total = job.division.sliced, job.k_total
    band_kept = sliced and job.b_along_k
    programs = []
    for core in range(cores):
        tiles, acc = _accumulators(cores, piece, cols)
        own = [tiles.add(f"a{s}", dtype, [piece, k]) for s in range(2)]
        mine = _right_halves(tiles, "b", job, k, cols, itemsize)
        rotating = [tiles.add(f"r{s}", dtype, [lead, inner]) for s in range(2)]
        rows = [tiles.add(f"a_rows{s}", dtype, [piece, k_total]) for s in range(2)] if sliced else []
        band = tiles.add("b_rows", dtype, [cols, k_total]) if band_kept else ""
        grid = TileGrid(piece, cols, m // piece, cores, cols_first=False, out_slots=2, banded=True)
        epilogue.place(tiles, grid)

        def loads(index: int, core: int = core, own: list[str] = own, rows: list[str] = rows, band: str = band,
                  mine: str = mine) -> list[dict[str, Any]]:  # fmt: skip
            """The DMAs of step `index`: this core's piece of A (or, sliced, its chunk cut from the piece's rows,
            read at a block's first chunk), then its band's chunk of B (in two halves, or cut from the band)."""
            block, chunk = steps[index]
            part, local = divmod(block, per_part)
            if not sliced:
                left = ((core * per_part + local) * chunks + chunk) * piece * k * itemsize
                return [dma_in(f"{a}.{part}", left, own[index % 2]), *_band_chunk(job, shape, core, chunk, "b")]
            cut = {"dim": 1, "start": chunk * k, "end": (chunk + 1) * k}
            code = [dma_in(job.b, core * cols * k_total * itemsize, band)] if band and index == 0 else []
            if chunk == 0:
                code.append(
                    dma_in(f"{a}.{part}", (core * per_part + local) * piece * k_total * itemsize, rows[block % 2])
                )
            code.append(compute("slice", [rows[block % 2]], own[index % 2], **cut))
            if band:
                return [*code, compute("slice", [band], mine, **cut)]
            return code + _band_chunk(job, shape, core, chunk, "b")

        def accumulate(index: int, band: int, slot: str, acc: list[str] = acc, own: list[str] = own) -> dict:
            return _accumulate(job, steps[index][1], own[index % 2], slot, acc[band])

        def finish(index: int, core: int = core, acc: list[str] = acc) -> list[dict[str, Any]]:
            block, chunk = steps[index]
            if chunk < chunks - 1:
                return []
            part, local = divmod(block, per_part)
            row_tile = (part * cores + core) * per_part + local
            return [i for band in range(cores) for i in epilogue.code(row_tile, band, acc[band])]

        code = _rounds(core, cores, len(steps), loads, mine, rotating, accumulate, finish)
        programs.append({"core": core, "tiles": tiles.specs, "instructions": code})

    def pack_a(t: torch.Tensor) -> torch.Tensor:
        if sliced:  # the pieces' rows as stored
            return t
        return t.reshape(per_part * cores, piece, chunks, k).permute(0, 2, 1, 3)

    def read_c(buffer: torch.Tensor) -> torch.Tensor:
        return buffer.view(m, n)

    pack_b = (lambda t: t) if band_kept else _band_packer(job, chunks, k, cols)
    return programs, pack_a, pack_b, read_c


def _grid(job: _Job):
    m, n, k_total, division, parts, dtype, cores, a, b, epilogue, along_k = job
    tile = division.tile
    tm, tn, k = tile.m, tile.n, tile.k
    block_rows, block_cols = m // division.m_parts, n // division.n_parts
    chunks, row_tiles, col_tiles = k_total // k, m // tm, n // tn
    per_part = row_tiles // parts
    itemsize = torch.empty(0, dtype=getattr(torch, dtype)).element_size()
    programs = []
    for core in range(cores):
        i, j = divmod(core, division.n_parts)
        tiles = Tiles()
        acc = tiles.add("acc", "float32", [tm, tn])
        lhs = [tiles.add(f"a{s}", dtype, [tm, k]) for s in range(2)]
        rhs = [tiles.add(f"b{s}", dtype, _right_tile(job, k, tn)) for s in range(2)]
        epilogue.place(tiles, TileGrid(tm, tn, row_tiles, col_tiles, cols_first=False, out_slots=1))
        code: list[dict[str, Any]] = []
        turn = 0
        for rt in range(i * block_rows // tm, (i + 1) * block_rows // tm):
            part, local = divmod(rt, per_part)
            for ct in range(j * block_cols // tn, (j + 1) * block_cols // tn):
                for chunk in range(chunks):
                    left, right = lhs[turn % 2], rhs[turn % 2]
                    turn += 1
                    code.append(dma_in(f"{a}.{part}", (local * chunks + chunk) * tm * k * itemsize, left))
                    code.append(dma_in(b, (ct * chunks + chunk) * k * tn * itemsize, right))
                    code.append(_accumulate(job, chunk, left, right, acc))
                code += epilogue.code(rt, ct, acc)
        programs.append({"core": core, "tiles": tiles.specs, "instructions": code})

    def pack_a(t: torch.Tensor) -> torch.Tensor:
        return t.reshape(per_part, tm, chunks, k).permute(0, 2, 1, 3)

    def pack_b(t: torch.Tensor) -> torch.Tensor:
        if along_k:
            return t.reshape(col_tiles, tn, chunks, k).permute(0, 2, 1, 3)
        return t.reshape(chunks, k, col_tiles, tn).permute(2, 0, 1, 3)

    def read_c(buffer: torch.Tensor) -> torch.Tensor:
        return buffer.view(row_tiles, col_tiles, tm, tn).permute(0, 2, 1, 3)

    return programs, pack_a, pack_b, read_c
