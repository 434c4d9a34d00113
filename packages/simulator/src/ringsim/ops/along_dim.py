"""Kernels along one dim (sort, topk, kthvalue, median, mode, scans): independent rows, split across cores.

The operand is viewed as (R, K) with the op's dim made the last, contiguous one (a permuted copy when it is not
already), so each core sorts, selects or scans whole rows on its scratchpad; the results are permuted back. An
overload without a dim (``median()``) works on the flattened tensor as one row.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from ringsim.ops.calls import Signature
from ringsim.ops.elementwise import meta_outputs, scalar
from ringsim.ops.plan import OutputSpec, Plan, Values
from ringsim.ops.programs import Operand, Step, row_program
from ringsim.ops.registry import OpSpec
from ringsim.ops.rows import rows_getter
from ringsim.torchbridge import OpOverload, schema


def build(spec: OpSpec, op: OpOverload, sig: Signature, values: Values, key: Any) -> Plan:
    outs = meta_outputs(op, values)
    x = values[0]
    has_dim = "dim" in sig.index and x.dim() > 0
    d = values[sig.index["dim"]] % x.dim() if has_dim else None
    kept = [i for i in range(x.dim()) if i != d] if d is not None else []
    perm = [*kept, d] if d is not None else list(range(x.dim()))
    r = math.prod(x.shape[i] for i in kept)
    k = x.shape[d] if d is not None else x.numel()
    widths = [_width(o, x, d) for o in outs]
    shapes = tuple(tuple(o.shape) for o in outs)
    flat = tuple(
        OutputSpec(f"out{i}", (r, w) if w is not None else (r,), o.dtype)
        for i, (o, w) in enumerate(zip(outs, widths, strict=True))
    )
    finish = _finish(x, perm, r, widths, shapes)
    if r == 0 or k == 0 or any(o.numel() == 0 for o in outs):
        return _empty_plan(key, op, sig, values, flat, finish)
    attrs = {
        p.name: scalar(v) for p, v in zip(sig.params[1:], values[1:], strict=True) if v is not None or p.has_default
    }
    if "dim" in attrs:
        attrs["dim"] = -1
    if "keepdim" in attrs:
        attrs["keepdim"] = False
    operands = [Operand("x", x.dtype, (k,))]
    operands += [Operand(o.name, o.dtype, o.shape[1:], role="out") for o in flat]
    step = Step(sig.qualname, ("x",), tuple(o.name for o in flat), attrs)
    program = row_program(sig.qualname, r, operands, [step])
    return Plan(key, program, (("x", rows_getter(0, perm, r, k)),), flat, finish)


def _width(out: torch.Tensor, x: torch.Tensor, d: int | None) -> int | None:
    """The output's extent along the op's dim (None when the op reduces it away)."""
    if d is None or out.dim() != x.dim():
        return None if d is not None or out.dim() == 0 else out.numel()
    return out.shape[d]


def _finish(x: torch.Tensor, perm: list[int], r: int, widths: list[int | None], shapes: tuple[tuple[int, ...], ...]):
    inverse = [perm.index(i) for i in range(len(perm))]
    kept_shape = [x.shape[i] for i in perm[:-1]] if x.dim() else []

    def finish(values: Values, outs: list[torch.Tensor]) -> Any:
        results = []
        for out, width, shape in zip(outs, widths, shapes, strict=True):
            if width is not None and len(shape) == x.dim() and perm != sorted(perm):
                out = out.view([*kept_shape, width]).permute(inverse).contiguous()
            results.append(out.view(shape))
        return results[0] if len(results) == 1 else tuple(results)

    return finish


def _empty_plan(key: Any, op: OpOverload, sig: Signature, values: Values, flat: tuple[OutputSpec, ...], finish) -> Plan:
    """Nothing to sort or scan: the results have no elements. A value for each empty row (`median` over an empty
    dim) has none to give: CPU's refusal in its words (an IndexError naming the dim), else the device's own."""
    if all(math.prod(o.shape) == 0 for o in flat):
        return Plan(key, None, (), flat, finish)
    sig.invoke_on_cpu(op, values)
    raise NotImplementedError(f"ring: aten::{schema(op).name.removeprefix('aten::')} over an empty dim")
