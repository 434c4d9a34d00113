"""Co-optimising work division and scratchpad placement along a chain of ops.

Each op has candidate splits, each with its standalone cost (the op as its own kernel). Between a producer and its
consumer the intermediate either stays resident (the consumer adopts the producer's split and the fused working set
fits the scratchpad), moves core to core over the ring (a relayout, priced per hop), or spills through device memory
(written out, a barrier, read back). Independent planning picks each op's cheapest split alone; the co-optimiser
picks the assignment with the least total cost: a greedy pruned (beam) search by default, an exhaustive one with a
time bound on request.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

Transition = Literal["resident", "relayout", "spill"]


@dataclass(frozen=True, slots=True)
class Split:
    """One way to divide one op: a label, what it leaves on each core (`key`), and its standalone cycles."""

    label: str
    key: str
    cycles: float


@dataclass(frozen=True, slots=True)
class Edge:
    """The cost of handing the intermediate from a producer split to a consumer split, and how it travels."""

    cycles: float
    transition: Transition


#: producer split, consumer split -> how the intermediate gets there
EdgeCost = Callable[[Split, Split], Edge]


@dataclass(frozen=True, slots=True)
class Assignment:
    splits: tuple[Split, ...]
    edges: tuple[Edge, ...]
    cycles: float
    #: the search saw every assignment (exhaustive within its time bound) or pruned (beam)
    complete: bool
    examined: int


def _total(splits: Sequence[Split], edge: Sequence[EdgeCost]) -> tuple[float, tuple[Edge, ...]]:
    edges = tuple(edge[i](splits[i], splits[i + 1]) for i in range(len(splits) - 1))
    return sum(s.cycles for s in splits) + sum(e.cycles for e in edges), edges


def independent(options: Sequence[Sequence[Split]], edge: Sequence[EdgeCost]) -> Assignment:
    """Each op's cheapest split on its own; the hand-overs are then whatever those splits force."""
    splits = tuple(min(choices, key=lambda s: s.cycles) for choices in options)
    cycles, edges = _total(splits, edge)
    return Assignment(splits, edges, cycles, complete=True, examined=1)


def beam(options: Sequence[Sequence[Split]], edge: Sequence[EdgeCost], width: int = 4) -> Assignment:
    """Greedy pruned search: extend partial assignments op by op, keeping the `width` cheapest so far."""
    partial: list[tuple[float, tuple[Split, ...]]] = [(s.cycles, (s,)) for s in options[0]]
    examined = len(partial)
    for index in range(1, len(options)):
        grown = []
        for cycles, prefix in sorted(partial, key=lambda item: item[0])[:width]:
            for split in options[index]:
                grown.append((cycles + split.cycles + edge[index - 1](prefix[-1], split).cycles, (*prefix, split)))
        examined += len(grown)
        partial = grown
    cycles, splits = min(partial, key=lambda item: item[0])
    return Assignment(splits, _total(splits, edge)[1], cycles, complete=False, examined=examined)


def exhaustive(options: Sequence[Sequence[Split]], edge: Sequence[EdgeCost], seconds: float = 5.0) -> Assignment:
    """Every assignment until the time bound; `complete` says whether it saw them all."""
    deadline = time.perf_counter() + seconds
    best: tuple[float, tuple[Split, ...], tuple[Edge, ...]] | None = None
    examined, complete = 0, True
    for combo in itertools.product(*options):
        if time.perf_counter() > deadline:
            complete = False
            break
        examined += 1
        cycles, edges = _total(combo, edge)
        if best is None or cycles < best[0]:
            best = (cycles, combo, edges)
    assert best is not None
    return Assignment(best[1], best[2], best[0], complete=complete, examined=examined)


def hand_over(
    resident: Callable[[Split, Split], float | None],
    spill: Callable[[Split, Split], float],
    relayout: Callable[[Split, Split], float | None],
) -> EdgeCost:
    """The edge cost rule: resident when the consumer adopts the producer's split and `resident` prices it (None:
    the fused working set does not fit; a negative price refunds work the fusion saves), else the cheaper of a ring
    relayout (when the two splits allow one) and a spill through device memory."""

    def cost(producer: Split, consumer: Split) -> Edge:
        if producer.key == consumer.key:
            kept = resident(producer, consumer)
            if kept is not None:
                return Edge(kept, "resident")
        ring = relayout(producer, consumer)
        through_memory = spill(producer, consumer)
        if ring is not None and ring < through_memory:
            return Edge(ring, "relayout")
        return Edge(through_memory, "spill")

    return cost
