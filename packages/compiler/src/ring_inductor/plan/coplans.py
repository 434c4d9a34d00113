"""The co-optimiser's choices for the two-op kernels the planner emits, priced by the cost model.

- A matmul feeding an elementwise op: the matmul's divisions (ring or grid), and for the consumer either its own
  flat split (a separate pass: the product spills through device memory) or the producer's split (fused into the
  matmul's output tiles: resident).
- A row-wise producer feeding a last-dim reduction whose fp16 [rows, 1] result is stored in whole sticks (64 rows
  at a time): adopting the producer's equal row blocks is possible only when they are whole sticks; otherwise the
  missing rows come from the next core over the ring, or through device memory.
"""

from __future__ import annotations

from dataclasses import dataclass

from .cooptimize import EdgeCost, Split, hand_over
from .cost import DEFAULT_COST, CostModel
from .divide import MatmulDivision
from .graph import DTYPE_BYTES, Graph

FLAT = "flat"


@dataclass(frozen=True, slots=True)
class Options:
    splits: list[list[Split]]
    edges: list[EdgeCost]


def division_key(division: MatmulDivision) -> str:
    return f"{division.scheme} {division.m_parts}x{division.n_parts} tile {division.tile.m}x{division.tile.n}"


def epilogue_options(
    graph: Graph, divisions: tuple[MatmulDivision, ...], cost: CostModel = DEFAULT_COST
) -> tuple[Options, dict[str, MatmulDivision]]:
    """Options for graph = matmul -> elementwise; `divisions` are the matmul's candidates, ring or grid, each of
    which can carry the consumer on its output tiles (`emit_matmul`'s epilogue)."""
    product = graph.tensors[graph.ops[0].output]
    by_key = {division_key(d): d for d in divisions}
    producer = [Split(key, key, d.estimate) for key, d in by_key.items()]
    # as a kernel of its own, an elementwise op costs the same on any even split: one read and one write of it
    alone = cost.memory(2 * product.nbytes) + cost.vector(product.numel // cost.cores)
    consumers = [Split(FLAT, FLAT, alone), *(Split(f"adopt {key}", key, alone) for key in by_key)]
    vector = cost.vector(product.numel // cost.cores)

    def fused(first: Split, second: Split) -> float | None:
        """Fused into the output tiles the division already holds (in place: no tile more), the consumer's own
        pass (its read and write) disappears: only its vector work remains."""
        return vector - alone

    def spill(first: Split, second: Split) -> float:
        """Unfused, the product is stored by the matmul and read by the consumer's pass (both already priced):
        the hand-over adds the barrier between them."""
        return cost.barrier

    edge = hand_over(fused, spill, lambda first, second: None)
    return Options([producer, consumers], [edge]), by_key


def blocked_reduction_options(
    graph: Graph, producer_rows: int, consumer_rows: int, cost: CostModel = DEFAULT_COST
) -> Options:
    """Options for graph = row-wise op -> last-dim reduction, with the reduction's blocks of whole output sticks."""
    first, second = graph.ops
    source = graph.tensors[first.output]
    rows, row = source.shape[0], source.shape[1] * DTYPE_BYTES[source.dtype]
    reduced_row = DTYPE_BYTES[graph.tensors[second.output].dtype]
    produce = cost.memory(2 * source.nbytes)
    reduce = cost.reduce(source.numel // (rows // consumer_rows))
    whole_sticks = producer_rows * reduced_row % cost.stick == 0
    producer = [Split(f"rows {producer_rows}", f"rows {producer_rows}", produce)]
    consumers = [Split(f"rows {consumer_rows}", f"rows {consumer_rows}", reduce)]
    if whole_sticks:
        consumers.append(Split(f"rows {producer_rows}", f"rows {producer_rows}", reduce))
    # the most rows any core lends its neighbour: a block's rows beyond the end of the core holding its first row
    lent = row * max(
        max(0, (block + 1) * consumer_rows - (block * consumer_rows // producer_rows + 1) * producer_rows)
        for block in range(rows // consumer_rows)
    )

    def spill(a: Split, b: Split) -> float:
        return cost.round_trip(producer_rows * row, concurrent=cost.cores)

    def relayout(a: Split, b: Split) -> float | None:
        return cost.ring(lent) + cost.vector(producer_rows * source.shape[1]) if lent else None

    return Options([producer, consumers], [hand_over(lambda a, b: 0.0, spill, relayout)])
