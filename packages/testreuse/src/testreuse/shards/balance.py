"""Balanced placement of sized items onto a fixed number of bins: LPT, then an improvement pass.

Longest-processing-time first is within 4/3 of the optimal makespan; moving or swapping items between the fullest
bin and the others closes most of the remaining gap at a cost of a few binary searches per step.
"""

from __future__ import annotations

import bisect
import heapq
from collections.abc import Sequence

EPS = 1e-9


def lpt(sizes: Sequence[float], bins: int) -> list[int]:
    """Bin of each item: longest first onto the least-loaded bin (ties: lower item index, lower bin)."""
    heap = [(0.0, b) for b in range(bins)]
    where = [0] * len(sizes)
    for item in sorted(range(len(sizes)), key=lambda i: (-sizes[i], i)):
        load, b = heapq.heappop(heap)
        where[item] = b
        heapq.heappush(heap, (load + sizes[item], b))
    return where


def _best_exchange(
    full: list[tuple[float, int]], other: list[tuple[float, int]], gap: float
) -> tuple[float, int | None, int | None]:
    """The move (u, None) or swap (u, v) from the fullest bin whose size change is closest to gap / 2."""
    best = (gap, None, None)  # (resulting pair max - lower load, item out, item in), smaller is better
    sizes = [s for s, _ in other]
    for u, ui in full:
        target = u - gap / 2
        candidates = [(0.0, None)]
        at = bisect.bisect_left(sizes, target)
        candidates += [other[k] for k in (at - 1, at) if 0 <= k < len(other)]
        for v, vi in candidates:
            delta = u - v
            if EPS < delta < gap - EPS:
                score = max(gap - delta, delta)
                if score < best[0] - EPS:
                    best = (score, ui, vi)
    return best


def _step(members: list[list[tuple[float, int]]], loads: list[float], top: int) -> tuple[int, int, int | None] | None:
    """(lighter bin, item out of `top`, item back or None) for the first lighter bin, lightest first, that helps."""
    for low in sorted(range(len(loads)), key=lambda b: (loads[b], b)):
        gap = loads[top] - loads[low]
        if low == top or gap <= EPS:
            return None
        _, out, into = _best_exchange(members[top], members[low], gap)
        if out is not None:
            return low, out, into
    return None


def improve(sizes: Sequence[float], where: Sequence[int], bins: int, rounds: int | None = None) -> list[int]:
    """Repeatedly lower the fullest bin by the best move or swap with a lighter bin; the makespan never rises.

    Each step strictly lowers the sum of squared loads, so it ends; `rounds` bounds it anyway.
    """
    members: list[list[tuple[float, int]]] = [[] for _ in range(bins)]
    for item, b in enumerate(where):
        members[b].append((sizes[item], item))
    for m in members:
        m.sort()
    loads = [sum(s for s, _ in m) for m in members]
    placed = list(where)
    for _ in range(rounds if rounds is not None else 20 * bins + 100):
        top = max(range(bins), key=lambda b: (loads[b], -b))
        step = _step(members, loads, top)
        if step is None:
            break
        low, out, into = step
        for item, src, dst in ((out, top, low), (into, low, top)):
            if item is not None:
                members[src].remove((sizes[item], item))
                bisect.insort(members[dst], (sizes[item], item))
                loads[src] -= sizes[item]
                loads[dst] += sizes[item]
                placed[item] = dst
    return placed


def balance(sizes: Sequence[float], bins: int) -> list[int]:
    """LPT placement, then the improvement pass."""
    return improve(sizes, lpt(sizes, bins), bins)


def makespan(sizes: Sequence[float], where: Sequence[int], bins: int) -> float:
    """The fullest bin's load."""
    loads = [0.0] * bins
    for item, b in enumerate(where):
        loads[b] += sizes[item]
    return max(loads)
