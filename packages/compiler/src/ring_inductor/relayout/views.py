"""What every relayout scheme works from: a view's dims in device memory."""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch

#: (size, stride) per dim, outermost first, in elements.
Dims = tuple[tuple[int, int], ...]


class NoFit(Exception):
    """A relayout scheme cannot serve this view; the message says why."""


@dataclass(frozen=True)
class Relayout:
    """A view's elements in device memory: its dims (size-1 dims dropped, dims that walk memory as one merged)."""

    dims: Dims
    dtype: torch.dtype

    @property
    def itemsize(self) -> int:
        return self.dtype.itemsize

    @property
    def numel(self) -> int:
        return math.prod(size for size, _ in self.dims)

    @property
    def span(self) -> int:
        """Elements from the view's first to its last, the source buffer's extent."""
        return 1 + sum((size - 1) * stride for size, stride in self.dims)


def normalized(sizes: tuple[int, ...], strides: tuple[int, ...]) -> Dims:
    """A view's (size, stride) dims, with the dims that do not change the walk through memory folded away."""
    dims: list[tuple[int, int]] = []
    for size, stride in zip(sizes, strides, strict=True):
        if size == 1:
            continue
        if dims and dims[-1][1] == stride * size:
            dims[-1] = (dims[-1][0] * size, stride)
        else:
            dims.append((size, stride))
    return tuple(dims)


def grid_offsets(sizes: Sequence[int], strides: Sequence[int], steps: Sequence[int] | None = None) -> list[int]:
    """The offset, by `strides`, of every index of a row-major grid of `sizes` (each dim walked in its `steps`)."""
    walks = [range(0, size, step) for size, step in zip(sizes, steps or [1] * len(sizes), strict=True)]
    return [sum(i * s for i, s in zip(index, strides, strict=True)) for index in itertools.product(*walks)]
