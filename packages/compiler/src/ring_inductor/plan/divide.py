"""Work division across the 32 cores.

First the mandatory pass: a tensor larger than one core's addressable span is split along its outermost dim into
the fewest equal parts that each fit (a [8192, 32768] fp16 operand, 512 MiB, into two). Then matmuls, by the cost
model: either a grid of independent output blocks, each core streaming its own operands from device memory, or the
ring scheme, where all cores share one block of rows of the left operand — each core loads 1/32 of every K-chunk and
the pieces rotate round the ring, so device memory is read once per block instead of once per core. Then
everything else: rows (a dim that is neither the stick dim of a reduction nor size 1) split over the cores.
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
    """How one [M, K] x [K, N] matmul is spread: `blocks` row blocks done one after another (ring) or a
    `m_parts` x `n_parts` grid of per-core output blocks (grid), with the tile each core iterates."""

    op: str
    scheme: Literal["ring", "grid"]
    m_parts: int
    n_parts: int
    tile: MatmulTile
    estimate: float
    #: device-memory bytes the scheme moves (operands as often as they are re-read, plus the output)
    traffic: int


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
        grid = _grid(op.name, m, n, k, m_parts, n_parts, tile, itemsize, cost)
        # its right operand is read as [column tile, K-chunk, ...] blocks: as stored only when one block is all of
        # B's stored rows' extent (N whole along N, K whole along K), else relaid first (priced in)
        as_stored = tile.k == k if along_k else tile.n == n
        found.append(grid if as_stored else replace(grid, estimate=grid.estimate + cost.memory(2 * k * n * itemsize)))
    ring = _ring(op.name, m, n, k, minimum, itemsize, cost, epilogue, along_k)
    if ring is not None:
        found.append(ring)
    within = [d for d in found if core_span(d, m, n, k, itemsize, cost.cores) <= cost.span]
    return sorted(within, key=lambda division: division.estimate)


def core_span(division: MatmulDivision, m: int, n: int, k: int, itemsize: int, cores: int) -> int:
    """Device-memory bytes the busiest core's DMAs reach in the emitted layouts (the engine's span rule)."""
    if division.scheme == "ring":
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


def ring_tile(
    rows: int,
    cols: int,
    k: int,
    cost: CostModel,
    itemsize: int,
    epilogue: EpilogueRoom | None = None,
    whole_k: bool = False,
) -> MatmulTile | None:
    """For the ring scheme: a `rows` x `cols` accumulator per core, pieces of rows/32 rows, the largest K-chunk.

    Besides the accumulator a core holds two pieces rotating, two of its own (this step's and the prefetched next),
    two right-operand chunks and two output pieces being stored (and a fused `epilogue`'s tiles). With `whole_k`,
    only a chunk of the whole of K.
    """
    stick_elems = cost.stick // itemsize
    piece = rows // cost.cores
    extra = epilogue(piece, cols) if epilogue is not None else 0
    if extra is None:
        return None
    chunks = [k] if whole_k else [c for c in range(min(RING_MAX_K, k), 0, -stick_elems) if k % c == 0]
    for chunk in chunks:
        tile = MatmulTile(piece, cols, chunk, 4, itemsize)
        if not tile.whole_sticks(cost.stick):
            continue
        footprint = rows * cols * ACCUMULATOR_BYTES + tile.footprint(cost.stick) - piece * cols * ACCUMULATOR_BYTES
        if footprint + cost.stick_bytes(piece * cols * itemsize) + extra <= cost.scratchpad:
            return tile
    return None


def _ring(
    name: str,
    m: int,
    n: int,
    k: int,
    minimum: int,
    itemsize: int,
    cost: CostModel,
    epilogue: EpilogueRoom | None,
    b_along_k: bool = False,
) -> MatmulDivision | None:
    """The ring scheme with the fewest row blocks whose accumulator and buffers fit (fewer blocks, less re-reading).

    Its right operand is read as [core, K-chunk, ...] blocks: a relayout of B (read and written once) before the
    launch, priced in, unless B is stored along K (the layout pass keeps it) and one chunk holds the whole of K,
    when B's rows are those blocks as stored. Stored along K, the whole-K tiling is weighed against the chunked one
    with its relayout."""
    if n % cost.cores:
        return None
    cols = n // cost.cores

    def fewest_blocks(whole_k: bool) -> MatmulDivision | None:
        tile_of = lambda rows: ring_tile(rows, cols, k, cost, itemsize, epilogue, whole_k)  # noqa: E731
        return _ring_blocks(name, (m, n, k), minimum, itemsize, cost, tile_of)

    chunked = fewest_blocks(whole_k=False)
    if chunked is not None:
        chunked = replace(chunked, estimate=chunked.estimate + cost.memory(2 * k * n * itemsize))
    if not b_along_k:
        return chunked
    whole = fewest_blocks(whole_k=True)
    return min((d for d in (chunked, whole) if d is not None), key=lambda d: d.estimate, default=None)


def _ring_blocks(
    name: str,
    shape: tuple[int, int, int],
    minimum: int,
    itemsize: int,
    cost: CostModel,
    tile_of: Callable[[int], MatmulTile | None],
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
        piece_bytes = tile.m * tile.k * itemsize
        # each of the 32 rounds of a step waits for its piece to arrive and for the previous piece's compute
        rounds = steps * cores * max(cost.matmul(tile.m * tile.n * tile.k), cost.ring(piece_bytes))
        # after each block every core stores its 32 output pieces one DMA after another, all cores at once
        stores = blocks * cores * cost.dma(tile.m * tile.n * itemsize, concurrent=cores)
        estimate = max(rounds, cost.memory(traffic, mixed=False)) + stores
        return MatmulDivision(name, "ring", blocks, cores, tile, estimate, traffic)
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
