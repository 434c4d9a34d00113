"""The general kernel: one core loads every operand whole, runs the op on its scratchpad and stores the results.

This is how the device runs ops with no profitable split (scatter, pooling, flip, isin, trace...): correct for any
argument layout because the tiles bind to the op's parameters by name (``tiles_as``), limited to what one core's
scratchpad holds, and refused with the device's one-line error beyond that.
"""

from __future__ import annotations

from typing import Any

import torch

from ringsim.ops.calls import Signature
from ringsim.ops.elementwise import meta_outputs, scalar
from ringsim.ops.plan import OutputSpec, Plan, Values, returns_all, returns_first
from ringsim.ops.programs import Operand, Step, row_program
from ringsim.ops.registry import DEVICE, OpSpec
from ringsim.torchbridge import OpOverload


def on_device(value: Any) -> bool:
    return isinstance(value, torch.Tensor) and value.device.type == DEVICE


def build(spec: OpSpec, op: OpOverload, sig: Signature, values: Values, key: Any) -> Plan:
    """One core, whole operands: the op itself is the one compute step."""
    outs = meta_outputs(op, values)
    return whole_plan(key, sig.qualname, sig, values, outs)


def whole_plan(key: Any, fn: str, sig: Signature, values: Values, outs: tuple[torch.Tensor, ...]) -> Plan:
    """The plan running `fn` (an overload with `sig`'s parameters) once on one core over whole operands."""
    out_specs = tuple(OutputSpec(f"out{i}", tuple(o.shape), o.dtype) for i, o in enumerate(outs))
    finish = returns_first if len(outs) == 1 else returns_all
    if all(o.numel() == 0 for o in outs):
        return Plan(key, None, (), out_specs, finish)
    operands, getters, names, attrs = [], [], [], {}
    for index, (param, value) in enumerate(zip(sig.params, values, strict=True)):
        if on_device(value) and value.numel():
            operands.append(Operand(param.name, value.dtype, tuple(value.shape), split=False))
            getters.append((param.name, _arg(index)))
            names.append(param.name)
        elif on_device(value):
            attrs[param.name] = torch.empty(tuple(value.shape), dtype=value.dtype)  # empty: no bytes to load
        elif value is not None or param.has_default:
            attrs[param.name] = scalar(value)
    operands += [Operand(o.name, o.dtype, o.shape, split=False, role="out") for o in out_specs if _nonempty(o)]
    written = tuple(o.name for o in out_specs if _nonempty(o))
    if len(written) != len(out_specs):
        raise NotImplementedError(f"{DEVICE}: aten::{fn} with an empty result beside a non-empty one")
    step = Step(fn, tuple(names), written, {**attrs, "tiles_as": names})
    return Plan(key, row_program(fn, 1, operands, [step]), tuple(getters), out_specs, finish)


def _nonempty(spec: OutputSpec) -> bool:
    return all(spec.shape) if spec.shape else True


def _arg(i: int):
    return lambda values: values[i]
