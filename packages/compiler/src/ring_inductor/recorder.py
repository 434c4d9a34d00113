"""An Inductor ops handler that records a node's loop body as ring compute steps instead of printing code.

Each value is a `graph.Value` (a tile); `load`/`store` classify their index (`indexing.classify`), arithmetic
becomes one `compute` step on aten ops, reductions reduce the last (column) dimension of a full tile.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import sympy
import torch

from ring_inductor.errors import UnsupportedError
from ring_inductor.graph import KernelGraph, Operand, Value, broadcast_kind
from ring_inductor.indexing import Access, LoopVar, classify, split_loop
from ring_inductor.torchprivate import V, node_loop_body

#: Inductor ops that are one aten elementwise op of the same arity.
ELEMENTWISE: dict[str, str] = {
    **{name: name for name in ("exp", "log", "sqrt", "rsqrt", "tanh", "sigmoid", "neg", "reciprocal", "abs", "sin")},
    **{name: name for name in ("cos", "erf", "relu", "floor", "ceil", "log1p", "expm1", "sign", "isnan", "exp2")},
    **{name: name for name in ("add", "sub", "mul", "maximum", "minimum", "pow", "eq", "ne", "lt", "le", "gt", "ge")},
    **{name: name for name in ("logical_and", "logical_or", "logical_not", "bitwise_and", "bitwise_or", "atan2")},
    **{name: name for name in ("acos", "acosh", "asin", "asinh", "atan", "atanh", "cosh", "sinh", "tan", "log2")},
    **{name: name for name in ("log10", "lgamma", "digamma", "erfinv", "igamma", "igammac", "round", "copysign")},
    **{name: name for name in ("fmod", "remainder", "hypot", "ldexp", "isinf", "signbit", "logical_xor")},
    **{name: name for name in ("bitwise_not", "bitwise_xor", "bitwise_left_shift", "bitwise_right_shift")},
    "truediv": "div",
    "div_rn": "div",  # true division, rounded to nearest
    "mod": "fmod",  # C's %, the sign of the dividend
    "erfc": "special_erfc",
    "trunc": "trunc",
}
#: Inductor ops that are one aten op with fixed attributes.
WITH_ATTRS: dict[str, tuple[str, dict[str, Any]]] = {
    "floordiv": ("div", {"rounding_mode": "floor"}),
    "truncdiv": ("div", {"rounding_mode": "trunc"}),
}
_NARROW = (torch.float16, torch.bfloat16)
_COMPARISONS = frozenset(
    {"eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or", "logical_not", "logical_xor"}
    | {"isnan", "isinf", "signbit"}
)
#: Inductor reduction types and the aten reduction over the last dim that computes them.
REDUCTIONS: dict[str, str] = {"sum": "sum", "max": "amax", "min": "amin", "prod": "prod", "any": "amax"}


def _compute_dtype(values: list[Value]) -> torch.dtype:
    """Intermediates of floating inputs stay float32 (the device computes in float32, rounding once at the store)."""
    dtypes = [v.dtype for v in values]
    if any(d.is_floating_point for d in dtypes):
        return torch.float32
    out = dtypes[0]
    for d in dtypes[1:]:
        out = torch.promote_types(out, d)
    return out


class Recorder:
    """The ops handler for one node of a kernel (`V.set_ops_handler(Recorder(...))`, then call its loop body)."""

    def __init__(self, graph: KernelGraph, loop: list[LoopVar], buffer_dtype: Callable[[str], torch.dtype]) -> None:
        self.graph = graph
        self.loop = loop
        self.buffer_dtype = buffer_dtype

    def _step(self, fn: str, inputs: list[Value], dtype: torch.dtype | None = None, **attrs: Any) -> Value:
        if fn != "cast" and torch.float64 in {v.dtype for v in inputs}:
            raise UnsupportedError(f"{fn} in float64 (the device only holds float64; it computes in 16/32-bit floats)")
        kind = broadcast_kind([v.kind for v in inputs])
        value = Value(kind, dtype or _compute_dtype(inputs), fn, tuple(inputs), attrs)
        self.graph.steps.append(value)
        return value

    def _operand(self, buffer: str, access: Access, is_output: bool) -> Operand:
        if is_output and access.kind not in ("full", "row"):
            access = Access("scatter", access.sizes, access.strides, access.offset)
        for op in self.graph.operands:
            if (op.buffer, op.access, op.is_output) == (buffer, access, is_output):
                return op
        name = f"{'out' if is_output else 'in'}{len(self.graph.operands)}"
        operand = Operand(name, buffer, self.buffer_dtype(buffer), access, is_output)
        self.graph.operands.append(operand)
        return operand

    # -- memory ---------------------------------------------------------------------------------------------------
    def load(self, name: str, index: sympy.Expr) -> Value:
        access = classify(index, self.loop, self.graph.rows, self.graph.cols)
        kind = "full" if access.kind == "gather" else access.kind
        earlier = _stored_in(self.graph, name, access.kind, access.offset)
        if earlier is not None:  # written by this kernel: read the tile, device memory is not yet visible
            return earlier
        if any(operand.buffer == name for operand, _ in self.graph.stores):
            raise UnsupportedError(f"{name} is read by the kernel that writes it, through a different index")
        operand = self._operand(name, access, is_output=False)
        return Value(kind, operand.dtype, operand=operand)

    def store(self, name: str, index: sympy.Expr, value: Value, mode: Any = None) -> None:
        if mode is not None:
            raise UnsupportedError(f"store mode {mode!r} into {name}")
        operand = self._operand(name, classify(index, self.loop, self.graph.rows, self.graph.cols), is_output=True)
        want = "row" if operand.access.kind == "row" else "full"
        one_column_row = want == "full" and self.graph.cols == 1 and value.kind == "row"  # one element a row already
        if value.kind != want and not one_column_row:
            if want != "full":
                raise UnsupportedError(f"a {value.kind} value stored as {want} into {name} (broadcasting store)")
            value = self._broadcast_full(value)
        if value.dtype != operand.dtype:
            value = self._step("cast", [value], operand.dtype)
        self.graph.stores.append((operand, value))

    def _broadcast_full(self, value: Value) -> Value:
        """A scalar, row or column value stored into every element (full, fill_, expand): a constant becomes a full
        tile of its fill value; anything else is added to a zero (False) full tile, which broadcasts it."""
        if value.kind == "scalar" and value.fn == "full" and not value.inputs:
            step = Value("full", value.dtype, "full", (), dict(value.attrs), sized=True)
            self.graph.steps.append(step)
            return step
        zero = False if value.dtype == torch.bool else 0
        base = Value("full", value.dtype, "full", (), {"fill_value": zero, "dtype": value.dtype}, sized=True)
        self.graph.steps.append(base)
        return self._step("logical_or" if value.dtype == torch.bool else "add", [base, value], value.dtype)

    def store_reduction(self, name: str, index: sympy.Expr, value: Value) -> None:
        self.store(name, index, value)

    # -- values ---------------------------------------------------------------------------------------------------
    def constant(self, value: Any, dtype: torch.dtype) -> Value:
        fill = float(value) if dtype.is_floating_point else (bool(value) if dtype == torch.bool else int(value))
        tile = torch.float32 if dtype.is_floating_point else dtype
        step = Value("scalar", tile, "full", (), {"fill_value": fill, "dtype": tile}, sized=True)
        self.graph.steps.append(step)
        return step

    def index_expr(self, expr: sympy.Expr, dtype: torch.dtype) -> Value:
        """An affine index as values: each loop variable is recovered from the kernel's row or column index."""
        access = classify(sympy.sympify(expr), self.loop, self.graph.rows, self.graph.cols)
        live = [var for var in self.loop if var.size > 1]
        order = [v for v in live if not v.is_col] + [v for v in live if v.is_col]
        value = self.constant(access.offset, torch.int64)
        for var, stride in zip(order, access.strides, strict=True):
            if stride:
                term = self._step("mul", [self._loop_index(var, order), self.constant(stride, torch.int64)])
                value = self._step("add", [value, term])
        return self.to_dtype(value, dtype)

    def _loop_index(self, var: LoopVar, order: list[LoopVar]) -> Value:
        """`var`'s value at each element: (row or column index // inner sizes) % its size."""
        same = [v for v in order if v.is_col == var.is_col]
        inner = math.prod(v.size for v in same[same.index(var) + 1 :])
        extent = self.graph.cols if var.is_col else self.graph.rows
        index = Value("col" if var.is_col else "row", torch.int64, "arange", (), _iota(var.is_col, extent))
        self.graph.steps.append(index)
        if inner > 1:
            index = self._step("div", [index, self.constant(inner, torch.int64)], rounding_mode="floor")
        if var.size * inner < extent:
            index = self._step("remainder", [index, self.constant(var.size, torch.int64)])
        return index

    def to_dtype(self, x: Value, dtype: torch.dtype, src_dtype: Any = None, use_compute_types: bool = True) -> Value:
        if x.dtype == dtype or (x.dtype in _NARROW and dtype == torch.float32):
            return x  # the device widens float16/bfloat16 tiles to float32 for every compute anyway
        return self._step("cast", [x], dtype)

    def where(self, cond: Value, a: Value, b: Value) -> Value:
        return self._step("where", [cond, a, b], _compute_dtype([a, b]))

    def square(self, x: Value) -> Value:
        return self._step("mul", [x, x])

    def identity(self, x: Value) -> Value:
        return x

    def reduction(self, dtype: torch.dtype, src_dtype: torch.dtype, reduction_type: str, value: Value) -> Any:
        if value.kind != "full":  # a broadcast value (an expanded scalar, row or column) is reduced as every element
            value = self._broadcast_full(value)
        if reduction_type == "welford_reduce":
            mean = self._reduce("mean", value)
            centered = self._step("sub", [value, mean])
            m2 = self._reduce("sum", self._step("mul", [centered, centered]))
            weight = Value("row", torch.float32, "full", (), {"fill_value": float(self.graph.cols)}, sized=True)
            self.graph.steps.append(weight)
            return mean, m2, weight
        if reduction_type in ("argmax", "argmin"):
            return self._reduce(reduction_type, value, torch.int64)
        if reduction_type not in REDUCTIONS:
            raise UnsupportedError(f"reduction {reduction_type}")
        out = dtype if not dtype.is_floating_point else torch.float32
        return self._reduce(REDUCTIONS[reduction_type], value, out)

    def _reduce(self, fn: str, value: Value, dtype: torch.dtype = torch.float32) -> Value:
        step = Value("row", dtype, fn, (value,), {"dim": [-1], "keepdim": True})
        self.graph.steps.append(step)
        return step

    def __getattr__(self, name: str) -> Callable[..., Value]:
        if name.startswith("_") or (name not in ELEMENTWISE and name not in WITH_ATTRS):
            raise UnsupportedError(f"op {name}")
        fn, attrs = WITH_ATTRS.get(name) or (ELEMENTWISE[name], {})

        def op(*args: Value) -> Value:
            if not all(isinstance(a, Value) for a in args):
                raise UnsupportedError(f"op {name} with non-tensor arguments")
            return self._step(fn, list(args), torch.bool if name in _COMPARISONS else None, **attrs)

        return op


