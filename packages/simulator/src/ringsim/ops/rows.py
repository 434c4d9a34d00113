"""Row-wise kernels (reductions, softmax, layer norm): the reduced dims are made the last, contiguous ones.

The operand is viewed as (R, K): R independent rows split across cores, K reduced elements per row kept whole in
one tile, so a row's fp32 accumulation happens on one core. If the reduced dims are not already the innermost,
the copy kernel first makes a permuted contiguous copy. A reduction whose row overflows a scratchpad, or whose few
long rows would leave cores idle, splits K across the cores instead (``split_reduction``).
"""

from __future__ import annotations

import math
from typing import Any

import torch

from ringsim.ops.calls import Signature
from ringsim.ops.elementwise import meta_outputs, scalar
from ringsim.ops.plan import OutputSpec, Plan, Values, returns_all, returns_first
from ringsim.ops.programs import MIN_BYTES_PER_CORE, Operand, Step, TooLargeError, row_program, row_split
from ringsim.ops.registry import OpSpec
from ringsim.ops.split_reduction import REDUCTIONS, split_cores, split_program
from ringsim.torchbridge import OpOverload, schema

# Overloads without a dim argument reduce everything through the overload that has one.
_WITH_DIM = {"prod": "prod.dim_int", "max": "amax", "min": "amin", "all": "all.dims", "any": "any.dims"}
# CPU's reductions keep the reduced dims in a 64-bit mask, so a dim argument needs at most 64 dims.
_MAX_DIMS = 64
# Reductions for which CPU reads ``dim=[]`` as no dims (each element its own row), not as every dim.
_EMPTY_DIMS_REDUCE_NOTHING = frozenset({"all", "any"})


def _dims(value: Any, ndim: int) -> list[int]:
    if value is None or value == []:
        return list(range(ndim))
    dims = [value] if isinstance(value, int) else list(value)
    return sorted({d % ndim for d in dims}) if ndim else []


def rows_view(x: torch.Tensor, dims: list[int]) -> tuple[list[int], int, int]:
    """The permutation putting `dims` last, and the resulting (R, K)."""
    kept = [d for d in range(x.dim()) if d not in dims]
    r = math.prod(x.shape[d] for d in kept)
    k = math.prod(x.shape[d] for d in dims)
    return kept + dims, r, k


def rows_getter(index: int, perm: list[int], r: int, k: int):
    if perm == sorted(perm):
        return lambda values: values[index].reshape(r, k)
    return lambda values: values[index].permute(perm).contiguous().reshape(r, k)


def build_reduction(spec: OpSpec, op: OpOverload, sig: Signature, values: Values, key: Any) -> Plan:
    x = values[0]
    dim = values[sig.index["dim"]] if "dim" in sig.index else None
    if dim not in (None, []) and x.dim() > _MAX_DIMS:
        raise RuntimeError(f"only tensors with up to {_MAX_DIMS} dims are supported")
    empty_is_none = dim == [] and spec.aten in _EMPTY_DIMS_REDUCE_NOTHING
    dims = [] if empty_is_none else _dims(dim, x.dim())
    perm, r, k = rows_view(x, dims)
    keepdim = bool(values[sig.index["keepdim"]]) if "keepdim" in sig.index else False
    outs = [_one_per_row(o, x, dims, keepdim, r) for o in meta_outputs(op, values)]
    out_specs = tuple(OutputSpec(f"out{i}", tuple(o.shape), o.dtype) for i, o in enumerate(outs))
    finish = returns_first if len(outs) == 1 else returns_all
    finish_shaped = _reshaped(tuple(tuple(o.shape) for o in outs), finish)
    if r == 0 or any(o.numel() == 0 for o in outs):
        return Plan(key, None, (), out_specs, finish_shaped)
    if k == 0:
        return _constant_plan(key, op, values, out_specs, finish_shaped)
    fn = sig.qualname if "dim" in sig.index else _WITH_DIM[spec.aten]
    dim_param = Signature.of(_resolve(fn)).params
    attrs = {p.name: scalar(values[sig.index[p.name]]) for p in sig.params[1:] if p.name in {q.name for q in dim_param}}
    for p in dim_param:
        if p.name == "dim":
            attrs["dim"] = [-1] if "List" in str(_type(fn, "dim")) else -1
        if p.name == "keepdim":
            attrs["keepdim"] = False
    operands = [Operand("x", x.dtype, (k,))]
    operands += [Operand(o.name, o.dtype, (), role="out") for o in out_specs]
    if fn in REDUCTIONS and _splits_k(fn, r, k, x.dtype, operands):
        program = split_program(fn, REDUCTIONS[fn], x.dtype, r, k, [(o.name, o.dtype) for o in out_specs])
    else:
        program = row_program(fn, r, operands, [Step(fn, ("x",), tuple(o.name for o in out_specs), attrs)])
    flat = tuple(OutputSpec(o.name, (r,), o.dtype) for o in out_specs)
    return Plan(key, program, (("x", rows_getter(0, perm, r, k)),), flat, finish_shaped)


