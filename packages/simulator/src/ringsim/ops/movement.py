"""Data-movement kernels: cat, index_select, gather. They move bytes; no arithmetic, so results are exact.

Compute instructions take their tiles positionally, so each op is expressed through an aten function whose tensor
arguments lead: cat as one ``slice_scatter`` per input into the output tile, index_select as ``embedding`` (a row
lookup), gather as ``take_along_dim``.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from ringsim.ops.calls import Signature
from ringsim.ops.elementwise import meta_outputs
from ringsim.ops.plan import OutputSpec, Plan, Values, returns_first
from ringsim.ops.programs import Operand, Step, row_program
from ringsim.ops.registry import OpSpec
from ringsim.torchbridge import OpOverload


def build_cat(spec: OpSpec, op: OpOverload, sig: Signature, values: Values, key: Any) -> Plan:
    out = meta_outputs(op, values)[0]
    tensors, dim = values[0], values[1]
    shape = tuple(out.shape)
    outputs = (OutputSpec("out", shape, out.dtype),)
    if out.numel() == 0:
        return Plan(key, None, (), outputs, returns_first)
    d = dim % out.dim()
    rows = math.prod(shape[:d])
    inner = math.prod(shape[d + 1 :])
    operands, steps, getters = [], [], []
    start = 0
    for i, t in enumerate(tensors):
        if t.numel() == 0:
            continue
        width = t.shape[d] * inner
        operands.append(Operand(f"in{i}", out.dtype, (width,)))
        getters.append((f"in{i}", _part(i, out.dtype, rows, width)))
        steps.append(
            Step("slice_scatter", ("out", f"in{i}"), ("out",), {"dim": 1, "start": start, "end": start + width})
        )
        start += width
    operands.append(Operand("out", out.dtype, (shape[d] * inner,), role="out"))
    program = row_program("cat", rows, operands, steps)
    return Plan(key, program, tuple(getters), (OutputSpec("out", (rows, shape[d] * inner), out.dtype),), _view(shape))


def keeping_memory_format(kernel):
    """`cat`'s kernel giving its result the memory format its inputs share, as CPU's cat does (channels_last in,
    channels_last out); the program itself writes a contiguous result, which one copy kernel then restrides."""

    def cat(tensors: list[torch.Tensor], dim: int = 0) -> torch.Tensor:
        result = kernel(tensors, dim)
        shared = {_memory_format(t) for t in tensors if t.numel()}
        if len(shared) != 1 or (memory_format := shared.pop()) is torch.contiguous_format:
            return result
        return result.contiguous(memory_format=memory_format)

    return cat


def _memory_format(t: torch.Tensor) -> torch.memory_format:
    """The memory format `t` is laid out in, as torch suggests it (contiguous when it is both)."""
    if t.is_contiguous():
        return torch.contiguous_format
    for memory_format, ndim in ((torch.channels_last, 4), (torch.channels_last_3d, 5)):
        if t.dim() == ndim and t.is_contiguous(memory_format=memory_format):
            return memory_format
    return torch.contiguous_format


def _part(i: int, dtype: torch.dtype, rows: int, width: int):
    def get(values: Values) -> torch.Tensor:
        t = values[0][i]
        return (t if t.dtype == dtype else t.to(dtype)).reshape(rows, width)

    return get


def _view(shape: tuple[int, ...]):
    return lambda values, outs: outs[0].view(shape)


def build_index_select(spec: OpSpec, op: OpOverload, sig: Signature, values: Values, key: Any) -> Plan:
    """Rows of the (dim-first) source looked up by index; index and output split across cores."""
    out = meta_outputs(op, values)[0]
    x, dim, index = values
    shape = tuple(out.shape)
    if out.numel() == 0:
        return Plan(key, None, (), (OutputSpec("out", shape, out.dtype),), returns_first)
    d = dim % x.dim() if x.dim() else 0
    perm = [d] + [i for i in range(x.dim()) if i != d]
    n = x.shape[d] if x.dim() else 1
    rest = x.numel() // max(n, 1)
    count = index.numel()
    operands = [
        Operand("x", x.dtype, (n, rest), split=False),
        Operand("index", index.dtype, ()),
        Operand("out", out.dtype, (rest,), role="out"),
    ]
    program = row_program("index_select", count, operands, [Step("embedding", ("x", "index"), ("out",))])
    permuted = [count] + [x.shape[i] for i in perm[1:]]
    inverse = [perm.index(i) for i in range(len(perm))]

    def source(values: Values) -> torch.Tensor:
        t = values[0]
        return (t.permute(perm).contiguous() if d else t).reshape(n, rest)

    def finish(values: Values, outs: list[torch.Tensor]) -> torch.Tensor:
        y = outs[0].view(permuted) if x.dim() else outs[0].view(shape)
        return y.permute(inverse).contiguous() if d else y.view(shape)

    getters = (("x", source), ("index", lambda values: values[2].reshape(count)))
    return Plan(key, program, getters, (OutputSpec("out", (count, rest), out.dtype),), finish)


def build_gather(spec: OpSpec, op: OpOverload, sig: Signature, values: Values, key: Any) -> Plan:
    """``take_along_dim`` on the source narrowed to the index's extent; split along dim 0 when dim is not 0."""
    out = meta_outputs(op, values)[0]
    x, dim, index = values[0], values[1], values[2]
    shape = tuple(out.shape)
    if out.numel() == 0:
        return Plan(key, None, (), (OutputSpec("out", shape, out.dtype),), returns_first)
    d = dim % x.dim() if x.dim() else 0
    narrowed = [index.shape[i] if i != d else x.shape[i] for i in range(x.dim())]
    split = x.dim() > 1 and d != 0
    rows = shape[0] if split else 1

    def row_shape(s: list[int] | tuple[int, ...]) -> tuple[int, ...]:
        return tuple(s[1:]) if split else tuple(s)

    operands = [
        Operand("x", x.dtype, row_shape(narrowed), split=split),
        Operand("index", index.dtype, row_shape(shape), split=split),
        Operand("out", out.dtype, row_shape(shape), split=split, role="out"),
    ]

    def source(values: Values) -> torch.Tensor:
        t = values[0]
        for i, size in enumerate(narrowed):
            if t.shape[i] != size:
                t = t.narrow(i, 0, size)
        return t if t.is_contiguous() else t.contiguous()

    getters = (("x", source), ("index", _long(2)))
    operands[1] = Operand("index", torch.int64, row_shape(shape), split=split)
    program = row_program("gather", rows, operands, [Step("take_along_dim", ("x", "index"), ("out",), {"dim": d})])
    return Plan(key, program, getters, (OutputSpec("out", shape, out.dtype),), returns_first)


def _long(i: int):
    """Index operands as int64 (int32 indices are widened by the copy kernel)."""
    return lambda values: values[i] if values[i].dtype == torch.int64 else values[i].long()