def _stored_in(graph: KernelGraph, buffer: str, kind: str, offset: int) -> Value | None:
    """The value this kernel already stored to the same elements of `buffer` (a full or row tile)."""
    for operand, value in graph.stores:
        if (operand.buffer, operand.access.kind, operand.access.offset) == (buffer, kind, offset):
            return value
    return None


def _iota(is_col: bool, cols: int) -> dict[str, Any]:
    """arange attrs of a column index (0..cols) or of a chunk's row indices (evaluated per chunk at emission)."""
    if is_col:
        return {"start": 0, "end": cols}
    return {"start": lambda row, size: row, "end": lambda row, size: row + size}


def _sizes(sizes: list[Any]) -> list[int]:
    try:
        return [int(s) for s in sizes]
    except TypeError:
        raise UnsupportedError(f"symbolic sizes {list(sizes)} (compile with dynamic=False)") from None


def kernel_space(nodes: list[Any]) -> tuple[int, int]:
    """The [rows, cols] a group of scheduler nodes iterates: a reduction's (outputs, reduced) or pointwise rows."""
    for node in nodes:
        psizes, rsizes = (_sizes(s) for s in node_loop_body(node)[1])
        if rsizes:
            return math.prod(psizes), math.prod(rsizes)
    psizes = _sizes(node_loop_body(nodes[0])[1][0])
    cols = psizes[-1] if len(psizes) > 1 else 1
    return math.prod(psizes) // cols, cols