def _one_per_row(meta: torch.Tensor, x: torch.Tensor, dims: list[int], keepdim: bool, rows: int) -> torch.Tensor:
    """`meta`, or where torch's meta function disagrees with the reduction CPU runs (``nansum`` keeps every dim for
    ``dim=[]``, while CPU reduces them all) one result per row, shaped as CPU shapes it."""
    if meta.numel() == rows:
        return meta
    shape = [1 if d in dims else n for d, n in enumerate(x.shape) if keepdim or d not in dims]
    return meta.new_empty(shape)


def _splits_k(fn: str, rows: int, k: int, dtype: torch.dtype, operands: list[Operand]) -> bool:
    """Split K when a row does not fit the row kernel, or when rows worth a core each (MIN_BYTES_PER_CORE) are too
    few to occupy the cores the split would: shorter rows on fewer cores already keep device memory busy."""
    cores = split_cores(rows, k, dtype)
    try:
        row_cores = row_split(fn, rows, operands).cores
    except TooLargeError:
        if not cores:
            raise
        return True
    return k * dtype.itemsize >= MIN_BYTES_PER_CORE and cores > row_cores


def _resolve(fn: str) -> OpOverload:
    base, _, overload = fn.partition(".")
    return getattr(getattr(torch.ops.aten, base), overload or "default")


def _type(fn: str, name: str) -> Any:
    return next(a.type for a in schema(_resolve(fn)).arguments if a.name == name)


def _reshaped(shapes: tuple[tuple[int, ...], ...], finish):
    def reshape(values: Values, outs: list[torch.Tensor]) -> Any:
        return finish(values, [o.view(shape) for o, shape in zip(outs, shapes, strict=True)])

    return reshape


def _constant_plan(key, op, values: Values, out_specs, finish) -> Plan:
    """A reduction over zero elements: its result depends on the shapes only (0 for sum, 1 for prod, nan for mean)."""
    empty = [torch.empty(v.shape, dtype=v.dtype) if isinstance(v, torch.Tensor) and v.dim() else v for v in values]
    result = Signature.of(op).invoke(op, empty)
    constants = [result] if isinstance(result, torch.Tensor) else list(result)
    operands = [Operand(o.name, o.dtype, (), role="out") for o in out_specs]
    steps = [
        Step("fill.Scalar", (o.name,), (o.name,), {"value": c.reshape(-1)[0].item()})
        for o, c in zip(out_specs, constants, strict=True)
    ]
    rows = math.prod(out_specs[0].shape)
    flat = tuple(OutputSpec(o.name, (rows,), o.dtype) for o in out_specs)
    return Plan(key, row_program("fill", rows, operands, steps), (), flat, finish)


