"""The access classifier, fuzzed: every kind it reports reads exactly the elements the strided index reads."""

from __future__ import annotations

import math
import random

import pytest
import sympy
import torch
from ring_inductor.indexing import LoopVar, classify, split_loop


def _view(base: torch.Tensor, sizes: list[int], strides: list[int], offset: int) -> torch.Tensor:
    return torch.as_strided(base, sizes, strides, offset)


def _layouts(rng: random.Random, row_sizes: list[int], col_sizes: list[int]) -> tuple[list[int], int, str]:
    """Strides for the loop (rows then cols) of one random layout, its offset and what it is."""
    sizes = row_sizes + col_sizes
    choice = rng.choice(["contiguous", "row", "col", "scalar", "permuted", "random"])
    offset = rng.randrange(0, 50)
    contiguous = [math.prod(sizes[i + 1 :]) for i in range(len(sizes))]
    if choice == "contiguous":
        return contiguous, offset, choice
    if choice == "row":
        return [math.prod(row_sizes[i + 1 :]) for i in range(len(row_sizes))] + [0] * len(col_sizes), offset, choice
    if choice == "col":
        return [0] * len(row_sizes) + [math.prod(col_sizes[i + 1 :]) for i in range(len(col_sizes))], offset, choice
    if choice == "scalar":
        return [0] * len(sizes), offset, choice
    if choice == "permuted":
        order = list(range(len(sizes)))
        rng.shuffle(order)
        strides = [0] * len(sizes)
        step = 1
        for i in reversed(order):
            strides[i] = step
            step *= sizes[i]
        return strides, offset, choice
    return [rng.randrange(0, 7) for _ in sizes], offset, choice


@pytest.mark.parametrize("seed", range(200))
def test_kind_matches_what_the_index_reads(seed: int) -> None:
    rng = random.Random(seed)
    row_sizes = [rng.choice([1, 2, 3, 4]) for _ in range(rng.randrange(0, 3))]
    col_sizes = [rng.choice([1, 2, 3, 5]) for _ in range(rng.randrange(0, 3))]
    rows, cols = math.prod(row_sizes), math.prod(col_sizes)
    symbols = [sympy.Symbol(f"v{i}", integer=True) for i in range(len(row_sizes) + len(col_sizes))]
    loop = [
        LoopVar(s, n, i >= len(row_sizes)) for i, (s, n) in enumerate(zip(symbols, row_sizes + col_sizes, strict=False))
    ]
    strides, offset, layout = _layouts(rng, row_sizes, col_sizes)
    index = sum((st * s for st, s in zip(strides, symbols, strict=False)), sympy.Integer(offset))
    access = classify(index, loop, rows, cols)
    base = torch.arange(4096, dtype=torch.float64)
    reads = _view(base, row_sizes + col_sizes, strides, offset).reshape(rows, cols)
    compact = {
        "full": lambda: base[offset : offset + rows * cols].view(rows, cols),
        "row": lambda: base[offset : offset + rows].view(rows, 1).expand(rows, cols),
        "col": lambda: base[offset : offset + cols].view(1, cols).expand(rows, cols),
        "scalar": lambda: base[offset].expand(rows, cols),
        "gather": lambda: _view(base, list(access.sizes), list(access.strides), access.offset).reshape(rows, cols),
    }[access.kind]()
    assert torch.equal(compact, reads), (layout, access)
    if layout in ("contiguous", "row", "col", "scalar") or rows * cols == 1:
        assert access.kind != "gather", (layout, access)


def test_split_loop_cuts_a_straddling_variable() -> None:
    exprs, loop = split_loop([6, 20], 10)
    assert [(v.size, v.is_col) for v in loop] == [(6, False), (2, False), (10, True)]
    assert str(exprs[1]).replace(" ", "") in ("10*x1o+x1i", "x1i+10*x1o")
    assert split_loop([7], 3) is None


def test_non_affine_index_is_refused() -> None:
    x = sympy.Symbol("x", integer=True)
    with pytest.raises(NotImplementedError, match="not affine"):
        classify(x * x, [LoopVar(x, 4, False)], 4, 1)