def record_kernel(nodes: list[Any], space: tuple[int, int] | None = None) -> KernelGraph:
    """Interpret the loop bodies of `nodes` (one fused group) into one kernel's DAG, or raise UnsupportedError;
    `space` imposes the [rows, cols] to iterate (a matmul epilogue's: the product's)."""
    rows, cols = space or kernel_space(nodes)
    graph = KernelGraph(rows, cols)
    for node in nodes:
        body, (psizes, rsizes) = node_loop_body(node)
        psizes, rsizes = _sizes(psizes), _sizes(rsizes)
        if rsizes and (math.prod(psizes), math.prod(rsizes)) != (rows, cols):
            raise UnsupportedError("reductions of different shapes in one kernel")
        epilogue = not rsizes and math.prod(psizes) == rows  # a pointwise node over the reduced rows
        pointwise = split_loop(psizes, 1 if rsizes or epilogue else cols)
        reduced = split_loop(rsizes, 1, is_col=True)
        covered = math.prod(psizes) * math.prod(rsizes) in (rows * cols, rows if epilogue else -1)
        if pointwise is None or reduced is None or not covered:
            raise UnsupportedError(f"loop sizes {psizes}, {rsizes} do not tile a [{rows}, {cols}] kernel")
        recorder = Recorder(graph, pointwise[1] + reduced[1], V.graph.get_dtype)
        with V.set_ops_handler(recorder):
            body(pointwise[0], reduced[0])
        graph.origins += [str(o.target) for o in node.node.get_origins() if o.op == "call_function"]
    if not graph.stores:
        raise UnsupportedError("a kernel that stores nothing")
    return graph