def build_softmax(spec: OpSpec, op: OpOverload, sig: Signature, values: Values, key: Any) -> Plan:
    """``_softmax``/``_log_softmax`` over one dim: one fused instruction per row block (max, sub, exp, sum, div)."""
    out = meta_outputs(op, values)[0]
    x, dim, half_to_float = values
    dims = _dims(dim, x.dim())
    perm, r, k = rows_view(x, dims)
    shape = tuple(out.shape)
    if out.numel() == 0:
        return Plan(key, None, (), (OutputSpec("out", shape, out.dtype),), returns_first)
    operands = [Operand("x", x.dtype, (k,)), Operand("out", out.dtype, (k,), role="out")]
    step = Step(sig.qualname, ("x",), ("out",), {"dim": -1, "half_to_float": half_to_float})
    program = row_program(sig.qualname, r, operands, [step])
    permuted = [x.shape[d] for d in perm] if x.dim() else []
    inverse = [perm.index(d) for d in range(len(perm))]

    def finish(values: Values, outs: list[torch.Tensor]) -> torch.Tensor:
        y = outs[0].view(permuted)
        return y if perm == sorted(perm) else y.permute(inverse).contiguous()

    return Plan(key, program, (("x", rows_getter(0, perm, r, k)),), (OutputSpec("out", (r, k), out.dtype),), finish)


def build_layer_norm(spec: OpSpec, op: OpOverload, sig: Signature, values: Values, key: Any) -> Plan:
    """``native_layer_norm`` as the device decomposes it: mean, variance, rsqrt, then scale and shift per row."""
    out, mean, rstd = meta_outputs(op, values)
    x, normalized_shape, weight, bias, eps = values
    n = len(normalized_shape)
    dims = list(range(x.dim() - n, x.dim()))
    _, r, k = rows_view(x, dims)
    specs = (
        OutputSpec("out", tuple(out.shape), out.dtype),
        OutputSpec("mean", tuple(mean.shape), mean.dtype),
        OutputSpec("rstd", tuple(rstd.shape), rstd.dtype),
    )
    if r == 0 or k == 0:
        return Plan(key, None, (), specs, returns_all)
    f32 = torch.float32
    operands = [
        Operand("x", x.dtype, (k,)),
        Operand("mean", mean.dtype, (1,), role="out"),
        Operand("rstd", rstd.dtype, (1,), role="out"),
        Operand("out", out.dtype, (k,), role="out"),
        Operand("m", f32, (1,), role="temp"),
        Operand("v", f32, (1,), role="temp"),
        Operand("s", f32, (1,), role="temp"),
        Operand("y", f32, (k,), role="temp"),
    ]
    steps = [
        Step("mean.dim", ("x",), ("m",), {"dim": [-1], "keepdim": True}),
        Step("var.correction", ("x",), ("v",), {"dim": [-1], "correction": 0, "keepdim": True}),
        Step("add.Scalar", ("v",), ("v",), {"other": eps}),
        Step("rsqrt", ("v",), ("s",)),
        Step("copy", ("m",), ("mean",)),
        Step("copy", ("s",), ("rstd",)),
        Step("sub.Tensor", ("x", "m"), ("y",)),
    ]
    getters = [("x", rows_getter(0, list(range(x.dim())), r, k))]
    for index, name, t in ((2, "w", weight), (3, "b", bias)):
        if t is not None:
            operands.append(Operand(name, t.dtype, (k,), split=False))
            getters.append((name, _flat(index, k)))
    steps.append(Step("mul.Tensor", ("y", "s"), ("out" if weight is None and bias is None else "y",)))
    if weight is not None:
        steps.append(Step("mul.Tensor", ("y", "w"), ("out" if bias is None else "y",)))
    if bias is not None:
        steps.append(Step("add.Tensor", ("y", "b"), ("out",)))
    program = row_program("native_layer_norm", r, operands, steps)
    flat = (
        OutputSpec("out", (r, k), out.dtype),
        OutputSpec("mean", (r, 1), mean.dtype),
        OutputSpec("rstd", (r, 1), rstd.dtype),
    )
    shapes = tuple(s.shape for s in specs)
    return Plan(key, program, tuple(getters), flat, _reshaped(shapes, returns_all))


def _flat(index: int, k: int):
    return lambda values: values[index].reshape(k)
