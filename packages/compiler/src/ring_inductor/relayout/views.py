"""What every relayout scheme works from: a view's dims in device memory, and the checks and shares they share."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from ring_inductor.emit import CORES, MIN_BYTES_PER_CORE, STICK

#: Programs with more DMAs than this are not built: planning them would cost more than the copy they replace.
MAX_DMAS = 1 << 15
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
    dims: list[tuple[int, int]] = []
    for size, stride in zip(sizes, strides, strict=True):
        if size == 1:
            continue
        if dims and dims[-1][1] == stride * size:
            dims[-1] = (dims[-1][0] * size, stride)
        else:
            dims.append((size, stride))
    return tuple(dims)


def offsets(dims: Dims) -> list[int]:
    """The start of every element of `dims`, in row-major order."""
    offsets = [0]
    for size, stride in dims:
        offsets = [o + i * stride for o in offsets for i in range(size)]
    return offsets


def on_sticks(what: str, elements: int, itemsize: int) -> None:
    if elements * itemsize % STICK:
        raise NoFit(f"{what} ({elements * itemsize} bytes) is not whole sticks")


def core_shares(items: int, nbytes: int) -> list[range]:
    """The items each core takes, in order: as many cores as have MIN_BYTES_PER_CORE of `nbytes` each."""
    cores = max(1, min(CORES, items, nbytes // MIN_BYTES_PER_CORE))
    return [range(core * items // cores, (core + 1) * items // cores) for core in range(cores)]


def divisors(n: int) -> list[int]:
    small = [d for d in range(1, math.isqrt(n) + 1) if n % d == 0]
    return sorted({*small, *(n // d for d in small)})
