"""The stick layout a compiled matmul reads its right operand in: along N as `b` is, or along K as `b.T` is stored.

A tensor's 128-byte sticks run along the dim its storage is contiguous in. The systolic array reads a matmul's
right operand either way: along N (`mm`, `bmm`) or along K (`linear`: each output column is the dot product of a
row of A with a row of B's transpose, as a linear layer's weight is stored). So `x @ w.t()` and attention's
`q @ k.transpose(-2, -1)` need no restickify of `w` or `k`: the layout pass (`plan.layout`) keeps B's own stick
dim where the matmul accepts it. With `config.layout_pass` off, every right operand is relaid into N-sticks first
(the baseline).
"""

from __future__ import annotations

from collections.abc import Sequence

from ring_inductor import config
from ring_inductor.indexing import Access

#: B's stick dim, counted from its last two dims [k, n]: along K (its transpose is stored row-major) or along N.
ALONG_K, ALONG_N = 0, 1


def stick_of(sizes: Sequence[int], strides: Sequence[int]) -> int | None:
    """The stick dim of a [..., k, n] operand among its last two dims, as the layout pass sees it: ALONG_N when
    its rows are contiguous, ALONG_K when its transpose's are (and the leading dims are dense outside them), else
    None (a view no matmul reads as it is)."""
    *outer, k, n = sizes
    *outer_strides, k_stride, n_stride = strides
    step = k * n
    for size, stride in zip(reversed(outer), reversed(outer_strides), strict=True):
        if size > 1 and stride != step:
            return None
        step *= size
    if (n == 1 or n_stride == 1) and (k == 1 or k_stride == n):
        return ALONG_N
    if (k == 1 or k_stride == 1) and (n == 1 or n_stride == k):
        return ALONG_K
    return None


def reads_along_k(sizes: Sequence[int], strides: Sequence[int]) -> bool:
    """Whether the matmul reads this right operand as stored, along K (the layout pass on, B's transpose dense)."""
    return config.layout_pass and stick_of(sizes, strides) == ALONG_K and sizes[-1] > 1 and sizes[-2] > 1


def runs_along_k(sizes: Sequence[int], strides: Sequence[int]) -> bool:
    """Whether B's transpose has contiguous rows, dense or not (attention's keys sliced out of a fused product): a
    whole-B program reads them along K, copying the runs together first where they are not one dense block, which
    is cheaper than transposing B."""
    return config.layout_pass and strides[-2] == 1 and sizes[-1] > 1 and sizes[-2] > 1


def as_stored(access: Access) -> Access:
    """A right operand read along K as its storage holds it: the [n, k] rows of its [k, n] view, contiguous."""
    return Access("full", access.sizes[::-1], access.strides[::-1], access.offset)
