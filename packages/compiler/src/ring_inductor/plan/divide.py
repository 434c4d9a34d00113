"""Work division across the 32 cores.

First the mandatory pass: a tensor larger than one core's addressable span is split along its outermost dim into
the fewest equal parts that each fit (a [8192, 32768] fp16 operand, 512 MiB, into two). Then matmuls, by the cost
model: either a grid of independent output blocks, each core streaming its own operands from device memory, or a
ring scheme, where all cores share one block of rows of the left operand and each loads 1/32 of every K-chunk of
both operands: in the column ring the left pieces rotate round the ring and each core keeps a band of the output's
columns (relaid into rows after), in the row ring the right operand's column bands rotate and each core keeps its
piece of the output's rows, stored whole. Either way device memory is read once per block instead of once per core.
A division whose output is not stored in whole rows is priced with relaying it into rows. Then everything else:
rows (a dim that is neither the stick dim of a reduction nor size 1) split over the cores.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Literal

from .cost import DEFAULT_COST, CostModel
from .graph import DTYPE_BYTES, Graph, Op, OpKind
from .tiling import ACCUMULATOR_BYTES, EpilogueRoom, MatmulTile, TilingError, matmul_tile


@dataclass(frozen=True, slots=True)
class TensorSplit:
    """A tensor stored as `parts` separate device buffers along `dim` (each within one core's span)."""

    tensor: str
    dim: int
    parts: int


@dataclass(frozen=True, slots=True)
class MatmulDivision:
    """How one [M, K] x [K, N] matmul is spread: `m_parts` row blocks done one after another (either ring) or a
    `m_parts` x `n_parts` grid of per-core output blocks (grid), with the tile each core iterates."""

    op: str
    scheme: Literal["ring", "row_ring", "grid"]
    m_parts: int
    n_parts: int
    tile: MatmulTile
    estimate: float
    #: device-memory bytes the scheme moves (operands as often as they are re-read, plus the output)
    traffic: int
    #: row ring in K-chunks: each core reads its piece of A's rows (and its band of B's rows, B stored along K)
    #: whole, as stored, and slices each K-chunk out on chip: no relayout into K-chunk blocks
    sliced: bool = False


@dataclass(frozen=True, slots=True)
class RowDivision:
    op: str
    dim: int
    cores: int


@dataclass(frozen=True, slots=True)
class DivisionPlan:
    splits: dict[str, TensorSplit]
    matmuls: dict[str, MatmulDivision]
    rows: dict[str, RowDivision]
    #: every candidate the matmul pass weighed, per op, cheapest first
    considered: dict[str, tuple[MatmulDivision, ...]]


def mandatory_splits(graph: Graph, cost: CostModel = DEFAULT_COST) -> dict[str, TensorSplit]:
    """The fewest equal parts along dim 0 that bring every tensor within one core's addressable span."""
    splits = {}
    for tensor in graph.tensors.values():
        if tensor.nbytes <= cost.span:
            continue
        rows = tensor.shape[0]
        parts = next((p for p in range(-(-tensor.nbytes // cost.span), rows + 1) if rows % p == 0), None)
        if parts is None:
            raise TilingError(f"tensor {tensor.name!r} ({tensor.nbytes} bytes) cannot be split within one core's span")
        splits[tensor.name] = TensorSplit(tensor.name, 0, parts)
    return splits


def matmul_candidates(
    graph: Graph,
    op: Op,
    splits: dict[str, TensorSplit],
    cost: CostModel = DEFAULT_COST,
    epilogue: EpilogueRoom | None = None,
) -> list[MatmulDivision]:
    """Every division the cost model can price for `op`, cheapest first; with a fused `epilogue`, those whose tiles
    leave it room."""
    (m, k), n = graph.tensors[op.inputs[0]].shape, graph.tensors[op.inputs[1]].shape[1]
    itemsize = DTYPE_BYTES[graph.tensors[op.inputs[0]].dtype]
    split = splits.get(op.inputs[0])
    minimum = split.parts if split is not None else 1
    along_k = graph.tensors[op.inputs[1]].stick == 0  # the layout pass keeps B as stored, along K
    found = []
    cores = cost.cores
    for m_parts in (p for p in range(1, cores + 1) if cores % p == 0 and m % p == 0):
        n_parts = cores // m_parts
        if n % n_parts or m_parts < minimum:
            continue
        try:
            tile = matmul_tile(m // m_parts, n // n_parts, k, cost.scratchpad, cost.stick, itemsize, epilogue=epilogue)
        except TilingError:
            continue
        found.append(_grid(op.name, m, n, k, m_parts, n_parts, tile, itemsize, cost))
    found += _rings(op.name, (m, n, k), minimum, itemsize, cost, epilogue, along_k)
    found = [replace(d, estimate=d.estimate + relays(d, (m, n, k), along_k, itemsize, cost)) for d in found]
    # every grid, and of each ring scheme the cheaper of its chunked and whole-K tilings
    rings = ([d for d in found if d.scheme == scheme] for scheme in ("ring", "row_ring"))
    found = [d for d in found if d.scheme == "grid"] + [min(r, key=lambda d: d.estimate) for r in rings if r]
    within = [d for d in found if core_span(d, m, n, k, itemsize, cost.cores) <= cost.span]
    return sorted(within, key=lambda division: division.estimate)


def relays(
    division: MatmulDivision, shape: tuple[int, int, int], b_along_k: bool, itemsize: int, cost: CostModel
) -> float:
    """Cycles of relaying what `division` does not read or write as stored, each tensor read and written once: A
    into K-chunk blocks (unless K is one chunk or the row ring slices it), B into its blocks (unless they are runs
    of B's stored rows: a K-chunk of all K or sliced along K, a grid's tile of all N along N) and the output from
    tiles into rows (unless the row ring's, or a grid tile of all N)."""
    m, n, k = shape
    tile, grid = division.tile, division.scheme == "grid"
    a_as_stored = tile.k == k or division.sliced
    b_as_stored = a_as_stored if b_along_k else grid and tile.n == n
    rows_out = division.scheme == "row_ring" or (grid and tile.n == n)
    moved = (0 if a_as_stored else m * k) + (0 if b_as_stored else k * n) + (0 if rows_out else m * n)
    return cost.memory(2 * moved * itemsize)


def core_span(division: MatmulDivision, m: int, n: int, k: int, itemsize: int, cores: int) -> int:
    """Device-memory bytes the busiest core's DMAs reach in the emitted layouts (the engine's span rule)."""
    if division.scheme != "grid":
        return (m * k + k * n + m * n) // cores * itemsize
    tile = division.tile
    block_rows, block_cols = m // division.m_parts, n // division.n_parts
    left, right = block_rows * k, k * block_cols
    col_tiles = n // tile.n
    out = ((block_rows // tile.m - 1) * col_tiles + block_cols // tile.n) * tile.m * tile.n
    return (left + right + out) * itemsize


def _grid(
    name: str, m: int, n: int, k: int, m_parts: int, n_parts: int, tile: MatmulTile, itemsize: int, cost: CostModel
) -> MatmulDivision:
    traffic = round(m * n * k * itemsize * (1 / tile.m + 1 / tile.n))
    traffic += m * n * itemsize
    macs = m * n * k // cost.cores
    instructions = (m // m_parts // tile.m) * (n // n_parts // tile.n) * (k // tile.k)
    compute = cost.matmul(0) * instructions + macs / cost.device.macs_per_cycle
    estimate = max(compute, cost.memory(traffic, mixed=False))
    return MatmulDivision(name, "grid", m_parts, n_parts, tile, estimate, traffic)


#: The largest K-chunk of the ring scheme: big enough to amortise issue and hop latency, small enough to pipeline.
RING_MAX_K = 512


@dataclass(frozen=True, slots=True)
class SlicedRows:
    """The row ring's whole-K rows kept on chip to slice K-chunks from: a piece of A's rows per block (two: the
    next block's loads while this one's are cut), and, with B stored along K, the core's band of B's rows, read
    once for every block."""

    b_along_k: bool

    def footprint(self, piece: int, cols: int, k: int, itemsize: int, cost: CostModel) -> int:
        band = cost.stick_bytes(cols * k * itemsize) if self.b_along_k else 0
        return 2 * cost.stick_bytes(piece * k * itemsize) + band

    def cuts(self, tile: MatmulTile, cost: CostModel) -> float:
        """Cycles of one step's cuts: A's chunk, and B's when its band is kept."""
        return cost.vector(tile.m * tile.k) + (cost.vector(tile.n * tile.k) if self.b_along_k else 0)


def ring_tile(
    rows: int,
    cols: int,
    k: int,
    cost: CostModel,
    itemsize: int,
    epilogue: EpilogueRoom | None = None,
    whole_k: bool = False,
    row_ring: bool = False,
    sliced: SlicedRows | None = None,
) -> MatmulTile | None:
    """For a ring scheme: a `rows` x `cols` accumulator per core (the column ring's band of a block's columns, or
    the row ring's piece of its rows over every band), pieces of rows/32 rows, the largest K-chunk.

    Besides the accumulator a core holds the tile that travels (its own, loaded once a step, and two passed on by
    its neighbour) and two of the one that stays (this step's and the prefetched next): left pieces travel in the
    column ring and right chunks of a band in the row ring. And two output pieces being stored (and a fused
    `epilogue`'s tiles); the row ring also the row of output pieces it assembles (a fused epilogue's rows of
    operands and results). With `whole_k`, only a chunk of the whole of K; `sliced` (row ring), K-chunks smaller
    than K cut on chip out of the whole-K rows it keeps as well.
    """
    stick_elems = cost.stick // itemsize
    piece = rows // cost.cores
    extra = epilogue.tiles(piece, cols) if epilogue is not None else 0
    if extra is None:
        return None
    if row_ring:
        row_bytes = epilogue.row_bytes if epilogue is not None else cols * cost.cores * itemsize
        extra += cost.stick_bytes(piece * row_bytes)
    if sliced is not None:
        extra += sliced.footprint(piece, cols, k, itemsize, cost)
    chunks = [k] if whole_k else [c for c in range(min(RING_MAX_K, k), 0, -stick_elems) if k % c == 0]
    chunks = [c for c in chunks if c < k] if sliced is not None else chunks
    for chunk in chunks:
        tile = MatmulTile(piece, cols, chunk, 2 if row_ring else 3, itemsize)
        if not tile.whole_sticks(cost.stick):
            continue
        rotating = cost.stick_bytes(chunk * cols * itemsize) if row_ring else 0
        footprint = rows * cols * ACCUMULATOR_BYTES + tile.footprint(cost.stick) - piece * cols * ACCUMULATOR_BYTES
        if footprint + rotating + cost.stick_bytes(piece * cols * itemsize) + extra <= cost.scratchpad:
            return tile
    return None


def _rings(
    name: str,
    shape: tuple[int, int, int],
    minimum: int,
    itemsize: int,
    cost: CostModel,
    epilogue: EpilogueRoom | None,
    b_along_k: bool = False,
) -> list[MatmulDivision]:
    """Each ring scheme with the fewest row blocks whose accumulator and buffers fit (fewer blocks, less
    re-reading), in K-chunks and, when B is stored along K (the layout pass keeps it), with K whole: then each
    core's band of B is a run of its stored rows and A's pieces are its rows as stored (`relays` prices the rest).
    The row ring also in K-chunks cut on chip from rows read as stored (`SlicedRows`)."""
    _, n, k = shape
    if n % cost.cores:
        return []
    cols = n // cost.cores
    variants = [(False, False, None), (True, False, None), (True, False, SlicedRows(b_along_k))]
    variants += [(row_ring, True, None) for row_ring in (False, True)] if b_along_k else []
    found = []
    for row_ring, whole_k, sliced in variants:
        tile_of = lambda rows: ring_tile(rows, cols, k, cost, itemsize, epilogue, whole_k, row_ring, sliced)  # noqa: B023, E731
        division = _ring_blocks(name, shape, minimum, itemsize, cost, tile_of, row_ring, sliced)
        found += [division] if division is not None else []
    return found


def _ring_blocks(
    name: str,
    shape: tuple[int, int, int],
    minimum: int,
    itemsize: int,
    cost: CostModel,
    tile_of: Callable[[int], MatmulTile | None],
    row_ring: bool,
    sliced: SlicedRows | None = None,
) -> MatmulDivision | None:
    """The ring division with the fewest row blocks whose tile (`tile_of` a block's rows) fits."""
    (m, n, k), cores = shape, cost.cores
    for blocks in (b for b in range(max(minimum, 1), m + 1) if m % b == 0 and (m // b) % cores == 0):
        if minimum > 1 and blocks % minimum:
            continue
        tile = tile_of(m // blocks)
        if tile is None:
            continue
        traffic = (m * k + blocks * k * n + m * n) * itemsize
        steps = blocks * (k // tile.k)
        rotated = (tile.k * tile.n if row_ring else tile.m * tile.k) * itemsize
        # each of the 32 rounds of a step waits for its piece to arrive and for the previous piece's compute
        rounds = steps * cores * max(cost.matmul(tile.m * tile.n * tile.k), cost.ring(rotated))
        rounds += steps * sliced.cuts(tile, cost) if sliced is not None else 0
        if row_ring:
            # after each block every core copies its 32 output pieces into its rows and stores them in one DMA
            row = tile.m * n * itemsize
            stores = blocks * (cores * cost.vector(tile.m * tile.n) + cost.dma(row, concurrent=cores))
        else:
            # after each block every core stores its 32 output pieces one DMA after another, all cores at once
            stores = blocks * cores * cost.dma(tile.m * tile.n * itemsize, concurrent=cores)
        estimate = max(rounds, cost.memory(traffic, mixed=False)) + stores
        scheme = "row_ring" if row_ring else "ring"
        return MatmulDivision(name, scheme, blocks, cores, tile, estimate, traffic, sliced is not None)
    return None


def rows_of(graph: Graph, op: Op, cores: int) -> RowDivision:
    """Split an op's output along dim 0 (its rows) over as many cores as divide them, at most `cores`."""
    rows = graph.tensors[op.output].shape[0] if op.kind is not OpKind.REDUCTION or op.dim != 0 else 1
    used = max(c for c in range(1, cores + 1) if rows % c == 0)
    return RowDivision(op.name, 0, used)


def divide(graph: Graph, cost: CostModel = DEFAULT_COST, cores: int | None = None) -> DivisionPlan:
    """Mandatory span splits, then matmuls by the cost model, then the remaining ops by rows."""
    splits = mandatory_splits(graph, cost)
    matmuls, considered = {}, {}
    for op in graph.ops:
        if op.kind is OpKind.MATMUL:
            options = matmul_candidates(graph, op, splits, cost)
            if not options:
                raise TilingError(f"op {op.name!r}: no work division fits the scratchpad")
            matmuls[op.name], considered[op.name] = options[0], tuple(options)
    rows = {op.name: rows_of(graph, op, cores or cost.cores) for op in graph.ops if op.kind is not OpKind.MATMUL}
    return DivisionPlan(splits, matmuls, rows, considered)
