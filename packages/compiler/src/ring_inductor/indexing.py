"""How a kernel's loads and stores address memory: each index, affine in the loop variables, classified by shape.

A kernel iterates a 2-D space [rows, cols] (rows split across cores, cols whole per row). Each load/store index is
an affine function of the node's loop variables; its class says which tile it fills:

- full: contiguous over [rows, cols]            -> a split tile [chunk, cols]
- row: depends only on the row variables        -> a split tile [chunk, 1]
- col: depends only on the column variables     -> one whole tile [cols], broadcast over rows
- scalar: depends on no variable                -> one whole tile [1]
- gather: anything else affine                  -> materialized contiguous ([rows, cols]) before the launch
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import sympy

from ring_inductor.errors import UnsupportedError


@dataclass(frozen=True)
class LoopVar:
    """One loop variable of a node, and whether it runs along the kernel's rows or its columns."""

    symbol: sympy.Symbol
    size: int
    is_col: bool


@dataclass(frozen=True)
class Access:
    """A classified index: its kind and the strided view (sizes, strides, offset in elements) it reads or writes."""

    kind: str
    sizes: tuple[int, ...]
    strides: tuple[int, ...]
    offset: int


def _contiguous(sizes: list[int], base: int) -> list[int]:
    strides, step = [], base
    for size in reversed(sizes):
        strides.append(step)
        step *= size
    return strides[::-1]


def _affine(index: sympy.Expr, loop: list[LoopVar], live: list[LoopVar]) -> tuple[list[int], int]:
    """The coefficients of the `live` variables and the offset (every variable at 0) of an affine index."""
    index = sympy.expand(index)
    coeffs = []
    for var in live:
        c = sympy.diff(index, var.symbol)
        if not c.is_Integer:
            raise UnsupportedError(f"index {index} is not affine in the loop variables")
        coeffs.append(int(c))
    offset = index.subs({var.symbol: 0 for var in loop})
    if not offset.is_Integer:
        raise UnsupportedError(f"index {index} is not affine in the loop variables (or has symbolic sizes)")
    return coeffs, int(offset)


def classify(index: sympy.Expr, loop: list[LoopVar], rows: int, cols: int) -> Access:
    """The access `index` makes over `loop` in a [rows, cols] kernel (variables of size 1 ignored).

    Where the kernel has one row or one column, kinds that coincide there are merged (a scalar of a one-row kernel is
    its row; a row of a one-column kernel is full), so each value has one tile shape.
    """
    live = [var for var in loop if var.size > 1]
    coeffs, offset = _affine(index, loop, live)
    row_vars = [(v.size, c) for v, c in zip(live, coeffs, strict=True) if not v.is_col]
    col_vars = [(v.size, c) for v, c in zip(live, coeffs, strict=True) if v.is_col]
    row_sizes, row_strides = [s for s, _ in row_vars], [c for _, c in row_vars]
    col_sizes, col_strides = [s for s, _ in col_vars], [c for _, c in col_vars]
    cols_zero, rows_zero = not any(col_strides), not any(row_strides)
    cols_whole = col_strides == _contiguous(col_sizes, 1) and math.prod(col_sizes) == cols
    if cols_zero and rows_zero:
        kind = "scalar" if rows > 1 else "row"
    elif cols_zero and row_strides == _contiguous(row_sizes, 1):
        kind = "row"
    elif cols_whole and row_strides == _contiguous(row_sizes, cols):
        kind = "full"
    elif rows_zero and cols_whole:
        kind = "col" if rows > 1 else "full"
    else:
        kind = "gather"
    if kind == "row" and cols == 1:
        kind = "full"
    return Access(kind, tuple(row_sizes + col_sizes), tuple(row_strides + col_strides), offset)


def split_loop(sizes: list[int], cols: int, is_col: bool = False) -> tuple[list[sympy.Expr], list[LoopVar]] | None:
    """Loop variables for a node iterating `sizes` in a kernel whose rows have `cols` elements.

    Returns the expressions to call the node's body with and the kernel-space variables they use, or None when the
    sizes cannot be cut at a column boundary. A variable straddling the boundary becomes `m * row + col`.
    """
    exprs: list[sympy.Expr] = []
    loop: list[LoopVar] = []
    need = cols
    for n, size in reversed(list(enumerate(sizes))):
        sym = sympy.Symbol(f"{'r' if is_col else 'x'}{n}", integer=True, nonnegative=True)
        if is_col or need == 1:
            exprs.append(sym)
            loop.append(LoopVar(sym, size, is_col))
        elif size <= need and need % size == 0:
            need //= size
            exprs.append(sym)
            loop.append(LoopVar(sym, size, True))
        elif size % need == 0:
            outer, inner = sympy.Symbol(f"x{n}o", integer=True), sympy.Symbol(f"x{n}i", integer=True)
            exprs.append(need * outer + inner)
            loop += [LoopVar(inner, need, True), LoopVar(outer, size // need, False)]
            need = 1
        else:
            return None
    if need != 1:
        return None
    return exprs[::-1], loop[::-1]
