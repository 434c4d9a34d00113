"""Tiling: block sizes that make each core's working set fit its usable scratchpad.

Row-wise kernels are cut into blocks of whole rows (double-buffered so one block loads while another computes);
matmuls into an fp32 accumulator tile plus K-chunks of both operands, K-chunks in whole sticks.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from .graph import DTYPE_BYTES


@dataclass(frozen=True, slots=True)
class EpilogueRoom:
    """What a fused epilogue adds to a matmul's working set."""

    #: bytes of the tiles it adds to an m x n output tile (None: that tile cannot carry it)
    tiles: Callable[[int, int], int | None]
    #: bytes per output row of the whole rows it loads and stores (the row ring assembles a core's rows so)
    row_bytes: int


ACCUMULATOR_BYTES = DTYPE_BYTES["float32"]


class TilingError(ValueError):
    """No tile fits: the message says which working set and how large it is."""


def row_block(rows: int, fits: Callable[[int], bool], grain: int = 1, depth: int = 1) -> int:
    """The most rows per block (a divisor of `rows`, a multiple of `grain`) whose working set `fits`, preferring
    blocks that leave at least `depth` of them so loads, compute and stores can overlap."""
    fitting = [b for b in range(rows, 0, -1) if rows % b == 0 and b % grain == 0 and fits(b)]
    if not fitting:
        raise TilingError(f"no block of {rows} rows in multiples of {grain} fits the scratchpad")
    deep = [b for b in fitting if rows // b >= depth]
    return (deep or fitting)[0]


def _sticks(nbytes: int, stick: int) -> int:
    return -(-nbytes // stick) * stick


@dataclass(frozen=True, slots=True)
class MatmulTile:
    """An m x n fp32 accumulator updated by (m x k) @ (k x n) chunks, `slots` left chunks and two right chunks in
    flight, and an m x n output tile the accumulator is cast into."""

    m: int
    n: int
    k: int
    slots: int
    itemsize: int

    def whole_sticks(self, stick: int) -> bool:
        """Whether each operand chunk and output tile is whole sticks: DMAs of them land on stick boundaries."""
        return all(elems * self.itemsize % stick == 0 for elems in (self.m * self.k, self.k * self.n, self.m * self.n))

    def footprint(self, stick: int) -> int:
        acc = _sticks(self.m * self.n * ACCUMULATOR_BYTES, stick)
        left = self.slots * _sticks(self.m * self.k * self.itemsize, stick)
        right = 2 * _sticks(self.k * self.n * self.itemsize, stick)
        return acc + left + right + _sticks(self.m * self.n * self.itemsize, stick)


def matmul_tile(
    m: int,
    n: int,
    k_total: int,
    capacity: int,
    stick: int,
    itemsize: int = 2,
    slots: int = 2,
    max_k: int = 256,
    epilogue: EpilogueRoom | None = None,
) -> MatmulTile:
    """The largest accumulator (a divisor tile of m x n, balanced) and then the largest K-chunk that fit, beside the
    `epilogue`'s tiles when one is fused.

    K-chunks are whole sticks of K (64 fp16 elements) and divide `k_total`; larger chunks amortise the per-instruction
    issue cost and DMA latency, bounded by `max_k` so the software pipeline has enough steps to overlap.
    """
    stick_elems = stick // itemsize
    ks = [k for k in range(min(max_k, k_total), 0, -1) if k_total % k == 0 and (k % stick_elems == 0 or k == k_total)]
    best: MatmulTile | None = None
    for tm in _divisors(m, stick_elems):
        for tn in _divisors(n, stick_elems):
            extra = epilogue.tiles(tm, tn) if epilogue is not None else 0
            if extra is None:
                continue
            for k in ks:
                tile = MatmulTile(tm, tn, k, slots, itemsize)
                if not tile.whole_sticks(stick):
                    continue
                if tile.footprint(stick) + extra <= capacity:
                    if best is None or _score(tile) > _score(best):
                        best = tile
                    break
    if best is None:
        beside = " beside its epilogue's tiles" if epilogue is not None else ""
        raise TilingError(f"no matmul tile of a {m} x {n} output with K {k_total} fits {capacity} bytes{beside}")
    return best


def _score(tile: MatmulTile) -> tuple[float, int]:
    """Device-memory traffic per MAC falls as 1/m + 1/n: the smaller, the better; then the larger K-chunk."""
    return (-(1 / tile.m + 1 / tile.n), tile.k)


def _divisors(value: int, grain: int) -> list[int]:
    """Divisors of `value` in whole multiples of `grain` (or all of them when `value` is smaller)."""
    step = grain if value >= grain else 1
    return [d for d in range(step, value + 1, step) if value % d == 0]
